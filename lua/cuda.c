/*
 * cuda.c -- the `cnn.cuda` table and cnn.version_info(): device management
 * for Lua over core's backend table (core/backend.h).
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
 *   cnn.timer([device | tensor]) -> a cnn.Timer (core/timer.c), see below
 *
 * Nothing here loads the CUDA module at start-up: the first call that needs
 * it does (core/backend.c), so a CPU-only session never maps cuDNN.  Every
 * function but is_available and version_info raises the reason when CUDA
 * cannot be used.
 *
 * Timers.  cnn.timer('cuda') records marks as CUDA events on the device's
 * stream (never waiting); cnn.timer() or cnn.timer('cpu') reads the
 * monotonic clock.  Methods of the one userdata type here, "cnn.Timer"
 * (a box holding a core cnn_timer*, NULL once closed; created closed
 * before the timer, so an error leaves nothing to free):
 *   t:mark()          -> n: the number of the new mark (1, 2, ...)
 *   t:elapsed(a [, b]) -> seconds from mark a to mark b (default: the last
 *                        mark); waits for mark b's event only
 *   t:times()         -> {0, s2, s3, ...}: every mark in seconds after
 *                        mark 1, after one wait (for the last mark)
 *   t:reset()         -- forget the marks (frees their events)
 *   t:count(), #t     -> marks recorded;  t:device() -> "cpu" | "cuda:0"
 *   t:close()         -- free now; also __gc and __close (local t <close>)
 *
 * Registration (lua/init.c, the lead's file): cnn_lua_cuda_push() pushes
 * the table for cnn.cuda; cnn_lua_cuda_funcs holds cnn.version_info and
 * cnn.timer (the Timer metatable is made on the first cnn.timer call).
 */
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>

#include "backend.h"
#include "bind.h"

void cnn_lua_cuda_push(lua_State *L);
extern const luaL_Reg cnn_lua_cuda_funcs[];

/* the backend, or a Lua error with the reason */
static const cnn_backend *need_cuda(lua_State *L, const char *fn) {
  const cnn_backend *be = cnn_cuda_backend(fn);
  if (!be) cnn_lua_error(L);
  return be;
}

static int opt_device(lua_State *L, int arg, const cnn_backend *be) {
  int d = (int)luaL_optinteger(L, arg, 0);
  int n = be->device_count();
  if (d < 0 || d >= n) return luaL_argerror(L, arg, lua_pushfstring(L, "device %d does not exist (%d device%s)",
                                                                      d, n, n == 1 ? "" : "s"));
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
  const char *why = cnn_cuda_unavailable_reason();
  lua_pushinteger(L, why ? 0 : cnn_backend_get(CNN_CUDA)->device_count());
  return 1;
}

static int set_device(lua_State *L) {
  const cnn_backend *be = need_cuda(L, "set_device");
  int d = opt_device(L, 1, be);
  if (be->set_device(d)) return cnn_lua_error(L);
  return 0;
}

static int synchronize(lua_State *L) {
  const cnn_backend *be = need_cuda(L, "synchronize");
  if (be->synchronize(opt_device(L, 1, be))) return cnn_lua_error(L);
  return 0;
}

static void set_int(lua_State *L, const char *k, int64_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, k);
}

static int memory(lua_State *L) {
  const cnn_backend *be = need_cuda(L, "memory");
  int d = opt_device(L, 1, be);
  int64_t cached = 0, reserved = 0, fr = 0, tot = 0;
  if (be->memory_info(d, &cached, &reserved, &fr, &tot)) return cnn_lua_error(L);
  cnn_memory_stats s = cnn_memory(CNN_CUDA);
  lua_createtable(L, 0, 8);
  set_int(L, "live", s.live);
  set_int(L, "peak", s.peak);
  set_int(L, "count", s.count);
  set_int(L, "cached", cached);
  set_int(L, "reserved", reserved);
  set_int(L, "free", fr);
  set_int(L, "total", tot);
  int64_t waste = 0;
  if (be->memory_waste && be->memory_waste(d, &waste) == 0) set_int(L, "waste", waste);
  return 1;
}

static int empty_cache(lua_State *L) {
  if (cnn_cuda_unavailable_reason()) return 0; /* nothing cached */
  cnn_backend_get(CNN_CUDA)->empty_cache();
  return 0;
}

static int benchmark(lua_State *L) {
  const cnn_backend *be = need_cuda(L, "benchmark");
  luaL_checktype(L, 1, LUA_TBOOLEAN);
  be->set_benchmark(lua_toboolean(L, 1));
  return 0;
}

/* cnn.version_info() -> "blas: ..." and "cuda: ..." lines (the CUDA lines
 * say why there is no CUDA module or device) */
static int version_info(lua_State *L) {
  const char *mod = cnn_cuda_module_info();
  const char *why = cnn_cuda_unavailable_reason();
  lua_pushfstring(L, "blas: %s\nthreads: %d\n", cnn_blas_info(), cnn_get_num_threads());
  if (mod && !why) lua_pushstring(L, mod);
  else if (mod) lua_pushfstring(L, "%s\ncuda: not available: %s", mod, why);
  else lua_pushfstring(L, "cuda: %s", why ? why : "not available");
  lua_concat(L, 2);
  return 1;
}

