/*
 * shape.c -- "cnn.Shape": the table that x.shape and x:size() return.
 *
 * A shape is a plain sequence of integers ({2, 3}: x.shape[1], #x.shape,
 * ipairs and table.concat work, and every function taking sizes accepts
 * it) with a metatable that makes it readable: print(x.shape) shows
 * "{2, 3}", "shape " .. x.shape concatenates that text, and == compares
 * it element by element with another shape or a plain table of numbers
 * (x.shape == {2, 3}).  Lua calls __eq only when both operands are tables,
 * so a shape never equals a number or a string.
 */
#include "bind.h"

#define CNN_SHAPE_MT "cnn.Shape"

void cnn_lua_push_shape(lua_State *L, const int64_t *shape, int ndim) {
  lua_createtable(L, ndim, 0);
  for (int i = 0; i < ndim; i++) {
    lua_pushinteger(L, shape[i]);
    lua_rawseti(L, -2, i + 1);
  }
  luaL_setmetatable(L, CNN_SHAPE_MT);
}

/* "{2, 3}" for the table at idx (raw entries 1..#t, as %s of tostring) */
static const char *push_text(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addchar(&b, '{');
  lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
  for (lua_Integer i = 1; i <= n; i++) {
    if (i > 1) luaL_addstring(&b, ", ");
    lua_rawgeti(L, idx, i);
    luaL_tolstring(L, -1, NULL);
    lua_remove(L, -2);
    luaL_addvalue(&b);
  }
  luaL_addchar(&b, '}');
  luaL_pushresult(&b);
  return lua_tostring(L, -1);
}

static int shape_tostring(lua_State *L) {
  push_text(L, 1);
  return 1;
}

static bool is_shape(lua_State *L, int idx) {
  if (!lua_istable(L, idx) || !lua_getmetatable(L, idx)) return false;
  luaL_getmetatable(L, CNN_SHAPE_MT);
  bool same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return same;
}

/* either operand may be the shape: "shape " .. x.shape, x.shape .. "!" */
static int shape_concat(lua_State *L) {
  for (int i = 1; i <= 2; i++) {
    if (is_shape(L, i)) {
      push_text(L, i);
      lua_replace(L, i);
    } else if (!lua_isstring(L, i)) {
      return luaL_error(L, "attempt to concatenate a shape with a %s value", luaL_typename(L, i));
    }
  }
  lua_concat(L, 2);
  return 1;
}

static int shape_eq(lua_State *L) {
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
  bool same = n == (lua_Integer)lua_rawlen(L, 2);
  for (lua_Integer i = 1; same && i <= n; i++) {
    lua_rawgeti(L, 1, i);
    lua_rawgeti(L, 2, i);
    same = lua_rawequal(L, -1, -2) || lua_compare(L, -1, -2, LUA_OPEQ);
    lua_pop(L, 2);
  }
  lua_pushboolean(L, same);
  return 1;
}

void cnn_lua_shape_type(lua_State *L) {
  static const luaL_Reg meta[] = {
      {"__tostring", shape_tostring}, {"__concat", shape_concat}, {"__eq", shape_eq}, {NULL, NULL}};
  luaL_newmetatable(L, CNN_SHAPE_MT);
  luaL_setfuncs(L, meta, 0);
  lua_pop(L, 1);
}
