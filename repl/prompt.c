/*
 * prompt.c -- the interactive prompt of cnnsh (GNU Readline) and the
 * chunk-by-chunk reader used for piped input.
 *
 * Design: readline's callback interface with our own pselect() loop, so a
 * Ctrl-C at the prompt (exec.c's handler only sets a flag; pselect returns
 * EINTR) is handled outside the signal handler: the line and any
 * unfinished multi-line statement are dropped and a fresh "> " appears.
 * Lines accumulate in a buffer until they compile (exec.c: "<eof>" in a
 * syntax error means "incomplete": continue with ">> ").  Commands (":...")
 * are recognised only at the start of a statement.
 *
 * Tab: readline finds its word with the break characters below; complete.c
 * finds its own (a path starts after the open quote) and the candidates
 * are re-based onto readline's word.  Lists show only the last component.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include <lauxlib.h>

#include "repl.h"

enum { READ_LINE, READ_EOF, READ_INTR };

static cnn_repl *active; /* the session Tab completes in */
static char *got_line;   /* set by on_line */
static bool got;

/* ---- a growable text buffer for statements ------------------------------------- */

typedef struct {
  char *p;
  size_t n, cap;
} text;

static bool text_add(text *t, const char *s, bool newline) {
  size_t len = strlen(s), need = t->n + len + 2;
  if (need > t->cap) {
    size_t cap = t->cap ? t->cap : 256;
    while (cap < need) cap *= 2;
    char *p = realloc(t->p, cap);
    if (p == NULL) return false;
    t->p = p;
    t->cap = cap;
  }
  if (newline && t->n > 0) t->p[t->n++] = '\n';
  memcpy(t->p + t->n, s, len + 1);
  t->n += len;
  return true;
}

static void text_clear(text *t) {
  t->n = 0;
  if (t->p) t->p[0] = '\0';
}

static bool is_command(const char *line) {
  line += strspn(line, " \t");
  return line[0] == ':' && line[1] != ':';
}

/* ---- completion glue ------------------------------------------------------------- */

/* A candidate from complete.c, re-based from its word start `mine` onto
 * readline's `start`. */
static char *rebased(const char *cand, int mine, int start) {
  if (mine == start) return strdup(cand);
  if (mine < start) { /* drop text readline keeps before its word */
    size_t drop = (size_t)(start - mine);
    return strdup(strlen(cand) >= drop ? cand + drop : "");
  }
  size_t extra = (size_t)(mine - start), n = strlen(cand); /* line text before ours */
  char *s = malloc(extra + n + 1);
  if (s) {
    memcpy(s, rl_line_buffer + start, extra);
    memcpy(s + extra, cand, n + 1);
  }
  return s;
}

static char **attempt(const char *text_, int start, int end) {
  (void)text_;
  rl_attempted_completion_over = 1; /* never fall back to file names */
  rl_completion_suppress_append = 1;
  rl_completion_suppress_quote = 1;
  cnn_strlist l = {0};
  int mine;
  cnn_complete(active->L, rl_line_buffer, end, &mine, &l);
  char **m = l.n ? calloc((size_t)l.n + 2, sizeof *m) : NULL;
  for (int i = 0; m && i < l.n; i++) m[i + 1] = rebased(l.v[i], mine, start);
  if (m) { /* m[0]: the longest common prefix */
    size_t lcd = strlen(m[1]);
    for (int i = 2; i <= l.n; i++)
      for (size_t k = 0; k < lcd; k++)
        if (m[i][k] != m[1][k]) {
          lcd = k;
          break;
        }
    m[0] = strndup(m[1], lcd);
    if (l.n == 1) {
      free(m[0]);
      m[0] = m[1];
      m[1] = NULL;
    }
  }
  cnn_strlist_clear(&l);
  return m;
}

/* Show candidates without their shared "a.b." or "dir/" head. */
static void display_matches(char **matches, int n, int maxlen) {
  (void)maxlen;
  size_t cut = 0;
  for (const char *p = matches[1]; p[0] && p[1]; p++) /* a trailing "/" is kept */
    if (*p == '.' || *p == ':' || *p == '/') cut = (size_t)(p - matches[1]) + 1;
  for (int i = 2; i <= n; i++)
    if (strncmp(matches[i], matches[1], cut) != 0) cut = 0;
  char **shown = calloc((size_t)n + 2, sizeof *shown);
  if (shown == NULL) return;
  int longest = 0;
  shown[0] = matches[0];
  for (int i = 1; i <= n; i++) {
    shown[i] = matches[i] + cut;
    int len = (int)strlen(shown[i]);
    longest = len > longest ? len : longest;
  }
  rl_display_match_list(shown, n, longest);
  rl_forced_update_display();
  free(shown);
}

static void setup_readline(cnn_repl *r) {
  active = r;
  rl_readline_name = "cnnsh";
  rl_catch_signals = 0; /* exec.c owns SIGINT */
  rl_catch_sigwinch = 1;
  rl_persistent_signal_handlers = 1; /* SIGWINCH also while waiting in pselect */
  rl_attempted_completion_function = attempt;
  rl_completion_display_matches_hook = display_matches;
  rl_basic_word_break_characters = " \t\n\"'`@$><=;|&{(,)}[]+-*/%^#~";
  rl_completer_word_break_characters = rl_basic_word_break_characters;
  rl_completer_quote_characters = "\"'";
}

