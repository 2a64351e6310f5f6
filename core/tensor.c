/*
 * tensor.c -- tensor lifetime, facts and creation.
 *
 * A tensor is a strided view (shape, strides, offset in elements) over a
 * refcounted storage.  Invariants: 0 <= ndim <= CNN_MAX_DIMS; every shape
 * entry >= 0; numel fits in int64; for numel > 0 the largest reachable
 * element lies inside the storage.  A tensor owns one storage reference,
 * its .grad and its grad_fn node; hooks are freed with it.
 */
#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "tensor_internal.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- lifetime ------------------------------------------------------------ */

void cnn_tensor_retain(cnn_tensor *t) { __atomic_add_fetch(&t->refcount, 1, __ATOMIC_RELAXED); }

void cnn_tensor_release(cnn_tensor *t) {
  if (!t || __atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
  if (t->grad_fn) {
    if (t->grad_fn->output == t) t->grad_fn->output = NULL;
    cnn_node_release(t->grad_fn);
  }
  cnn_tensor_release(t->grad);
  cnn_hook_list_free(t->hooks);
  cnn_storage_release(t->storage);
  free(t);
}

int cnn_tensor_set_(cnn_tensor *t, cnn_tensor *src) {
  if (t->grad_fn) return cnn_set_error("set_: only a leaf tensor can take new data"), -1;
  if (t->requires_grad && cnn_grad_enabled())
    return cnn_set_error("set_: a leaf tensor that requires grad takes new data only "
                         "inside cnn.no_grad"),
           -1;
  if (t == src) return 0;
  cnn_storage_retain(src->storage);
  cnn_storage_release(t->storage);
  t->storage = src->storage;
  t->offset = src->offset, t->ndim = src->ndim, t->dtype = src->dtype;
  memcpy(t->shape, src->shape, sizeof t->shape);
  memcpy(t->stride, src->stride, sizeof t->stride);
  t->version = src->storage->version;
  cnn_tensor *g = t->grad;
  if (g && (!cnn_same_shape(g, t) || g->dtype != t->dtype ||
            !cnn_device_equal(cnn_tensor_device(g), cnn_tensor_device(t))))
    cnn_tensor_release(g), t->grad = NULL;
  return 0;
}

void cnn_tensor_bump_version(cnn_tensor *t) {
  if (!t) return;
  t->version = ++t->storage->version;
}

/* ---- facts ---------------------------------------------------------------- */

int64_t cnn_tensor_numel(const cnn_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

size_t cnn_tensor_nbytes(const cnn_tensor *t) {
  return (size_t)cnn_tensor_numel(t) * cnn_dtype_size(t->dtype);
}

bool cnn_tensor_is_contiguous(const cnn_tensor *t) {
  if (cnn_tensor_numel(t) == 0) return true; /* nothing to lay out */
  int64_t expected = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->stride[i] != expected) return false;
    expected *= t->shape[i];
  }
  return true;
}

cnn_device cnn_tensor_device(const cnn_tensor *t) { return t->storage->device; }

const char *cnn_shape_str(int ndim, const int64_t *shape, char *buf) {
  if (ndim == 0) return strcpy(buf, "scalar");
  size_t used = 0;
  buf[0] = 0;
  for (int i = 0; i < ndim && used < CNN_SHAPE_STR - 24; i++)
    used += snprintf(buf + used, CNN_SHAPE_STR - used, i ? "x%lld" : "%lld", (long long)shape[i]);
  return buf;
}

const char *cnn_tensor_shape_str(const cnn_tensor *t, char *buf) {
  return cnn_shape_str(t->ndim, t->shape, buf);
}

bool cnn_same_shape(const cnn_tensor *a, const cnn_tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

/* ---- creation ------------------------------------------------------------ */

int64_t cnn_check_shape(const char *op, int ndim, const int64_t *shape) {
  if (ndim < 0 || ndim > CNN_MAX_DIMS) {
    cnn_set_error("%s: %d dimensions (at most %d supported)", op, ndim, CNN_MAX_DIMS);
    return -1;
  }
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) {
      cnn_set_error("%s: size %lld of dimension %d is negative", op, (long long)shape[i], i + 1);
      return -1;
    }
    if (shape[i] && n > INT64_MAX / 16 / shape[i]) {
      cnn_set_error("%s: sizes overflow (the product of the sizes is too large)", op);
      return -1;
    }
    n *= shape[i];
  }
  return n;
}

void cnn_set_contiguous_strides(cnn_tensor *t) {
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    t->stride[i] = s;
    s *= t->shape[i] ? t->shape[i] : 1;
  }
}

/* The invariants of a tensor header (SQLite's style: for assert()s and the
 * unit tests; asserted where headers are made -- cnn_tensor_wrap -- and
 * where a copy is made -- copy.c; where a tensor is handed to a kernel --
 * cnn_be_arg_of, per op -- only its O(1) part, cnn_tensor_header_valid;
 * every build keeps assert()
 * on: CMakeLists.txt's RelWithDebInfo flags leave out -DNDEBUG): a live refcount, a known
 * dtype, 0..CNN_MAX_DIMS dims of non-negative sizes, non-negative strides
 * and offset, and every element it can address inside its storage. */
