/*
 * join.c -- joining and indexing: cat, stack, index_select, gather, pad,
 * and the scatter-add used by the backward passes of gather and max(dim).
 *
 * Design.  cat/stack/pad allocate the result and copy each input into a
 * view of it (narrow/select) with cnn_copy_raw, which handles any strides
 * and casts to the common dtype (promotion uint8 < int64 < float32 <
 * float64).  index_select and gather (and their scatter-adds) are entries
 * of the device's backend (core/cpu/index.c on the CPU).  All indices are
 * int64 and 0-based here and are validated (range, on a host copy) before
 * anything is allocated.
 *
 * Autograd: cat and stack record one node whose inputs are the tensors
 * (at most CNN_NODE_MAX_INPUTS per node: longer lists that need gradients
 * are joined in groups, a tree of nodes); the backward of each piece is a
 * narrow/select of the gradient.  index_select and gather scatter-add the
 * gradient back; pad narrows it.
 *
 * Devices: the tensors of one call share a device and results live there.
 * cat/stack/pad need nothing more (cnn_copy_raw copies on the device).
 */
#include <stdlib.h>
#include <string.h>

#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "ops_internal.h"
#include "tensor_internal.h"

/* ---- helpers ----------------------------------------------------------------- */

static int dtype_rank(cnn_dtype dt) {
  return dt == CNN_UINT8     ? 0
         : dt == CNN_INT64   ? 1
         : dt == CNN_FLOAT32 ? 2
         : dt == CNN_FLOAT64 ? 3
                             : -1;
}

static int check_tensor(const char *op, const cnn_tensor *t) {
  if (!t) return cnn_set_error("%s: missing tensor argument", op), -1;
  if (dtype_rank(t->dtype) < 0)
    return cnn_set_error("%s: dtype %s not supported", op, cnn_dtype_name(t->dtype)), -1;
  return 0;
}

static int check_dim(const char *op, const cnn_tensor *t, int dim, int ndim) {
  char s[CNN_SHAPE_STR];
  if (dim < 0 || dim >= ndim) {
    cnn_set_error("%s: dimension %d out of range for input %s", op, dim + 1,
                  cnn_tensor_shape_str(t, s));
    return -1;
  }
  return 0;
}

static cnn_tensor *contig(cnn_tensor *t) {
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *c = cnn_contiguous(t);
  cnn_set_grad_enabled(prev);
  return c;
}

/* copy src into the view of dst given by narrow(dim, start, len) or, when
 * len < 0, select(dim, start) */
static int copy_into(cnn_tensor *dst, int dim, int64_t start, int64_t len, cnn_tensor *src) {
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *v = len < 0 ? cnn_select(dst, dim, start) : cnn_narrow(dst, dim, start, len);
  int rc = v ? cnn_copy_raw(v, src) : -1;
  cnn_tensor_release(v);
  cnn_set_grad_enabled(prev);
  return rc;
}

/* a contiguous copy of the slice of g (narrow or select) */
static cnn_tensor *slice_of(cnn_tensor *g, int dim, int64_t start, int64_t len) {
  cnn_tensor *v = len < 0 ? cnn_select(g, dim, start) : cnn_narrow(g, dim, start, len);
  cnn_tensor *c = v ? cnn_contiguous(v) : NULL;
  cnn_tensor_release(v);
  return c;
}

/* ---- cat and stack ------------------------------------------------------------------- */

/* ip[0] = dim, ip[1] = stack?, ip[2 + i] = offset of piece i, ip[8 + i] its length */
static int join_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  int dim = (int)n->ip[0];
  for (int i = 0; i < n->ninputs; i++) {
    if (!n->needs[i]) continue;
    cnn_tensor *s = slice_of(g, dim, n->ip[2 + i], n->ip[1] ? -1 : n->ip[8 + i]);
    if (!s) return -1;
    gin[i] = cnn_grad_to_input(n, i, s);
    cnn_tensor_release(s);
    if (!gin[i]) return -1;
  }
  return 0;
}

