/*
 * session.c -- session variables: a top-level `local` typed at the prompt
 * lives on for the next lines (`local q = 5`, then `q` prints 5).
 *
 * Design.  chunk.c rewrote the chunk's top-level `local` statements into
 * assignments.  Here the chunk is wrapped as
 *     local a, b; local c, d = c, d; local V = function(...) return ... end;
 *     return function(...) <chunk>
 *     end
 * where a, b are session variables the chunk names and c, d the new names
 * its `local`s declare (each starts as the global of that name, so `local
 * print = print` works as in Lua; `local x` alone was rewritten to
 * `x = nil`).  Running the wrapper gives the chunk's function, whose
 * upvalues are exactly those locals and _ENV.  Each upvalue that is already
 * a session variable is joined (lua_upvaluejoin) to the cell that holds it,
 * so every line and every closure made at the prompt share one cell per
 * name, as Lua locals would.  After the chunk ran without error, its new
 * names become session variables: the registry table SESSION maps name ->
 * {function, upvalue index} of a function holding the cell.  A line that
 * fails declares nothing.  Values are returned as "return V(<expr>)", not
 * "return <expr>": a tail call would drop the frame of the typed line from
 * tracebacks (the prompt names that frame in every error).
 *
 * Globals are untouched: scripts, :load and dofile never see session
 * variables (Lua's rules), and reading a global at the prompt costs what it
 * costs in Lua.  Line numbers of errors are those of the typed text (the
 * wrapper adds nothing before line 1's text but on the same line).
 */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "repl.h"

#define SESSION            "cnnsh.session"
#define MAX_SESSION_LOCALS 180 /* Lua allows 200 locals in a function */

/* Push SESSION (created on first use). */
static void push_session(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, SESSION) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, SESSION);
}

/* Push the {function, index} entry of `name`, or nothing and false. */
static bool push_entry(lua_State *L, const char *name, size_t len) {
  push_session(L);
  lua_pushlstring(L, name, len);
  if (lua_rawget(L, -2) == LUA_TTABLE) {
    lua_remove(L, -2);
    return true;
  }
  lua_pop(L, 2);
  return false;
}

bool cnn_session_push(lua_State *L, const char *name, size_t len) {
  if (!push_entry(L, name, len)) return false;
  lua_rawgeti(L, -1, 1);
  lua_rawgeti(L, -2, 2);
  int n = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  const char *got = lua_getupvalue(L, -1, n);
  lua_remove(L, -2), lua_remove(L, -2);
  if (got == NULL) return false;
  return true;
}

static bool in_list(const cnn_strlist *l, const char *s) {
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->v[i], s) == 0) return true;
  return false;
}

/* "local a, b; local c, d = c, d; return function(...) " into b. */
static void add_header(lua_State *L, luaL_Buffer *b, const cnn_chunk *c) {
  cnn_strlist old = {0}, fresh = {0};
  for (int i = 0; i < c->names.n; i++) {
    const char *n = c->names.v[i];
    if (push_entry(L, n, strlen(n))) {
      lua_pop(L, 1);
      cnn_strlist_add(&old, n, strlen(n));
    } else if (in_list(&c->locals, n)) {
      cnn_strlist_add(&fresh, n, strlen(n));
    }
  }
  for (int i = 0; i < old.n && i < MAX_SESSION_LOCALS; i++)
    luaL_addstring(b, i ? ", " : "local "), luaL_addstring(b, old.v[i]);
  if (old.n) luaL_addstring(b, "; ");
  for (int k = 0; k < 2 && fresh.n; k++) {
    for (int i = 0; i < fresh.n && i < MAX_SESSION_LOCALS; i++)
      luaL_addstring(b, i ? ", " : k ? " = " : "local "), luaL_addstring(b, fresh.v[i]);
  }
  if (fresh.n) luaL_addstring(b, "; ");
  luaL_addstring(b, "local " CNN_SESSION_VALUES " = function(...) return ... end; ");
  luaL_addstring(b, "return function(...) ");
  cnn_strlist_clear(&old);
  cnn_strlist_clear(&fresh);
}

/* Not _ENV, not the wrapper's own helper. */
static bool session_name(const char *name) {
  return strcmp(name, "_ENV") != 0 && strcmp(name, CNN_SESSION_VALUES) != 0;
}

/* Join the upvalues of the function on top that are session variables. */
static void join_cells(lua_State *L) {
  int f = lua_gettop(L);
  const char *name;
  for (int i = 1; (name = lua_getupvalue(L, f, i)) != NULL; i++) {
    lua_pop(L, 1);
    if (!session_name(name) || !push_entry(L, name, strlen(name))) continue;
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);
    lua_upvaluejoin(L, f, i, -2, (int)lua_tointeger(L, -1));
    lua_pop(L, 3);
  }
}

int cnn_session_load(lua_State *L, const char *code, size_t len, const char *chunkname,
                     const cnn_chunk *c, const cnn_edit *extra, const char *head,
                     const char *tail) {
  size_t n;
  char *body = cnn_chunk_rewrite(code, len, c, extra, &n);
  if (body == NULL) {
    lua_pushliteral(L, "not enough memory");
    return LUA_ERRMEM;
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  add_header(L, &b, c);
  luaL_addstring(&b, head);
  luaL_addlstring(&b, body, n);
  luaL_addstring(&b, tail);
  luaL_addstring(&b, "\nend");
  luaL_pushresult(&b);
  free(body);
  size_t wlen;
  const char *wrapped = lua_tolstring(L, -1, &wlen);
  int status = luaL_loadbuffer(L, wrapped, wlen, chunkname);
  lua_remove(L, -2);
  if (status == LUA_OK)
    status = lua_pcall(L, 0, 1, 0); /* the wrapper: reads the new names' globals */
  if (status == LUA_OK) join_cells(L);
  return status;
}

void cnn_session_commit(lua_State *L, int fidx) {
  fidx = lua_absindex(L, fidx);
  if (lua_type(L, fidx) != LUA_TFUNCTION) return;
  push_session(L);
  const char *name;
  for (int i = 1; (name = lua_getupvalue(L, fidx, i)) != NULL; i++) {
    lua_pop(L, 1);
    lua_pushstring(L, name);
    if (!session_name(name) || lua_rawget(L, -2) != LUA_TNIL) {
      lua_pop(L, 1);
      continue;
    }
    lua_pop(L, 1);
    lua_createtable(L, 2, 0);
    lua_pushvalue(L, fidx);
    lua_rawseti(L, -2, 1);
    lua_pushinteger(L, i);
    lua_rawseti(L, -2, 2);
    lua_setfield(L, -2, name);
  }
  lua_pop(L, 1);
}
