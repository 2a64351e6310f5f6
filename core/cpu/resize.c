/*
 * resize.c -- 2-d resizing of N x C x H x W tensors on the CPU (the
 * kernels of F.interpolate): nearest and bilinear, forward and backward.
 *
 * The coordinate rules are PyTorch's, written once in core/resize_math.h.
 * `omp parallel for` runs over the N*C planes: a plane's output reads only
 * its input plane, and backward scatters only into its own dx plane, so no
 * two threads write one element.  The row taps are computed once per output
 * row and the column taps per element (a few flops beside the loads).
 * Backward zeroes dx, then adds each dy element into its source taps
 * (nearest: one, bilinear: four), in double for float64, float for float32.
 */
#include <assert.h>
#include <string.h>

#include "cpu/kernels.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* one plane, nearest */
ALWAYS_INLINE void nearest_plane(int f64, int bwd, const cnn_resize_shape *s, const void *in,
                                 void *out, int64_t p) {
  int64_t ib = p * s->H * s->W, ob = p * s->OH * s->OW;
  for (int64_t oh = 0; oh < s->OH; oh++) {
    int64_t h = cnn_resize_nearest(oh, s->H, s->OH, s->scale_h);
    for (int64_t ow = 0; ow < s->OW; ow++) {
      int64_t w = cnn_resize_nearest(ow, s->W, s->OW, s->scale_w), src = ib + h * s->W + w;
      int64_t dst = ob + oh * s->OW + ow;
      if (bwd) /* in = dy, out = dx */
        cnn_cpu_st(out, src, cnn_cpu_ld(out, src, f64) + cnn_cpu_ld(in, dst, f64), f64);
      else
        cnn_cpu_st(out, dst, cnn_cpu_ld(in, src, f64), f64);
    }
  }
}

/* one plane, bilinear */
ALWAYS_INLINE void bilinear_plane(int f64, int bwd, const cnn_resize_shape *s, const void *in,
                                  void *out, int64_t p) {
  int64_t ib = p * s->H * s->W, ob = p * s->OH * s->OW, W = s->W;
  for (int64_t oh = 0; oh < s->OH; oh++) {
    cnn_resize_taps th = cnn_resize_linear(oh, s->H, s->OH, s->align_corners, s->scale_h);
    int64_t r0 = ib + th.i0 * W, r1 = ib + th.i1 * W;
    for (int64_t ow = 0; ow < s->OW; ow++) {
      cnn_resize_taps tw = cnn_resize_linear(ow, W, s->OW, s->align_corners, s->scale_w);
      int64_t dst = ob + oh * s->OW + ow;
      if (bwd) {
        double g = cnn_cpu_ld(in, dst, f64);
        int64_t at[4] = {r0 + tw.i0, r0 + tw.i1, r1 + tw.i0, r1 + tw.i1};
        double wt[4] = {th.w0 * tw.w0, th.w0 * tw.w1, th.w1 * tw.w0, th.w1 * tw.w1};
        for (int k = 0; k < 4; k++)
          cnn_cpu_st(out, at[k], cnn_cpu_ld(out, at[k], f64) + g * wt[k], f64);
      } else {
        double top =
            tw.w0 * cnn_cpu_ld(in, r0 + tw.i0, f64) + tw.w1 * cnn_cpu_ld(in, r0 + tw.i1, f64);
        double bot =
            tw.w0 * cnn_cpu_ld(in, r1 + tw.i0, f64) + tw.w1 * cnn_cpu_ld(in, r1 + tw.i1, f64);
        cnn_cpu_st(out, dst, th.w0 * top + th.w1 * bot, f64);
      }
    }
  }
}

ALWAYS_INLINE void plane(int f64, int bwd, const cnn_resize_shape *s, const void *in, void *out,
                         int64_t p) {
  if (s->mode == CNN_RESIZE_BILINEAR)
    bilinear_plane(f64, bwd, s, in, out, p);
  else
    nearest_plane(f64, bwd, s, in, out, p);
}

/* The invariants (core/ops/nn_resize.c validates; only inside assert()). */
static bool shape_valid(cnn_dtype dt, const cnn_resize_shape *s) {
  return cnn_cpu_float_sizes_valid(dt, s->N, s->C, s->H * s->W) &&
         (s->mode == CNN_RESIZE_NEAREST || s->mode == CNN_RESIZE_BILINEAR) && s->OH >= 0 &&
         s->OW >= 0 && !((s->H < 1 || s->W < 1) && s->OH * s->OW > 0);
}

static void run(int bwd, cnn_dtype dt, const cnn_resize_shape *s, const void *in, void *out) {
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < s->N * s->C; p++) {
    if (dt == CNN_FLOAT64)
      plane(1, bwd, s, in, out, p);
    else
      plane(0, bwd, s, in, out, p);
  }
}

int cnn_cpu_resize2d_forward(cnn_dtype dt, const cnn_resize_shape *s, const void *x, void *y) {
  assert(shape_valid(dt, s));
  run(0, dt, s, x, y);
  return 0;
}

int cnn_cpu_resize2d_backward(cnn_dtype dt, const cnn_resize_shape *s, const void *dy, void *dx) {
  assert(shape_valid(dt, s));
  memset(dx, 0, (size_t)(s->N * s->C * s->H * s->W) * cnn_dtype_size(dt));
  run(1, dt, s, dy, dx);
  return 0;
}