static int check_join(const char *op, int n, cnn_tensor *const *ts, int dim, bool stack,
                      cnn_dtype *dt) {
  char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
  if (n < 1) return cnn_set_error("%s: expects a non-empty list of tensors", op), -1;
  for (int i = 0; i < n; i++)
    if (check_tensor(op, ts[i]) || cnn_check_same_device(op, ts[0], ts[i])) return -1;
  const cnn_tensor *t0 = ts[0];
  if (check_dim(op, t0, dim, t0->ndim + (stack ? 1 : 0))) return -1;
  *dt = t0->dtype;
  for (int i = 1; i < n; i++) {
    const cnn_tensor *t = ts[i];
    bool ok = t->ndim == t0->ndim;
    for (int d = 0; ok && d < t->ndim; d++)
      if (t->shape[d] != t0->shape[d] && (stack || d != dim)) ok = false;
    if (!ok) {
      cnn_set_error("%s: tensor %d has shape %s but tensor 1 has %s%s", op, i + 1,
                    cnn_tensor_shape_str(t, s1), cnn_tensor_shape_str(t0, s2),
                    stack ? "" : " (they may differ only along the joined dimension)");
      return -1;
    }
    if (dtype_rank(t->dtype) > dtype_rank(*dt)) *dt = t->dtype;
  }
  if (!stack && t0->ndim == 0)
    return cnn_set_error("%s: zero-dimensional tensors cannot be concatenated", op), -1;
  return 0;
}

/* join validated tensors; records a node only for <= CNN_NODE_MAX_INPUTS */
static cnn_tensor *join_small(int n, cnn_tensor *const *ts, int dim, bool stack, cnn_dtype dt) {
  int64_t shape[CNN_MAX_DIMS];
  const cnn_tensor *t0 = ts[0];
  int nd = t0->ndim + (stack ? 1 : 0);
  for (int d = 0, k = 0; d < nd; d++) shape[d] = stack && d == dim ? n : t0->shape[k++];
  if (!stack) {
    shape[dim] = 0;
    for (int i = 0; i < n; i++) shape[dim] += ts[i]->shape[dim];
  }
  cnn_tensor *out = cnn_empty(nd, shape, dt, cnn_tensor_device(t0));
  if (!out) return NULL;
  int64_t at = 0;
  for (int i = 0; i < n; i++) {
    int64_t len = stack ? -1 : ts[i]->shape[dim];
    if (copy_into(out, dim, stack ? i : at, len, ts[i])) return cnn_tensor_release(out), NULL;
    at += stack ? 1 : len;
  }
  if (!cnn_dtype_is_float(dt) || n > CNN_NODE_MAX_INPUTS) return out; /* join() groups if needed */
  cnn_node *node =
      cnn_autograd_record(out, stack ? "StackBackward" : "CatBackward", join_backward, n, ts);
  if (node) {
    node->ip[0] = dim, node->ip[1] = stack;
    at = 0;
    for (int i = 0; i < n; i++) {
      node->ip[2 + i] = stack ? i : at;
      node->ip[8 + i] = stack ? -1 : ts[i]->shape[dim];
      at += stack ? 1 : ts[i]->shape[dim];
    }
  }
  return out;
}

/* Longer lists: join groups, then cat the groups (a stack of a group is
 * already stacked along dim, so the groups are concatenated). */
static cnn_tensor *join_list(int n, cnn_tensor *const *ts, int dim, bool stack, cnn_dtype dt) {
  if (n <= CNN_NODE_MAX_INPUTS) return join_small(n, ts, dim, stack, dt);
  int ng = (n + CNN_NODE_MAX_INPUTS - 1) / CNN_NODE_MAX_INPUTS;
  cnn_tensor **groups = calloc((size_t)ng, sizeof *groups);
  if (!groups) return cnn_set_error("cat: out of memory"), NULL;
  cnn_tensor *out = NULL;
  int ok = 1;
  for (int gi = 0; gi < ng && ok; gi++) {
    int lo = gi * CNN_NODE_MAX_INPUTS,
        cnt = n - lo < CNN_NODE_MAX_INPUTS ? n - lo : CNN_NODE_MAX_INPUTS;
    ok = (groups[gi] = join_small(cnt, ts + lo, dim, stack, dt)) != NULL;
  }
  if (ok) out = join_list(ng, groups, dim, false, dt);
  for (int gi = 0; gi < ng; gi++) cnn_tensor_release(groups[gi]);
  free(groups);
  return out;
}

