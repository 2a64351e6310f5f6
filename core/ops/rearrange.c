/*
 * rearrange.c -- flip, roll and repeat: copies that move whole entries
 * along dimensions.
 *
 * Design.  Each is a chain of index_select calls, one per dimension that
 * changes, with an index computed here on the host: flip reads position
 * size-1-j, roll (j - shift) mod size, repeat j mod size (reps * size
 * positions).  So they run on every device that has index_select, and
 * their gradients are index_select's (IndexSelectBackward: a scatter-add,
 * which sums the copies of repeat).  A call that changes nothing still
 * returns a new tensor (a clone), as PyTorch's.
 *
 * PyTorch's meaning: flip(dims) with no dimension twice; roll(shifts,
 * dims) with one shift per dim, or no dims: the flattened tensor rolled
 * and given its shape back; repeat(reps) with at least x's rank of counts
 * (extra ones are new leading dimensions), counts >= 0.
 */
#include <stdlib.h>
#include <string.h>

#include "cnn.h"
#include "ops_internal.h"

typedef int64_t (*position_fn)(int64_t j, int64_t size, int64_t param);

static int64_t flipped(int64_t j, int64_t size, int64_t param) {
  (void)param;
  return size - 1 - j;
}
static int64_t rolled(int64_t j, int64_t size, int64_t shift) {
  int64_t p = (j - shift % size) % size; /* |shift % size| < size: no overflow */
  return p < 0 ? p + size : p;
}
static int64_t repeated(int64_t j, int64_t size, int64_t param) {
  (void)param;
  return j % size;
}

/* index_select(x, dim, [pos(j) for j < n]) with the index on x's device */
static cnn_tensor *select_positions(const char *op, cnn_tensor *x, int dim, int64_t n,
                                    position_fn pos, int64_t param) {
  int64_t size = x->ndim ? x->shape[dim] : 1;
  int64_t *buf =
      (uint64_t)n < SIZE_MAX / sizeof *buf ? malloc((size_t)(n ? n : 1) * sizeof *buf) : NULL;
  if (!buf)
    return cnn_set_error("%s: out of memory for an index of %lld positions", op, (long long)n),
           NULL;
  for (int64_t j = 0; j < n; j++) buf[j] = pos(j, size, param);
  cnn_tensor *host = cnn_from_buffer(1, &n, CNN_INT64, buf);
  free(buf);
  cnn_tensor *ix = host ? cnn_to_device(host, cnn_tensor_device(x)) : NULL;
  cnn_tensor_release(host);
  cnn_tensor *out = ix ? cnn_index_select(x, dim, ix) : NULL;
  cnn_tensor_release(ix);
  return out;
}

/* x <- f(x) (x owned); NULL stays NULL */
static cnn_tensor *step(const char *op, cnn_tensor *x, int dim, int64_t n, position_fn pos,
                        int64_t param) {
  if (!x) return NULL;
  cnn_tensor *y = select_positions(op, x, dim, n, pos, param);
  cnn_tensor_release(x);
  return y;
}

static int check_input(const char *op, const cnn_tensor *x) {
  if (!x) return cnn_set_error("%s: missing tensor argument", op), -1;
  if (x->dtype >= CNN_FLOAT16)
    return cnn_set_error("%s: dtype %s is not supported", op, cnn_dtype_name(x->dtype)), -1;
  return 0;
}

/* ---- flip ---------------------------------------------------------------------------- */

static int check_flip_dims(const cnn_tensor *x, int ndims, const int *dims) {
  char s[CNN_SHAPE_STR];
  for (int i = 0; i < ndims; i++) {
    if (cnn_check_op_dim("flip", x, dims[i])) return -1;
    for (int k = 0; k < i; k++)
      if (dims[k] == dims[i])
        return cnn_set_error("flip: dimension %d appears more than once (input %s)", dims[i] + 1,
                             cnn_tensor_shape_str(x, s)),
               -1;
  }
  return 0;
}

