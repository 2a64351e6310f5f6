/*
 * fake_cuda_index.c -- index ops of the fake device: index_select and its
 * backward index_add, gather and its backward scatter_add.
 *
 *   index_select: out[o, j, i] = x[o, index[j], i]   (x outer x size x inner,
 *                 out outer x k x inner)
 *   index_add:    out[o, index[j], i] += g[o, j, i]  (out zeroed by core)
 *   gather:       out[p] = x[p with coordinate `dim` replaced by index[p]],
 *                 out and index contiguous over ishape, x strided (xstride)
 *   scatter_add:  out[p with `dim` replaced by index[p]] += src[p], out
 *                 contiguous over oshape (zeroed by core), src over ishape;
 *                 float32/float64 (sums in double), int64 (exact, wrapping
 *                 in two's complement) and uint8 (modulo 256)
 * Indices are 0-based; core validated them, and they are checked again here
 * (an index outside the dimension fails the op instead of corrupting
 * memory).  Sums in double.
 */
#include <string.h>

#include "fake_cuda.h"

static int bad_index(const char *op, int64_t v, int64_t size) {
  fake_core.set_error("%s: index %lld out of range for size %lld reached the device", op,
                      (long long)v, (long long)size);
  return -1;
}

static int check_indices(const char *op, const int64_t *index, int64_t k, int64_t size) {
  if (fake_dev_n(op, index, k, CNN_INT64)) return -1;
  for (int64_t j = 0; j < k; j++)
    if (index[j] < 0 || index[j] >= size) return bad_index(op, index[j], size);
  return 0;
}

static int index_select(int dev, cnn_dtype dt, int64_t outer, int64_t size, int64_t k,
                        int64_t inner, const void *x, const int64_t *index, void *out) {
  int64_t es = (int64_t)cnn_dtype_size(dt);
  if (fake_enter("index_select", dev)) return -1;
  int rc = check_indices("index_select", index, k, size) ||
                   fake_dev_n("index_select", x, outer * size * inner, dt) ||
                   fake_dev_n("index_select", out, outer * k * inner, dt)
               ? -1
               : 0;
  for (int64_t o = 0; rc == 0 && o < outer; o++)
    for (int64_t j = 0; j < k; j++)
      for (int64_t i = 0; i < inner; i++)
        memcpy((char *)out + ((o * k + j) * inner + i) * es,
               (const char *)x + ((o * size + index[j]) * inner + i) * es, (size_t)es);
  fake_leave();
  return rc;
}

static int index_add(int dev, cnn_dtype dt, int64_t outer, int64_t size, int64_t k, int64_t inner,
                     const void *g, const int64_t *index, void *out) {
  if (fake_float_dt("index_select", dt, false) || fake_enter("index_select", dev)) return -1;
  int rc = check_indices("index_select", index, k, size) ||
                   fake_dev_n("index_select", g, outer * k * inner, dt) ||
                   fake_dev_n("index_select", out, outer * size * inner, dt)
               ? -1
               : 0;
  for (int64_t o = 0; rc == 0 && o < outer; o++)
    for (int64_t j = 0; j < k; j++)
      for (int64_t i = 0; i < inner; i++) {
        int64_t d = (o * size + index[j]) * inner + i;
        fake_store(dt, out, d, fake_load(dt, out, d) + fake_load(dt, g, (o * k + j) * inner + i));
      }
  fake_leave();
  return rc;
}

/* ---- gather / scatter_add ---------------------------------------------------------------- */

static int64_t count(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

/* coordinates of row-major position p over shape */
static void coords(int ndim, const int64_t *shape, int64_t p, int64_t *c) {
  for (int d = ndim - 1; d >= 0; d--) c[d] = p % shape[d], p /= shape[d];
}

static int gather(int dev, cnn_dtype dt, int ndim, const int64_t *ishape, int dim, const void *x,
                  const int64_t *xstride, const int64_t *index, void *out) {
  int64_t n = count(ndim, ishape), c[CNN_MAX_DIMS];
  size_t es = cnn_dtype_size(dt);
  if (fake_enter("gather", dev)) return -1;
  int rc = fake_dev_n("gather", index, n, CNN_INT64) || fake_dev_n("gather", out, n, dt) ? -1 : 0;
  for (int64_t p = 0; rc == 0 && p < n; p++) {
    coords(ndim, ishape, p, c);
    c[dim] = index[p];
    int64_t o = 0;
    for (int d = 0; d < ndim; d++) o += c[d] * xstride[d];
    const char *src = (const char *)x + o * (int64_t)es;
    if (index[p] < 0 ||
        (rc = fake_dev("gather", src, es))) { /* the x element must be device memory */
      if (index[p] < 0) rc = bad_index("gather", index[p], -1);
      break;
    }
    memcpy((char *)out + p * (int64_t)es, src, es); /* exact for every dtype */
  }
  fake_leave();
  return rc;
}

/* out[o] += src[p] in dt: integers exactly (int64 wraps, uint8 modulo 256) */
static void add_at(cnn_dtype dt, void *out, int64_t o, const void *src, int64_t p) {
  if (dt == CNN_INT64)
    ((int64_t *)out)[o] =
        (int64_t)((uint64_t)((int64_t *)out)[o] + (uint64_t)((const int64_t *)src)[p]);
  else if (dt == CNN_UINT8)
    ((uint8_t *)out)[o] = (uint8_t)(((uint8_t *)out)[o] + ((const uint8_t *)src)[p]);
  else
    fake_store(dt, out, o, fake_load(dt, out, o) + fake_load(dt, src, p));
}

static int scatter_add(int dev, cnn_dtype dt, int ndim, const int64_t *oshape,
                       const int64_t *ishape, int dim, const int64_t *index, const void *src,
                       void *out) {
  int64_t n = count(ndim, ishape), c[CNN_MAX_DIMS];
  if (dt != CNN_INT64 && dt != CNN_UINT8 && fake_float_dt("scatter_add", dt, false)) return -1;
  if (fake_enter("scatter_add", dev)) return -1;
  int rc = fake_dev_n("scatter_add", index, n, CNN_INT64) ||
                   fake_dev_n("scatter_add", src, n, dt) ||
                   fake_dev_n("scatter_add", out, count(ndim, oshape), dt)
               ? -1
               : 0;
  for (int64_t p = 0; rc == 0 && p < n; p++) {
    coords(ndim, ishape, p, c);
    if (index[p] < 0 || index[p] >= oshape[dim]) {
      rc = bad_index("scatter_add", index[p], oshape[dim]);
      break;
    }
    c[dim] = index[p];
    int64_t o = 0;
    for (int d = 0; d < ndim; d++) o = o * oshape[d] + c[d];
    add_at(dt, out, o, src, p);
  }
  fake_leave();
  return rc;
}

void fake_index_register(cnn_backend *be) {
  be->index_select = index_select;
  be->index_add = index_add;
  be->gather = gather;
  be->scatter_add = scatter_add;
}
