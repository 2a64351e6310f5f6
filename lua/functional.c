/*
 * functional.c -- F.*: the functional network ops (conv2d, linear, pooling,
 * activations, softmax, dropout, batch_norm, flatten, cat, stack, pad).
 * The losses are in losses.c.
 *
 * Options follow PyTorch's names in a trailing table.  "Pair" options
 * (stride, dilation, kernel) take a number or {h, w}; conv padding also
 * takes {top, bottom, left, right}.  Every integer is validated here (range
 * and type) so the core structs never hold garbage; core then checks the
 * shapes and names itself in the error.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bind.h"

/* ---- option parsing ------------------------------------------------------------ */

static int small_int(lua_State *L, int idx, const char *fn, const char *key, int lo) {
  int isnum;
  lua_Integer v = lua_tointegerx(L, idx, &isnum);
  if (!isnum)
    cnn_lua_fail(L, "%s: %s must be an integer or a table of integers, got %s", fn, key,
                 luaL_typename(L, idx));
  if (v < lo || v > (1 << 24))
    cnn_lua_fail(L, "%s: %s %lld out of range (at least %d)", fn, key, (long long)v, lo);
  return (int)v;
}

/* Value at idx (number or table of n_ok entries) into out[0..n-1]; returns
 * how many the table held (1 for a number).  A number fills all n. */
static int int_list(lua_State *L, int idx, const char *fn, const char *key, int lo, int *out, int n,
                    int max_n) {
  if (!lua_istable(L, idx)) {
    int v = small_int(L, idx, fn, key, lo);
    for (int i = 0; i < n; i++) out[i] = v;
    return 1;
  }
  lua_Integer len = luaL_len(L, idx);
  if (len < 1 || len > max_n)
    cnn_lua_fail(L, "%s: %s takes a number or {h, w}%s", fn, key,
                 max_n == 4 ? " or {top, bottom, left, right}" : "");
  for (int i = 0; i < len; i++) {
    lua_geti(L, idx, i + 1);
    out[i] = small_int(L, -1, fn, key, lo);
    lua_pop(L, 1);
  }
  if (len == 1)
    for (int i = 1; i < n; i++) out[i] = out[0];
  return (int)len;
}

/* opts.key as a pair (number or {h, w}); def when absent */
static void opt_pair(lua_State *L, int opts, const char *fn, const char *key, int lo, int def,
                     int out[2]) {
  out[0] = out[1] = def;
  if (!opts || lua_getfield(L, opts, key) == LUA_TNIL) {
    if (opts) lua_pop(L, 1);
    return;
  }
  int_list(L, -1, fn, key, lo, out, 2, 2);
  lua_pop(L, 1);
}

/* index of the trailing options table among args from..top, or 0 */
static int opts_index(lua_State *L, int from) {
  int top = lua_gettop(L);
  if (top >= from && lua_istable(L, top) && !cnn_lua_to_tensor(L, top)) return top;
  return 0;
}

/* ---- convolution and linear --------------------------------------------------------- */

static void conv_padding(lua_State *L, int opts, const char *fn, cnn_conv_params *p) {
  int v[4] = {0, 0, 0, 0};
  if (!opts || lua_getfield(L, opts, "padding") == LUA_TNIL) {
    if (opts) lua_pop(L, 1);
    return;
  }
  int n = int_list(L, -1, fn, "padding", 0, v, 4, 4);
  lua_pop(L, 1);
  if (n == 3)
    cnn_lua_fail(L, "%s: padding takes a number, {h, w} or {top, bottom, left, right}", fn);
  if (n == 2) { /* {h, w} */
    int h = v[0], w = v[1];
    v[0] = v[1] = h;
    v[2] = v[3] = w;
  } else if (n == 1) {
    v[1] = v[2] = v[3] = v[0];
  }
  for (int i = 0; i < 4; i++) p->pad[i] = v[i];
}

/* padding = 'valid' (none) or 'same' (stride 1: the output has the
 * input's size; PyTorch's split, the odd pixel to the bottom/right) for
 * conv2d and conv1d (w's last dims are the kernel).  Returns 0 when
 * opts.padding is not a string (the caller reads numbers). */
