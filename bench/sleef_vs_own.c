/*
 * bench/sleef_vs_own.c -- which float32 functions should core/cpu/vector_math.c
 * take from SLEEF?  (issue 19 point 4.)  Built by hand (below), not by CMake.
 * For each function it compares what cnnsh runs now ("own": cnn_cpu_*_f32,
 * or the scalar libm loop where cnnsh has no vector kernel) with SLEEF's
 * u10 (1-ulp) vector function:
 *   - accuracy: the worst error in ulp against the double-precision libm
 *     result, over every 61st float bit pattern (70 M inputs, all exponents
 *     and signs, NaN/inf/denormals included; inf = a wrong class, e.g. +inf
 *     for a finite result);
 *   - speed: 4M-element arrays, the two alternated, 15 rounds each, the
 *     median; one thread.
 * History: exp and log were our own double-precision polynomials until
 * SLEEF measured 1.6-2.0x (exp) and 1.42x (log) faster than them on an AMD
 * Zen 4 with AVX-512 (worst 0.977 / 0.607 ulp against our 0.503 / 0.500);
 * cnnsh now runs SLEEF's exp, log and expm1, so those rows compare SLEEF
 * with itself through cnnsh's array wrapper (a ratio near 1).  tanh stays
 * ours (SLEEF's 0.3-0.5x in the same runs) and log1p scalar libm (SLEEF
 * 3.5.1's log1pf_u10 is +inf above ~1e38 and flushes denormals).
 * SLEEF's entries: Sleef_<f>f16_u10 (AVX-512) and Sleef_<f>f8_u10 (AVX2),
 * both dispatching at run time; SLEEF has no sigmoid.
 *
 *   apt-get install libsleef-dev      (a dependency of cnnsh since the move)
 *   cmake --build build --target cnn_core
 *   cc -O3 -march=x86-64-v3 -mavx512f -Icore bench/sleef_vs_own.c \
 *      build/core/libcnn_core.a -o /tmp/sleef_vs_own -lsleef -lm && /tmp/sleef_vs_own
 * (-mavx512f for this file only: sleef.h declares its 512-bit entries
 * only then.  Built so, the program needs an AVX-512 CPU; on another, drop
 * -mavx512f and the _16 functions to compare the AVX2 entries.)
 * Prints one JSON line per function.
 */
#include <immintrin.h>
#include <math.h>
#include <sleef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "cpu/vector_math.h"

typedef void (*own_fn)(int64_t n, const float *x, float *y);

/* SLEEF over an array, 16 (AVX-512) or 8 (AVX2) lanes at a time, the tail
 * through a padded vector. */
#define SLEEF_ARRAY(name, f16, f8)                                                                 \
  static void name##_16(int64_t n, const float *x, float *y) {                                     \
    int64_t i = 0;                                                                                 \
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f16(_mm512_loadu_ps(x + i)));             \
    float t[16] = {0};                                                                             \
    memcpy(t, x + i, (size_t)(n - i) * 4);                                                         \
    _mm512_storeu_ps(t, f16(_mm512_loadu_ps(t)));                                                  \
    memcpy(y + i, t, (size_t)(n - i) * 4);                                                         \
  }                                                                                                \
  static void name##_8(int64_t n, const float *x, float *y) {                                      \
    int64_t i = 0;                                                                                 \
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f8(_mm256_loadu_ps(x + i)));                \
    float t[8] = {0};                                                                              \
    memcpy(t, x + i, (size_t)(n - i) * 4);                                                         \
    _mm256_storeu_ps(t, f8(_mm256_loadu_ps(t)));                                                   \
    memcpy(y + i, t, (size_t)(n - i) * 4);                                                         \
  }

SLEEF_ARRAY(sleef_exp, Sleef_expf16_u10, Sleef_expf8_u10)
SLEEF_ARRAY(sleef_log, Sleef_logf16_u10, Sleef_logf8_u10)
SLEEF_ARRAY(sleef_expm1, Sleef_expm1f16_u10, Sleef_expm1f8_u10)
SLEEF_ARRAY(sleef_tanh, Sleef_tanhf16_u10, Sleef_tanhf8_u10)
SLEEF_ARRAY(sleef_log1p, Sleef_log1pf16_u10, Sleef_log1pf8_u10)

