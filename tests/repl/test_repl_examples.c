/*
 * test_repl_examples.c -- every example of the README and of help()'s
 * topics, typed line by line at the real prompt through a pty (issue 20,
 * point 8).  typed_examples.lua lists the lines; each is sent as keys and
 * the next prompt awaited; at the end ":bt" must say that no error
 * happened in the session (every error, syntax errors included, becomes
 * the last one :bt shows).  Exit 77 (skipped) without Fashion-MNIST, which
 * the README's training example loads.
 *
 *   test_repl_examples path/to/cnnsh README.md typed_examples.lua
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "pty_driver.h"

#define LINE_TIMEOUT 300.0 /* a training loop on a busy machine */
#define FMNIST       "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"

static char tmpdir[] = "/tmp/cnnsh_examples_XXXXXX";

static FILE *open_lines(const char *cnnsh, const char *readme, const char *lister) {
  char cmd[13000];
  snprintf(cmd, sizeof cmd, "NO_COLOR=1 '%s' '%s' '%s'", cnnsh, lister, readme);
  return popen(cmd, "r");
}

static int start(pty_proc *p, const char *cnnsh) {
  static char env_hist[4200], env_home[4200];
  snprintf(env_hist, sizeof env_hist, "CNNSH_HISTORY=%s/history", tmpdir);
  snprintf(env_home, sizeof env_home, "HOME=%s", tmpdir);
  char *env[] = {env_hist, env_home, "TERM=xterm", "NO_COLOR=1", NULL};
  char *argv[] = {(char *)cnnsh, NULL};
  if (chdir(tmpdir) != 0 || pty_spawn(p, argv, env) != 0) return -1;
  return pty_expect(p, "> ", 15.0);
}

/* Type every listed line; returns the number typed. */
static int type_lines(pty_proc *p, FILE *in) {
  char line[4096], block[4096] = "";
  int typed = 0;
  while (fgets(line, sizeof line, in)) {
    line[strcspn(line, "\n")] = '\0';
    if (strncmp(line, "#BLOCK ", 7) == 0) {
      snprintf(block, sizeof block, "%s", line + 7);
      continue;
    }
    strncat(line, "\r", sizeof line - strlen(line) - 1);
    pty_send(p, line);
    typed++;
    if (pty_expect(p, "\n>", LINE_TIMEOUT) != 0) {
      fprintf(stderr, "no prompt after a line of %s: %s\n", block, line);
      check_failures++;
      return typed;
    }
  }
  return typed;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s cnnsh README.md typed_examples.lua\n", argv[0]);
    return 2;
  }
  if (access(FMNIST, R_OK) != 0) {
    fprintf(stderr, "Fashion-MNIST is not installed: skipped\n");
    return 77;
  }
  char cnnsh[4096], readme[4096], lister[4096];
  if (!realpath(argv[1], cnnsh) || !realpath(argv[2], readme) || !realpath(argv[3], lister) ||
      !mkdtemp(tmpdir)) {
    perror("test_repl_examples");
    return 1;
  }
  FILE *in = open_lines(cnnsh, readme, lister);
  pty_proc p;
  CHECK(in != NULL);
  if (in && start(&p, cnnsh) == 0) {
    int typed = type_lines(&p, in);
    CHECK(typed > 20);
    pty_send(&p, ":bt\r");
    if (pty_expect(&p, "no error yet in this session", 15.0) != 0) {
      fprintf(stderr, "an example failed; the whole session:\n%s\n", pty_raw(&p));
      check_failures++;
    }
    pty_send(&p, ":quit\r");
    int status = pty_wait(&p, 15.0);
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    pty_close(&p);
    printf("typed %d lines\n", typed);
  } else {
    check_failures++;
  }
  if (in) pclose(in);
  char cmd[4300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
  return check_report("repl_examples");
}
