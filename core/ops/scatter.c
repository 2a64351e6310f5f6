/*
 * scatter.c -- scatter and scatter_add (out of place and in place), and
 * one_hot, which is a scatter of ones.
 *
 * PyTorch's meaning: out = a copy of x, then along `dim`
 *   out[.., index[p], ..] = src[p]     (scatter; src a tensor or a value)
 *   out[.., index[p], ..] += src[p]    (scatter_add; src a tensor)
 * for every position p of `index`.  index is int64 with x's rank, no
 * larger than src in any dimension and than x outside `dim` (src may be
 * larger: only its leading part, index's shape, is used); src has x's
 * dtype.  Of repeated indices in a scatter one write wins (the CPU: the
 * last; PyTorch leaves it unspecified).  Indices are 0-based here.
 *
 * Autograd (float dtypes), PyTorch's rules: scatter passes the gradient
 * to x except at the scattered positions (zeroed), scatter_add passes it
 * all; src gets the gradient gathered at the indices.  The part of src
 * that is used is a narrow() of it, so a larger src gets zeros elsewhere.
 * The in-place forms refuse tensors that take part in autograd, as every
 * in-place op does (cnn_check_inplace).
 *
 * Kernels: the backend's `scatter` (assignment) and `scatter_add` entries,
 * on a contiguous output.
 */
#include <string.h>

#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "ops_internal.h"
#include "tensor_internal.h"

static bool scatter_dtype_ok(cnn_dtype dt) {
  return dt == CNN_FLOAT32 || dt == CNN_FLOAT64 || dt == CNN_INT64 || dt == CNN_UINT8;
}

static int check_shapes(const char *op, const cnn_tensor *x, int dim, const cnn_tensor *index,
                        const cnn_tensor *src) {
  char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR], s3[CNN_SHAPE_STR];
  bool ok = index->dtype == CNN_INT64 && index->ndim == x->ndim && (!src || src->ndim == x->ndim);
  for (int d = 0; ok && d < index->ndim; d++)
    ok = (!src || index->shape[d] <= src->shape[d]) && (d == dim || index->shape[d] <= x->shape[d]);
  if (ok) return 0;
  cnn_set_error("%s: index (%s %s) must be int64 with the input's rank, no larger than src (%s) "
                "and than the input %s outside dimension %d",
                op, cnn_dtype_name(index->dtype), cnn_tensor_shape_str(index, s1),
                src ? cnn_tensor_shape_str(src, s2) : "a value", cnn_tensor_shape_str(x, s3),
                dim + 1);
  return -1;
}

static int check_scatter(const char *op, const cnn_tensor *x, int dim, const cnn_tensor *index,
                         const cnn_tensor *src) {
  if (!x || !index) return cnn_set_error("%s: missing tensor argument", op), -1;
  if (!scatter_dtype_ok(x->dtype))
    return cnn_set_error("%s: dtype %s is not supported", op, cnn_dtype_name(x->dtype)), -1;
  if (src && src->dtype != x->dtype)
    return cnn_set_error("%s: src is %s but the input is %s (they must match)", op,
                         cnn_dtype_name(src->dtype), cnn_dtype_name(x->dtype)),
           -1;
  if (cnn_check_same_device(op, x, index) || cnn_check_same_device(op, x, src)) return -1;
  return cnn_check_op_dim(op, x, dim) || check_shapes(op, x, dim, index, src) ? -1 : 0;
}

/* the leading part of src with index's shape (a view; recorded when grad is on) */
static cnn_tensor *used_part(cnn_tensor *src, const cnn_tensor *index) {
  cnn_tensor_retain(src);
  for (int d = 0; d < src->ndim && src; d++) {
    if (src->shape[d] == index->shape[d]) continue;
    cnn_tensor *v = cnn_narrow(src, d, 0, index->shape[d]);
    cnn_tensor_release(src);
    src = v;
  }
  return src;
}

