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
 * The handler's work happens on the main thread.  The terminal's SIGINT
 * goes to any thread that does not block it, and OpenMP's workers (made
 * while Lua code ran, SIGINT unblocked) may take it; lua_sethook from a
 * worker would race with the main thread's Lua (it walks the state's call
 * frames).  A worker's handler only passes the signal on to the main
 * thread (pthread_kill, async-signal-safe), where it is handled -- or
 * waits, blocked, until the prompt's pselect() lets it in.
 *
 * Invariants: after cnn_repl_docall() returns, our hook is removed and
 * core's interrupt flag is clear; `interrupted` stays set for good (the
 * exit status of a script run is 130).
 */
#include <pthread.h>
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

static lua_State *volatile signal_L;        /* state the hook goes into */
static volatile sig_atomic_t running;       /* Lua code is executing */
static volatile sig_atomic_t pending;       /* Ctrl-Cs during this call */
static volatile sig_atomic_t interrupted;   /* sticky: any interrupt */
static volatile sig_atomic_t prompt_sigint; /* Ctrl-C at the prompt */
static volatile sig_atomic_t script_mode;
static pthread_t main_thread; /* the one that handles SIGINT (set at init) */

static void stop_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

static void on_sigint(int sig) {
  if (!pthread_equal(pthread_self(), main_thread)) { /* a worker took it */
    pthread_kill(main_thread, sig);
    return;
  }
  if (!running) {
    prompt_sigint = 1;
    return;
  }
  interrupted = 1;
  pending++;
  cnn_request_interrupt();
  if (pending >= (script_mode ? 2 : 3)) {
    static const char msg[] = "\ncnnsh: killed by repeated Ctrl-C\n";
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) { /* nothing to do */
    }
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  if (signal_L) lua_sethook(signal_L, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

void cnn_repl_signals_init(bool script) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0; /* no SA_RESTART: select() at the prompt sees EINTR */
  main_thread = pthread_self();
  sigaction(SIGINT, &sa, NULL);
  script_mode = script;
}

void cnn_repl_signals_set_state(lua_State *L) { signal_L = L; }
bool cnn_repl_interrupted(void) { return interrupted != 0; }

bool cnn_repl_take_prompt_sigint(void) {
  if (!prompt_sigint) return false;
  prompt_sigint = 0;
  return true;
}

/* Keep the message and the first TRACEBACK_LINES frames; drop the "[C]: in ?"
 * frame of the host call. */
static void push_short_traceback(lua_State *L, const char *msg) {
  luaL_traceback(L, L, msg, 1);
  const char *tb = lua_tostring(L, -1);
  const char *frames = strstr(tb, "\nstack traceback:");
  if (!frames) return;
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
      if (kept++ == 0) luaL_addstring(&b, "\nstack traceback:");
      luaL_addchar(&b, '\n');
      luaL_addlstring(&b, line, len);
    } else if (!host) {
      skipped++;
    }
    eol = next;
  }
  if (skipped) lua_pushfstring(L, "\n\t(... %d more)", skipped), luaL_addvalue(&b);
  luaL_pushresult(&b);
  lua_remove(L, -2); /* the full traceback */
}

/* ---- where an error happened ------------------------------------------------------ */

static volatile sig_atomic_t short_errors; /* the prompt: message + the user's frame */

void cnn_repl_short_errors(bool on) { short_errors = on; }

/* Is `source` (a chunk name) part of cnnsh's own Lua: the embedded stdlib
 * ("@stdlib/..."), the stdlib under CNNSH_STDLIB, or the "=cnn" glue? */
static bool library_source(const char *source) {
  if (strncmp(source, "@stdlib/", 8) == 0 || strcmp(source, "=cnn") == 0) return true;
  const char *dir = getenv("CNNSH_STDLIB");
  size_t n = dir ? strlen(dir) : 0;
  return n > 0 && source[0] == '@' && strncmp(source + 1, dir, n) == 0;
}

/* The innermost frame of the user's own Lua code (not C, not the stdlib);
 * false when there is none. */
static bool user_frame(lua_State *L, lua_Debug *ar) {
  for (int level = 1; lua_getstack(L, level, ar); level++) {
    lua_getinfo(L, "Sln", ar);
    if (ar->currentline > 0 && strcmp(ar->what, "C") != 0 && !library_source(ar->source))
      return true;
  }
  return false;
}

