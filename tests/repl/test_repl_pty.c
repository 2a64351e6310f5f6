/*
 * test_repl_pty.c -- the cnnsh prompt driven through a pseudo-terminal, as
 * a user types: multi-line input, Tab completion, Ctrl-C during an endless
 * loop and at the prompt, history across two sessions, commands, -i, and
 * colour on a terminal.  Usage: test_repl_pty path/to/cnnsh
 *
 * Each case starts a fresh cnnsh with HOME and CNNSH_HISTORY in a
 * temporary folder, so nothing of the user's is read or written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "pty_driver.h"

#define T 15.0 /* seconds to wait for any expected text (busy CI machines) */

static const char *cnnsh;
static char tmpdir[] = "/tmp/cnnsh_pty_XXXXXX";

/* Start cnnsh with extra args (NULL-terminated) and a history file. */
static int start(pty_proc *p, const char *history, bool color, const char *a1, const char *a2) {
  static char env_hist[4200], env_home[4200];
  snprintf(env_hist, sizeof env_hist, "CNNSH_HISTORY=%s/%s", tmpdir, history);
  snprintf(env_home, sizeof env_home, "HOME=%s", tmpdir);
  char *env[] = {env_hist, env_home, "TERM=xterm", color ? "NO_COLOR=" : "NO_COLOR=1", NULL};
  char *argv[] = {(char *)cnnsh, (char *)a1, (char *)a2, NULL};
  int rc = pty_spawn(p, argv, env);
  CHECK(rc == 0);
  if (rc == 0) CHECK(pty_expect(p, "> ", T) == 0);
  return rc;
}

/* Ctrl-D at an empty prompt.  It must reach readline: sent while code
 * still runs, the terminal is in canonical mode and eats it. */
static void quit(pty_proc *p) {
  pty_send(p, "'qu' .. 'it'\r");
  CHECK(pty_expect(p, "\"quit\"", T) == 0);
  CHECK(pty_expect(p, "> ", T) == 0);
  pty_send(p, "\004");
  int status = pty_wait(p, T);
  CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (!(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0))
    fprintf(stderr, "exit: status %#x; output:\n%s\n", status, pty_raw(p));
  pty_close(p);
}

static void test_multiline(void) {
  pty_proc p;
  if (start(&p, "h_multi", false, NULL, NULL)) return;
  pty_send(&p, "function twice(a)\r");
  CHECK(pty_expect(&p, ">> ", T) == 0);
  pty_send(&p, "  return a * 2\r");
  CHECK(pty_expect(&p, ">> ", T) == 0);
  pty_send(&p, "end\r");
  CHECK(pty_expect(&p, "> ", T) == 0);
  pty_send(&p, "twice(21)\r");
  CHECK(pty_expect(&p, "42", T) == 0);
  pty_send(&p, "t = {\r");
  CHECK(pty_expect(&p, ">> ", T) == 0);
  pty_send(&p, "'x', n = 3}\r");
  pty_send(&p, "t\r");
  CHECK(pty_expect(&p, "{\"x\", n = 3}", T) == 0);
  pty_send(&p, "error('boom')\r");
  CHECK(pty_expect(&p, "stdin:1: boom", T) == 0);
  CHECK(pty_expect(&p, "at stdin:1  (:bt shows the traceback)", T) == 0);
  CHECK(!pty_saw(&p, "stack traceback", 0.3)); /* at the prompt: on demand */
  pty_send(&p, ":bt\r");
  CHECK(pty_expect(&p, "stack traceback", T) == 0);
  pty_send(&p, "twice(2)\r"); /* the session lives on */
  CHECK(pty_expect(&p, "4", T) == 0);
  quit(&p);
}

