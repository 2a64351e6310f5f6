/*
 * loss_composed.c -- the losses that are each composed of
 * differentiable ops (elementwise, where, log_softmax, reductions), so they
 * run on every device those ops run on and their backward is the autograd
 * of the composition:
 *
 *   l1_loss         |x - y|
 *   smooth_l1_loss  0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta 0: l1)
 *   huber_loss      0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)
 *   kl_div          t (log t - x) (0 where t = 0), or e^t (t - x) with log_target
 *   binary_cross_entropy  -w (y log x + (1 - y) log(1 - x)), each log clamped
 *                   to >= -100 and x checked to lie in [0, 1] (PyTorch's)
 *   cross_entropy_probs   -sum_c w_c t'_c log_softmax(x)_c with probability
 *                   targets t' = (1 - e) t + e / C; the mean divides by the
 *                   number of samples (numel / C), not by the weights
 *
 * Definitions, defaults and errors follow PyTorch's (torch.nn.functional).
 * Derivatives at the kinks come out as PyTorch's: |d|'s is sign(d) (0 at 0);
 * where() routes the gradient to the branch taken, and at |d| = beta the
 * linear branch's sign(d) equals PyTorch's d / beta.  One departure:
 * kl_div's gradient with respect to a target of exactly 0 is 0 here (the
 * log is taken of 1 there), where PyTorch's xlogy gives NaN.
 *
 * Temporaries: each function keeps its intermediate tensors in a `temps`
 * list released at the end; an op given a NULL input (an earlier failure,
 * whose message stays in cnn_error()) returns NULL without running.
 */
#include <math.h>
#include <string.h>

#include "backend.h"
#include "cnn.h"

enum { MAX_TEMPS = 32 };
typedef struct {
  cnn_tensor *t[MAX_TEMPS];
  int n;
} temps;

static cnn_tensor *keep(temps *k, cnn_tensor *t) {
  if (t && k->n < MAX_TEMPS) k->t[k->n++] = t;
  return t;
}
static void temps_release(temps *k) {
  for (int i = 0; i < k->n; i++) cnn_tensor_release(k->t[i]);
  k->n = 0;
}
/* the result r retained past the release of the temporaries */
static cnn_tensor *finish(temps *k, cnn_tensor *r) {
  if (r) cnn_tensor_retain(r);
  temps_release(k);
  return r;
}

static cnn_tensor *un(temps *k, cnn_unary_op op, cnn_tensor *x, double p0, double p1) {
  return x ? keep(k, cnn_unary(op, x, p0, p1)) : NULL;
}
static cnn_tensor *bin(temps *k, cnn_binary_op op, cnn_tensor *a, cnn_tensor *b) {
  return a && b ? keep(k, cnn_binary(op, a, b)) : NULL;
}
static cnn_tensor *where(temps *k, cnn_tensor *c, cnn_tensor *a, cnn_tensor *b) {
  return c && a && b ? keep(k, cnn_where(c, a, b)) : NULL;
}
/* a 0-d constant in like's dtype and on its device */
static cnn_tensor *constant(temps *k, double v, const cnn_tensor *like) {
  return like ? keep(k, cnn_scalar(v, like->dtype, cnn_tensor_device(like))) : NULL;
}
static cnn_tensor *sum_all(temps *k, cnn_tensor *x) {
  return x ? keep(k, cnn_reduce(CNN_RED_SUM, x, 0, false, 0)) : NULL;
}

static cnn_tensor *reduce_loss(temps *k, cnn_tensor *l, cnn_reduction red) {
  if (!l || red == CNN_REDUCTION_NONE) return l;
  return keep(k,
              cnn_reduce(red == CNN_REDUCTION_MEAN ? CNN_RED_MEAN : CNN_RED_SUM, l, 0, false, 0));
}

/* ---- checks ------------------------------------------------------------------------------ */

static int check_reduction(const char *op, cnn_reduction red) {
  if (red == CNN_REDUCTION_NONE || red == CNN_REDUCTION_MEAN || red == CNN_REDUCTION_SUM) return 0;
  return cnn_set_error("%s: unknown reduction %d", op, (int)red), -1;
}

