/*
 * main.c -- the cnnsh program: options, then a script, chunks, piped input
 * or the prompt.
 *
 *   cnnsh                      the prompt (stdin a terminal) or chunks from stdin
 *   cnnsh FILE [args]          run FILE with Lua's `arg` table and ... = args
 *   cnnsh -e CHUNK             run CHUNK (repeatable, in order, before FILE)
 *   cnnsh -i FILE              run FILE, then the prompt (-i alone: the prompt)
 *   cnnsh -                    chunks from stdin: no prompt, no echo
 *   cnnsh --nproc N FILE       N ranks of FILE through mpirun (launch.c)
 *   cnnsh --check FILE         a lab's checks against FILE (check.c); --json
 *                              and --checks PATH before or after FILE;
 *                              exit status = the number of failed exercises
 *   --threads N, --seed N, --ascii, --version, --help
 *
 * Exit status: 0; 1 when a script, chunk or file failed; 2 for a bad
 * option; 130 when Ctrl-C stopped a script.  Nothing heavy happens before
 * it is needed: readline and the history only for the prompt, the stdlib
 * modules on first use (lua/).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__GLIBC__) /* (known once stdio.h is in) */
#include <malloc.h>
#endif

#include <lauxlib.h>

#include "cnn.h"
#include "dist.h"
#include "repl.h"

#define MAX_CHUNKS 64

typedef struct {
  int script; /* argv index of FILE or "-", 0 if none */
  const char *chunks[MAX_CHUNKS];
  int nchunks;
  const char *ifile; /* -i FILE */
  bool prompt_after; /* -i given */
  bool version, help, ascii;
  int threads; /* 0: leave the default */
  long long seed;
  bool have_seed;
  int nproc;               /* --nproc N: launch N ranks (0: no) */
  int nproc_at, nproc_len; /* argv span of the --nproc option */
  bool check_mode;         /* --check: FILE (the script argument) is a lab */
  cnn_check_opts check;    /* its file, --json, --checks PATH */
} options;

static void usage(FILE *f) {
  fputs("usage: cnnsh [options] [FILE [args...]]\n"
        "  FILE            run a Lua script (arg[0] = FILE, ... = args)\n"
        "  -               read chunks from standard input\n"
        "  -e CHUNK        run CHUNK (repeatable)\n"
        "  -i [FILE]       run FILE, then enter the prompt\n"
        "  --threads N     CPU threads for tensor ops\n"
        "  --seed N        seed the random generator (cnn.manual_seed)\n"
        "  --nproc N       run FILE as N processes through mpirun (see dist)\n"
        "  --ascii         plain ASCII pictures (sets cnn.ascii = true)\n"
        "  --check FILE    run a lab's checks against FILE (labs/README.md);\n"
        "                  exit status = failed exercises; --json: one JSON\n"
        "                  object; --checks PATH: the checks file or folder\n"
        "  --version       print versions and exit\n"
        "  --help          print this and exit\n"
        "With no FILE and no -e: the prompt when stdin is a terminal, else\n"
        "the chunks of stdin.  Environment: NO_COLOR, CNNSH_HISTORY, CNNSH_STDLIB.\n",
        f);
}

static int bad_option(const char *what, const char *arg) {
  fprintf(stderr, "cnnsh: %s '%s'\n", what, arg);
  usage(stderr);
  return 2;
}

static bool parse_int(const char *s, long long lo, long long *out) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < lo) return false;
  *out = v;
  return true;
}

/* "--name N" or "--name=N"; advances *i past the value. */
static const char *long_value(int argc, char **argv, int *i, const char *name) {
  size_t n = strlen(name);
  if (strncmp(argv[*i], name, n) != 0) return NULL;
  if (argv[*i][n] == '=') return argv[*i] + n + 1;
  if (argv[*i][n] == '\0' && *i + 1 < argc) return argv[++*i];
  return NULL;
}

static int parse_value_option(int argc, char **argv, int *i, options *o) {
  const char *v;
  long long x;
  int at = *i;
  if ((v = long_value(argc, argv, i, "--checks"))) {
    o->check.checks = v;
  } else if ((v = long_value(argc, argv, i, "--nproc"))) {
    if (!parse_int(v, 1, &x) || x > 4096)
      return bad_option("--nproc wants a positive integer, got", v);
    o->nproc = (int)x;
    o->nproc_at = at;
    o->nproc_len = *i - at + 1;
  } else if ((v = long_value(argc, argv, i, "--threads"))) {
    if (!parse_int(v, 1, &x) || x > 4096)
      return bad_option("--threads wants a positive integer, got", v);
    o->threads = (int)x;
  } else if ((v = long_value(argc, argv, i, "--seed"))) {
    if (!parse_int(v, 0, &x)) return bad_option("--seed wants a non-negative integer, got", v);
    o->seed = x;
    o->have_seed = true;
  } else {
    return bad_option("unknown option", argv[*i]);
  }
  return 0;
}

