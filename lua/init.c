/*
 * init.c -- luaopen_cnn() and cnn_lua_open_all(): the `cnn` module, the
 * globals, the stdlib searcher, and the small module functions (rng,
 * threads, clock, conv backend, cuda availability).
 *
 * Module layout: cnn.Tensor is the tensor method table (extensible from
 * Lua); every method is also cnn.<name>(x, ...); cnn.F holds the functional
 * ops (and the global F is the same table); cnn.doc maps functions to doc
 * strings (docs.c).
 *
 * Stdlib loading: a package.searchers entry placed right after the preload
 * searcher finds module "nn.conv" in the embedded table (chunk name
 * "@stdlib/nn/conv.lua"), or, when CNNSH_STDLIB names a folder, in
 * CNNSH_STDLIB/nn/conv.lua (then CNNSH_STDLIB/nn/init.lua for "nn"), with
 * no fallback to the embedded copy so a developer never runs stale code.
 *
 * Lazy globals: _G gets a metatable whose __index requires exactly nn,
 * optim, data, train, viz, help and dist on first use and caches the result with
 * rawset; any other missing global stays nil.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bind.h"
#include "stdlib_embedded.h"

#ifndef CNNSH_VERSION
#define CNNSH_VERSION "0.0.0"
#endif

/* ---- rng, threads, clock --------------------------------------------------------- */

static int f_manual_seed(lua_State *L) {
  cnn_manual_seed((uint64_t)cnn_lua_check_int(L, 1));
  return 0;
}