static int padding_string(lua_State *L, int opts, const char *fn, const cnn_tensor *w,
                          cnn_conv_params *p) {
  if (!opts || lua_getfield(L, opts, "padding") != LUA_TSTRING) {
    if (opts) lua_pop(L, 1);
    return 0;
  }
  const char *mode = lua_tostring(L, -1);
  lua_pop(L, 1);
  for (int i = 0; i < 4; i++) p->pad[i] = 0;
  if (strcmp(mode, "valid") == 0) return 1;
  if (strcmp(mode, "same") != 0)
    return cnn_lua_fail(L, "%s: padding must be a number, a table, 'same' or 'valid', got '%s'", fn,
                        mode);
  if (p->stride[0] != 1 || p->stride[1] != 1)
    return cnn_lua_fail(L, "%s: padding='same' is not supported for strided convolutions", fn);
  for (int i = 0; i < 2 && w->ndim >= 2; i++) {
    int64_t k = w->ndim == 4 || i == 1 ? w->shape[w->ndim - 2 + i] : 1;
    int64_t total = (int64_t)p->dilation[i] * (k - 1);
    if (total > (1 << 24))
      return cnn_lua_fail(L, "%s: padding='same' for kernel %lld is too large", fn, (long long)k);
    p->pad[2 * i] = (int)(total / 2), p->pad[2 * i + 1] = (int)(total - total / 2);
  }
  return 1;
}

/* The options {stride=, padding=, dilation=, groups=} of F.conv2d at
 * opts (0: none) into p; errors name fn ("conv2d", "conv2d_act"). */
static void conv2d_options(lua_State *L, int opts, const char *fn, const cnn_tensor *w,
                           cnn_conv_params *p) {
  static const char *const known[] = {"dilation", "groups", "padding", "stride", NULL};
  char fname[32];
  snprintf(fname, sizeof fname, "F.%s", fn);
  cnn_lua_check_options(L, opts, fname, known);
  *p = (cnn_conv_params){{1, 1}, {0, 0, 0, 0}, {1, 1}, 1};
  opt_pair(L, opts, fn, "stride", 1, 1, p->stride);
  opt_pair(L, opts, fn, "dilation", 1, 1, p->dilation);
  if (!padding_string(L, opts, fn, w, p)) conv_padding(L, opts, fn, p);
  if (opts) {
    if (lua_getfield(L, opts, "groups") != LUA_TNIL) p->groups = small_int(L, -1, fn, "groups", 1);
    lua_pop(L, 1);
  }
}

/* F.conv2d(x, w [, b] [, {stride=, padding=, dilation=, groups=}]) */
static int f_conv2d(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1), *w = cnn_lua_check_tensor(L, 2);
  int opts = opts_index(L, 3);
  cnn_tensor *b = opts == 3 ? NULL : cnn_lua_opt_tensor(L, 3);
  cnn_conv_params p;
  conv2d_options(L, opts, "conv2d", w, &p);
  return cnn_lua_push_result(L, cnn_conv2d(x, w, b, &p));
}

/* ---- a fused activation (net:fuse()) ---- */

/* The activations of F.conv2d_act: F's name, the unary op, how many
 * parameters it takes (F.<name>'s positional ones) and their defaults. */
typedef struct {
  const char *name;
  cnn_unary_op op;
  int nparams;
  double p0, p1;
} conv_activation;

static const conv_activation conv_activations[] = {
    {"relu", CNN_OP_RELU, 0, 0, 0},
    {"leaky_relu", CNN_OP_LEAKY_RELU, 1, 0.01, 0},
    {"elu", CNN_OP_ELU, 1, 1, 0},
    {"hardtanh", CNN_OP_HARDTANH, 2, -1, 1},
    {"relu6", CNN_OP_HARDTANH, 0, 0, 6},
    {"sigmoid", CNN_OP_SIGMOID, 0, 0, 0},
    {"tanh", CNN_OP_TANH, 0, 0, 0},
    {"gelu", CNN_OP_GELU, 0, 0, 0},
    {"gelu_tanh", CNN_OP_GELU_TANH, 0, 0, 0},
    {"silu", CNN_OP_SILU, 0, 0, 0},
    {"hardswish", CNN_OP_HARDSWISH, 0, 0, 0},
    {"hardsigmoid", CNN_OP_HARDSIGMOID, 0, 0, 0},
    {"mish", CNN_OP_MISH, 0, 0, 0},
    {"softplus", CNN_OP_SOFTPLUS, 2, 1, 20},
};
#define NCONV_ACTIVATIONS (int)(sizeof conv_activations / sizeof conv_activations[0])