/* What people coming from PyTorch or a lab sheet type. */
static void test_typed_as_people_do(void) {
  pty_proc p;
  if (start(&p, "h_people", false, NULL, NULL)) return;
  /* a module call prints its one result, no trailing nils */
  pty_send(&p, "m = nn.Sequential(nn.ReLU()); m(cnn.ones(2))\r");
  CHECK(pty_expect(&p, "[cnn.Tensor 2 float32 cpu]", T) == 0);
  CHECK(pty_expect(&p, "> ", T) == 0);
  CHECK(!pty_saw(&p, "nil", 0.3));
  /* "statement; expression" prints the expression */
  pty_send(&p, "out = m(cnn.ones(2, 3)); out:sum()\r");
  CHECK(pty_expect(&p, "6", T) == 0);
  CHECK(pty_expect(&p, "\n> ", T) == 0);
  /* an unterminated short string is an error at once, not ">>" */
  pty_send(&p, "s = \"abc\r");
  CHECK(pty_expect(&p, "unfinished string", T) == 0);
  CHECK(pty_expect(&p, "\n> ", T) == 0);
  /* so is a statement that cannot become valid */
  pty_send(&p, "x = 1 out.shape\r");
  CHECK(pty_expect(&p, "syntax error", T) == 0);
  CHECK(pty_expect(&p, "\n> ", T) == 0);
  /* a trailing operator and an open bracket continue */
  pty_send(&p, "y = 40 +\r");
  CHECK(pty_expect(&p, ">> ", T) == 0);
  pty_send(&p, "2\r");
  pty_send(&p, "print(y,\r");
  CHECK(pty_expect(&p, ">> ", T) == 0);
  pty_send(&p, "'done')\r");
  CHECK(pty_expect(&p, "42\tdone", T) == 0);
  /* a top-level local lives on, as a session variable */
  pty_send(&p, "local q = 5\r");
  pty_send(&p, "q\r");
  CHECK(pty_expect(&p, "5", T) == 0);
  pty_send(&p, "local function twice(v) return 2 * v end\r");
  pty_send(&p, "twice(q)\r");
  CHECK(pty_expect(&p, "10", T) == 0);
  pty_send(&p, "rawget(_G, 'q')\r");
  CHECK(pty_expect(&p, "nil", T) == 0);
  /* errors: the message, then the user's own frame; stdlib errors name the
   * line typed, not stdlib/check.lua */
  pty_send(&p, "function build() local c = nn.Conv2d(1, 2, 3, {paddding = 1}); return c end\r");
  pty_send(&p, "build()\r");
  CHECK(pty_expect(&p, "stdin:1: nn.Conv2d: unknown option 'paddding'", T) == 0);
  CHECK(pty_expect(&p, "at stdin:1, in function 'build'  (:bt shows the traceback)", T) == 0);
  pty_send(&p, ":bt\r");
  CHECK(pty_expect(&p, "stdlib/check.lua", T) == 0); /* the whole traceback on demand */
  /* PyTorch habits get hints */
  pty_send(&p, "t = cnn.zeros(3); t[0]\r");
  CHECK(pty_expect(&p, "indices are 1-based (1..3; -1 is the last)", T) == 0);
  pty_send(&p, "t.view(-1)\r");
  CHECK(pty_expect(&p, "hint: call methods with ':' -- x:view(...)", T) == 0);
  pty_send(&p, "lin = nn.Linear(2, 3); lin.train()\r");
  CHECK(pty_expect(&p, "hint: call methods with ':' -- x:train(...)", T) == 0);
  pty_send(&p, "torch.randn(2)\r");
  CHECK(pty_expect(&p, "hint: there is no torch here: tensors are cnn.*", T) == 0);
  pty_send(&p, "t > 0\r");
  CHECK(pty_expect(&p, "use x:gt(0)", T) == 0);
  pty_send(&p, "t == cnn.zeros(3)\r");
  CHECK(pty_expect(&p, "false", T) == 0);
  CHECK(pty_expect(&p, "x:eq(y) compares elementwise", T) == 0);
  pty_send(&p, "nn.Conv2d(1, 32, 3, padding=1)\r");
  CHECK(pty_expect(&p, "pass options in a table: nn.Conv2d(1, 32, 3, {padding=1})", T) == 0);
  pty_send(&p, "nn.MaxPool2d(2, 2)\r");
  CHECK(pty_expect(&p, "as in nn.MaxPool2d(..., {stride = 2})", T) == 0);
  pty_send(&p, "exit\r");
  CHECK(pty_expect(&p, "to leave cnnsh, type :quit or press Ctrl-D", T) == 0);
  pty_send(&p, "40 + 2\r");
  CHECK(pty_expect(&p, "42", T) == 0);
  pty_send(&p, "_ + 1\r"); /* _ is the last printed value */
  CHECK(pty_expect(&p, "43", T) == 0);
  quit(&p);
}

