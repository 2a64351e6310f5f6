/*
 * cuda.c -- the `cnn.cuda` table and cnn.version_info(): device management
 * for Lua over core's public cnn_cuda_* functions (core/cnn.h).
 *
 *   cnn.cuda.is_available()   -> true | false, reason (never raises)
 *   cnn.cuda.device_count()   -> n (0 without CUDA)
 *   cnn.cuda.set_device(i)    -- 0-based, as in "cuda:0"
 *   cnn.cuda.synchronize([i]) -- wait for the device's queued work
 *   cnn.cuda.memory([i])      -> {live=, peak=, count=, cached=, reserved=, free=, total=,
 *                                 waste= (bytes lost to the allocator's rounding, where tracked)}
 *   cnn.cuda.empty_cache()    -- give cached blocks back to the driver
 *   cnn.cuda.benchmark(on)    -- cudnn.benchmark: time conv algorithms per shape
 *   cnn.version_info()        -> lines for `cnnsh --version` (CUDA module, cuDNN, cuBLAS)
 *
 * Nothing here loads the CUDA module at start-up: the first call that needs
 * it does (core/backend.c), so a CPU-only session never maps cuDNN.  Every
 * function but is_available and version_info raises the reason when CUDA
 * cannot be used.
 *
 * Registration (lua/init.c, the lead's file): cnn_lua_cuda_push() pushes
 * the table for cnn.cuda; cnn_lua_cuda_funcs holds cnn.version_info.
 * cnn.timer and its Timer type are in lua/timer.c.
 */
#include <lauxlib.h>
#include <lua.h>

#include "bind.h"

/* a Lua error "<fn>: cuda is not available: <why>" unless CUDA can be used */
static void need_cuda(lua_State *L, const char *fn) {
  if (cnn_cuda_check(fn)) cnn_lua_error(L);
}

static int opt_device(lua_State *L, int arg) {
  int d = (int)luaL_optinteger(L, arg, 0);
  int n = cnn_cuda_device_count();
  if (d < 0 || d >= n)
    return luaL_argerror(
        L, arg,
        lua_pushfstring(L, "device %d does not exist (%d device%s)", d, n, n == 1 ? "" : "s"));
  return d;
}

static int is_available(lua_State *L) {
  const char *why = cnn_cuda_unavailable_reason();
  lua_pushboolean(L, why == NULL);
  if (!why) return 1;
  lua_pushstring(L, why);
  return 2;
}

static int device_count(lua_State *L) {
  lua_pushinteger(L, cnn_cuda_device_count());
  return 1;
}

static int set_device(lua_State *L) {
  need_cuda(L, "set_device");
  if (cnn_cuda_set_device(opt_device(L, 1))) return cnn_lua_error(L);
  return 0;
}

static int synchronize(lua_State *L) {
  need_cuda(L, "synchronize");
  if (cnn_cuda_synchronize(opt_device(L, 1))) return cnn_lua_error(L);
  return 0;
}

static void set_int(lua_State *L, const char *k, int64_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, k);
}

static int memory(lua_State *L) {
  need_cuda(L, "memory");
  cnn_cuda_memory_info m;
  if (cnn_cuda_memory(opt_device(L, 1), &m)) return cnn_lua_error(L);
  cnn_memory_stats s = cnn_memory(CNN_CUDA);
  lua_createtable(L, 0, 8);
  set_int(L, "live", s.live);
  set_int(L, "peak", s.peak);
  set_int(L, "count", s.count);
  set_int(L, "cached", m.cached);
  set_int(L, "reserved", m.reserved);
  set_int(L, "free", m.free);
  set_int(L, "total", m.total);
  if (m.has_waste) set_int(L, "waste", m.waste);
  return 1;
}

static int empty_cache(lua_State *L) {
  (void)L;
  cnn_cuda_empty_cache(); /* nothing cached without CUDA */
  return 0;
}

static int benchmark(lua_State *L) {
  need_cuda(L, "benchmark");
  luaL_checktype(L, 1, LUA_TBOOLEAN);
  if (cnn_cuda_set_benchmark(lua_toboolean(L, 1))) return cnn_lua_error(L);
  return 0;
}

/* cnn.version_info() -> "blas: ...", "threads: ...", "bfloat16 autocast on
 * cpu: ..." and "cuda: ..." lines (the CUDA lines say why there is no CUDA
 * module or device) */
static int version_info(lua_State *L) {
  const char *mod = cnn_cuda_module_info();
  const char *why = cnn_cuda_unavailable_reason();
  const char *detail = NULL, *path = cnn_autocast_cpu_path(&detail);
  lua_pushfstring(L, "blas: %s\nthreads: %d\nbfloat16 autocast on cpu: %s (%s)\n", cnn_blas_info(),
                  cnn_get_num_threads(), path, detail);
  if (mod && !why)
    lua_pushstring(L, mod);
  else if (mod)
    lua_pushfstring(L, "%s\ncuda: not available: %s", mod, why);
  else
    lua_pushfstring(L, "cuda: %s", why ? why : "not available");
  lua_concat(L, 2);
  return 1;
}

void cnn_lua_cuda_push(lua_State *L) {
  static const luaL_Reg f[] = {{"is_available", is_available},
                               {"device_count", device_count},
                               {"set_device", set_device},
                               {"synchronize", synchronize},
                               {"memory", memory},
                               {"empty_cache", empty_cache},
                               {"benchmark", benchmark},
                               {NULL, NULL}};
  luaL_newlib(L, f);
}

const luaL_Reg cnn_lua_cuda_funcs[] = {{"version_info", version_info}, {NULL, NULL}};