static const conv_activation *conv_activation_named(lua_State *L, const char *name) {
  for (int i = 0; i < NCONV_ACTIVATIONS; i++)
    if (strcmp(conv_activations[i].name, name) == 0) return &conv_activations[i];
  cnn_lua_fail(L,
               "conv2d_act: unknown activation '%s' (relu, leaky_relu, elu, hardtanh, relu6, "
               "sigmoid, tanh, gelu, gelu_tanh, silu, hardswish, hardsigmoid, mish, softplus)",
               name);
  return NULL;
}

/* The activation at idx: a name, or {name, parameters...} as F.<name>
 * takes them; *p0, *p1 its parameters (defaults where not given). */
static cnn_unary_op conv_activation_arg(lua_State *L, int idx, double *p0, double *p1) {
  if (lua_type(L, idx) == LUA_TSTRING) {
    const conv_activation *a = conv_activation_named(L, lua_tostring(L, idx));
    return *p0 = a->p0, *p1 = a->p1, a->op;
  }
  if (!lua_istable(L, idx) || lua_geti(L, idx, 1) != LUA_TSTRING)
    cnn_lua_fail(L, "conv2d_act: the activation is a name or {name, parameters...}");
  const conv_activation *a = conv_activation_named(L, lua_tostring(L, -1));
  lua_pop(L, 1);
  lua_Integer n = luaL_len(L, idx) - 1;
  if (n > a->nparams)
    cnn_lua_fail(L, "conv2d_act: %s takes %d parameter%s, got %lld", a->name, a->nparams,
                 a->nparams == 1 ? "" : "s", (long long)n);
  double v[2] = {a->p0, a->p1};
  for (int i = 0; i < n; i++) {
    lua_geti(L, idx, i + 2);
    int ok = 0;
    v[i] = lua_tonumberx(L, -1, &ok);
    if (!ok || !isfinite(v[i]))
      cnn_lua_fail(L, "conv2d_act: %s's parameter %d must be a finite number", a->name, i + 1);
    lua_pop(L, 1);
  }
  if (a->op == CNN_OP_SOFTPLUS && v[0] == 0)
    cnn_lua_fail(L, "conv2d_act: softplus's beta must not be 0");
  return *p0 = v[0], *p1 = v[1], a->op;
}

/* F.conv2d_act(x, w, b_or_nil, activation [, {stride=, padding=, dilation=, groups=}]) */
static int f_conv2d_act(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1), *w = cnn_lua_check_tensor(L, 2);
  cnn_tensor *b = cnn_lua_opt_tensor(L, 3);
  double p0, p1;
  cnn_unary_op act = conv_activation_arg(L, 4, &p0, &p1);
  int opts = lua_isnoneornil(L, 5) ? 0 : (luaL_checktype(L, 5, LUA_TTABLE), 5);
  cnn_conv_params p;
  conv2d_options(L, opts, "conv2d_act", w, &p);
  cnn_tensor *y = cnn_conv2d_act(x, w, b, &p, act, p0, p1);
  if (!y && strncmp(cnn_error(), "conv2d_act", 10) != 0) /* conv2d's checks: name this op too */
    return cnn_lua_fail(L, "conv2d_act: %s", cnn_error());
  return cnn_lua_push_result(L, y);
}

/* F.linear(x, w [, b]) */
static int f_linear(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1), *w = cnn_lua_check_tensor(L, 2);
  return cnn_lua_push_result(L, cnn_linear(x, w, cnn_lua_opt_tensor(L, 3)));
}

/* ---- transposed convolution ---- */

/* F.conv_transpose2d(x, w [, b] [, {stride=, padding=, output_padding=, dilation=, groups=}]) */
static int f_conv_transpose2d(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1), *w = cnn_lua_check_tensor(L, 2);
  int opts = opts_index(L, 3);
  cnn_tensor *b = opts == 3 ? NULL : cnn_lua_opt_tensor(L, 3);
  static const char *const known[] = {"dilation", "groups", "output_padding",
                                      "padding",  "stride", NULL};
  cnn_lua_check_options(L, opts, "F.conv_transpose2d", known);
  cnn_conv_transpose_params p = {{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1};
  opt_pair(L, opts, "conv_transpose2d", "stride", 1, 1, p.stride);
  opt_pair(L, opts, "conv_transpose2d", "padding", 0, 0, p.pad);
  opt_pair(L, opts, "conv_transpose2d", "output_padding", 0, 0, p.output_padding);
  opt_pair(L, opts, "conv_transpose2d", "dilation", 1, 1, p.dilation);
  if (opts) {
    if (lua_getfield(L, opts, "groups") != LUA_TNIL)
      p.groups = small_int(L, -1, "conv_transpose2d", "groups", 1);
    lua_pop(L, 1);
  }
  return cnn_lua_push_result(L, cnn_conv_transpose2d(x, w, b, &p));
}

