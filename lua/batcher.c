/*
 * batcher.c -- the "cnn.Batcher" type: one epoch of data.DataLoader,
 * assembled in C on a background thread (core/io's cnn_batcher).
 *
 *   local b <close> = cnn.io.Batcher(images, labels, order, batch_size,
 *                                    drop_last, spec, label_offset [, pin_memory [, opts]])
 *   local b <close> = cnn.io.FileBatcher(paths, labels, order, batch_size, drop_last,
 *                                        pipeline, out_shape, mode, label_offset, pin_memory, opts)
 *   b:skipped()                  -- bad samples dropped so far, the first message
 *   local x, y = b:next()        -- nil when the epoch is done
 *   #b                           -- batches in the epoch
 *
 * order: nil (1..N) or a table of 1-based sample indices (repeats allowed);
 * spec: {scale=, mean=, std= (numbers or per-channel lists), crop_pad=,
 * hflip=} (stdlib/data.lua's transform_spec); label_offset is added to int64
 * labels.  The transforms' seed is drawn from the core generator, so
 * cnn.manual_seed makes epochs reproducible.  pin_memory = true hands out
 * batches in page-locked memory (an error naming the reason when CUDA is
 * not available; stdlib's DataLoader checks first and falls back).
 *
 * opts: {num_workers = 1, prefetch_factor = 2, skip_bad = false, pipeline =,
 * out_shape = {C, H, W}}: the worker pool (0: on this thread), the bound on
 * batches assembled ahead, and (tensors) the general transform pipeline
 * (transform.c) instead of spec.  FileBatcher decodes paths[i] (mode
 * "unchanged", "gray", "rgb", "rgba") through the pipeline.
 *
 * Like tensors, the userdata is created in a safe closed state before the
 * batcher, and __gc, __close and close() share one idempotent release
 * (which stops and joins the thread).
 */
#include <string.h>

#include "bind.h"
#include "io/io.h"

typedef struct {
  cnn_batcher *b;
} batcher_box;

static cnn_batcher *check_batcher(lua_State *L) {
  batcher_box *box = luaL_checkudata(L, 1, CNN_BATCHER_MT);
  if (!box->b) luaL_argerror(L, 1, "batcher was closed");
  return box->b;
}

static void read_spec(lua_State *L, int spec, cnn_transform *tf) {
  memset(tf, 0, sizeof *tf);
  if (lua_isnoneornil(L, spec)) return;
  luaL_checktype(L, spec, LUA_TTABLE);
  tf->scale = cnn_lua_opt_number(L, spec, "scale", 0);
  int nm = cnn_lua_channel_values(L, "Batcher", spec, "mean", tf->mean);
  int ns = cnn_lua_channel_values(L, "Batcher", spec, "std", tf->std);
  if (nm || ns) {
    if (nm != ns) cnn_lua_fail(L, "Batcher: mean has %d values but std has %d", nm, ns);
    for (int i = 0; i < ns; i++)
      if (!(tf->std[i] > 0))
        cnn_lua_fail(L, "Batcher: std[%d] = %g must be positive", i + 1, tf->std[i]);
    tf->normalize = 1;
    tf->nchan = nm;
  }
  double pad = cnn_lua_opt_number(L, spec, "crop_pad", 0);
  if (!(pad >= 0 && pad <= 4096)) cnn_lua_fail(L, "Batcher: crop_pad %g out of range", pad);
  tf->crop_pad = (int)pad;
  tf->hflip = cnn_lua_opt_bool(L, spec, "hflip", false);
}

/* 0-based order from the table at arg (GC'd buffer), or NULL for 1..n */
static int64_t *read_order(lua_State *L, int arg, int64_t n, int64_t *norder) {
  if (lua_isnoneornil(L, arg)) {
    *norder = n;
    return NULL;
  }
  luaL_checktype(L, arg, LUA_TTABLE);
  lua_Integer len = luaL_len(L, arg);
  int64_t *order = lua_newuserdatauv(L, sizeof *order * (size_t)(len > 0 ? len : 1), 0);
  for (lua_Integer i = 1; i <= len; i++) {
    lua_geti(L, arg, i);
    int ok;
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    if (!ok || v < 1 || v > n)
      cnn_lua_fail(L, "Batcher: order[%lld] is out of range (sample indices are 1..%lld)",
                   (long long)i, (long long)n);
    order[i - 1] = v - 1;
    lua_pop(L, 1);
  }
  *norder = len;
  return order;
}

