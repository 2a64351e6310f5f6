/*
 * float_ulps.h -- for the float32 accuracy tests (test_vector_math.c,
 * test_vector_activations.c): a float's bits, the distance of two floats
 * in ulps, and the two sweeps they run -- every STEP-th bit pattern of the
 * 2^32 and 2^20 evenly spaced values of a range -- handing each batch of
 * inputs to the test's own comparison.
 */
#ifndef CNN_TEST_FLOAT_ULPS_H
#define CNN_TEST_FLOAT_ULPS_H

#include <stdint.h>
#include <string.h>

static inline uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
/* floats in order as integers: -0 and +0 both map to 0 */
static inline int64_t ordinal(float f) {
  uint32_t u = bits_of(f);
  return u >> 31 ? -(int64_t)(u & 0x7fffffffu) : (int64_t)u;
}
/* distance in ulps; 0 for two NaNs, huge for a NaN against a number */
static inline int64_t ulps(float a, float b) {
  if (a != a || b != b) return (a != a && b != b) ? 0 : INT64_MAX / 2;
  int64_t d = ordinal(a) - ordinal(b);
  return d < 0 ? -d : d;
}

enum { SWEEP_BATCH = 4096 };

/* what a sweep hands each batch of n <= SWEEP_BATCH inputs to; `first`
 * is the position of x[0] in the sweep */
typedef void (*sweep_batch_fn)(const void *ctx, int64_t first, int64_t n, const float *x,
                               void *worst);

/* every 4093rd bit pattern of the 2^32 (odd: all low-bit classes); the
 * number of values swept */
static inline int64_t sweep_bit_patterns(sweep_batch_fn batch, const void *ctx, void *worst) {
  enum { STEP = 4093 };
  float x[SWEEP_BATCH];
  int64_t count = 0, n = 0;
  for (uint64_t u = 0; u < (1ull << 32); u += STEP) {
    x[n++] = float_of((uint32_t)u);
    if (n == SWEEP_BATCH) batch(ctx, count, n, x, worst), count += n, n = 0;
  }
  batch(ctx, count, n, x, worst);
  return count + n;
}

/* 2^20 evenly spaced values over [lo, hi]; the number swept */
static inline int64_t sweep_evenly(sweep_batch_fn batch, const void *ctx, float lo, float hi,
                                   void *worst) {
  enum { N = 1 << 20 };
  float x[SWEEP_BATCH];
  for (int64_t i0 = 0; i0 < N; i0 += SWEEP_BATCH) {
    for (int64_t i = 0; i < SWEEP_BATCH; i++)
      x[i] = lo + (hi - lo) * (float)((double)(i0 + i) / (N - 1));
    batch(ctx, i0, SWEEP_BATCH, x, worst);
  }
  return N;
}

#endif
