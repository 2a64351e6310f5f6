/*
 * nn_row_norm.c -- layer_norm, group_norm and instance_norm on tensors.
 *
 * The three are one computation over rows (core/norm_math.h): each row of
 * D values is normalised by its own mean and biased variance, then scaled
 * by the affine parameters.  This file validates (PyTorch's rules and
 * messages), builds the row geometry, calls the backend's norm_rows entries
 * and records one autograd node, which saves x, the weight and the per-row
 * mean and rstd (never xhat): backward recomputes xhat on the fly.
 *   layer_norm(x, normalized_shape, w, b): the last k dims form a row;
 *     w and b have normalized_shape.
 *   group_norm(x, G, w, b): x N x C x *, G groups of C/G channels per
 *     sample; w and b have C values.
 *   instance_norm(x, rm, rv, w, b, use_input_stats): group norm with G = C;
 *     with running statistics it updates them in place from the batch
 *     (momentum, unbiased variance, averaged over the samples: PyTorch's
 *     rule), and without input statistics it is batch_norm in eval mode.
 */
#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "tensor_internal.h"

#include <string.h>

/* 0 if p is NULL or a contiguous tensor of x's dtype and device with the
 * given shape; else -1 naming op, what, and both shapes */
static int check_param(const char *op, const char *what, const cnn_tensor *p, const cnn_tensor *x,
                       int ndim, const int64_t *shape) {
  char a[CNN_SHAPE_STR], b[CNN_SHAPE_STR];
  if (!p) return 0;
  bool ok = p->ndim == ndim && p->dtype == x->dtype && cnn_tensor_is_contiguous(p) &&
            cnn_device_equal(cnn_tensor_device(p), cnn_tensor_device(x));
  for (int i = 0; ok && i < ndim; i++) ok = p->shape[i] == shape[i];
  if (ok) return 0;
  cnn_tensor tmp = {.ndim = ndim};
  memcpy(tmp.shape, shape, (size_t)ndim * sizeof *shape);
  cnn_set_error(
      "%s: %s %s (%s) does not match: expected shape %s (%s, contiguous, on the input's device) "
      "for input %s",
      op, what, cnn_tensor_shape_str(p, a), cnn_dtype_name(p->dtype), cnn_tensor_shape_str(&tmp, b),
      cnn_dtype_name(x->dtype), cnn_tensor_shape_str(x, (char[CNN_SHAPE_STR]){0}));
  return -1;
}

static int check_float(const char *op, const cnn_tensor *x) {
  char a[CNN_SHAPE_STR];
  if (x->dtype == CNN_FLOAT32 || x->dtype == CNN_FLOAT64) return 0;
  cnn_set_error("%s: expected a float32 or float64 input, got %s %s", op,
                cnn_tensor_shape_str(x, a), cnn_dtype_name(x->dtype));
  return -1;
}

/* ---- the shared forward and backward ------------------------------------------------------ */

static const char *const op_names[] = {"layer_norm", "group_norm", "instance_norm"};

static int norm_rows_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *x = cnn_node_saved(n, 0), *w = n->saved[1], *mean = n->saved[2], *rstd = n->saved[3];
  if (!x) return -1;
  const cnn_norm_shape *s = (const cnn_norm_shape *)n->geometry;
  cnn_tensor *dy = cnn_contiguous(g);
  if (!dy) return -1;
  cnn_device dev = cnn_tensor_device(x);
  bool empty = cnn_tensor_numel(x) == 0; /* no values: zero gradients, no call */
  if (n->needs[0]) gin[0] = cnn_empty(x->ndim, x->shape, x->dtype, dev);
  for (int i = 1; i < 3; i++)
    if (n->needs[i])
      gin[i] = (empty ? cnn_zeros : cnn_empty)(n->in_ndim[i], n->in_shape[i], x->dtype, dev);
  int rc = -1;
  if ((gin[0] || !n->needs[0]) && (gin[1] || !n->needs[1]) && (gin[2] || !n->needs[2]))
    rc = empty ? 0
               : CNN_TENSOR_CALL(x, op_names[n->ip[0]], norm_rows_backward, cnn_backend_dev(x),
                                 x->dtype, s, cnn_tensor_data(dy), cnn_tensor_data(x),
                                 cnn_tensor_data(mean), cnn_tensor_data(rstd),
                                 w ? cnn_tensor_data(w) : NULL,
                                 gin[0] ? cnn_tensor_data(gin[0]) : NULL,
                                 gin[1] ? cnn_tensor_data(gin[1]) : NULL,
                                 gin[2] ? cnn_tensor_data(gin[2]) : NULL);
  cnn_tensor_release(dy);
  return rc;
}