/* out (contiguous) [index] = / += src (any layout, index's shape) */
static int scatter_into(const char *op, cnn_tensor *out, int dim, cnn_tensor *ic, cnn_tensor *src,
                        bool add) {
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *sc = cnn_contiguous(src);
  cnn_set_grad_enabled(prev);
  if (!sc) return -1;
  int dev = cnn_backend_dev(out), rc;
  if (add)
    rc = CNN_TENSOR_CALL(out, op, scatter_add, dev, out->dtype, out->ndim, out->shape, ic->shape,
                         dim, cnn_tensor_data(ic), cnn_tensor_data(sc), cnn_tensor_data(out));
  else
    rc = CNN_TENSOR_CALL(out, op, scatter, dev, out->dtype, out->ndim, out->shape, ic->shape, dim,
                         cnn_tensor_data(ic), cnn_tensor_data(sc), cnn_tensor_data(out));
  cnn_tensor_release(sc);
  return rc;
}

/* a new contiguous copy of t, outside autograd */
static cnn_tensor *fresh_copy(cnn_tensor *t) {
  cnn_tensor *c = cnn_empty(t->ndim, t->shape, t->dtype, cnn_tensor_device(t));
  if (c && cnn_copy_raw(c, t)) cnn_tensor_release(c), c = NULL;
  return c;
}

/* ip[0] = dim, ip[1] = add; saved 0 = the contiguous index */
static int scatter_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *idx = cnn_node_saved(n, 0);
  if (!idx) return -1;
  int dim = (int)n->ip[0];
  if (n->needs[0] && n->ip[1]) cnn_tensor_retain(g), gin[0] = g;
  if (n->needs[0] && !n->ip[1]) {
    cnn_tensor *z = cnn_zeros(idx->ndim, idx->shape, g->dtype, cnn_tensor_device(g));
    gin[0] = z ? fresh_copy(g) : NULL;
    if (gin[0] && scatter_into("scatter", gin[0], dim, idx, z, false))
      cnn_tensor_release(gin[0]), gin[0] = NULL;
    cnn_tensor_release(z);
    if (!gin[0]) return -1;
  }
  if (n->needs[1] && !(gin[1] = cnn_gather(g, dim, idx))) return -1;
  return 0;
}

/* the index (contiguous, validated) and the source of index's shape
 * (src's used part, or the value) */
static int scatter_operands(const char *op, cnn_tensor *x, int dim, cnn_tensor *index,
                            cnn_tensor *src, double value, cnn_tensor **ic, cnn_tensor **sv) {
  bool prev = cnn_set_grad_enabled(false);
  *ic = cnn_contiguous(index);
  cnn_set_grad_enabled(prev);
  if (!*ic || cnn_check_indices(op, x, dim, *ic)) return cnn_tensor_release(*ic), -1;
  *sv = src ? used_part(src, *ic)
            : cnn_full((*ic)->ndim, (*ic)->shape, value, x->dtype, cnn_tensor_device(x));
  if (!*sv) return cnn_tensor_release(*ic), -1;
  return 0;
}

static cnn_tensor *scatter_new(const char *op, cnn_tensor *x, int dim, cnn_tensor *index,
                               cnn_tensor *src, double value, bool add) {
  cnn_tensor *ic, *sv;
  if (check_scatter(op, x, dim, index, src) ||
      scatter_operands(op, x, dim, index, src, value, &ic, &sv))
    return NULL;
  cnn_tensor *out = fresh_copy(x);
  if (out && scatter_into(op, out, dim, ic, sv, add)) cnn_tensor_release(out), out = NULL;
  cnn_node *n = out && cnn_dtype_is_float(x->dtype)
                    ? cnn_autograd_record(out, add ? "ScatterAddBackward" : "ScatterBackward",
                                          scatter_backward, 2, (cnn_tensor *[]){x, src ? sv : NULL})
                    : NULL;
  if (n) cnn_node_save(n, 0, ic), n->ip[0] = dim, n->ip[1] = add;
  cnn_tensor_release(ic), cnn_tensor_release(sv);
  return out;
}

