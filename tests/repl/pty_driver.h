/*
 * pty_driver.h -- drive a real program through a pseudo-terminal (forkpty),
 * as a user at a terminal would: send keys, wait for text to appear.
 *
 * Output is collected as it arrives; pty_expect() searches it from the
 * position after the previous match, with ANSI escape sequences and
 * carriage returns removed (readline redraws with them), and fails after
 * a timeout printing what it saw.  Used by test_repl_pty.c.
 */
#ifndef PTY_DRIVER_H
#define PTY_DRIVER_H
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct {
  pid_t pid;
  int fd;    /* master side; -1 once closed */
  char *raw; /* everything read, as is */
  size_t nraw, capraw;
  size_t mark; /* expect() searches the cleaned text from here */
} pty_proc;

/* Start argv[0] (a path) with `env` entries ("NAME=value") added to the
 * environment; the terminal is 80x24.  0 on success. */
int pty_spawn(pty_proc *p, char *const argv[], char *const env[]);
int pty_send(pty_proc *p, const char *keys);
/* Wait up to `timeout` seconds for `needle` in the cleaned output after the
 * mark; on success the mark moves past it.  0 found, -1 not. */
int pty_expect(pty_proc *p, const char *needle, double timeout);
/* True if `needle` occurs in the cleaned output after the mark, reading
 * whatever arrives within `timeout` seconds (the mark does not move). */
bool pty_saw(pty_proc *p, const char *needle, double timeout);
/* The raw output (escapes included) as a NUL-terminated string. */
const char *pty_raw(pty_proc *p);
/* Wait for the exit (killing after `timeout`); returns the wait status or -1. */
int pty_wait(pty_proc *p, double timeout);
void pty_close(pty_proc *p);
void pty_sleep(double seconds);
#endif
