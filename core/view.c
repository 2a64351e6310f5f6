/*
 * view.c -- views that copy nothing: view/reshape, transpose, permute,
 * squeeze, unsqueeze, narrow, select, expand, flatten, detach.
 *
 * Each returns a new header over the same storage (reshape copies only when
 * the strides make a view impossible).  Dims are 0-based and already
 * normalised by the caller (the Lua bindings); they are still validated.
 * Backward rules: shape changes reshape the gradient back, transpose and
 * permute invert themselves, narrow/select scatter into zeros, expand sums
 * back (cnn_grad_to_input).
 */
#include "autograd.h"
#include "cnn.h"
#include "tensor_internal.h"

#include <stdlib.h>

static int check_dim(const char *op, const cnn_tensor *t, int dim, int ndim_limit) {
  if (dim >= 0 && dim < ndim_limit) return 0;
  char s[CNN_SHAPE_STR];
  cnn_set_error("%s: dimension %d out of range for a %d-d tensor (%s)", op, dim + 1, t->ndim,
                cnn_tensor_shape_str(t, s));
  return -1;
}

/* ---- backward rules ---------------------------------------------------------------- */

static int reshape_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  gin[0] = cnn_reshape(g, n->in_ndim[0], n->in_shape[0]);
  return gin[0] ? 0 : -1;
}

static int transpose_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  gin[0] = cnn_transpose(g, (int)n->ip[0], (int)n->ip[1]);
  return gin[0] ? 0 : -1;
}

static int permute_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  int inverse[CNN_MAX_DIMS];
  for (int i = 0; i < g->ndim; i++) inverse[n->ip[i]] = i;
  gin[0] = cnn_permute(g, inverse);
  return gin[0] ? 0 : -1;
}

/* grad of narrow/select: zeros of the input shape with g copied into the slice */
static int slice_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *z = cnn_zeros(n->in_ndim[0], n->in_shape[0], g->dtype, cnn_tensor_device(g));
  if (!z) return -1;
  int dim = (int)n->ip[0];
  cnn_tensor *part =
      n->ip[2] < 0 ? cnn_select(z, dim, n->ip[1]) : cnn_narrow(z, dim, n->ip[1], n->ip[2]);
  int rc = part ? cnn_copy_(part, g) : -1;
  cnn_tensor_release(part);
  if (rc) return cnn_tensor_release(z), -1;
  gin[0] = z;
  return 0;
}

static int expand_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  gin[0] = cnn_grad_to_input(n, 0, g);
  return gin[0] ? 0 : -1;
}

/* ---- helpers ----------------------------------------------------------------------- */

/* A view header of t with a given shape/strides/offset, recording a node. */
static cnn_tensor *make_view(cnn_tensor *t, int ndim, const int64_t *shape, const int64_t *stride,
                             int64_t offset, const char *name, cnn_backward_fn fn,
                             cnn_node **node) {
  if (node) *node = NULL;
  cnn_tensor *v = cnn_tensor_view_of(t);
  if (!v) return NULL;
  v->ndim = ndim;
  memcpy(v->shape, shape, ndim * sizeof *shape);
  memcpy(v->stride, stride, ndim * sizeof *stride);
  v->offset = offset;
  cnn_node *n = cnn_autograd_record(v, name, fn, 1, &t);
  if (node) *node = n;
  return v;
}

/* Strides for viewing t as `shape` without a copy, or false (PyTorch's rule:
 * each run of merged/split dims must be contiguous within itself). */
static bool view_strides(const cnn_tensor *t, int ndim, const int64_t *shape, int64_t *out) {
  int64_t numel = cnn_tensor_numel(t);
  if (numel == 0 || cnn_tensor_is_contiguous(t)) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) out[i] = s, s *= shape[i] ? shape[i] : 1;
    return true;
  }
  int view_d = ndim - 1;
  int64_t chunk_stride = t->stride[t->ndim - 1], tensor_numel = 1, view_numel = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    tensor_numel *= t->shape[d];
    bool chunk_ends =
        d == 0 || (t->shape[d - 1] != 1 && t->stride[d - 1] != tensor_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
      out[view_d] = view_numel * chunk_stride;
      view_numel *= shape[view_d];
      view_d--;
    }
    if (view_numel != tensor_numel) return false;
    if (d > 0) chunk_stride = t->stride[d - 1], tensor_numel = 1, view_numel = 1;
  }
  return view_d == -1;
}

