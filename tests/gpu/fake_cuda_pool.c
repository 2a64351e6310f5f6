/*
 * fake_cuda_pool.c -- pooling of the fake device: max (with indices), avg,
 * adaptive avg, forward and backward, one window at a time.
 *
 * Conventions (core/cpu/kernels.h, PyTorch's): x N x C x H x W viewed as
 * N*C planes; window of output (oh, ow) starts at oh*sh - ph (rows) and
 * ow*sw - pw (columns), kh x kw, clipped to the input; a max window
 * takes every dh-th row and dw-th column (dilation).
 *  - max: the window's first position starts as the argmax with value
 *    -inf; a later element is taken when it is greater (and no NaN was
 *    seen) or when it is NaN, so the result is NaN once a NaN is in the
 *    window.  Index = h*W + w within the plane, -1 for an empty window.
 *    Backward: dx zeroed, dy added at each index.
 *  - avg: divisor = window clipped to the padded input (H + ph, W + pw)
 *    when count_include_pad, else clipped to the input; 0 when empty.
 *  - adaptive avg: bin i covers [floor(i*H/OH), ceil((i+1)*H/OH)).
 * Sums in double; outputs OVERWRITTEN.  The forward passes take float16
 * too (float16 inference; loads and stores through fake_load/fake_store),
 * the backward passes refuse it, as gpu/pool.cu.
 */
#include <math.h>
#include <stdlib.h>

#include "fake_cuda.h"

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static int check(const char *op, cnn_dtype dt, const void *a, int64_t na, const void *b,
                 int64_t nb) {
  return fake_dev_n(op, a, na, dt) || fake_dev_n(op, b, nb, dt) ? -1 : 0;
}

/* ---- max ------------------------------------------------------------------------------- */

/* The taps start, start + d, ... (k of them) inside [0, n): [*lo, *hi) by d. */
static void taps(int64_t start, int k, int d, int64_t n, int64_t *lo, int64_t *hi) {
  *lo = start;
  while (*lo < 0) *lo += d;
  *hi = min64(start + (int64_t)(k - 1) * d + 1, n);
}

static void max_window(const cnn_pool_shape *s, cnn_dtype dt, const void *x, int64_t plane,
                       int64_t oh, int64_t ow, double *best, int64_t *arg) {
  int64_t h0, h1, w0, w1;
  taps(oh * s->sh - s->ph, s->kh, s->dh, s->H, &h0, &h1);
  taps(ow * s->sw - s->pw, s->kw, s->dw, s->W, &w0, &w1);
  bool nan = false;
  *best = -INFINITY;
  *arg = h0 < h1 && w0 < w1 ? h0 * s->W + w0 : -1;
  for (int64_t h = h0; h < h1; h += s->dh)
    for (int64_t w = w0; w < w1; w += s->dw) {
      double v = fake_load(dt, x, plane * s->H * s->W + h * s->W + w);
      if (v != v || (!nan && v > *best)) *best = v, *arg = h * s->W + w;
      if (v != v) nan = true;
    }
}

static int max_forward(int dev, cnn_dtype dt, const cnn_pool_shape *s, const void *x, void *y,
                       int64_t *indices) {
  int64_t P = s->N * s->C, L = s->OH * s->OW;
  if (s->dh < 1 || s->dw < 1) {
    fake_core.set_error("max_pool2d: dilation %dx%d must be >= 1", s->dh, s->dw);
    return -1;
  }
  if (fake_float_dt("max_pool2d", dt, dt == CNN_FLOAT16) || fake_enter("max_pool2d", dev))
    return -1;
  int rc = check("max_pool2d", dt, x, P * s->H * s->W, y, P * L) ||
                   (indices && fake_dev_n("max_pool2d", indices, P * L, CNN_INT64))
               ? -1
               : 0;
  for (int64_t p = 0; rc == 0 && p < P; p++)
    for (int64_t i = 0; i < L; i++) {
      double best;
      int64_t arg;
      max_window(s, dt, x, p, i / s->OW, i % s->OW, &best, &arg);
      fake_store(dt, y, p * L + i, best);
      if (indices) indices[p * L + i] = arg;
    }
  fake_leave();
  return rc;
}

static int max_backward(int dev, cnn_dtype dt, const cnn_pool_shape *s, const void *dy,
                        const int64_t *indices, void *dx) {
  int64_t P = s->N * s->C, L = s->OH * s->OW, HW = s->H * s->W;
  if (fake_float_dt("max_pool2d", dt, false) || fake_enter("max_pool2d", dev)) return -1;
  double *acc = calloc((size_t)(P * HW > 0 ? P * HW : 1), sizeof(double));
  int rc = !acc || check("max_pool2d", dt, dy, P * L, dx, P * HW) ||
                   fake_dev_n("max_pool2d", indices, P * L, CNN_INT64)
               ? -1
               : 0;
  if (!acc) fake_core.set_error("max_pool2d: out of host memory");
  for (int64_t p = 0; rc == 0 && p < P; p++)
    for (int64_t i = 0; i < L; i++) {
      int64_t ix = indices[p * L + i];
      if (ix >= HW) {
        fake_core.set_error("max_pool2d: index %lld outside the %lld-element plane", (long long)ix,
                            (long long)HW);
        rc = -1;
        break;
      }
      if (ix >= 0) acc[p * HW + ix] += fake_load(dt, dy, p * L + i);
    }
  for (int64_t i = 0; rc == 0 && i < P * HW; i++) fake_store(dt, dx, i, acc[i]);
  free(acc);
  fake_leave();
  return rc;
}

/* ---- avg ------------------------------------------------------------------------------- */

typedef struct {
  int64_t h0, h1, w0, w1;
  double divisor;
} window;