/* ---- 1-d convolution and pooling, over the 2-d ops with a unit height ---- */

/* opts.key as one integer (a number or {n}); def when absent */
static int opt_one(lua_State *L, int opts, const char *fn, const char *key, int lo, int def) {
  int v[2] = {def, def};
  if (!opts || lua_getfield(L, opts, key) == LUA_TNIL) {
    if (opts) lua_pop(L, 1);
    return def;
  }
  if (lua_istable(L, -1) && luaL_len(L, -1) != 1)
    cnn_lua_fail(L, "%s: %s takes a number or {n}", fn, key);
  int_list(L, -1, fn, key, lo, v, 1, 1);
  lua_pop(L, 1);
  return v[0];
}

/* N x C x L (or unbatched C x L when `unbatched_ok`) as N x C x 1 x L */
static cnn_tensor *unit_height(lua_State *L, const char *fn, cnn_tensor *x, bool unbatched_ok) {
  char s[CNN_SHAPE_STR];
  if (x->ndim != 3 && !(unbatched_ok && x->ndim == 2))
    cnn_lua_fail(L, "%s: expected a 3-d input (N x C x L)%s, got %s", fn,
                 unbatched_ok ? " or 2-d (C x L)" : "", cnn_tensor_shape_str(x, s));
  cnn_tensor *b = x->ndim == 2 ? cnn_unsqueeze(x, 0) : (cnn_tensor_retain(x), x);
  cnn_tensor *v = b ? cnn_unsqueeze(b, 2) : NULL;
  cnn_tensor_release(b);
  if (!v) cnn_lua_error(L);
  return v;
}

/* The 2-d op's result y4 back to 1-d (unbatched when x was 2-d); an error
 * of the 2-d op is raised with the 1-d op's name in front. */
static cnn_tensor *from_unit_height(lua_State *L, const char *fn, cnn_tensor *y4,
                                    const cnn_tensor *x) {
  if (!y4) cnn_lua_fail(L, "%s: %s (as 2-d with a unit height)", fn, cnn_error());
  cnn_tensor *y = cnn_squeeze(y4, 2);
  cnn_tensor_release(y4);
  if (y && x->ndim == 2) {
    cnn_tensor *u = cnn_squeeze(y, 0);
    cnn_tensor_release(y);
    y = u;
  }
  if (!y) cnn_lua_error(L);
  return y;
}

/* F.conv1d(x, w [, b] [, {stride=, padding=, dilation=, groups=}]) */
static int f_conv1d(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1), *w = cnn_lua_check_tensor(L, 2);
  int opts = opts_index(L, 3);
  cnn_tensor *b = opts == 3 ? NULL : cnn_lua_opt_tensor(L, 3);
  static const char *const known[] = {"dilation", "groups", "padding", "stride", NULL};
  cnn_lua_check_options(L, opts, "F.conv1d", known);
  char a[CNN_SHAPE_STR], c[CNN_SHAPE_STR];
  if (x->ndim != 3 || w->ndim != 3)
    return cnn_lua_fail(
        L,
        "conv1d: expected a 3-d input (N x C x L) and a 3-d weight (out x in/groups x k), "
        "got input %s and weight %s",
        cnn_tensor_shape_str(x, a), cnn_tensor_shape_str(w, c));
  cnn_conv_params p = {{1, opt_one(L, opts, "conv1d", "stride", 1, 1)},
                       {0, 0, 0, 0},
                       {1, opt_one(L, opts, "conv1d", "dilation", 1, 1)},
                       opt_one(L, opts, "conv1d", "groups", 1, 1)};
  if (x->shape[1] != w->shape[1] * p.groups)
    return cnn_lua_fail(L, "conv1d: input %s has %lld channels, weight %s expects %lld (groups %d)",
                        cnn_tensor_shape_str(x, a), (long long)x->shape[1],
                        cnn_tensor_shape_str(w, c), (long long)(w->shape[1] * p.groups), p.groups);
  if (!padding_string(L, opts, "conv1d", w, &p))
    p.pad[2] = p.pad[3] = opt_one(L, opts, "conv1d", "padding", 0, 0);
  cnn_tensor *x4 = unit_height(L, "conv1d", x, false), *w4 = cnn_unsqueeze(w, 2);
  cnn_tensor *y4 = w4 ? cnn_conv2d(x4, w4, b, &p) : NULL;
  cnn_tensor_release(x4), cnn_tensor_release(w4);
  return cnn_lua_push_result(L, from_unit_height(L, "conv1d", y4, x));
}

