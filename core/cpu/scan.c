/*
 * scan.c -- the CPU backend's cumulative entries: running sums and
 * products along one dimension (cumsum, cumprod, and the reversed sum that
 * is cumsum's backward), and cumprod's backward.  x is outer x D x inner,
 * contiguous; each of the outer*inner rows is walked with stride inner.
 * Floats accumulate in double (as PyTorch's CPU accumulation type), int64
 * in int64 (wrapping as C's unsigned arithmetic).
 */
#include "cpu/backend_cpu.h"
#include "tensor_internal.h" /* cnn_load_double, cnn_store_double */

static void cumulate_float(cnn_dtype dt, bool prod, bool rev, int64_t r, int64_t D, int64_t inner,
                           const void *x, void *y) {
  int64_t base = (r / inner) * D * inner + r % inner;
  double acc = prod ? 1 : 0;
  for (int64_t s = 0; s < D; s++) {
    int64_t i = base + (rev ? D - 1 - s : s) * inner;
    double v = cnn_load_double(dt, x, i);
    acc = prod ? acc * v : acc + v;
    cnn_store_double(dt, y, i, acc);
  }
}

static void cumulate_int(bool prod, bool rev, int64_t r, int64_t D, int64_t inner, const int64_t *x,
                         int64_t *y) {
  int64_t base = (r / inner) * D * inner + r % inner;
  uint64_t acc = prod ? 1 : 0;
  for (int64_t s = 0; s < D; s++) {
    int64_t i = base + (rev ? D - 1 - s : s) * inner;
    acc = prod ? acc * (uint64_t)x[i] : acc + (uint64_t)x[i];
    y[i] = (int64_t)acc;
  }
}

int cnn_cpu_cumulate(int dev, cnn_dtype dt, bool prod, bool reverse, int64_t outer, int64_t D,
                     int64_t inner, const void *x, void *y) {
  (void)dev;
  if (dt != CNN_FLOAT32 && dt != CNN_FLOAT64 && dt != CNN_INT64)
    return cnn_set_error("%s: dtype %s is not supported", prod ? "cumprod" : "cumsum",
                         cnn_dtype_name(dt)),
           -1;
  int64_t rows = outer * inner;
#pragma omp parallel for schedule(static) if (rows * D > 32768)
  for (int64_t r = 0; r < rows; r++) {
    if (dt == CNN_INT64)
      cumulate_int(prod, reverse, r, D, inner, x, y);
    else
      cumulate_float(dt, prod, reverse, r, D, inner, x, y);
  }
  return 0;
}

/* one row: S runs backward, then dx[d] = (prod of x before d) * S[d] */
static void cumprod_grad_row(cnn_dtype dt, int64_t r, int64_t D, int64_t inner, const void *x,
                             const void *g, void *dx) {
  int64_t base = (r / inner) * D * inner + r % inner;
  double s = 0;
  for (int64_t d = D - 1; d >= 0; d--) { /* dx holds S for now */
    int64_t i = base + d * inner;
    s = cnn_load_double(dt, g, i) + (d + 1 < D ? cnn_load_double(dt, x, i + inner) * s : 0);
    cnn_store_double(dt, dx, i, s);
  }
  double before = 1;
  for (int64_t d = 0; d < D; d++) {
    int64_t i = base + d * inner;
    cnn_store_double(dt, dx, i, before * cnn_load_double(dt, dx, i));
    before *= cnn_load_double(dt, x, i);
  }
}

int cnn_cpu_cumprod_backward(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner,
                             const void *x, const void *g, void *dx) {
  (void)dev;
  if (dt != CNN_FLOAT32 && dt != CNN_FLOAT64)
    return cnn_set_error("cumprod: dtype %s has no gradient", cnn_dtype_name(dt)), -1;
  int64_t rows = outer * inner;
#pragma omp parallel for schedule(static) if (rows * D > 32768)
  for (int64_t r = 0; r < rows; r++) cumprod_grad_row(dt, r, D, inner, x, g, dx);
  return 0;
}
