/*
 * loss.c -- linear, dropout and the losses: nll_loss, cross_entropy (fused
 * log-softmax + NLL with class weights, label smoothing and ignore_index, as
 * PyTorch), mse_loss, binary_cross_entropy_with_logits.
 *
 * Design.  Class losses take logits/log-probabilities of shape N x C (or C
 * with a 0-d target, or N x C x d1 x ... with an N x d1 x ... target, moved
 * to rows through the recording views) and int64 class indices, 0-based (the Lua layer adds
 * the 1-based offset).  Targets equal to ignore_index (when >= 0) count
 * for nothing, in the loss and in the mean's denominator.  With weights w
 * and smoothing e, for row i with target t (PyTorch's definition):
 *   nll_i    = -w[t] logp[i,t]          smooth_i = -sum_c w[c] logp[i,c]
 *   loss_i   = (1 - e) nll_i + (e / C) smooth_i
 *   mean     = sum_i loss_i / sum_i w[t_i]      sum = sum_i loss_i
 * and d loss_i / d x[i,j] = (1-e) w[t] (p_j - [j=t]) + (e/C)(W p_j - w[j])
 * with p = softmax(x_i) and W = sum_c w[c].  The backend's class_loss
 * entries compute the rows in double on contiguous copies (core/cpu/loss.c,
 * gpu/loss.cu); the sum and the mean are tensor reductions here.  The
 * backward recomputes the softmax from the saved logits rather than
 * keeping N x C probabilities alive.
 *
 * linear runs matmul(x, w^T) (transposed view, no copy) plus an in-place
 * bias add, and records one node.  linear and dropout also take float16
 * where the backend has `half` (float16 inference on cuda; the CPU refuses).  dropout's mask is counter-based
 * (elementwise_math.h's cnn_dropout_value) from one draw of the core
 * generator, so a seed reproduces it, on the CPU and a GPU alike; the node
 * saves the scaled mask.  mse_loss is composed of elementwise ops and a
 * reduction; bce_with_logits computes the per-element loss in the backend
 * (elementwise_math.h's formulas), then reduces.
 *
 * Devices: tensors of one call share a device, and the weights, targets
 * and pos_weight are converted to the input's dtype before the backend's
 * entries run; targets are validated on a host copy.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autocast.h"
#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "elementwise_math.h"
#include "ops_internal.h"
#include "tensor_internal.h"

static cnn_tensor *nograd_contig(cnn_tensor *t) {
  if (!t) return NULL;
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *c = cnn_contiguous(t);
  cnn_set_grad_enabled(prev);
  return c;
}

/* t contiguous in dtype dt (a new reference), converted without recording */
static cnn_tensor *nograd_as(cnn_tensor *t, cnn_dtype dt) {
  if (!t) return NULL;
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *d = cnn_to_dtype(t, dt), *c = d ? cnn_contiguous(d) : NULL;
  cnn_set_grad_enabled(prev);
  cnn_tensor_release(d);
  return c;
}

static int check_float(const char *op, const char *what, const cnn_tensor *t) {
  if (!t) return cnn_set_error("%s: missing %s", op, what), -1;
  if (t->dtype != CNN_FLOAT32 && t->dtype != CNN_FLOAT64)
    return cnn_set_error("%s: %s must be float32 or float64, got %s (use :float())", op, what,
                         cnn_dtype_name(t->dtype)),
           -1;
  return 0;
}

/* check_float, and float16 where the backend has `half` (linear, dropout:
 * float16 inference on cuda) */
static int check_float_or_half(const char *op, const char *what, const cnn_tensor *t) {
  if (t && cnn_half_ok(t)) return 0;
  return check_float(op, what, t);
}

static int check_reduction(const char *op, cnn_reduction red) {
  if (red != CNN_REDUCTION_NONE && red != CNN_REDUCTION_MEAN && red != CNN_REDUCTION_SUM)
    return cnn_set_error("%s: unknown reduction %d", op, (int)red), -1;
  return 0;
}

/* ---- linear ------------------------------------------------------------------------ */