/* (x, kernel [, stride] [, opts]) of a 1-d pool -> the 2-d params {1, k} */
static int pool1d_params(lua_State *L, const char *fn, const char *const *known,
                         cnn_pool_params *p) {
  int opts = opts_index(L, 3);
  char qualified[64];
  snprintf(qualified, sizeof qualified, "F.%s", fn);
  cnn_lua_check_options(L, opts, qualified, known);
  int k[1], st[1] = {0};
  if (lua_isnoneornil(L, 2)) cnn_lua_fail(L, "%s: kernel size expected", fn);
  int_list(L, 2, fn, "kernel_size", 1, k, 1, 1);
  if (lua_type(L, 3) == LUA_TNUMBER)
    int_list(L, 3, fn, "stride", 1, st, 1, 1);
  else
    st[0] = opt_one(L, opts, fn, "stride", 1, 0);
  memset(p, 0, sizeof *p);
  p->kernel[0] = 1, p->kernel[1] = k[0];
  p->stride[0] = 1, p->stride[1] = st[0] ? st[0] : k[0];
  p->pad[1] = opt_one(L, opts, fn, "padding", 0, 0);
  p->dilation[0] = 1, p->dilation[1] = 1;
  p->ceil_mode = cnn_lua_opt_bool(L, opts, "ceil_mode", false);
  p->count_include_pad = cnn_lua_opt_bool(L, opts, "count_include_pad", true);
  return opts;
}

/* F.max_pool1d(x, kernel [, stride] [, {stride=, padding=, dilation=, ceil_mode=, return_indices=}]) */
static int f_max_pool1d(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  cnn_pool_params p;
  static const char *const known[] = {"ceil_mode",      "dilation", "padding",
                                      "return_indices", "stride",   NULL};
  int opts = pool1d_params(L, "max_pool1d", known, &p);
  p.dilation[1] = opt_one(L, opts, "max_pool1d", "dilation", 1, 1);
  bool want_idx = cnn_lua_opt_bool(L, opts, "return_indices", false);
  cnn_tensor *x4 = unit_height(L, "max_pool1d", x, true), *idx4 = NULL;
  cnn_tensor *y4 = cnn_max_pool2d(x4, &p, want_idx ? &idx4 : NULL);
  cnn_tensor_release(x4);
  cnn_lua_push_tensor(L, from_unit_height(L, "max_pool1d", y4, x));
  if (!want_idx) return 1;
  return 1 + cnn_lua_push_one_based(L, from_unit_height(L, "max_pool1d", idx4, x)); /* 1-based */
}

/* F.avg_pool1d(x, kernel [, stride] [, {stride=, padding=, ceil_mode=, count_include_pad=true}]) */
static int f_avg_pool1d(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  cnn_pool_params p;
  static const char *const known[] = {"ceil_mode", "count_include_pad", "padding", "stride", NULL};
  pool1d_params(L, "avg_pool1d", known, &p);
  cnn_tensor *x4 = unit_height(L, "avg_pool1d", x, true);
  cnn_tensor *y4 = cnn_avg_pool2d(x4, &p);
  cnn_tensor_release(x4);
  return cnn_lua_push_result(L, from_unit_height(L, "avg_pool1d", y4, x));
}

/* F.adaptive_avg_pool1d(x, size) */
static int f_adaptive_avg_pool1d(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  int s[1];
  if (lua_isnoneornil(L, 2)) return cnn_lua_fail(L, "adaptive_avg_pool1d: output size expected");
  int_list(L, 2, "adaptive_avg_pool1d", "output_size", 1, s, 1, 1);
  cnn_tensor *x4 = unit_height(L, "adaptive_avg_pool1d", x, true);
  cnn_tensor *y4 = cnn_adaptive_avg_pool2d(x4, 1, s[0]);
  cnn_tensor_release(x4);
  return cnn_lua_push_result(L, from_unit_height(L, "adaptive_avg_pool1d", y4, x));
}

