/*
 * test_repl_unit.c -- the testable parts of repl/ without a terminal:
 * completion (contexts, raw lookup through __methods and __index chains,
 * paths, commands), the pretty printer (exact strings), the history file
 * (path rules, cap, duplicates, multi-line entries), compiling typed input
 * (incomplete vs. error), the piped-input runner, :time's statistics, and
 * a SIGINT taken by another thread.  Expected values are written out by
 * hand.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>
#include <readline/history.h>

#include "check.h"
#include "repl.h"

static char tmpdir[] = "/tmp/cnnsh_unit_XXXXXX";

static lua_State *state(const char *setup) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  if (setup && luaL_dostring(L, setup) != LUA_OK) {
    fprintf(stderr, "setup failed: %s\n", lua_tostring(L, -1));
    check_failures++;
  }
  return L;
}

/* The candidates for `line` (cursor at its end) joined by spaces. */
static const char *completions(lua_State *L, const char *line) {
  static char out[4096];
  cnn_strlist l = {0};
  int start;
  cnn_complete(L, line, (int)strlen(line), &start, &l);
  out[0] = '\0';
  for (int i = 0; i < l.n; i++) {
    if (i) strncat(out, " ", sizeof out - strlen(out) - 1);
    strncat(out, l.v[i], sizeof out - strlen(out) - 1);
  }
  cnn_strlist_clear(&l);
  return out;
}

#define CHECK_STR(got, want)                                                                       \
  do {                                                                                             \
    const char *g_ = (got), *w_ = (want);                                                          \
    check_count++;                                                                                 \
    if (strcmp(g_, w_) != 0) {                                                                     \
      check_failures++;                                                                            \
      fprintf(stderr, "%s:%d: got\n[%s]\nwanted\n[%s]\n", __FILE__, __LINE__, g_, w_);             \
    }                                                                                              \
  } while (0)

/* ---- completion ----------------------------------------------------------------- */

static void test_context(void) {
  int s;
  CHECK(cnn_complete_context(":he", 3, &s) == CNN_COMPLETE_COMMAND && s == 0);
  CHECK(cnn_complete_context("  :ti", 5, &s) == CNN_COMPLETE_COMMAND && s == 2);
  CHECK(cnn_complete_context(":load da", 8, &s) == CNN_COMPLETE_PATH && s == 6);
  CHECK(cnn_complete_context(":time x.y", 9, &s) == CNN_COMPLETE_EXPR && s == 6);
  CHECK(cnn_complete_context(":help x", 7, &s) == CNN_COMPLETE_NONE);
  CHECK(cnn_complete_context("f('data/tr", 10, &s) == CNN_COMPLETE_PATH && s == 3);
  CHECK(cnn_complete_context("f(\"a\\\"b", 8, &s) == CNN_COMPLETE_PATH && s == 3);
  CHECK(cnn_complete_context("f('a', x:su", 11, &s) == CNN_COMPLETE_EXPR && s == 7);
  CHECK(cnn_complete_context("y = a + b.c", 11, &s) == CNN_COMPLETE_EXPR && s == 8);
  CHECK(cnn_complete_context("x = 1 -- str", 12, &s) == CNN_COMPLETE_NONE);
  CHECK(cnn_complete_context("x = 1.5", 7, &s) == CNN_COMPLETE_NONE);
  CHECK(cnn_complete_context("", 0, &s) == CNN_COMPLETE_EXPR && s == 0);
}

/* A userdata type like cnn.Tensor: methods in mt.__methods, a C __index
 * that must never run during completion. */
static int index_calls;
static int bad_index(lua_State *L) {
  index_calls++;
  return luaL_error(L, "__index ran");
}