cnn_tensor *cnn_flip(cnn_tensor *x, int ndims, const int *dims) {
  if (check_input("flip", x) || check_flip_dims(x, ndims, dims)) return NULL;
  if (ndims == 0) return cnn_clone(x);
  cnn_tensor_retain(x);
  for (int i = 0; i < ndims; i++) {
    int64_t size = x && x->ndim ? x->shape[dims[i]] : 1;
    x = step("flip", x, dims[i], size, flipped, 0);
  }
  return x;
}

/* ---- roll ---------------------------------------------------------------------------- */

static cnn_tensor *roll_flat(cnn_tensor *x, int64_t shift) {
  int64_t n = cnn_tensor_numel(x);
  cnn_tensor *flat = cnn_reshape(x, 1, &n);
  cnn_tensor *r = n ? step("roll", flat, 0, n, rolled, shift) : flat;
  cnn_tensor *out = r ? cnn_reshape(r, x->ndim, x->shape) : NULL;
  cnn_tensor_release(r);
  return out;
}

cnn_tensor *cnn_roll(cnn_tensor *x, int nshifts, const int64_t *shifts, int ndims,
                     const int *dims) {
  if (check_input("roll", x)) return NULL;
  if (nshifts < 1 || (ndims > 0 && ndims != nshifts) || (ndims == 0 && nshifts != 1))
    return cnn_set_error("roll: %d shifts for %d dimensions (give one shift per dimension, or one "
                         "shift and no dimensions to roll the flattened tensor)",
                         nshifts, ndims),
           NULL;
  for (int i = 0; i < ndims; i++)
    if (cnn_check_op_dim("roll", x, dims[i])) return NULL;
  if (ndims == 0) return roll_flat(x, shifts[0]);
  cnn_tensor *out = cnn_clone(x);
  for (int i = 0; i < ndims && out; i++) {
    int64_t size = x->ndim ? x->shape[dims[i]] : 1;
    if (size > 0 && shifts[i] % size != 0)
      out = step("roll", out, dims[i], size, rolled, shifts[i]);
  }
  return out;
}

/* ---- repeat -------------------------------------------------------------------------- */

static int check_repeat(const cnn_tensor *x, int n, const int64_t *reps) {
  char s[CNN_SHAPE_STR];
  if (n < x->ndim || n > CNN_MAX_DIMS)
    return cnn_set_error("repeat: %d counts for input %s (give at least one per dimension, at most "
                         "%d)",
                         n, cnn_tensor_shape_str(x, s), CNN_MAX_DIMS),
           -1;
  int64_t total = 1;
  for (int d = 0; d < n; d++) {
    int64_t size = d < n - x->ndim ? 1 : x->shape[d - (n - x->ndim)];
    if (reps[d] < 0 || (size && reps[d] > INT64_MAX / size / (total ? total : 1)))
      return cnn_set_error("repeat: count %lld for dimension %d of input %s is %s",
                           (long long)reps[d], d + 1, cnn_tensor_shape_str(x, s),
                           reps[d] < 0 ? "negative" : "too large"),
             -1;
    total *= reps[d] * size;
  }
  return 0;
}

cnn_tensor *cnn_repeat(cnn_tensor *x, int n, const int64_t *reps) {
  if (check_input("repeat", x) || check_repeat(x, n, reps)) return NULL;
  int64_t shape[CNN_MAX_DIMS] = {0};
  for (int d = 0; d < n; d++) shape[d] = d < n - x->ndim ? 1 : x->shape[d - (n - x->ndim)];
  cnn_tensor *out = cnn_reshape(x, n, shape);
  bool changed = false;
  for (int d = 0; d < n && out; d++)
    if (reps[d] != 1) changed = true, out = step("repeat", out, d, reps[d] * shape[d], repeated, 0);
  if (out && !changed) {
    cnn_tensor *c = cnn_clone(out);
    cnn_tensor_release(out);
    out = c;
  }
  return out;
}
