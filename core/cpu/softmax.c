/*
 * softmax.c -- softmax and log_softmax over the middle dimension of x
 * viewed as outer x D x inner (element (o, d, i) at (o*D + d)*inner + i).
 *
 * Each (o, i) pair is one independent row of D values, D apart in memory
 * when inner > 1; the loops run `#pragma omp parallel for` over those
 * outer*inner rows.  Numerically stable: m = max_d x, then
 *   softmax      y = exp(x - m) / sum exp(x - m)
 *   log_softmax  y = x - m - log(sum exp(x - m))
 * Backward, from the forward output y:
 *   softmax      dx = y * (dy - sum dy*y)
 *   log_softmax  dx = dy - exp(y) * sum dy
 * One exp per element (the forward keeps exp(x - m) in y, then scales);
 * exp in the dtype's precision, sums in double.  Outputs are OVERWRITTEN.
 * Row bodies are instantiated per dtype by always-inline calls with a
 * literal `f64`, chosen inside the parallel loop (OpenMP outlines the loop
 * before inlining).
 */
#include <math.h>

#include "cpu/kernels.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* exp in the dtype's precision (expf is several times cheaper). */
static inline double exp_dt(double v, int f64) { return f64 ? exp(v) : (double)expf((float)v); }

/* One row of D values: x[d*stride], y[d*stride] (pointers at the row start). */
ALWAYS_INLINE void softmax_row(int f64, int is_log, int64_t D, int64_t stride, const void *x,
                               void *y) {
  double m = -INFINITY, sum = 0;
  for (int64_t d = 0; d < D; d++) {
    double v = cnn_cpu_ld(x, d * stride, f64);
    m = v > m || v != v ? v : m;
  }
  if (isinf(m) && m < 0) m = 0; /* all -inf: avoid -inf - -inf */
  for (int64_t d = 0; d < D; d++) {
    double e = exp_dt(cnn_cpu_ld(x, d * stride, f64) - m, f64);
    sum += e;
    if (!is_log) cnn_cpu_st(y, d * stride, e, f64);
  }
  double inv = 1 / sum, lse = m + log(sum);
  for (int64_t d = 0; d < D; d++) {
    double v = is_log ? cnn_cpu_ld(x, d * stride, f64) - lse : cnn_cpu_ld(y, d * stride, f64) * inv;
    cnn_cpu_st(y, d * stride, v, f64);
  }
}

int cnn_cpu_softmax_forward(cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int is_log,
                            const void *x, void *y) {
  if (cnn_cpu_check_float_sizes(is_log ? "log_softmax" : "softmax", dt, outer, D, inner)) return -1;
  int64_t esz = (int64_t)cnn_dtype_size(dt);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < outer * inner; r++) {
    int64_t start = (r / inner * D * inner + r % inner) * esz;
    const void *xr = (const char *)x + start;
    void *yr = (char *)y + start;
    if (dt == CNN_FLOAT64)
      softmax_row(1, is_log, D, inner, xr, yr);
    else
      softmax_row(0, is_log, D, inner, xr, yr);
  }
  return 0;
}

ALWAYS_INLINE void softmax_bwd_row(int f64, int is_log, int64_t D, int64_t stride,
                                   const void *y, const void *dy, void *dx) {
  double s = 0;
  for (int64_t d = 0; d < D; d++) {
    double g = cnn_cpu_ld(dy, d * stride, f64);
    s += is_log ? g : g * cnn_cpu_ld(y, d * stride, f64);
  }
  for (int64_t d = 0; d < D; d++) {
    double yv = cnn_cpu_ld(y, d * stride, f64), g = cnn_cpu_ld(dy, d * stride, f64);
    cnn_cpu_st(dx, d * stride, is_log ? g - exp_dt(yv, f64) * s : yv * (g - s), f64);
  }
}

int cnn_cpu_softmax_backward(cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int is_log,
                             const void *y, const void *dy, void *dx) {
  const char *op = is_log ? "log_softmax_backward" : "softmax_backward";
  if (cnn_cpu_check_float_sizes(op, dt, outer, D, inner)) return -1;
  int64_t esz = (int64_t)cnn_dtype_size(dt);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < outer * inner; r++) {
    int64_t start = (r / inner * D * inner + r % inner) * esz;
    const void *yr = (const char *)y + start, *dyr = (const char *)dy + start;
    void *dxr = (char *)dx + start;
    if (dt == CNN_FLOAT64)
      softmax_bwd_row(1, is_log, D, inner, yr, dyr, dxr);
    else
      softmax_bwd_row(0, is_log, D, inner, yr, dyr, dxr);
  }
  return 0;
}
