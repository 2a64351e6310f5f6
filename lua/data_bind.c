/*
 * data_bind.c -- `cnn.io`: the dataset readers of core/io (IDX, CIFAR-10)
 * and the "cnn.Batcher" userdata, the C half of stdlib/data.lua's
 * DataLoader.  See data_bind.h for the Lua signatures.
 *
 * Design (STYLE.md convention 3, after liolib.c): a Batcher userdata is a
 * box holding one `cnn_batcher *`.  The box is created in the closed state
 * (NULL) *before* the batcher, so a Lua error between the two never leaks
 * a thread; __gc, __close and :close() share one idempotent release that
 * joins the background thread.  Using a closed batcher raises "batcher is
 * closed".  Scratch arrays (the sample order) live in Lua userdata, so an
 * error raised while they are filled leaks nothing.
 *
 * Conventions: the order given from Lua holds 1-based sample indices (a
 * table or an integer tensor), translated to core's 0-based here and
 * checked with a 1-based message.  Readers return what the files store
 * (labels 0-based); stdlib/data.lua makes labels 1-based.  When no seed is
 * given the transforms' seed is drawn from the core generator, so
 * cnn.manual_seed() and cnn.set_rng_state() make an epoch reproducible.
 */
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cnn_lua.h"
#include "data_bind.h"
#include "io/io.h"

#define BATCHER_MT "cnn.Batcher"

/* ---- readers ---------------------------------------------------------------- */

static int io_load_idx(lua_State *L) {
  cnn_tensor *t = cnn_idx_load(luaL_checkstring(L, 1));
  if (!t) return cnn_lua_error(L);
  cnn_lua_push_tensor(L, t);
  return 1;
}

static int io_load_cifar10(lua_State *L) {
  cnn_tensor *images = NULL, *labels = NULL;
  if (cnn_cifar10_load(luaL_checkstring(L, 1), &images, &labels) != 0) return cnn_lua_error(L);
  cnn_lua_push_tensor(L, images);
  cnn_lua_push_tensor(L, labels);
  return 2;
}

static int io_isatty(lua_State *L) {
  int fd;
  if (lua_isinteger(L, 1)) {
    fd = (int)lua_tointeger(L, 1);
  } else {
    luaL_Stream *s = luaL_checkudata(L, 1, LUA_FILEHANDLE);
    if (!s->f) return luaL_argerror(L, 1, "file is closed");
    fd = fileno(s->f);
  }
  lua_pushboolean(L, fd >= 0 && isatty(fd));
  return 1;
}

/* ---- Batcher arguments --------------------------------------------------------- */

/* A scratch int64 array of n elements owned by a userdata pushed on the stack. */
static int64_t *scratch(lua_State *L, int64_t n) {
  return lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof(int64_t), 0);
}

/* Check a 1-based sample index and return it 0-based. */
static int64_t sample_index(lua_State *L, lua_Integer i, int64_t pos, int64_t nsamples) {
  if (i < 1 || i > nsamples)
    luaL_error(L, "cnn.io.Batcher: order[%I] = %I is out of range (the data has %I samples: 1..%I)",
               (lua_Integer)pos, (lua_Integer)i, (lua_Integer)nsamples, (lua_Integer)nsamples);
  return (int64_t)i - 1;
}

static int64_t *order_from_table(lua_State *L, int arg, int64_t nsamples, int64_t *n) {
  *n = (int64_t)luaL_len(L, arg);
  int64_t *order = scratch(L, *n);
  for (int64_t p = 0; p < *n; p++) {
    int isint;
    lua_rawgeti(L, arg, (lua_Integer)(p + 1));
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint)
      luaL_error(L, "cnn.io.Batcher: order[%I] is a %s, not an integer", (lua_Integer)(p + 1),
                 luaL_typename(L, -1));
    lua_pop(L, 1);
    order[p] = sample_index(L, v, p + 1, nsamples);
  }
  return order;
}

static int64_t *order_from_tensor(lua_State *L, cnn_tensor *t, int64_t nsamples, int64_t *n) {
  char buf[CNN_SHAPE_STR];
  if (t->ndim != 1 || (t->dtype != CNN_INT64 && t->dtype != CNN_UINT8))
    luaL_error(L, "cnn.io.Batcher: order must be a 1-d int64 tensor, got %s %s",
               cnn_tensor_shape_str(t, buf), cnn_dtype_name(t->dtype));
  if (t->dtype != CNN_INT64) luaL_error(L, "cnn.io.Batcher: order must be int64, got uint8");
  *n = t->shape[0];
  int64_t *order = scratch(L, *n);
  if (cnn_tensor_copy_to_host(t, order) != 0) cnn_lua_error(L);
  for (int64_t p = 0; p < *n; p++) order[p] = sample_index(L, order[p], p + 1, nsamples);
  return order;
}

