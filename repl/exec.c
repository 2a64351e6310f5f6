/*
 * exec.c -- running code for cnnsh: compiling what was typed, protected
 * calls with a short traceback, and SIGINT while code runs.
 *
 * Design (as lua.c): the SIGINT handler touches nothing but async-safe
 * state.  While Lua code runs (`running`), it sets a Lua hook that raises
 * "interrupted!" at the next instruction (lua_sethook is signal-safe) and
 * raises core's interrupt flag so long C kernels stop too.  While no code
 * runs (the prompt), it only sets a flag that prompt.c reads after
 * select() returns EINTR.  In script mode a second Ctrl-C before the first
 * took effect kills the process (a C call that never polls); at the prompt
 * it takes a third.
 *
 * Invariants: after cnn_repl_docall() returns, our hook is removed and
 * core's interrupt flag is clear; `interrupted` stays set for good (the
 * exit status of a script run is 130).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "cnn.h"
#include "cnn_lua.h"
#include "repl.h"

#define TRACEBACK_LINES 8 /* frames kept in a "short traceback" */

static lua_State *volatile signal_L;            /* state the hook goes into */
static volatile sig_atomic_t running;            /* Lua code is executing */
static volatile sig_atomic_t pending;            /* Ctrl-Cs during this call */
static volatile sig_atomic_t interrupted;        /* sticky: any interrupt */
static volatile sig_atomic_t prompt_sigint;      /* Ctrl-C at the prompt */
static volatile sig_atomic_t script_mode;