/* The node's geometry starts with the arithmetic of its products
 * (CNN_FLOAT32, or CNN_BFLOAT16 under autocast on a backend with
 * bf16_math), which the backward's products take too. */
static cnn_dtype linear_math(const cnn_node *n) { return *(const cnn_dtype *)n->geometry; }

int cnn_linear_backward_rule(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *x = cnn_node_saved(n, 0), *w = x ? cnn_node_saved(n, 1) : NULL;
  if (!w) return -1;
  cnn_dtype math = linear_math(n);
  int64_t out_f = w->shape[0], in_f = w->shape[1], rows = out_f ? cnn_tensor_numel(g) / out_f : 0;
  if (n->needs[0]) {
    cnn_tensor *gx = cnn_matmul_math(g, w, math);
    gin[0] = gx ? cnn_grad_to_input(n, 0, gx) : NULL;
    cnn_tensor_release(gx);
    if (!gin[0]) return -1;
  }
  if (n->needs[1]) {
    /* g^T x: out x in, contiguous like w, so it becomes w.grad uncopied */
    cnn_tensor *g2 = cnn_reshape(g, 2, (int64_t[]){rows, out_f});
    cnn_tensor *x2 = g2 ? cnn_reshape(x, 2, (int64_t[]){rows, in_f}) : NULL;
    cnn_tensor *g2t = x2 ? cnn_transpose(g2, 0, 1) : NULL;
    cnn_tensor *gw = g2t ? cnn_matmul_math(g2t, x2, math) : NULL;
    gin[1] = gw ? cnn_grad_to_input(n, 1, gw) : NULL;
    cnn_tensor_release(g2), cnn_tensor_release(x2), cnn_tensor_release(g2t), cnn_tensor_release(gw);
    if (!gin[1]) return -1;
  }
  if (n->needs[2]) {
    cnn_tensor *gb = cnn_sum_to(g, 1, &out_f);
    gin[2] = gb ? cnn_grad_to_input(n, 2, gb) : NULL;
    cnn_tensor_release(gb);
    if (!gin[2]) return -1;
  }
  return 0;
}

int cnn_linear_check(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b) {
  char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
  if (check_float_or_half("linear", "input", x) || check_float_or_half("linear", "weight", w))
    return -1;
  if (b && check_float_or_half("linear", "bias", b)) return -1;
  bool half = x->dtype == CNN_FLOAT16 || w->dtype == CNN_FLOAT16 || (b && b->dtype == CNN_FLOAT16);
  if (half && (x->dtype != w->dtype || (b && b->dtype != x->dtype)))
    return cnn_set_error("linear: input (%s), weight (%s) and bias (%s) must all be float16 or "
                         "none (net:half() converts a model)",
                         cnn_dtype_name(x->dtype), cnn_dtype_name(w->dtype),
                         b ? cnn_dtype_name(b->dtype) : "none"),
           -1;
  if (w->ndim != 2)
    return cnn_set_error("linear: weight must be 2-D (out x in), got %s",
                         cnn_tensor_shape_str(w, s1)),
           -1;
  if (x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1])
    return cnn_set_error("linear: input has %lld features (%s) but weight expects %lld (%s)",
                         (long long)(x->ndim ? x->shape[x->ndim - 1] : 1),
                         cnn_tensor_shape_str(x, s1), (long long)w->shape[1],
                         cnn_tensor_shape_str(w, s2)),
           -1;
  if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
    return cnn_set_error("linear: bias %s does not match weight %s (needs %lld elements)",
                         cnn_tensor_shape_str(b, s1), cnn_tensor_shape_str(w, s2),
                         (long long)w->shape[0]),
           -1;
  return 0;
}

cnn_tensor *cnn_linear_product(cnn_tensor *x, cnn_tensor *w, cnn_dtype math) {
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *wt = cnn_transpose(w, 0, 1);
  cnn_tensor *y = wt ? cnn_matmul_math(x, wt, math) : NULL;
  cnn_set_grad_enabled(prev);
  cnn_tensor_release(wt);
  return y;
}