static void push_fake_tensor_type(lua_State *L) {
  lua_newuserdatauv(L, 8, 0);
  luaL_newmetatable(L, "fake.Tensor");
  luaL_dostring(L, "return {sum = function() end, sub = function() end, size = function() end,"
                   " view = function() end}");
  lua_setfield(L, -2, "__methods");
  luaL_dostring(L, "return {'shape', 'dtype', 'device'}");
  lua_setfield(L, -2, "__fields");
  lua_pushcfunction(L, bad_index);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_setglobal(L, "x");
}

static void test_expr(void) {
  lua_State *L =
      state("Base = {basemethod = function() end, basefield = 1}\n"
            "Class = setmetatable({method = function() end}, {__index = Base})\n"
            "obj = setmetatable({own = {}}, {__index = Class})\n"
            "nested = {inner = {leaf = 1}, ['not id'] = 2, [1] = 3, _hidden = 4}\n"
            "proxy = setmetatable({}, {__index = function() error('ran') end})\n"
            "package.preload.nn = function() return {Linear = function() end, init = {}} end\n"
            "s = 'abc'\n"
            "lib = {Conv = setmetatable({forward = function() end}, {__call = function() end})}\n"
            "lib.Conv.__index = lib.Conv\n"
            "inst = setmetatable({}, lib.Conv); lib.Conv.__call = function() end");
  push_fake_tensor_type(L);
  CHECK_STR(completions(L, "string.fo"), "string.format(");
  CHECK_STR(completions(L, "x:su"), "x:sub( x:sum(");
  CHECK_STR(completions(L, "x:v"), "x:view(");
  CHECK_STR(completions(L, "x.d"), "x.device x.dtype"); /* __fields, no "(" */
  CHECK_STR(completions(L, "x:d"), "");                 /* fields are not methods */
  CHECK_STR(completions(L, "x.su"), "");                /* after ".": fields, not methods */
  CHECK(index_calls == 0);
  CHECK_STR(completions(L, "obj:"), "obj:basemethod( obj:method(");
  CHECK_STR(completions(L, "obj."), "obj.basefield obj.own.");
  CHECK_STR(completions(L, "lib.Con"), "lib.Conv("); /* a class completes with "(" */
  CHECK_STR(completions(L, "inst"), "inst.");        /* an instance does not */
  CHECK_STR(completions(L, "lib.Conv.fo"), "lib.Conv.forward(");
  CHECK_STR(completions(L, "nested."), "nested.inner.");
  CHECK_STR(completions(L, "nested._"), "nested._hidden");
  CHECK_STR(completions(L, "nested.inner.l"), "nested.inner.leaf");
  CHECK_STR(completions(L, "nested.inner.leaf.x"), "");
  CHECK_STR(completions(L, "proxy.a"), "");
  CHECK_STR(completions(L, "s:up"), "s:upper(");
  CHECK_STR(completions(L, "nes"), "nested.");
  CHECK_STR(completions(L, "func"), "function");
  CHECK_STR(completions(L, "nn.Li"), "nn.Linear("); /* a lazy stdlib global */
  CHECK_STR(completions(L, "y = math.pi + math.fl"), "math.floor(");
  CHECK_STR(completions(L, "nothing.here"), "");
  CHECK_STR(completions(L, "_G._VER"), "_G._VERSION");
  CHECK(strstr(completions(L, "_G."), "_G._VERSION") == NULL); /* "_" names hidden */
  CHECK(lua_gettop(L) == 0);
  lua_close(L);
}

static void test_commands_and_paths(void) {
  CHECK_STR(completions(NULL, ":t"), ":time");
  CHECK_STR(completions(NULL, ":"), ":bt :help :load :mem :quit :reset :time");
  char path[4200], line[4300];
  snprintf(path, sizeof path, "%s/alps", tmpdir);
  mkdir(path, 0700);
  const char *files[] = {"alpha.lua", "beta.lua", ".alhidden"};
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s", tmpdir, files[i]);
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
  }
  char want[4300];
  snprintf(line, sizeof line, "dofile('%s/al", tmpdir);
  snprintf(want, sizeof want, "%s/alpha.lua %s/alps/", tmpdir, tmpdir);
  CHECK_STR(completions(NULL, line), want);
  snprintf(line, sizeof line, ":load %s/be", tmpdir);
  snprintf(want, sizeof want, "%s/beta.lua", tmpdir);
  CHECK_STR(completions(NULL, line), want);
  snprintf(line, sizeof line, "f(\"%s/.al", tmpdir);
  snprintf(want, sizeof want, "%s/.alhidden", tmpdir);
  CHECK_STR(completions(NULL, line), want);
}

