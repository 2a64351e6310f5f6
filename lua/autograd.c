/*
 * autograd.c -- autograd from Lua: x:backward(), requires_grad_, retain_grad,
 * zero_grad, register_hook (the "cnn.HookHandle" type), and grad mode
 * (cnn.no_grad, cnn.enable_grad, cnn.is_grad_enabled, cnn.set_grad_enabled).
 *
 * Hooks: a Lua function is kept in the registry; core calls hook_call()
 * during backward, which runs the function under lua_pcall through a
 * trampoline (so even a memory error while pushing the gradient cannot
 * longjmp through core) on the state that called backward().  A Lua error
 * in a hook stops backward with "hook: <message>".  The hook's data is
 * freed (registry reference dropped) by core when the tensor dies or the
 * handle removes it.
 *
 * During backward the collector is stopped (and memory.c's steps paused):
 * a hook allocates, and a finalizer run then could release a tensor of the
 * graph that core is walking.
 *
 * Grad mode: no_grad(fn, ...) runs fn under pcall and restores the previous
 * mode before returning its results or re-raising its error.
 */
#include <stdlib.h>

#include "bind.h"

/* ---- hooks ------------------------------------------------------------------- */

typedef struct {
  lua_State *L; /* main thread: for luaL_unref */
  int ref;      /* the Lua function */
} hook_data;

typedef struct {
  cnn_tensor *t; /* owned reference */
  int id;
} hook_handle;

static lua_State *backward_L; /* the state running backward(), for hooks */

/* pcall'd: (hook_data*, grad*) -> fn(grad) */
static int hook_trampoline(lua_State *L) {
  hook_data *h = lua_touserdata(L, 1);
  cnn_tensor *g = lua_touserdata(L, 2);
  lua_rawgeti(L, LUA_REGISTRYINDEX, h->ref);
  cnn_tensor_retain(g);
  cnn_lua_push_tensor(L, g);
  lua_call(L, 1, 1);
  return 1;
}

static cnn_tensor *hook_call(cnn_tensor *grad, void *ud, int *failed) {
  hook_data *h = ud;
  lua_State *L = backward_L ? backward_L : h->L;
  if (!lua_checkstack(L, 4)) return *failed = 1, cnn_set_error("hook: Lua stack overflow"), NULL;
  lua_pushcfunction(L, hook_trampoline);
  lua_pushlightuserdata(L, h);
  lua_pushlightuserdata(L, grad);
  if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
    cnn_set_error("hook: %s",
                  lua_isstring(L, -1) ? lua_tostring(L, -1) : "error object is not a string");
    lua_pop(L, 1);
    *failed = 1;
    return NULL;
  }
  cnn_tensor *r = NULL;
  cnn_tensor **box = luaL_testudata(L, -1, CNN_TENSOR_MT);
  if (box && *box) {
    r = *box;
    cnn_tensor_retain(r);
  } else if (!lua_isnil(L, -1)) {
    cnn_set_error("hook: must return a tensor or nil, got %s", luaL_typename(L, -1));
    *failed = 1;
  }
  lua_pop(L, 1);
  return r;
}

static void hook_free(void *ud) {
  hook_data *h = ud;
  luaL_unref(h->L, LUA_REGISTRYINDEX, h->ref);
  free(h);
}

/* x:register_hook(fn) -> handle; fn(grad) may return a replacement tensor */
static int m_register_hook(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  hook_handle *hh = lua_newuserdatauv(L, sizeof *hh, 0); /* safe state first */
  hh->t = NULL;
  luaL_setmetatable(L, CNN_HOOK_MT);
  hook_data *h = malloc(sizeof *h);
  if (!h) return luaL_error(L, "register_hook: out of memory");
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  h->L = lua_tothread(L, -1);
  lua_pop(L, 1);
  lua_pushvalue(L, 2);
  h->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  int id = cnn_tensor_add_hook(t, hook_call, h, hook_free);
  if (id < 0) {
    hook_free(h);
    return cnn_lua_error(L);
  }
  cnn_tensor_retain(t);
  hh->t = t;
  hh->id = id;
  return 1;
}

static int handle_remove(lua_State *L) {
  hook_handle *hh = luaL_checkudata(L, 1, CNN_HOOK_MT);
  if (hh->t) {
    cnn_tensor_remove_hook(hh->t, hh->id);
    cnn_tensor_release(hh->t);
    hh->t = NULL;
  }
  return 0;
}

static int handle_gc(lua_State *L) {
  hook_handle *hh = luaL_checkudata(L, 1, CNN_HOOK_MT);
  if (hh->t) cnn_tensor_release(hh->t); /* the hook stays registered */
  hh->t = NULL;
  return 0;
}

static int handle_tostring(lua_State *L) {
  hook_handle *hh = luaL_checkudata(L, 1, CNN_HOOK_MT);
  lua_pushfstring(L, hh->t ? "cnn.HookHandle %d" : "cnn.HookHandle %d (removed)", hh->id);
  return 1;
}