/* y = x w^T + b, the product in arithmetic `math`, as one node. */
static cnn_tensor *linear_node(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b, cnn_dtype math) {
  cnn_tensor *y = cnn_linear_product(x, w, math);
  bool prev = cnn_set_grad_enabled(false);
  if (y && b && cnn_binary_(CNN_OP_ADD, y, b)) cnn_tensor_release(y), y = NULL;
  cnn_set_grad_enabled(prev);
  if (!y) return NULL;
  cnn_node *n = cnn_autograd_record(y, "LinearBackward", cnn_linear_backward_rule, 3,
                                    (cnn_tensor *[]){x, w, b});
  if (n) {
    cnn_node_save(n, 0, x), cnn_node_save(n, 1, w);
    cnn_node_set_geometry(n, &math, sizeof math);
  }
  return y;
}

/* Under cnn.autocast where operands are cast (float16/bfloat16 tensors
 * on a GPU): the product through matmul's autocast (recorded casts), the
 * bias added in float32 after it (a separate recorded add). */
static cnn_tensor *linear_cast(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b) {
  cnn_tensor *wt = cnn_transpose(w, 0, 1);
  cnn_tensor *y = wt ? cnn_matmul(x, wt) : NULL;
  cnn_tensor_release(wt);
  if (!y || !b) return y;
  cnn_tensor *out = cnn_binary(CNN_OP_ADD, y, b);
  cnn_tensor_release(y);
  return out;
}

/* Under autocast on a backend with bfloat16 arithmetic over float32 arrays
 * (the CPU) linear keeps its own node with math = bfloat16.  It used to go
 * through matmul(x, w^T)'s node, whose weight gradient reached w as a
 * transposed view, copied element by element into w.grad (1.5-2 ms of the
 * example network's 12 ms bf16 step). */
cnn_tensor *cnn_linear(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b) {
  if (cnn_linear_check(x, w, b)) return NULL;
  cnn_dtype run = cnn_autocast_target((cnn_tensor *[]){x, w, b}, 3);
  if (run == CNN_FLOAT32 || cnn_autocast_backend_math(run, x)) return linear_node(x, w, b, run);
  return linear_cast(x, w, b);
}

/* ---- dropout -------------------------------------------------------------------------- */

static int dropout_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *mask = cnn_node_saved(n, 0);
  if (!mask) return -1;
  cnn_tensor *r = cnn_binary(CNN_OP_MUL, g, mask);
  gin[0] = r ? cnn_grad_to_input(n, 0, r) : NULL;
  cnn_tensor_release(r);
  return gin[0] ? 0 : -1;
}

/* mask[i] = 0 with probability p, else 1/(1-p) (x's dtype, contiguous) */
static cnn_tensor *dropout_mask(const cnn_tensor *x, double p) {
  cnn_tensor *m = cnn_empty(x->ndim, x->shape, x->dtype, cnn_tensor_device(x));
  if (!m) return NULL;
  /* counter-based mask from one draw of the generator */
  if (CNN_TENSOR_CALL(m, "dropout", dropout_mask, cnn_backend_dev(m), m->dtype, cnn_tensor_numel(m),
                      p, cnn_rng_next(), cnn_tensor_data(m)))
    cnn_tensor_release(m), m = NULL;
  return m;
}

cnn_tensor *cnn_dropout(cnn_tensor *x, double p, bool training) {
  if (check_float_or_half("dropout", "input", x)) return NULL;
  if (!(p >= 0 && p <= 1))
    return cnn_set_error("dropout: probability must be between 0 and 1, got %g", p), NULL;
  if (!training || p == 0) return cnn_tensor_retain(x), x;
  cnn_tensor *mask =
      p == 1 ? cnn_zeros(x->ndim, x->shape, x->dtype, cnn_tensor_device(x)) : dropout_mask(x, p);
  if (!mask) return NULL;
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *y = cnn_binary(CNN_OP_MUL, x, mask);
  cnn_set_grad_enabled(prev);
  cnn_node *n = y ? cnn_autograd_record(y, "DropoutBackward", dropout_backward, 1, &x) : NULL;
  if (n) cnn_node_save(n, 0, mask);
  cnn_tensor_release(mask);
  return y;
}

/* ---- class losses: validation ----------------------------------------------------------- */

