/*
 * reduce.c -- the CPU backend's reductions: M rows of R contiguous
 * elements to M values (sum, mean, max, min, prod, var, std, norm, argmax,
 * argmin), and the column sums of reduce_leading (core/backend.h).
 * core/ops/reduce.c plans the reduction (which dims, the output dtype)
 * and permutes the input to rows.
 *
 * Accumulation is in double for floating inputs (float32 sums included)
 * and in int64 for integer sum/prod.  NaN propagates through max/min (the
 * first NaN wins, as PyTorch).  Rows are split among OpenMP threads when
 * there is enough work; one long row (sum of a whole tensor) is split
 * within the row.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/backend_cpu.h"
#include "tensor_internal.h" /* cnn_load_double, cnn_store_double */

#define CNN_RED_PARALLEL 32768

/* ---- row kernels ---------------------------------------------------------------- */

/* eight independent accumulators: no serial dependency, and GCC vectorises
 * the float -> double conversion */
static double row_sum_f32(const float *f, int64_t R) {
  double acc[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= R; i += 8)
    for (int k = 0; k < 8; k++) acc[k] += f[i + k];
  double s = 0;
  for (; i < R; i++) s += f[i];
  for (int k = 0; k < 8; k++) s += acc[k];
  return s;
}
static double row_sum_f64(const double *f, int64_t R) {
  double acc[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= R; i += 8)
    for (int k = 0; k < 8; k++) acc[k] += f[i + k];
  double s = 0;
  for (; i < R; i++) s += f[i];
  for (int k = 0; k < 8; k++) s += acc[k];
  return s;
}

static double row_sum(const void *row, cnn_dtype dt, int64_t R) {
  if (dt == CNN_FLOAT32) return row_sum_f32(row, R);
  if (dt == CNN_FLOAT64) return row_sum_f64(row, R);
  double acc = 0;
  for (int64_t i = 0; i < R; i++) acc += cnn_load_double(dt, row, i);
  return acc;
}

/* one long row split among the threads (sum/mean of a whole big tensor) */
static double row_sum_parallel(const char *row, cnn_dtype dt, int64_t R) {
  double total = 0;
  size_t es = cnn_dtype_size(dt);
#pragma omp parallel reduction(+ : total)
  {
    int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t lo = R * t / nt, hi = R * (t + 1) / nt;
    total += row_sum(row + lo * (int64_t)es, dt, hi - lo);
  }
  return total;
}

static int64_t load_i64(const void *row, cnn_dtype dt, int64_t i) {
  return dt == CNN_UINT8 ? ((const uint8_t *)row)[i] : ((const int64_t *)row)[i];
}

static int64_t row_int(cnn_reduce_op op, const void *row, cnn_dtype dt, int64_t R) {
  uint64_t acc = op == CNN_RED_PROD ? 1 : 0; /* wraps like PyTorch's int64 */
  for (int64_t i = 0; i < R; i++)
    acc = op == CNN_RED_PROD ? acc * (uint64_t)load_i64(row, dt, i)
                             : acc + (uint64_t)load_i64(row, dt, i);
  return (int64_t)acc;
}

/* index of the max (or min); the first NaN wins */
static int64_t row_argext(const void *row, cnn_dtype dt, int64_t R, bool is_min) {
  int64_t best = 0;
  double bv = cnn_load_double(dt, row, 0);
  if (bv != bv) return 0;
  for (int64_t i = 1; i < R; i++) {
    double v = cnn_load_double(dt, row, i);
    if (v != v) return i;
    if (is_min ? v < bv : v > bv) bv = v, best = i;
  }
  return best;
}

static double row_var(const void *row, cnn_dtype dt, int64_t R, double correction) {
  double mean = row_sum(row, dt, R) / (double)R, ss = 0;
  for (int64_t i = 0; i < R; i++) {
    double d = cnn_load_double(dt, row, i) - mean;
    ss += d * d;
  }
  return ss / ((double)R - correction);
}

