/*
 * max_pool_rows.c -- max pooling of channels-last arrays (N x H x W x C):
 * pool.c's rules (PyTorch's: padding counts as -inf, the first maximum's
 * position h*W+w, a NaN taken wherever it comes so the output is NaN and
 * the index the last NaN's, -1 and -inf for a window with no input) with
 * the channels in the vector lanes.  An output pixel's C values and
 * indices are the running maxima while its window's taps stream past:
 * each tap is one contiguous row of C values.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "cpu/kernels.h"

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The taps of a dilated window along one axis inside [0, n): [*lo, *hi) by d. */
static inline void taps(int64_t start, int k, int d, int64_t n, int64_t *lo, int64_t *hi) {
  *lo = start < 0 ? start + (-start + d - 1) / d * d : start;
  *hi = min64(start + (int64_t)(k - 1) * d + 1, n);
}

/* Output (oh, ow)'s window: rows [h0, h1) by dh, columns [w0, w1) by dw,
 * and its first tap's position h*W+w (-1 when it holds no input). */
typedef struct {
  int64_t h0, h1, w0, w1, first;
} window;

static inline window window_of(const cnn_pool_shape *s, int64_t oh, int64_t ow) {
  window v;
  taps(oh * s->sh - s->ph, s->kh, s->dh, s->H, &v.h0, &v.h1);
  taps(ow * s->sw - s->pw, s->kw, s->dw, s->W, &v.w0, &v.w1);
  v.first = v.h0 < v.h1 && v.w0 < v.w1 ? v.h0 * s->W + v.w0 : -1;
  return v;
}

/* One float32 output pixel (C values at y, indices at idx or NULL). */
static void pixel_f32(const cnn_pool_shape *s, const float *x, int64_t oh, int64_t ow, float *y,
                      int64_t *idx) {
  int64_t C = s->C;
  window v = window_of(s, oh, ow);
  for (int64_t c = 0; c < C; c++) y[c] = -INFINITY;
  if (idx)
    for (int64_t c = 0; c < C; c++) idx[c] = v.first;
  for (int64_t h = v.h0; h < v.h1; h += s->dh)
    for (int64_t w = v.w0; w < v.w1; w += s->dw) {
      const float *r = x + (h * s->W + w) * C;
      int64_t pos = h * s->W + w;
      if (idx) {
#pragma omp simd
        for (int64_t c = 0; c < C; c++) {
          float v = r[c], b = y[c];
          int nan = v != v, take = (v > b) | nan;
          idx[c] = take ? pos : idx[c];
          y[c] = take ? v : b; /* once NaN, only a NaN is taken (v > NaN is false) */
        }
      } else {
#pragma omp simd
        for (int64_t c = 0; c < C; c++) {
          float v = r[c], b = y[c];
          y[c] = (v > b) | (v != v) ? v : b;
        }
      }
    }
}

/* The same for float64 (scalar loops). */
static void pixel_f64(const cnn_pool_shape *s, const double *x, int64_t oh, int64_t ow, double *y,
                      int64_t *idx) {
  int64_t C = s->C;
  window v = window_of(s, oh, ow);
  for (int64_t c = 0; c < C; c++) {
    y[c] = -INFINITY;
    if (idx) idx[c] = v.first;
  }
  for (int64_t h = v.h0; h < v.h1; h += s->dh)
    for (int64_t w = v.w0; w < v.w1; w += s->dw) {
      const double *r = x + (h * s->W + w) * C;
      for (int64_t c = 0; c < C; c++) {
        double v = r[c], b = y[c];
        int take = (v > b) | (v != v);
        if (idx && take) idx[c] = h * s->W + w;
        y[c] = take ? v : b;
      }
    }
}

int cnn_cpu_max_pool2d_nhwc_forward(cnn_dtype dt, const cnn_pool_shape *s, const void *x, void *y,
                                    int64_t *indices) {
  assert(s->channels_last && (dt == CNN_FLOAT32 || dt == CNN_FLOAT64));
  int64_t C = s->C, image = s->H * s->W * C, out = s->OH * s->OW * C;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < s->N; n++)
    for (int64_t oh = 0; oh < s->OH; oh++)
      for (int64_t ow = 0; ow < s->OW; ow++) {
        int64_t o = n * out + (oh * s->OW + ow) * C;
        int64_t *idx = indices ? indices + o : NULL;
        if (dt == CNN_FLOAT64)
          pixel_f64(s, (const double *)x + n * image, oh, ow, (double *)y + o, idx);
        else
          pixel_f32(s, (const float *)x + n * image, oh, ow, (float *)y + o, idx);
      }
  return 0;
}

/* Image n: dx zeroed, then each output's gradient added at its index. */
static void image_backward(int f64, const cnn_pool_shape *s, const void *dy, const int64_t *idx,
                           void *dx) {
  int64_t C = s->C, HW = s->H * s->W;
  memset(dx, 0, (size_t)(HW * C) * (f64 ? 8 : 4));
  for (int64_t o = 0; o < s->OH * s->OW; o++)
    for (int64_t c = 0; c < C; c++) {
      int64_t i = idx[o * C + c];
      if (i < 0 || i >= HW) continue; /* an empty window */
      if (f64)
        ((double *)dx)[i * C + c] += ((const double *)dy)[o * C + c];
      else
        ((float *)dx)[i * C + c] += ((const float *)dy)[o * C + c];
    }
}

int cnn_cpu_max_pool2d_nhwc_backward(cnn_dtype dt, const cnn_pool_shape *s, const void *dy,
                                     const int64_t *indices, void *dx) {
  assert(s->channels_last && indices);
  int64_t C = s->C, image = s->H * s->W * C, out = s->OH * s->OW * C;
  size_t es = dt == CNN_FLOAT64 ? 8 : 4;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < s->N; n++)
    image_backward(dt == CNN_FLOAT64, s, (const char *)dy + n * out * es, indices + n * out,
                   (char *)dx + n * image * es);
  return 0;
}
