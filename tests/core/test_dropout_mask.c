/*
 * test_dropout_mask.c -- the CPU's dropout mask (core/cpu/dropout_mask.c)
 * against this file's own splitmix64, bit for bit: float32 and float64,
 * lengths around the vector width and the parallel threshold, several
 * rates and seeds, with the AVX-512 loop allowed and forbidden
 * (cnn_cpu_allow_avx512), and the masks' statistics (the drop rate and
 * the 1/(1-p) scale) on a long mask.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cnn.h"
#include "cpu/backend_cpu.h"
#include "cpu/kernels.h"

/* the documented draw (elementwise_math.h): the top 24 bits of
 * splitmix64 at counter i + 1 from the seed, as a fraction of 2^24 */
static double reference_uniform(uint64_t seed, int64_t i) {
  uint64_t golden = 0x9e3779b97f4a7c15ull;
  uint64_t z = (seed ^ (golden * (uint64_t)(i + 1))) + golden;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 40) / 16777216.0;
}

static double reference_value(uint64_t seed, int64_t i, double p) {
  return reference_uniform(seed, i) < p ? 0.0 : 1.0 / (1.0 - p);
}

/* 1 if every element of the mask equals the reference bit for bit */
static int mask_matches(cnn_dtype dt, int64_t n, double p, uint64_t seed) {
  size_t es = dt == CNN_FLOAT64 ? 8 : 4;
  void *m = malloc((size_t)(n ? n : 1) * es);
  if (!m) return 0;
  memset(m, 0xAB, (size_t)(n ? n : 1) * es);
  int ok = cnn_cpu_dropout_mask(0, dt, n, p, seed, m) == 0;
  for (int64_t i = 0; ok && i < n; i++) {
    double want = reference_value(seed, i, p);
    if (dt == CNN_FLOAT64) {
      ok = memcmp(&want, (double *)m + i, 8) == 0;
    } else {
      float wf = (float)want;
      ok = memcmp(&wf, (float *)m + i, 4) == 0;
    }
    if (!ok)
      fprintf(stderr, "dropout mask: n %lld p %g element %lld differs\n", (long long)n, p,
              (long long)i);
  }
  free(m);
  return ok;
}

static void test_bits(void) {
  const int64_t lengths[] = {0, 1, 7, 8, 15, 16, 17, 4095, 4097, 65535, 65536, 70001};
  const double rates[] = {0.0, 0.1, 0.5, 0.999};
  const uint64_t seeds[] = {0, 42, 0xfedcba9876543210ull};
  for (int isa = 0; isa < 2; isa++) {
    cnn_cpu_allow_avx512(isa);
    for (size_t a = 0; a < sizeof lengths / sizeof *lengths; a++)
      for (size_t b = 0; b < sizeof rates / sizeof *rates; b++)
        for (size_t c = 0; c < sizeof seeds / sizeof *seeds; c++) {
          CHECK(mask_matches(CNN_FLOAT32, lengths[a], rates[b], seeds[c]));
          CHECK(mask_matches(CNN_FLOAT64, lengths[a], rates[b], seeds[c]));
        }
  }
  cnn_cpu_allow_avx512(1);
}

/* a long mask drops about p of its elements and scales the rest by 1/(1-p) */
static void test_statistics(void) {
  enum { N = 1 << 20 };
  float *m = malloc(sizeof(float) * N);
  CHECK(m != NULL);
  if (!m) return;
  CHECK(cnn_cpu_dropout_mask(0, CNN_FLOAT32, N, 0.3, 7, m) == 0);
  int64_t dropped = 0, bad = 0;
  for (int64_t i = 0; i < N; i++) {
    if (m[i] == 0.0f)
      dropped++;
    else if (m[i] != (float)(1.0 / 0.7))
      bad++;
  }
  CHECK(bad == 0);
  /* binomial: standard deviation sqrt(N p (1-p)) ~ 469; 6 of them */
  CHECK(fabs((double)dropped - 0.3 * N) < 6 * sqrt(N * 0.3 * 0.7));
  free(m);
}

int main(void) {
  test_bits();
  test_statistics();
  return check_report("test_dropout_mask");
}