static void test_completion(void) {
  pty_proc p;
  if (start(&p, "h_complete", false, NULL, NULL)) return;
  /* unique: the rest of the name and "(" are inserted */
  pty_send(&p, "string.fo\t");
  CHECK(pty_expect(&p, "string.format(", T) == 0);
  pty_send(&p, "'<%d>', 7)\r");
  CHECK(pty_expect(&p, "\"<7>\"", T) == 0);
  /* a table gets "." */
  pty_send(&p, "mytab = {alpha = 1, beta = {gamma = 2}}\r");
  pty_send(&p, "mytab.be\tga\t\r");
  CHECK(pty_expect(&p, "mytab.beta.gamma", T) == 0);
  CHECK(pty_expect(&p, "2", T) == 0);
  /* methods through the string metatable; two Tabs list the choices */
  pty_send(&p, "s = 'abc'\r");
  pty_send(&p, "s:up\t");
  CHECK(pty_expect(&p, "s:upper(", T) == 0);
  pty_send(&p, ")\r");
  CHECK(pty_expect(&p, "\"ABC\"", T) == 0);
  pty_send(&p, "string.s\t\t");
  CHECK(pty_expect(&p, "sub(", T) == 0);
  pty_send(&p, "\025"); /* Ctrl-U: drop the line */
  /* file names inside a string literal */
  char path[4200], keys[4400];
  snprintf(path, sizeof path, "%s/comp_target.lua", tmpdir);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (f) {
    fputs("comp_ok = 'yes'\n", f);
    fclose(f);
  }
  snprintf(keys, sizeof keys, "dofile(\"%s/comp_ta\t\")\r", tmpdir);
  pty_send(&p, keys);
  CHECK(pty_expect(&p, "comp_target.lua\")", T) == 0);
  pty_send(&p, "comp_ok\r");
  CHECK(pty_expect(&p, "\"yes\"", T) == 0);
  /* commands */
  pty_send(&p, ":me\t\r");
  CHECK(pty_expect(&p, ":mem", T) == 0);
  /* tensors: x:su<TAB><TAB> offers sum (when the bindings are built in) */
  pty_send(&p, "print(cnn and cnn.zeros and 'have' .. 'tensors' or 'none')\r");
  CHECK(pty_expect(&p, "\n", T) == 0);
  if (pty_saw(&p, "havetensors", 2.0)) {
    pty_send(&p, "x = cnn.zeros(2, 3)\r");
    pty_send(&p, "x:su\t\t");
    CHECK(pty_expect(&p, "sum(", T) == 0);
    pty_send(&p, "\025x:nume\t)\r");
    CHECK(pty_expect(&p, "x:numel()", T) == 0);
    CHECK(pty_expect(&p, "6", T) == 0);
    pty_send(&p, "x.sha\t\r"); /* after ".": fields */
    CHECK(pty_expect(&p, "{2, 3}", T) == 0);
    pty_send(&p, "lin = nn.Linea\t2, 3)\r"); /* a class completes with "(" */
    CHECK(pty_expect(&p, "lin = nn.Linear(2, 3)", T) == 0);
    pty_send(&p, "lin.wei\t.shape\r");
    CHECK(pty_expect(&p, "{3, 2}", T) == 0);
  }
  quit(&p);
}

static void test_interrupt(void) {
  pty_proc p;
  if (start(&p, "h_intr", false, NULL, NULL)) return;
  pty_send(&p, "y = 7\r");
  pty_send(&p, "while true do end\r");
  pty_sleep(0.5);
  pty_send(&p, "\003"); /* Ctrl-C while running */
  CHECK(pty_expect(&p, "interrupted!", T) == 0);
  CHECK(pty_expect(&p, "> ", T) == 0);
  pty_send(&p, "y + 1\r");
  CHECK(pty_expect(&p, "8", T) == 0);
  /* a long C kernel (the naive convolution polls the interrupt flag) */
  pty_send(&p, "print(F and F.conv2d and cnn.set_conv_algo and 'have' .. 'conv' or 'none')\r");
  CHECK(pty_expect(&p, "\n", T) == 0);
  if (pty_saw(&p, "haveconv", 2.0)) {
    pty_send(&p, "cnn.set_conv_algo('naive'); xc = cnn.randn(16, 64, 64, 64);"
                 " wc = cnn.randn(64, 64, 3, 3); print('re' .. 'ady')\r");
    CHECK(pty_expect(&p, "ready", T) == 0);
    CHECK(pty_expect(&p, "> ", T) == 0);
    pty_send(&p, "yc = F.conv2d(xc, wc)\r"); /* seconds of work */
    pty_sleep(0.5);
    pty_send(&p, "\003");
    CHECK(pty_expect(&p, "interrupted", 5.0) == 0);
    CHECK(pty_expect(&p, "> ", T) == 0);
    pty_send(&p, "print(yc == nil, xc:size(1))\r");
    CHECK(pty_expect(&p, "true\t16", T) == 0);
  }
  /* Ctrl-C at the prompt clears the line (the half-typed text never runs) */
  pty_send(&p, "error('should not run')");
  pty_sleep(0.2);
  pty_send(&p, "\003");
  CHECK(pty_expect(&p, "^C", T) == 0);
  pty_send(&p, "'after' .. 'clear'\r");
  CHECK(pty_expect(&p, "\"afterclear\"", T) == 0);
  CHECK(!pty_saw(&p, "should not run\n", 0.2));
  /* ... and drops an unfinished multi-line statement */
  pty_send(&p, "for i = 1, 3 do\r");
  CHECK(pty_expect(&p, ">> ", T) == 0);
  pty_send(&p, "\003");
  CHECK(pty_expect(&p, "^C", T) == 0); /* keys typed within the same instant may go with it */
  pty_send(&p, "y * 3\r");
  CHECK(pty_expect(&p, "21", T) == 0);
  quit(&p);
}

