/*
 * losses.c -- F.cross_entropy, F.nll_loss, F.mse_loss,
 * F.binary_cross_entropy_with_logits; and F.l1_loss,
 * F.smooth_l1_loss, F.huber_loss, F.kl_div, F.binary_cross_entropy, and
 * F.cross_entropy with a float probability target of the input's shape.
 *
 * Class targets are int64 labels 1..C at this layer (DESIGN.md); core
 * takes 0-based labels.  class_targets() makes the 0-based copy on the CPU,
 * checking every label first so the error speaks 1-based:
 * "cross_entropy: target 11 out of range 1..10 (target 8, input 8x10)".
 * ignore_index is a label value to skip, any integer (PyTorch's -100 works);
 * ignored labels are mapped to a non-negative core sentinel (ignore-1 when
 * ignore >= 1, else C) that no valid label takes.
 */
#include <string.h>

#include "bind.h"

static cnn_reduction reduction_of(lua_State *L, int opts, const char *fn) {
  const char *r = cnn_lua_opt_string(L, opts, "reduction", "mean");
  if (strcmp(r, "mean") == 0) return CNN_REDUCTION_MEAN;
  if (strcmp(r, "sum") == 0) return CNN_REDUCTION_SUM;
  if (strcmp(r, "none") == 0) return CNN_REDUCTION_NONE;
  return cnn_lua_fail(L, "%s: reduction must be 'mean', 'sum' or 'none', got '%s'", fn, r);
}

/* opts.key as a tensor (left on the stack, anchored) or NULL */
static cnn_tensor *opt_tensor_field(lua_State *L, int opts, const char *fn, const char *key) {
  if (!opts) return NULL;
  lua_getfield(L, opts, key);
  if (lua_isnil(L, -1)) return NULL;
  cnn_tensor *t = cnn_lua_to_tensor(L, -1);
  if (!t)
    cnn_lua_fail(L, "%s: option '%s' must be a tensor, got %s", fn, key, luaL_typename(L, -1));
  return t;
}

/* the options table at idx (0 when absent), holding only `known` keys */
static int trailing_opts(lua_State *L, int idx, const char *fn, const char *const *known) {
  if (lua_isnoneornil(L, idx)) return 0;
  luaL_checktype(L, idx, LUA_TTABLE);
  cnn_lua_check_options(L, idx, fn, known);
  return idx;
}

typedef struct {
  bool has_ignore;
  int64_t ignore;      /* user's label to skip */
  int64_t core_ignore; /* what core sees, or -1 */
} ignore_spec;

static void check_labels(lua_State *L, const char *fn, const cnn_tensor *target,
                         const cnn_tensor *input, int64_t nclass, const ignore_spec *ig,
                         const int64_t *src, int64_t *dst) {
  int64_t n = cnn_tensor_numel(target);
  for (int64_t i = 0; i < n; i++) {
    int64_t v = src[i];
    if (ig->has_ignore && v == ig->ignore) {
      dst[i] = ig->core_ignore;
    } else if (v < 1 || v > nclass) {
      char a[CNN_SHAPE_STR], b[CNN_SHAPE_STR];
      cnn_lua_fail(L, "%s: target %lld out of range 1..%lld (target %s, input %s)", fn,
                   (long long)v, (long long)nclass, cnn_tensor_shape_str(target, a),
                   cnn_tensor_shape_str(input, b));
    } else {
      dst[i] = v - 1;
    }
  }
}

/* 0-based copy of the int64 target at arg, on input's device (new ref). */
static cnn_tensor *class_targets(lua_State *L, int arg, const char *fn, cnn_tensor *input,
                                 const ignore_spec *ig) {
  cnn_tensor *target = cnn_lua_check_tensor(L, arg);
  if (target->dtype != CNN_INT64)
    cnn_lua_fail(L, "%s: target must be int64 class labels 1..C, got %s (use :long())", fn,
                 cnn_dtype_name(target->dtype));
  if (input->ndim == 0) cnn_lua_fail(L, "%s: input must have a class dim, got a 0-d tensor", fn);
  int64_t nclass = input->shape[input->ndim >= 2 ? 1 : 0];
  cnn_tensor *host = cnn_to_device(target, CNN_DEVICE_CPU);
  cnn_lua_push_result(L, host);
  cnn_tensor *c = cnn_contiguous(host);
  cnn_lua_push_result(L, c);
  cnn_tensor *out = cnn_empty(c->ndim, c->shape, CNN_INT64, CNN_DEVICE_CPU);
  cnn_lua_push_result(L, out);
  check_labels(L, fn, target, input, nclass, ig, cnn_tensor_data(c), cnn_tensor_data(out));
  cnn_tensor *r = cnn_to_device(out, cnn_tensor_device(input));
  if (!r) cnn_lua_error(L);
  lua_pop(L, 3);
  return r;
}

