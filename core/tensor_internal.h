/*
 * tensor_internal.h -- core-internal helpers shared by the tensor files:
 * shape validation, tensor headers over storages, element load/store by
 * dtype, and broadcast-aware strides.  Not part of the public API.
 */
#ifndef CNN_TENSOR_INTERNAL_H
#define CNN_TENSOR_INTERNAL_H

#include "cnn.h"
#include "elementwise_ops.h"

#include <string.h>

/* numel of a shape, or -1 with an error naming `op` (negative sizes,
 * too many dims, overflow). */
int64_t cnn_check_shape(const char *op, int ndim, const int64_t *shape);
void cnn_set_contiguous_strides(cnn_tensor *t);
/* A new contiguous tensor header over `s` (takes over the reference). */
cnn_tensor *cnn_tensor_wrap(cnn_storage *s, int ndim, const int64_t *shape, cnn_dtype dt);
/* A new header sharing base's storage, shape, strides and offset; no grad. */
cnn_tensor *cnn_tensor_view_of(cnn_tensor *base);
/* Strides of `t` broadcast to (ndim, shape): 0 on broadcast dims.  The
 * caller has checked that the shapes broadcast. */
void cnn_broadcast_strides(const cnn_tensor *t, int ndim, const int64_t *shape, int64_t *strides);
/* Element offset (in elements, from the storage start) of row-major index i. */
int64_t cnn_offset_of(const cnn_tensor *t, int64_t i);
/* The tensor invariants (tensor.c): for assert() and the tests. */
bool cnn_tensor_valid(const cnn_tensor *t);
/* Its O(1) part (a live header and storage, a known dtype, 0..CNN_MAX_DIMS
 * dims): the per-op assert of cnn_be_args_of, where the full check (a loop
 * and two calls) was ~7% of x:add_(y) on 16 elements.  The strides are
 * checked in full where headers are made (cnn_tensor_wrap) and copied. */
static inline bool cnn_tensor_header_valid(const cnn_tensor *t) {
  return t && t->refcount >= 1 && t->storage && t->storage->refcount >= 1 &&
         (unsigned)t->dtype < CNN_NDTYPES && t->ndim >= 0 && t->ndim <= CNN_MAX_DIMS;
}
/* A plain alias of t that keeps the graph (AliasBackward; the 0-d transpose). */
cnn_tensor *cnn_detach_keep_graph(cnn_tensor *t);
/* Copy without autograd and without the in-place checks (broadcast + cast). */
int cnn_copy_raw(cnn_tensor *dst, cnn_tensor *src);
/* a page-locked CPU storage (the CUDA backend's alloc_pinned; storage.c) */
cnn_storage *cnn_storage_new_pinned(size_t nbytes);

uint16_t cnn_float_to_half(float f);
float cnn_half_to_float(uint16_t h);
uint16_t cnn_float_to_bf16(float f);
float cnn_bf16_to_float(uint16_t h);

static inline double cnn_load_double(cnn_dtype dt, const void *base, int64_t i) {
  switch (dt) {
  case CNN_FLOAT32: return ((const float *)base)[i];
  case CNN_FLOAT64: return ((const double *)base)[i];
  case CNN_INT64: return (double)((const int64_t *)base)[i];
  case CNN_UINT8: return ((const uint8_t *)base)[i];
  case CNN_FLOAT16: return cnn_half_to_float(((const uint16_t *)base)[i]);
  case CNN_BFLOAT16: return cnn_bf16_to_float(((const uint16_t *)base)[i]);
  default: return 0;
  }
}

static inline void cnn_store_double(cnn_dtype dt, void *base, int64_t i, double v) {
  switch (dt) {
  case CNN_FLOAT32: ((float *)base)[i] = (float)v; break;
  case CNN_FLOAT64: ((double *)base)[i] = v; break;
  case CNN_INT64: ((int64_t *)base)[i] = cnn_saturate_i64(v); break;
  case CNN_UINT8: ((uint8_t *)base)[i] = (uint8_t)cnn_saturate_i64(v); break; /* wraps modulo 256 */
  case CNN_FLOAT16: ((uint16_t *)base)[i] = cnn_float_to_half((float)v); break;
  case CNN_BFLOAT16: ((uint16_t *)base)[i] = cnn_float_to_bf16((float)v); break;
  default: break;
  }
}
#endif