static cnn_tensor *join(const char *op, int n, cnn_tensor *const *ts, int dim, bool stack) {
  cnn_dtype dt;
  if (check_join(op, n, ts, dim, stack, &dt)) return NULL;
  if (!cnn_any_requires_grad(n, ts)) return join_small(n, ts, dim, stack, dt);
  return join_list(n, ts, dim, stack, dt);
}

cnn_tensor *cnn_cat(int n, cnn_tensor *const *ts, int dim) {
  return join("cat", n, ts, dim, false);
}
cnn_tensor *cnn_stack(int n, cnn_tensor *const *ts, int dim) {
  return join("stack", n, ts, dim, true);
}

/* ---- scatter-add (backward of index_select, gather, max along a dim) ------------------ */

/* zeros(shape) with out[.., index[i..], ..] += src[i..] along dim; index
 * and src have the same shape (index already validated). */
cnn_tensor *cnn_scatter_add_new(int ndim, const int64_t *shape, int dim, cnn_tensor *index,
                                cnn_tensor *src) {
  cnn_tensor *out = cnn_zeros(ndim, shape, src->dtype, cnn_tensor_device(src));
  cnn_tensor *ic = out ? contig(index) : NULL, *sc = ic ? contig(src) : NULL;
  if (!sc) return cnn_tensor_release(out), cnn_tensor_release(ic), NULL;
  int rc = CNN_TENSOR_CALL(out, "gather", scatter_add, cnn_backend_dev(out), src->dtype, ndim,
                           shape, ic->shape, dim, cnn_tensor_data(ic), cnn_tensor_data(sc),
                           cnn_tensor_data(out));
  cnn_tensor_release(ic), cnn_tensor_release(sc);
  if (rc) return cnn_tensor_release(out), NULL;
  return out;
}

/* ---- index_select ---------------------------------------------------------------------- */

static void split3(const int64_t *shape, int ndim, int dim, int64_t *outer, int64_t *inner) {
  *outer = 1, *inner = 1;
  for (int d = 0; d < dim; d++) *outer *= shape[d];
  for (int d = dim + 1; d < ndim; d++) *inner *= shape[d];
}

int cnn_check_indices(const char *op, const cnn_tensor *x, int dim, cnn_tensor *ic) {
  char s[CNN_SHAPE_STR];
  if (cnn_check_same_device(op, x, ic)) return -1;
  cnn_tensor *host = cnn_to_device(ic, CNN_DEVICE_CPU); /* ic itself on the CPU */
  if (!host) return -1;
  const int64_t *ix = cnn_tensor_data(host);
  int64_t n = cnn_tensor_numel(ic), size = x->ndim ? x->shape[dim] : 1;
  int rc = 0;
  for (int64_t i = 0; rc == 0 && i < n; i++)
    if (ix[i] < 0 || ix[i] >= size) {
      cnn_set_error("%s: index %lld out of range for dimension %d of size %lld (input %s)", op,
                    (long long)ix[i], dim + 1, (long long)size, cnn_tensor_shape_str(x, s));
      rc = -1;
    }
  cnn_tensor_release(host);
  return rc;
}

static int index_select_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *idx = cnn_node_saved(n, 0);
  if (!idx) return -1;
  int dim = (int)n->ip[0], nd = n->in_ndim[0];
  cnn_tensor *gc = cnn_contiguous(g);
  cnn_tensor *out = gc ? cnn_zeros(nd, n->in_shape[0], g->dtype, cnn_tensor_device(g)) : NULL;
  if (!out) return cnn_tensor_release(gc), -1;
  int64_t outer, inner, k = cnn_tensor_numel(idx), size = n->in_shape[0][dim];
  split3(n->in_shape[0], nd, dim, &outer, &inner);
  int rc =
      CNN_TENSOR_CALL(out, "index_select", index_add, cnn_backend_dev(out), g->dtype, outer, size,
                      k, inner, cnn_tensor_data(gc), cnn_tensor_data(idx), cnn_tensor_data(out));
  cnn_tensor_release(gc);
  if (rc) return cnn_tensor_release(out), -1;
  gin[0] = out;
  return 0;
}

