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
 * Sums are in double for both dtypes; outputs are OVERWRITTEN.
 */
#include <math.h>

#include "cpu/kernels.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

static int check_softmax(const char *op, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner) {
  if (dt != CNN_FLOAT32 && dt != CNN_FLOAT64) {
    cnn_set_error("%s: dtype %s not supported (float32 or float64)", op, cnn_dtype_name(dt));
    return -1;
  }
  if (outer < 0 || D < 0 || inner < 0) {
    cnn_set_error("%s: invalid sizes %lldx%lldx%lld", op, (long long)outer, (long long)D,
                  (long long)inner);
    return -1;
  }
  return 0;
}

/* One row: base = o*D*inner + i, stride = inner. */
ALWAYS_INLINE void softmax_row(int f64, int is_log, int64_t D, int64_t base, int64_t stride,
                               const void *x, void *y) {
  double m = -INFINITY, sum = 0;
  for (int64_t d = 0; d < D; d++) {
    double v = cnn_cpu_ld(x, base + d * stride, f64);
    if (v > m || isnan(v)) m = v;
  }
  if (isinf(m) && m < 0) m = 0; /* all -inf: avoid -inf - -inf */
  for (int64_t d = 0; d < D; d++) sum += exp(cnn_cpu_ld(x, base + d * stride, f64) - m);
  double lse = m + log(sum);
  for (int64_t d = 0; d < D; d++) {
    double v = cnn_cpu_ld(x, base + d * stride, f64);
    cnn_cpu_st(y, base + d * stride, is_log ? v - lse : exp(v - m) / sum, f64);
  }
}

ALWAYS_INLINE void softmax_fwd(int f64, int is_log, int64_t outer, int64_t D, int64_t inner,
                               const void *x, void *y) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < outer * inner; r++) {
    int64_t o = r / inner, i = r % inner;
    softmax_row(f64, is_log, D, o * D * inner + i, inner, x, y);
  }
}

int cnn_cpu_softmax_forward(cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int is_log,
                            const void *x, void *y) {
  const char *op = is_log ? "log_softmax" : "softmax";
  if (check_softmax(op, dt, outer, D, inner)) return -1;
  if (dt == CNN_FLOAT64)
    softmax_fwd(1, is_log, outer, D, inner, x, y);
  else
    softmax_fwd(0, is_log, outer, D, inner, x, y);
  return 0;
}

ALWAYS_INLINE void softmax_bwd_row(int f64, int is_log, int64_t D, int64_t base, int64_t stride,
                                   const void *y, const void *dy, void *dx) {
  double s = 0;
  for (int64_t d = 0; d < D; d++) {
    double g = cnn_cpu_ld(dy, base + d * stride, f64);
    s += is_log ? g : g * cnn_cpu_ld(y, base + d * stride, f64);
  }
  for (int64_t d = 0; d < D; d++) {
    int64_t j = base + d * stride;
    double yv = cnn_cpu_ld(y, j, f64), g = cnn_cpu_ld(dy, j, f64);
    cnn_cpu_st(dx, j, is_log ? g - exp(yv) * s : yv * (g - s), f64);
  }
}

ALWAYS_INLINE void softmax_bwd(int f64, int is_log, int64_t outer, int64_t D, int64_t inner,
                               const void *y, const void *dy, void *dx) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < outer * inner; r++) {
    int64_t o = r / inner, i = r % inner;
    softmax_bwd_row(f64, is_log, D, o * D * inner + i, inner, y, dy, dx);
  }
}

int cnn_cpu_softmax_backward(cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int is_log,
                             const void *y, const void *dy, void *dx) {
  const char *op = is_log ? "log_softmax_backward" : "softmax_backward";
  if (check_softmax(op, dt, outer, D, inner)) return -1;
  if (dt == CNN_FLOAT64)
    softmax_bwd(1, is_log, outer, D, inner, y, dy, dx);
  else
    softmax_bwd(0, is_log, outer, D, inner, y, dy, dx);
  return 0;
}