/* ---- printing ----------------------------------------------------------------------- */

static const char *fmt(lua_State *L, const char *expr, bool color) {
  static char out[8192];
  char code[1024];
  snprintf(code, sizeof code, "return %s", expr);
  if (luaL_dostring(L, code) != LUA_OK) {
    snprintf(out, sizeof out, "ERROR %s", lua_tostring(L, -1));
  } else {
    cnn_print_opts o;
    cnn_print_opts_init(&o, color);
    snprintf(out, sizeof out, "%s", cnn_repl_format(L, -1, &o));
  }
  lua_settop(L, 0);
  return out;
}

static void test_print(void) {
  lua_State *L =
      state("cyc = {1}; cyc.self = cyc\n"
            "shared = {1}\n"
            "Mod = setmetatable({}, {__tostring = function() return 'Seq(\\n  (1): X\\n)' end})\n"
            "function docf(x) end\n"
            "cnn = {doc = {[docf] = 'docf(x) -> y\\nDoes things.'}}\n");
  luaL_newmetatable(L, "cnn.Tensor");
  luaL_dostring(L, "return function() return '[[1, 2]]\\n[cnn.Tensor 1x2 float32 cpu]' end");
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  lua_newuserdatauv(L, 8, 0);
  luaL_setmetatable(L, "cnn.Tensor");
  lua_setglobal(L, "tens");

  CHECK_STR(fmt(L, "1", false), "1");
  CHECK_STR(fmt(L, "1.5", false), "1.5");
  CHECK_STR(fmt(L, "2^63", false), "9.2233720368548e+18");
  CHECK_STR(fmt(L, "nil", false), "nil");
  CHECK_STR(fmt(L, "'a\\n\"b\\\\'", false), "\"a\\n\\\"b\\\\\"");
  CHECK_STR(fmt(L, "{}", false), "{}");
  CHECK_STR(fmt(L, "{1, 2, 3}", false), "{1, 2, 3}");
  CHECK_STR(fmt(L, "{b = 2, a = 1, 'x'}", false), "{\"x\", a = 1, b = 2}");
  CHECK_STR(fmt(L, "{['not id'] = 1, [10] = 2, ['end'] = 3}", false),
            "{[10] = 2, [\"end\"] = 3, [\"not id\"] = 1}");
  CHECK_STR(fmt(L, "cyc", false), "{1, self = <cycle>}");
  CHECK_STR(fmt(L, "{shared, shared}", false), "{{1}, {1}}");
  CHECK_STR(fmt(L, "Mod", false), "Seq(\n  (1): X\n)");
  CHECK_STR(fmt(L, "{m = Mod}", false), "{\n  m = Seq(\n    (1): X\n  ),\n}");
  CHECK_STR(fmt(L, "tens", false), "[[1, 2]]\n[cnn.Tensor 1x2 float32 cpu]");
  CHECK_STR(fmt(L, "{w = tens}", false), "{w = [cnn.Tensor 1x2 float32 cpu]}");
  CHECK(strncmp(fmt(L, "docf", false), "function: 0x", 12) == 0);
  CHECK(strstr(fmt(L, "docf", false), "  -- docf(x) -> y") != NULL);
  CHECK(strstr(fmt(L, "docf", false), "Does things") == NULL);
  CHECK_STR(fmt(L, "{'s', 1, true}", true),
            "{\033[32m\"s\"\033[0m, \033[36m1\033[0m, \033[35mtrue\033[0m}");
  /* too wide for one line: one entry per line */
  CHECK_STR(fmt(L,
                "{'aaaaaaaaaaaaaaaaaaaa', 'bbbbbbbbbbbbbbbbbbbb', 'cccccccccccccccccccc',"
                " 'dddddddddddddddddddd'}",
                false),
            "{\n  \"aaaaaaaaaaaaaaaaaaaa\",\n  \"bbbbbbbbbbbbbbbbbbbb\",\n"
            "  \"cccccccccccccccccccc\",\n  \"dddddddddddddddddddd\",\n}");
  /* depth and length limits */
  CHECK_STR(fmt(L, "{{{{{{{1}}}}}}}", false), "{{{{{{...}}}}}}");
  const char *many =
      fmt(L, "(function() local t = {} for i = 1, 100 do t[i] = i end return t end)()", false);
  CHECK(strstr(many, "\n  64,\n  ... (36 more)\n}") != NULL);
  CHECK(strstr(many, "65") == NULL);
  /* nested strings are cut, top-level ones are not */
  const char *cut = fmt(L, "{string.rep('x', 200)}", false);
  CHECK(strstr(cut, "... (200 bytes)") != NULL);
  CHECK(strlen(fmt(L, "string.rep('x', 200)", false)) == 202);
  CHECK(lua_gettop(L) == 0);
  lua_close(L);
}