static int parse_short(int argc, char **argv, int *i, options *o) {
  const char *a = argv[*i];
  if (strncmp(a, "-e", 2) == 0) {
    const char *chunk = a[2] ? a + 2 : (*i + 1 < argc ? argv[++*i] : NULL);
    if (chunk == NULL) return bad_option("missing chunk after", "-e");
    if (o->nchunks == MAX_CHUNKS) return bad_option("too many chunks; the last is", chunk);
    o->chunks[o->nchunks++] = chunk;
  } else if (strcmp(a, "-i") == 0) {
    o->prompt_after = true;
    if (*i + 1 < argc && argv[*i + 1][0] != '-') o->ifile = argv[++*i];
  } else if (strcmp(a, "-h") == 0) {
    o->help = true;
  } else if (strcmp(a, "-v") == 0) {
    o->version = true;
  } else {
    return bad_option("unknown option", a);
  }
  return 0;
}

static int parse_options(int argc, char **argv, options *o) {
  memset(o, 0, sizeof *o);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int rc = 0;
    if (strcmp(a, "--") == 0) {
      o->script = i + 1 < argc ? i + 1 : 0;
      return 0;
    }
    if (a[0] != '-' || strcmp(a, "-") == 0) {
      o->script = i;
      return 0;
    }
    if (strcmp(a, "--help") == 0)
      o->help = true;
    else if (strcmp(a, "--version") == 0)
      o->version = true;
    else if (strcmp(a, "--ascii") == 0)
      o->ascii = true;
    else if (strcmp(a, "--json") == 0)
      o->check.json = true;
    else if (strcmp(a, "--check") == 0)
      o->check_mode = true;
    else if (a[1] == '-')
      rc = parse_value_option(argc, argv, &i, o);
    else
      rc = parse_short(argc, argv, &i, o);
    if (rc) return rc;
  }
  return 0;
}

/* cnnsh --check FILE [--json] [--checks PATH]: the options may follow FILE. */
static int parse_check_tail(int argc, char **argv, options *o) {
  if (!o->script || strcmp(argv[o->script], "-") == 0)
    return bad_option("--check wants a lab FILE, got", o->script ? "-" : "none");
  o->check.file = argv[o->script];
  for (int i = o->script + 1; i < argc; i++) {
    const char *v;
    if (strcmp(argv[i], "--json") == 0)
      o->check.json = true;
    else if ((v = long_value(argc, argv, &i, "--checks")))
      o->check.checks = v;
    else
      return bad_option("--check checks one FILE; unexpected", argv[i]);
  }
  return 0;
}

/* ---- running ------------------------------------------------------------------------ */

/* Lua's `arg`: arg[0] = script, arguments at 1.., interpreter and options
 * at negative indices (as lua.c). */
