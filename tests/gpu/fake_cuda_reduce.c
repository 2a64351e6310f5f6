/*
 * fake_cuda_reduce.c -- the row reduction of the fake device: x is M rows
 * of R contiguous elements, out[M] in out_dt (core's reduce_dtype).
 *
 * The rules are the ones core/ops/reduce.c documents, written again here in
 * the plainest form: accumulation in double (int64 with wrap-around for
 * integer sum/prod); mean = sum/R; var = sum((x - mean)^2) / (R - p) with
 * p the correction (two passes), std its square root; norm of order p
 * (0: count of non-zeros, inf/-inf: max/min of |x|, NaN propagates);
 * max/min/argmax/argmin take the FIRST extreme and the first NaN wins;
 * max/min copy the winning element itself.
 */
#include <math.h>
#include <string.h>

#include "fake_cuda.h"

static bool is_int(cnn_dtype dt) { return dt == CNN_INT64 || dt == CNN_UINT8; }

static int64_t int_row(cnn_reduce_op op, cnn_dtype dt, const void *x, int64_t r0, int64_t R) {
  uint64_t acc = op == CNN_RED_PROD ? 1 : 0;
  for (int64_t i = 0; i < R; i++) {
    uint64_t v =
        dt == CNN_UINT8 ? ((const uint8_t *)x)[r0 + i] : (uint64_t)((const int64_t *)x)[r0 + i];
    acc = op == CNN_RED_PROD ? acc * v : acc + v;
  }
  return (int64_t)acc;
}

static int64_t arg_ext(cnn_dtype dt, const void *x, int64_t r0, int64_t R, bool is_min) {
  int64_t best = 0;
  double bv = fake_load(dt, x, r0);
  for (int64_t i = 0; i < R; i++) {
    double v = fake_load(dt, x, r0 + i);
    if (v != v) return i;
    if (is_min ? v < bv : v > bv) bv = v, best = i;
  }
  return best;
}

static double sum(cnn_dtype dt, const void *x, int64_t r0, int64_t R) {
  double s = 0;
  for (int64_t i = 0; i < R; i++) s += fake_load(dt, x, r0 + i);
  return s;
}

static double var(cnn_dtype dt, const void *x, int64_t r0, int64_t R, double correction) {
  double mean = sum(dt, x, r0, R) / (double)R, ss = 0;
  for (int64_t i = 0; i < R; i++) {
    double d = fake_load(dt, x, r0 + i) - mean;
    ss += d * d;
  }
  return ss / ((double)R - correction);
}

static double norm(cnn_dtype dt, const void *x, int64_t r0, int64_t R, double p) {
  double acc = p == -INFINITY ? INFINITY : 0;
  for (int64_t i = 0; i < R; i++) {
    double a = fabs(fake_load(dt, x, r0 + i));
    if (a != a)
      acc = a;
    else if (acc != acc)
      continue;
    else if (p == INFINITY)
      acc = a > acc ? a : acc;
    else if (p == -INFINITY)
      acc = a < acc ? a : acc;
    else if (p == 0)
      acc += a != 0;
    else
      acc += pow(a, p);
  }
  if (isinf(p) || p == 0 || p == 1) return acc;
  return pow(acc, 1.0 / p);
}

static double prod(cnn_dtype dt, const void *x, int64_t r0, int64_t R) {
  double acc = 1;
  for (int64_t i = 0; i < R; i++) acc *= fake_load(dt, x, r0 + i);
  return acc;
}

static void one_row(cnn_reduce_op op, cnn_dtype dt, cnn_dtype odt, int64_t m, int64_t R,
                    const void *x, void *out, double p) {
  int64_t r0 = m * R;
  if (is_int(dt) && (op == CNN_RED_SUM || op == CNN_RED_PROD)) {
    ((int64_t *)out)[m] = int_row(op, dt, x, r0, R);
    return;
  }
  if (op == CNN_RED_ARGMAX || op == CNN_RED_ARGMIN) {
    ((int64_t *)out)[m] = arg_ext(dt, x, r0, R, op == CNN_RED_ARGMIN);
    return;
  }
  if (op == CNN_RED_MAX || op == CNN_RED_MIN) {
    size_t es = cnn_dtype_size(dt);
    int64_t i = arg_ext(dt, x, r0, R, op == CNN_RED_MIN);
    memcpy((char *)out + m * (int64_t)es, (const char *)x + (r0 + i) * (int64_t)es, es);
    return;
  }
  double v = op == CNN_RED_SUM    ? sum(dt, x, r0, R)
             : op == CNN_RED_MEAN ? sum(dt, x, r0, R) / (double)R
             : op == CNN_RED_PROD ? prod(dt, x, r0, R)
             : op == CNN_RED_VAR  ? var(dt, x, r0, R, p)
             : op == CNN_RED_STD  ? sqrt(var(dt, x, r0, R, p))
                                  : norm(dt, x, r0, R, p);
  fake_store(odt, out, m, v);
}

static int reduce(int dev, cnn_reduce_op op, cnn_dtype dt, cnn_dtype out_dt, int64_t M, int64_t R,
                  const void *x, void *out, double p) {
  bool extreme =
      op == CNN_RED_MAX || op == CNN_RED_MIN || op == CNN_RED_ARGMAX || op == CNN_RED_ARGMIN;
  if (extreme && R == 0 && M > 0) {
    fake_core.set_error("reduce: max/min/argmax/argmin of an empty row reached the device");
    return -1;
  }
  if (fake_enter("reduce", dev)) return -1;
  int rc = fake_dev_n("reduce", x, M * R, dt) || fake_dev_n("reduce", out, M, out_dt) ? -1 : 0;
  for (int64_t m = 0; rc == 0 && m < M; m++) one_row(op, dt, out_dt, m, R, x, out, p);
  fake_leave();
  return rc;
}

void fake_reduce_register(cnn_backend *be) { be->reduce = reduce; }
