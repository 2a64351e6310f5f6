/*
 * io.c -- files from Lua: cnn.save / cnn.load (safetensors checkpoints),
 * cnn.io.load_idx, cnn.io.load_cifar10, cnn.io.isatty (cnn.io's images are
 * image.c); and for stdlib/viz/, in the private table
 * require("cnn.internal"): write_png (img, path), png_read, isatty and
 * term_width.  The data loader's batcher is its own type (batcher.c).
 *
 * Checkpoint layout: a nested Lua table is flattened to dotted names
 * ("features.1.weight"; keys that already hold dots, as in a flat state
 * dict, are kept as they are); tensors become safetensors entries, sorted by
 * name so the same table always gives the same file; numbers, strings and
 * booleans go to __metadata__ as strings with a type prefix: "i:42"
 * (integer), "n:0.1" (float, %.17g so it round-trips), "s:text",
 * "b:true".  So that cnn.load gives back exactly the table that was saved
 * (nested stays nested, a dotted key stays one key, an integer key stays an
 * integer and a string "1" a string), the metadata entry "__cnnsh_keys__"
 * records every entry's key path: per entry the number of keys, then each
 * key as s<len>:<bytes> (a string) or i<len>:<digits> (an integer), entries
 * back to back.  A file without it (written by another program) loads as
 * it is: its names stay flat; metadata without a known prefix stays a plain
 * string.  cnn.load(path, {flat = true}) gives the dotted names.  A module
 * (anything with a state_dict method) is refused: save m:state_dict().
 *
 * The loaded file is held by a box with __gc while the Lua table is built,
 * so a Lua error never leaks it.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "bind.h"
#include "io/io.h"

#define FILE_MT   "cnn.TensorFile"
#define MAX_DEPTH 64

/* ---- save ------------------------------------------------------------------ */

#define KEYS_META "__cnnsh_keys__"

/* Refuses an object with a state_dict method (a module, an optimizer): its
 * fields are internals, not a checkpoint. */
static void refuse_object(lua_State *L, int t, const char *where) {
  if (lua_getfield(L, t, "state_dict") != LUA_TFUNCTION) {
    lua_pop(L, 1);
    return;
  }
  lua_getfield(L, t, "__name");
  const char *cls = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "object";
  if (*where)
    cnn_lua_fail(
        L,
        "save: '%s' is a %s (it has a state_dict method), not a table of tensors: save its "
        "state_dict() instead",
        where, cls);
  cnn_lua_fail(L,
               "save: got a %s (it has a state_dict method), not a table of tensors: save "
               "net:state_dict() instead, as in cnn.save(path, net:state_dict())",
               cls);
}

/* Pushes the record of one key ("s<len>:<bytes>" or "i<len>:<digits>"),
 * the key being at idx. */
static void push_key_record(lua_State *L, int idx) {
  bool is_int = lua_type(L, idx) == LUA_TNUMBER;
  lua_pushvalue(L, idx);
  size_t n;
  lua_tolstring(L, -1, &n); /* converts the copy, not the key */
  lua_pushfstring(L, "%c%d:", is_int ? 'i' : 's', (int)n);
  lua_insert(L, -2);
  lua_concat(L, 2);
}

typedef struct {
  int flat, paths, seen; /* stack indices: name -> value, name -> key record, visited tables */
} flat_ctx;

/* flat[prefix .. key] = value for every entry of the table at t
 * (recursive), paths[name] = the key records of its path (rec_prefix, at
 * stack index rec, holds those of t's own path, depth keys). */