static int f_get_rng_state(lua_State *L) {
  uint64_t s[CNN_RNG_STATE_WORDS];
  cnn_rng_get_state(s);
  lua_createtable(L, CNN_RNG_STATE_WORDS, 0);
  for (int i = 0; i < CNN_RNG_STATE_WORDS; i++) {
    lua_pushinteger(L, (lua_Integer)s[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int f_set_rng_state(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  if (luaL_len(L, 1) != CNN_RNG_STATE_WORDS)
    return cnn_lua_fail(L, "set_rng_state: expects a table of %d integers (from get_rng_state)",
                        CNN_RNG_STATE_WORDS);
  uint64_t s[CNN_RNG_STATE_WORDS];
  for (int i = 0; i < CNN_RNG_STATE_WORDS; i++) {
    lua_geti(L, 1, i + 1);
    int ok;
    s[i] = (uint64_t)lua_tointegerx(L, -1, &ok);
    if (!ok) return cnn_lua_fail(L, "set_rng_state: entry %d is not an integer", i + 1);
    lua_pop(L, 1);
  }
  cnn_rng_set_state(s);
  return 0;
}

static int f_set_num_threads(lua_State *L) {
  int64_t n = cnn_lua_check_int(L, 1);
  if (n < 1 || n > 4096)
    return cnn_lua_fail(L, "set_num_threads: %lld threads (expected 1..4096)", (long long)n);
  cnn_set_num_threads((int)n);
  return 0;
}

static int f_get_num_threads(lua_State *L) {
  lua_pushinteger(L, cnn_get_num_threads());
  return 1;
}

static int f_clock(lua_State *L) {
  lua_pushnumber(L, cnn_now_seconds());
  return 1;
}

/* ---- machine peaks ---- */

/* cnn.fma_peak([seconds = 0.2]) -> FLOP/s */
static int f_fma_peak(lua_State *L) {
  double flops;
  if (cnn_cpu_fma_peak(luaL_optnumber(L, 1, 0.2), &flops)) return cnn_lua_error(L);
  lua_pushnumber(L, flops);
  return 1;
}

/* cnn.copy_bandwidth(bytes [, seconds = 0.2]) -> bytes/s */
static int f_copy_bandwidth(lua_State *L) {
  double bps;
  if (cnn_cpu_copy_bandwidth(cnn_lua_check_int(L, 1), luaL_optnumber(L, 2, 0.2), &bps))
    return cnn_lua_error(L);
  lua_pushnumber(L, bps);
  return 1;
}

static int f_is_tensor(lua_State *L) {
  cnn_tensor **box = luaL_testudata(L, 1, CNN_TENSOR_MT);
  lua_pushboolean(L, box && *box);
  return 1;
}

/* ---- conv backend -------------------------------------------------------------------- */

static const char *const algo_names[] = {"auto", "onednn", "im2col", "naive", "direct", NULL};

/* 'direct' names the direct convolution: the naive loop on the CPU, the
 * teaching kernel (one thread per output) on CUDA. */
static int f_set_conv_algo(lua_State *L) {
  int a = luaL_checkoption(L, 1, NULL, algo_names);
  cnn_set_conv_algo(a == 4 ? CNN_CONV_NAIVE : (cnn_conv_algo)a);
  return 0;
}

static int f_get_conv_algo(lua_State *L) {
  cnn_conv_algo a = cnn_get_conv_algo();
  lua_pushstring(L, a <= CNN_CONV_NAIVE ? algo_names[a] : "auto");
  return 1;
}

/* cnn.backends: a proxy whose field `conv` reads/sets the conv algorithm */
static int backends_index(lua_State *L) {
  if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "conv") == 0)
    return f_get_conv_algo(L);
  return 0;
}

static int backends_newindex(lua_State *L) {
  if (lua_type(L, 2) != LUA_TSTRING || strcmp(lua_tostring(L, 2), "conv") != 0)
    return luaL_error(L, "cnn.backends: only 'conv' can be set");
  lua_pushcfunction(L, f_set_conv_algo);
  lua_pushvalue(L, 3);
  lua_call(L, 1, 0);
  return 0;
}

static void push_backends(lua_State *L) {
  lua_newtable(L);
  lua_newtable(L);
  lua_pushcfunction(L, backends_index);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, backends_newindex);
  lua_setfield(L, -2, "__newindex");
  lua_setmetatable(L, -2);
}

const luaL_Reg cnn_lua_misc_funcs[] = {{"manual_seed", f_manual_seed},
                                       {"get_rng_state", f_get_rng_state},
                                       {"set_rng_state", f_set_rng_state},
                                       {"set_num_threads", f_set_num_threads},
                                       {"get_num_threads", f_get_num_threads},
                                       {"clock", f_clock},
                                       {"is_tensor", f_is_tensor},
                                       {"set_conv_algo", f_set_conv_algo},
                                       {"get_conv_algo", f_get_conv_algo},
                                       /* machine peaks */
                                       {"fma_peak", f_fma_peak},
                                       {"copy_bandwidth", f_copy_bandwidth},
                                       {NULL, NULL}};

/* ---- luaopen_cnn ------------------------------------------------------------------------------ */

/* copy every key of the table at src into the table at dst (raw) */
static void copy_fields(lua_State *L, int src, int dst) {
  lua_pushnil(L);
  while (lua_next(L, src)) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, dst);
  }
}

static void build_methods(lua_State *L) {
  cnn_lua_tensor_type(L); /* pushes the method table */
  luaL_setfuncs(L, cnn_lua_tensor_methods, 0);
  luaL_setfuncs(L, cnn_lua_view_methods, 0);
  cnn_lua_math_register(L);
  luaL_setfuncs(L, cnn_lua_reduce_methods, 0);
  luaL_setfuncs(L, cnn_lua_autograd_methods, 0);
  luaL_setfuncs(L, cnn_lua_tensor_ops_methods, 0); /* tensor ops */
}

static void build_functional(lua_State *L) {
  lua_newtable(L);
  cnn_lua_functional_register(L);
  luaL_setfuncs(L, cnn_lua_loss_funcs, 0);
  luaL_setfuncs(L, cnn_lua_join_funcs, 0);
  luaL_setfuncs(L, cnn_lua_tensor_ops_funcs, 0); /* F.one_hot */
  luaL_setfuncs(L, cnn_lua_norm_funcs, 0);       /* normalisation and resizing */
}

/* package.loaded["cnn.internal"]: the bindings' helpers for stdlib (viz's
 * PNG, terminal and graph walking), kept out of the public tables so that
 * completion and help list only what users call.  stdlib's Lua modules add
 * their own private helpers to it. */
