/*
 * check.c -- `cnnsh --check FILE`: a teaching lab's checks run against a
 * student's file (labs/README.md), one forked child per exercise.
 *
 * The checker itself is Lua (stdlib/labcheck.lua): it finds the checks,
 * runs them and prints the report.  This file gives it the one thing Lua
 * cannot do, `isolate(fn, opts)`: run fn in a child process under a time
 * and a memory limit and hand back what fn returned (a string), or why the
 * child ended without an answer.  So an endless loop, a crash (a segfault
 * in C, os.exit) or a runaway allocation in a student's code costs one
 * exercise, never the checker.
 *
 * Limits.  Time: the parent reads the child's CPU time (all its threads,
 * /proc/PID/stat) every POLL_MS and kills it (SIGKILL) past `seconds`.
 * CPU time, not the wall clock, so that a busy machine (the shared
 * builders run at a load of 20 on two cores) does not fail honest work,
 * while an endless loop, which burns CPU, is stopped all the same.  A
 * child that burns nothing (blocked reading stdin) is stopped after
 * WALL_FACTOR times `seconds` of wall-clock time (30: at a load of 24 on
 * two cores a busy child got a twelfth of a core, and 10 was too tight).  Memory: the parent
 * reads the child's resident size (/proc/PID/statm) and kills it past
 * `memory_mb`.
 * Decision: no setrlimit.  RLIMIT_AS and RLIMIT_DATA count address space,
 * and AddressSanitizer reserves terabytes of it for its shadow (the CUDA
 * driver does too), so either limit would fail every allocation of an ASan
 * build; the resident size means the same thing in every build.  A single
 * request larger than the machine is refused by core before it allocates
 * (an ordinary error); the watchdog catches memory that is really used.
 * It may overshoot by what a process touches in POLL_MS (~100 MB).
 *
 * Fork safety.  The parent runs no tensor op (so no OpenMP or loader
 * thread exists when it forks) and flushes stdio first; the child reports
 * through a pipe and leaves with _exit (no atexit handlers, no LeakSanitizer
 * pass over a state that was never meant to be closed).  PR_SET_PDEATHSIG
 * takes the child down with the parent.
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>

#include "repl.h"

#define POLL_MS     20
#define WALL_FACTOR 30

typedef struct {
  pid_t pid;
  int fd;              /* read end of the child's answer */
  double seconds;      /* CPU-time limit; WALL_FACTOR times it on the wall clock */
  long long mem_bytes; /* resident-size limit */
  double start;
  double elapsed; /* wall clock */
  double cpu;     /* CPU seconds, all threads */
  long long peak_rss;
  const char *killed; /* "time", "wall" or "memory" when we killed it */
  int status;         /* waitpid's */
} child_watch;

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Resident bytes of pid, or -1 when it cannot be read (already gone). */
static long long resident_bytes(pid_t pid) {
  char path[64];
  long long size, resident;
  snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  int n = fscanf(f, "%lld %lld", &size, &resident);
  fclose(f);
  return n == 2 ? resident * sysconf(_SC_PAGESIZE) : -1;
}

/* CPU seconds (user + system, all threads) of pid, or -1 when unreadable. */
static double cpu_seconds(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
  unsigned long long utime, stime;
  if (p == NULL ||
      sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
    return -1;
  return (double)(utime + stime) / sysconf(_SC_CLK_TCK);
}

/* ---- the child ------------------------------------------------------------------- */

static void write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t k = write(fd, s, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return;
    s += k;
    n -= (size_t)k;
  }
}

/* Runs the function at index 1 and writes its string result; never returns. */
static void run_child(lua_State *L, int fd, bool quiet) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (quiet) dup2(STDERR_FILENO, STDOUT_FILENO); /* --json: stdout carries the report alone */
  lua_pushvalue(L, 1);
  int status = cnn_repl_docall(L, 0, 1);
  size_t n = 0;
  const char *s = lua_tolstring(L, -1, &n);
  if (status != LUA_OK) write_all(fd, "ERROR\n", 6);
  if (s) write_all(fd, s, n);
  fflush(NULL);
  _exit(0);
}

/* ---- the parent ------------------------------------------------------------------ */

/* Reads what is ready on w->fd into b; false at end of file. */
static bool drain(child_watch *w, luaL_Buffer *b) {
  char chunk[4096];
  ssize_t k = read(w->fd, chunk, sizeof chunk);
  if (k > 0) {
    luaL_addlstring(b, chunk, (size_t)k);
    return true;
  }
  return k < 0 && (errno == EINTR || errno == EAGAIN);
}

/* Kills the child if it broke a limit; true when it did. */
static bool enforce_limits(child_watch *w) {
  w->elapsed = now_seconds() - w->start;
  long long rss = resident_bytes(w->pid);
  double cpu = cpu_seconds(w->pid);
  if (rss > w->peak_rss) w->peak_rss = rss;
  if (cpu > w->cpu) w->cpu = cpu;
  if (w->cpu > w->seconds)
    w->killed = "time";
  else if (w->elapsed > WALL_FACTOR * w->seconds)
    w->killed = "wall";
  else if (rss > w->mem_bytes)
    w->killed = "memory";
  else
    return false;
  kill(w->pid, SIGKILL);
  return true;
}