/* the loader options at arg opts: {num_workers =, prefetch_factor =, skip_bad =,
 * pipeline =, out_shape =} (pipeline only for a tensor source here) */
static void apply_opts(lua_State *L, cnn_batcher *b, int opts, bool tensors) {
  if (lua_isnoneornil(L, opts)) return;
  luaL_checktype(L, opts, LUA_TTABLE);
  int nw = (int)cnn_lua_opt_number(L, opts, "num_workers", 1);
  int pf = (int)cnn_lua_opt_number(L, opts, "prefetch_factor", 2);
  if (cnn_batcher_set_workers(b, nw, pf) < 0) cnn_lua_error(L);
  if (cnn_batcher_set_skip_bad(b, cnn_lua_opt_bool(L, opts, "skip_bad", false)) < 0)
    cnn_lua_error(L);
  if (!tensors || lua_getfield(L, opts, "pipeline") == LUA_TNIL) return;
  cnn_pipeline p;
  int64_t shape[3];
  cnn_lua_read_pipeline(L, lua_gettop(L), &p);
  lua_getfield(L, opts, "out_shape");
  cnn_lua_read_shape3(L, lua_gettop(L), shape);
  if (cnn_batcher_set_pipeline(b, &p, shape) < 0) cnn_lua_error(L);
  lua_pop(L, 2);
}

static batcher_box *new_box(lua_State *L) {
  batcher_box *box = lua_newuserdatauv(L, sizeof *box, 0);
  box->b = NULL;
  luaL_setmetatable(L, CNN_BATCHER_MT);
  return box;
}

/* cnn.io.Batcher(images, labels, order, batch_size, drop_last, spec, label_offset, pin_memory, opts) */
static int f_batcher(lua_State *L) {
  lua_settop(L, 9); /* absent arguments read as nil */
  cnn_tensor *images = cnn_lua_check_tensor(L, 1);
  cnn_tensor *labels = cnn_lua_opt_tensor(L, 2);
  if (images->ndim < 1) return cnn_lua_fail(L, "Batcher: images must have a sample dim");
  int64_t batch = cnn_lua_check_int(L, 4);
  bool drop_last = lua_toboolean(L, 5);
  cnn_transform tf;
  read_spec(L, 6, &tf);
  int64_t offset = cnn_lua_opt_int(L, 7, 0);
  bool pin = lua_toboolean(L, 8);
  int64_t norder;
  int64_t *order = read_order(L, 3, images->shape[0], &norder);
  batcher_box *box = new_box(L);
  int top = lua_gettop(L);
  box->b =
      cnn_batcher_new(images, labels, order, norder, batch, drop_last, &tf, offset, cnn_rng_next());
  if (!box->b) return cnn_lua_error(L);
  if (pin && cnn_batcher_set_pin_memory(box->b, true) < 0) return cnn_lua_error(L);
  apply_opts(L, box->b, 9, true);
  lua_settop(L, top);
  return 1;
}

/* the strings of the list at arg (anchored by it) into a GC'd array */
static const char **read_paths(lua_State *L, int arg, int64_t *n) {
  luaL_checktype(L, arg, LUA_TTABLE);
  lua_Integer len = luaL_len(L, arg);
  const char **paths = lua_newuserdatauv(L, sizeof *paths * (size_t)(len > 0 ? len : 1), 0);
  for (lua_Integer i = 1; i <= len; i++) {
    lua_geti(L, arg, i);
    paths[i - 1] = lua_tostring(L, -1);
    if (!paths[i - 1]) cnn_lua_fail(L, "FileBatcher: paths[%lld] is not a string", (long long)i);
    lua_pop(L, 1); /* the list keeps the string alive */
  }
  *n = len;
  return paths;
}