/* y, and the node that saves x, w, mean, rstd */
static cnn_tensor *norm_rows(int which, const char *node, cnn_tensor *x, const cnn_norm_shape *s,
                             cnn_tensor *w, cnn_tensor *b, double eps) {
  const char *op = op_names[which];
  cnn_device dev = cnn_tensor_device(x);
  int64_t R = s->R;
  cnn_tensor *xc = cnn_contiguous(x);
  cnn_tensor *y = xc ? cnn_empty(x->ndim, x->shape, x->dtype, dev) : NULL;
  cnn_tensor *mean = y ? cnn_empty(1, &R, x->dtype, dev) : NULL;
  cnn_tensor *rstd = mean ? cnn_empty(1, &R, x->dtype, dev) : NULL;
  int rc = rstd ? CNN_TENSOR_CALL(x, op, norm_rows_forward, cnn_backend_dev(x), x->dtype, s,
                                  cnn_tensor_data(xc), w ? cnn_tensor_data(w) : NULL,
                                  b ? cnn_tensor_data(b) : NULL, eps, cnn_tensor_data(y),
                                  cnn_tensor_data(mean), cnn_tensor_data(rstd))
                : -1;
  if (rc) cnn_tensor_release(y), y = NULL;
  cnn_node *n =
      y ? cnn_autograd_record(y, node, norm_rows_backward, 3, (cnn_tensor *[]){x, w, b}) : NULL;
  if (n) {
    cnn_node_set_geometry(n, s, sizeof *s), n->ip[0] = which;
    cnn_node_save(n, 0, xc), cnn_node_save(n, 1, w), cnn_node_save(n, 2, mean),
        cnn_node_save(n, 3, rstd);
  }
  cnn_tensor_release(xc), cnn_tensor_release(mean), cnn_tensor_release(rstd);
  return y;
}

static int check_eps(const char *op, double eps) {
  if (eps > 0 && eps < 1e300) return 0;
  cnn_set_error("%s: eps must be a positive number, got %g", op, eps);
  return -1;
}

/* ---- layer norm ------------------------------------------------------------------------------- */

static int check_layer_norm(cnn_tensor *x, int k, const int64_t *nshape, cnn_tensor *w,
                            cnn_tensor *b) {
  char a[CNN_SHAPE_STR], c[CNN_SHAPE_STR];
  if (check_float("layer_norm", x)) return -1;
  cnn_tensor want = {.ndim = k < 0 ? 0 : k};
  if (k >= 1 && k <= CNN_MAX_DIMS) memcpy(want.shape, nshape, (size_t)k * sizeof *nshape);
  bool ok = k >= 1 && k <= x->ndim;
  for (int i = 0; ok && i < k; i++) ok = nshape[i] == x->shape[x->ndim - k + i];
  if (!ok) {
    cnn_set_error("layer_norm: input %s does not end with normalized_shape %s",
                  cnn_tensor_shape_str(x, a),
                  k >= 1 && k <= CNN_MAX_DIMS ? cnn_tensor_shape_str(&want, c) : "(none)");
    return -1;
  }
  return check_param("layer_norm", "weight", w, x, k, nshape) ||
         check_param("layer_norm", "bias", b, x, k, nshape);
}

cnn_tensor *cnn_layer_norm(cnn_tensor *x, int k, const int64_t *normalized_shape, cnn_tensor *w,
                           cnn_tensor *b, double eps) {
  if (check_layer_norm(x, k, normalized_shape, w, b) || check_eps("layer_norm", eps)) return NULL;
  int64_t D = 1;
  for (int i = 0; i < k; i++) D *= normalized_shape[i];
  cnn_norm_shape s = {.R = D > 0 ? cnn_tensor_numel(x) / D : 0, .D = D, .G = 1, .L = 1};
  return norm_rows(0, "NativeLayerNormBackward", x, &s, w, b, eps);
}

/* ---- group norm ------------------------------------------------------------------------------- */

static int check_channels_input(const char *op, cnn_tensor *x, int min_dims) {
  char a[CNN_SHAPE_STR];
  if (check_float(op, x)) return -1;
  if (x->ndim >= min_dims) return 0;
  cnn_set_error("%s: expected an input of at least %d dims (N x C%s), got %s", op, min_dims,
                min_dims > 2 ? " x ..." : " [x ...]", cnn_tensor_shape_str(x, a));
  return -1;
}

/* the geometry of G groups over N x C x (L values) */
static cnn_norm_shape channel_groups(const cnn_tensor *x, int64_t G) {
  int64_t N = x->shape[0], C = x->shape[1], L = 1;
  for (int i = 2; i < x->ndim; i++) L *= x->shape[i];
  cnn_norm_shape s = {.R = N * G, .D = G > 0 ? C / G * L : 0, .G = G, .L = L};
  if (L == 0) s.L = 1, s.D = 0; /* empty planes: nothing to normalise */
  return s;
}

