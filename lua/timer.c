/*
 * timer.c -- the cnn.Timer type: cnn.timer([device | tensor]) over core's
 * timers (core/timer.c).
 *
 * cnn.timer('cuda') records marks as CUDA events on the device's stream
 * (never waiting); cnn.timer() or cnn.timer('cpu') reads the monotonic
 * clock.  The userdata is a box holding a core cnn_timer*, NULL once
 * closed; it is created closed before the timer, so an error leaves
 * nothing to free.  Methods:
 *   t:mark()          -> n: the number of the new mark (1, 2, ...)
 *   t:elapsed(a [, b]) -> seconds from mark a to mark b (default: the last
 *                        mark); waits for mark b's event only
 *   t:times()         -> {0, s2, s3, ...}: every mark in seconds after
 *                        mark 1, after one wait (for the last mark)
 *   t:reset()         -- forget the marks (frees their events)
 *   t:count(), #t     -> marks recorded;  t:device() -> "cpu" | "cuda:0"
 *   t:close()         -- free now; also __gc and __close (local t <close>)
 * Registration: cnn_lua_timer_funcs holds cnn.timer (the metatable is made
 * on the first call).
 */
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>

#include "bind.h"

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
  if (!*box)
    lua_pushliteral(L, "cnn.Timer (closed)");
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
  static const luaL_Reg meta[] = {{"__gc", timer_close},
                                  {"__close", timer_close},
                                  {"__len", timer_count},
                                  {"__tostring", timer_tostring},
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

const luaL_Reg cnn_lua_timer_funcs[] = {{"timer", new_timer}, {NULL, NULL}};