static window avg_window(const cnn_pool_shape *s, int64_t oh, int64_t ow) {
  int64_t hs = oh * s->sh - s->ph, ws = ow * s->sw - s->pw;
  int64_t he = min64(hs + s->kh, s->H + s->ph), we = min64(ws + s->kw, s->W + s->pw);
  window v = {max64(hs, 0), min64(he, s->H), max64(ws, 0), min64(we, s->W), 0};
  int64_t real = max64(v.h1 - v.h0, 0) * max64(v.w1 - v.w0, 0);
  v.divisor = (double)(s->count_include_pad ? (he - hs) * (we - ws) : real);
  return v;
}

static int avg_forward(int dev, cnn_dtype dt, const cnn_pool_shape *s, const void *x, void *y) {
  int64_t P = s->N * s->C, L = s->OH * s->OW, HW = s->H * s->W;
  if (fake_float_dt("avg_pool2d", dt, dt == CNN_FLOAT16) || fake_enter("avg_pool2d", dev))
    return -1;
  int rc = check("avg_pool2d", dt, x, P * HW, y, P * L);
  for (int64_t p = 0; rc == 0 && p < P; p++)
    for (int64_t i = 0; i < L; i++) {
      window v = avg_window(s, i / s->OW, i % s->OW);
      double acc = 0;
      for (int64_t h = v.h0; h < v.h1; h++)
        for (int64_t w = v.w0; w < v.w1; w++) acc += fake_load(dt, x, p * HW + h * s->W + w);
      fake_store(dt, y, p * L + i, v.divisor > 0 ? acc / v.divisor : 0);
    }
  fake_leave();
  return rc;
}

static int avg_backward(int dev, cnn_dtype dt, const cnn_pool_shape *s, const void *dy, void *dx) {
  int64_t P = s->N * s->C, L = s->OH * s->OW, HW = s->H * s->W;
  if (fake_float_dt("avg_pool2d", dt, false) || fake_enter("avg_pool2d", dev)) return -1;
  double *acc = calloc((size_t)(P * HW > 0 ? P * HW : 1), sizeof(double));
  int rc = !acc || check("avg_pool2d", dt, dy, P * L, dx, P * HW) ? -1 : 0;
  if (!acc) fake_core.set_error("avg_pool2d: out of host memory");
  for (int64_t p = 0; rc == 0 && p < P; p++)
    for (int64_t i = 0; i < L; i++) {
      window v = avg_window(s, i / s->OW, i % s->OW);
      if (!(v.divisor > 0)) continue;
      double g = fake_load(dt, dy, p * L + i) / v.divisor;
      for (int64_t h = v.h0; h < v.h1; h++)
        for (int64_t w = v.w0; w < v.w1; w++) acc[p * HW + h * s->W + w] += g;
    }
  for (int64_t i = 0; rc == 0 && i < P * HW; i++) fake_store(dt, dx, i, acc[i]);
  free(acc);
  fake_leave();
  return rc;
}

/* ---- adaptive avg ------------------------------------------------------------------------- */

static int64_t bin_lo(int64_t i, int64_t in, int64_t out) { return i * in / out; }
static int64_t bin_hi(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

static int adaptive_forward(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                            int64_t OH, int64_t OW, const void *x, void *y) {
  const char *op = "adaptive_avg_pool2d";
  if (fake_float_dt(op, dt, dt == CNN_FLOAT16) || fake_enter(op, dev)) return -1;
  int rc = check(op, dt, x, N * C * H * W, y, N * C * OH * OW);
  for (int64_t p = 0; rc == 0 && p < N * C; p++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t h0 = bin_lo(oh, H, OH), h1 = bin_hi(oh, H, OH), w0 = bin_lo(ow, W, OW),
                w1 = bin_hi(ow, W, OW);
        double acc = 0;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) acc += fake_load(dt, x, (p * H + h) * W + w);
        int64_t cnt = (h1 - h0) * (w1 - w0);
        fake_store(dt, y, (p * OH + oh) * OW + ow, cnt > 0 ? acc / (double)cnt : 0);
      }
  fake_leave();
  return rc;
}

static int adaptive_backward(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                             int64_t OH, int64_t OW, const void *dy, void *dx) {
  const char *op = "adaptive_avg_pool2d";
  if (fake_float_dt(op, dt, false) || fake_enter(op, dev)) return -1;
  int64_t n = N * C * H * W;
  double *acc = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
  int rc = !acc || check(op, dt, dy, N * C * OH * OW, dx, n) ? -1 : 0;
  if (!acc) fake_core.set_error("%s: out of host memory", op);
  for (int64_t p = 0; rc == 0 && p < N * C; p++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t h0 = bin_lo(oh, H, OH), h1 = bin_hi(oh, H, OH), w0 = bin_lo(ow, W, OW),
                w1 = bin_hi(ow, W, OW);
        if (h1 <= h0 || w1 <= w0) continue;
        double g = fake_load(dt, dy, (p * OH + oh) * OW + ow) / (double)((h1 - h0) * (w1 - w0));
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) acc[(p * H + h) * W + w] += g;
      }
  for (int64_t i = 0; rc == 0 && i < n; i++) fake_store(dt, dx, i, acc[i]);
  free(acc);
  fake_leave();
  return rc;
}

void fake_pool_register(cnn_backend *be) {
  be->max_pool2d_forward = max_forward;
  be->max_pool2d_backward = max_backward;
  be->avg_pool2d_forward = avg_forward;
  be->avg_pool2d_backward = avg_backward;
  be->adaptive_avg_pool2d_forward = adaptive_forward;
  be->adaptive_avg_pool2d_backward = adaptive_backward;
}
