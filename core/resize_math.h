/*
 * resize_math.h -- the source coordinates of 2-d resizing (F.interpolate:
 * nearest and bilinear) and the bins of adaptive max pooling, shared by the
 * CPU loops (core/cpu/resize.c, core/cpu/adaptive_max_pool.c), the CUDA
 * kernels (gpu/resize.cu) and the fake device (tests/gpu/fake_cuda_resize.c).
 *
 * PyTorch's rules (aten/src/ATen/native/UpSample.h), per axis of input size
 * `in` and output size `out`; `scale_factor` is the user's factor when one
 * was given (and recompute_scale_factor is not set), else 0:
 *   nearest:  src = dst                          when out == in
 *             src = dst / 2                      when out == 2 * in
 *             src = min(floor(dst * s), in - 1)  otherwise, in float,
 *             s = 1 / scale_factor if given, else in / out
 *   bilinear: s = (in - 1) / (out - 1) (0 when out == 1)  with align_corners
 *             s = 1 / scale_factor if given, else in / out  without
 *             x = s * dst                        with align_corners
 *             x = max(s * (dst + 0.5) - 0.5, 0)  without
 *             i0 = floor(x), i1 = i0 + 1 unless i0 is the last index,
 *             weights 1 - f and f, f = x - i0 clamped to [0, 1].
 * Adaptive pooling bins: [floor(i * in / out), ceil((i + 1) * in / out)).
 */
#ifndef CNN_RESIZE_MATH_H
#define CNN_RESIZE_MATH_H

#include <math.h>
#include <stdint.h>

#include "cnn.h"              /* cnn_resize_mode */
#include "elementwise_math.h" /* CNN_HD */

typedef struct {
  int64_t N, C, H, W;      /* input N x C x H x W */
  int64_t OH, OW;          /* output N x C x OH x OW */
  int mode;                /* cnn_resize_mode */
  int align_corners;       /* bilinear only */
  double scale_h, scale_w; /* the user's scale factors, or 0 (sizes given / recomputed) */
} cnn_resize_shape;

/* nearest: the source index of output index dst */
CNN_HD static inline int64_t cnn_resize_nearest(int64_t dst, int64_t in, int64_t out,
                                                double scale_factor) {
  if (out == in) return dst;
  if (out == 2 * in) return dst >> 1;
  float s = scale_factor > 0 ? (float)(1.0 / scale_factor) : (float)in / (float)out;
  int64_t i = (int64_t)floorf((float)dst * s);
  return i < in - 1 ? i : in - 1;
}

/* bilinear: the two source indices of dst and their weights */
typedef struct {
  int64_t i0, i1;
  double w0, w1;
} cnn_resize_taps;

CNN_HD static inline cnn_resize_taps cnn_resize_linear(int64_t dst, int64_t in, int64_t out,
                                                       int align_corners, double scale_factor) {
  double s, x;
  if (align_corners)
    s = out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0;
  else
    s = scale_factor > 0 ? 1.0 / scale_factor : (double)in / (double)out;
  if (align_corners) {
    x = s * (double)dst;
  } else {
    x = s * ((double)dst + 0.5) - 0.5;
    if (x < 0) x = 0;
  }
  cnn_resize_taps t;
  t.i0 = (int64_t)x;
  if (t.i0 > in - 1) t.i0 = in - 1;
  t.i1 = t.i0 < in - 1 ? t.i0 + 1 : t.i0;
  double f = x - (double)t.i0;
  f = f < 0 ? 0 : (f > 1 ? 1 : f);
  t.w0 = 1.0 - f, t.w1 = f;
  return t;
}

/* adaptive pooling: bin i of `out` over `in` is [start, end) */
CNN_HD static inline int64_t cnn_adaptive_start(int64_t i, int64_t in, int64_t out) {
  return i * in / out;
}
CNN_HD static inline int64_t cnn_adaptive_end(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

#endif /* CNN_RESIZE_MATH_H */
