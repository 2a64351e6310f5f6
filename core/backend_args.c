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
#include <stdint.h>
#include <string.h>

int cnn_check_same_device(const char *op, const cnn_tensor *a, const cnn_tensor *b) {
  if (!a || !b || !a->storage || !b->storage) return 0;
  if (cnn_device_equal(a->storage->device, b->storage->device)) return 0;
  char da[32], db[32];
  cnn_set_error("%s: tensors on %s and %s", op, cnn_device_str(a->storage->device, da),
                cnn_device_str(b->storage->device, db));
  return -1;
}

/* The two below write in place (what cnn_be_args_of needs: no 72-byte
 * temporaries copied per operand); the unused tail is zero, as before.
 * Plain loops over at most CNN_MAX_DIMS dims: this file is built without
 * vectorisation (core/CMakeLists.txt), which gave each of them a prologue
 * longer than the loop. */
static inline void fill_shape(cnn_be_shape *s, int ndim, const int64_t *shape) {
  *s = (cnn_be_shape){.ndim = ndim};
  for (int d = 0; d < ndim; d++) s->shape[d] = shape[d];
}

static inline void fill_arg(cnn_be_arg *a, const cnn_tensor *t, const cnn_be_shape *s) {
  assert(s->ndim >= t->ndim); /* and cnn_tensor_header_valid(t), asserted by the callers */
  *a = (cnn_be_arg){.ptr = cnn_tensor_data(t)};
  cnn_strided_broadcast(s->ndim, t->ndim, t->shape, t->stride, a->stride);
}

cnn_be_shape cnn_be_shape_of(int ndim, const int64_t *shape) {
  cnn_be_shape s;
  fill_shape(&s, ndim, shape);
  return s;
}

cnn_be_arg cnn_be_arg_of(const cnn_tensor *t, const cnn_be_shape *s) {
  assert(cnn_tensor_header_valid(t));
  cnn_be_arg a;
  fill_arg(&a, t, s);
  return a;
}

/* Swaps dims i and j of the shape and of every operand. */
static void swap_dims(cnn_be_shape *s, int nops, cnn_be_arg *a, int i, int j) {
  int64_t t = s->shape[i];
  s->shape[i] = s->shape[j], s->shape[j] = t;
  for (int k = 0; k < nops; k++)
    t = a[k].stride[i], a[k].stride[i] = a[k].stride[j], a[k].stride[j] = t;
}

/* The dims reordered by the output's strides, largest first (insertion
 * sort, stable; a size-1 dim counts as outermost), so that the loops walk
 * the output in memory order and a channels-last output's (or any permuted
 * one's) dims coalesce as a contiguous one's do.  An elementwise entry
 * computes the same under any order of dims: only the order of its
 * writes changes. */
static void in_output_order(cnn_be_shape *s, int nops, cnn_be_arg *a) {
  for (int i = 1; i < s->ndim; i++)
    for (int j = i; j > 0; j--) {
      int64_t outer = s->shape[j - 1] == 1 ? INT64_MAX : a[0].stride[j - 1];
      int64_t inner = s->shape[j] == 1 ? INT64_MAX : a[0].stride[j];
      if (outer >= inner) break;
      swap_dims(s, nops, a, j - 1, j);
    }
}

/* All the arguments of an elementwise entry over ops[0]'s shape: the
 * same-device check of ops[1..nops) against ops[0], the shape, and each
 * operand's cnn_be_arg.  One call per op (the per-op path of
 * core/ops/elementwise.c) filling s and a in place, instead of 2 * nops + 1
 * calls across files each returning a 72-byte struct: on 16-element tensors
 * those were ~20% of x:add_(y). */
int cnn_be_args_of(const char *op, int nops, cnn_tensor *const *ops, cnn_be_shape *s,
                   cnn_be_arg *a) {
  for (int k = 0; k < nops; k++) { /* cnn_check_same_device only to word the error */
    assert(cnn_tensor_header_valid(ops[k]));
    if (!cnn_device_equal(ops[k]->storage->device, ops[0]->storage->device) &&
        cnn_check_same_device(op, ops[0], ops[k]))
      return -1;
  }
  fill_shape(s, ops[0]->ndim, ops[0]->shape);
  for (int k = 0; k < nops; k++) fill_arg(&a[k], ops[k], s);
  int last = s->ndim - 1;
  if (last > 0 && a[0].stride[last] != 1 && s->shape[last] > 1) in_output_order(s, nops, a);
  return 0;
}
