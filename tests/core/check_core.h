/*
 * check_core.h -- check.h's helpers that need core (cnn.h): for the unit
 * tests of tests/core, which link cnn_core (check.c itself does not, so
 * the repl and gpu-module tests can share it).  Static inline only.
 */
#ifndef CNN_TEST_CHECK_CORE_H
#define CNN_TEST_CHECK_CORE_H

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "cnn.h"

/* A call that had to fail: `failed` true and core's message (cnn_error())
 * containing `msg`; otherwise counts a failure and prints both. */
static inline int check_error(int failed, const char *msg) {
  check_count++;
  if (failed && strstr(cnn_error(), msg)) return 1;
  check_failures++;
  if (!failed)
    fprintf(stderr, "expected an error with \"%s\", but the call succeeded\n", msg);
  else
    fprintf(stderr, "expected an error with \"%s\", got \"%s\"\n", msg, cnn_error());
  return 0;
}

#endif