static int check_float(const char *op, const char *what, const cnn_tensor *t) {
  if (!t) return cnn_set_error("%s: missing %s", op, what), -1;
  if (cnn_dtype_is_float(t->dtype)) return 0;
  char s[CNN_SHAPE_STR];
  return cnn_set_error("%s: %s must be a floating-point tensor, got %s %s", op, what,
                       cnn_dtype_name(t->dtype), cnn_tensor_shape_str(t, s)),
         -1;
}

/* x and y: float, one device, broadcastable (PyTorch broadcasts them) */
static int check_pair(const char *op, cnn_tensor *x, cnn_tensor *y, cnn_reduction red) {
  int nd;
  int64_t shape[CNN_MAX_DIMS];
  if (check_reduction(op, red) || check_float(op, "input", x) || check_float(op, "target", y))
    return -1;
  if (cnn_check_same_device(op, x, y)) return -1;
  return cnn_broadcast_shape(op, x, y, &nd, shape);
}

/* ---- l1, smooth l1, huber ------------------------------------------------------------------- */

cnn_tensor *cnn_l1_loss(cnn_tensor *x, cnn_tensor *y, cnn_reduction red) {
  if (check_pair("l1_loss", x, y, red)) return NULL;
  temps k = {.n = 0};
  cnn_tensor *l = un(&k, CNN_OP_ABS, bin(&k, CNN_OP_SUB, x, y), 0, 0);
  return finish(&k, reduce_loss(&k, l, red));
}

/* where |d| < width: scale_sq * d^2, else lin * (|d| - 0.5 width) */
static cnn_tensor *piecewise_quadratic(temps *k, cnn_tensor *x, cnn_tensor *y, double width,
                                       double scale_sq, double lin) {
  cnn_tensor *d = bin(k, CNN_OP_SUB, x, y), *a = un(k, CNN_OP_ABS, d, 0, 0);
  cnn_tensor *inside = bin(k, CNN_OP_LT, a, constant(k, width, x));
  cnn_tensor *quad = un(k, CNN_OP_MUL_SCALAR, un(k, CNN_OP_SQUARE, d, 0, 0), scale_sq, 0);
  cnn_tensor *linear =
      un(k, CNN_OP_MUL_SCALAR, un(k, CNN_OP_ADD_SCALAR, a, -0.5 * width, 0), lin, 0);
  return where(k, inside, quad, linear);
}

cnn_tensor *cnn_smooth_l1_loss(cnn_tensor *x, cnn_tensor *y, cnn_reduction red, double beta) {
  if (check_pair("smooth_l1_loss", x, y, red)) return NULL;
  if (!(beta >= 0) || isinf(beta))
    return cnn_set_error("smooth_l1_loss: beta must be a finite number >= 0, got %g", beta), NULL;
  if (beta == 0) return cnn_l1_loss(x, y, red);
  temps k = {.n = 0};
  cnn_tensor *l = piecewise_quadratic(&k, x, y, beta, 0.5 / beta, 1.0);
  return finish(&k, reduce_loss(&k, l, red));
}

cnn_tensor *cnn_huber_loss(cnn_tensor *x, cnn_tensor *y, cnn_reduction red, double delta) {
  if (check_pair("huber_loss", x, y, red)) return NULL;
  if (!(delta > 0) || isinf(delta))
    return cnn_set_error("huber_loss: delta must be a finite number > 0, got %g", delta), NULL;
  temps k = {.n = 0};
  cnn_tensor *l = piecewise_quadratic(&k, x, y, delta, 0.5, delta);
  return finish(&k, reduce_loss(&k, l, red));
}

/* ---- kl_div -------------------------------------------------------------------------------- */

/* t log t, 0 where t = 0 (log taken of 1 there, so no NaN reaches the gradient) */
static cnn_tensor *t_log_t(temps *k, cnn_tensor *t) {
  cnn_tensor *zero = constant(k, 0, t), *one = constant(k, 1, t);
  cnn_tensor *safe = where(k, bin(k, CNN_OP_NE, t, zero), t, one);
  return bin(k, CNN_OP_MUL, t, un(k, CNN_OP_LOG, safe, 0, 0));
}