static int scatter_in_place(const char *op, cnn_tensor *x, int dim, cnn_tensor *index,
                            cnn_tensor *src, double value, bool add) {
  cnn_tensor *ic, *sv;
  if (check_scatter(op, x, dim, index, src) || cnn_check_inplace(op, x, src) ||
      scatter_operands(op, x, dim, index, src, value, &ic, &sv))
    return -1;
  bool direct = cnn_tensor_is_contiguous(x);
  cnn_tensor *out = direct ? x : fresh_copy(x);
  int rc = out ? scatter_into(op, out, dim, ic, sv, add) : -1;
  if (rc == 0 && !direct) rc = cnn_copy_raw(x, out);
  if (!direct) cnn_tensor_release(out);
  cnn_tensor_release(ic), cnn_tensor_release(sv);
  cnn_tensor_bump_version(x);
  return rc;
}

cnn_tensor *cnn_scatter(cnn_tensor *x, int dim, cnn_tensor *index, cnn_tensor *src, double value) {
  return scatter_new("scatter", x, dim, index, src, value, false);
}

cnn_tensor *cnn_scatter_add(cnn_tensor *x, int dim, cnn_tensor *index, cnn_tensor *src) {
  if (!src) return cnn_set_error("scatter_add: src must be a tensor"), NULL;
  return scatter_new("scatter_add", x, dim, index, src, 0, true);
}

int cnn_scatter_(cnn_tensor *x, int dim, cnn_tensor *index, cnn_tensor *src, double value) {
  return scatter_in_place("scatter", x, dim, index, src, value, false);
}

int cnn_scatter_add_(cnn_tensor *x, int dim, cnn_tensor *index, cnn_tensor *src) {
  if (!src) return cnn_set_error("scatter_add_: src must be a tensor"), -1;
  return scatter_in_place("scatter_add", x, dim, index, src, 0, true);
}

/* ---- one_hot ------------------------------------------------------------------------ */

static int64_t infer_classes(cnn_tensor *labels) {
  char s[CNN_SHAPE_STR];
  if (cnn_tensor_numel(labels) == 0)
    return cnn_set_error("one_hot: cannot infer the number of classes of an empty tensor (%s); "
                         "give num_classes",
                         cnn_tensor_shape_str(labels, s)),
           -1;
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *m = cnn_reduce(CNN_RED_MAX, labels, 0, false, 0);
  cnn_set_grad_enabled(prev);
  if (!m) return -1;
  int64_t c = (int64_t)cnn_tensor_get(m, 0) + 1;
  cnn_tensor_release(m);
  return c < 1 ? 1 : c;
}

cnn_tensor *cnn_one_hot(cnn_tensor *labels, int64_t num_classes) {
  char s[CNN_SHAPE_STR];
  if (!labels) return cnn_set_error("one_hot: missing tensor argument"), NULL;
  if (labels->dtype != CNN_INT64 || labels->ndim >= CNN_MAX_DIMS)
    return cnn_set_error("one_hot: expects int64 class indices of at most %d dimensions, got %s %s",
                         CNN_MAX_DIMS - 1, cnn_dtype_name(labels->dtype),
                         cnn_tensor_shape_str(labels, s)),
           NULL;
  if (num_classes < 0 && (num_classes = infer_classes(labels)) < 0) return NULL;
  int64_t shape[CNN_MAX_DIMS];
  memcpy(shape, labels->shape, sizeof(int64_t) * (size_t)labels->ndim);
  shape[labels->ndim] = num_classes;
  cnn_tensor *out = cnn_zeros(labels->ndim + 1, shape, CNN_INT64, cnn_tensor_device(labels));
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *ix = out ? cnn_unsqueeze(labels, labels->ndim) : NULL;
  int rc = ix ? scatter_in_place("one_hot", out, labels->ndim, ix, NULL, 1, false) : -1;
  cnn_set_grad_enabled(prev);
  cnn_tensor_release(ix);
  if (rc) return cnn_tensor_release(out), NULL;
  return out;
}