typedef struct {
  int64_t N, C;
  bool single;   /* input is 1-D (C), target 0-d */
  cnn_tensor *x; /* contiguous logits / log-probs (owned) */
  cnn_tensor *t; /* contiguous int64 targets (owned) */
  cnn_tensor *w; /* contiguous weights or NULL (owned) */
} class_args;

static void class_args_free(class_args *a) {
  cnn_tensor_release(a->x), cnn_tensor_release(a->t), cnn_tensor_release(a->w);
}

static int check_class_shapes(const char *op, cnn_tensor *x, cnn_tensor *target, class_args *a) {
  char s[CNN_SHAPE_STR];
  if (x->ndim != 1 && x->ndim != 2)
    return cnn_set_error("%s: input must be N x C, C or N x C x d1 x ..., got %s", op,
                         cnn_tensor_shape_str(x, s)),
           -1;
  if (target->dtype != CNN_INT64)
    return cnn_set_error("%s: target must hold int64 class indices, got %s (use :long())", op,
                         cnn_dtype_name(target->dtype)),
           -1;
  a->single = x->ndim == 1;
  a->N = a->single ? 1 : x->shape[0];
  a->C = x->shape[x->ndim - 1];
  bool ok = a->single ? cnn_tensor_numel(target) == 1 && target->ndim <= 1 : target->ndim == 1;
  if (!ok || cnn_tensor_numel(target) != a->N)
    return cnn_set_error("%s: target has %lld elements but input has %lld rows (%s)", op,
                         (long long)cnn_tensor_numel(target), (long long)a->N,
                         cnn_tensor_shape_str(x, s)),
           -1;
  return 0;
}

static int check_class_values(const char *op, const class_args *a, int64_t ignore) {
  cnn_tensor *host = cnn_to_device(a->t, CNN_DEVICE_CPU); /* a->t itself on the CPU */
  if (!host) return -1;
  const int64_t *t = cnn_tensor_data(host);
  int rc = 0;
  for (int64_t i = 0; rc == 0 && i < a->N; i++)
    if (t[i] != ignore && (t[i] < 0 || t[i] >= a->C))
      rc = (cnn_set_error("%s: target %lld out of range for %lld classes", op, (long long)t[i],
                          (long long)a->C),
            -1);
  cnn_tensor_release(host);
  return rc;
}

static int class_args_make(const char *op, cnn_tensor *x, cnn_tensor *target, cnn_tensor *weight,
                           int64_t ignore, class_args *a) {
  char s[CNN_SHAPE_STR];
  memset(a, 0, sizeof *a);
  if (check_float(op, "input", x) || !target) {
    if (!target) cnn_set_error("%s: missing target", op);
    return -1;
  }
  if (check_class_shapes(op, x, target, a) || cnn_check_same_device(op, x, target) ||
      cnn_check_same_device(op, x, weight))
    return -1;
  if (weight &&
      (check_float(op, "weight", weight) || weight->ndim != 1 || weight->shape[0] != a->C)) {
    if (weight->ndim != 1 || weight->shape[0] != a->C)
      cnn_set_error("%s: weight %s does not match the %lld classes", op,
                    cnn_tensor_shape_str(weight, s), (long long)a->C);
    return -1;
  }
  a->x = nograd_contig(x), a->t = nograd_contig(target), a->w = nograd_as(weight, x->dtype);
  if (!a->x || !a->t || (weight && !a->w) || check_class_values(op, a, ignore))
    return class_args_free(a), -1;
  return 0;
}

/* ---- spatial inputs (N x C x d1 x ...) -------------------------------------------------------
 * Moved to (N*d1*... x C) rows with the autograd-recording views, the loss
 * computed on rows, and a per-element result reshaped to the target's shape. */

typedef cnn_tensor *(*class_loss_fn)(cnn_tensor *x, cnn_tensor *t, cnn_tensor *w, cnn_reduction red,
                                     double smoothing, int64_t ignore);

