/*
 * backend_args.c -- what the ops share to hand tensors to a backend entry:
 * the same-device check and the strided arguments (cnn_be_arg) of an
 * elementwise entry, broadcast to the output's shape (core/strided.h).
 *
 * Apart from backend.c (the tables and the CUDA module) because these read
 * tensors: backend.c stays below tensors, so storage.c, which allocates
 * through it, depends on nothing that knows a tensor.
 */
#include "backend.h"
#include "strided.h"
#include "tensor_internal.h"

#include <assert.h>
#include <string.h>

int cnn_check_same_device(const char *op, const cnn_tensor *a, const cnn_tensor *b) {
  if (!a || !b || !a->storage || !b->storage) return 0;
  if (cnn_device_equal(a->storage->device, b->storage->device)) return 0;
  char da[32], db[32];
  cnn_set_error("%s: tensors on %s and %s", op, cnn_device_str(a->storage->device, da),
                cnn_device_str(b->storage->device, db));
  return -1;
}

cnn_be_shape cnn_be_shape_of(int ndim, const int64_t *shape) {
  cnn_be_shape s = {.ndim = ndim};
  if (ndim > 0) memcpy(s.shape, shape, sizeof(int64_t) * (size_t)ndim);
  return s;
}

cnn_be_arg cnn_be_arg_of(const cnn_tensor *t, const cnn_be_shape *s) {
  assert(cnn_tensor_valid(t) && s->ndim >= t->ndim);
  cnn_be_arg a = {.ptr = cnn_tensor_data(t)};
  cnn_strided_broadcast(s->ndim, t->ndim, t->shape, t->stride, a.stride);
  return a;
}