void cnn_lua_cuda_push(lua_State *L) {
  static const luaL_Reg f[] = {{"is_available", is_available}, {"device_count", device_count},
                               {"set_device", set_device},     {"synchronize", synchronize},
                               {"memory", memory},             {"empty_cache", empty_cache},
                               {"benchmark", benchmark},       {NULL, NULL}};
  luaL_newlib(L, f);
}

/* ---- cnn.Timer ------------------------------------------------------------------------- */

#define TIMER_MT "cnn.Timer"

static cnn_timer **timer_box(lua_State *L) { return luaL_checkudata(L, 1, TIMER_MT); }

static cnn_timer *check_timer(lua_State *L) {
  cnn_timer **box = timer_box(L);
  if (!*box) luaL_error(L, "timer: the timer is closed");
  return *box;
}

/* 1-based mark number at arg -> 0-based, checked against the marks recorded */
static int mark_arg(lua_State *L, cnn_timer *t, int arg) {
  lua_Integer m = luaL_checkinteger(L, arg);
  int n = cnn_timer_count(t);
  if (m < 1 || m > n) {
    if (n == 0) return luaL_error(L, "timer: mark %I does not exist (no marks recorded)", m);
    return luaL_error(L, "timer: mark %I does not exist (marks 1..%d)", m, n);
  }
  return (int)(m - 1);
}

static int timer_mark(lua_State *L) {
  int m = cnn_timer_mark(check_timer(L));
  if (m < 0) return cnn_lua_error(L);
  lua_pushinteger(L, (lua_Integer)m + 1);
  return 1;
}

static int timer_elapsed(lua_State *L) {
  cnn_timer *t = check_timer(L);
  int a = mark_arg(L, t, 2);
  int b = lua_isnoneornil(L, 3) ? cnn_timer_count(t) - 1 : mark_arg(L, t, 3);
  double s;
  if (cnn_timer_elapsed(t, a, b, &s)) return cnn_lua_error(L);
  lua_pushnumber(L, s);
  return 1;
}

static int timer_times(lua_State *L) {
  cnn_timer *t = check_timer(L);
  int n = cnn_timer_count(t);
  double *v = malloc(sizeof *v * (size_t)(n > 0 ? n : 1));
  if (!v) return luaL_error(L, "timer: out of memory");
  if (cnn_timer_seconds(t, v)) {
    free(v);
    return cnn_lua_error(L);
  }
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushnumber(L, v[i]);
    lua_rawseti(L, -2, i + 1);
  }
  free(v);
  return 1;
}

static int timer_reset(lua_State *L) {
  cnn_timer_reset(check_timer(L));
  return 0;
}

static int timer_count(lua_State *L) {
  lua_pushinteger(L, cnn_timer_count(check_timer(L)));
  return 1;
}

static int timer_device(lua_State *L) {
  char buf[32];
  lua_pushstring(L, cnn_device_str(cnn_timer_device(check_timer(L)), buf));
  return 1;
}

/* __gc, __close and close(): idempotent */
static int timer_close(lua_State *L) {
  cnn_timer **box = timer_box(L);
  cnn_timer_free(*box);
  *box = NULL;
  return 0;
}

static int timer_tostring(lua_State *L) {
  cnn_timer **box = timer_box(L);
  char buf[32];
  if (!*box) lua_pushliteral(L, "cnn.Timer (closed)");
  else
    lua_pushfstring(L, "cnn.Timer(%s, %d mark%s)", cnn_device_str(cnn_timer_device(*box), buf),
                    cnn_timer_count(*box), cnn_timer_count(*box) == 1 ? "" : "s");
  return 1;
}

static void timer_metatable(lua_State *L) {
  static const luaL_Reg methods[] = {{"mark", timer_mark},   {"elapsed", timer_elapsed},
                                     {"times", timer_times}, {"reset", timer_reset},
                                     {"count", timer_count}, {"device", timer_device},
                                     {"close", timer_close}, {NULL, NULL}};
  static const luaL_Reg meta[] = {{"__gc", timer_close},      {"__close", timer_close},
                                  {"__len", timer_count},     {"__tostring", timer_tostring},
                                  {NULL, NULL}};
  if (!luaL_newmetatable(L, TIMER_MT)) return;
  luaL_setfuncs(L, meta, 0);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
}

/* the device of cnn.timer's argument: none/nil -> cpu, a name, or a tensor's */
static cnn_device timer_device_arg(lua_State *L) {
  cnn_device dev = CNN_DEVICE_CPU;
  if (lua_isnoneornil(L, 1)) return dev;
  cnn_tensor *x = cnn_lua_to_tensor(L, 1);
  if (x) return cnn_tensor_device(x);
  const char *s = lua_tostring(L, 1);
  if (lua_type(L, 1) != LUA_TSTRING || cnn_lua_parse_device(s, &dev))
    luaL_error(L, "timer: unknown device '%s' (expected 'cpu', 'cuda', 'cuda:N' or a tensor)",
               luaL_tolstring(L, 1, NULL));
  return dev;
}

/* cnn.timer([device | tensor]) -> timer */
static int new_timer(lua_State *L) {
  cnn_device dev = timer_device_arg(L);
  cnn_timer **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  timer_metatable(L);
  lua_setmetatable(L, -2);
  if (!(*box = cnn_timer_new(dev))) return cnn_lua_error(L);
  return 1;
}

const luaL_Reg cnn_lua_cuda_funcs[] = {
    {"version_info", version_info}, {"timer", new_timer}, {NULL, NULL}};