/* ---- reading a line ------------------------------------------------------------------ */

static void on_line(char *line) {
  got_line = line;
  got = true;
  rl_callback_handler_remove();
}

static void cancel_line(void) {
  rl_free_line_state();
  rl_callback_sigcleanup();
  rl_replace_line("", 0);
  rl_point = rl_end = 0;
  rl_callback_handler_remove();
  fputs("^C\n", rl_outstream);
  fflush(rl_outstream);
}

/* One line; SIGINT stays blocked except inside pselect(), so a Ctrl-C is
 * seen at once wherever it lands. */
static int read_line(const char *prompt, char **out) {
  sigset_t block, orig;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigprocmask(SIG_BLOCK, &block, &orig);
  got = false;
  got_line = NULL;
  rl_callback_handler_install(prompt, on_line);
  int fd = fileno(rl_instream), result = READ_EOF;
  for (;;) {
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(fd, &fds);
    /* a timeout as well: the terminal's SIGINT goes to any thread that
     * does not block it, and OpenMP's workers (created while Lua code ran,
     * SIGINT unblocked) may take it.  Their handler now passes it on to
     * this thread (exec.c), where it waits for pselect; before that, a
     * flag set by a worker left pselect asleep (a CI run under ASan and
     * load saw the prompt cancel only when the next key came).  The
     * timeout stays as a second line: a flag is seen within 100 ms. */
    struct timespec recheck = {0, 100 * 1000 * 1000};
    int rc = pselect(fd + 1, &fds, NULL, NULL, &recheck, &orig);
    if (cnn_repl_take_prompt_sigint()) { /* also when input was seen first */
      cancel_line();
      result = READ_INTR;
      break;
    }
    if (rc == 0 || (rc < 0 && errno == EINTR)) continue;
    if (rc < 0) {
      rl_callback_handler_remove();
      break;
    }
    rl_callback_read_char();
    if (got) {
      *out = got_line;
      result = got_line ? READ_LINE : READ_EOF;
      break;
    }
  }
  sigprocmask(SIG_SETMASK, &orig, NULL);
  return result;
}

/* ---- the loops -------------------------------------------------------------------------- */

static void run_command(cnn_repl *r, const char *line) {
  cnn_history_add(r->history_path, line);
  cnn_repl_command(r, line);
  active = r; /* :reset replaced r->L; completion follows r */
}

int cnn_repl_run_prompt(cnn_repl *r) {
  setup_readline(r);
  cnn_repl_short_errors(true);
  cnn_history_load(r->history_path);
  printf("cnnsh %s (%s)  :help for help, Ctrl-D to exit\n", CNNSH_VERSION, LUA_RELEASE);
  fflush(stdout);
  text buf = {0};
  while (!r->quit) {
    char *line;
    int st = read_line(buf.n ? ">> " : "> ", &line);
    if (st == READ_EOF) {
      fputs("\n", stdout);
      break;
    }
    if (st == READ_INTR) {
      text_clear(&buf);
      continue;
    }
    if (buf.n == 0 && is_command(line)) {
      run_command(r, line);
      free(line);
      continue;
    }
    const char *hint = buf.n == 0 ? cnn_repl_typed_hint(r->L, line) : NULL;
    if (hint) {
      printf("%s\n", hint);
      fflush(stdout);
      cnn_history_add(r->history_path, line);
      free(line);
      continue;
    }
    bool ok = text_add(&buf, line, true);
    free(line);
    if (!ok) break;
    if (cnn_repl_eval(r->L, buf.p, r->color, r->color_err) == CNN_EVAL_INCOMPLETE) continue;
    cnn_history_add(r->history_path, buf.p);
    text_clear(&buf);
  }
  free(buf.p);
  cnn_history_trim(r->history_path);
  return 0;
}

/* A statement left unfinished at end of input: report its syntax error. */
static void report_unfinished(cnn_repl *r, const text *buf) {
  int status = luaL_loadbuffer(r->L, buf->p, buf->n, "=stdin");
  if (status == LUA_OK)
    lua_pop(r->L, 1);
  else
    cnn_repl_report(r->L, status, r->color_err);
}

int cnn_repl_run_stream(cnn_repl *r, FILE *in) {
  text buf = {0};
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  bool failed = false;
  cnn_repl_short_errors(true);
  while (!r->quit && !cnn_repl_interrupted() && (len = getline(&line, &cap, in)) >= 0) {
    if (len > 0 && line[len - 1] == '\n') line[len - 1] = '\0';
    if (buf.n == 0 && is_command(line)) {
      cnn_repl_command(r, line);
      continue;
    }
    const char *hint = buf.n == 0 ? cnn_repl_typed_hint(r->L, line) : NULL;
    if (hint) {
      printf("%s\n", hint);
      continue;
    }
    if (!text_add(&buf, line, true)) break;
    int st = cnn_repl_eval(r->L, buf.p, r->color, r->color_err);
    if (st == CNN_EVAL_INCOMPLETE) continue;
    failed = failed || st == CNN_EVAL_ERROR;
    text_clear(&buf);
  }
  if (buf.n > 0 && !cnn_repl_interrupted()) {
    report_unfinished(r, &buf);
    failed = true;
  }
  free(line);
  free(buf.p);
  fflush(stdout);
  return cnn_repl_interrupted() ? 130 : failed ? 1 : 0;
}