void cnn_lua_hook_type(lua_State *L) {
  static const luaL_Reg meta[] = {
      {"__gc", handle_gc}, {"__tostring", handle_tostring}, {NULL, NULL}};
  static const luaL_Reg methods[] = {{"remove", handle_remove}, {NULL, NULL}};
  luaL_newmetatable(L, CNN_HOOK_MT);
  luaL_setfuncs(L, meta, 0);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

/* ---- backward and friends ------------------------------------------------------- */

/* x:backward([grad] [, {retain_graph=false}]) */
static int m_backward(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int opts = lua_istable(L, 2) ? 2 : lua_istable(L, 3) ? 3 : 0;
  cnn_tensor *g = opts == 2 ? NULL : cnn_lua_opt_tensor(L, 2);
  bool retain = cnn_lua_opt_bool(L, opts, "retain_graph", false);
  lua_State *prev = backward_L;
  backward_L = L;
  bool was_paused = cnn_lua_memory_pause(true);
  int gc_running = lua_gc(L, LUA_GCISRUNNING);
  if (gc_running) lua_gc(L, LUA_GCSTOP); /* no finalizers while core walks the graph */
  int rc = cnn_backward(t, g, retain);
  if (gc_running) lua_gc(L, LUA_GCRESTART);
  cnn_lua_memory_pause(was_paused);
  backward_L = prev;
  if (rc != 0) return cnn_lua_error(L);
  return 0;
}

static int m_requires_grad_(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  bool on = lua_isnoneornil(L, 2) ? true : lua_toboolean(L, 2);
  if (cnn_set_requires_grad(t, on) != 0) return cnn_lua_error(L);
  lua_settop(L, 1);
  return 1;
}

static int m_retain_grad(lua_State *L) {
  if (cnn_retain_grad(cnn_lua_check_tensor(L, 1)) != 0) return cnn_lua_error(L);
  lua_settop(L, 1);
  return 1;
}

static int m_zero_grad(lua_State *L) {
  cnn_tensor_set_grad(cnn_lua_check_tensor(L, 1), NULL); /* clearing cannot fail */
  lua_settop(L, 1);
  return 1;
}

/* ---- graph walking (stdlib/viz/graph.lua) ----------------------------------------------- */

/* internal.grad_fn_inputs(t) -> {tensors} the inputs of the node that made t that
 * need a gradient, in the op's order; {} for leaves */
static int f_grad_fn_inputs(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  cnn_tensor **in = NULL;
  int n = cnn_grad_fn_inputs(t, &in);
  lua_createtable(L, n > 0 ? n : 0, 0);
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (!in[i]) continue;
    cnn_tensor_retain(in[i]);
    cnn_lua_push_tensor(L, in[i]);
    lua_rawseti(L, -2, ++k);
  }
  return 1;
}

/* internal.node_key(t) -> a key equal for every userdata of the same tensor
 * (a light userdata: valid only while the tensor lives) */
static int f_node_key(lua_State *L) {
  lua_pushlightuserdata(L, cnn_lua_check_tensor(L, 1));
  return 1;
}

/* ---- grad mode ------------------------------------------------------------------------ */

static int run_with_mode(lua_State *L, bool on) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  bool prev = cnn_set_grad_enabled(on);
  int rc = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  cnn_set_grad_enabled(prev);
  if (rc != LUA_OK) return lua_error(L);
  return lua_gettop(L);
}

static int f_no_grad(lua_State *L) { return run_with_mode(L, false); }
static int f_enable_grad(lua_State *L) { return run_with_mode(L, true); }

static int f_is_grad_enabled(lua_State *L) {
  lua_pushboolean(L, cnn_grad_enabled());
  return 1;
}

static int f_set_grad_enabled(lua_State *L) {
  luaL_checktype(L, 1, LUA_TBOOLEAN);
  lua_pushboolean(L, cnn_set_grad_enabled(lua_toboolean(L, 1)));
  return 1;
}

const luaL_Reg cnn_lua_autograd_methods[] = {
    {"backward", m_backward},           {"requires_grad_", m_requires_grad_},
    {"retain_grad", m_retain_grad},     {"zero_grad", m_zero_grad},
    {"register_hook", m_register_hook}, {NULL, NULL}};

const luaL_Reg cnn_lua_autograd_funcs[] = {{"no_grad", f_no_grad},
                                           {"enable_grad", f_enable_grad},
                                           {"is_grad_enabled", f_is_grad_enabled},
                                           {"set_grad_enabled", f_set_grad_enabled},
                                           {NULL, NULL}};

/* stdlib's helpers (viz.graph), in the private table cnn.internal */
const luaL_Reg cnn_lua_autograd_internal[] = {
    {"grad_fn_inputs", f_grad_fn_inputs}, {"node_key", f_node_key}, {NULL, NULL}};