static void register_internal(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_newtable(L);
  luaL_setfuncs(L, cnn_lua_autograd_internal, 0);
  luaL_setfuncs(L, cnn_lua_io_internal, 0);
  lua_setfield(L, -2, "cnn.internal");
  lua_pop(L, 1);
}

int luaopen_cnn(lua_State *L) {
  cnn_lua_memory_install(L);
  cnn_lua_hook_type(L);
  cnn_lua_shape_type(L);
  cnn_lua_io_type(L);
  cnn_lua_batcher_type(L);
  cnn_lua_onnx_type(L);
  lua_newtable(L);
  int m = lua_gettop(L);
  build_methods(L);
  copy_fields(L, m + 1, m);
  lua_setfield(L, m, "Tensor");
  static const luaL_Reg *const funcs[] = {
      cnn_lua_creation_funcs, cnn_lua_math_funcs,   cnn_lua_join_funcs, cnn_lua_autograd_funcs,
      cnn_lua_autocast_funcs, cnn_lua_memory_funcs, cnn_lua_misc_funcs, cnn_lua_io_funcs,
      cnn_lua_cuda_funcs,     cnn_lua_timer_funcs};
  for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++) luaL_setfuncs(L, funcs[i], 0);
  build_functional(L);
  lua_setfield(L, m, "F");
  push_backends(L);
  lua_setfield(L, m, "backends");
  cnn_lua_cuda_push(L);
  lua_setfield(L, m, "cuda");
  cnn_lua_dist_push(L);
  lua_setfield(L, m, "dist");
  lua_newtable(L);
  luaL_setfuncs(L, cnn_lua_io_module, 0);
  luaL_setfuncs(L, cnn_lua_batcher_funcs, 0);
  luaL_setfuncs(L, cnn_lua_image_module, 0);
  luaL_setfuncs(L, cnn_lua_onnx_funcs, 0);
  luaL_setfuncs(L, cnn_lua_transform_module, 0);
  lua_setfield(L, m, "io");
  lua_pushstring(L, CNNSH_VERSION);
  lua_setfield(L, m, "version");
  cnn_lua_docs_register(L, m);
  cnn_lua_fused_push(L, m);
  lua_setfield(L, m, "fused");
  register_internal(L);
  return 1;
}

/* ---- the stdlib searcher ---------------------------------------------------------------------- */

static int load_embedded(lua_State *L, const cnn_embedded_module *mod) {
  lua_pushfstring(L, "@stdlib/%s", mod->path);
  const char *chunk = lua_tostring(L, -1);
  if (luaL_loadbuffer(L, mod->source, mod->size, chunk) != LUA_OK)
    return luaL_error(L, "error loading module '%s' from the embedded stdlib:\n\t%s", mod->name,
                      lua_tostring(L, -1));
  lua_pushstring(L, chunk + 1);
  return 2;
}

/* CNNSH_STDLIB/<name with dots as slashes>.lua, then .../init.lua */
static int load_from_dir(lua_State *L, const char *dir, const char *name) {
  const char *rel = luaL_gsub(L, name, ".", "/");
  const char *cands[2];
  cands[0] = lua_pushfstring(L, "%s/%s.lua", dir, rel);
  cands[1] = lua_pushfstring(L, "%s/%s/init.lua", dir, rel);
  for (int i = 0; i < 2; i++) {
    FILE *f = fopen(cands[i], "r");
    if (!f) continue;
    fclose(f);
    if (luaL_loadfile(L, cands[i]) != LUA_OK)
      return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, cands[i],
                        lua_tostring(L, -1));
    lua_pushstring(L, cands[i]);
    return 2;
  }
  lua_pushfstring(L, "no file '%s' (CNNSH_STDLIB)\n\tno file '%s' (CNNSH_STDLIB)", cands[0],
                  cands[1]);
  return 1;
}

static int stdlib_searcher(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  const char *dir = getenv("CNNSH_STDLIB");
  if (dir && *dir) return load_from_dir(L, dir, name);
  for (const cnn_embedded_module *mod = cnn_stdlib_modules; mod->name; mod++)
    if (strcmp(mod->name, name) == 0) return load_embedded(L, mod);
  lua_pushfstring(L, "no embedded stdlib module '%s'", name);
  return 1;
}