static ignore_spec ignore_of(lua_State *L, int opts, const cnn_tensor *input) {
  ignore_spec ig = {false, 0, -1};
  if (!opts) return ig;
  lua_getfield(L, opts, "ignore_index");
  if (!lua_isnil(L, -1)) {
    ig.has_ignore = true;
    ig.ignore = cnn_lua_check_int(L, -1);
    int64_t nclass = input->ndim ? input->shape[input->ndim >= 2 ? 1 : 0] : 0;
    ig.core_ignore = ig.ignore >= 1 ? ig.ignore - 1 : nclass;
  }
  lua_pop(L, 1);
  return ig;
}

static int cross_entropy_probs(lua_State *L, int opts, cnn_reduction red, double ls, cnn_tensor *w);

/* F.cross_entropy(logits, target [, {weight=, reduction='mean', label_smoothing=0, ignore_index=}]) */
static int f_cross_entropy(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  static const char *const known[] = {"ignore_index", "label_smoothing", "reduction", "weight",
                                      NULL};
  int opts = trailing_opts(L, 3, "F.cross_entropy", known);
  cnn_reduction red = reduction_of(L, opts, "cross_entropy");
  double ls = cnn_lua_opt_number(L, opts, "label_smoothing", 0);
  if (!(ls >= 0 && ls <= 1))
    return cnn_lua_fail(L, "cross_entropy: label_smoothing must be in [0, 1], got %g", ls);
  cnn_tensor *w = opt_tensor_field(L, opts, "cross_entropy", "weight");
  if (cnn_lua_to_tensor(L, 2) && cnn_dtype_is_float(cnn_lua_to_tensor(L, 2)->dtype))
    return cross_entropy_probs(L, opts, red, ls, w);
  ignore_spec ig = ignore_of(L, opts, x);
  cnn_tensor *t = class_targets(L, 2, "cross_entropy", x, &ig);
  cnn_tensor *r = cnn_cross_entropy(x, t, w, red, ls, ig.core_ignore);
  cnn_tensor_release(t);
  return cnn_lua_push_result(L, r);
}

/* F.nll_loss(logp, target [, {weight=, reduction='mean', ignore_index=}]) */
static int f_nll_loss(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  static const char *const known[] = {"ignore_index", "reduction", "weight", NULL};
  int opts = trailing_opts(L, 3, "F.nll_loss", known);
  cnn_reduction red = reduction_of(L, opts, "nll_loss");
  cnn_tensor *w = opt_tensor_field(L, opts, "nll_loss", "weight");
  ignore_spec ig = ignore_of(L, opts, x);
  cnn_tensor *t = class_targets(L, 2, "nll_loss", x, &ig);
  cnn_tensor *r = cnn_nll_loss(x, t, w, red, ig.core_ignore);
  cnn_tensor_release(t);
  return cnn_lua_push_result(L, r);
}

/* F.mse_loss(x, y [, {reduction='mean'}]) */
static int f_mse_loss(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1), *y = cnn_lua_check_tensor(L, 2);
  static const char *const known[] = {"reduction", NULL};
  cnn_reduction red = reduction_of(L, trailing_opts(L, 3, "F.mse_loss", known), "mse_loss");
  return cnn_lua_push_result(L, cnn_mse_loss(x, y, red));
}

/* F.binary_cross_entropy_with_logits(x, y [, {weight=, pos_weight=, reduction='mean'}]) */
static int f_bce_with_logits(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1), *y = cnn_lua_check_tensor(L, 2);
  static const char *const known[] = {"pos_weight", "reduction", "weight", NULL};
  int opts = trailing_opts(L, 3, "F.binary_cross_entropy_with_logits", known);
  cnn_reduction red = reduction_of(L, opts, "binary_cross_entropy_with_logits");
  cnn_tensor *pw = opt_tensor_field(L, opts, "binary_cross_entropy_with_logits", "pos_weight");
  cnn_tensor *w = opt_tensor_field(L, opts, "binary_cross_entropy_with_logits", "weight");
  return cnn_lua_push_result(L, cnn_bce_with_logits(x, y, pw, w, red));
}

/* ---- more losses (composed in core) ------------------------------------------------------ */