cnn_tensor *cnn_index_select(cnn_tensor *x, int dim, cnn_tensor *index) {
  char s[CNN_SHAPE_STR];
  if (check_tensor("index_select", x) || check_tensor("index_select", index)) return NULL;
  if (check_dim("index_select", x, dim, x->ndim ? x->ndim : 1)) return NULL;
  if (index->dtype != CNN_INT64 || index->ndim > 1)
    return cnn_set_error("index_select: index must be a 1-D int64 tensor, got %s %s",
                         cnn_dtype_name(index->dtype), cnn_tensor_shape_str(index, s)),
           NULL;
  cnn_tensor *ic = contig(index);
  if (!ic || cnn_check_indices("index_select", x, dim, ic)) return cnn_tensor_release(ic), NULL;
  int64_t shape[CNN_MAX_DIMS], k = cnn_tensor_numel(ic), outer, inner;
  memcpy(shape, x->shape, sizeof shape);
  if (x->ndim) shape[dim] = k;
  cnn_tensor *xc = contig(x);
  cnn_tensor *out = xc ? cnn_empty(x->ndim, shape, x->dtype, cnn_tensor_device(x)) : NULL;
  split3(x->shape, x->ndim, dim, &outer, &inner);
  if (out && CNN_TENSOR_CALL(out, "index_select", index_select, cnn_backend_dev(out), x->dtype,
                             outer, x->ndim ? x->shape[dim] : 1, k, inner, cnn_tensor_data(xc),
                             cnn_tensor_data(ic), cnn_tensor_data(out)))
    cnn_tensor_release(out), out = NULL;
  if (out) {
    cnn_node *n = cnn_dtype_is_float(x->dtype) ? cnn_autograd_record(out, "IndexSelectBackward",
                                                                     index_select_backward, 1, &x)
                                               : NULL;
    if (n) cnn_node_save(n, 0, ic), n->ip[0] = dim;
  }
  cnn_tensor_release(xc);
  cnn_tensor_release(ic);
  return out;
}

/* ---- gather ----------------------------------------------------------------------------- */

static int gather_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *idx = cnn_node_saved(n, 0);
  if (!idx) return -1;
  gin[0] = cnn_scatter_add_new(n->in_ndim[0], n->in_shape[0], (int)n->ip[0], idx, g);
  return gin[0] ? 0 : -1;
}

static int check_gather(const cnn_tensor *x, int dim, const cnn_tensor *index) {
  char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
  if (check_tensor("gather", x) || check_tensor("gather", index)) return -1;
  if (check_dim("gather", x, dim, x->ndim)) return -1;
  bool ok = index->dtype == CNN_INT64 && index->ndim == x->ndim;
  for (int d = 0; ok && d < x->ndim; d++)
    if (d != dim && index->shape[d] > x->shape[d]) ok = false;
  if (!ok) {
    cnn_set_error("gather: index (%s %s) must be int64 with the input's rank and no larger "
                  "than the input %s outside dimension %d",
                  cnn_dtype_name(index->dtype), cnn_tensor_shape_str(index, s1),
                  cnn_tensor_shape_str(x, s2), dim + 1);
    return -1;
  }
  return 0;
}

cnn_tensor *cnn_gather(cnn_tensor *x, int dim, cnn_tensor *index) {
  if (check_gather(x, dim, index)) return NULL;
  cnn_tensor *ic = contig(index);
  if (!ic || cnn_check_indices("gather", x, dim, ic)) return cnn_tensor_release(ic), NULL;
  cnn_tensor *out = cnn_empty(ic->ndim, ic->shape, x->dtype, cnn_tensor_device(x));
  if (!out) return cnn_tensor_release(ic), NULL;
  if (CNN_TENSOR_CALL(out, "gather", gather, cnn_backend_dev(out), x->dtype, x->ndim, ic->shape,
                      dim, cnn_tensor_data(x), x->stride, cnn_tensor_data(ic),
                      cnn_tensor_data(out)))
    return cnn_tensor_release(ic), cnn_tensor_release(out), NULL;
  cnn_node *node = cnn_dtype_is_float(x->dtype)
                       ? cnn_autograd_record(out, "GatherBackward", gather_backward, 1, &x)
                       : NULL;
  if (node) cnn_node_save(node, 0, ic), node->ip[0] = dim;
  cnn_tensor_release(ic);
  return out;
}

