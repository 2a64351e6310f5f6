/*
 * autocast.c -- mixed precision from Lua: cnn.autocast, cnn.is_autocast_enabled,
 * cnn.autocast_info.
 *
 *   cnn.autocast('bfloat16', fn, ...)  -> fn's results, autocast on inside
 *   local ac <close> = cnn.autocast('float16')   -- on until ac goes out of scope
 *   cnn.autocast(false, fn)            -> fn with autocast off (inside autocast)
 *   cnn.autocast_info()                -> 'onednn' | 'emulated', a sentence:
 *                                         how bfloat16 runs on this CPU
 *
 * The rule (which ops, which devices) is core's: core/cnn.h, core/autocast.c.
 * The function form runs fn under pcall and restores the previous mode
 * before returning or re-raising, as cnn.no_grad does.  The guard form
 * returns a "cnn.AutocastGuard" whose __close (and __gc, as a backstop)
 * restores the mode that was current when it was made.
 */
#include "bind.h"

#define GUARD_MT "cnn.AutocastGuard"

typedef struct {
  cnn_dtype previous;
  bool active; /* not yet restored */
} autocast_guard;

/* arg: 'float16'|'half'|'bfloat16'|'bf16', or false/'float32' for off */
static cnn_dtype check_mode(lua_State *L, int arg) {
  if (lua_isboolean(L, arg) && !lua_toboolean(L, arg)) return CNN_FLOAT32;
  return cnn_lua_check_dtype(L, arg);
}

static void set_mode(lua_State *L, cnn_dtype dt, cnn_dtype *previous) {
  if (cnn_set_autocast(dt, previous)) luaL_error(L, "%s", cnn_error());
}

static int guard_close(lua_State *L) {
  autocast_guard *g = luaL_checkudata(L, 1, GUARD_MT);
  if (g->active) cnn_set_autocast(g->previous, NULL), g->active = false;
  return 0;
}

static int push_guard(lua_State *L, cnn_dtype previous) {
  autocast_guard *g = lua_newuserdatauv(L, sizeof *g, 0);
  g->previous = previous;
  g->active = true;
  if (luaL_newmetatable(L, GUARD_MT)) {
    lua_pushcfunction(L, guard_close);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, guard_close);
    lua_setfield(L, -2, "__gc");
    lua_pushliteral(L, "cnn.AutocastGuard");
    lua_setfield(L, -2, "__name");
  }
  lua_setmetatable(L, -2);
  return 1;
}

static int f_autocast(lua_State *L) {
  cnn_dtype dt = check_mode(L, 1), previous;
  if (lua_isnoneornil(L, 2)) {
    set_mode(L, dt, &previous);
    return push_guard(L, previous);
  }
  luaL_checktype(L, 2, LUA_TFUNCTION);
  set_mode(L, dt, &previous);
  lua_remove(L, 1);
  int rc = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  cnn_set_autocast(previous, NULL);
  if (rc != LUA_OK) return lua_error(L);
  return lua_gettop(L);
}

/* -> enabled, dtype name (nil when off) */
static int f_is_autocast_enabled(lua_State *L) {
  cnn_dtype dt = cnn_autocast_dtype();
  lua_pushboolean(L, dt != CNN_FLOAT32);
  if (dt == CNN_FLOAT32)
    lua_pushnil(L);
  else
    lua_pushstring(L, cnn_dtype_name(dt));
  return 2;
}

/* -> 'onednn' | 'emulated', detail (core/cpu/bf16_math.c decides once) */
static int f_autocast_info(lua_State *L) {
  if (!lua_isnone(L, 1)) return luaL_error(L, "autocast_info: takes no arguments");
  const char *detail = NULL;
  lua_pushstring(L, cnn_autocast_cpu_path(&detail));
  lua_pushstring(L, detail ? detail : "");
  return 2;
}

const luaL_Reg cnn_lua_autocast_funcs[] = {{"autocast", f_autocast},
                                           {"is_autocast_enabled", f_is_autocast_enabled},
                                           {"autocast_info", f_autocast_info},
                                           {NULL, NULL}};