static void stop_hook(lua_State *L, lua_Debug *ar)
{
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

static void on_sigint(int sig)
{
  if (!running) {
    prompt_sigint = 1;
    return;
  }
  interrupted = 1;
  pending++;
  cnn_request_interrupt();
  if (pending >= (script_mode ? 2 : 3)) {
    static const char msg[] = "\ncnnsh: killed by repeated Ctrl-C\n";
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) { /* nothing to do */ }
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  if (signal_L)
    lua_sethook(signal_L, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

void cnn_repl_signals_init(bool script)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0; /* no SA_RESTART: select() at the prompt sees EINTR */
  sigaction(SIGINT, &sa, NULL);
  script_mode = script;
}

void cnn_repl_signals_set_state(lua_State *L) { signal_L = L; }
bool cnn_repl_interrupted(void) { return interrupted != 0; }

bool cnn_repl_take_prompt_sigint(void)
{
  if (!prompt_sigint)
    return false;
  prompt_sigint = 0;
  return true;
}

/* Keep the message and the first TRACEBACK_LINES frames; drop the "[C]: in ?"
 * frame of the host call. */
static void push_short_traceback(lua_State *L, const char *msg)
{
  luaL_traceback(L, L, msg, 1);
  const char *tb = lua_tostring(L, -1);
  const char *frames = strstr(tb, "\nstack traceback:");
  if (!frames)
    return;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addlstring(&b, tb, (size_t)(frames - tb));
  const char *p = frames + 1;
  const char *eol = strchr(p, '\n');
  int kept = 0, skipped = 0;
  while (eol) {
    const char *line = eol + 1;
    const char *next = strchr(line, '\n');
    size_t len = next ? (size_t)(next - line) : strlen(line);
    bool host = len >= 9 && memcmp(line + len - 9, "[C]: in ?", 9) == 0;
    if (!host && kept < TRACEBACK_LINES) {
      if (kept++ == 0)
        luaL_addstring(&b, "\nstack traceback:");
      luaL_addchar(&b, '\n');
      luaL_addlstring(&b, line, len);
    } else if (!host) {
      skipped++;
    }
    eol = next;
  }
  if (skipped)
    lua_pushfstring(L, "\n\t(... %d more)", skipped), luaL_addvalue(&b);
  luaL_pushresult(&b);
  lua_remove(L, -2); /* the full traceback */
}

static int msghandler(lua_State *L)
{
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      return 1; /* an error object that prints itself */
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  push_short_traceback(L, msg);
  return 1;
}

int cnn_repl_docall(lua_State *L, int narg, int nres)
{
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  signal_L = L;
  pending = 0;
  running = 1;
  int status = lua_pcall(L, narg, nres, base);
  running = 0;
  if (lua_gethook(L) == stop_hook)
    lua_sethook(L, NULL, 0, 0); /* armed, but the code ended first */
  cnn_clear_interrupt();
  lua_remove(L, base);
  return status;
}

int cnn_repl_report(lua_State *L, int status, bool color)
{
  if (status == LUA_OK)
    return status;
  const char *msg = lua_tostring(L, -1);
  if (msg == NULL)
    msg = "(error object is not a string)";
  fflush(stdout);
  if (color)
    fprintf(stderr, "\033[31m%s\033[0m\n", msg);
  else
    fprintf(stderr, "%s\n", msg);
  fflush(stderr);
  lua_pop(L, 1);
  return status;
}

/* A syntax error at the end of the text ("... near <eof>"). */
static bool at_eof(lua_State *L, int status)
{
  if (status != LUA_ERRSYNTAX)
    return false;
  size_t len;
  const char *msg = lua_tolstring(L, -1, &len);
  static const char mark[] = "<eof>";
  return msg && len >= sizeof mark - 1 &&
         strcmp(msg + len - (sizeof mark - 1), mark) == 0;
}

/* Load text[0, n) as a check only: LUA_OK (nothing pushed) or the status
 * with the message pushed. */
static int check_syntax(lua_State *L, const char *text, size_t n, const char *name)
{
  int status = luaL_loadbuffer(L, text, n, name);
  if (status == LUA_OK)
    lua_pop(L, 1);
  return status;
}

/* head .. code[0, len) pushed as one string */
static const char *push_joined(lua_State *L, const char *head, const char *code, size_t len,
                               size_t *n)
{
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, head);
  luaL_addlstring(&b, code, len);
  luaL_pushresult(&b);
  return lua_tolstring(L, -1, n);
}

/* "a = f(x); a.shape": the text before the last top-level ";" compiles
 * alone, and with "return" after the ";" the whole does. */
static bool split_compiles(lua_State *L, const char *code, size_t len, const cnn_chunk *c,
                           const char *name)
{
  if (c->split < 0)
    return false;
  size_t at = (size_t)c->split + 1, n;
  if (check_syntax(L, code, at, name) != LUA_OK) {
    lua_pop(L, 1);
    return false;
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addlstring(&b, code, at);
  luaL_addstring(&b, " return ");
  luaL_addlstring(&b, code + at, len - at);
  luaL_pushresult(&b);
  const char *text = lua_tolstring(L, -1, &n);
  int status = check_syntax(L, text, n, name);
  lua_pop(L, status == LUA_OK ? 1 : 2);
  return status == LUA_OK;
}

static int compile_scanned(lua_State *L, const char *code, size_t len, const char *name,
                           const cnn_chunk *c)
{
  size_t n;
  const char *ret = push_joined(L, "return ", code, len, &n);
  int status = check_syntax(L, ret, n, name);
  lua_remove(L, status == LUA_OK ? -1 : -2);
  if (status == LUA_OK)
    return cnn_session_load(L, code, len, name, c, NULL, "return ");
  bool open_expr = at_eof(L, status); /* "1 +", "f(a," */
  lua_pop(L, 1);
  if (split_compiles(L, code, len, c, name)) {
    cnn_edit ret = {(size_t)c->split + 1, 0, " return "};
    return cnn_session_load(L, code, len, name, c, &ret, "");
  }
  status = check_syntax(L, code, len, name);
  if (status == LUA_OK)
    return cnn_session_load(L, code, len, name, c, NULL, "");
  if ((open_expr || at_eof(L, status)) && c->can_continue) {
    lua_pop(L, 1);
    return CNN_EVAL_INCOMPLETE;
  }
  return status;
}

int cnn_repl_compile(lua_State *L, const char *code, size_t len, const char *name)
{
  cnn_chunk c;
  int status;
  if (cnn_chunk_scan(code, len, &c) != 0) {
    lua_pushliteral(L, "not enough memory");
    status = LUA_ERRMEM;
  } else {
    status = compile_scanned(L, code, len, name, &c);
  }
  cnn_chunk_free(&c);
  return status;
}

static int print_results(lua_State *L)
{
  const cnn_print_opts *o = lua_touserdata(L, lua_upvalueindex(1));
  if (lua_gettop(L) > 0)
    cnn_repl_print_values(L, 1, o);
  return 0;
}

int cnn_repl_eval(lua_State *L, const char *code, bool color, bool color_err)
{
  int top = lua_gettop(L);
  int status = cnn_repl_compile(L, code, strlen(code), "=stdin");
  if (status == CNN_EVAL_INCOMPLETE)
    return status;
  if (status == LUA_OK) {
    lua_pushvalue(L, -1);
    status = cnn_repl_docall(L, 0, LUA_MULTRET);
    if (status == LUA_OK)
      cnn_session_commit(L, top + 1);
    lua_remove(L, top + 1);
  }
  int nres = lua_gettop(L) - top;
  if (status == LUA_OK && nres > 0) {
    cnn_print_opts o;
    cnn_print_opts_init(&o, color);
    lua_pushlightuserdata(L, &o);
    lua_pushcclosure(L, print_results, 1);
    lua_insert(L, top + 1);
    status = cnn_repl_docall(L, nres, 0);
  }
  if (status != LUA_OK) {
    cnn_repl_report(L, status, color_err);
    lua_settop(L, top);
    return CNN_EVAL_ERROR;
  }
  lua_settop(L, top);
  return CNN_EVAL_OK;
}

/* ---- fresh states ----------------------------------------------------------- */

static int open_all(lua_State *L)
{
  luaL_openlibs(L);
  cnn_lua_open_all(L);
  if (lua_toboolean(L, 1)) { /* --ascii */
    lua_getglobal(L, "cnn");
    if (lua_istable(L, -1)) {
      lua_pushboolean(L, 1);
      lua_setfield(L, -2, "ascii");
    }
  }
  return 0;
}

lua_State *cnn_repl_newstate(bool ascii)
{
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "cnnsh: cannot create a Lua state: not enough memory\n");
    return NULL;
  }
  lua_pushcfunction(L, open_all);
  lua_pushboolean(L, ascii);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    fprintf(stderr, "cnnsh: cannot open the cnn module: %s\n", lua_tostring(L, -1));
    lua_close(L);
    return NULL;
  }
  signal_L = L;
  return L;
}