/* Resolve one -1 and check the element count. */
static int infer_shape(const char *op, const cnn_tensor *t, int ndim, const int64_t *in,
                       int64_t *out) {
  int infer = -1;
  int64_t known = 1, numel = cnn_tensor_numel(t);
  char a[CNN_SHAPE_STR], b[CNN_SHAPE_STR];
  if (ndim < 0 || ndim > CNN_MAX_DIMS) return cnn_set_error("%s: %d dimensions", op, ndim), -1;
  for (int i = 0; i < ndim; i++) {
    out[i] = in[i];
    if (in[i] == -1 && infer < 0)
      infer = i;
    else if (in[i] < 0)
      return cnn_set_error("%s: invalid size %lld", op, (long long)in[i]), -1;
    else if (in[i] && known > INT64_MAX / in[i])
      return cnn_set_error("%s: sizes overflow", op), -1;
    else
      known *= in[i];
  }
  if (infer >= 0 && known != 0 && numel % known == 0)
    out[infer] = numel / known;
  else if (infer >= 0)
    known = -1;
  if ((infer >= 0 && known < 0) || (infer < 0 && known != numel)) {
    cnn_set_error("%s: shape %s is invalid for a tensor of %lld elements (%s)", op,
                  cnn_shape_str(ndim, in, a), (long long)numel, cnn_tensor_shape_str(t, b));
    return -1;
  }
  return 0;
}

/* ---- the views ------------------------------------------------------------------------ */

cnn_tensor *cnn_view(cnn_tensor *t, int ndim, const int64_t *shape) {
  int64_t sh[CNN_MAX_DIMS], st[CNN_MAX_DIMS];
  char a[CNN_SHAPE_STR], b[CNN_SHAPE_STR];
  if (infer_shape("view", t, ndim, shape, sh)) return NULL;
  if (!view_strides(t, ndim, sh, st)) {
    cnn_set_error("view: a tensor of shape %s with these strides cannot be viewed as %s; "
                  "use reshape() or contiguous() first",
                  cnn_tensor_shape_str(t, a), cnn_shape_str(ndim, sh, b));
    return NULL;
  }
  return make_view(t, ndim, sh, st, t->offset, "ViewBackward", reshape_backward, NULL);
}

cnn_tensor *cnn_reshape(cnn_tensor *t, int ndim, const int64_t *shape) {
  int64_t sh[CNN_MAX_DIMS], st[CNN_MAX_DIMS];
  if (infer_shape("reshape", t, ndim, shape, sh)) return NULL;
  if (view_strides(t, ndim, sh, st))
    return make_view(t, ndim, sh, st, t->offset, "ViewBackward", reshape_backward, NULL);
  cnn_tensor *c = cnn_contiguous(t);
  if (!c) return NULL;
  cnn_tensor *v = cnn_view(c, ndim, sh);
  cnn_tensor_release(c);
  return v;
}

cnn_tensor *cnn_flatten(cnn_tensor *t, int start, int end) {
  if (t->ndim == 0) return cnn_reshape(t, 1, (int64_t[]){1});
  if (check_dim("flatten", t, start, t->ndim) || check_dim("flatten", t, end, t->ndim)) return NULL;
  if (start > end)
    return cnn_set_error("flatten: start dim %d is after end dim %d", start + 1, end + 1), NULL;
  int64_t sh[CNN_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < start; i++) sh[nd++] = t->shape[i];
  sh[nd] = 1;
  for (int i = start; i <= end; i++) sh[nd] *= t->shape[i];
  nd++;
  for (int i = end + 1; i < t->ndim; i++) sh[nd++] = t->shape[i];
  return cnn_reshape(t, nd, sh);
}

cnn_tensor *cnn_transpose(cnn_tensor *t, int d0, int d1) {
  if (t->ndim == 0 && d0 == 0 && d1 == 0) return cnn_detach_keep_graph(t);
  if (check_dim("transpose", t, d0, t->ndim) || check_dim("transpose", t, d1, t->ndim)) return NULL;
  int64_t sh[CNN_MAX_DIMS], st[CNN_MAX_DIMS];
  memcpy(sh, t->shape, sizeof sh);
  memcpy(st, t->stride, sizeof st);
  sh[d0] = t->shape[d1], sh[d1] = t->shape[d0];
  st[d0] = t->stride[d1], st[d1] = t->stride[d0];
  cnn_node *n = NULL;
  cnn_tensor *v =
      make_view(t, t->ndim, sh, st, t->offset, "TransposeBackward", transpose_backward, &n);
  if (n) n->ip[0] = d0, n->ip[1] = d1;
  return v;
}

cnn_tensor *cnn_permute(cnn_tensor *t, const int *dims) {
  int64_t sh[CNN_MAX_DIMS], st[CNN_MAX_DIMS];
  bool seen[CNN_MAX_DIMS] = {false};
  for (int i = 0; i < t->ndim; i++) {
    if (check_dim("permute", t, dims[i], t->ndim)) return NULL;
    if (seen[dims[i]]) return cnn_set_error("permute: dimension %d repeated", dims[i] + 1), NULL;
    seen[dims[i]] = true;
    sh[i] = t->shape[dims[i]], st[i] = t->stride[dims[i]];
  }
  cnn_node *n = NULL;
  cnn_tensor *v = make_view(t, t->ndim, sh, st, t->offset, "PermuteBackward", permute_backward, &n);
  for (int i = 0; n && i < t->ndim; i++) n->ip[i] = dims[i];
  return v;
}

