/*
 * test_timer.c -- core/timer.c on the CPU, and its errors.
 *
 * The reference is the monotonic clock read by the test itself around each
 * mark: for marks m0, m1 taken between readings r0 <= m0 <= r1 and
 * r2 <= m1 <= r3, the elapsed time must lie in [r2 - r1, r3 - r0]; a
 * 20 ms sleep between them makes that interval non-trivial.  Errors: marks
 * that do not exist, a timer on CUDA where CUDA cannot be used (this test
 * runs without $CNNSH_CUDA_MODULE; on a machine with a GPU that part only
 * checks that a nonexistent ordinal is refused).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "cnn.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

static bool error_starts(const char *prefix) {
  return strncmp(cnn_error(), prefix, strlen(prefix)) == 0;
}

/* two marks around a sleep, bracketed by the test's own clock readings */
static void test_bracket(void) {
  cnn_timer *t = cnn_timer_new(CNN_DEVICE_CPU);
  CHECK(t != NULL);
  if (!t) return;
  CHECK(cnn_timer_count(t) == 0);
  CHECK(cnn_timer_device(t).type == CNN_CPU);
  double r0 = now();
  int m0 = cnn_timer_mark(t);
  double r1 = now();
  sleep_ms(20);
  double r2 = now();
  int m1 = cnn_timer_mark(t);
  double r3 = now();
  CHECK(m0 == 0 && m1 == 1 && cnn_timer_count(t) == 2);
  double s = -1, back = 0, all[2] = {-1, -1};
  CHECK(cnn_timer_elapsed(t, m0, m1, &s) == 0);
  CHECK(s >= r2 - r1 && s <= r3 - r0);
  CHECK(s >= 0.019);
  CHECK(cnn_timer_elapsed(t, m1, m0, &back) == 0);
  CHECK_CLOSE(back, -s, 0);
  CHECK(cnn_timer_seconds(t, all) == 0);
  CHECK_CLOSE(all[0], 0, 0);
  CHECK_CLOSE(all[1], s, 0);
  cnn_timer_free(t);
}

/* growth past the first allocation; times never decrease; reset */
static void test_many_marks(void) {
  cnn_timer *t = cnn_timer_new(CNN_DEVICE_CPU);
  CHECK(t != NULL);
  if (!t) return;
  int n = 1000, ok = 1;
  for (int i = 0; i < n; i++) ok &= cnn_timer_mark(t) == i;
  CHECK(ok);
  double *v = malloc(sizeof *v * (size_t)n);
  CHECK(cnn_timer_seconds(t, v) == 0);
  int mono = v[0] == 0;
  for (int i = 1; i < n; i++) mono &= v[i] >= v[i - 1];
  CHECK(mono);
  free(v);
  cnn_timer_reset(t);
  CHECK(cnn_timer_count(t) == 0);
  CHECK(cnn_timer_mark(t) == 0);
  cnn_timer_reset(t);
  cnn_timer_reset(t); /* idempotent */
  cnn_timer_free(t);
  cnn_timer_free(NULL);
}

static void test_bad_marks(void) {
  cnn_timer *t = cnn_timer_new(CNN_DEVICE_CPU);
  double s;
  CHECK(cnn_timer_elapsed(t, 0, 0, &s) == -1);
  CHECK(strcmp(cnn_error(), "timer: mark 0 does not exist (no marks recorded)") == 0);
  cnn_timer_mark(t);
  cnn_timer_mark(t);
  CHECK(cnn_timer_elapsed(t, 0, 2, &s) == -1);
  CHECK(strcmp(cnn_error(), "timer: mark 2 does not exist (marks 0..1)") == 0);
  CHECK(cnn_timer_elapsed(t, -1, 1, &s) == -1);
  CHECK(error_starts("timer: mark -1"));
  CHECK(cnn_timer_elapsed(t, 1, 1, &s) == 0 && s == 0);
  cnn_timer_free(t);
}

static void test_cuda_errors(void) {
  const char *why = cnn_cuda_unavailable_reason();
  if (why) {
    CHECK(cnn_timer_new((cnn_device){CNN_CUDA, 0}) == NULL);
    CHECK(error_starts("timer: cuda is not available: "));
    CHECK(strstr(cnn_error(), why) != NULL);
  } else {
    CHECK(cnn_timer_new((cnn_device){CNN_CUDA, 63}) == NULL);
    CHECK(error_starts("timer: cuda:63 does not exist"));
  }
}

int main(void) {
  test_bracket();
  test_many_marks();
  test_bad_marks();
  test_cuda_errors();
  return check_report("test_timer");
}
