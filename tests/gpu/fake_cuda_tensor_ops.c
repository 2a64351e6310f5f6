/*
 * fake_cuda_tensor_ops.c -- the tensor ops of issue 13 on the fake device:
 * sort (and topk), the cumulative scans, cumprod's backward, scatter.
 *
 * An independent reference for the parity tests, not the CPU's code:
 *  - sort: an insertion sort of each row's positions that compares the
 *    VALUES (NaN larger than every number and equal to NaN; -0 == +0),
 *    moving an entry only past strictly larger ones, hence stable -- where
 *    the CPU and CUDA sort order keys (core/sort_order.h);
 *  - cumprod's backward: the definition, dx[k] = sum over j >= k of g[j]
 *    times the product of x[0..j] without x[k] (D^2 per row) -- where the
 *    CPU and CUDA run a division-free recurrence;
 *  - cumulate and scatter: plain loops (sums in double, int64 exact).
 * Layouts are backend.h's; indices are checked against their dimension.
 */
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

static bool is_nan(double v) { return v != v; }

/* a > b in sort order: NaN above every number */
static bool greater(cnn_dtype dt, const void *x, int64_t a, int64_t b) {
  if (dt == CNN_INT64) return ((const int64_t *)x)[a] > ((const int64_t *)x)[b];
  double va = fake_load(dt, x, a), vb = fake_load(dt, x, b);
  if (is_nan(va)) return !is_nan(vb);
  return !is_nan(vb) && va > vb;
}

/* stable insertion sort of one row's positions p[0..D) (element offsets base + d*inner) */
static void sort_row(cnn_dtype dt, const void *x, int64_t base, int64_t D, int64_t inner, bool desc,
                     int64_t *p) {
  for (int64_t d = 0; d < D; d++) {
    int64_t j = d;
    for (; j > 0; j--) {
      int64_t a = base + p[j - 1] * inner, b = base + d * inner;
      if (!(desc ? greater(dt, x, b, a) : greater(dt, x, a, b))) break;
      p[j] = p[j - 1];
    }
    p[j] = d;
  }
}

static int sort_entry(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int64_t k,
                      bool descending, const void *x, void *values, int64_t *indices) {
  if (dt != CNN_FLOAT32 && dt != CNN_FLOAT64 && dt != CNN_INT64 && dt != CNN_UINT8) {
    fake_core.set_error("sort: dtype %s is not supported", fake_core.dtype_name(dt));
    return -1;
  }
  if (fake_enter("sort", dev)) return -1;
  int64_t *p = D ? malloc((size_t)D * sizeof *p) : NULL;
  size_t es = cnn_dtype_size(dt);
  int rc = (D && !p) || fake_dev_n("sort", x, outer * D * inner, dt) ||
                   fake_dev_n("sort", values, outer * k * inner, dt) ||
                   fake_dev_n("sort", indices, outer * k * inner, CNN_INT64)
               ? -1
               : 0;
  if (D && !p) fake_core.set_error("sort: out of host memory");
  for (int64_t o = 0; rc == 0 && o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      int64_t base = o * D * inner + in;
      sort_row(dt, x, base, D, inner, descending, p);
      for (int64_t j = 0; j < k; j++) {
        int64_t dst = (o * k + j) * inner + in;
        memcpy((char *)values + dst * (int64_t)es,
               (const char *)x + (base + p[j] * inner) * (int64_t)es, es);
        indices[dst] = p[j];
      }
    }
  free(p);
  fake_leave();
  return rc;
}