cnn_tensor *cnn_group_norm(cnn_tensor *x, int64_t G, cnn_tensor *w, cnn_tensor *b, double eps) {
  char a[CNN_SHAPE_STR];
  if (check_channels_input("group_norm", x, 2) || check_eps("group_norm", eps)) return NULL;
  int64_t C = x->shape[1];
  if (G < 1 || C % G) {
    cnn_set_error("group_norm: expected number of channels in input %s to be divisible by "
                  "num_groups, but got "
                  "%lld channels and num_groups=%lld",
                  cnn_tensor_shape_str(x, a), (long long)C, (long long)G);
    return NULL;
  }
  if (check_param("group_norm", "weight", w, x, 1, &C) ||
      check_param("group_norm", "bias", b, x, 1, &C))
    return NULL;
  cnn_norm_shape s = channel_groups(x, G);
  return norm_rows(1, "NativeGroupNormBackward", x, &s, w, b, eps);
}

/* ---- instance norm ---------------------------------------------------------------------------- */

/* running = (1 - m) * running + m * stat, in place and unrecorded */
static int lerp_(cnn_tensor *running, cnn_tensor *stat, double m) {
  cnn_tensor *t = cnn_unary(CNN_OP_MUL_SCALAR, stat, m, 0);
  int rc =
      t ? cnn_unary_(CNN_OP_MUL_SCALAR, running, 1 - m, 0) || cnn_binary_(CNN_OP_ADD, running, t)
        : -1;
  cnn_tensor_release(t);
  return rc;
}

/* PyTorch: the running stats move towards the per-instance mean and
 * unbiased variance, averaged over the batch */
static int update_running(cnn_tensor *x, cnn_tensor *rm, cnn_tensor *rv, double momentum) {
  uint32_t spatial = 0;
  for (int i = 2; i < x->ndim; i++) spatial |= 1u << i;
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *m = cnn_reduce(CNN_RED_MEAN, x, spatial, false, 0);
  cnn_tensor *v = m ? cnn_reduce(CNN_RED_VAR, x, spatial, false, 1) : NULL;
  cnn_tensor *bm = v ? cnn_reduce(CNN_RED_MEAN, m, 1u, false, 0) : NULL;
  cnn_tensor *bv = bm ? cnn_reduce(CNN_RED_MEAN, v, 1u, false, 0) : NULL;
  int rc = bv ? lerp_(rm, bm, momentum) || lerp_(rv, bv, momentum) : -1;
  cnn_set_grad_enabled(prev);
  cnn_tensor_release(m), cnn_tensor_release(v), cnn_tensor_release(bm), cnn_tensor_release(bv);
  return rc;
}

static int check_instance_norm(cnn_tensor *x, cnn_tensor *rm, cnn_tensor *rv, cnn_tensor *w,
                               cnn_tensor *b, bool use_input_stats, double momentum, double eps) {
  char a[CNN_SHAPE_STR];
  if (check_channels_input("instance_norm", x, 3) || check_eps("instance_norm", eps)) return -1;
  int64_t C = x->shape[1], L = cnn_tensor_numel(x) / (x->shape[0] * C > 0 ? x->shape[0] * C : 1);
  if (check_param("instance_norm", "weight", w, x, 1, &C) ||
      check_param("instance_norm", "bias", b, x, 1, &C) ||
      check_param("instance_norm", "running_mean", rm, x, 1, &C) ||
      check_param("instance_norm", "running_var", rv, x, 1, &C))
    return -1;
  if (!rm != !rv) {
    cnn_set_error("instance_norm: running_mean and running_var go together (got only one)");
    return -1;
  }
  if (!use_input_stats && !rm) {
    cnn_set_error("instance_norm: use_input_stats = false needs running_mean and running_var");
    return -1;
  }
  if (use_input_stats && L <= 1 && cnn_tensor_numel(x) > 0) {
    cnn_set_error("instance_norm: expected more than 1 spatial element when training, got input %s",
                  cnn_tensor_shape_str(x, a));
    return -1;
  }
  if (!(momentum >= 0 && momentum <= 1)) {
    cnn_set_error("instance_norm: momentum must be in [0, 1], got %g", momentum);
    return -1;
  }
  return 0;
}

cnn_tensor *cnn_instance_norm(cnn_tensor *x, cnn_tensor *rm, cnn_tensor *rv, cnn_tensor *w,
                              cnn_tensor *b, bool use_input_stats, double momentum, double eps) {
  if (check_instance_norm(x, rm, rv, w, b, use_input_stats, momentum, eps)) return NULL;
  if (!use_input_stats) return cnn_batch_norm(x, rm, rv, w, b, false, 0, eps);
  cnn_norm_shape s = channel_groups(x, x->shape[1]);
  if (s.G < 1) s.G = 1; /* C == 0: no rows */
  cnn_tensor *y = norm_rows(2, "NativeGroupNormBackward", x, &s, w, b, eps);
  if (y && rm && cnn_tensor_numel(x) > 0) {
    if (update_running(x, rm, rv, momentum))
      cnn_tensor_release(y), y = NULL;
    else
      cnn_tensor_bump_version(rm), cnn_tensor_bump_version(rv);
  }
  return y;
}
