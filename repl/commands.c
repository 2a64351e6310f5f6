/*
 * commands.c -- the ":commands" of the cnnsh prompt.
 *
 *   :help [topic]   help() from stdlib/help.lua (falls back to a list here)
 *   :time <expr>    runs expr repeatedly, reports min, median and max
 *   :mem            cnn.memory(): live and peak tensor bytes
 *   :bt             the full traceback of the last error
 *   :load file.lua  runs a file in this session
 *   :reset          a fresh Lua state (history stays)
 *   :quit           leaves (as Ctrl-D)
 * A unique prefix is enough (":h", ":q").
 *
 * :time policy: a first run measures the expression; fast ones then run
 * in batches of `batch` calls, grown until one batch lasts >= 1 ms (clock
 * noise), and a sample is a batch's time / batch.  Sampling goes on for
 * TIME_TARGET seconds, for at least 3 samples and at most
 * TIME_MAX_SAMPLES, and stops at TIME_HARD_CAP seconds: a slow
 * expression may then get fewer than 3 runs, and the report says so.
 * Everything runs inside one protected call, so Ctrl-C stops it.
 * The report gives min, median and max, and warns when the middle half of
 * the samples spans more than TIME_BUSY_SPREAD x the median (another
 * program took the cores).  A statement (":time x = f()") runs as often as
 * an expression, and what it does stays done: the report says how many
 * times it ran.  Nothing is undone (a copy of the session cannot be had).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>

#include "repl.h"

#define TIME_TARGET         0.75
#define TIME_HARD_CAP       3.0
#define TIME_MIN_SAMPLE     1e-3
#define TIME_MAX_SAMPLES    1000
#define TIME_MAX_BATCH      1000000
#define TIME_MIN_FOR_SPREAD 5   /* samples before the spread means anything */
#define TIME_BUSY_SPREAD    0.2 /* quartiles further apart than this x median: busy */

const char *const cnn_repl_command_names[] = {":help", ":time",  ":mem",  ":bt",
                                              ":load", ":reset", ":quit", NULL};

static const char *const command_help[] = {
    ":help [topic]   this list, or help on a topic or name (help(obj) works too)",
    ":time <expr>    run <expr> repeatedly; min, median and max time",
    ":mem            live and peak tensor memory (cnn.memory())",
    ":bt             the full traceback of the last error",
    ":load file.lua  run a file in this session",
    ":reset          start over with a fresh Lua state",
    ":quit           leave cnnsh (Ctrl-D works too)",
    NULL};

/* ---- formatting --------------------------------------------------------------- */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double cnn_time_median(double *v, int n) { return cnn_time_quantile(v, n, 0.5); }

/* Linear interpolation between the closest ranks (NumPy's default). */
double cnn_time_quantile(double *v, int n, double q) {
  if (n <= 0) return NAN;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  double pos = q * (n - 1);
  int lo = (int)floor(pos);
  int hi = lo + 1 < n ? lo + 1 : lo;
  return v[lo] + (pos - lo) * (v[hi] - v[lo]);
}

bool cnn_time_busy(double *v, int n) {
  if (n < TIME_MIN_FOR_SPREAD) return false;
  double q1 = cnn_time_quantile(v, n, 0.25), q3 = cnn_time_quantile(v, n, 0.75);
  return q3 - q1 > TIME_BUSY_SPREAD * cnn_time_median(v, n);
}

/* value in a unit from `units` (each 1000x the previous), 3 significant digits */
static const char *scaled(double v, const char *const *units, int nunits, double step, char *buf,
                          size_t size) {
  int u = 0;
  while (u + 1 < nunits && fabs(v) >= step * 0.9995) {
    v /= step;
    u++;
  }
  int decimals = fabs(v) >= 99.95 ? 0 : fabs(v) >= 9.995 ? 1 : 2;
  if (u == 0 && step == 1024) /* whole bytes */
    decimals = 0;
  snprintf(buf, size, "%.*f %s", decimals, v, units[u]);
  return buf;
}

const char *cnn_time_str(double seconds, char *buf, size_t size) {
  static const char *const units[] = {"ns", "µs", "ms", "s"};
  return scaled(seconds * 1e9, units, 4, 1000, buf, size);
}

const char *cnn_bytes_str(double bytes, char *buf, size_t size) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  return scaled(bytes, units, 5, 1024, buf, size);
}

/* ---- :time ------------------------------------------------------------------------ */

typedef struct {
  double samples[TIME_MAX_SAMPLES]; /* seconds per single run */
  int n;
  long batch;
  long calibration_runs; /* runs that are not in a sample */
} timing;

static void run_batch(lua_State *L, long batch) {
  for (long k = 0; k < batch; k++) {
    lua_pushvalue(L, 1);
    lua_call(L, 0, 0);
  }
}

/* Seconds for one batch of `batch` calls of the function at index 1. */
static double time_batch(lua_State *L, long batch) {
  double t0 = now();
  run_batch(L, batch);
  return now() - t0;
}

