/*
 * collectives.c -- all_reduce, broadcast, all_gather, reduce_scatter and
 * barrier on tensors, over the table of the loaded module (dist.h).
 *
 * Every collective starts with the same small all-gather (through MPI, on
 * any backend): a descriptor of the call -- which collective, its op or
 * root, the dtype and shape.  When any rank's differs, every rank sets the
 * same error ("all_reduce: tensors differ between ranks: rank 0 has 3x4
 * float32, rank 1 has 4x3 float32") and returns: no rank proceeds into a
 * data collective that would hang or read past a buffer.  Local checks that
 * depend only on the descriptor come after it, so they fail on every rank
 * alike.
 *
 * Buffers: the module works on t's own memory when t is contiguous, on the
 * module's device and in a dtype it reduces; otherwise on a staged copy
 * (contiguous, on the host for MPI, float32 for float16/bfloat16
 * reductions) that is written back into t.  The module writes through no
 * autograd: the results bump t's version like any in-place write.  MEAN is
 * SUM divided by the world size, in the staged dtype (float only).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "tensor_internal.h"

typedef enum {
  CALL_ALL_REDUCE,
  CALL_BROADCAST,
  CALL_ALL_GATHER,
  CALL_REDUCE_SCATTER,
  CALL_BARRIER
} call_kind;
static const char *const call_names[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter",
                                         "barrier"};
static const char *const op_names[] = {"sum", "mean", "max", "min"};

/* What every rank must agree on (compared bytewise: zeroed first). */
typedef struct {
  int64_t kind, arg, dtype, ndim; /* arg: the reduction or the root */
  int64_t shape[CNN_MAX_DIMS];
} call_desc;