/* The order at arg: nil (1..nsamples), a table or a tensor of 1-based
 * indices.  Pushes the scratch userdata that owns the returned array. */
static int64_t *check_order(lua_State *L, int arg, int64_t nsamples, int64_t *n) {
  if (lua_isnoneornil(L, arg)) {
    *n = nsamples;
    int64_t *order = scratch(L, nsamples);
    for (int64_t p = 0; p < nsamples; p++) order[p] = p;
    return order;
  }
  if (lua_istable(L, arg)) return order_from_table(L, arg, nsamples, n);
  cnn_tensor *t = cnn_lua_check_tensor(L, arg);
  return order_from_tensor(L, t, nsamples, n);
}

/* mean/std: a number (one value for every channel) or a list of up to 4. */
static int per_channel(lua_State *L, int tf, const char *key, double out[4]) {
  int n = 0;
  lua_getfield(L, tf, key);
  if (lua_isnumber(L, -1)) {
    out[0] = lua_tonumber(L, -1);
    n = 1;
  } else if (lua_istable(L, -1)) {
    n = (int)luaL_len(L, -1);
    if (n < 1 || n > 4)
      luaL_error(L, "cnn.io.Batcher: transform.%s has %d values (expected 1 to 4)", key, n);
    for (int c = 0; c < n; c++) {
      lua_rawgeti(L, -1, c + 1);
      if (!lua_isnumber(L, -1))
        luaL_error(L, "cnn.io.Batcher: transform.%s[%d] is not a number", key, c + 1);
      out[c] = lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
  } else if (!lua_isnil(L, -1)) {
    luaL_error(L, "cnn.io.Batcher: transform.%s must be a number or a list of numbers", key);
  }
  lua_pop(L, 1);
  return n;
}

static void check_normalize(lua_State *L, int tf, cnn_transform *out) {
  int nm = per_channel(L, tf, "mean", out->mean);
  int ns = per_channel(L, tf, "std", out->std);
  if (nm == 0 && ns == 0) return;
  if (nm != ns)
    luaL_error(L, "cnn.io.Batcher: transform.mean has %d value(s) but transform.std has %d", nm, ns);
  out->normalize = 1;
  out->nchan = nm;
}

/* The transform table at arg (nil: the identity; uint8 still becomes
 * float32): {scale =, mean =, std =, crop_pad =, hflip =}. */
static void check_transform(lua_State *L, int arg, cnn_transform *out) {
  memset(out, 0, sizeof *out);
  if (lua_isnoneornil(L, arg)) return;
  luaL_checktype(L, arg, LUA_TTABLE);
  lua_getfield(L, arg, "scale");
  if (!lua_isnil(L, -1)) {
    if (!lua_isnumber(L, -1)) luaL_error(L, "cnn.io.Batcher: transform.scale must be a number");
    out->scale = lua_tonumber(L, -1);
  }
  lua_getfield(L, arg, "crop_pad");
  if (!lua_isnil(L, -1)) {
    int isint;
    lua_Integer pad = lua_tointegerx(L, -1, &isint);
    if (!isint || pad < 0 || pad > 4096)
      luaL_error(L, "cnn.io.Batcher: transform.crop_pad must be an integer in 0..4096");
    out->crop_pad = (int)pad;
  }
  lua_getfield(L, arg, "hflip");
  out->hflip = lua_toboolean(L, -1);
  lua_pop(L, 3);
  check_normalize(L, arg, out);
}

static uint64_t check_seed(lua_State *L, int arg) {
  if (lua_isnoneornil(L, arg)) return cnn_rng_next();
  int isint;
  lua_Integer s = lua_tointegerx(L, arg, &isint);
  if (!isint) luaL_argerror(L, arg, "integer seed expected");
  return (uint64_t)s;
}

/* ---- the Batcher userdata ---------------------------------------------------------- */

static cnn_batcher **check_box(lua_State *L) {
  return luaL_checkudata(L, 1, BATCHER_MT);
}

static cnn_batcher *check_open(lua_State *L) {
  cnn_batcher **box = check_box(L);
  if (!*box) luaL_error(L, "cnn.Batcher: batcher is closed");
  return *box;
}

/* Batcher(images, labels, order, batch_size [, drop_last [, transform
 * [, label_offset [, seed]]]]) */
static int io_batcher_new(lua_State *L) {
  cnn_tensor *images = cnn_lua_check_tensor(L, 1);
  cnn_tensor *labels = lua_isnoneornil(L, 2) ? NULL : cnn_lua_check_tensor(L, 2);
  lua_Integer batch_size = luaL_checkinteger(L, 4);
  if (batch_size < 1) luaL_argerror(L, 4, "batch size must be at least 1");
  bool drop_last = lua_toboolean(L, 5);
  cnn_transform tf;
  check_transform(L, 6, &tf);
  lua_Integer label_offset = luaL_optinteger(L, 7, 0);
  uint64_t seed = check_seed(L, 8);
  if (images->ndim < 1) luaL_argerror(L, 1, "images must have a sample dimension (N x ...)");
  int64_t norder;
  int64_t *order = check_order(L, 3, images->shape[0], &norder);
  cnn_batcher **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL; /* closed until the batcher exists */
  luaL_setmetatable(L, BATCHER_MT);
  *box = cnn_batcher_new(images, labels, order, norder, batch_size, drop_last, &tf,
                         label_offset, seed);
  if (!*box) return cnn_lua_error(L);
  return 1;
}

/* b:next() -> x, y (y absent without labels), or nil at the end of the epoch */
static int batcher_next(lua_State *L) {
  cnn_batcher *b = check_open(L);
  cnn_tensor *x = NULL, *y = NULL;
  int r = cnn_batcher_next(b, &x, &y);
  if (r < 0) return cnn_lua_error(L);
  if (r == 0) {
    lua_pushnil(L);
    return 1;
  }
  cnn_lua_push_tensor(L, x);
  if (!y) return 1;
  cnn_lua_push_tensor(L, y);
  return 2;
}

static int batcher_close(lua_State *L) {
  cnn_batcher **box = check_box(L);
  if (*box) {
    cnn_batcher *b = *box;
    *box = NULL;
    cnn_batcher_free(b);
  }
  return 0;
}

static int batcher_len(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)cnn_batcher_len(check_open(L)));
  return 1;
}

