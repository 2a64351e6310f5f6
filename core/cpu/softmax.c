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
 *
 * float32 rows that are contiguous (inner == 1: softmax over the last dim,
 * as cross-entropy uses) have rows of their own whose loops vectorise: the
 * exps come from the kernel of vector_math.c, a chunk of CHUNK values at a
 * time through a stack buffer, and the max and the double sums are SIMD
 * reductions (partial sums, so the last bits of a sum may differ from the
 * generic row's; exp is within 1 ulp instead of libm's expf).  Like the
 * generic rows they read each x[d] and dy[d] before writing the same index,
 * so y == x and dx == dy are safe.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/vector_math.h"

#define CHUNK 256

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

/* max of a float row; NaN if any element is (as softmax_row's loop) */
static double row_max_f32(int64_t D, const float *x) {
  float m = -INFINITY;
  int nan = 0;
#pragma omp simd reduction(max : m) reduction(| : nan)
  for (int64_t d = 0; d < D; d++) {
    m = x[d] > m ? x[d] : m;
    nan |= x[d] != x[d];
  }
  return nan ? NAN : m;
}

/* sum over d of e^(x[d] - m) (each rounded to float, as exp_dt), the
 * terms also stored in y[d] when y is not NULL.  Partial sums in double. */
static double exp_sum_f32(int64_t D, const float *x, double m, float *y) {
  float buf[CHUNK];
  double sum = 0;
  for (int64_t d0 = 0; d0 < D; d0 += CHUNK) {
    int64_t k = D - d0 < CHUNK ? D - d0 : CHUNK;
    for (int64_t i = 0; i < k; i++) buf[i] = (float)(x[d0 + i] - m);
    cnn_cpu_exp_f32(k, buf, buf);
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < k; i++) s += buf[i];
    sum += s;
    if (y) memcpy(y + d0, buf, (size_t)k * sizeof(float));
  }
  return sum;
}

/* softmax_row(0, is_log, D, 1, x, y) with vectorised loops */
static void softmax_row_f32(int is_log, int64_t D, const float *x, float *y) {
  double m = row_max_f32(D, x);
  if (isinf(m) && m < 0) m = 0;
  double sum = exp_sum_f32(D, x, m, is_log ? NULL : y);
  if (is_log) {
    double lse = m + log(sum);
    for (int64_t d = 0; d < D; d++) y[d] = (float)(x[d] - lse);
  } else {
    double inv = 1 / sum;
    for (int64_t d = 0; d < D; d++) y[d] = (float)(y[d] * inv);
  }
}

int cnn_cpu_softmax_forward(cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int is_log,
                            const void *x, void *y) {
  assert(cnn_cpu_float_sizes_valid(dt, outer, D, inner)); /* nn_softmax.c validates */
  int64_t esz = (int64_t)cnn_dtype_size(dt);
  if (dt == CNN_FLOAT32 && inner == 1) { /* contiguous rows: no index division */
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < outer; r++)
      softmax_row_f32(is_log, D, (const float *)x + r * D, (float *)y + r * D);
    return 0;
  }
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

ALWAYS_INLINE void softmax_bwd_row(int f64, int is_log, int64_t D, int64_t stride, const void *y,
                                   const void *dy, void *dx) {
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

/* softmax_bwd_row(0, 1, D, 1, y, dy, dx): dx = dy - exp(y) * sum dy, with
 * vectorised exps */
static void log_softmax_bwd_row_f32(int64_t D, const float *y, const float *dy, float *dx) {
  float buf[CHUNK];
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < D; d++) s += dy[d];
  for (int64_t d0 = 0; d0 < D; d0 += CHUNK) {
    int64_t k = D - d0 < CHUNK ? D - d0 : CHUNK;
    cnn_cpu_exp_f32(k, y + d0, buf);
    for (int64_t i = 0; i < k; i++) dx[d0 + i] = (float)(dy[d0 + i] - buf[i] * s);
  }
}

int cnn_cpu_softmax_backward(cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int is_log,
                             const void *y, const void *dy, void *dx) {
  assert(cnn_cpu_float_sizes_valid(dt, outer, D, inner));
  int64_t esz = (int64_t)cnn_dtype_size(dt);
  if (dt == CNN_FLOAT32 && is_log && inner == 1) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < outer; r++)
      log_softmax_bwd_row_f32(D, (const float *)y + r * D, (const float *)dy + r * D,
                              (float *)dx + r * D);
    return 0;
  }
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
