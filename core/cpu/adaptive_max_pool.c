/*
 * adaptive_max_pool.c -- adaptive max pooling of N x C x H x W tensors on
 * the CPU, forward (values and argmax indices) and backward.
 *
 * Output (oh, ow) takes the maximum over PyTorch's bin rows
 * [floor(oh*H/OH), ceil((oh+1)*H/OH)) and the columns likewise
 * (core/resize_math.h); bins overlap when the size does not divide.  The
 * first maximum wins; a NaN wins and is kept (PyTorch's rule), so the
 * result is NaN once the bin holds one.  Indices are the flat h*W+w of the
 * argmax within the plane, as max_pool2d's.  `omp parallel for` over the
 * N*C planes; backward zeroes dx and adds dy at the indices, plane by plane.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "cpu/kernels.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE void bin_max(int f64, const void *xp, int64_t H, int64_t W, int64_t OH, int64_t OW,
                           int64_t oh, int64_t ow, double *best, int64_t *arg) {
  int64_t h0 = cnn_adaptive_start(oh, H, OH), h1 = cnn_adaptive_end(oh, H, OH);
  int64_t w0 = cnn_adaptive_start(ow, W, OW), w1 = cnn_adaptive_end(ow, W, OW);
  *best = -INFINITY, *arg = h0 * W + w0;
  for (int64_t h = h0; h < h1; h++)
    for (int64_t w = w0; w < w1; w++) {
      double v = cnn_cpu_ld(xp, h * W + w, f64);
      if (v > *best || isnan(v)) {
        *best = v, *arg = h * W + w;
        if (isnan(v)) return;
      }
    }
}

ALWAYS_INLINE void forward_plane(int f64, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                 const void *x, void *y, int64_t *indices, int64_t p) {
  const char *xp = (const char *)x + p * H * W * (f64 ? 8 : 4);
  for (int64_t oh = 0; oh < OH; oh++)
    for (int64_t ow = 0; ow < OW; ow++) {
      double best;
      int64_t arg, o = p * OH * OW + oh * OW + ow;
      bin_max(f64, xp, H, W, OH, OW, oh, ow, &best, &arg);
      cnn_cpu_st(y, o, best, f64);
      if (indices) indices[o] = arg;
    }
}

/* The invariants (core/ops/nn_resize.c validates; only inside assert()). */
static bool shape_valid(cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W, int64_t OH,
                        int64_t OW) {
  return cnn_cpu_float_sizes_valid(dt, N, C, H * W) && H >= 1 && W >= 1 && OH >= 1 && OW >= 1;
}

int cnn_cpu_adaptive_max_pool2d_forward(cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                                        int64_t OH, int64_t OW, const void *x, void *y,
                                        int64_t *indices) {
  assert(shape_valid(dt, N, C, H, W, OH, OW));
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * C; p++) {
    if (dt == CNN_FLOAT64)
      forward_plane(1, H, W, OH, OW, x, y, indices, p);
    else
      forward_plane(0, H, W, OH, OW, x, y, indices, p);
  }
  return 0;
}

int cnn_cpu_adaptive_max_pool2d_backward(cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                                         int64_t OH, int64_t OW, const void *dy,
                                         const int64_t *indices, void *dx) {
  assert(shape_valid(dt, N, C, H, W, OH, OW));
  int f64 = dt == CNN_FLOAT64;
  memset(dx, 0, (size_t)(N * C * H * W) * cnn_dtype_size(dt));
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * C; p++)
    for (int64_t o = p * OH * OW; o < (p + 1) * OH * OW; o++) {
      int64_t at = p * H * W + indices[o];
      cnn_cpu_st(dx, at, cnn_cpu_ld(dx, at, f64) + cnn_cpu_ld(dy, o, f64), f64);
    }
  return 0;
}