cnn_tensor *cnn_squeeze(cnn_tensor *t, int dim) {
  int64_t sh[CNN_MAX_DIMS], st[CNN_MAX_DIMS];
  int nd = 0;
  if (dim >= 0 && check_dim("squeeze", t, dim, t->ndim)) return NULL;
  for (int i = 0; i < t->ndim; i++) {
    bool drop = t->shape[i] == 1 && (dim < 0 || dim == i);
    if (!drop) sh[nd] = t->shape[i], st[nd++] = t->stride[i];
  }
  return make_view(t, nd, sh, st, t->offset, "SqueezeBackward", reshape_backward, NULL);
}

cnn_tensor *cnn_unsqueeze(cnn_tensor *t, int dim) {
  if (check_dim("unsqueeze", t, dim, t->ndim + 1)) return NULL;
  if (t->ndim >= CNN_MAX_DIMS)
    return cnn_set_error("unsqueeze: at most %d dimensions", CNN_MAX_DIMS), NULL;
  int64_t sh[CNN_MAX_DIMS], st[CNN_MAX_DIMS];
  for (int i = 0, j = 0; i <= t->ndim; i++) {
    if (i == dim) {
      sh[i] = 1;
      st[i] = dim < t->ndim ? t->stride[dim] * t->shape[dim] : 1;
    } else {
      sh[i] = t->shape[j], st[i] = t->stride[j], j++;
    }
  }
  return make_view(t, t->ndim + 1, sh, st, t->offset, "UnsqueezeBackward", reshape_backward, NULL);
}

cnn_tensor *cnn_narrow(cnn_tensor *t, int dim, int64_t start, int64_t length) {
  char s[CNN_SHAPE_STR];
  if (check_dim("narrow", t, dim, t->ndim)) return NULL;
  if (start < 0 || length < 0 || start > t->shape[dim] - length) {
    cnn_set_error("narrow: range %lld..%lld is outside dimension %d of size %lld (%s)",
                  (long long)start + 1, (long long)(start + length), dim + 1,
                  (long long)t->shape[dim], cnn_tensor_shape_str(t, s));
    return NULL;
  }
  int64_t sh[CNN_MAX_DIMS];
  memcpy(sh, t->shape, sizeof sh);
  sh[dim] = length;
  cnn_node *n = NULL;
  cnn_tensor *v = make_view(t, t->ndim, sh, t->stride, t->offset + start * t->stride[dim],
                            "NarrowBackward", slice_backward, &n);
  if (n) n->ip[0] = dim, n->ip[1] = start, n->ip[2] = length;
  return v;
}

cnn_tensor *cnn_select(cnn_tensor *t, int dim, int64_t index) {
  char s[CNN_SHAPE_STR];
  if (check_dim("select", t, dim, t->ndim)) return NULL;
  if (index < 0 || index >= t->shape[dim]) {
    cnn_set_error("select: index %lld out of range for dimension %d of size %lld (%s)",
                  (long long)index + 1, dim + 1, (long long)t->shape[dim],
                  cnn_tensor_shape_str(t, s));
    return NULL;
  }
  int64_t sh[CNN_MAX_DIMS], st[CNN_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < t->ndim; i++)
    if (i != dim) sh[nd] = t->shape[i], st[nd++] = t->stride[i];
  cnn_node *n = NULL;
  cnn_tensor *v = make_view(t, nd, sh, st, t->offset + index * t->stride[dim], "SelectBackward",
                            slice_backward, &n);
  if (n) n->ip[0] = dim, n->ip[1] = index, n->ip[2] = -1;
  return v;
}

cnn_tensor *cnn_expand(cnn_tensor *t, int ndim, const int64_t *shape) {
  char a[CNN_SHAPE_STR], b[CNN_SHAPE_STR];
  int64_t sh[CNN_MAX_DIMS], st[CNN_MAX_DIMS];
  if (ndim < t->ndim || ndim > CNN_MAX_DIMS) goto bad;
  for (int i = ndim - 1, j = t->ndim - 1; i >= 0; i--, j--) {
    int64_t want = shape[i];
    if (j >= 0 && want == -1) want = t->shape[j];
    if (want < 0) goto bad;
    if (j >= 0 && t->shape[j] == want)
      sh[i] = want, st[i] = t->stride[j];
    else if (j < 0 || t->shape[j] == 1)
      sh[i] = want, st[i] = 0;
    else
      goto bad;
  }
  if (cnn_check_shape("expand", ndim, sh) < 0) return NULL;
  return make_view(t, ndim, sh, st, t->offset, "ExpandBackward", expand_backward, NULL);
bad:
  cnn_set_error(
      "expand: a tensor of shape %s cannot be expanded to %s", cnn_tensor_shape_str(t, a),
      cnn_shape_str(ndim > CNN_MAX_DIMS ? CNN_MAX_DIMS : (ndim < 0 ? 0 : ndim), shape, b));
  return NULL;
}

cnn_tensor *cnn_detach(cnn_tensor *t) { return cnn_tensor_view_of(t); }

/* A plain alias that keeps the graph (0-d transpose). */
cnn_tensor *cnn_detach_keep_graph(cnn_tensor *t) {
  return make_view(t, t->ndim, t->shape, t->stride, t->offset, "AliasBackward", reshape_backward,
                   NULL);
}