/* ---- pooling ------------------------------------------------------------------------- */

/* (x, kernel [, stride] [, opts]) -> params; stride defaults to kernel;
 * opts may hold only the keys in `known` */
static int pool_params(lua_State *L, const char *fn, const char *const *known, cnn_pool_params *p) {
  int opts = opts_index(L, 3);
  char qualified[64];
  snprintf(qualified, sizeof qualified, "F.%s", fn);
  cnn_lua_check_options(L, opts, qualified, known);
  int k[2];
  if (lua_isnoneornil(L, 2)) cnn_lua_fail(L, "%s: kernel size expected", fn);
  int_list(L, 2, fn, "kernel_size", 1, k, 2, 2);
  p->kernel[0] = k[0], p->kernel[1] = k[1];
  if (lua_type(L, 3) == LUA_TNUMBER)
    int_list(L, 3, fn, "stride", 1, p->stride, 2, 2);
  else
    opt_pair(L, opts, fn, "stride", 1, 0, p->stride);
  if (p->stride[0] == 0) p->stride[0] = k[0], p->stride[1] = k[1];
  opt_pair(L, opts, fn, "padding", 0, 0, p->pad);
  p->ceil_mode = cnn_lua_opt_bool(L, opts, "ceil_mode", false);
  p->count_include_pad = cnn_lua_opt_bool(L, opts, "count_include_pad", true);
  return opts;
}

/* F.max_pool2d(x, kernel [, stride] [, {stride=, padding=, dilation=, ceil_mode=, return_indices=}]) */
static int f_max_pool2d(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  cnn_pool_params p;
  memset(&p, 0, sizeof p);
  static const char *const known[] = {"ceil_mode",      "dilation", "padding",
                                      "return_indices", "stride",   NULL};
  int opts = pool_params(L, "max_pool2d", known, &p);
  opt_pair(L, opts, "max_pool2d", "dilation", 1, 1, p.dilation);
  if (!cnn_lua_opt_bool(L, opts, "return_indices", false))
    return cnn_lua_push_result(L, cnn_max_pool2d(x, &p, NULL));
  cnn_tensor *idx = NULL;
  cnn_tensor *y = cnn_max_pool2d(x, &p, &idx);
  if (!y) return cnn_lua_error(L);
  cnn_lua_push_tensor(L, y);
  if (!idx) return cnn_lua_error(L);
  return 1 + cnn_lua_push_one_based(L, idx); /* 1-based positions */
}

/* F.avg_pool2d(x, kernel [, stride] [, {stride=, padding=, ceil_mode=, count_include_pad=true}]) */
static int f_avg_pool2d(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  cnn_pool_params p;
  memset(&p, 0, sizeof p);
  static const char *const known[] = {"ceil_mode", "count_include_pad", "padding", "stride", NULL};
  pool_params(L, "avg_pool2d", known, &p);
  return cnn_lua_push_result(L, cnn_avg_pool2d(x, &p));
}

/* F.adaptive_avg_pool2d(x, size | {h, w}) */
static int f_adaptive_avg_pool2d(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  int s[2];
  if (lua_isnoneornil(L, 2)) return cnn_lua_fail(L, "adaptive_avg_pool2d: output size expected");
  int_list(L, 2, "adaptive_avg_pool2d", "output_size", 1, s, 2, 2);
  return cnn_lua_push_result(L, cnn_adaptive_avg_pool2d(x, s[0], s[1]));
}

/* ---- softmax, dropout, batch norm (the activations are in activations.c) ---------------- */

static int softmax_like(lua_State *L, bool log) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  const char *fn = log ? "log_softmax" : "softmax";
  int d = cnn_lua_dim_value(L, fn, cnn_lua_opt_int(L, 2, -1), x->ndim, 0);
  return cnn_lua_push_result(L, log ? cnn_log_softmax(x, d) : cnn_softmax(x, d));
}

static int f_softmax(lua_State *L) { return softmax_like(L, false); }
static int f_log_softmax(lua_State *L) { return softmax_like(L, true); }

/* F.dropout(x [, p=0.5 [, training=true]]) */
static int f_dropout(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  double p = luaL_optnumber(L, 2, 0.5);
  bool training = lua_isnoneornil(L, 3) ? true : lua_toboolean(L, 3);
  if (!(p >= 0 && p <= 1)) return cnn_lua_fail(L, "dropout: p must be in [0, 1], got %g", p);
  return cnn_lua_push_result(L, cnn_dropout(x, p, training));
}