static cnn_tensor *spatial_loss(const char *op, class_loss_fn fn, cnn_tensor *x, cnn_tensor *target,
                                cnn_tensor *weight, cnn_reduction red, double smoothing,
                                int64_t ignore) {
  char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
  bool ok = target && target->ndim == x->ndim - 1 && target->shape[0] == x->shape[0];
  for (int d = 2; ok && d < x->ndim; d++) ok = target->shape[d - 1] == x->shape[d];
  if (!ok)
    return cnn_set_error(
               "%s: target %s does not match input %s (expected N x d1 x ... for N x C x d1 x ...)",
               op, target ? cnn_tensor_shape_str(target, s1) : "nil", cnn_tensor_shape_str(x, s2)),
           NULL;
  int perm[CNN_MAX_DIMS], nd = x->ndim;
  perm[0] = 0, perm[nd - 1] = 1;
  for (int d = 2; d < nd; d++) perm[d - 1] = d;
  int64_t C = x->shape[1], rows = C ? cnn_tensor_numel(x) / C : 0;
  cnn_tensor *xp = cnn_permute(x, perm);
  cnn_tensor *xr = xp ? cnn_reshape(xp, 2, (int64_t[]){rows, C}) : NULL;
  cnn_tensor *tr = xr ? cnn_reshape(target, 1, &rows) : NULL;
  cnn_tensor *l = tr ? fn(xr, tr, weight, red, smoothing, ignore) : NULL;
  cnn_tensor_release(xp), cnn_tensor_release(xr), cnn_tensor_release(tr);
  if (!l || red != CNN_REDUCTION_NONE) return l;
  cnn_tensor *r = cnn_reshape(l, target->ndim, target->shape);
  cnn_tensor_release(l);
  return r;
}

static cnn_tensor *nll_rows(cnn_tensor *x, cnn_tensor *t, cnn_tensor *w, cnn_reduction red,
                            double e, int64_t ignore) {
  (void)e;
  return cnn_nll_loss(x, t, w, red, ignore);
}

/* ---- nll_loss --------------------------------------------------------------------------- */

/* node: saved 0 target, 1 weight; ip: red, ignore, N, C, single; p[0] denom */
static int class_backward_args(cnn_node *n, class_args *a) {
  memset(a, 0, sizeof *a);
  a->t = cnn_node_saved(n, 0);
  a->w = n->saved[1] ? cnn_node_saved(n, 1) : NULL;
  a->N = n->ip[2], a->C = n->ip[3], a->single = n->ip[4];
  return a->t ? 0 : -1;
}

/* ---- class losses in the backend: row losses, then tensor reductions ---------------------- */

static cnn_be_class_loss class_desc(const class_args *a, bool logits, int64_t ignore, double e) {
  cnn_be_class_loss c = {a->N, a->C, logits, ignore, e};
  return c;
}

/* the loss of a reduction from device row losses; *denom = sum of row weights */
static cnn_tensor *class_forward(const char *op, const class_args *a, bool logits, int64_t ignore,
                                 double e, cnn_reduction red, double *denom) {
  const cnn_backend *be = cnn_backend_of(a->x, op);
  if (!be) return NULL;
  if (!be->class_loss_forward) return cnn_backend_unsupported(op), NULL;
  cnn_device dev = cnn_tensor_device(a->x);
  cnn_tensor *loss = cnn_empty(1, &a->N, a->x->dtype, dev),
             *ws = loss ? cnn_empty(1, &a->N, a->x->dtype, dev) : NULL;
  cnn_be_class_loss c = class_desc(a, logits, ignore, e);
  int rc =
      ws ? be->class_loss_forward(cnn_backend_dev(a->x), a->x->dtype, &c, cnn_tensor_data(a->x),
                                  cnn_tensor_data(a->t), a->w ? cnn_tensor_data(a->w) : NULL,
                                  cnn_tensor_data(loss), cnn_tensor_data(ws))
         : -1;
  cnn_tensor *wsum = rc == 0 ? cnn_reduce(CNN_RED_SUM, ws, 0, false, 0) : NULL, *out = NULL;
  *denom = wsum ? cnn_tensor_get(wsum, 0) : 0;
  if (wsum && red == CNN_REDUCTION_NONE) {
    out = a->single ? cnn_view(loss, 0, NULL) : (cnn_tensor_retain(loss), loss);
  } else if (wsum) {
    cnn_tensor *s = cnn_reduce(CNN_RED_SUM, loss, 0, false, 0);
    out = s && red == CNN_REDUCTION_MEAN ? cnn_unary(CNN_OP_MUL_SCALAR, s, 1.0 / *denom, 0) : s;
    if (out != s) cnn_tensor_release(s);
  }
  cnn_tensor_release(loss), cnn_tensor_release(ws), cnn_tensor_release(wsum);
  return out;
}