/* ---- compiling and running ------------------------------------------------------- */

static void test_compile(void) {
  lua_State *L = state(NULL);
  CHECK(cnn_repl_compile(L, "1 +", 3, "=stdin") == CNN_EVAL_INCOMPLETE);
  CHECK(cnn_repl_compile(L, "x = {", 5, "=stdin") == CNN_EVAL_INCOMPLETE);
  CHECK(cnn_repl_compile(L, "function f()", 12, "=stdin") == CNN_EVAL_INCOMPLETE);
  CHECK(cnn_repl_compile(L, "s = [[abc", 9, "=stdin") == CNN_EVAL_INCOMPLETE);
  CHECK(lua_gettop(L) == 0);
  CHECK(cnn_repl_compile(L, "x = = 1", 7, "=stdin") == LUA_ERRSYNTAX);
  CHECK(strstr(lua_tostring(L, -1), "unexpected symbol") != NULL);
  lua_settop(L, 0);
  CHECK(cnn_repl_compile(L, "20 + 22", 7, "=stdin") == LUA_OK); /* an expression */
  lua_call(L, 0, 1);
  CHECK(lua_tointeger(L, -1) == 42);
  lua_settop(L, 0);
  CHECK(cnn_repl_compile(L, "y = 5", 5, "=stdin") == LUA_OK); /* a statement */
  lua_call(L, 0, 0);
  lua_getglobal(L, "y");
  CHECK(lua_tointeger(L, -1) == 5);
  lua_settop(L, 0);
  CHECK(cnn_repl_eval(L, "error('expected by the test')", false, false) == CNN_EVAL_ERROR);
  CHECK(cnn_repl_eval(L, "z = y * 2", false, false) == CNN_EVAL_OK);
  CHECK(cnn_repl_eval(L, "for i = 1, 2 do", false, false) == CNN_EVAL_INCOMPLETE);
  CHECK(lua_gettop(L) == 0);
  lua_close(L);
}

