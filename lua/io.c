/*
 * io.c -- files from Lua: cnn.save / cnn.load (safetensors checkpoints),
 * cnn.io.load_idx, cnn.io.load_cifar10, PNG for stdlib/viz.lua (cnn.viz_png,
 * cnn.png_read; cnn.io's images are image.c), terminal queries (cnn.io.isatty,
 * cnn.viz_isatty, cnn.viz_term_width).  The data loader's batcher is its
 * own type (batcher.c).
 *
 * Checkpoint layout: a nested Lua table is flattened to dotted names
 * ("features.1.weight"; keys that already hold dots, as in a flat state
 * dict, are kept as they are); tensors become safetensors entries, sorted by
 * name so the same table always gives the same file; numbers, strings and
 * booleans go to __metadata__ as strings with a type prefix: "i:42"
 * (integer), "n:0.1" (float, %.17g so it round-trips), "s:text",
 * "b:true".  cnn.load rebuilds the nesting: a name component made of
 * digits (no leading zero) becomes an integer key, so features[1].weight
 * round-trips; metadata without a known prefix (files from other tools)
 * stays a plain string.  cnn.load(path, {flat = true}) keeps dotted names.
 *
 * The loaded file is held by a box with __gc while the Lua table is built,
 * so a Lua error never leaks it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "bind.h"
#include "io/io.h"

#define FILE_MT "cnn.TensorFile"
#define MAX_DEPTH 64

/* ---- save ------------------------------------------------------------------ */

/* flat[prefix .. key] = value for every entry of the table at t (recursive);
 * flat at index f, a set of visited tables at index seen. */
