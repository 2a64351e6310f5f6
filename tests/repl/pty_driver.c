/*
 * pty_driver.c -- see pty_driver.h.  forkpty() + poll() with deadlines.
 */
#include "pty_driver.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void pty_sleep(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

int pty_spawn(pty_proc *p, char *const argv[], char *const env[]) {
  memset(p, 0, sizeof *p);
  struct winsize ws = {.ws_row = 24, .ws_col = 80};
  p->pid = forkpty(&p->fd, NULL, NULL, &ws);
  if (p->pid < 0) return -1;
  if (p->pid == 0) {
    for (int i = 0; env && env[i]; i++) putenv(env[i]);
    execv(argv[0], argv);
    perror("execv");
    _exit(127);
  }
  fcntl(p->fd, F_SETFL, fcntl(p->fd, F_GETFL) | O_NONBLOCK);
  return 0;
}

/* Read what is available within `timeout` seconds; false at EOF. */
static bool pump(pty_proc *p, double timeout) {
  if (p->fd < 0) return false;
  struct pollfd pfd = {.fd = p->fd, .events = POLLIN};
  if (poll(&pfd, 1, (int)(timeout * 1000)) <= 0) return true;
  char tmp[4096];
  ssize_t n = read(p->fd, tmp, sizeof tmp);
  if (n <= 0) return !(n == 0 || (errno != EAGAIN && errno != EINTR));
  if (p->nraw + (size_t)n + 1 > p->capraw) {
    p->capraw = 2 * (p->nraw + (size_t)n + 1);
    p->raw = realloc(p->raw, p->capraw);
  }
  memcpy(p->raw + p->nraw, tmp, (size_t)n);
  p->nraw += (size_t)n;
  p->raw[p->nraw] = '\0';
  return true;
}

/* The output without escape sequences, CRs and BELs (malloc'd). */
static char *cleaned(const pty_proc *p) {
  char *out = malloc(p->nraw + 1);
  size_t j = 0;
  for (size_t i = 0; i < p->nraw; i++) {
    char c = p->raw[i];
    if (c == '\033' && i + 1 < p->nraw && p->raw[i + 1] == '[') {
      i += 2;
      while (i < p->nraw && !(p->raw[i] >= 0x40 && p->raw[i] <= 0x7e)) i++;
    } else if (c == '\033' && i + 1 < p->nraw && p->raw[i + 1] == ']') {
      while (i < p->nraw && p->raw[i] != '\a') i++;
    } else if (c == '\033') {
      i++; /* two-byte escape */
    } else if (c != '\r' && c != '\a') {
      out[j++] = c;
    }
  }
  out[j] = '\0';
  return out;
}

static const char *find_after_mark(pty_proc *p, const char *needle, char **text) {
  *text = cleaned(p);
  size_t len = strlen(*text);
  return strstr(*text + (p->mark < len ? p->mark : len), needle);
}

int pty_expect(pty_proc *p, const char *needle, double timeout) {
  double end = now() + timeout;
  for (;;) {
    char *text;
    const char *at = find_after_mark(p, needle, &text);
    if (at) {
      p->mark = (size_t)(at - text) + strlen(needle);
      free(text);
      return 0;
    }
    if (now() >= end || !pump(p, 0.05)) { /* timed out, or the program is gone */
      size_t len = strlen(text);
      fprintf(stderr, "pty: did not see \"%s\"; output after the mark:\n---\n%s\n---\n", needle,
              text + (p->mark < len ? p->mark : len));
      free(text);
      return -1;
    }
    free(text);
  }
}

bool pty_saw(pty_proc *p, const char *needle, double timeout) {
  double end = now() + timeout;
  while (now() < end && pump(p, 0.05)) {}
  char *text;
  bool found = find_after_mark(p, needle, &text) != NULL;
  free(text);
  return found;
}

const char *pty_raw(pty_proc *p) { return p->raw ? p->raw : ""; }

int pty_send(pty_proc *p, const char *keys) {
  size_t n = strlen(keys), done = 0;
  while (done < n) {
    ssize_t w = write(p->fd, keys + done, n - done);
    if (w < 0 && errno != EAGAIN && errno != EINTR) return -1;
    if (w > 0) done += (size_t)w;
    pump(p, 0.001);
  }
  return 0;
}

int pty_wait(pty_proc *p, double timeout) {
  double end = now() + timeout;
  int status;
  for (;;) {
    pid_t r = waitpid(p->pid, &status, WNOHANG);
    if (r == p->pid) {
      p->pid = 0;
      return status;
    }
    if (now() >= end) {
      kill(p->pid, SIGKILL);
      waitpid(p->pid, &status, 0);
      p->pid = 0;
      return -1;
    }
    pump(p, 0.02);
  }
}

void pty_close(pty_proc *p) {
  if (p->pid > 0) {
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
  }
  if (p->fd >= 0) close(p->fd);
  free(p->raw);
  memset(p, 0, sizeof *p);
  p->fd = -1;
}