bool cnn_tensor_valid(const cnn_tensor *t) {
  if (!t || t->refcount < 1 || !t->storage || t->storage->refcount < 1) return false;
  if ((unsigned)t->dtype >= CNN_NDTYPES || t->ndim < 0 || t->ndim > CNN_MAX_DIMS) return false;
  if (t->offset < 0) return false;
  int64_t last = t->offset, numel = 1;
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] < 0 || t->stride[d] < 0) return false;
    numel *= t->shape[d];
    if (t->shape[d] > 0) last += (t->shape[d] - 1) * t->stride[d];
  }
  if (numel == 0) return true;
  return (size_t)(last + 1) * cnn_dtype_size(t->dtype) <= t->storage->nbytes;
}

cnn_tensor *cnn_tensor_wrap(cnn_storage *s, int ndim, const int64_t *shape, cnn_dtype dt) {
  cnn_tensor *t = calloc(1, sizeof *t);
  if (!t) return cnn_storage_release(s), cnn_set_error("out of memory: tensor header"), NULL;
  t->refcount = 1;
  t->storage = s;
  t->ndim = ndim;
  t->dtype = dt;
  if (ndim) memcpy(t->shape, shape, ndim * sizeof *shape);
  cnn_set_contiguous_strides(t);
  assert(!s || cnn_tensor_valid(t));
  return t;
}

cnn_tensor *cnn_tensor_view_of(cnn_tensor *base) {
  cnn_tensor *t = calloc(1, sizeof *t);
  if (!t) return cnn_set_error("out of memory: tensor header"), NULL;
  *t = (cnn_tensor){.refcount = 1,
                    .storage = base->storage,
                    .offset = base->offset,
                    .ndim = base->ndim,
                    .dtype = base->dtype};
  memcpy(t->shape, base->shape, sizeof t->shape);
  memcpy(t->stride, base->stride, sizeof t->stride);
  cnn_storage_retain(base->storage);
  return t;
}

cnn_tensor *cnn_empty(int ndim, const int64_t *shape, cnn_dtype dt, cnn_device dev) {
  int64_t n = cnn_check_shape("empty", ndim, shape);
  if (n < 0) return NULL;
  if (dt >= CNN_NDTYPES) return cnn_set_error("empty: unknown dtype %d", (int)dt), NULL;
  cnn_storage *s = cnn_storage_new((size_t)n * cnn_dtype_size(dt), dev);
  return s ? cnn_tensor_wrap(s, ndim, shape, dt) : NULL;
}

cnn_tensor *cnn_full(int ndim, const int64_t *shape, double value, cnn_dtype dt, cnn_device dev) {
  cnn_tensor *t = cnn_empty(ndim, shape, dt, dev);
  if (t && cnn_fill_(t, value) != 0) cnn_tensor_release(t), t = NULL;
  return t;
}

cnn_tensor *cnn_zeros(int ndim, const int64_t *shape, cnn_dtype dt, cnn_device dev) {
  return cnn_full(ndim, shape, 0.0, dt, dev);
}

cnn_tensor *cnn_scalar(double value, cnn_dtype dt, cnn_device dev) {
  return cnn_full(0, NULL, value, dt, dev);
}

cnn_tensor *cnn_from_buffer(int ndim, const int64_t *shape, cnn_dtype dt, const void *src) {
  cnn_tensor *t = cnn_empty(ndim, shape, dt, CNN_DEVICE_CPU);
  if (t) memcpy(t->storage->data, src, cnn_tensor_nbytes(t));
  return t;
}

static cnn_tensor *fill_sequence(const char *op, int64_t n, double start, double step,
                                 cnn_dtype dt) {
  if (n < 0 || n > ((int64_t)1 << 40)) {
    cnn_set_error("%s: %lld elements is not a valid length", op, (long long)n);
    return NULL;
  }
  cnn_tensor *t = cnn_empty(1, &n, dt, CNN_DEVICE_CPU);
  for (int64_t i = 0; t && i < n; i++)
    cnn_store_double(t->dtype, t->storage->data, i, start + step * i);
  return t;
}

cnn_tensor *cnn_arange(double start, double end, double step, cnn_dtype dt) {
  if (!(step != 0) || !isfinite(start) || !isfinite(end) || !isfinite(step)) {
    cnn_set_error("arange: start %g, end %g and step %g must be finite, step non-zero", start, end,
                  step);
    return NULL;
  }
  double count = ceil((end - start) / step);
  return fill_sequence("arange", count > 0 ? (int64_t)count : 0, start, step, dt);
}

cnn_tensor *cnn_linspace(double start, double end, int64_t steps, cnn_dtype dt) {
  if (steps < 0 || steps > ((int64_t)1 << 40)) {
    cnn_set_error("linspace: steps %lld is not a valid count", (long long)steps);
    return NULL;
  }
  if (!isfinite(start) || !isfinite(end)) {
    cnn_set_error("linspace: start %g and end %g must be finite", start, end);
    return NULL;
  }
  cnn_tensor *t = cnn_empty(1, &steps, dt, CNN_DEVICE_CPU);
  /* interpolate rather than step: (end - start) may overflow a double */
  for (int64_t i = 0; t && i < steps; i++) {
    double f = steps > 1 ? (double)i / (double)(steps - 1) : 0;
    cnn_store_double(dt, t->storage->data, i, start * (1 - f) + end * f);
  }
  return t;
}

cnn_tensor *cnn_eye(int64_t n, int64_t m, cnn_dtype dt) {
  int64_t shape[2] = {n, m < 0 ? n : m};
  cnn_tensor *t = cnn_zeros(2, shape, dt, CNN_DEVICE_CPU);
  for (int64_t i = 0; t && i < shape[0] && i < shape[1]; i++)
    cnn_store_double(dt, t->storage->data, i * shape[1] + i, 1.0);
  return t;
}