cnn_tensor *cnn_kl_div(cnn_tensor *x, cnn_tensor *t, cnn_reduction red, bool batchmean,
                       bool log_target) {
  if (check_pair("kl_div", x, t, red)) return NULL;
  if (batchmean && red != CNN_REDUCTION_SUM)
    return cnn_set_error("kl_div: batchmean is a sum divided by the batch size"), NULL;
  temps k = {.n = 0};
  cnn_tensor *l = log_target
                      ? bin(&k, CNN_OP_MUL, un(&k, CNN_OP_EXP, t, 0, 0), bin(&k, CNN_OP_SUB, t, x))
                      : bin(&k, CNN_OP_SUB, t_log_t(&k, t), bin(&k, CNN_OP_MUL, t, x));
  cnn_tensor *r = reduce_loss(&k, l, red);
  if (batchmean && x->ndim > 0) r = un(&k, CNN_OP_MUL_SCALAR, r, 1.0 / (double)x->shape[0], 0);
  return finish(&k, r);
}

/* ---- binary cross-entropy on probabilities -------------------------------------------------- */

/* every element of x in [0, 1] (NaN is not); -1 with the error set otherwise */
static int check_probabilities(const char *op, cnn_tensor *x) {
  temps k = {.n = 0};
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *ok = bin(&k, CNN_OP_MUL, bin(&k, CNN_OP_GE, x, constant(&k, 0, x)),
                       bin(&k, CNN_OP_LE, x, constant(&k, 1, x)));
  cnn_tensor *bad = sum_all(&k, bin(&k, CNN_OP_EQ, ok, constant(&k, 0, ok))); /* how many are not */
  cnn_tensor *host = bad ? keep(&k, cnn_to_device(bad, CNN_DEVICE_CPU)) : NULL;
  cnn_set_grad_enabled(prev);
  int rc = host ? 0 : -1;
  if (host && cnn_tensor_get(host, 0) != 0) {
    char s[CNN_SHAPE_STR];
    cnn_set_error("%s: every element of the input %s must lie in [0, 1] (probabilities; use "
                  "binary_cross_entropy_with_logits on logits)",
                  op, cnn_tensor_shape_str(x, s));
    rc = -1;
  }
  temps_release(&k);
  return rc;
}

static int check_bce(cnn_tensor *x, cnn_tensor *y, cnn_tensor *w, cnn_reduction red) {
  const char *op = "binary_cross_entropy";
  char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
  if (check_pair(op, x, y, red)) return -1;
  if (!cnn_same_shape(x, y))
    return cnn_set_error("%s: target %s must have the shape of the input %s", op,
                         cnn_tensor_shape_str(y, s1), cnn_tensor_shape_str(x, s2)),
           -1;
  if (w && (check_float(op, "weight", w) || cnn_check_same_device(op, x, w))) return -1;
  int nd;
  int64_t shape[CNN_MAX_DIMS];
  if (w && (cnn_broadcast_shape(op, w, x, &nd, shape) || nd != x->ndim ||
            memcmp(shape, x->shape, sizeof(int64_t) * (size_t)nd)))
    return cnn_set_error("%s: weight %s cannot be broadcast to input %s", op,
                         cnn_tensor_shape_str(w, s1), cnn_tensor_shape_str(x, s2)),
           -1;
  return check_probabilities(op, x);
}

