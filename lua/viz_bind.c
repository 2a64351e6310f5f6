/*
 * viz_bind.c -- the C side of viz and inspect: PNG in and out, a walk of the
 * autograd graph, and the terminal facts Lua cannot see (see viz_bind.h).
 *
 * Design: thin bindings over core (core/io/io.h for PNG, cnn.h for the
 * graph); no math here.  Every function validates its arguments and raises
 * a Lua error that names it ("viz_png: ..."); core failures raise
 * cnn_error().  Buffers taken from core are freed before anything that can
 * raise, so an error never leaks them.
 *
 * Ownership: tensors pushed to Lua are retained first (a userdata owns one
 * reference); the inputs returned by cnn_grad_fn_inputs() are borrowed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "bind.h"
#include "io/io.h"
#include "viz_bind.h"

/* ---- PNG ------------------------------------------------------------------- */

/* Reads the pixel layout of t (uint8 H x W or H x W x C); raises if wrong. */
static void png_layout(lua_State *L, const cnn_tensor *t, int64_t *h, int64_t *w, int *c) {
  char buf[CNN_SHAPE_STR];
  if (t->dtype != CNN_UINT8)
    luaL_error(L, "viz_png: expected a uint8 tensor, got %s (use viz.save_png for floats)",
               cnn_dtype_name(t->dtype));
  if (t->ndim != 2 && t->ndim != 3)
    luaL_error(L, "viz_png: expected H x W or H x W x C, got %s", cnn_tensor_shape_str(t, buf));
  *h = t->shape[0];
  *w = t->shape[1];
  *c = t->ndim == 3 ? (int)t->shape[2] : 1;
  if (t->ndim == 3 && t->shape[2] != 1 && t->shape[2] != 3 && t->shape[2] != 4)
    luaL_error(L, "viz_png: %s has %d channels; PNG takes 1, 3 or 4",
               cnn_tensor_shape_str(t, buf), (int)t->shape[2]);
  if (*h < 1 || *w < 1 || *h > (1 << 20) || *w > (1 << 20))
    luaL_error(L, "viz_png: image size %s out of range", cnn_tensor_shape_str(t, buf));
}

/* cnn.viz_png(t, path) -> true */
static int viz_png(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  const char *path = luaL_checkstring(L, 2);
  int64_t h, w;
  int c;
  png_layout(L, t, &h, &w, &c);
  uint8_t *px = malloc((size_t)(h * w * c));
  if (!px) return luaL_error(L, "viz_png: out of memory");
  int rc = cnn_tensor_copy_to_host(t, px);
  if (rc == 0) rc = cnn_png_write(path, h, w, c, px);
  free(px);
  if (rc != 0) return cnn_lua_error(L);
  lua_pushboolean(L, 1);
  return 1;
}

/* cnn.png_read(path) -> h, w, channels, uint8 tensor h x w x channels */
static int png_read(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  int64_t h = 0, w = 0;
  int c = 0;
  uint8_t *px = cnn_png_read(path, &h, &w, &c);
  if (!px) return cnn_lua_error(L);
  int64_t shape[3] = {h, w, c};
  cnn_tensor *t = cnn_from_buffer(3, shape, CNN_UINT8, px);
  free(px);
  if (!t) return cnn_lua_error(L);
  lua_pushinteger(L, h);
  lua_pushinteger(L, w);
  lua_pushinteger(L, c);
  cnn_lua_push_tensor(L, t);
  return 4;
}

/* ---- the autograd graph ------------------------------------------------------- */

/* cnn.grad_fn_inputs(t) -> {input1 or false, ...}, or nil for a leaf */
static int grad_fn_inputs(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  cnn_tensor **in = NULL;
  int n = cnn_grad_fn_inputs(t, &in);
  if (!t->grad_fn || !in) {
    lua_pushnil(L);
    return 1;
  }
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    if (in[i]) {
      cnn_tensor_retain(in[i]);
      cnn_lua_push_tensor(L, in[i]);
    } else {
      lua_pushboolean(L, 0);
    }
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* cnn.viz_node_key(t) -> integer: the same for every tensor made by one node */
static int viz_node_key(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  const void *p = t->grad_fn ? (const void *)t->grad_fn : (const void *)t;
  lua_pushinteger(L, (lua_Integer)(uintptr_t)p);
  return 1;
}

/* ---- the terminal ------------------------------------------------------------------ */

static int viz_isatty(lua_State *L) {
  lua_pushboolean(L, isatty((int)luaL_optinteger(L, 1, 1)));
  return 1;
}

static int viz_term_width(lua_State *L) {
  struct winsize ws;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    lua_pushinteger(L, ws.ws_col);
  } else {
    lua_pushnil(L);
  }
  return 1;
}

/* ---- registration --------------------------------------------------------------- */

static const struct {
  const char *name;
  lua_CFunction fn;
  const char *doc;
} viz_funcs[] = {
    {"viz_png", viz_png,
     "cnn.viz_png(t, path) -> true\nWrites a uint8 H x W (grey) or H x W x C (C = 1, 3, 4) "
     "tensor as a PNG file, atomically; viz.save_png takes any float tensor."},
    {"png_read", png_read,
     "cnn.png_read(path) -> h, w, channels, tensor\nReads an 8-bit PNG into a uint8 "
     "h x w x channels tensor."},
    {"grad_fn_inputs", grad_fn_inputs,
     "cnn.grad_fn_inputs(t) -> list or nil\nThe inputs of the op that made t (false where "
     "an input needs no gradient); nil for a leaf.  viz.graph walks it."},
    {"viz_node_key", viz_node_key,
     "cnn.viz_node_key(t) -> integer\nAn integer naming t's autograd node (or t for a "
     "leaf), equal for every handle on the same node."},
    {"viz_isatty", viz_isatty, "cnn.viz_isatty([fd = 1]) -> boolean\nWhether fd is a terminal."},
    {"viz_term_width", viz_term_width,
     "cnn.viz_term_width() -> columns or nil\nThe width of the terminal on stdout."},
};

void cnn_lua_open_viz(lua_State *L) {
  int m = lua_gettop(L);
  lua_getfield(L, m, "doc");
  int doc = lua_istable(L, -1) ? lua_gettop(L) : 0;
  for (size_t i = 0; i < sizeof viz_funcs / sizeof viz_funcs[0]; i++) {
    lua_pushcfunction(L, viz_funcs[i].fn);
    if (doc) {
      lua_pushvalue(L, -1);
      lua_pushstring(L, viz_funcs[i].doc);
      lua_rawset(L, doc);
    }
    lua_setfield(L, m, viz_funcs[i].name);
  }
  lua_settop(L, m);
}
