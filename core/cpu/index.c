/*
 * index.c -- the CPU backend's indexing entries: index_select and its
 * scatter-add (index_add), gather and its scatter-add (scatter_add), over
 * raw arrays with 0-based int64 indices that core/ops/join.c validated.
 * index_select copies contiguous slabs (outer x index x inner); gather
 * walks the index array and reads the input through its strides.
 * Accumulating outputs are zeroed by the caller.
 */
#include <stdint.h>
#include <string.h>

#include "cpu/backend_cpu.h"
#include "tensor_internal.h" /* cnn_load_double, cnn_store_double */

/* dst[di] += src[si] in dt.  Integers add exactly and wrap, as PyTorch's and
 * the CUDA backend's: int64 modulo 2^64 (through uint64, where overflow is
 * defined), uint8 modulo 256; the half types through double. */
static void add_elem(cnn_dtype dt, void *dst, int64_t di, const void *src, int64_t si) {
  switch (dt) {
  case CNN_FLOAT32: ((float *)dst)[di] += ((const float *)src)[si]; break;
  case CNN_FLOAT64: ((double *)dst)[di] += ((const double *)src)[si]; break;
  case CNN_INT64: {
    uint64_t sum = (uint64_t)((int64_t *)dst)[di] + (uint64_t)((const int64_t *)src)[si];
    memcpy((int64_t *)dst + di, &sum, sizeof sum); /* the bits, without an out-of-range cast */
    break;
  }
  case CNN_UINT8: ((uint8_t *)dst)[di] += ((const uint8_t *)src)[si]; break;
  default:
    cnn_store_double(dt, dst, di, cnn_load_double(dt, dst, di) + cnn_load_double(dt, src, si));
  }
}

/* out[o, j, i] = x[o, index[j], i]: x outer x size x inner, out outer x k x inner */
int cnn_cpu_index_select(int dev, cnn_dtype dt, int64_t outer, int64_t size, int64_t k,
                         int64_t inner, const void *x, const int64_t *ix, void *out) {
  (void)dev;
  size_t slab = (size_t)inner * cnn_dtype_size(dt);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < k; j++)
      memcpy((char *)out + (o * k + j) * slab, (const char *)x + (o * size + ix[j]) * slab, slab);
  return 0;
}

/* out[o, index[j], i] += g[o, j, i] */
int cnn_cpu_index_add(int dev, cnn_dtype dt, int64_t outer, int64_t size, int64_t k, int64_t inner,
                      const void *g, const int64_t *ix, void *out) {
  (void)dev;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < k; j++)
      for (int64_t i = 0; i < inner; i++)
        add_elem(dt, out, (o * size + ix[j]) * inner + i, g, (o * k + j) * inner + i);
  return 0;
}

/* out (contiguous, ishape) = x[.., index[..], ..] along dim; x strided */
int cnn_cpu_gather(int dev, cnn_dtype dt, int ndim, const int64_t *ishape, int dim, const void *x,
                   const int64_t *xstride, const int64_t *ix, void *out) {
  (void)dev;
  int64_t n = 1, pos[CNN_MAX_DIMS] = {0};
  for (int d = 0; d < ndim; d++) n *= ishape[d];
  size_t es = cnn_dtype_size(dt);
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0;
    for (int d = 0; d < ndim; d++) off += (d == dim ? ix[i] : pos[d]) * xstride[d];
    memcpy((char *)out + i * es, (const char *)x + off * (int64_t)es, es);
    for (int d = ndim - 1; d >= 0; d--) { /* next position in index's shape */
      if (++pos[d] < ishape[d]) break;
      pos[d] = 0;
    }
  }
  return 0;
}

/* out (contiguous, oshape) [.., index[i..], ..] += src[i..] along dim */
int cnn_cpu_scatter_add(int dev, cnn_dtype dt, int ndim, const int64_t *oshape,
                        const int64_t *ishape, int dim, const int64_t *ix, const void *src,
                        void *out) {
  (void)dev;
  int64_t n = 1, pos[CNN_MAX_DIMS] = {0};
  for (int d = 0; d < ndim; d++) n *= ishape[d];
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0, stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
      off += (d == dim ? ix[i] : pos[d]) * stride;
      stride *= oshape[d];
    }
    add_elem(dt, out, off, src, i);
    for (int d = ndim - 1; d >= 0; d--) {
      if (++pos[d] < ishape[d]) break;
      pos[d] = 0;
    }
  }
  return 0;
}

/* out (contiguous, oshape) [.., index[i..], ..] = src[i..] along dim (scatter);
 * in index order, so of repeated indices the last write wins */
int cnn_cpu_scatter(int dev, cnn_dtype dt, int ndim, const int64_t *oshape, const int64_t *ishape,
                    int dim, const int64_t *ix, const void *src, void *out) {
  (void)dev;
  int64_t n = 1, pos[CNN_MAX_DIMS] = {0};
  for (int d = 0; d < ndim; d++) n *= ishape[d];
  size_t es = cnn_dtype_size(dt);
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0, stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
      off += (d == dim ? ix[i] : pos[d]) * stride;
      stride *= oshape[d];
    }
    memcpy((char *)out + off * (int64_t)es, (const char *)src + i * (int64_t)es, es);
    for (int d = ndim - 1; d >= 0; d--) {
      if (++pos[d] < ishape[d]) break;
      pos[d] = 0;
    }
  }
  return 0;
}
