/*
 * check.h -- the tiny assertion kit of the C unit tests (tests/core).
 *
 * CHECK(cond) and CHECK_CLOSE(a, b, tol) count failures and print file,
 * line and values; check_arrays() compares two arrays with
 * |a-b| <= atol + rtol*|ref| and prints the worst element and its index.
 * A test's main() returns check_report(): 0 if nothing failed, 1 otherwise.
 */
#ifndef CNN_TEST_CHECK_H
#define CNN_TEST_CHECK_H
#include <stdint.h>
#include <stdio.h>

extern int check_failures;
extern int check_count;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    check_count++;                                                                                 \
    if (!(cond)) {                                                                                 \
      check_failures++;                                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                     \
    }                                                                                              \
  } while (0)

#define CHECK_CLOSE(a, b, tol)                                                                     \
  do {                                                                                             \
    double ca_ = (double)(a), cb_ = (double)(b);                                                   \
    check_count++;                                                                                 \
    if (!(ca_ - cb_ <= (tol) && cb_ - ca_ <= (tol))) {                                             \
      check_failures++;                                                                            \
      fprintf(stderr, "%s:%d: %s = %.9g, expected %s = %.9g (tol %g)\n", __FILE__, __LINE__, #a,   \
              ca_, #b, cb_, (double)(tol));                                                        \
    }                                                                                              \
  } while (0)

/* Compare n doubles; `what` names the op and shape in the message. */
int check_arrays(const char *what, const double *got, const double *ref, int64_t n, double atol,
                 double rtol);
int check_arrays_f32(const char *what, const float *got, const float *ref, int64_t n, double atol,
                     double rtol);
int check_report(const char *test_name);

/* Test data: a seeded xorshift64 (each test's numbers are the same run after
 * run), arrays of U(-1, 1) values (malloc'd, at least one element), dtype
 * copies, and a dot product in double. */
double check_urand(void);
double *check_rand_f64(int64_t n);
float *check_to_f32(const double *a, int64_t n);
double *check_to_f64(const float *a, int64_t n);
double check_dot(const double *a, const double *b, int64_t n);
#endif
