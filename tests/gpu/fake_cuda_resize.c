/*
 * fake_cuda_resize.c -- 2-d resizing (nearest, bilinear) and adaptive max
 * pooling of the fake device: one output element at a time, in double.
 *
 * Source coordinates and bins come from core/resize_math.h (PyTorch's
 * rules, the same header the CPU and CUDA kernels use):
 *   nearest:  y[oh, ow] = x[src(oh), src(ow)];
 *   bilinear: y = sum over the 2 x 2 taps of weight_h * weight_w * x;
 *   backward: dx zeroed, each dy added into its taps with the same weights.
 *   adaptive max: the first maximum of the bin, a NaN wins; index h*W+w;
 *   backward: dx zeroed, dy added at the index.
 */
#include <math.h>
#include <string.h>

#include "fake_cuda.h"
#include "resize_math.h"

/* the (up to 4) taps of output (oh, ow) within its plane */
static int taps(const cnn_resize_shape *s, int64_t oh, int64_t ow, int64_t at[4], double wt[4]) {
  if (s->mode == CNN_RESIZE_NEAREST) {
    at[0] = cnn_resize_nearest(oh, s->H, s->OH, s->scale_h) * s->W +
            cnn_resize_nearest(ow, s->W, s->OW, s->scale_w);
    wt[0] = 1;
    return 1;
  }
  cnn_resize_taps th = cnn_resize_linear(oh, s->H, s->OH, s->align_corners, s->scale_h);
  cnn_resize_taps tw = cnn_resize_linear(ow, s->W, s->OW, s->align_corners, s->scale_w);
  int64_t hs[2] = {th.i0, th.i1}, ws[2] = {tw.i0, tw.i1};
  double hw[2] = {th.w0, th.w1}, ww[2] = {tw.w0, tw.w1};
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 2; b++) at[2 * a + b] = hs[a] * s->W + ws[b], wt[2 * a + b] = hw[a] * ww[b];
  return 4;
}

static int resize(bool bwd, int dev, cnn_dtype dt, const cnn_resize_shape *s, const void *in,
                  void *out) {
  const char *op = "interpolate";
  int64_t P = s->N * s->C, HW = s->H * s->W, OHW = s->OH * s->OW;
  if (fake_float_dt(op, dt, false) || fake_enter(op, dev)) return -1;
  int rc = fake_dev_n(op, bwd ? out : in, P * HW, dt) || fake_dev_n(op, bwd ? in : out, P * OHW, dt)
               ? -1
               : 0;
  if (rc == 0 && bwd) memset(out, 0, (size_t)(P * HW) * cnn_dtype_size(dt));
  for (int64_t p = 0; rc == 0 && HW > 0 && p < P; p++)
    for (int64_t o = 0; o < OHW; o++) {
      int64_t at[4];
      double wt[4], acc = 0;
      int n = taps(s, o / s->OW, o % s->OW, at, wt);
      for (int k = 0; k < n; k++) {
        if (bwd)
          fake_store(dt, out, p * HW + at[k],
                     fake_load(dt, out, p * HW + at[k]) + wt[k] * fake_load(dt, in, p * OHW + o));
        else
          acc += wt[k] * fake_load(dt, in, p * HW + at[k]);
      }
      if (!bwd) fake_store(dt, out, p * OHW + o, acc);
    }
  fake_leave();
  return rc;
}

static int resize_forward(int dev, cnn_dtype dt, const cnn_resize_shape *s, const void *x,
                          void *y) {
  return resize(false, dev, dt, s, x, y);
}
static int resize_backward(int dev, cnn_dtype dt, const cnn_resize_shape *s, const void *dy,
                           void *dx) {
  return resize(true, dev, dt, s, dy, dx);
}

static int64_t bin_argmax(cnn_dtype dt, const void *x, int64_t base, int64_t H, int64_t W,
                          int64_t OH, int64_t OW, int64_t oh, int64_t ow) {
  int64_t arg = -1;
  double best = -INFINITY;
  for (int64_t h = cnn_adaptive_start(oh, H, OH); h < cnn_adaptive_end(oh, H, OH); h++)
    for (int64_t w = cnn_adaptive_start(ow, W, OW); w < cnn_adaptive_end(ow, W, OW); w++) {
      double v = fake_load(dt, x, base + h * W + w);
      if (arg < 0 || (v > best && best == best) || (v != v && best == best))
        best = v, arg = h * W + w;
    }
  return arg;
}

static int adaptive_max_forward(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                                int64_t OH, int64_t OW, const void *x, void *y, int64_t *indices) {
  const char *op = "adaptive_max_pool2d";
  int64_t P = N * C, OHW = OH * OW;
  if (fake_float_dt(op, dt, false) || fake_enter(op, dev)) return -1;
  int rc = fake_dev_n(op, x, P * H * W, dt) || fake_dev_n(op, y, P * OHW, dt) ||
                   (indices && fake_dev_n(op, indices, P * OHW, CNN_INT64))
               ? -1
               : 0;
  for (int64_t p = 0; rc == 0 && H * W > 0 && p < P; p++)
    for (int64_t o = 0; o < OHW; o++) {
      int64_t arg = bin_argmax(dt, x, p * H * W, H, W, OH, OW, o / OW, o % OW);
      fake_store(dt, y, p * OHW + o, fake_load(dt, x, p * H * W + arg));
      if (indices) indices[p * OHW + o] = arg;
    }
  fake_leave();
  return rc;
}

static int adaptive_max_backward(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                                 int64_t OH, int64_t OW, const void *dy, const int64_t *indices,
                                 void *dx) {
  const char *op = "adaptive_max_pool2d";
  int64_t P = N * C, OHW = OH * OW, HW = H * W;
  if (fake_float_dt(op, dt, false) || fake_enter(op, dev)) return -1;
  int rc = fake_dev_n(op, dy, P * OHW, dt) || fake_dev_n(op, dx, P * HW, dt) ||
                   fake_dev_n(op, indices, P * OHW, CNN_INT64)
               ? -1
               : 0;
  if (rc == 0) memset(dx, 0, (size_t)(P * HW) * cnn_dtype_size(dt));
  for (int64_t i = 0; rc == 0 && i < P * OHW; i++) {
    int64_t at = i / OHW * HW + indices[i];
    fake_store(dt, dx, at, fake_load(dt, dx, at) + fake_load(dt, dy, i));
  }
  fake_leave();
  return rc;
}

void fake_resize_register(cnn_backend *be) {
  be->resize2d_forward = resize_forward;
  be->resize2d_backward = resize_backward;
  be->adaptive_max_pool2d_forward = adaptive_max_forward;
  be->adaptive_max_pool2d_backward = adaptive_max_backward;
}