/* probability targets: float, the input's shape; ignore_index has no meaning (PyTorch refuses it) */
static int cross_entropy_probs(lua_State *L, int opts, cnn_reduction red, double ls,
                               cnn_tensor *w) {
  if (opts && lua_getfield(L, opts, "ignore_index") != LUA_TNIL)
    return cnn_lua_fail(
        L, "cross_entropy: ignore_index is not supported with probability (float) targets");
  cnn_tensor *x = cnn_lua_check_tensor(L, 1), *t = cnn_lua_check_tensor(L, 2);
  if (!cnn_same_shape(x, t)) {
    char a[CNN_SHAPE_STR], b[CNN_SHAPE_STR];
    return cnn_lua_fail(
        L,
        "cross_entropy: target must be int64 class labels 1..C (use :long()) or %s class "
        "probabilities of the input's shape %s, got %s %s",
        cnn_dtype_name(t->dtype), cnn_tensor_shape_str(x, a), cnn_dtype_name(t->dtype),
        cnn_tensor_shape_str(t, b));
  }
  return cnn_lua_push_result(L, cnn_cross_entropy_probs(x, t, w, red, ls));
}

/* F.l1_loss(x, y [, {reduction='mean'}]) */
static int f_l1_loss(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1), *y = cnn_lua_check_tensor(L, 2);
  static const char *const known[] = {"reduction", NULL};
  cnn_reduction red = reduction_of(L, trailing_opts(L, 3, "F.l1_loss", known), "l1_loss");
  return cnn_lua_push_result(L, cnn_l1_loss(x, y, red));
}

typedef cnn_tensor *(*width_loss_fn)(cnn_tensor *, cnn_tensor *, cnn_reduction, double);

/* F.<op>(x, y [, {reduction='mean', <key>=1}]): smooth_l1_loss (beta), huber_loss (delta) */
static int width_loss(lua_State *L, const char *op, const char *qualified, const char *key,
                      width_loss_fn fn) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1), *y = cnn_lua_check_tensor(L, 2);
  const char *const known[] = {key, "reduction", NULL}; /* sorted: beta, delta < reduction */
  int opts = trailing_opts(L, 3, qualified, known);
  cnn_reduction red = reduction_of(L, opts, op);
  return cnn_lua_push_result(L, fn(x, y, red, cnn_lua_opt_number(L, opts, key, 1.0)));
}
static int f_smooth_l1_loss(lua_State *L) {
  return width_loss(L, "smooth_l1_loss", "F.smooth_l1_loss", "beta", cnn_smooth_l1_loss);
}
static int f_huber_loss(lua_State *L) {
  return width_loss(L, "huber_loss", "F.huber_loss", "delta", cnn_huber_loss);
}

/* F.kl_div(logp, target [, {reduction='mean', log_target=false}]); reduction also 'batchmean' */
static int f_kl_div(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1), *t = cnn_lua_check_tensor(L, 2);
  static const char *const known[] = {"log_target", "reduction", NULL};
  int opts = trailing_opts(L, 3, "F.kl_div", known);
  const char *r = cnn_lua_opt_string(L, opts, "reduction", "mean");
  bool batchmean = strcmp(r, "batchmean") == 0;
  if (!batchmean && strcmp(r, "mean") && strcmp(r, "sum") && strcmp(r, "none"))
    return cnn_lua_fail(
        L, "kl_div: reduction must be 'mean', 'batchmean', 'sum' or 'none', got '%s'", r);
  cnn_reduction red = batchmean ? CNN_REDUCTION_SUM : reduction_of(L, opts, "kl_div");
  bool log_target = cnn_lua_opt_bool(L, opts, "log_target", false);
  return cnn_lua_push_result(L, cnn_kl_div(x, t, red, batchmean, log_target));
}

/* F.binary_cross_entropy(p, y [, {weight=, reduction='mean'}]) */
static int f_bce(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1), *y = cnn_lua_check_tensor(L, 2);
  static const char *const known[] = {"reduction", "weight", NULL};
  int opts = trailing_opts(L, 3, "F.binary_cross_entropy", known);
  cnn_reduction red = reduction_of(L, opts, "binary_cross_entropy");
  cnn_tensor *w = opt_tensor_field(L, opts, "binary_cross_entropy", "weight");
  return cnn_lua_push_result(L, cnn_binary_cross_entropy(x, y, w, red));
}

const luaL_Reg cnn_lua_loss_funcs[] = {{"cross_entropy", f_cross_entropy},
                                       {"nll_loss", f_nll_loss},
                                       {"mse_loss", f_mse_loss},
                                       {"binary_cross_entropy_with_logits", f_bce_with_logits},
                                       {"l1_loss", f_l1_loss},
                                       {"smooth_l1_loss", f_smooth_l1_loss},
                                       {"huber_loss", f_huber_loss},
                                       {"kl_div", f_kl_div},
                                       {"binary_cross_entropy", f_bce},
                                       {NULL, NULL}};