static int class_backward(cnn_node *n, const class_args *a, cnn_tensor *x, cnn_tensor *g,
                          bool logits, cnn_tensor **gin) {
  const char *op = logits ? "cross_entropy" : "nll_loss";
  const cnn_backend *be = cnn_backend_of(x, op);
  if (!be) return -1;
  if (!be->class_loss_backward) return cnn_backend_unsupported(op);
  cnn_tensor *gc = cnn_contiguous(g);
  cnn_tensor *gx =
      gc ? cnn_empty(n->in_ndim[0], n->in_shape[0], n->in_dtype[0], cnn_tensor_device(x)) : NULL;
  cnn_be_class_loss c = class_desc(a, logits, n->ip[1], n->p[1]);
  int red = (int)n->ip[0];
  int rc = gx ? be->class_loss_backward(cnn_backend_dev(x), x->dtype, &c, cnn_tensor_data(x),
                                        cnn_tensor_data(a->t), a->w ? cnn_tensor_data(a->w) : NULL,
                                        cnn_tensor_data(gc), red == CNN_REDUCTION_NONE,
                                        red == CNN_REDUCTION_MEAN ? 1.0 / n->p[0] : 1.0,
                                        cnn_tensor_data(gx))
              : -1;
  cnn_tensor_release(gc);
  if (rc) return cnn_tensor_release(gx), -1;
  gin[0] = gx;
  return 0;
}

static int nll_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  class_args a;
  if (class_backward_args(n, &a)) return -1;
  cnn_tensor *x = cnn_node_saved(n, 2);
  return x ? class_backward(n, &a, x, g, false, gin) : -1;
}

static void record_class_node(cnn_tensor *out, const char *name, cnn_backward_fn fn, cnn_tensor *x,
                              const class_args *a, cnn_reduction red, int64_t ignore, double denom,
                              double smoothing) {
  cnn_node *n = cnn_autograd_record(out, name, fn, 1, &x);
  if (!n) return;
  cnn_node_save(n, 0, a->t);
  cnn_node_save(n, 1, a->w);
  cnn_node_save(n, 2, a->x);
  n->ip[0] = red, n->ip[1] = ignore, n->ip[2] = a->N, n->ip[3] = a->C, n->ip[4] = a->single;
  n->p[0] = denom, n->p[1] = smoothing;
}

cnn_tensor *cnn_nll_loss(cnn_tensor *logp, cnn_tensor *target, cnn_tensor *weight,
                         cnn_reduction red, int64_t ignore_index) {
  class_args a;
  if (check_reduction("nll_loss", red)) return NULL;
  if (logp && logp->ndim > 2)
    return spatial_loss("nll_loss", nll_rows, logp, target, weight, red, 0, ignore_index);
  if (class_args_make("nll_loss", logp, target, weight, ignore_index, &a)) return NULL;
  double dn = 0;
  cnn_tensor *o = class_forward("nll_loss", &a, false, ignore_index, 0, red, &dn);
  if (o) record_class_node(o, "NllLossBackward", nll_backward, logp, &a, red, ignore_index, dn, 0);
  class_args_free(&a);
  return o;
}

/* ---- cross_entropy ------------------------------------------------------------------------ */

static int ce_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  class_args a;
  cnn_tensor *x = cnn_node_saved(n, 2);
  if (!x || class_backward_args(n, &a)) return -1;
  return class_backward(n, &a, x, g, true, gin);
}

