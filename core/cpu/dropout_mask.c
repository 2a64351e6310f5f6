/*
 * dropout_mask.c -- the CPU's dropout mask: mask[i] = 0 with probability
 * p, else 1/(1-p), from elementwise_math.h's counter-based value
 * cnn_dropout_value(seed, i, p) -- the formula the GPU kernels use, so a
 * seed gives the same mask on every device.
 *
 * The value is a splitmix64 hash of (seed, i): three 64-bit multiplies an
 * element.  The loop used to run one element at a time (~35 cycles: the
 * select's 1/(1-p) in it, 56 us of the example network's 8K-element
 * dropout, 0.04 of the bandwidth in bench/step_profile.lua).  The
 * build's baseline ISA (AVX2) has no 64-bit vector multiply, so the loop
 * is also compiled for AVX-512DQ (vpmullq, 8 lanes), chosen at run time
 * by cnn_cpu_use_avx512().  Both
 * evaluate the same integer and double operations, so they give the same
 * bits (tests/core/test_dropout_mask.c checks them against its own
 * splitmix64).  Large masks are split across threads; an element's value
 * depends only on (seed, i, p), never on the split.
 */
#include "cpu/backend_cpu.h"
#include "cpu/kernels.h"
#include "elementwise_math.h"

#define PARALLEL_MIN (1 << 16) /* elements: below this one thread is faster */

/* float32 mask[i0..i1) (double when f64): cnn_dropout_value with its
 * 1/(1-p) computed once, so the select is between two constants (GCC will
 * not if-convert a division under -ftrapping-math, which kept the loop
 * scalar at ~35 cycles an element) */
static inline __attribute__((always_inline)) void mask_range(int f64, int64_t i0, int64_t i1,
                                                             double p, uint64_t seed, void *mask) {
  double keep = 1.0 / (1.0 - p);
  if (f64) {
#pragma omp simd
    for (int64_t i = i0; i < i1; i++)
      ((double *)mask)[i] = cnn_dropout_uniform(seed, i) < p ? 0.0 : keep;
  } else {
    float keep_f = (float)keep;
#pragma omp simd
    for (int64_t i = i0; i < i1; i++)
      ((float *)mask)[i] = cnn_dropout_uniform(seed, i) < p ? 0.0f : keep_f;
  }
}

static void mask_portable(int f64, int64_t i0, int64_t i1, double p, uint64_t seed, void *mask) {
  mask_range(f64, i0, i1, p, seed, mask);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512dq,avx512vl"))) static void
mask_avx512(int f64, int64_t i0, int64_t i1, double p, uint64_t seed, void *mask) {
  mask_range(f64, i0, i1, p, seed, mask);
}
#else
static void mask_avx512(int f64, int64_t i0, int64_t i1, double p, uint64_t seed, void *mask) {
  mask_range(f64, i0, i1, p, seed, mask);
}
#endif

int cnn_cpu_dropout_mask(int dev, cnn_dtype dt, int64_t n, double p, uint64_t seed, void *mask) {
  (void)dev;
  int f64 = dt == CNN_FLOAT64;
  void (*run)(int, int64_t, int64_t, double, uint64_t, void *) =
      cnn_cpu_use_avx512() ? mask_avx512 : mask_portable;
  if (n < PARALLEL_MIN) {
    run(f64, 0, n, p, seed, mask);
    return 0;
  }
  enum { CHUNK = 4096 };
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < (n + CHUNK - 1) / CHUNK; c++)
    run(f64, c * CHUNK, c * CHUNK + CHUNK < n ? c * CHUNK + CHUNK : n, p, seed, mask);
  return 0;
}