/* F.batch_norm(x, running_mean, running_var [, weight [, bias]] [, {training=false, momentum=0.1, eps=1e-5}]) */
static int f_batch_norm(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  int opts = opts_index(L, 2);
  static const char *const known[] = {"eps", "momentum", "training", NULL};
  cnn_lua_check_options(L, opts, "F.batch_norm", known);
  cnn_tensor *t[4] = {NULL, NULL, NULL, NULL}; /* mean, var, weight, bias */
  for (int i = 0; i < 4 && !(opts && i + 2 >= opts); i++) t[i] = cnn_lua_opt_tensor(L, i + 2);
  bool training = cnn_lua_opt_bool(L, opts, "training", false);
  double momentum = cnn_lua_opt_number(L, opts, "momentum", 0.1);
  double eps = cnn_lua_opt_number(L, opts, "eps", 1e-5);
  if (!(eps > 0)) return cnn_lua_fail(L, "batch_norm: eps must be positive, got %g", eps);
  if (!(momentum >= 0 && momentum <= 1))
    return cnn_lua_fail(L, "batch_norm: momentum must be in [0, 1], got %g", momentum);
  return cnn_lua_push_result(L, cnn_batch_norm(x, t[0], t[1], t[2], t[3], training, momentum, eps));
}

/* ---- shape -------------------------------------------------------------------------------- */

/* F.flatten(x [, start=2 [, end=-1]]) */
static int f_flatten(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  if (x->ndim == 0) return cnn_lua_fail(L, "flatten: expects at least 1 dim, got a 0-d tensor");
  int s = cnn_lua_dim_value(L, "flatten", cnn_lua_opt_int(L, 2, x->ndim >= 2 ? 2 : 1), x->ndim, 0);
  int e = cnn_lua_dim_value(L, "flatten", cnn_lua_opt_int(L, 3, -1), x->ndim, 0);
  if (s > e) return cnn_lua_fail(L, "flatten: start dim %d comes after end dim %d", s + 1, e + 1);
  return cnn_lua_push_result(L, cnn_flatten(x, s, e));
}

/* F.pad(x, pads, mode [, value]) -- 'constant' takes a value, the
 * other modes none (PyTorch's rule) */
static int pad_with_mode(lua_State *L, cnn_tensor *x, int n, const int64_t *pads) {
  static const char *const modes[] = {"reflect", "replicate", "circular", "constant", NULL};
  const char *m = lua_tostring(L, 3);
  int mode = 0;
  while (modes[mode] && strcmp(modes[mode], m) != 0) mode++;
  if (!modes[mode])
    return cnn_lua_fail(L, "pad: unknown mode '%s' (constant, reflect, replicate or circular)", m);
  if (strcmp(m, "constant") == 0)
    return cnn_lua_push_result(L, cnn_pad(x, n, pads, luaL_optnumber(L, 4, 0)));
  if (!lua_isnoneornil(L, 4)) return cnn_lua_fail(L, "pad: mode '%s' takes no value argument", m);
  return cnn_lua_push_result(L, cnn_pad_mode(x, n, pads, (cnn_padding_mode)mode));
}

/* F.pad(x, {left, right [, top, bottom ...]} [, mode='constant'] [, value=0]); a
 * number in place of the mode is the value (mode 'constant') */
static int f_pad(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 2);
  if (n < 2 || n % 2 || n > 2 * x->ndim)
    return cnn_lua_fail(
        L, "pad: expects {left, right [, top, bottom ...]}: an even count up to %d, got %lld",
        2 * x->ndim, (long long)n);
  int64_t pads[2 * CNN_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    lua_geti(L, 2, i + 1);
    pads[i] = small_int(L, -1, "pad", "padding", -(1 << 24));
    lua_pop(L, 1);
  }
  if (lua_type(L, 3) == LUA_TSTRING) return pad_with_mode(L, x, (int)n, pads);
  return cnn_lua_push_result(L, cnn_pad(x, (int)n, pads, luaL_optnumber(L, 3, 0)));
}

/* ---- quantized inference (cnn.quantize) ----------------------------------- */

/* F.conv2d_int8(x, wq, w_scale, b_or_nil, x_scale [, {stride=, padding=, dilation=,
 * groups=, relu=}]) -- the rule is cnn_conv2d_int8's (core/cnn.h) */