cnn_tensor *cnn_binary_cross_entropy(cnn_tensor *x, cnn_tensor *y, cnn_tensor *weight,
                                     cnn_reduction red) {
  if (check_bce(x, y, weight, red)) return NULL;
  temps k = {.n = 0};
  cnn_tensor *logx = un(&k, CNN_OP_CLAMP, un(&k, CNN_OP_LOG, x, 0, 0), -100, INFINITY);
  cnn_tensor *one_minus_x = un(&k, CNN_OP_ADD_SCALAR, un(&k, CNN_OP_NEG, x, 0, 0), 1, 0);
  cnn_tensor *log1mx = un(&k, CNN_OP_CLAMP, un(&k, CNN_OP_LOG, one_minus_x, 0, 0), -100, INFINITY);
  cnn_tensor *one_minus_y = un(&k, CNN_OP_ADD_SCALAR, un(&k, CNN_OP_NEG, y, 0, 0), 1, 0);
  cnn_tensor *ll =
      bin(&k, CNN_OP_ADD, bin(&k, CNN_OP_MUL, y, logx), bin(&k, CNN_OP_MUL, one_minus_y, log1mx));
  cnn_tensor *l = un(&k, CNN_OP_NEG, ll, 0, 0);
  if (weight) l = bin(&k, CNN_OP_MUL, l, weight);
  return finish(&k, reduce_loss(&k, l, red));
}

/* ---- cross entropy with probability targets -------------------------------------------------- */

static int check_probs_target(cnn_tensor *x, cnn_tensor *t, cnn_tensor *w, cnn_reduction red,
                              double e) {
  const char *op = "cross_entropy";
  char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
  if (check_pair(op, x, t, red)) return -1;
  if (x->ndim == 0)
    return cnn_set_error("%s: input must have a class dim, got a 0-d tensor", op), -1;
  if (!cnn_same_shape(x, t))
    return cnn_set_error("%s: a probability target %s must have the shape of the input %s", op,
                         cnn_tensor_shape_str(t, s1), cnn_tensor_shape_str(x, s2)),
           -1;
  if (!(e >= 0 && e <= 1))
    return cnn_set_error("%s: label_smoothing must be in [0, 1], got %g", op, e), -1;
  int64_t C = x->shape[x->ndim == 1 ? 0 : 1];
  if (w && (check_float(op, "weight", w) || cnn_check_same_device(op, x, w))) return -1;
  if (w && (w->ndim != 1 || w->shape[0] != C))
    return cnn_set_error("%s: weight %s must hold one value per class (%lld) of the input %s", op,
                         cnn_tensor_shape_str(w, s1), (long long)C, cnn_tensor_shape_str(x, s2)),
           -1;
  return 0;
}

/* w (C) as C x 1 x ... x 1 against an input of ndim dims with classes at dim 1 */
static cnn_tensor *class_weight_view(temps *k, cnn_tensor *w, int ndim) {
  if (ndim <= 2) return w;
  int64_t shape[CNN_MAX_DIMS];
  shape[0] = w->shape[0];
  for (int i = 1; i < ndim - 1; i++) shape[i] = 1;
  return keep(k, cnn_view(w, ndim - 1, shape));
}

cnn_tensor *cnn_cross_entropy_probs(cnn_tensor *x, cnn_tensor *t, cnn_tensor *weight,
                                    cnn_reduction red, double label_smoothing) {
  if (check_probs_target(x, t, weight, red, label_smoothing)) return NULL;
  int cdim = x->ndim == 1 ? 0 : 1;
  int64_t C = x->shape[cdim];
  temps k = {.n = 0};
  cnn_tensor *logp = keep(&k, cnn_log_softmax(x, cdim));
  cnn_tensor *tt = t;
  if (label_smoothing > 0)
    tt = un(&k, CNN_OP_ADD_SCALAR, un(&k, CNN_OP_MUL_SCALAR, t, 1 - label_smoothing, 0),
            label_smoothing / C, 0);
  cnn_tensor *prod = bin(&k, CNN_OP_MUL, logp, tt);
  if (weight) prod = bin(&k, CNN_OP_MUL, prod, class_weight_view(&k, weight, x->ndim));
  cnn_tensor *per = prod ? keep(&k, cnn_reduce(CNN_RED_SUM, prod, 1u << cdim, false, 0)) : NULL;
  cnn_tensor *l = un(&k, CNN_OP_NEG, per, 0, 0);
  if (red == CNN_REDUCTION_MEAN) /* over the samples: numel / C */
    l = un(&k, CNN_OP_MUL_SCALAR, sum_all(&k, l), (double)C / (double)cnn_tensor_numel(x), 0);
  else if (red == CNN_REDUCTION_SUM)
    l = sum_all(&k, l);
  return finish(&k, l);
}
