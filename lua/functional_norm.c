/*
 * functional_norm.c -- F.layer_norm, F.group_norm, F.instance_norm,
 * F.interpolate, F.pixel_shuffle, F.pixel_unshuffle and
 * F.adaptive_max_pool2d (normalisation and resizing).
 *
 * PyTorch's names, defaults and rules; tensors positionally, options in a
 * trailing table whose unknown keys are errors.  F.interpolate decides the
 * output size and which scale the coordinates use (PyTorch's rule: the
 * user's scale_factor unless recompute_scale_factor = true, the sizes
 * otherwise); core validates shapes and names itself in the errors.
 */
#include <math.h>
#include <string.h>

#include "bind.h"

/* index of the trailing options table among args from..top, or 0 */
static int trailing_opts(lua_State *L, int from) {
  int top = lua_gettop(L);
  return top >= from && lua_istable(L, top) && !cnn_lua_to_tensor(L, top) ? top : 0;
}

/* tensors at from..from+n-1 (nil allowed) that come before the options */
static void opt_tensors(lua_State *L, int from, int n, int opts, cnn_tensor **out) {
  for (int i = 0; i < n; i++)
    out[i] = opts && from + i >= opts ? NULL : cnn_lua_opt_tensor(L, from + i);
}

static double eps_option(lua_State *L, int opts, const char *fn) {
  double eps = cnn_lua_opt_number(L, opts, "eps", 1e-5);
  if (!(eps > 0 && isfinite(eps)))
    cnn_lua_fail(L, "%s: eps must be a positive number, got %g", fn, eps);
  return eps;
}

/* F.layer_norm(x, normalized_shape [, weight [, bias]] [, {eps = 1e-5}]) */
static int f_layer_norm(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  int opts = trailing_opts(L, 3);
  static const char *const known[] = {"eps", NULL};
  cnn_lua_check_options(L, opts, "F.layer_norm", known);
  if (lua_isnoneornil(L, 2))
    return cnn_lua_fail(L, "layer_norm: normalized_shape expected (a size or a table of sizes)");
  int64_t shape[CNN_MAX_DIMS];
  int k = cnn_lua_sizes(L, 2, 2, "layer_norm", shape, false);
  cnn_tensor *t[2];
  opt_tensors(L, 3, 2, opts, t);
  return cnn_lua_push_result(
      L, cnn_layer_norm(x, k, shape, t[0], t[1], eps_option(L, opts, "layer_norm")));
}

/* F.group_norm(x, num_groups [, weight [, bias]] [, {eps = 1e-5}]) */
static int f_group_norm(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  int opts = trailing_opts(L, 3);
  static const char *const known[] = {"eps", NULL};
  cnn_lua_check_options(L, opts, "F.group_norm", known);
  int64_t groups = cnn_lua_check_int(L, 2);
  cnn_tensor *t[2];
  opt_tensors(L, 3, 2, opts, t);
  return cnn_lua_push_result(
      L, cnn_group_norm(x, groups, t[0], t[1], eps_option(L, opts, "group_norm")));
}

/* F.instance_norm(x [, running_mean, running_var [, weight [, bias]]]
 *                 [, {use_input_stats = true, momentum = 0.1, eps = 1e-5}]) */
static int f_instance_norm(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  int opts = trailing_opts(L, 2);
  static const char *const known[] = {"eps", "momentum", "use_input_stats", NULL};
  cnn_lua_check_options(L, opts, "F.instance_norm", known);
  cnn_tensor *t[4];
  opt_tensors(L, 2, 4, opts, t);
  bool use = cnn_lua_opt_bool(L, opts, "use_input_stats", true);
  double momentum = cnn_lua_opt_number(L, opts, "momentum", 0.1);
  return cnn_lua_push_result(L, cnn_instance_norm(x, t[0], t[1], t[2], t[3], use, momentum,
                                                  eps_option(L, opts, "instance_norm")));
}

/* ---- resizing ----------------------------------------------------------------------------- */