/* What continues on ">>" and what is an error at once (repl/exec.c). */
static void test_continue_or_error(void) {
  static const char *const more[] = {"x = 1 +",
                                     "f(a,",
                                     "t = {1, 2,",
                                     "if x then",
                                     "for i = 1, 3 do",
                                     "x = --[[ a long\ncomment",
                                     "s = [==[abc",
                                     "y = x and",
                                     "z = a ..",
                                     "local w =",
                                     "repeat x = 1",
                                     "x.",
                                     "x = {f = function()",
                                     NULL};
  static const char *const errors[] = {
      "s = \"abc", "x = 1 out.shape", "f() g", "foo bar",
      "x = = 1",   "1 + 2)",          "end",   "x = 1 -- just a comment: x.",
      NULL};
  lua_State *L = state(NULL);
  for (int i = 0; more[i]; i++) {
    int st = cnn_repl_compile(L, more[i], strlen(more[i]), "=stdin");
    if (st != CNN_EVAL_INCOMPLETE) fprintf(stderr, "should continue: [%s] (%d)\n", more[i], st);
    CHECK(st == CNN_EVAL_INCOMPLETE);
    lua_settop(L, 0);
  }
  for (int i = 0; errors[i]; i++) {
    int st = cnn_repl_compile(L, errors[i], strlen(errors[i]), "=stdin");
    bool ok = i == 7 ? st == LUA_OK : st == LUA_ERRSYNTAX;
    if (!ok) fprintf(stderr, "should %s: [%s] (%d)\n", i == 7 ? "compile" : "fail", errors[i], st);
    CHECK(ok);
    lua_settop(L, 0);
  }
  lua_close(L);
}

/* Runs `code` as the prompt does; the first result as a string ("" when none). */
static const char *typed(lua_State *L, const char *code) {
  static char out[256];
  out[0] = '\0';
  int top = lua_gettop(L);
  if (cnn_repl_compile(L, code, strlen(code), "=stdin") != LUA_OK) {
    snprintf(out, sizeof out, "compile error: %s", lua_tostring(L, -1));
  } else {
    lua_pushvalue(L, -1);
    if (lua_pcall(L, 0, 1, 0) != LUA_OK) {
      snprintf(out, sizeof out, "error: %s", lua_tostring(L, -1));
    } else {
      cnn_session_commit(L, top + 1);
      snprintf(out, sizeof out, "%s", luaL_tolstring(L, -1, NULL));
    }
  }
  lua_settop(L, top);
  return out;
}

/* "stmt; expr" returns expr; top-level locals live on as session
 * variables, shared by closures; globals and scripts are untouched. */
static void test_session(void) {
  lua_State *L = state("x0 = 'global x0'");
  CHECK_STR(typed(L, "a = 20; a + 1"), "21");
  CHECK_STR(typed(L, "for i = 1, 2 do a = a + i; end"), "nil"); /* a ';' inside a block */
  CHECK_STR(typed(L, "a"), "23");
  CHECK_STR(typed(L, "local q = 5"), "nil");
  CHECK_STR(typed(L, "q"), "5");
  CHECK_STR(typed(L, "rawget(_G, 'q') == nil"), "true"); /* not a global */
  CHECK_STR(typed(L, "function getq() return q end; q = q + 1; getq()"), "6");
  CHECK_STR(typed(L, "q = 10"), "nil");
  CHECK_STR(typed(L, "getq()"), "10");                /* one cell, shared with the closure */
  CHECK_STR(typed(L, "local x0 = x0 .. '!'"), "nil"); /* the right side sees the global */
  CHECK_STR(typed(L, "x0"), "global x0!");
  CHECK_STR(typed(L, "rawget(_G, 'x0')"), "global x0");
  CHECK_STR(typed(L, "local x0"), "nil"); /* shadows the global, as in Lua */
  CHECK_STR(typed(L, "x0"), "nil");
  CHECK_STR(typed(L, "local m, n <const> = 1, 2; m + n"), "3");
  CHECK_STR(typed(L, "n * 10"), "20");
  CHECK_STR(typed(L, "local function fact(k) return k < 2 and 1 or k * fact(k - 1) end"), "nil");
  CHECK_STR(typed(L, "fact(5)"), "120");
  CHECK_STR(typed(L, "local t <close> = nil; 7"), "7");
  CHECK_STR(typed(L, "t"), "nil"); /* a <close> variable ends with its line */
  CHECK_STR(typed(L, "local bad = error('expected by the test')"),
            "error: stdin:1: expected by the test");
  CHECK_STR(typed(L, "bad == nil and rawget(_G, 'bad') == nil"), "true");
  CHECK_STR(typed(L, "do local inner = 1 end; inner"), "nil"); /* not top level */
  CHECK_STR(typed(L, "load('return q')()"), "nil");            /* other chunks: Lua's rules */
  CHECK_STR(typed(L, "local s = 'a;b'; s"), "a;b");
  CHECK_STR(typed(L, "local tbl = {alpha = 1}"), "nil");
  CHECK_STR(completions(L, "tbl.al"), "tbl.alpha"); /* Tab sees session variables */
  lua_close(L);
}