static int time_loop(lua_State *L) {
  timing *t = lua_touserdata(L, lua_upvalueindex(1));
  double start = now();
  double per_sample = time_batch(L, 1);
  t->batch = 1;
  t->n = 0;
  t->calibration_runs = 1;
  if (per_sample >= TIME_MIN_SAMPLE)
    t->samples[t->n++] = per_sample, t->calibration_runs = 0; /* slow: the first run counts */
  while (per_sample < TIME_MIN_SAMPLE && t->batch < TIME_MAX_BATCH) { /* calibrate */
    double grow = fmin(fmax(1.5 * TIME_MIN_SAMPLE / fmax(per_sample, 1e-9), 2), 100);
    t->batch = (long)fmin((double)t->batch * grow, TIME_MAX_BATCH);
    per_sample = time_batch(L, t->batch);
    t->calibration_runs += t->batch;
  }
  double begin = now(); /* sampling stops once TIME_TARGET is spent here */
  while (t->n < TIME_MAX_SAMPLES && now() - start < TIME_HARD_CAP &&
         (t->n < 3 || now() - begin < TIME_TARGET))
    t->samples[t->n++] = time_batch(L, t->batch) / (double)t->batch;
  return 0;
}

static void report_time(const timing *t, bool statement) {
  double v[TIME_MAX_SAMPLES];
  memcpy(v, t->samples, sizeof *v * (size_t)t->n);
  double med = cnn_time_median(v, t->n); /* sorts v */
  char a[32], b[32], c[32];
  printf("min %s, median %s, max %s", cnn_time_str(v[0], a, sizeof a),
         cnn_time_str(med, b, sizeof b), cnn_time_str(v[t->n - 1], c, sizeof c));
  if (t->batch > 1)
    printf("  (%d samples of %ld runs)\n", t->n, t->batch);
  else
    printf("  (%d run%s)\n", t->n, t->n == 1 ? "" : "s");
  if (statement)
    printf("(a statement: it ran %ld times, and what it did stays done)\n",
           t->n * t->batch + t->calibration_runs);
  fflush(stdout);
  if (t->n * t->batch < 3)
    fprintf(stderr, "warning: only %ld run%s fit in %.0f s; the figures are rough\n",
            t->n * t->batch, t->n * t->batch == 1 ? "" : "s", TIME_HARD_CAP);
  else if (cnn_time_busy(v, t->n))
    fprintf(stderr,
            "warning: the runs disagree (the middle half spans %s to %s): the machine "
            "seems busy; trust the min, or time again\n",
            cnn_time_str(cnn_time_quantile(v, t->n, 0.25), a, sizeof a),
            cnn_time_str(cnn_time_quantile(v, t->n, 0.75), b, sizeof b));
}

/* Does expr compile only as a statement (not as an expression)? */
static bool is_statement(lua_State *L, const char *expr) {
  lua_pushfstring(L, "return %s", expr);
  bool stmt = luaL_loadstring(L, lua_tostring(L, -1)) != LUA_OK;
  lua_pop(L, 2);
  return stmt;
}

static void cmd_time(cnn_repl *r, const char *expr) {
  lua_State *L = r->L;
  if (*expr == '\0') {
    fprintf(stderr, "usage: :time <expression or statement>\n");
    return;
  }
  int status = cnn_repl_compile(L, expr, strlen(expr), "=time");
  if (status == CNN_EVAL_INCOMPLETE) {
    fprintf(stderr, ":time: incomplete statement (it must fit on one line)\n");
    return;
  }
  if (status != LUA_OK) {
    cnn_repl_report(L, status, r->color_err);
    return;
  }
  timing *t = malloc(sizeof *t);
  if (t == NULL) {
    lua_pop(L, 1);
    return;
  }
  bool statement = is_statement(L, expr);
  lua_pushlightuserdata(L, t);
  lua_pushcclosure(L, time_loop, 1);
  lua_insert(L, -2);
  status = cnn_repl_docall(L, 1, 0);
  if (status == LUA_OK)
    report_time(t, statement);
  else
    cnn_repl_report(L, status, r->color_err);
  free(t);
}

/* ---- :mem, :help, :load, :reset ---------------------------------------------------- */

static int mem_query(lua_State *L) {
  lua_getglobal(L, "cnn");
  if (!lua_istable(L, -1) || lua_getfield(L, -1, "memory") != LUA_TFUNCTION)
    return luaL_error(L, ":mem: cnn.memory() is not available");
  lua_call(L, 0, 1);
  luaL_checktype(L, -1, LUA_TTABLE);
  char a[32], b[32];
  lua_getfield(L, -1, "live");
  lua_getfield(L, -2, "peak");
  lua_getfield(L, -3, "count");
  printf("live %s   peak %s   tensors %lld\n", cnn_bytes_str(lua_tonumber(L, -3), a, sizeof a),
         cnn_bytes_str(lua_tonumber(L, -2), b, sizeof b), (long long)lua_tointeger(L, -1));
  fflush(stdout);
  return 0;
}