static double row_norm(const void *row, cnn_dtype dt, int64_t R, double p) {
  double acc = p == -INFINITY ? INFINITY : 0;
  for (int64_t i = 0; i < R; i++) {
    double a = fabs(cnn_load_double(dt, row, i));
    if (p == INFINITY)
      acc = (a > acc || a != a) ? a : acc;
    else if (p == -INFINITY)
      acc = (a < acc || a != a) ? a : acc;
    else if (p == 0)
      acc += a != 0;
    else if (p == 1)
      acc += a;
    else if (p == 2)
      acc += a * a;
    else
      acc += pow(a, p);
  }
  if (p == 2) return sqrt(acc);
  if (p == 0 || p == 1 || isinf(p)) return acc;
  return pow(acc, 1.0 / p);
}

static double row_prod(const void *row, cnn_dtype dt, int64_t R) {
  double acc = 1;
  for (int64_t i = 0; i < R; i++) acc *= cnn_load_double(dt, row, i);
  return acc;
}

/* out[m] for row m: written as out's dtype */
static void reduce_row(cnn_reduce_op op, const char *row, cnn_dtype dt, int64_t R, double p,
                       void *out, cnn_dtype odt, int64_t m) {
  if (!cnn_dtype_is_float(dt) && (op == CNN_RED_SUM || op == CNN_RED_PROD)) {
    ((int64_t *)out)[m] = row_int(op, row, dt, R);
    return;
  }
  double v;
  switch (op) {
  case CNN_RED_SUM: v = row_sum(row, dt, R); break;
  case CNN_RED_MEAN: v = row_sum(row, dt, R) / (double)R; break;
  case CNN_RED_PROD: v = row_prod(row, dt, R); break;
  case CNN_RED_VAR: v = row_var(row, dt, R, p); break;
  case CNN_RED_STD: v = sqrt(row_var(row, dt, R, p)); break;
  case CNN_RED_NORM: v = row_norm(row, dt, R, p); break;
  case CNN_RED_ARGMAX:
  case CNN_RED_ARGMIN: ((int64_t *)out)[m] = row_argext(row, dt, R, op == CNN_RED_ARGMIN); return;
  default: { /* MAX, MIN: copy the winning element exactly */
    int64_t i = row_argext(row, dt, R, op == CNN_RED_MIN);
    size_t es = cnn_dtype_size(dt);
    memcpy((char *)out + m * es, row + i * es, es);
    return;
  }
  }
  cnn_store_double(odt, out, m, v);
}

int cnn_cpu_reduce(int dev, cnn_reduce_op op, cnn_dtype dt, cnn_dtype odt, int64_t M, int64_t R,
                   const void *x, void *o, double p) {
  (void)dev;
  const char *base = x;
  size_t rowbytes = (size_t)R * cnn_dtype_size(dt);
  bool sum_like = (op == CNN_RED_SUM || op == CNN_RED_MEAN) && cnn_dtype_is_float(dt);
  if (sum_like && M < 4 && R > CNN_RED_PARALLEL && omp_get_max_threads() > 1) {
    for (int64_t m = 0; m < M; m++) {
      double v = row_sum_parallel(base + m * rowbytes, dt, R);
      cnn_store_double(odt, o, m, op == CNN_RED_MEAN ? v / (double)R : v);
    }
  } else if (M * R > CNN_RED_PARALLEL && M > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t m = 0; m < M; m++) reduce_row(op, base + m * rowbytes, dt, R, p, o, odt, m);
  } else {
    for (int64_t m = 0; m < M; m++) reduce_row(op, base + m * rowbytes, dt, R, p, o, odt, m);
  }
  return 0;
}

/* sum/mean over the leading dims of a contiguous float tensor: accumulate
 * columns (out has M elements, x is R x M). */
int cnn_cpu_reduce_leading(int dev, cnn_dtype dt, cnn_dtype odt, int64_t R, int64_t M,
                           const void *d, void *out, bool mean) {
  (void)dev;
  double *acc = calloc((size_t)M, sizeof(double));
  if (!acc) return cnn_set_error("%s: out of memory", mean ? "mean" : "sum"), -1;
  for (int64_t r = 0; r < R; r++) {
    if (dt == CNN_FLOAT32) {
      const float *f = (const float *)d + r * M;
      for (int64_t m = 0; m < M; m++) acc[m] += f[m];
    } else {
      const double *f = (const double *)d + r * M;
      for (int64_t m = 0; m < M; m++) acc[m] += f[m];
    }
  }
  double scale = mean ? 1.0 / (double)R : 1.0;
  for (int64_t m = 0; m < M; m++) cnn_store_double(odt, out, m, acc[m] * scale);
  free(acc);
  return 0;
}