cnn_tensor *cnn_cross_entropy(cnn_tensor *logits, cnn_tensor *target, cnn_tensor *weight,
                              cnn_reduction red, double label_smoothing, int64_t ignore_index) {
  if (!(label_smoothing >= 0 && label_smoothing <= 1))
    return cnn_set_error("cross_entropy: label_smoothing must be between 0 and 1, got %g",
                         label_smoothing),
           NULL;
  class_args a;
  if (check_reduction("cross_entropy", red)) return NULL;
  if (logits && logits->ndim > 2)
    return spatial_loss("cross_entropy", cnn_cross_entropy, logits, target, weight, red,
                        label_smoothing, ignore_index);
  if (class_args_make("cross_entropy", logits, target, weight, ignore_index, &a)) return NULL;
  double dn = 0;
  cnn_tensor *o = class_forward("cross_entropy", &a, true, ignore_index, label_smoothing, red, &dn);
  if (o)
    record_class_node(o, "CrossEntropyLossBackward", ce_backward, logits, &a, red, ignore_index, dn,
                      label_smoothing);
  class_args_free(&a);
  return o;
}

/* ---- mse_loss ------------------------------------------------------------------------------ */

static cnn_tensor *apply_reduction(cnn_tensor *l, cnn_reduction red) {
  if (red == CNN_REDUCTION_NONE) return l;
  cnn_tensor *r =
      cnn_reduce(red == CNN_REDUCTION_MEAN ? CNN_RED_MEAN : CNN_RED_SUM, l, 0, false, 0);
  cnn_tensor_release(l);
  return r;
}

cnn_tensor *cnn_mse_loss(cnn_tensor *x, cnn_tensor *y, cnn_reduction red) {
  int nd;
  int64_t shape[CNN_MAX_DIMS];
  if (check_reduction("mse_loss", red) || check_float("mse_loss", "input", x)) return NULL;
  if (!y) return cnn_set_error("mse_loss: missing target"), NULL;
  if (cnn_broadcast_shape("mse_loss", x, y, &nd, shape)) return NULL;
  cnn_tensor *d = cnn_binary(CNN_OP_SUB, x, y);
  cnn_tensor *sq = d ? cnn_unary(CNN_OP_SQUARE, d, 0, 0) : NULL;
  cnn_tensor_release(d);
  return sq ? apply_reduction(sq, red) : NULL;
}

/* ---- binary cross-entropy with logits ------------------------------------------------------ */

typedef struct {
  cnn_tensor *x, *y, *pw; /* contiguous, x's shape (pw expanded) or pw NULL */
} bce_args;

static void bce_free(bce_args *b) {
  cnn_tensor_release(b->x), cnn_tensor_release(b->y), cnn_tensor_release(b->pw);
}

static int bce_make(cnn_tensor *x, cnn_tensor *y, cnn_tensor *pw, bce_args *b) {
  memset(b, 0, sizeof *b);
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *pe = pw ? cnn_expand(pw, x->ndim, x->shape) : NULL;
  b->x = nograd_contig(x), b->y = nograd_as(y, x->dtype), b->pw = nograd_as(pe, x->dtype);
  cnn_tensor_release(pe);
  cnn_set_grad_enabled(prev);
  if (!b->x || !b->y || (pw && !b->pw)) return bce_free(b), -1;
  return 0;
}

/* out = the BCE terms (k < 0) or the gradient g * d/d(x, y, pw) (k = 0, 1, 2), in the backend */
static int bce_run(cnn_tensor *out, int k, const bce_args *b, cnn_tensor *g) {
  const char *op = "binary_cross_entropy_with_logits";
  const cnn_backend *be = cnn_backend_of(out, op);
  if (!be) return -1;
  int dev = cnn_backend_dev(out);
  const void *pw = b->pw ? cnn_tensor_data(b->pw) : NULL;
  int64_t N = cnn_tensor_numel(out);
  if (k < 0 && be->bce_forward)
    return be->bce_forward(dev, out->dtype, N, cnn_tensor_data(b->x), cnn_tensor_data(b->y), pw,
                           cnn_tensor_data(out));
  if (k >= 0 && be->bce_backward)
    return be->bce_backward(dev, out->dtype, N, k, cnn_tensor_data(b->x), cnn_tensor_data(b->y), pw,
                            cnn_tensor_data(g), cnn_tensor_data(out));
  return cnn_backend_unsupported(op);
}