/* Count lines of a file that equal `line`. */
static int count_lines(const char *path, const char *line) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char buf[1024];
  int n = 0;
  while (fgets(buf, sizeof buf, f)) {
    buf[strcspn(buf, "\n")] = '\0';
    n += strcmp(buf, line) == 0;
  }
  fclose(f);
  return n;
}

static void test_history(void) {
  pty_proc p;
  if (start(&p, "h_hist", false, NULL, NULL)) return;
  pty_send(&p, "hist_marker = 123\r");
  pty_send(&p, "hist_marker = 123\r"); /* a repeat: kept once */
  pty_send(&p, "for i = 1, 2 do\r");
  pty_send(&p, "  hist_sum = (hist_sum or 0) + i end\r");
  pty_send(&p, "'done' .. 'typing'\r");
  CHECK(pty_expect(&p, "donetyping", T) == 0);
  quit(&p);
  char path[4200];
  snprintf(path, sizeof path, "%s/h_hist", tmpdir);
  CHECK(count_lines(path, "hist_marker = 123") == 1);
  /* second session: Up arrow recalls the entries, newest first; the file
   * holds hist_marker, the for loop, 'done'.., 'qu'..'it' (from quit()) */
  if (start(&p, "h_hist", false, NULL, NULL)) return;
  pty_send(&p, "\033[A\033[A\033[A");
  CHECK(pty_expect(&p, "hist_sum = (hist_sum or 0) + i end", T) == 0);
  pty_send(&p, "\r");
  pty_send(&p, "hist_sum\r");
  CHECK(pty_expect(&p, "3", T) == 0);
  /* now: hist_marker, for, 'done', 'quit', for, hist_sum */
  pty_send(&p, "\033[A\033[A\033[A\033[A\033[A\033[A\r");
  pty_send(&p, "hist_marker\r");
  CHECK(pty_expect(&p, "123", T) == 0);
  quit(&p);
}

static void test_commands(void) {
  pty_proc p;
  if (start(&p, "h_cmd", false, NULL, NULL)) return;
  pty_send(&p, ":help\r");
  CHECK(pty_expect(&p, ":time", T) == 0);
  CHECK(pty_expect(&p, "> ", T) == 0);
  pty_send(&p, ":time 1 + 1\r");
  CHECK(pty_expect(&p, "min ", T) == 0);
  CHECK(pty_expect(&p, ", median ", T) == 0);
  CHECK(pty_expect(&p, ", max ", T) == 0);
  CHECK(pty_expect(&p, "\n> ", T) == 0);
  CHECK(!pty_saw(&p, "a statement", 0.2)); /* an expression: nothing to say */
  /* a statement runs as often as it is timed, and says so */
  pty_send(&p, "timed = 0\r");
  pty_send(&p, ":time timed = timed + 1\r");
  CHECK(pty_expect(&p, "(a statement: it ran ", T) == 0);
  CHECK(pty_expect(&p, " times, and what it did stays done)", T) == 0);
  pty_send(&p, "timed > 3\r");
  CHECK(pty_expect(&p, "true", T) == 0);
  pty_send(&p, "keep = 5\r");
  pty_send(&p, ":reset\r");
  CHECK(pty_expect(&p, "fresh Lua state", T) == 0);
  pty_send(&p, "keep == nil\r");
  CHECK(pty_expect(&p, "true", T) == 0);
  pty_send(&p, ":bogus\r");
  CHECK(pty_expect(&p, "unknown command :bogus", T) == 0);
  pty_send(&p, ":quit\r");
  int status = pty_wait(&p, T);
  CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  pty_close(&p);
}

static void test_dash_i_and_color(void) {
  char script[4200];
  snprintf(script, sizeof script, "%s/init.lua", tmpdir);
  FILE *f = fopen(script, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs("from_script = 'loaded'\n", f);
  fclose(f);
  pty_proc p;
  if (start(&p, "h_i", true, "-i", script)) return;
  pty_send(&p, "from_script\r");
  CHECK(pty_expect(&p, "loaded", T) == 0);
  /* on a terminal without NO_COLOR, strings are green */
  CHECK(strstr(pty_raw(&p), "\033[32m\"loaded\"") != NULL);
  quit(&p);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s path/to/cnnsh\n", argv[0]);
    return 2;
  }
  cnnsh = argv[1];
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  test_multiline();
  test_typed_as_people_do();
  test_completion();
  test_interrupt();
  test_history();
  test_commands();
  test_dash_i_and_color();
  char cmd[4300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
  return check_report("repl_pty");
}
