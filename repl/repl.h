/*
 * repl.h -- the one header of repl/: the parts of the cnnsh program that
 * tests can link without a terminal (library cnn_repl), and the session
 * object that main.c drives.
 *
 * Pieces, in the order a typed line flows through them:
 *   prompt.c    readline (callback interface), Ctrl-C at the prompt,
 *               multi-line continuation, Tab glue
 *   chunk.c     a lexer's view of typed text: can it continue, where a
 *               top-level ";" splits it, its top-level `local`s
 *   session.c   top-level locals typed at the prompt live on
 *   hints.c     hints for PyTorch and Python habits
 *   history.c   the history file: path, load + cap, append
 *   complete.c  completion candidates from a Lua state, raw access only
 *   exec.c      compiling "return <line>", "<stmts>; return <expr>" or
 *               <line>, protected calls with a traceback, SIGINT while
 *               code runs (a Lua hook, as lua.c)
 *   print.c     pretty printer of results (tables, strings, tensors, ...)
 *   commands.c  :help :time :mem :load :reset :quit
 *   check.c     cnnsh --check: a lab's exercises, each in a forked child
 *               under time and memory limits (the checker is labcheck.lua)
 *   main.c      options, script mode, piped mode
 *
 * Invariants: completion never runs user code (no metamethod is called
 * except loading a lazily-required stdlib module); printing may run
 * __tostring (a result is shown the way the user's type wants), always
 * inside a protected call.  Only exec.c touches signal dispositions.
 */
#ifndef CNN_REPL_H
#define CNN_REPL_H

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* ---- the session --------------------------------------------------------- */

typedef struct cnn_repl {
  lua_State *L;       /* current state; replaced by :reset */
  bool color;         /* ANSI colour on stdout */
  bool color_err;     /* ANSI colour on stderr */
  bool ascii;         /* --ascii: set cnn.ascii = true in every state */
  bool quit;          /* :quit was typed */
  char *history_path; /* NULL: no history file */
} cnn_repl;

/* A fresh Lua state with the standard libraries and cnn_lua_open_all();
 * NULL (and a message on stderr) if it cannot be made. */
lua_State *cnn_repl_newstate(bool ascii);

/* ---- string lists (complete.c) --------------------------------------------- */

typedef struct {
  char **v; /* malloc'd strings */
  int n, cap;
} cnn_strlist;

int cnn_strlist_add(cnn_strlist *l, const char *s, size_t len); /* copies; -1 on OOM */
void cnn_strlist_clear(cnn_strlist *l);
void cnn_strlist_sort_unique(cnn_strlist *l);

/* ---- chunk.c: typed text before it is compiled ------------------------------ */

typedef struct {
  size_t at, del;  /* replace code[at, at + del) ... */
  const char *ins; /* ... by this (a static string) */
} cnn_edit;

typedef struct {
  bool can_continue;  /* an open block, bracket or long string, or a trailing operator */
  long split;         /* offset of the last top-level ";" with code after it, or -1 */
  cnn_strlist names;  /* identifiers used as variables (sorted, unique) */
  cnn_strlist locals; /* names declared by the top-level `local`s rewritten below */
  cnn_edit *edits;    /* sorted by offset: top-level `local` statements -> assignments */
  int nedits, capedits;
} cnn_chunk;

/* Scan code (never fails on bad Lua); -1 when out of memory. */
int cnn_chunk_scan(const char *code, size_t len, cnn_chunk *c);
void cnn_chunk_free(cnn_chunk *c);
/* code with c's edits and `extra` (NULL: none) applied; malloc'd. */
char *cnn_chunk_rewrite(const char *code, size_t len, const cnn_chunk *c, const cnn_edit *extra,
                        size_t *outlen);

/* The text with the first call using PyTorch's keyword arguments rewritten
 * to pass a table: "f(1, padding=1)" -> "f(1, {padding=1})"; NULL if none. */
char *cnn_chunk_keyword_call(const char *code, size_t len);

/* ---- hints.c: for habits from PyTorch and Python ------------------------------ */

/* msg, with a hint added when it comes from a method called with "." or
 * from `torch`; pushed.  Call from a message handler (it reads the stack). */