static void create_arg_table(lua_State *L, int argc, char **argv, int script) {
  lua_createtable(L, argc, 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

static int report_fatal(cnn_repl *r, int status) {
  if (status == LUA_OK) return 0;
  if (r->color_err) fputs("\033[31m", stderr);
  fprintf(stderr, "cnnsh: ");
  if (r->color_err) fputs("\033[0m", stderr);
  cnn_repl_report(r->L, status, r->color_err);
  return cnn_repl_interrupted() ? 130 : 1;
}

static int run_chunk(cnn_repl *r, const char *chunk) {
  int status = luaL_loadbuffer(r->L, chunk, strlen(chunk), "=(command line)");
  if (status == LUA_OK) status = cnn_repl_docall(r->L, 0, 0);
  return report_fatal(r, status);
}

/* FILE with argv[first..] as its `...` */
static int run_file(cnn_repl *r, const char *path, int argc, char **argv, int first) {
  lua_State *L = r->L;
  int status = luaL_loadfile(L, path);
  if (status == LUA_OK) {
    int n = 0;
    luaL_checkstack(L, argc, "too many arguments to script");
    for (int i = first; i < argc; i++, n++) lua_pushstring(L, argv[i]);
    status = cnn_repl_docall(L, n, 0);
  }
  return report_fatal(r, status);
}

static int print_version(cnn_repl *r) {
  printf("cnnsh %s\n%s\n", CNNSH_VERSION, LUA_RELEASE);
  lua_State *L = r->L;
  const char *snippet = "return cnn and cnn.version_info and cnn.version_info()";
  int status = luaL_loadstring(L, snippet);
  if (status == LUA_OK) status = cnn_repl_docall(L, 0, 1);
  if (status != LUA_OK) return report_fatal(r, status);
  if (!lua_isnil(L, -1)) {
    cnn_print_opts o;
    cnn_print_opts_init(&o, false);
    const char *s = lua_isstring(L, -1) ? lua_tostring(L, -1) : cnn_repl_format(L, -1, &o);
    printf("%s\n", s);
  }
  return 0;
}

static bool want_color(int fd) {
  const char *no = getenv("NO_COLOR");
  return isatty(fd) && !(no && *no);
}

static int run(cnn_repl *r, const options *o, int argc, char **argv) {
  int rc = 0;
  for (int i = 0; i < o->nchunks && rc == 0; i++) rc = run_chunk(r, o->chunks[i]);
  if (rc) return rc;
  if (o->script && strcmp(argv[o->script], "-") == 0)
    rc = cnn_repl_run_stream(r, stdin);
  else if (o->script)
    rc = run_file(r, argv[o->script], argc, argv, o->script + 1);
  if (rc || (o->script && !o->prompt_after)) return rc;
  if (o->ifile) run_file(r, o->ifile, 0, argv, 0); /* errors are reported; the prompt follows */
  bool tty = isatty(STDIN_FILENO);
  if (o->prompt_after || (o->nchunks == 0 && tty))
    return tty ? cnn_repl_run_prompt(r) : cnn_repl_run_stream(r, stdin);
  if (o->nchunks == 0) return cnn_repl_run_stream(r, stdin);
  return 0;
}

/* glibc's malloc serves a block above its mmap threshold with a fresh
 * mmap() and unmaps it on free(), and adapts that threshold to the blocks
 * freed so far.  So whether a training loop's 128 KiB - 1 MiB tensors (a
 * linear layer's input gradient, a pooled activation; core/host_cache.c
 * keeps the blocks from 1 MiB up) come from the heap or are mapped and
 * faulted in afresh every step depends on the process's history: the
 * example network's loop took 10,700 page faults in 200 steps at one
 * commit and ~96,000 at the next (a step 7 % slower, 2 threads, the Zen 4)
 * for changes that did not touch those tensors.  Fixed thresholds (which
 * stop glibc's adapting) keep blocks under 32 MiB -- glibc's own ceiling
 * for the moving threshold -- in the heap, and trim its top only past
 * 64 MiB free: 10,300 faults either way.  A user's GLIBC_TUNABLES or
 * MALLOC_*_ settings win. */
static void tune_malloc(void) {
#if defined(__GLIBC__)
  if (getenv("GLIBC_TUNABLES") || getenv("MALLOC_MMAP_THRESHOLD_") ||
      getenv("MALLOC_TRIM_THRESHOLD_"))
    return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

int main(int argc, char **argv) {
  tune_malloc();
  options o;
  int rc = parse_options(argc, argv, &o);
  if (rc) return rc;
  if (o.help) {
    usage(stdout);
    return 0;
  }
  if (o.nproc && (!o.script || strcmp(argv[o.script], "-") == 0))
    return bad_option("--nproc runs a script FILE, got", o.script ? argv[o.script] : "no FILE");
  if (o.check_mode && (rc = parse_check_tail(argc, argv, &o))) return rc;
  if ((o.check.json || o.check.checks) && !o.check_mode)
    return bad_option("--json and --checks go with --check, got", "no --check");
  if (o.nproc) return cnn_launch_ranks(o.nproc, argc, argv, o.nproc_at, o.nproc_len);
  bool will_prompt = o.prompt_after || (!o.script && o.nchunks == 0 && !o.version &&
                                        !o.check.file && isatty(STDIN_FILENO));
  cnn_repl r = {
      .color = want_color(STDOUT_FILENO), .color_err = want_color(STDERR_FILENO), .ascii = o.ascii};
  r.L = cnn_repl_newstate(o.ascii);
  if (r.L == NULL) return 1;
  if (o.threads > 0) cnn_set_num_threads(o.threads);
  if (o.have_seed) cnn_manual_seed((uint64_t)o.seed);
  cnn_repl_signals_init(!will_prompt);
  if (o.version) {
    rc = print_version(&r);
  } else if (o.check.file) {
    rc = cnn_repl_check(&r, &o.check);
  } else {
    create_arg_table(r.L, argc, argv, o.script ? o.script : 0);
    if (will_prompt) r.history_path = cnn_history_path();
    rc = run(&r, &o, argc, argv);
  }
  if (rc) cnn_dist_shutdown(rc); /* under mpirun: a failed rank stops every rank now */
  fflush(stdout);
  lua_close(r.L);
  rc = cnn_dist_shutdown(rc); /* finalize MPI once nothing can use it */
  free(r.history_path);
  return rc;
}