/* cnn.io.FileBatcher(paths, labels, order, batch_size, drop_last, pipeline, out_shape, mode,
 *                    label_offset, pin_memory, opts) */
static int f_file_batcher(lua_State *L) {
  static const char *const modes[] = {"unchanged", "gray", "rgb", "rgba", NULL};
  int64_t npaths, norder, shape[3];
  lua_settop(L, 11); /* absent arguments read as nil */
  const char **paths = read_paths(L, 1, &npaths);
  cnn_tensor *labels = cnn_lua_opt_tensor(L, 2);
  int64_t batch = cnn_lua_check_int(L, 4);
  bool drop_last = lua_toboolean(L, 5);
  cnn_pipeline p;
  cnn_lua_read_pipeline(L, 6, &p);
  cnn_lua_read_shape3(L, 7, shape);
  cnn_image_mode mode = (cnn_image_mode)luaL_checkoption(L, 8, "rgb", modes);
  int64_t offset = cnn_lua_opt_int(L, 9, 0);
  bool pin = lua_toboolean(L, 10);
  int64_t *order = read_order(L, 3, npaths, &norder);
  batcher_box *box = new_box(L);
  int top = lua_gettop(L);
  box->b = cnn_batcher_new_files(paths, npaths, mode, labels, order, norder, batch, drop_last, &p,
                                 shape, offset, cnn_rng_next());
  if (!box->b) return cnn_lua_error(L);
  if (pin && cnn_batcher_set_pin_memory(box->b, true) < 0) return cnn_lua_error(L);
  apply_opts(L, box->b, 11, false);
  lua_settop(L, top);
  return 1;
}

/* b:skipped() -> count, first message (nil when none) */
static int m_skipped(lua_State *L) {
  const char *first;
  lua_pushinteger(L, cnn_batcher_skipped(check_batcher(L), &first));
  if (first)
    lua_pushstring(L, first);
  else
    lua_pushnil(L);
  return 2;
}

/* b:next() -> x, y | nil */
static int m_next(lua_State *L) {
  cnn_batcher *b = check_batcher(L);
  cnn_tensor *x = NULL, *y = NULL;
  int rc = cnn_batcher_next(b, &x, &y);
  if (rc < 0) return cnn_lua_error(L);
  if (rc == 0) return 0;
  cnn_lua_push_tensor(L, x);
  if (!y) return 1;
  cnn_lua_push_tensor(L, y);
  return 2;
}

static int m_close(lua_State *L) {
  batcher_box *box = luaL_checkudata(L, 1, CNN_BATCHER_MT);
  cnn_batcher *b = box->b;
  box->b = NULL;
  cnn_batcher_free(b);
  return 0;
}

static int m_len(lua_State *L) {
  lua_pushinteger(L, cnn_batcher_len(check_batcher(L)));
  return 1;
}

static int m_tostring(lua_State *L) {
  batcher_box *box = luaL_checkudata(L, 1, CNN_BATCHER_MT);
  if (box->b)
    lua_pushfstring(L, "cnn.Batcher (%I batches)", (lua_Integer)cnn_batcher_len(box->b));
  else
    lua_pushstring(L, "cnn.Batcher (closed)");
  return 1;
}

/* cnn.io.default_workers() -> the number of cores (DataLoader's num_workers default) */
static int f_default_workers(lua_State *L) {
  lua_pushinteger(L, cnn_batcher_default_workers());
  return 1;
}

const luaL_Reg cnn_lua_batcher_funcs[] = {{"Batcher", f_batcher},
                                          {"FileBatcher", f_file_batcher},
                                          {"default_workers", f_default_workers},
                                          {NULL, NULL}};

void cnn_lua_batcher_type(lua_State *L) {
  static const luaL_Reg meta[] = {{"__gc", m_close},
                                  {"__close", m_close},
                                  {"__len", m_len},
                                  {"__tostring", m_tostring},
                                  {NULL, NULL}};
  static const luaL_Reg methods[] = {
      {"next", m_next}, {"close", m_close}, {"len", m_len}, {"skipped", m_skipped}, {NULL, NULL}};
  luaL_newmetatable(L, CNN_BATCHER_MT);
  luaL_setfuncs(L, meta, 0);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}