static void test_stream(void) {
  static char input[] = "a = 1\nb = a +\n  1\nerror('expected by the test')\nc = b * 3\n";
  FILE *in = fmemopen(input, strlen(input), "r");
  cnn_repl r = {.L = state(NULL)};
  CHECK(cnn_repl_run_stream(&r, in) == 1); /* one chunk failed */
  fclose(in);
  lua_getglobal(r.L, "c");
  CHECK(lua_tointeger(r.L, -1) == 6); /* later chunks still ran */
  lua_close(r.L);
  static char good[] = "x = 1\n\n:mem_not_a_command_prefix_of_anything\nx = x + 1\n";
  in = fmemopen(good, strlen(good), "r");
  r.L = state(NULL);
  CHECK(cnn_repl_run_stream(&r, in) == 0); /* unknown commands are reported, not fatal */
  fclose(in);
  lua_close(r.L);
  static char unfinished[] = "t = {1,\n";
  in = fmemopen(unfinished, strlen(unfinished), "r");
  r.L = state(NULL);
  CHECK(cnn_repl_run_stream(&r, in) == 1);
  fclose(in);
  lua_close(r.L);
}

/* ---- history ----------------------------------------------------------------------- */

static int file_lines(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int n = 0, c;
  while ((c = fgetc(f)) != EOF) n += c == '\n';
  fclose(f);
  return n;
}

static void test_history(void) {
  char path[4200], want[4300];
  setenv("CNNSH_HISTORY", "/x/y", 1);
  char *p = cnn_history_path();
  CHECK_STR(p, "/x/y");
  free(p);
  unsetenv("CNNSH_HISTORY");
  setenv("XDG_STATE_HOME", tmpdir, 1);
  p = cnn_history_path();
  snprintf(want, sizeof want, "%s/cnnsh/history", tmpdir);
  CHECK_STR(p ? p : "", want);
  struct stat st;
  snprintf(path, sizeof path, "%s/cnnsh", tmpdir);
  CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
  free(p);
  unsetenv("XDG_STATE_HOME");
  setenv("HOME", tmpdir, 1);
  p = cnn_history_path();
  snprintf(want, sizeof want, "%s/.cnnsh_history", tmpdir);
  CHECK_STR(p ? p : "", want);
  free(p);

  /* 1500 entries with a repeat each: loads the newest 1000, once each */
  snprintf(path, sizeof path, "%s/hist", tmpdir);
  FILE *f = fopen(path, "w");
  for (int i = 1; i <= 1500; i++) fprintf(f, "e%d\ne%d\n", i, i);
  fclose(f);
  clear_history();
  CHECK(cnn_history_load(path) == 0);
  CHECK(history_length == 1000);
  CHECK_STR(history_get(history_base)->line, "e501");
  CHECK_STR(history_get(history_base + 999)->line, "e1500");
  CHECK(file_lines(path) == 1000); /* the file was capped too */
  cnn_history_add(path, "same");
  cnn_history_add(path, "same\n");
  CHECK(file_lines(path) == 1001);
  CHECK(history_length == 1000); /* stifled */
  cnn_history_add(path, "for i = 1, 2 do\n  print(i)\nend");
  CHECK(file_lines(path) == 1002);
  CHECK(cnn_history_trim(path) == 0);
  CHECK(file_lines(path) == 1000);
  clear_history();
  CHECK(cnn_history_load(path) == 0);
  CHECK_STR(history_get(history_base + history_length - 1)->line,
            "for i = 1, 2 do\n  print(i)\nend");
  CHECK_STR(history_get(history_base + history_length - 2)->line, "same");
}