static void print_command_list(void) {
  printf("Commands:\n");
  for (int i = 0; command_help[i]; i++) printf("  %s\n", command_help[i]);
  printf("Keys: Tab completes, Ctrl-C interrupts or clears the line, Ctrl-D exits.\n");
  fflush(stdout);
}

/* help(topic) if the global exists; returns false (pushed) when it does not */
static int help_call(lua_State *L) {
  int nargs = lua_gettop(L);
  lua_getglobal(L, "help");
  if (lua_isnil(L, -1)) {
    lua_pushboolean(L, 0);
    return 1;
  }
  lua_insert(L, 1);
  lua_call(L, nargs, 0);
  lua_pushboolean(L, 1);
  return 1;
}

static void cmd_help(cnn_repl *r, const char *topic) {
  lua_State *L = r->L;
  lua_pushcfunction(L, help_call);
  int nargs = 0;
  if (*topic) lua_pushstring(L, topic), nargs = 1;
  int status = cnn_repl_docall(L, nargs, 1);
  if (status != LUA_OK) {
    cnn_repl_report(L, status, r->color_err);
    if (*topic == '\0') print_command_list();
    return;
  }
  if (!lua_toboolean(L, -1)) print_command_list();
  lua_pop(L, 1);
}

static void cmd_bt(cnn_repl *r) {
  if (lua_getfield(r->L, LUA_REGISTRYINDEX, CNN_LAST_TRACEBACK) == LUA_TSTRING)
    printf("%s\n", lua_tostring(r->L, -1));
  else
    printf("no error yet in this session\n");
  lua_pop(r->L, 1);
  fflush(stdout);
}

static void cmd_load(cnn_repl *r, const char *arg) {
  char path[4096];
  size_t n = strlen(arg);
  if (n >= 2 && (arg[0] == '"' || arg[0] == '\'') && arg[n - 1] == arg[0]) arg++, n -= 2;
  if (n == 0 || n >= sizeof path) {
    fprintf(stderr, "usage: :load file.lua\n");
    return;
  }
  memcpy(path, arg, n);
  path[n] = '\0';
  int status = luaL_loadfile(r->L, path);
  if (status == LUA_OK) status = cnn_repl_docall(r->L, 0, 0);
  cnn_repl_report(r->L, status, r->color_err);
}

static void cmd_reset(cnn_repl *r) {
  lua_State *L = cnn_repl_newstate(r->ascii);
  if (L == NULL) return; /* the old state stays */
  lua_close(r->L);
  r->L = L;
  cnn_repl_signals_set_state(L);
  printf("fresh Lua state\n");
  fflush(stdout);
}

/* ---- dispatch ------------------------------------------------------------------------ */

/* The command `name` abbreviates (a unique prefix), or NULL. */
static const char *find_command(const char *name, size_t len) {
  const char *found = NULL;
  for (int i = 0; cnn_repl_command_names[i]; i++) {
    const char *c = cnn_repl_command_names[i];
    if (strlen(c) == len && strncmp(c, name, len) == 0) return c;
    if (strncmp(c, name, len) == 0) found = found ? "" : c; /* "" marks an ambiguous prefix */
  }
  return found && *found ? found : NULL;
}

int cnn_repl_command(cnn_repl *r, const char *line) {
  line += strspn(line, " \t");
  if (line[0] != ':' || line[1] == ':') /* "::label::" is Lua */
    return 0;
  size_t len = strcspn(line, " \t\n");
  const char *arg = line + len;
  arg += strspn(arg, " \t");
  char argbuf[4096];
  snprintf(argbuf, sizeof argbuf, "%s", arg);
  for (size_t n = strlen(argbuf); n > 0 && strchr(" \t\n", argbuf[n - 1]); n--)
    argbuf[n - 1] = '\0';
  const char *cmd = find_command(line, len);
  if (cmd == NULL) {
    fprintf(stderr, "unknown command %.*s (:help lists them)\n", (int)len, line);
    return 1;
  }
  if (strcmp(cmd, ":help") == 0)
    cmd_help(r, argbuf);
  else if (strcmp(cmd, ":time") == 0)
    cmd_time(r, argbuf);
  else if (strcmp(cmd, ":mem") == 0)
    cnn_repl_report(r->L, (lua_pushcfunction(r->L, mem_query), cnn_repl_docall(r->L, 0, 0)),
                    r->color_err);
  else if (strcmp(cmd, ":bt") == 0)
    cmd_bt(r);
  else if (strcmp(cmd, ":load") == 0)
    cmd_load(r, argbuf);
  else if (strcmp(cmd, ":reset") == 0)
    cmd_reset(r);
  else
    r->quit = true;
  return 1;
}