static int bce_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  bce_args b = {cnn_node_saved(n, 0), cnn_node_saved(n, 1),
                n->saved[2] ? cnn_node_saved(n, 2) : NULL};
  if (!b.x || !b.y) return -1;
  cnn_tensor *gc = cnn_contiguous(g);
  if (!gc) return -1;
  for (int k = 0; k < 3; k++) {
    if (!n->needs[k]) continue;
    cnn_tensor *r = cnn_empty(b.x->ndim, b.x->shape, g->dtype, cnn_tensor_device(b.x));
    if (r && bce_run(r, k, &b, gc)) cnn_tensor_release(r), r = NULL;
    gin[k] = r ? cnn_grad_to_input(n, k, r) : NULL;
    cnn_tensor_release(r);
    if (!gin[k]) return cnn_tensor_release(gc), -1;
  }
  cnn_tensor_release(gc);
  return 0;
}

/* w (pos_weight or weight, may be NULL) broadcasts to x's shape */
static int check_bce_weight(const char *what, cnn_tensor *x, cnn_tensor *w) {
  const char *op = "binary_cross_entropy_with_logits";
  char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
  if (!w) return 0;
  if (check_float(op, what, w) || cnn_check_same_device(op, x, w)) return -1;
  int nd;
  int64_t shape[CNN_MAX_DIMS];
  if (cnn_broadcast_shape(op, w, x, &nd, shape) || nd != x->ndim ||
      memcmp(shape, x->shape, sizeof(int64_t) * nd))
    return cnn_set_error("%s: %s %s cannot be broadcast to input %s", op, what,
                         cnn_tensor_shape_str(w, s1), cnn_tensor_shape_str(x, s2)),
           -1;
  return 0;
}

static int check_bce(cnn_tensor *x, cnn_tensor *y, cnn_tensor *pw, cnn_tensor *w) {
  const char *op = "binary_cross_entropy_with_logits";
  char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
  if (check_float(op, "input", x) || check_float(op, "target", y)) return -1;
  if (cnn_check_same_device(op, x, y)) return -1;
  if (!cnn_same_shape(x, y))
    return cnn_set_error("%s: target %s does not match input %s", op, cnn_tensor_shape_str(y, s1),
                         cnn_tensor_shape_str(x, s2)),
           -1;
  return check_bce_weight("pos_weight", x, pw) || check_bce_weight("weight", x, w) ? -1 : 0;
}

/* The per-element loss times weight (PyTorch's loss.mul_(weight)), recorded
 * as an ordinary product so the gradient reaches weight too. */
static cnn_tensor *bce_weighted(cnn_tensor *l, cnn_tensor *w) {
  if (!l || !w) return l;
  cnn_tensor *r = cnn_binary(CNN_OP_MUL, l, w);
  cnn_tensor_release(l);
  return r;
}

cnn_tensor *cnn_bce_with_logits(cnn_tensor *x, cnn_tensor *y, cnn_tensor *pos_weight,
                                cnn_tensor *weight, cnn_reduction red) {
  bce_args b;
  if (check_reduction("binary_cross_entropy_with_logits", red) ||
      check_bce(x, y, pos_weight, weight) || bce_make(x, y, pos_weight, &b))
    return NULL;
  cnn_tensor *l = cnn_empty(x->ndim, x->shape, x->dtype, cnn_tensor_device(x));
  if (l && bce_run(l, -1, &b, NULL)) cnn_tensor_release(l), l = NULL;
  cnn_node *n = l ? cnn_autograd_record(l, "BinaryCrossEntropyWithLogitsBackward", bce_backward, 3,
                                        (cnn_tensor *[]){x, y, pos_weight})
                  : NULL;
  if (n) cnn_node_save(n, 0, b.x), cnn_node_save(n, 1, b.y), cnn_node_save(n, 2, b.pw);
  bce_free(&b);
  l = bce_weighted(l, weight);
  return l ? apply_reduction(l, red) : NULL;
}
