/*
 * transform.c -- data.transforms' pipelines from Lua (core/io/pipeline.c).
 *
 * A pipeline spec is the table stdlib/data.lua builds from transform
 * objects:
 *   {scale = 1/255, ops = {{kind = "resize", h = 32, w = 0, antialias = true},
 *                          {kind = "hflip", p = 0.5}, {kind = "normalize", mean = {..}, std = {..}}, ...}}
 * kinds: resize, center_crop, random_crop (pad), random_resized_crop (lo, hi:
 * scale; rlo, rhi: ratio), hflip (p), rotation (lo, hi degrees),
 * color_jitter (brightness, contrast, saturation; hue_lo, hue_hi: the hue
 * shift range), grayscale (channels),
 * normalize (mean, std: numbers or lists).
 *
 *   y = cnn.io.transform(img, spec [, seed])   -- img: C x H x W (uint8, float32, float64)
 *   shape = cnn.io.transform_shape(spec, {C, H, W})
 *
 * transform runs the same C code as the loader's workers, on the calling
 * thread: ds:get(i) uses it, and the tests compare it with Lua loops.
 */
#include <string.h>

#include "bind.h"
#include "io/io.h"

static const char *const kind_names[] = {
    "",      "resize",   "center_crop",  "random_crop", "random_resized_crop",
    "hflip", "rotation", "color_jitter", "grayscale",   "normalize",
    NULL};

/* field key of the table at t as a number (def when absent) */
static double num_field(lua_State *L, int t, const char *key, double def) {
  int ty = lua_getfield(L, t, key);
  double v = def;
  if (ty == LUA_TNUMBER)
    v = lua_tonumber(L, -1);
  else if (ty != LUA_TNIL)
    cnn_lua_fail(L, "transform: field %s must be a number", key);
  lua_pop(L, 1);
  return v;
}

/* mean/std at field key of the table at t: a number or a list of 1..4
 * numbers into out[]; returns the count (0 when absent).  Shared with
 * batcher.c's fixed-path spec. */