static void flatten(lua_State *L, int t, const char *prefix, int rec, const flat_ctx *c,
                    int depth) {
  if (depth > MAX_DEPTH) cnn_lua_fail(L, "save: tables nested deeper than %d levels", MAX_DEPTH);
  refuse_object(L, t, prefix);
  lua_pushvalue(L, t);
  if (lua_rawget(L, c->seen) != LUA_TNIL)
    cnn_lua_fail(L, "save: the table under '%s' contains itself", prefix);
  lua_pop(L, 1);
  lua_pushvalue(L, t);
  lua_pushboolean(L, 1);
  lua_rawset(L, c->seen);
  luaL_checkstack(L, 12, "save: nesting");
  lua_pushnil(L);
  while (lua_next(L, t)) {
    int kt = lua_type(L, -2), top = lua_gettop(L);
    if (kt != LUA_TSTRING && !(kt == LUA_TNUMBER && lua_isinteger(L, -2)))
      cnn_lua_fail(L, "save: key of type %s under '%s' (keys must be strings or integers)",
                   lua_typename(L, kt), prefix);
    lua_pushvalue(L, -2);
    const char *k = lua_tostring(L, -1); /* converts the copy, not the key */
    const char *name = *prefix ? lua_pushfstring(L, "%s.%s", prefix, k) : lua_pushstring(L, k);
    lua_pushvalue(L, rec);
    push_key_record(L, top - 1);
    lua_concat(L, 2); /* top + 3: the records of this entry's path */
    int vt = lua_type(L, top);
    if (vt == LUA_TTABLE && !cnn_lua_to_tensor(L, top)) {
      flatten(L, top, name, top + 3, c, depth + 1);
    } else if (cnn_lua_to_tensor(L, top) || vt == LUA_TNUMBER || vt == LUA_TSTRING ||
               vt == LUA_TBOOLEAN) {
      if (strcmp(name, KEYS_META) == 0) cnn_lua_fail(L, "save: the name '%s' is reserved", name);
      if (lua_getfield(L, c->flat, name) != LUA_TNIL)
        cnn_lua_fail(L, "save: two entries are both named '%s' (a nested key and a dotted one)",
                     name);
      lua_pop(L, 1);
      lua_pushvalue(L, top);
      lua_setfield(L, c->flat, name);
      lua_pushfstring(L, "%d", depth + 1);
      lua_pushvalue(L, top + 3);
      lua_concat(L, 2);
      lua_setfield(L, c->paths, name);
    } else {
      cnn_lua_fail(L, "save: '%s' is a %s (only tensors, numbers, strings, booleans and tables)",
                   name, luaL_typename(L, top));
    }
    lua_settop(L, top - 1);
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

/* The key records of every entry in `names` order, concatenated (pushed). */
static void push_keys_record(lua_State *L, int paths, const char **names, int n) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 0; i < n; i++) {
    lua_getfield(L, paths, names[i]);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
}

/* cnn.save(path, tbl) */
static int f_save(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  lua_newtable(L);        /* 3: flat */
  lua_newtable(L);        /* 4: paths */
  lua_newtable(L);        /* 5: seen */
  lua_pushliteral(L, ""); /* 6: the (empty) path of the root */
  flatten(L, 2, "", 6, &(flat_ctx){3, 4, 5}, 0);
  int n = 0;
  lua_pushnil(L);
  while (lua_next(L, 3)) n++, lua_pop(L, 1);
  const char **names = lua_newuserdatauv(L, sizeof *names * (size_t)(n + 1), 0); /* 7 */
  cnn_tensor **ts = lua_newuserdatauv(L, sizeof *ts * (size_t)(n + 1), 0);       /* 8 */
  const char **keys = lua_newuserdatauv(L, sizeof *keys * (size_t)(n + 2), 0);   /* 9 */
  const char **vals = lua_newuserdatauv(L, sizeof *vals * (size_t)(n + 2), 0);   /* 10 */
  lua_newtable(L);                                                               /* 11: anchors */
  int i = 0;
  lua_pushnil(L);
  while (lua_next(L, 3)) names[i++] = lua_tostring(L, -2), lua_pop(L, 1);
  qsort(names, (size_t)n, sizeof *names, cmp_str);
  int nt = 0, nm = 0;
  for (i = 0; i < n; i++) {
    lua_getfield(L, 3, names[i]);
    cnn_tensor *t = cnn_lua_to_tensor(L, -1);
    if (t) {
      ts[nt++] = t;
    } else {
      keys[nm] = names[i];
      vals[nm++] = meta_string(L, -1);
      lua_rawseti(L, 11, nm);
    }
    lua_pop(L, 1);
  }
  push_keys_record(L, 4, names, n); /* in sorted-name order: tensors and metadata interleaved */
  keys[nm] = KEYS_META, vals[nm++] = lua_tostring(L, -1);
  lua_rawseti(L, 11, nm);
  const char **tnames = lua_newuserdatauv(L, sizeof *tnames * (size_t)(nt + 1), 0);
  for (i = 0, nt = 0; i < n; i++) {
    lua_getfield(L, 3, names[i]);
    if (cnn_lua_to_tensor(L, -1)) tnames[nt++] = names[i];
    lua_pop(L, 1);
  }
  if (cnn_safetensors_save(path, nt, tnames, ts, nm, keys, vals) != 0) return cnn_lua_error(L);
  return 0;
}

/* ---- load ------------------------------------------------------------------- */

static int file_gc(lua_State *L) {
  cnn_tensor_file **box = luaL_checkudata(L, 1, FILE_MT);
  cnn_tensor_file_free(*box);
  *box = NULL;
  return 0;
}

/* %.17g writes infinities and NaN as "inf", "-inf", "nan", "-nan", which
 * lua_stringtonumber does not read: push them as numbers; false if s is none. */
static bool push_nonfinite(lua_State *L, const char *s) {
  if (strcmp(s, "inf") == 0)
    lua_pushnumber(L, HUGE_VAL);
  else if (strcmp(s, "-inf") == 0)
    lua_pushnumber(L, -HUGE_VAL);
  else if (strcmp(s, "nan") == 0 || strcmp(s, "-nan") == 0)
    lua_pushnumber(L, NAN);
  else
    return false;
  return true;
}

/* push a metadata value decoded by its prefix */
static void push_meta(lua_State *L, const char *v) {
  if (strncmp(v, "s:", 2) == 0)
    lua_pushstring(L, v + 2);
  else if (strcmp(v, "b:true") == 0)
    lua_pushboolean(L, 1);
  else if (strcmp(v, "b:false") == 0)
    lua_pushboolean(L, 0);
  else if ((strncmp(v, "i:", 2) == 0 || strncmp(v, "n:", 2) == 0) && lua_stringtonumber(L, v + 2))
    return;
  else if (strncmp(v, "n:", 2) == 0 && push_nonfinite(L, v + 2))
    return;
  else
    lua_pushstring(L, v);
}

static void corrupt_record(lua_State *L) { cnn_lua_fail(L, "load: corrupt %s record", KEYS_META); }

/* Parses one key record at *r ("s<len>:<bytes>" or "i<len>:<digits>"; the
 * record ends at lim), pushes the key and advances *r. */
static void push_recorded_key(lua_State *L, const char **r, const char *lim) {
  char kind = **r, *end;
  long len = kind ? strtol(*r + 1, &end, 10) : -1;
  if ((kind != 's' && kind != 'i') || len < 0 || end == *r + 1 || *end != ':' ||
      len > lim - (end + 1))
    corrupt_record(L);
  lua_pushlstring(L, end + 1, (size_t)len);
  if (kind == 'i' && !(lua_stringtonumber(L, lua_tostring(L, -1)) && lua_isinteger(L, -1)))
    corrupt_record(L);
  if (kind == 'i') lua_remove(L, -2);
  *r = end + 1 + len;
}

/* The key records of KEYS_META, parsed: a table flat name -> {key, key,
 * ...} (pushed), or false when f has no record (another program's file).
 * A malformed record is an error. */
static void push_key_paths(lua_State *L, const cnn_tensor_file *f) {
  const char *r = cnn_tensor_file_meta(f, KEYS_META);
  if (!r) {
    lua_pushboolean(L, 0);
    return;
  }
  const char *lim = r + strlen(r);
  lua_newtable(L);
  int map = lua_gettop(L);
  luaL_checkstack(L, 2 * MAX_DEPTH + 8, "load: key record");
  while (*r) {
    char *end;
    long depth = strtol(r, &end, 10);
    if (end == r || depth < 1 || depth > MAX_DEPTH + 1) corrupt_record(L);
    r = end;
    lua_createtable(L, (int)depth, 0);
    int keys = lua_gettop(L);
    for (int i = 1; i <= depth; i++) {
      push_recorded_key(L, &r, lim);
      lua_rawseti(L, keys, i);
    }
    for (int i = 1; i <= depth; i++) { /* the flat name: the keys joined by dots */
      if (i > 1) lua_pushliteral(L, ".");
      lua_rawgeti(L, keys, i);
      luaL_tolstring(L, -1, NULL);
      lua_remove(L, -2);
    }
    lua_concat(L, 2 * (int)depth - 1);
    lua_insert(L, keys);
    lua_rawset(L, map);
  }
}

/* root[k1][k2]... = value at top (popped), the keys from the list at keys */
static void insert_path(lua_State *L, int root, int keys, const char *name) {
  int v = lua_gettop(L), n = (int)lua_rawlen(L, keys);
  lua_pushvalue(L, root);
  for (int i = 1; i < n; i++) {
    lua_rawgeti(L, keys, i);
    lua_pushvalue(L, -1);
    int t = lua_rawget(L, -3);
    if (t == LUA_TNIL) {
      lua_pop(L, 1);
      lua_newtable(L);
      lua_pushvalue(L, -2);
      lua_pushvalue(L, -2);
      lua_rawset(L, -5);
    } else if (t != LUA_TTABLE) {
      cnn_lua_fail(L, "load: '%s' is both a value and a table", name);
    }
    lua_remove(L, -2); /* key */
    lua_remove(L, -2); /* parent */
  }
  lua_rawgeti(L, keys, n);
  lua_pushvalue(L, v);
  lua_rawset(L, -3);
  lua_settop(L, v - 1);
}

/* root[name] = value at top (popped): along the recorded path when paths
 * (a table, or false) has one and flat is off, else as the flat name */
static void put(lua_State *L, int root, int paths, const char *name, bool flat) {
  if (!flat && lua_istable(L, paths) && lua_getfield(L, paths, name) == LUA_TTABLE) {
    int keys = lua_gettop(L);
    lua_pushvalue(L, keys - 1);
    insert_path(L, root, keys, name);
    lua_pop(L, 2);
    return;
  }
  if (!flat && lua_istable(L, paths)) lua_pop(L, 1);
  lua_setfield(L, root, name);
}

/* cnn.load(path [, {flat = false}]) -> table */
static int f_load(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  static const char *const known[] = {"flat", NULL};
  cnn_lua_check_options(L, lua_istable(L, 2) ? 2 : 0, "load", known);
  bool flat = cnn_lua_opt_bool(L, lua_istable(L, 2) ? 2 : 0, "flat", false);
  cnn_tensor_file **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  luaL_setmetatable(L, FILE_MT);
  cnn_tensor_file *f = cnn_safetensors_load(path);
  if (!f) return cnn_lua_error(L);
  *box = f;
  push_key_paths(L, f);
  int paths = lua_gettop(L);
  lua_newtable(L);
  int root = lua_gettop(L);
  for (int i = 0; i < f->ntensors; i++) {
    cnn_tensor_retain(f->tensors[i].tensor);
    cnn_lua_push_tensor(L, f->tensors[i].tensor);
    put(L, root, paths, f->tensors[i].name, flat);
  }
  for (int i = 0; i < f->nmeta; i++) {
    if (strcmp(f->meta[i].key, KEYS_META) == 0) continue;
    push_meta(L, f->meta[i].value);
    put(L, root, paths, f->meta[i].key, flat);
  }
  return 1;
}

/* ---- datasets ------------------------------------------------------------------ */

static int f_load_idx(lua_State *L) {
  return cnn_lua_push_result(L, cnn_idx_load(luaL_checkstring(L, 1)));
}

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
    return cnn_lua_fail(
        L, "%s: expects a uint8 H x W or H x W x C tensor with C = 1, 3 or 4 channels, got %s %s",
        fn, cnn_tensor_shape_str(t, s), cnn_dtype_name(t->dtype));
  cnn_tensor *c = cnn_to_device(t, CNN_DEVICE_CPU);
  cnn_lua_push_result(L, c);
  cnn_tensor *cc = cnn_contiguous(c);
  cnn_lua_push_result(L, cc);
  int ch = t->ndim == 3 ? (int)t->shape[2] : 1;
  if (cnn_png_write(path, t->shape[0], t->shape[1], ch, cnn_tensor_data(cc)) != 0)
    return cnn_lua_error(L);
  return 0;
}

static int f_img_png(lua_State *L) { return write_png(L, "write_png", 1, 2); } /* (img, path) */

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

/* internal.png_read(path) -> h, w, channels, uint8 H x W x C tensor */
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

/* internal.term_width() -> columns of the terminal on stdout, or nil */
static int f_term_width(lua_State *L) {
  struct winsize ws;
  if (ioctl(1, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0) return 0;
  lua_pushinteger(L, ws.ws_col);
  return 1;
}

const luaL_Reg cnn_lua_io_funcs[] = {{"save", f_save}, {"load", f_load}, {NULL, NULL}};

const luaL_Reg cnn_lua_io_internal[] = {{"write_png", f_img_png},
                                        {"png_read", f_png_read},
                                        {"isatty", f_isatty},
                                        {"term_width", f_term_width},
                                        {NULL, NULL}};

const luaL_Reg cnn_lua_io_module[] = {
    {"load_idx", f_load_idx}, {"load_cifar10", f_load_cifar10}, {"isatty", f_isatty}, {NULL, NULL}};

void cnn_lua_io_type(lua_State *L) {
  luaL_newmetatable(L, FILE_MT);
  lua_pushcfunction(L, file_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
}