static void install_searcher(lua_State *L) {
  if (lua_getglobal(L, "package") != LUA_TTABLE || lua_getfield(L, -1, "searchers") != LUA_TTABLE) {
    lua_pop(L, 2);
    return;
  }
  lua_Integer n = luaL_len(L, -1);
  for (lua_Integer i = n; i >= 2; i--) { /* shift entries 2..n up by one */
    lua_rawgeti(L, -1, i);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushcfunction(L, stdlib_searcher);
  lua_rawseti(L, -2, 2);
  lua_pop(L, 2);
}

/* ---- lazy globals ---------------------------------------------------------------------------------- */

static const char *const lazy_names[] = {"nn",   "optim", "data",   "train", "viz",
                                         "help", "dist",  "models", NULL};

/* _G.__index(t, k): upvalue 1 = require */
static int lazy_index(lua_State *L) {
  if (lua_type(L, 2) != LUA_TSTRING) return 0;
  const char *k = lua_tostring(L, 2);
  for (int i = 0; lazy_names[i]; i++) {
    if (strcmp(k, lazy_names[i]) != 0) continue;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushvalue(L, 2);
    lua_call(L, 1, 1);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, -2);
    lua_rawset(L, 1);
    return 1;
  }
  return 0;
}

static void install_lazy_globals(lua_State *L) {
  if (lua_getglobal(L, "require") != LUA_TFUNCTION) {
    lua_pop(L, 1);
    return;
  }
  lua_pushglobaltable(L);
  if (!lua_getmetatable(L, -1)) {
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setmetatable(L, -3);
  }
  if (lua_getfield(L, -1, "__index") == LUA_TNIL) {
    lua_pushvalue(L, -4); /* require */
    lua_pushcclosure(L, lazy_index, 1);
    lua_setfield(L, -3, "__index");
  }
  lua_pop(L, 4);
}

/* cnn.gradcheck and cnn.timeit live in stdlib/gradcheck.lua and
 * stdlib/timeit.lua (Lua, for students to read); these forwarders load
 * them on first use. */
static const char lazy_cnn_functions[] =
    "local cnn = ...\n"
    "cnn.gradcheck = function(...) return require('gradcheck').gradcheck(...) end\n"
    "cnn.timeit = function(...) return require('timeit').timeit(...) end\n"
    "cnn.onnx = setmetatable({}, {__index = function(t, k)\n"
    "  for name, v in pairs(require('onnx')) do rawset(t, name, v) end\n"
    "  return rawget(t, k) end})\n"
    "cnn.quantize = function(...) return require('quantize').quantize(...) end\n"
    "cnn.doc[cnn.gradcheck] = 'cnn.gradcheck(fn, inputs... [, opts]) -> ok, report\\n"
    "Compares autograd gradients of fn with central finite differences; reports the worst "
    "element.'\n"
    "cnn.doc[cnn.timeit] = 'cnn.timeit(fn [, n | {n=, device=}]) -> {median=, min=, max=, mean=}\\n"
    "Runs fn n times and returns its timings in seconds (a cnn.timer: CUDA events when CUDA is "
    "available).'\n"
    "cnn.doc[cnn.quantize] = 'cnn.quantize(net, calibration [, opts]) -> an int8 copy of net\\n"
    "Post-training quantization through oneDNN int8; help(require(\"quantize\").quantize) for the "
    "options.'\n";

static void install_lazy_cnn_functions(lua_State *L) {
  if (luaL_loadbuffer(L, lazy_cnn_functions, sizeof lazy_cnn_functions - 1, "=cnn") != LUA_OK) {
    lua_pop(L, 1); /* cannot happen: the chunk is a constant */
    return;
  }
  lua_pushvalue(L, -2);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) lua_pop(L, 1);
}

void cnn_lua_open_all(lua_State *L) {
  luaL_requiref(L, "cnn", luaopen_cnn, 1);
  install_lazy_cnn_functions(L);
  lua_getfield(L, -1, "F");
  lua_setglobal(L, "F");
  lua_pop(L, 1);
  install_searcher(L);
  install_lazy_globals(L);
}
