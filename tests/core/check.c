/* check.c -- the failure counters and array comparison of check.h. */
#include "check.h"

#include <math.h>
#include <stdlib.h>

int check_failures = 0;
int check_count = 0;

static int report_mismatch(const char *what, int64_t worst, double got, double ref, int64_t bad,
                           int64_t n) {
  check_failures++;
  fprintf(stderr, "%s: %lld of %lld elements differ; worst at [%lld]: got %.9g, expected %.9g\n",
          what, (long long)bad, (long long)n, (long long)worst, got, ref);
  return 0;
}

int check_arrays(const char *what, const double *got, const double *ref, int64_t n, double atol,
                 double rtol) {
  int64_t bad = 0, worst = -1;
  double worst_excess = 0;
  check_count++;
  for (int64_t i = 0; i < n; i++) {
    double diff = fabs(got[i] - ref[i]), allowed = atol + rtol * fabs(ref[i]);
    if (!(diff <= allowed)) { /* NaN counts as a mismatch */
      bad++;
      double excess = isnan(diff) ? INFINITY : diff - allowed;
      if (worst < 0 || excess > worst_excess) worst = i, worst_excess = excess;
    }
  }
  if (bad == 0) return 1;
  return report_mismatch(what, worst, got[worst], ref[worst], bad, n);
}

int check_arrays_f32(const char *what, const float *got, const float *ref, int64_t n, double atol,
                     double rtol) {
  int64_t bad = 0, worst = -1;
  double worst_excess = 0;
  check_count++;
  for (int64_t i = 0; i < n; i++) {
    double diff = fabs((double)got[i] - ref[i]), allowed = atol + rtol * fabs((double)ref[i]);
    if (!(diff <= allowed)) {
      bad++;
      double excess = isnan(diff) ? INFINITY : diff - allowed;
      if (worst < 0 || excess > worst_excess) worst = i, worst_excess = excess;
    }
  }
  if (bad == 0) return 1;
  return report_mismatch(what, worst, got[worst], ref[worst], bad, n);
}

int check_report(const char *test_name) {
  if (check_failures) {
    fprintf(stderr, "%s: %d of %d checks failed\n", test_name, check_failures, check_count);
    return 1;
  }
  printf("%s: %d checks passed\n", test_name, check_count);
  return 0;
}

/* ---- test data ----------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

double check_urand(void) { /* U(-1, 1) */
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 9007199254740992.0 * 2 - 1;
}

double *check_rand_f64(int64_t n) {
  double *a = malloc((size_t)(n > 0 ? n : 1) * sizeof *a);
  for (int64_t i = 0; a && i < n; i++) a[i] = check_urand();
  return a;
}

float *check_to_f32(const double *a, int64_t n) {
  float *f = malloc((size_t)(n > 0 ? n : 1) * sizeof *f);
  for (int64_t i = 0; f && i < n; i++) f[i] = (float)a[i];
  return f;
}

double *check_to_f64(const float *a, int64_t n) {
  double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof *d);
  for (int64_t i = 0; d && i < n; i++) d[i] = a[i];
  return d;
}

double check_dot(const double *a, const double *b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}