/* ---- :time and :mem formatting ----------------------------------------------------- */

static void test_stats(void) {
  double a[] = {3, 1, 2}, b[] = {4, 1, 3, 2};
  CHECK(cnn_time_median(a, 3) == 2);
  CHECK(cnn_time_median(b, 4) == 2.5);
  double c[] = {5, 1, 4, 2, 3};
  CHECK(cnn_time_quantile(c, 5, 0.25) == 2 && cnn_time_quantile(c, 5, 0.75) == 4);
  CHECK(cnn_time_quantile(b, 4, 0.25) == 1.75); /* between ranks: 1 + 0.75 * (2 - 1) */
  double quiet[] = {1.00, 1.01, 1.02, 1.00, 1.03, 1.01, 1.02, 2.5}; /* one outlier */
  CHECK(!cnn_time_busy(quiet, 8));
  double busy[] = {1.0, 1.6, 1.1, 2.0, 1.3, 1.8, 1.0, 2.2};
  CHECK(cnn_time_busy(busy, 8));
  CHECK(!cnn_time_busy(busy, 4)); /* too few samples to say */
  char buf[32];
  CHECK_STR(cnn_time_str(1.234e-3, buf, sizeof buf), "1.23 ms");
  CHECK_STR(cnn_time_str(850e-9, buf, sizeof buf), "850 ns");
  CHECK_STR(cnn_time_str(12.5e-6, buf, sizeof buf), "12.5 µs");
  CHECK_STR(cnn_time_str(0.99999e-3, buf, sizeof buf), "1.00 ms");
  CHECK_STR(cnn_time_str(12.5, buf, sizeof buf), "12.5 s");
  CHECK_STR(cnn_bytes_str(100, buf, sizeof buf), "100 B");
  CHECK_STR(cnn_bytes_str(1536, buf, sizeof buf), "1.50 KiB");
  CHECK_STR(cnn_bytes_str(3.0 * 1024 * 1024 * 1024, buf, sizeof buf), "3.00 GiB");
}

/* ---- SIGINT taken by another thread -------------------------------------- */

/* an OpenMP worker's view: SIGINT unblocked, and the signal lands here */
static void *take_sigint(void *arg) {
  (void)arg;
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  pthread_sigmask(SIG_UNBLOCK, &s, NULL);
  pthread_kill(pthread_self(), SIGINT);
  return NULL;
}

/* The worker's handler passes the signal on instead of handling it: with
 * SIGINT blocked on this (the main) thread it waits pending here, and the
 * prompt's flag is set only once this thread lets it in. */
static void test_sigint_from_worker(void) {
  cnn_repl_signals_init(false);
  sigset_t block, old, pending;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, take_sigint, NULL) == 0);
  pthread_join(t, NULL);
  CHECK(!cnn_repl_take_prompt_sigint()); /* not handled on the worker */
  sigemptyset(&pending);
  sigpending(&pending);
  CHECK(sigismember(&pending, SIGINT) == 1); /* waiting for the main thread */
  pthread_sigmask(SIG_SETMASK, &old, NULL);  /* delivered here, now */
  CHECK(cnn_repl_take_prompt_sigint());
  signal(SIGINT, SIG_DFL);
}

int main(void) {
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  test_context();
  test_expr();
  test_commands_and_paths();
  test_print();
  test_compile();
  test_continue_or_error();
  test_session();
  test_stream();
  test_history();
  test_stats();
  test_sigint_from_worker();
  char cmd[4300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
  return check_report("repl_unit");
}