int cnn_lua_channel_values(lua_State *L, const char *fn, int t, const char *key, double *out) {
  int ty = lua_getfield(L, t, key), n = 0;
  if (ty == LUA_TNUMBER) {
    out[n++] = lua_tonumber(L, -1);
  } else if (ty == LUA_TTABLE) {
    lua_Integer len = luaL_len(L, -1);
    if (len < 1 || len > 4)
      cnn_lua_fail(L, "%s: %s takes 1 to 4 channel values, got %d", fn, key, (int)len);
    for (int i = 1; i <= len; i++) {
      lua_geti(L, -1, i);
      if (!lua_isnumber(L, -1)) cnn_lua_fail(L, "%s: %s[%d] is not a number", fn, key, i);
      out[n++] = lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
  } else if (ty != LUA_TNIL) {
    cnn_lua_fail(L, "%s: %s must be a number or a list", fn, key);
  }
  lua_pop(L, 1);
  return n;
}

static void read_op(lua_State *L, int t, cnn_tf_op *op) {
  memset(op, 0, sizeof *op);
  lua_getfield(L, t, "kind");
  const char *kind = lua_tostring(L, -1);
  for (int i = 1; kind && kind_names[i]; i++)
    if (strcmp(kind, kind_names[i]) == 0) op->kind = (cnn_tf_kind)i;
  if (!op->kind) cnn_lua_fail(L, "transform: unknown op kind '%s'", kind ? kind : "(none)");
  lua_pop(L, 1);
  op->h = (int64_t)num_field(L, t, "h", 0), op->w = (int64_t)num_field(L, t, "w", 0);
  op->pad = (int64_t)num_field(L, t, "pad", 0);
  op->antialias = num_field(L, t, "antialias", 1) != 0;
  op->p = num_field(L, t, "p", 0.5);
  op->lo = num_field(L, t, "lo", 0), op->hi = num_field(L, t, "hi", 0);
  op->rlo = num_field(L, t, "rlo", 0), op->rhi = num_field(L, t, "rhi", 0);
  op->jitter[0] = num_field(L, t, "brightness", 0);
  op->jitter[1] = num_field(L, t, "contrast", 0);
  op->jitter[2] = num_field(L, t, "saturation", 0);
  op->hue_lo = num_field(L, t, "hue_lo", 0), op->hue_hi = num_field(L, t, "hue_hi", 0);
  op->channels = (int)num_field(L, t, "channels", 1);
  if (op->kind == CNN_TF_NORMALIZE) {
    int nm = cnn_lua_channel_values(L, "transform", t, "mean", op->mean);
    int ns = cnn_lua_channel_values(L, "transform", t, "std", op->std);
    if (nm != ns) cnn_lua_fail(L, "transform: mean has %d values but std has %d", nm, ns);
    op->channels = nm;
  }
}

void cnn_lua_read_pipeline(lua_State *L, int spec, cnn_pipeline *p) {
  memset(p, 0, sizeof *p);
  luaL_checktype(L, spec, LUA_TTABLE);
  p->scale = num_field(L, spec, "scale", 1);
  if (lua_getfield(L, spec, "ops") == LUA_TTABLE) {
    lua_Integer n = luaL_len(L, -1);
    if (n > CNN_PIPELINE_MAX)
      cnn_lua_fail(L, "transform: %d ops (at most %d)", (int)n, CNN_PIPELINE_MAX);
    for (lua_Integer i = 1; i <= n; i++) {
      lua_geti(L, -1, i);
      luaL_checktype(L, -1, LUA_TTABLE);
      read_op(L, lua_gettop(L), &p->ops[p->n++]);
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  if (cnn_pipeline_check(p) < 0) cnn_lua_error(L);
}

void cnn_lua_read_shape3(lua_State *L, int arg, int64_t out[3]) {
  luaL_checktype(L, arg, LUA_TTABLE);
  for (int i = 0; i < 3; i++) {
    lua_geti(L, arg, i + 1);
    int ok;
    out[i] = lua_tointegerx(L, -1, &ok);
    if (!ok) cnn_lua_fail(L, "transform: shape must be {C, H, W} integers");
    lua_pop(L, 1);
  }
}

/* cnn.io.transform_shape(spec, {C, H, W}) -> {C, H, W} */
static int f_transform_shape(lua_State *L) {
  cnn_pipeline p;
  cnn_lua_read_pipeline(L, 1, &p);
  int64_t in[3], out[3];
  cnn_lua_read_shape3(L, 2, in);
  if (cnn_pipeline_out_shape(&p, in, out) < 0) return cnn_lua_fail(L, "transform: %s", cnn_error());
  lua_createtable(L, 3, 0);
  for (int i = 0; i < 3; i++) lua_pushinteger(L, out[i]), lua_rawseti(L, -2, i + 1);
  return 1;
}

/* the C x H x W tensor at arg into s->a (times scale) */
static void load_tensor(lua_State *L, cnn_tensor *t, const cnn_pipeline *p, cnn_pipeline_scratch *s,
                        int64_t shape[3]) {
  char str[CNN_SHAPE_STR];
  if (t->ndim != 3 || (t->dtype != CNN_UINT8 && t->dtype != CNN_FLOAT32 && t->dtype != CNN_FLOAT64))
    cnn_lua_fail(L, "transform: expects a C x H x W uint8, float32 or float64 image, got %s %s",
                 cnn_tensor_shape_str(t, str), cnn_dtype_name(t->dtype));
  cnn_tensor *f = cnn_to_dtype(t, CNN_FLOAT64);
  cnn_lua_push_result(L, f);
  cnn_tensor *c = cnn_contiguous(f);
  cnn_lua_push_result(L, c);
  int64_t n = cnn_tensor_numel(c);
  if (cnn_pipeline_reserve(s, n) < 0) cnn_lua_error(L);
  const double *src = cnn_tensor_data(c);
  for (int64_t i = 0; i < n; i++) s->a[i] = (float)(src[i] * p->scale);
  memcpy(shape, t->shape, 3 * sizeof *shape);
  lua_pop(L, 2);
}

/* scratch in a userdata with __gc, so a Lua error never leaks it */
static int scratch_gc(lua_State *L) {
  cnn_pipeline_scratch_free(lua_touserdata(L, 1));
  return 0;
}

/* cnn.io.transform(img, spec [, seed]) -> float32 C x H x W */
static int f_transform(lua_State *L) {
  cnn_tensor *img = cnn_lua_check_tensor(L, 1);
  cnn_pipeline p;
  cnn_lua_read_pipeline(L, 2, &p);
  uint64_t seed = lua_isnoneornil(L, 3) ? cnn_rng_next() : (uint64_t)luaL_checkinteger(L, 3);
  lua_settop(L, 3);
  cnn_pipeline_scratch *s = lua_newuserdatauv(L, sizeof *s, 0); /* 4 */
  memset(s, 0, sizeof *s);
  lua_newtable(L);
  lua_pushcfunction(L, scratch_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  int64_t shape[3];
  load_tensor(L, img, &p, s, shape);
  if (cnn_pipeline_run(&p, s, shape, seed) < 0)
    return cnn_lua_fail(L, "transform: %s", cnn_error());
  cnn_tensor *out = cnn_empty(3, shape, CNN_FLOAT32, CNN_DEVICE_CPU);
  if (out)
    memcpy(cnn_tensor_data(out), s->a, (size_t)(shape[0] * shape[1] * shape[2]) * sizeof(float));
  return cnn_lua_push_result(L, out);
}

const luaL_Reg cnn_lua_transform_module[] = {
    {"transform", f_transform}, {"transform_shape", f_transform_shape}, {NULL, NULL}};
