/*
 * hints.c -- hints for habits brought from PyTorch and Python, added to
 * the error (or printed) where a bare Lua message would leave a newcomer
 * guessing:
 *   x.view(-1), m.train()      a method called with "." (self is missing)
 *   torch.randn(2)             cnnsh's names are cnn.*, nn.*, F.*, optim.*
 *   nn.Conv2d(1, 32, 3, padding=1)   keyword arguments: shown as a table
 *   exit, quit, exit()         how to leave
 * Other habits are answered where they happen: t[0] (tensor_index.c: indices
 * are 1-based), x > 0 and x == y on tensors (tensor_math.c), extra
 * positional options (stdlib/check.lua).  Hints only add text: what is an
 * error stays an error, in scripts as at the prompt.
 */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "repl.h"

/* The name of a method called with "." whose missing self caused msg, or
 * NULL.  Looks at the function that raised (level 1) and, for error()
 * calls, at its caller. */
static const char *dot_called_method(lua_State *L, const char *msg) {
  lua_Debug ar;
  for (int level = 1; level <= 2 && lua_getstack(L, level, &ar); level++) {
    lua_getinfo(L, "n", &ar);
    if (ar.name == NULL || ar.namewhat == NULL || strcmp(ar.namewhat, "method") == 0) continue;
    const char *arg1 = strstr(msg, "bad argument #1 to '");
    bool self_missing = strstr(msg, "(local 'self')") != NULL ||
                        (arg1 && strncmp(arg1 + 20, ar.name, strlen(ar.name)) == 0);
    if (self_missing) return ar.name;
  }
  return NULL;
}

const char *cnn_repl_push_hinted(lua_State *L, const char *msg) {
  const char *method = dot_called_method(L, msg);
  if (method)
    return lua_pushfstring(L,
                           "%s\n  hint: call methods with ':' -- x:%s(...) passes x as self, "
                           "x.%s(...) does not",
                           msg, method, method);
  if (strstr(msg, "(global 'torch')"))
    return lua_pushfstring(L,
                           "%s\n  hint: there is no torch here: tensors are cnn.* (cnn.randn), "
                           "layers nn.*, functions F.*, optimizers optim.* (help() lists them)",
                           msg);
  return lua_pushstring(L, msg);
}

const char *cnn_repl_push_syntax_hint(lua_State *L, const char *code) {
  const char *msg = lua_tostring(L, -1);
  char *call = cnn_chunk_keyword_call(code, strlen(code));
  if (call == NULL || msg == NULL) {
    free(call);
    return msg;
  }
  msg = lua_pushfstring(L, "%s\n  hint: Lua has no keyword arguments; pass options in a table: %s",
                        msg, call);
  free(call);
  lua_remove(L, -2);
  return msg;
}

const char *cnn_repl_typed_hint(lua_State *L, const char *line) {
  static const char *const leave[] = {"exit", "quit", "exit()", "quit()", NULL};
  line += strspn(line, " \t");
  size_t n = strlen(line);
  while (n > 0 && strchr(" \t;", line[n - 1])) n--;
  for (int i = 0; leave[i]; i++) {
    if (strlen(leave[i]) != n || strncmp(line, leave[i], n) != 0) continue;
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    lua_pushlstring(L, leave[i], 4); /* "exit" or "quit" */
    bool defined = lua_rawget(L, -2) != LUA_TNIL;
    lua_pop(L, 2);
    return defined ? NULL : "to leave cnnsh, type :quit or press Ctrl-D";
  }
  return NULL;
}