/* ---- pad ----------------------------------------------------------------------------------- */

/* Pads pair up from the last dim: pads[2k], pads[2k+1] = before/after of dim
 * ndim-1-k.  Negative pads crop.  For each padded dim: src_start, dst_start
 * and the overlap length. */
typedef struct {
  int ndim;
  int64_t out_shape[CNN_MAX_DIMS];
  int64_t src0[CNN_MAX_DIMS], dst0[CNN_MAX_DIMS], len[CNN_MAX_DIMS];
} pad_plan;

static int plan_pad(const cnn_tensor *x, int npads, const int64_t *pads, pad_plan *pl) {
  char s[CNN_SHAPE_STR];
  if (npads % 2 || npads / 2 > x->ndim)
    return cnn_set_error("pad: %d pad values for input %s (need an even number, at most 2 per "
                         "dimension)",
                         npads, cnn_tensor_shape_str(x, s)),
           -1;
  pl->ndim = x->ndim;
  for (int d = 0; d < x->ndim; d++) {
    int k = x->ndim - 1 - d;
    int64_t lo = 2 * k < npads ? pads[2 * k] : 0, hi = 2 * k < npads ? pads[2 * k + 1] : 0;
    pl->out_shape[d] = x->shape[d] + lo + hi;
    pl->src0[d] = lo < 0 ? -lo : 0;
    pl->dst0[d] = lo > 0 ? lo : 0;
    pl->len[d] = x->shape[d] - pl->src0[d] - (hi < 0 ? -hi : 0);
    if (pl->out_shape[d] < 0 || pl->len[d] < 0)
      return cnn_set_error("pad: padding (%lld, %lld) leaves dimension %d of input %s with a "
                           "negative size",
                           (long long)lo, (long long)hi, d + 1, cnn_tensor_shape_str(x, s)),
             -1;
  }
  return 0;
}

/* the overlap region of t: starts from `start` (src0 or dst0) */
static cnn_tensor *region(cnn_tensor *t, const pad_plan *pl, const int64_t *start) {
  cnn_tensor_retain(t);
  for (int d = 0; d < pl->ndim && t; d++) {
    cnn_tensor *v = cnn_narrow(t, d, start[d], pl->len[d]);
    cnn_tensor_release(t);
    t = v;
  }
  return t;
}

static int pad_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  pad_plan *pl = (pad_plan *)n->geometry;
  cnn_tensor *z = cnn_zeros(n->in_ndim[0], n->in_shape[0], g->dtype, cnn_tensor_device(g));
  cnn_tensor *dst = z ? region(z, pl, pl->src0) : NULL, *src = dst ? region(g, pl, pl->dst0) : NULL;
  int rc = src ? cnn_copy_raw(dst, src) : -1;
  cnn_tensor_release(dst);
  cnn_tensor_release(src);
  if (rc) return cnn_tensor_release(z), -1;
  gin[0] = z;
  return 0;
}

cnn_tensor *cnn_pad(cnn_tensor *x, int npads, const int64_t *pads, double value) {
  pad_plan pl;
  if (check_tensor("pad", x) || plan_pad(x, npads, pads, &pl)) return NULL;
  cnn_tensor *out = cnn_full(x->ndim, pl.out_shape, value, x->dtype, cnn_tensor_device(x));
  if (!out) return NULL;
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *dst = region(out, &pl, pl.dst0), *src = dst ? region(x, &pl, pl.src0) : NULL;
  int rc = src ? cnn_copy_raw(dst, src) : -1;
  cnn_set_grad_enabled(prev);
  cnn_tensor_release(dst);
  cnn_tensor_release(src);
  if (rc) return cnn_tensor_release(out), NULL;
  cnn_node *n = cnn_dtype_is_float(x->dtype)
                    ? cnn_autograd_record(out, "PadBackward", pad_backward, 1, &x)
                    : NULL;
  if (n) cnn_node_set_geometry(n, &pl, sizeof pl);
  return out;
}
