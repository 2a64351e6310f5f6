/*
 * bench/bench_clock.h -- what the by-hand C harnesses in bench/ share to
 * time things: a monotonic clock in seconds and a qsort comparison for
 * taking medians.  Header-only (each harness is one file built by hand).
 */
#ifndef CNNSH_BENCH_CLOCK_H
#define CNNSH_BENCH_CLOCK_H

#include <time.h>

static inline double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* qsort's comparison of doubles, ascending */
static inline int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#endif