/* what cnnsh runs for log1p: libm per element */
static void libm_log1p(int64_t n, const float *x, float *y) {
  for (int64_t i = 0; i < n; i++) y[i] = log1pf(x[i]);
}

/* distance in representable floats between a and the reference r */
static double ulps(float a, double r) {
  if (isnan(r)) return isnan(a) ? 0 : INFINITY;
  float rf = (float)r;
  if (isinf(rf) || isinf(a)) return a == rf ? 0 : INFINITY;
  double step = nextafterf(fabsf(rf), INFINITY) - fabsf(rf);
  return fabs((double)a - r) / step;
}

/* worst ulp of f over every `stride`-th bit pattern against ref */
static double worst_ulp(own_fn f, double (*ref)(double), uint32_t stride) {
  enum { B = 1 << 16 };
  float *x = malloc(B * 4), *y = malloc(B * 4);
  double worst = 0;
  uint64_t u = 0;
  while (u < (1ull << 32)) {
    int n = 0;
    for (; n < B && u < (1ull << 32); n++, u += stride) {
      uint32_t b = (uint32_t)u;
      memcpy(&x[n], &b, 4);
    }
    f(n, x, y);
    for (int i = 0; i < n; i++) {
      double e = ulps(y[i], ref(x[i]));
      if (e > worst) worst = e;
    }
  }
  free(x), free(y);
  return worst;
}

/* median seconds of f over n elements, alternating with g (its times into tg) */
static void race(own_fn f, own_fn g, int64_t n, double *tf, double *tg) {
  float *x = malloc(n * 4), *y = malloc(n * 4);
  for (int64_t i = 0; i < n; i++) x[i] = (float)((i % 2000) - 1000) / 97.0f + 1.5f;
  enum { R = 15 };
  double a[R], b[R];
  for (int r = 0; r < R; r++) {
    double t0 = now();
    f(n, x, y);
    double t1 = now();
    g(n, x, y);
    a[r] = t1 - t0, b[r] = now() - t1;
  }
  qsort(a, R, sizeof a[0], by_value), qsort(b, R, sizeof b[0], by_value);
  *tf = a[R / 2], *tg = b[R / 2];
  free(x), free(y);
}

static double pos_log(double v) { return log(v); }
static double ref_expm1(double v) { return expm1(v); }
static double ref_log1p(double v) { return log1p(v); }

int main(void) {
  struct {
    const char *name;
    own_fn own, s16, s8;
    double (*ref)(double);
  } fs[] = {
      {"exp", cnn_cpu_exp_f32, sleef_exp_16, sleef_exp_8, exp},
      {"log", cnn_cpu_log_f32, sleef_log_16, sleef_log_8, pos_log},
      {"expm1", cnn_cpu_expm1_f32, sleef_expm1_16, sleef_expm1_8, ref_expm1},
      {"tanh", cnn_cpu_tanh_f32, sleef_tanh_16, sleef_tanh_8, tanh},
      {"log1p", libm_log1p, sleef_log1p_16, sleef_log1p_8, ref_log1p},
  };
  int avx512 = __builtin_cpu_supports("avx512f");
  for (size_t k = 0; k < sizeof fs / sizeof fs[0]; k++) {
    own_fn s = avx512 ? fs[k].s16 : fs[k].s8;
    double uo = worst_ulp(fs[k].own, fs[k].ref, 61), us = worst_ulp(s, fs[k].ref, 61);
    double to, ts;
    race(fs[k].own, s, 1 << 22, &to, &ts);
    printf("{\"bench\":\"sleef_vs_own\",\"fn\":\"%s\",\"isa\":\"%s\",\"own_ulp\":%.3g,"
           "\"sleef_ulp\":%.3g,\"own_ms\":%.3f,\"sleef_ms\":%.3f,\"sleef_speedup\":%.3f}\n",
           fs[k].name, avx512 ? "avx512" : "avx2", uo, us, to * 1e3, ts * 1e3, to / ts);
    fflush(stdout);
  }
  return 0;
}