/* Was the error raised inside the library (its innermost Lua frame)? */
static bool raised_in_library(lua_State *L) {
  lua_Debug ar;
  for (int level = 1; lua_getstack(L, level, &ar); level++) {
    lua_getinfo(L, "S", &ar);
    if (strcmp(ar.what, "C") != 0) return library_source(ar.source);
  }
  return false;
}

/* Length of a leading "file:line: " in msg, 0 if none. */
static size_t position_len(const char *msg) {
  const char *colon = strchr(msg, ':');
  while (colon && colon[1] >= '0' && colon[1] <= '9') {
    const char *p = colon + 1;
    while (*p >= '0' && *p <= '9') p++;
    if (p[0] == ':' && p[1] == ' ' && memchr(msg, '\n', (size_t)(colon - msg)) == NULL)
      return (size_t)(p + 2 - msg);
    colon = strchr(colon + 1, ':');
  }
  return 0;
}

/* An error raised inside the stdlib names the user's call site: its
 * "stdlib/check.lua:12: " (or no position) becomes "stdin:3: ". */
static const char *push_user_position(lua_State *L, const char *msg) {
  lua_Debug ar;
  size_t pos = position_len(msg);
  if (!raised_in_library(L) || !user_frame(L, &ar)) return lua_pushstring(L, msg);
  if (pos > 0) {
    char *src = strndup(msg, pos);
    bool ours = src == NULL;
    for (int level = 1; src && !ours && lua_getstack(L, level, &ar); level++) {
      lua_getinfo(L, "S", &ar);
      ours = library_source(ar.source) && strncmp(src, ar.short_src, strlen(ar.short_src)) == 0;
    }
    free(src);
    if (!ours) return lua_pushstring(L, msg);
    user_frame(L, &ar);
  }
  return lua_pushfstring(L, "%s:%d: %s", ar.short_src, ar.currentline, msg + pos);
}

/* The full traceback, kept for :bt; the message and the user's frame are
 * what the prompt prints. */
static void push_prompt_error(lua_State *L, const char *msg) {
  luaL_traceback(L, L, msg, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, CNN_LAST_TRACEBACK);
  lua_Debug ar;
  if (!user_frame(L, &ar)) {
    lua_pushfstring(L, "%s\n  (:bt shows the traceback)", msg);
  } else if (ar.name && strcmp(ar.what, "main") != 0) {
    lua_pushfstring(L, "%s\n  at %s:%d, in function '%s'  (:bt shows the traceback)", msg,
                    ar.short_src, ar.currentline, ar.name);
  } else {
    lua_pushfstring(L, "%s\n  at %s:%d  (:bt shows the traceback)", msg, ar.short_src,
                    ar.currentline);
  }
}

static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      return 1; /* an error object that prints itself */
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  msg = push_user_position(L, msg);
  msg = cnn_repl_push_hinted(L, msg);
  if (short_errors)
    push_prompt_error(L, msg);
  else
    push_short_traceback(L, msg);
  return 1;
}

int cnn_repl_docall(lua_State *L, int narg, int nres) {
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  signal_L = L;
  pending = 0;
  running = 1;
  int status = lua_pcall(L, narg, nres, base);
  running = 0;
  if (lua_gethook(L) == stop_hook) lua_sethook(L, NULL, 0, 0); /* armed, but the code ended first */
  cnn_clear_interrupt();
  lua_remove(L, base);
  return status;
}