static int cumulate(int dev, cnn_dtype dt, bool prod, bool reverse, int64_t outer, int64_t D,
                    int64_t inner, const void *x, void *y) {
  const char *op = prod ? "cumprod" : "cumsum";
  if (dt != CNN_INT64 && fake_float_dt(op, dt, false)) return -1;
  if (fake_enter(op, dev)) return -1;
  int64_t n = outer * D * inner;
  int rc = fake_dev_n(op, x, n, dt) || fake_dev_n(op, y, n, dt) ? -1 : 0;
  for (int64_t o = 0; rc == 0 && o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      double acc = prod ? 1 : 0;
      int64_t iacc = prod ? 1 : 0;
      for (int64_t s = 0; s < D; s++) {
        int64_t i = (o * D + (reverse ? D - 1 - s : s)) * inner + in;
        if (dt == CNN_INT64) {
          int64_t v = ((const int64_t *)x)[i];
          iacc = prod ? (int64_t)((uint64_t)iacc * (uint64_t)v)
                      : (int64_t)((uint64_t)iacc + (uint64_t)v);
          ((int64_t *)y)[i] = iacc;
        } else {
          acc = prod ? acc * fake_load(dt, x, i) : acc + fake_load(dt, x, i);
          fake_store(dt, y, i, acc);
        }
      }
    }
  fake_leave();
  return rc;
}

/* dx[k] = sum_{j >= k} g[j] * prod_{i <= j, i != k} x[i] */
static double cumprod_grad_at(cnn_dtype dt, const void *x, const void *g, int64_t base, int64_t D,
                              int64_t inner, int64_t k) {
  double sum = 0;
  for (int64_t j = k; j < D; j++) {
    double prod = 1;
    for (int64_t i = 0; i <= j; i++)
      if (i != k) prod *= fake_load(dt, x, base + i * inner);
    sum += fake_load(dt, g, base + j * inner) * prod;
  }
  return sum;
}

static int cumprod_backward(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner,
                            const void *x, const void *g, void *dx) {
  if (fake_float_dt("cumprod", dt, false) || fake_enter("cumprod", dev)) return -1;
  int64_t n = outer * D * inner;
  int rc = fake_dev_n("cumprod", x, n, dt) || fake_dev_n("cumprod", g, n, dt) ||
                   fake_dev_n("cumprod", dx, n, dt)
               ? -1
               : 0;
  for (int64_t o = 0; rc == 0 && o < outer; o++)
    for (int64_t in = 0; in < inner; in++)
      for (int64_t k = 0; k < D; k++) {
        int64_t base = o * D * inner + in;
        fake_store(dt, dx, base + k * inner, cumprod_grad_at(dt, x, g, base, D, inner, k));
      }
  fake_leave();
  return rc;
}

static int scatter(int dev, cnn_dtype dt, int ndim, const int64_t *oshape, const int64_t *ishape,
                   int dim, const int64_t *index, const void *src, void *out) {
  int64_t n = 1, total = 1, c[CNN_MAX_DIMS];
  for (int d = 0; d < ndim; d++) n *= ishape[d], total *= oshape[d];
  size_t es = cnn_dtype_size(dt);
  if (fake_enter("scatter", dev)) return -1;
  int rc = fake_dev_n("scatter", index, n, CNN_INT64) || fake_dev_n("scatter", src, n, dt) ||
                   fake_dev_n("scatter", out, total, dt)
               ? -1
               : 0;
  for (int64_t p = 0; rc == 0 && p < n; p++) {
    int64_t r = p;
    for (int d = ndim - 1; d >= 0; d--) c[d] = r % ishape[d], r /= ishape[d];
    if (ndim && (index[p] < 0 || index[p] >= oshape[dim])) {
      fake_core.set_error("scatter: index %lld out of range for size %lld reached the device",
                          (long long)index[p], (long long)oshape[dim]);
      rc = -1;
      break;
    }
    if (ndim) c[dim] = index[p];
    int64_t o = 0;
    for (int d = 0; d < ndim; d++) o = o * oshape[d] + c[d];
    memcpy((char *)out + o * (int64_t)es, (const char *)src + p * (int64_t)es, es);
  }
  fake_leave();
  return rc;
}

void fake_tensor_ops_register(cnn_backend *be) {
  be->sort = sort_entry;
  be->cumulate = cumulate;
  be->cumprod_backward = cumprod_backward;
  be->scatter = scatter;
}