static int f_conv2d_int8(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1), *wq = cnn_lua_check_tensor(L, 2);
  cnn_tensor *ws = cnn_lua_check_tensor(L, 3), *b = cnn_lua_opt_tensor(L, 4);
  double x_scale = luaL_checknumber(L, 5);
  int opts = opts_index(L, 6);
  static const char *const known[] = {"dilation", "groups", "padding", "relu", "stride", NULL};
  cnn_lua_check_options(L, opts, "F.conv2d_int8", known);
  cnn_conv_params p = {{1, 1}, {0, 0, 0, 0}, {1, 1}, 1};
  opt_pair(L, opts, "conv2d_int8", "stride", 1, 1, p.stride);
  opt_pair(L, opts, "conv2d_int8", "dilation", 1, 1, p.dilation);
  conv_padding(L, opts, "conv2d", &p);
  bool relu = false;
  if (opts) {
    if (lua_getfield(L, opts, "groups") != LUA_TNIL)
      p.groups = small_int(L, -1, "conv2d_int8", "groups", 1);
    if (lua_getfield(L, opts, "relu") != LUA_TNIL) {
      luaL_argexpected(L, lua_isboolean(L, -1), opts, "relu: a boolean");
      relu = lua_toboolean(L, -1);
    }
    lua_pop(L, 2);
  }
  return cnn_lua_push_result(L, cnn_conv2d_int8(x, wq, ws, b, x_scale, relu, &p));
}

/* F.dropout2d(x [, p=0.5 [, training=true]]): whole channels of
 * N x C x H x W (or N x C x L, as PyTorch reads 3-D input) zeroed with probability p, the
 * others scaled by 1/(1-p): x times a dropout mask of shape N x C x 1 [x 1] */
static int f_dropout2d(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  double p = luaL_optnumber(L, 2, 0.5);
  bool training = lua_isnoneornil(L, 3) ? true : lua_toboolean(L, 3);
  char s[CNN_SHAPE_STR];
  if (!(p >= 0 && p <= 1)) return cnn_lua_fail(L, "dropout2d: p must be in [0, 1], got %g", p);
  if (x->ndim != 3 && x->ndim != 4)
    return cnn_lua_fail(L, "dropout2d: expects N x C x H x W or N x C x L input, got %s",
                        cnn_tensor_shape_str(x, s));
  if (!cnn_dtype_is_float(x->dtype))
    return cnn_lua_fail(L, "dropout2d: input must be floating-point, got %s",
                        cnn_dtype_name(x->dtype));
  if (!training || p == 0) return lua_settop(L, 1), 1;
  int64_t shape[4] = {x->shape[0], x->shape[1], 1, 1};
  cnn_tensor *ones = cnn_full(x->ndim, shape, 1.0, x->dtype, cnn_tensor_device(x));
  cnn_lua_push_result(L, ones);
  cnn_tensor *mask = cnn_dropout(ones, p, true);
  cnn_lua_push_result(L, mask);
  return cnn_lua_push_result(L, cnn_binary(CNN_OP_MUL, x, mask));
}

const luaL_Reg cnn_lua_functional_funcs[] = {
    {"conv2d", f_conv2d},
    {"linear", f_linear},
    {"max_pool2d", f_max_pool2d},
    {"avg_pool2d", f_avg_pool2d},
    {"adaptive_avg_pool2d", f_adaptive_avg_pool2d},
    {"softmax", f_softmax},
    {"log_softmax", f_log_softmax},
    {"dropout", f_dropout},
    {"batch_norm", f_batch_norm},
    {"flatten", f_flatten},
    {"pad", f_pad},
    {"dropout2d", f_dropout2d},
    /* transposed convolution */
    {"conv_transpose2d", f_conv_transpose2d},
    /* 1-d convolution and pooling */
    {"conv1d", f_conv1d},
    {"max_pool1d", f_max_pool1d},
    {"avg_pool1d", f_avg_pool1d},
    {"adaptive_avg_pool1d", f_adaptive_avg_pool1d},
    {"conv2d_int8", f_conv2d_int8}, /* quantized inference (cnn.quantize) */
    {"conv2d_act", f_conv2d_act},   /* fused activation (net:fuse()) */
    {NULL, NULL}};

/* F.*: the functions above and the activations (activations.c) */
void cnn_lua_functional_register(lua_State *L) {
  luaL_setfuncs(L, cnn_lua_functional_funcs, 0);
  cnn_lua_activation_register(L);
}