/* Collects the answer until the pipe closes or a limit kills the child,
 * then reaps it.  The answer is left on the stack. */
static void watch_child(lua_State *L, child_watch *w) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  bool open = true;
  while (open) {
    struct pollfd p = {.fd = w->fd, .events = POLLIN};
    int r = poll(&p, 1, POLL_MS);
    if (r > 0) open = drain(w, &b);
    if (open && enforce_limits(w)) break;
  }
  luaL_pushresult(&b);
  struct rusage ru;
  while (wait4(w->pid, &w->status, 0, &ru) < 0 && errno == EINTR) {}
  w->elapsed = now_seconds() - w->start;
  double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
               ru.ru_stime.tv_usec * 1e-6; /* exact, at the end */
  if (cpu > w->cpu) w->cpu = cpu;
}

/* How the child ended: "ok" (it answered), "time" (CPU), "wall",
 * "memory", "signal" (with the signal's name) or "exit" (it left without
 * answering); its wall and CPU seconds and peak resident size. */
static void push_outcome(lua_State *L, const child_watch *w, size_t answer_len) {
  lua_createtable(L, 0, 6);
  const char *how = w->killed;
  if (how == NULL && WIFSIGNALED(w->status))
    how = "signal";
  else if (how == NULL)
    how = answer_len > 0 ? "ok" : "exit";
  lua_pushstring(L, how);
  lua_setfield(L, -2, "outcome");
  if (WIFSIGNALED(w->status) && w->killed == NULL) {
    lua_pushstring(L, strsignal(WTERMSIG(w->status)));
    lua_setfield(L, -2, "signal");
  }
  if (WIFEXITED(w->status)) {
    lua_pushinteger(L, WEXITSTATUS(w->status));
    lua_setfield(L, -2, "exit_status");
  }
  lua_pushnumber(L, w->elapsed);
  lua_setfield(L, -2, "seconds");
  lua_pushnumber(L, w->cpu);
  lua_setfield(L, -2, "cpu_seconds");
  lua_pushnumber(L, (double)w->peak_rss / (1 << 20));
  lua_setfield(L, -2, "peak_mb");
}

static double opt_number(lua_State *L, const char *key, double def) {
  lua_getfield(L, 2, key);
  double v = luaL_optnumber(L, -1, def);
  lua_pop(L, 1);
  return v;
}

/* isolate(fn, {seconds =, memory_mb =, quiet =}) -> answer, info
 * seconds: of CPU time (default 60); memory_mb: resident (default 2048);
 * quiet: the child's stdout goes to stderr.
 * answer: the string fn returned in the child ("" if none); info: see
 * push_outcome. */
static int l_isolate(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  luaL_checktype(L, 2, LUA_TTABLE);
  child_watch w = {.seconds = opt_number(L, "seconds", 60),
                   .mem_bytes = (long long)(opt_number(L, "memory_mb", 2048) * (1 << 20))};
  lua_getfield(L, 2, "quiet");
  bool quiet = lua_toboolean(L, -1);
  lua_pop(L, 1);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) /* programs the student starts do not hold it */
    return luaL_error(L, "--check: cannot make a pipe: %s", strerror(errno));
  fflush(NULL);
  w.start = now_seconds();
  w.pid = fork();
  if (w.pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return luaL_error(L, "--check: cannot fork: %s", strerror(errno));
  }
  if (w.pid == 0) {
    close(fds[0]);
    run_child(L, fds[1], quiet);
  }
  close(fds[1]);
  w.fd = fds[0];
  watch_child(L, &w);
  close(w.fd);
  size_t len = 0;
  lua_tolstring(L, -1, &len);
  push_outcome(L, &w, len);
  return 2;
}

/* ---- the entry point --------------------------------------------------------------- */

int cnn_repl_check(cnn_repl *r, const cnn_check_opts *o) {
  lua_State *L = r->L;
  lua_getglobal(L, "require");
  lua_pushstring(L, "labcheck");
  int status = cnn_repl_docall(L, 1, 1);
  if (status == LUA_OK) {
    lua_getfield(L, -1, "main");
    lua_createtable(L, 0, 5);
    lua_pushstring(L, o->file);
    lua_setfield(L, -2, "file");
    lua_pushstring(L, o->checks);
    lua_setfield(L, -2, "checks");
    lua_pushboolean(L, o->json);
    lua_setfield(L, -2, "json");
    lua_pushstring(L, CNNSH_LABS_DIR "/checks");
    lua_setfield(L, -2, "default_checks");
    lua_pushcfunction(L, l_isolate);
    lua_setfield(L, -2, "isolate");
    status = cnn_repl_docall(L, 1, 1);
  }
  if (status != LUA_OK) {
    cnn_repl_report(L, status, r->color_err);
    return 2;
  }
  lua_Integer failed = lua_tointeger(L, -1);
  lua_pop(L, 2);
  return failed > 125 ? 125 : (int)failed;
}