/* opts.key as a number or {h, w} into out[2]; false when absent */
static bool opt_pair_number(lua_State *L, int opts, const char *fn, const char *key,
                            double out[2]) {
  int t = lua_getfield(L, opts, key);
  if (t == LUA_TNIL) return lua_pop(L, 1), false;
  if (t == LUA_TNUMBER) {
    out[0] = out[1] = lua_tonumber(L, -1);
  } else if (t == LUA_TTABLE && luaL_len(L, -1) == 2) {
    for (int i = 0; i < 2; i++) {
      if (lua_geti(L, -1, i + 1) != LUA_TNUMBER)
        cnn_lua_fail(L, "%s: %s takes a number or {h, w}", fn, key);
      out[i] = lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
  } else {
    cnn_lua_fail(L, "%s: %s takes a number or {h, w}, got %s", fn, key, luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return true;
}

static int resize_mode(lua_State *L, int opts) {
  const char *mode = cnn_lua_opt_string(L, opts, "mode", "nearest");
  if (!strcmp(mode, "nearest")) return CNN_RESIZE_NEAREST;
  if (!strcmp(mode, "bilinear")) return CNN_RESIZE_BILINEAR;
  return cnn_lua_fail(L, "interpolate: mode '%s' is not supported (modes: 'nearest', 'bilinear')",
                      mode);
}

/* the output size and the scales the coordinates use (0: from the sizes) */
static void resize_plan(lua_State *L, int opts, const cnn_tensor *x, int64_t out[2],
                        double scale[2]) {
  double size[2], sf[2];
  bool has_size = opt_pair_number(L, opts, "interpolate", "size", size);
  bool has_scale = opt_pair_number(L, opts, "interpolate", "scale_factor", sf);
  if (has_size == has_scale)
    cnn_lua_fail(L, "interpolate: give exactly one of size and scale_factor");
  int64_t in[2] = {x->ndim == 4 ? x->shape[2] : 0, x->ndim == 4 ? x->shape[3] : 0};
  bool recompute = cnn_lua_opt_bool(L, opts, "recompute_scale_factor", false);
  if (recompute && !has_scale)
    cnn_lua_fail(L, "interpolate: recompute_scale_factor needs scale_factor");
  for (int i = 0; i < 2; i++) {
    if (has_size && !(size[i] >= 1 && size[i] <= (1 << 24) && size[i] == floor(size[i])))
      cnn_lua_fail(L, "interpolate: size must be positive integers, got %g", size[i]);
    if (has_scale && !(sf[i] > 0 && isfinite(sf[i])))
      cnn_lua_fail(L, "interpolate: scale_factor must be positive, got %g", sf[i]);
    double o = has_size ? size[i] : floor((double)in[i] * sf[i]);
    out[i] = o >= 0 && o <= (1 << 24) ? (int64_t)o : -1; /* core says why -1 is wrong */
    scale[i] = has_scale && !recompute ? sf[i] : 0;
  }
}

/* F.interpolate(x, {size = | scale_factor =, mode = 'nearest', align_corners =,
 *                   recompute_scale_factor =}) */
static int f_interpolate(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  static const char *const known[] = {"align_corners", "mode", "recompute_scale_factor",
                                      "scale_factor",  "size", NULL};
  cnn_lua_check_options(L, 2, "F.interpolate", known);
  int mode = resize_mode(L, 2);
  lua_getfield(L, 2, "align_corners");
  bool has_ac = !lua_isnil(L, -1);
  lua_pop(L, 1);
  if (has_ac && mode != CNN_RESIZE_BILINEAR)
    return cnn_lua_fail(L, "interpolate: align_corners can only be set with mode 'bilinear'");
  bool ac = cnn_lua_opt_bool(L, 2, "align_corners", false);
  int64_t out[2];
  double scale[2];
  resize_plan(L, 2, x, out, scale);
  return cnn_lua_push_result(L, cnn_interpolate(x, out[0], out[1], mode, ac, scale[0], scale[1]));
}

static int64_t factor_arg(lua_State *L, const char *fn) {
  int64_t r = cnn_lua_check_int(L, 2);
  if (r < 1 || r > (1 << 16))
    cnn_lua_fail(L, "%s: factor must be a positive integer, got %lld", fn, (long long)r);
  return r;
}

/* F.pixel_shuffle(x, upscale_factor), F.pixel_unshuffle(x, downscale_factor) */
static int f_pixel_shuffle(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  return cnn_lua_push_result(L, cnn_pixel_shuffle(x, factor_arg(L, "pixel_shuffle")));
}
static int f_pixel_unshuffle(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  return cnn_lua_push_result(L, cnn_pixel_unshuffle(x, factor_arg(L, "pixel_unshuffle")));
}

/* F.adaptive_max_pool2d(x, size | {h, w} [, {return_indices = false}]) */
static int f_adaptive_max_pool2d(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  int opts = lua_istable(L, 3) ? 3 : 0;
  static const char *const known[] = {"return_indices", NULL};
  cnn_lua_check_options(L, opts, "F.adaptive_max_pool2d", known);
  if (lua_isnoneornil(L, 2)) return cnn_lua_fail(L, "adaptive_max_pool2d: output size expected");
  int64_t s[CNN_MAX_DIMS];
  int n = cnn_lua_sizes(L, 2, 2, "adaptive_max_pool2d", s, false);
  if (n == 1)
    s[1] = s[0];
  else if (n != 2)
    return cnn_lua_fail(L, "adaptive_max_pool2d: output size takes a number or {h, w}");
  if (!cnn_lua_opt_bool(L, opts, "return_indices", false))
    return cnn_lua_push_result(L, cnn_adaptive_max_pool2d(x, s[0], s[1], NULL));
  cnn_tensor *idx = NULL;
  cnn_tensor *y = cnn_adaptive_max_pool2d(x, s[0], s[1], &idx);
  if (!y) return cnn_lua_error(L);
  cnn_lua_push_tensor(L, y);
  if (!idx) return cnn_lua_error(L);
  return 1 + cnn_lua_push_one_based(L, idx); /* 1-based positions, as max_pool2d */
}

const luaL_Reg cnn_lua_norm_funcs[] = {{"layer_norm", f_layer_norm},
                                       {"group_norm", f_group_norm},
                                       {"instance_norm", f_instance_norm},
                                       {"interpolate", f_interpolate},
                                       {"pixel_shuffle", f_pixel_shuffle},
                                       {"pixel_unshuffle", f_pixel_unshuffle},
                                       {"adaptive_max_pool2d", f_adaptive_max_pool2d},
                                       {NULL, NULL}};