int cnn_repl_report(lua_State *L, int status, bool color) {
  if (status == LUA_OK) return status;
  const char *msg = lua_tostring(L, -1);
  if (msg == NULL) msg = "(error object is not a string)";
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
static bool at_eof(lua_State *L, int status) {
  if (status != LUA_ERRSYNTAX) return false;
  size_t len;
  const char *msg = lua_tolstring(L, -1, &len);
  static const char mark[] = "<eof>";
  return msg && len >= sizeof mark - 1 && strcmp(msg + len - (sizeof mark - 1), mark) == 0;
}

/* Load text[0, n) as a check only: LUA_OK (nothing pushed) or the status
 * with the message pushed. */
static int check_syntax(lua_State *L, const char *text, size_t n, const char *name) {
  int status = luaL_loadbuffer(L, text, n, name);
  if (status == LUA_OK) lua_pop(L, 1);
  return status;
}

/* head .. code[0, len) pushed as one string */
static const char *push_joined(lua_State *L, const char *head, const char *code, size_t len,
                               size_t *n) {
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
                           const char *name) {
  if (c->split < 0) return false;
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

#define RETURN_VALUES "return " CNN_SESSION_VALUES "("

static int compile_scanned(lua_State *L, const char *code, size_t len, const char *name,
                           const cnn_chunk *c) {
  size_t n;
  const char *ret = push_joined(L, "return ", code, len, &n);
  int status = check_syntax(L, ret, n, name);
  lua_remove(L, status == LUA_OK ? -1 : -2);
  if (status == LUA_OK) return cnn_session_load(L, code, len, name, c, NULL, RETURN_VALUES, "\n)");
  bool open_expr = at_eof(L, status); /* "1 +", "f(a," */
  lua_pop(L, 1);
  if (split_compiles(L, code, len, c, name)) {
    cnn_edit ret = {(size_t)c->split + 1, 0, " " RETURN_VALUES};
    return cnn_session_load(L, code, len, name, c, &ret, "", "\n)");
  }
  status = check_syntax(L, code, len, name);
  if (status == LUA_OK) return cnn_session_load(L, code, len, name, c, NULL, "", "");
  if ((open_expr || at_eof(L, status)) && c->can_continue) {
    lua_pop(L, 1);
    return CNN_EVAL_INCOMPLETE;
  }
  return status;
}

int cnn_repl_compile(lua_State *L, const char *code, size_t len, const char *name) {
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

static int print_results(lua_State *L) {
  const cnn_print_opts *o = lua_touserdata(L, lua_upvalueindex(1));
  if (lua_gettop(L) > 0) cnn_repl_print_values(L, 1, o);
  return 0;
}

/* Run the compiled chunk at top + 1, leaving its results from top + 1. */
static int run_chunk(lua_State *L, int top) {
  lua_pushvalue(L, top + 1);
  int status = cnn_repl_docall(L, 0, LUA_MULTRET);
  if (status == LUA_OK) cnn_session_commit(L, top + 1);
  lua_remove(L, top + 1);
  return status;
}

/* Print the results from top + 1; the first becomes the global `_`. */
static int print_and_keep(lua_State *L, int top, bool color) {
  int nres = lua_gettop(L) - top;
  if (nres == 0) return LUA_OK;
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_pushvalue(L, top + 1);
  lua_setfield(L, -2, "_"); /* _G has no __newindex: a raw set */
  lua_pop(L, 1);
  cnn_print_opts o;
  cnn_print_opts_init(&o, color);
  lua_pushlightuserdata(L, &o);
  lua_pushcclosure(L, print_results, 1);
  lua_insert(L, top + 1);
  return cnn_repl_docall(L, nres, 0);
}

int cnn_repl_eval(lua_State *L, const char *code, bool color, bool color_err) {
  int top = lua_gettop(L);
  int status = cnn_repl_compile(L, code, strlen(code), "=stdin");
  if (status == CNN_EVAL_INCOMPLETE) return status;
  unsigned long eq_calls = cnn_lua_tensor_eq_calls();
  if (status == LUA_OK) status = run_chunk(L, top);
  if (status == LUA_OK) status = print_and_keep(L, top, color);
  if (status == LUA_ERRSYNTAX) { /* no traceback: :bt shows the message */
    cnn_repl_push_syntax_hint(L, code);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, CNN_LAST_TRACEBACK);
  }
  cnn_repl_report(L, status, color_err);
  if (status == LUA_OK && cnn_lua_tensor_eq_calls() != eq_calls &&
      (strstr(code, "==") || strstr(code, "~=")))
    printf("(== on two tensors asks whether they are the same tensor; x:eq(y) compares "
           "elementwise)\n");
  lua_settop(L, top);
  return status == LUA_OK ? CNN_EVAL_OK : CNN_EVAL_ERROR;
}

/* ---- fresh states ----------------------------------------------------------- */

static int open_all(lua_State *L) {
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

lua_State *cnn_repl_newstate(bool ascii) {
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