static int batcher_tostring(lua_State *L) {
  cnn_batcher **box = check_box(L);
  if (!*box)
    lua_pushliteral(L, "cnn.Batcher (closed)");
  else
    lua_pushfstring(L, "cnn.Batcher (%I batches)", (lua_Integer)cnn_batcher_len(*box));
  return 1;
}

static const luaL_Reg batcher_methods[] = {
  {"next", batcher_next},
  {"close", batcher_close},
  {NULL, NULL},
};

static const luaL_Reg batcher_meta[] = {
  {"__gc", batcher_close},
  {"__close", batcher_close},
  {"__len", batcher_len},
  {"__tostring", batcher_tostring},
  {NULL, NULL},
};

static void batcher_type(lua_State *L) {
  if (luaL_newmetatable(L, BATCHER_MT)) {
    luaL_setfuncs(L, batcher_meta, 0);
    luaL_newlib(L, batcher_methods);
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
}

/* ---- registration -------------------------------------------------------------------- */

static const luaL_Reg io_funcs[] = {
  {"load_idx", io_load_idx},
  {"load_cifar10", io_load_cifar10},
  {"Batcher", io_batcher_new},
  {"isatty", io_isatty},
  {NULL, NULL},
};

static const char *const io_docs[][2] = {
  {"load_idx", "cnn.io.load_idx(path) -> tensor\nReads an IDX file (MNIST, Fashion-MNIST; gzipped or plain) as stored: uint8 images N x H x W, uint8 labels 0-based."},
  {"load_cifar10", "cnn.io.load_cifar10(path) -> images, labels\nReads a CIFAR-10 binary batch: images N x 3 x 32 x 32 uint8, labels int64 N (0-based as stored)."},
  {"Batcher", "cnn.io.Batcher(images, labels, order, batch_size [, drop_last [, transform [, label_offset [, seed]]]]) -> batcher\nAssembles batches on a background thread (b:next() -> x, y or nil; b:close()); order holds 1-based sample indices; transform = {scale=, mean=, std=, crop_pad=, hflip=}. Used by data.DataLoader."},
  {"isatty", "cnn.io.isatty(fd_or_file) -> boolean\nWhether the descriptor (or Lua file such as io.stdout) is a terminal."},
};

/* cnn.doc[cnn.io.<name>] = doc, for each function (io table at index io) */
static void register_docs(lua_State *L, int cnn, int io) {
  lua_getfield(L, cnn, "doc");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  for (size_t i = 0; i < sizeof io_docs / sizeof io_docs[0]; i++) {
    lua_getfield(L, io, io_docs[i][0]);
    lua_pushstring(L, io_docs[i][1]);
    lua_settable(L, -3);
  }
  lua_pop(L, 1);
}

void cnn_lua_open_data(lua_State *L) {
  int cnn = lua_absindex(L, -1);
  batcher_type(L);
  lua_getfield(L, cnn, "io");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, cnn, "io");
  }
  int io = lua_absindex(L, -1);
  luaL_setfuncs(L, io_funcs, 0);
  register_docs(L, cnn, io);
  lua_pop(L, 1);
}