static void flatten(lua_State *L, int t, const char *prefix, int f, int seen, int depth) {
  if (depth > MAX_DEPTH) cnn_lua_fail(L, "save: tables nested deeper than %d levels", MAX_DEPTH);
  lua_pushvalue(L, t);
  if (lua_rawget(L, seen) != LUA_TNIL) cnn_lua_fail(L, "save: the table under '%s' contains itself", prefix);
  lua_pop(L, 1);
  lua_pushvalue(L, t);
  lua_pushboolean(L, 1);
  lua_rawset(L, seen);
  luaL_checkstack(L, 8, "save: nesting");
  lua_pushnil(L);
  while (lua_next(L, t)) {
    int kt = lua_type(L, -2);
    if (kt != LUA_TSTRING && !(kt == LUA_TNUMBER && lua_isinteger(L, -2)))
      cnn_lua_fail(L, "save: key of type %s under '%s' (keys must be strings or integers)",
                   lua_typename(L, kt), prefix);
    lua_pushvalue(L, -2);
    const char *k = lua_tostring(L, -1); /* converts the copy, not the key */
    const char *name = *prefix ? lua_pushfstring(L, "%s.%s", prefix, k) : lua_pushstring(L, k);
    int vt = lua_type(L, -3);
    if (vt == LUA_TTABLE) {
      flatten(L, lua_gettop(L) - 2, name, f, seen, depth + 1);
    } else if (cnn_lua_to_tensor(L, -3) || vt == LUA_TNUMBER || vt == LUA_TSTRING || vt == LUA_TBOOLEAN) {
      lua_pushvalue(L, -3);
      lua_setfield(L, f, name);
    } else {
      cnn_lua_fail(L, "save: '%s' is a %s (only tensors, numbers, strings, booleans and tables)", name,
                   luaL_typename(L, -3));
    }
    lua_pop(L, 3);
  }
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* metadata string of the scalar at idx (pushed) */
static const char *meta_string(lua_State *L, int idx) {
  switch (lua_type(L, idx)) {
  case LUA_TBOOLEAN: return lua_pushstring(L, lua_toboolean(L, idx) ? "b:true" : "b:false");
  case LUA_TSTRING: return lua_pushfstring(L, "s:%s", lua_tostring(L, idx));
  default:
    if (lua_isinteger(L, idx)) return lua_pushfstring(L, "i:%I", lua_tointeger(L, idx));
    char buf[64];
    snprintf(buf, sizeof buf, "n:%.17g", lua_tonumber(L, idx));
    return lua_pushstring(L, buf);
  }
}

/* cnn.save(path, tbl) */
static int f_save(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  lua_newtable(L); /* 3: flat */
  lua_newtable(L); /* 4: seen */
  flatten(L, 2, "", 3, 4, 0);
  int n = 0;
  lua_pushnil(L);
  while (lua_next(L, 3)) n++, lua_pop(L, 1);
  const char **names = lua_newuserdatauv(L, sizeof *names * (size_t)(n + 1), 0);   /* 5 */
  cnn_tensor **ts = lua_newuserdatauv(L, sizeof *ts * (size_t)(n + 1), 0);         /* 6 */
  const char **keys = lua_newuserdatauv(L, sizeof *keys * (size_t)(n + 1), 0);     /* 7 */
  const char **vals = lua_newuserdatauv(L, sizeof *vals * (size_t)(n + 1), 0);     /* 8 */
  lua_newtable(L);                                                                  /* 9: anchors */
  int i = 0;
  lua_pushnil(L);
  while (lua_next(L, 3)) names[i++] = lua_tostring(L, -2), lua_pop(L, 1);
  qsort(names, (size_t)n, sizeof *names, cmp_str);
  int nt = 0, nm = 0;
  for (i = 0; i < n; i++) {
    lua_getfield(L, 3, names[i]);
    cnn_tensor *t = cnn_lua_to_tensor(L, -1);
    if (t) {
      names[nt] = names[i], ts[nt++] = t; /* names[nt] <= names[i]: in place */
    } else {
      keys[nm] = names[i];
      vals[nm++] = meta_string(L, -1);
      lua_rawseti(L, 9, nm);
    }
    lua_pop(L, 1);
  }
  if (cnn_safetensors_save(path, nt, names, ts, nm, keys, vals) != 0) return cnn_lua_error(L);
  return 0;
}

/* ---- load ------------------------------------------------------------------- */

static int file_gc(lua_State *L) {
  cnn_tensor_file **box = luaL_checkudata(L, 1, FILE_MT);
  cnn_tensor_file_free(*box);
  *box = NULL;
  return 0;
}

/* push a metadata value decoded by its prefix */
static void push_meta(lua_State *L, const char *v) {
  if (strncmp(v, "s:", 2) == 0) lua_pushstring(L, v + 2);
  else if (strcmp(v, "b:true") == 0) lua_pushboolean(L, 1);
  else if (strcmp(v, "b:false") == 0) lua_pushboolean(L, 0);
  else if ((strncmp(v, "i:", 2) == 0 || strncmp(v, "n:", 2) == 0) && lua_stringtonumber(L, v + 2)) return;
  else lua_pushstring(L, v);
}

/* push the key for one name component: an integer for canonical digits */
static void push_component(lua_State *L, const char *s, size_t n) {
  bool digits = n > 0 && n < 18 && (s[0] != '0' || n == 1);
  for (size_t i = 0; digits && i < n; i++) digits = s[i] >= '0' && s[i] <= '9';
  if (digits) lua_pushinteger(L, strtoll(s, NULL, 10));
  else lua_pushlstring(L, s, n);
}

/* root[a][b]... = value at top (popped); name "a.b.c" */
static void insert_nested(lua_State *L, int root, const char *name) {
  int v = lua_gettop(L);
  lua_pushvalue(L, root);
  const char *p = name;
  for (const char *dot; (dot = strchr(p, '.')); p = dot + 1) {
    push_component(L, p, (size_t)(dot - p));
    lua_pushvalue(L, -1);
    int t = lua_rawget(L, -3);
    if (t == LUA_TNIL) {
      lua_pop(L, 1);
      lua_newtable(L);
      lua_pushvalue(L, -2);
      lua_pushvalue(L, -2);
      lua_rawset(L, -5);
    } else if (t != LUA_TTABLE) {
      cnn_lua_fail(L, "load: '%s' is both a value and a prefix of '%s'", lua_pushlstring(L, name, (size_t)(dot - name)), name);
    }
    lua_remove(L, -2); /* key */
    lua_remove(L, -2); /* parent */
  }
  push_component(L, p, strlen(p));
  lua_pushvalue(L, -1);
  if (lua_rawget(L, -3) != LUA_TNIL) cnn_lua_fail(L, "load: '%s' appears twice", name);
  lua_pop(L, 1);
  lua_pushvalue(L, v);
  lua_rawset(L, -3);
  lua_settop(L, v - 1);
}

static void put(lua_State *L, int root, const char *name, bool flat) {
  if (flat) lua_setfield(L, root, name);
  else insert_nested(L, root, name);
}

/* cnn.load(path [, {flat = false}]) -> table */
static int f_load(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  bool flat = cnn_lua_opt_bool(L, lua_istable(L, 2) ? 2 : 0, "flat", false);
  cnn_tensor_file **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  luaL_setmetatable(L, FILE_MT);
  cnn_tensor_file *f = cnn_safetensors_load(path);
  if (!f) return cnn_lua_error(L);
  *box = f;
  lua_newtable(L);
  int root = lua_gettop(L);
  for (int i = 0; i < f->ntensors; i++) {
    cnn_tensor_retain(f->tensors[i].tensor);
    cnn_lua_push_tensor(L, f->tensors[i].tensor);
    put(L, root, f->tensors[i].name, flat);
  }
  for (int i = 0; i < f->nmeta; i++) {
    push_meta(L, f->meta[i].value);
    put(L, root, f->meta[i].key, flat);
  }
  return 1;
}

/* ---- datasets ------------------------------------------------------------------ */

static int f_load_idx(lua_State *L) { return cnn_lua_push_result(L, cnn_idx_load(luaL_checkstring(L, 1))); }

/* cnn.io.load_cifar10(path) -> images (N x 3 x 32 x 32 uint8), labels (int64, 0-based as stored) */
static int f_load_cifar10(lua_State *L) {
  cnn_tensor *images = NULL, *labels = NULL;
  if (cnn_cifar10_load(luaL_checkstring(L, 1), &images, &labels) != 0) return cnn_lua_error(L);
  cnn_lua_push_tensor(L, images);
  cnn_lua_push_tensor(L, labels);
  return 2;
}

/* ---- PNG ------------------------------------------------------------------------- */

/* write the uint8 image at arg img (H x W or H x W x C) to the path at arg p */
static int write_png(lua_State *L, const char *fn, int img, int p) {
  cnn_tensor *t = cnn_lua_check_tensor(L, img);
  const char *path = luaL_checkstring(L, p);
  char s[CNN_SHAPE_STR];
  if (t->dtype != CNN_UINT8 || (t->ndim != 2 && t->ndim != 3) ||
      (t->ndim == 3 && t->shape[2] != 1 && t->shape[2] != 3 && t->shape[2] != 4))
    return cnn_lua_fail(L, "%s: expects a uint8 H x W or H x W x C tensor with C = 1, 3 or 4 channels, got %s %s",
                        fn, cnn_tensor_shape_str(t, s), cnn_dtype_name(t->dtype));
  cnn_tensor *c = cnn_to_device(t, CNN_DEVICE_CPU);
  cnn_lua_push_result(L, c);
  cnn_tensor *cc = cnn_contiguous(c);
  cnn_lua_push_result(L, cc);
  int ch = t->ndim == 3 ? (int)t->shape[2] : 1;
  if (cnn_png_write(path, t->shape[0], t->shape[1], ch, cnn_tensor_data(cc)) != 0) return cnn_lua_error(L);
  return 0;
}

static int f_viz_png(lua_State *L) { return write_png(L, "viz_png", 1, 2); }     /* (img, path) */

/* uint8 H x W x C of the PNG at arg 1 */
static int read_png_hwc(lua_State *L) {
  int64_t h, w;
  int c;
  uint8_t *px = cnn_png_read(luaL_checkstring(L, 1), &h, &w, &c);
  if (!px) return cnn_lua_fail(L, "png_read: %s", cnn_error());
  cnn_tensor *t = cnn_from_buffer(3, (int64_t[]){h, w, c}, CNN_UINT8, px);
  free(px);
  return cnn_lua_push_result(L, t);
}

/* cnn.png_read(path) -> h, w, channels, uint8 H x W x C tensor */
static int f_png_read(lua_State *L) {
  read_png_hwc(L);
  cnn_tensor *t = cnn_lua_check_tensor(L, -1);
  for (int i = 0; i < 3; i++) lua_pushinteger(L, t->shape[i]);
  lua_rotate(L, -4, -1);
  return 4;
}

/* ---- terminal ------------------------------------------------------------------------ */

/* fd of arg 1: an integer, a Lua file, or stdout by default */
static int fd_arg(lua_State *L) {
  if (lua_isnoneornil(L, 1)) return 1;
  luaL_Stream *s = luaL_testudata(L, 1, LUA_FILEHANDLE);
  if (s) return s->closef && s->f ? fileno(s->f) : -1;
  return (int)cnn_lua_check_int(L, 1);
}

static int f_isatty(lua_State *L) {
  int fd = fd_arg(L);
  lua_pushboolean(L, fd >= 0 && isatty(fd));
  return 1;
}

static int f_viz_isatty(lua_State *L) { return f_isatty(L); }

/* cnn.viz_term_width() -> columns of the terminal on stdout, or nil */
static int f_term_width(lua_State *L) {
  struct winsize ws;
  if (ioctl(1, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0) return 0;
  lua_pushinteger(L, ws.ws_col);
  return 1;
}

const luaL_Reg cnn_lua_io_funcs[] = {
    {"save", f_save}, {"load", f_load}, {"viz_png", f_viz_png}, {"png_read", f_png_read}, {"viz_isatty", f_viz_isatty},
    {"viz_term_width", f_term_width}, {NULL, NULL}};

const luaL_Reg cnn_lua_io_module[] = {
    {"load_idx", f_load_idx}, {"load_cifar10", f_load_cifar10}, {"isatty", f_isatty}, {NULL, NULL}};

void cnn_lua_io_type(lua_State *L) {
  luaL_newmetatable(L, FILE_MT);
  lua_pushcfunction(L, file_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
}