const char *cnn_repl_push_hinted(lua_State *L, const char *msg);
/* Replace the syntax error on top with one that shows keyword arguments
 * passed as a table, when `code` has them; returns the message on top. */
const char *cnn_repl_push_syntax_hint(lua_State *L, const char *code);
/* "exit", "quit()" ... typed alone (and not defined): the hint, else NULL. */
const char *cnn_repl_typed_hint(lua_State *L, const char *line);

/* ---- session.c: top-level locals typed at the prompt live on ----------------- */

/* Compile the scanned chunk as a function over the session's variables:
 * `head` and `tail` around the rewritten code, `extra` one more edit (NULL:
 * none).  Pushes the function (LUA_OK) or an error message. */
#define CNN_SESSION_VALUES "__cnnsh_values" /* the wrapper's identity function */
int cnn_session_load(lua_State *L, const char *code, size_t len, const char *chunkname,
                     const cnn_chunk *c, const cnn_edit *extra, const char *head, const char *tail);
/* After the function at fidx ran without error: its new names become
 * session variables. */
void cnn_session_commit(lua_State *L, int fidx);
/* Push the value of session variable `name` (raw: runs nothing); false
 * (nothing pushed) when there is none. */
bool cnn_session_push(lua_State *L, const char *name, size_t len);

/* ---- exec.c: running code ------------------------------------------------- */

enum { CNN_EVAL_OK = 0, CNN_EVAL_ERROR = 1, CNN_EVAL_INCOMPLETE = 2 };

/* The prompt (and piped input) print an error as its message and the
 * frame of the user's own code, keeping the traceback for :bt (registry
 * field CNN_LAST_TRACEBACK); scripts print a traceback.  Either way an
 * error raised inside the stdlib names the user's call site. */
#define CNN_LAST_TRACEBACK "cnnsh.last_traceback"
void cnn_repl_short_errors(bool on);
/* Install the SIGINT handler.  In script mode a second Ctrl-C kills the
 * process; at the prompt it is routed to prompt.c while no code runs. */
void cnn_repl_signals_init(bool script_mode);
void cnn_repl_signals_set_state(lua_State *L);
/* Call the function below `narg` arguments with a traceback handler and
 * SIGINT armed; LUA_MULTRET allowed.  Returns a lua_pcall status. */
int cnn_repl_docall(lua_State *L, int narg, int nres);
/* Print the error on top of the stack to stderr (and pop it); status 0
 * prints nothing.  Returns status. */
int cnn_repl_report(lua_State *L, int status, bool color);
/* True once a SIGINT interrupted running code (script mode: exit 130). */
bool cnn_repl_interrupted(void);
/* Prompt side: a SIGINT arrived while no code ran; reading clears it. */
bool cnn_repl_take_prompt_sigint(void);
/* Compile a chunk typed at the prompt: "return <code>" first, then
 * "<stmts>; return <expr>" split at the last top-level ";", then <code>,
 * over the session's variables (session.c).  Returns LUA_OK with the
 * function pushed, CNN_EVAL_INCOMPLETE (nothing pushed) when the input can
 * still become valid (chunk.c), or LUA_ERRSYNTAX with the message pushed.
 * Call cnn_session_commit() on the function once it ran without error. */
int cnn_repl_compile(lua_State *L, const char *code, size_t len, const char *name);
/* Compile, run and print the results of one complete chunk; returns
 * CNN_EVAL_OK, CNN_EVAL_ERROR or CNN_EVAL_INCOMPLETE. */
int cnn_repl_eval(lua_State *L, const char *code, bool color, bool color_err);

/* ---- print.c: results ------------------------------------------------------ */

typedef struct {
  bool color;    /* ANSI colours */
  int max_depth; /* tables nested deeper print as {...} */
  int max_items; /* entries shown per table before "... (n more)" */
  int width;     /* a table prints on one line when it fits */
} cnn_print_opts;

void cnn_print_opts_init(cnn_print_opts *o, bool color);
/* Push a readable rendering of the value at idx and return it.  May raise
 * (a failing __tostring); call it inside a protected call. */