static call_desc describe(call_kind kind, int64_t arg, const cnn_tensor *t) {
  call_desc d;
  memset(&d, 0, sizeof d);
  d.kind = kind;
  d.arg = arg;
  if (t) {
    d.dtype = t->dtype;
    d.ndim = t->ndim;
    memcpy(d.shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  }
  return d;
}

static const char *desc_str(const call_desc *d, char *buf, size_t n) {
  char s[CNN_SHAPE_STR];
  snprintf(buf, n, "%s %s", cnn_shape_str((int)d->ndim, d->shape, s),
           cnn_dtype_name((cnn_dtype)d->dtype));
  return buf;
}

static const char *arg_str(const call_desc *d, char *buf, size_t n) {
  if (d->kind == CALL_BROADCAST)
    snprintf(buf, n, "root %lld", (long long)d->arg);
  else
    snprintf(buf, n, "'%s'", op_names[d->arg]);
  return buf;
}

static int mismatch(const char *op, const call_desc *a, const call_desc *b, int r) {
  char x[CNN_SHAPE_STR + 16], y[CNN_SHAPE_STR + 16];
  if (a->kind != b->kind)
    cnn_set_error("%s: ranks call different collectives: rank 0 calls %s, rank %d calls %s", op,
                  call_names[a->kind], r, call_names[b->kind]);
  else if (a->arg != b->arg)
    cnn_set_error("%s: ranks disagree: rank 0 passes %s, rank %d passes %s", op,
                  arg_str(a, x, sizeof x), r, arg_str(b, y, sizeof y));
  else
    cnn_set_error("%s: tensors differ between ranks: rank 0 has %s, rank %d has %s", op,
                  desc_str(a, x, sizeof x), r, desc_str(b, y, sizeof y));
  return -1;
}

/* The all-gather of descriptors: 0 when every rank makes the same call. */
static int check_same_call(call_kind kind, int64_t arg, const cnn_tensor *t) {
  const char *op = call_names[kind];
  int world = cnn_dist_get_info().world;
  call_desc d = describe(kind, arg, t);
  call_desc *all = malloc(sizeof d * (size_t)world);
  if (!all) return cnn_set_error("%s: out of memory", op), -1;
  int rc = cnn_dist_mpi()->all_gather(&d, all, (int64_t)sizeof d);
  for (int r = 1; rc == 0 && r < world; r++)
    if (memcmp(&all[r], &all[0], sizeof d) != 0) rc = mismatch(op, &all[0], &all[r], r);
  free(all);
  return rc;
}

/* The table for t, then the agreement of every rank. */
static const cnn_collectives *begin(call_kind kind, int64_t arg, const cnn_tensor *t) {
  const cnn_collectives *c = cnn_dist_table(call_names[kind], t);
  if (!c || check_same_call(kind, arg, t)) return NULL;
  return c;
}

static int check_op(const char *op, cnn_dtype dt, cnn_dist_op red) {
  if ((unsigned)red > CNN_DIST_MIN) return cnn_set_error("%s: unknown reduction", op), -1;
  if (red != CNN_DIST_MEAN || cnn_dtype_is_float(dt)) return 0;
  cnn_set_error("%s: 'mean' needs a floating dtype, got %s (use 'sum')", op, cnn_dtype_name(dt));
  return -1;
}

/* t itself when the module can use its memory, else a contiguous buffer on
 * the module's device (filled from t when copy_in), float32 for a
 * reduction the module cannot do in t's dtype.  New reference. */
static cnn_tensor *staged(cnn_tensor *t, const cnn_collectives *c, bool reduce, bool copy_in) {
  cnn_dtype dt = reduce && !c->has_dtype(t->dtype) ? CNN_FLOAT32 : t->dtype;
  cnn_device dev = c->device == CNN_CPU ? CNN_DEVICE_CPU : t->storage->device;
  if (dt == t->dtype && cnn_device_equal(dev, t->storage->device) && cnn_tensor_is_contiguous(t)) {
    cnn_tensor_retain(t);
    return t;
  }
  cnn_tensor *b = cnn_empty(t->ndim, t->shape, dt, dev);
  if (b && copy_in && cnn_copy_raw(b, t)) {
    cnn_tensor_release(b);
    return NULL;
  }
  return b;
}

static int write_back(cnn_tensor *t, cnn_tensor *b) {
  cnn_tensor_bump_version(t);
  return b == t ? 0 : cnn_copy_raw(t, b);
}

/* b /= world, outside autograd (b may be a parameter) */
static int divide_by_world(cnn_tensor *b) {
  cnn_tensor *w = cnn_scalar(cnn_dist_get_info().world, b->dtype, b->storage->device);
  cnn_tensor *d = cnn_detach(b);
  int rc = w && d ? cnn_binary_(CNN_OP_DIV, d, w) : -1;
  cnn_tensor_release(w);
  cnn_tensor_release(d);
  return rc;
}

static cnn_dist_op module_op(cnn_dist_op op) { return op == CNN_DIST_MEAN ? CNN_DIST_SUM : op; }

/* ---- the blocking collectives ------------------------------------------------------- */

int cnn_dist_all_reduce(cnn_tensor *t, cnn_dist_op op) {
  const cnn_collectives *c = begin(CALL_ALL_REDUCE, op, t);
  if (!c || check_op("all_reduce", t->dtype, op)) return -1;
  if (cnn_tensor_numel(t) == 0) return 0;
  cnn_tensor *b = staged(t, c, true, true);
  int rc = b ? c->all_reduce(cnn_tensor_data(b), cnn_tensor_numel(b), b->dtype, module_op(op)) : -1;
  if (rc == 0 && op == CNN_DIST_MEAN) rc = divide_by_world(b);
  if (rc == 0) rc = write_back(t, b);
  cnn_tensor_release(b);
  return rc;
}

int cnn_dist_broadcast(cnn_tensor *t, int root) {
  const cnn_collectives *c = begin(CALL_BROADCAST, root, t);
  if (!c) return -1;
  cnn_dist_info in = cnn_dist_get_info();
  if (root < 0 || root >= in.world) {
    cnn_set_error("broadcast: root %d out of range (ranks 0..%d)", root, in.world - 1);
    return -1;
  }
  if (cnn_tensor_numel(t) == 0) return 0;
  cnn_tensor *b = staged(t, c, false, in.rank == root);
  int rc = b ? c->broadcast(cnn_tensor_data(b), (int64_t)cnn_tensor_nbytes(b), root) : -1;
  if (rc == 0 && in.rank != root) rc = write_back(t, b);
  cnn_tensor_release(b);
  return rc;
}

cnn_tensor *cnn_dist_all_gather(cnn_tensor *t) {
  const cnn_collectives *c = begin(CALL_ALL_GATHER, 0, t);
  if (!c) return NULL;
  if (t->ndim + 1 > CNN_MAX_DIMS) {
    cnn_set_error("all_gather: the result of a %d-d tensor would have %d dims (at most %d)",
                  t->ndim, t->ndim + 1, CNN_MAX_DIMS);
    return NULL;
  }
  int64_t shape[CNN_MAX_DIMS] = {cnn_dist_get_info().world};
  memcpy(shape + 1, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  cnn_tensor *out = cnn_empty(t->ndim + 1, shape, t->dtype, t->storage->device);
  if (!out || cnn_tensor_numel(t) == 0) return out;
  cnn_tensor *src = staged(t, c, false, true), *dst = staged(out, c, false, false);
  int rc = src && dst ? c->all_gather(cnn_tensor_data(src), cnn_tensor_data(dst),
                                      (int64_t)cnn_tensor_nbytes(src))
                      : -1;
  if (rc == 0) rc = write_back(out, dst);
  cnn_tensor_release(src);
  cnn_tensor_release(dst);
  if (rc) cnn_tensor_release(out);
  return rc ? NULL : out;
}

static int check_scatter_shape(const cnn_tensor *t, int world) {
  if (t->ndim >= 1 && t->shape[0] % world == 0) return 0;
  char s[CNN_SHAPE_STR];
  cnn_set_error("reduce_scatter: the first dimension of %s must be a multiple of the world size "
                "(%d)",
                cnn_tensor_shape_str(t, s), world);
  return -1;
}

cnn_tensor *cnn_dist_reduce_scatter(cnn_tensor *t, cnn_dist_op op) {
  const cnn_collectives *c = begin(CALL_REDUCE_SCATTER, op, t);
  int world = cnn_dist_get_info().world;
  if (!c || check_op("reduce_scatter", t->dtype, op) || check_scatter_shape(t, world)) return NULL;
  int64_t shape[CNN_MAX_DIMS];
  memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  shape[0] /= world;
  cnn_tensor *out = cnn_empty(t->ndim, shape, t->dtype, t->storage->device);
  if (!out || cnn_tensor_numel(out) == 0) return out;
  cnn_tensor *src = staged(t, c, true, true), *dst = staged(out, c, true, false);
  int rc = src && dst ? c->reduce_scatter(cnn_tensor_data(src), cnn_tensor_data(dst),
                                          cnn_tensor_numel(dst), dst->dtype, module_op(op))
                      : -1;
  if (rc == 0 && op == CNN_DIST_MEAN) rc = divide_by_world(dst);
  if (rc == 0) rc = write_back(out, dst);
  cnn_tensor_release(src);
  cnn_tensor_release(dst);
  if (rc) cnn_tensor_release(out);
  return rc ? NULL : out;
}

int cnn_dist_barrier(void) {
  const cnn_collectives *c = begin(CALL_BARRIER, 0, NULL);
  return c ? c->barrier() : -1;
}

/* ---- a started all-reduce ---------------------------------------------------------------- */

struct cnn_dist_work {
  cnn_tensor *t;   /* the caller's tensor (owned reference) */
  cnn_tensor *buf; /* what the module reduces: t or a staged copy (owned) */
  const cnn_collectives *c;
  cnn_dist_request *req; /* NULL once finished */
  cnn_dist_op op;
  int rc; /* the outcome, once finished */
};

cnn_dist_work *cnn_dist_all_reduce_start(cnn_tensor *t, cnn_dist_op op) {
  const cnn_collectives *c = begin(CALL_ALL_REDUCE, op, t);
  if (!c || check_op("all_reduce", t->dtype, op)) return NULL;
  cnn_dist_work *w = calloc(1, sizeof *w);
  if (!w) return cnn_set_error("all_reduce: out of memory"), NULL;
  cnn_tensor_retain(t);
  *w = (cnn_dist_work){.t = t, .c = c, .op = op};
  if (cnn_tensor_numel(t) == 0) return w;
  w->buf = staged(t, c, true, true);
  if (w->buf && c->all_reduce_start(cnn_tensor_data(w->buf), cnn_tensor_numel(w->buf),
                                    w->buf->dtype, module_op(op), &w->req) == 0)
    return w;
  cnn_dist_work_free(w);
  return NULL;
}

int cnn_dist_work_wait(cnn_dist_work *w) {
  if (!w->req) return w->rc;
  int rc = w->c->wait(w->req);
  w->req = NULL;
  if (rc == 0 && w->op == CNN_DIST_MEAN) rc = divide_by_world(w->buf);
  if (rc == 0) rc = write_back(w->t, w->buf);
  return w->rc = rc;
}

int cnn_dist_work_test(cnn_dist_work *w, bool *done) {
  *done = true;
  if (!w->req) return w->rc;
  if (w->c->test(w->req, done)) return -1;
  return *done ? cnn_dist_work_wait(w) : 0;
}

/* After MPI is finalized a pending request can no longer be waited for (a
 * script that exits without waiting): it is abandoned, not touched. */
void cnn_dist_work_free(cnn_dist_work *w) {
  if (!w) return;
  if (w->req && cnn_dist_is_initialized()) cnn_dist_work_wait(w);
  cnn_tensor_release(w->buf);
  cnn_tensor_release(w->t);
  free(w);
}