const char *cnn_repl_format(lua_State *L, int idx, const cnn_print_opts *o);
/* Print the values at [first, top] on stdout, tab-separated (one per line
 * when any of them spans lines).  May raise, like cnn_repl_format. */
void cnn_repl_print_values(lua_State *L, int first, const cnn_print_opts *o);

/* ---- complete.c: Tab ------------------------------------------------------- */

typedef enum {
  CNN_COMPLETE_EXPR,    /* a.b.c / a:b / a global name */
  CNN_COMPLETE_COMMAND, /* :he */
  CNN_COMPLETE_PATH,    /* inside an open string literal, or after :load */
  CNN_COMPLETE_NONE
} cnn_complete_kind;

/* Where the word under completion starts in line[0, point), and its kind. */
cnn_complete_kind cnn_complete_context(const char *line, int point, int *start);
/* Candidates (full replacements of `word`) for each kind. */
int cnn_complete_expr(lua_State *L, const char *word, cnn_strlist *out);
int cnn_complete_command(const char *word, cnn_strlist *out);
int cnn_complete_path(const char *word, cnn_strlist *out);
/* All of the above: sets *start and fills out (sorted, unique). */
int cnn_complete(lua_State *L, const char *line, int point, int *start, cnn_strlist *out);

/* ---- history.c ------------------------------------------------------------- */

#define CNN_HISTORY_MAX 1000

/* $CNNSH_HISTORY, else $XDG_STATE_HOME/cnnsh/history (folder created),
 * else ~/.cnnsh_history; malloc'd, NULL when no home is known. */
char *cnn_history_path(void);
/* Load the file into readline's history, capped and with consecutive
 * duplicates collapsed (the file is rewritten when that changed it). */
int cnn_history_load(const char *path);
/* Add one entry (it may span lines) unless it repeats the last one, and
 * append it to the file at once (so concurrent sessions interleave). */
int cnn_history_add(const char *path, const char *entry);
/* Rewrite the file keeping its last CNN_HISTORY_MAX entries, if longer. */
int cnn_history_trim(const char *path);

/* ---- commands.c ------------------------------------------------------------ */

/* Run a ":command" line; returns 1 if it was one (even a failing one),
 * 0 if the line is not a command. */
int cnn_repl_command(cnn_repl *r, const char *line);
/* Names, for completion and :help: NULL-terminated ":help", ... */
extern const char *const cnn_repl_command_names[];

/* Statistics of :time samples (seconds), exposed for tests. */
double cnn_time_median(double *v, int n);             /* sorts v */
double cnn_time_quantile(double *v, int n, double q); /* sorts v; q in [0, 1] */
/* Do the samples disagree so much that the machine looks busy? (sorts v) */
bool cnn_time_busy(double *v, int n);
/* "12.3 ms", "850 ns", ... into buf (at least 32 bytes). */
const char *cnn_time_str(double seconds, char *buf, size_t size);
const char *cnn_bytes_str(double bytes, char *buf, size_t size);

/* ---- prompt.c -------------------------------------------------------------- */

/* The interactive loop on a terminal, until Ctrl-D or :quit. */
int cnn_repl_run_prompt(cnn_repl *r);
/* Read chunks from a stream (no prompt, no echo), run each and print its
 * results; returns 1 if any chunk failed (or 130 on SIGINT), else 0. */
int cnn_repl_run_stream(cnn_repl *r, FILE *in);

/* ---- check.c: cnnsh --check (labs/README.md) ------------------------------- */

typedef struct {
  const char *file;   /* the student's lab file */
  const char *checks; /* --checks FILE or DIR; NULL: found from the file's name */
  bool json;          /* --json: one JSON object on stdout */
} cnn_check_opts;

/* Run the checks; returns the number of failed exercises (capped at 125),
 * or 2 after printing why the checks could not run at all. */
int cnn_repl_check(cnn_repl *r, const cnn_check_opts *o);

/* launch.c: exec mpirun with N copies of this cnnsh and argv without the
 * --nproc option at argv[skip_at .. skip_at+skip_len); returns 2 on failure */
int cnn_launch_ranks(int nproc, int argc, char **argv, int skip_at, int skip_len);

#endif
