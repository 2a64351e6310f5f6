/*
 * test_sgemm.c -- the CPU's float32 matrix product (core/cpu/sgemm.c:
 * oneDNN's SGEMM for medium products, OpenBLAS for the rest).
 *
 * Evidence: every product against a naive loop in double, in the four
 * transpositions, with leading dimensions larger than the rows (a strided
 * view) and C's padding left untouched; shapes on both sides of the
 * library choice (tiny, 64 x 128 x 3136 as the example network's linear
 * layer, 40 x 33 x 4000 just inside, 16 x 1000 x 700 with M under 32).
 */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "cnn.h"
#include "cpu/kernels.h"

static float rnd(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xFFFF) / 65536.0f - 0.5f;
}

static void check_product(int64_t M, int64_t N, int64_t K, bool ta, bool tb) {
  int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
  int64_t lda = ac + 3, ldb = bc + 5, ldc = N + 7;
  float *A = malloc(sizeof(float) * ar * lda), *B = malloc(sizeof(float) * br * ldb);
  float *C = malloc(sizeof(float) * M * ldc);
  unsigned s = 7;
  for (int64_t i = 0; i < ar * lda; i++) A[i] = rnd(&s);
  for (int64_t i = 0; i < br * ldb; i++) B[i] = rnd(&s);
  for (int64_t i = 0; i < M * ldc; i++) C[i] = NAN;
  cnn_cpu_sgemm(ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
  int64_t bad = 0, pad = 0;
  for (int64_t i = 0; i < M; i++) {
    for (int64_t j = 0; j < N; j++) {
      double want = 0;
      for (int64_t k = 0; k < K; k++)
        want +=
            (double)(ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
      /* float sums of K products of |x| <= 1/4: error grows like sqrt(K) */
      bad += !(fabs(C[i * ldc + j] - want) <= 1e-6 * sqrt((double)K) * 8 + 1e-6);
    }
    for (int64_t j = N; j < ldc; j++) pad += !isnan(C[i * ldc + j]);
  }
  printf("  %lldx%lldx%lld %c%c: %lld wrong, %lld padding written\n", (long long)M, (long long)N,
         (long long)K, ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)bad, (long long)pad);
  CHECK(bad == 0);
  CHECK(pad == 0);
  free(A), free(B), free(C);
}

int main(void) {
  int64_t shapes[][3] = {
      {2, 3, 4}, {64, 128, 3136}, {40, 33, 4000}, {16, 1000, 700}, {64, 10, 128}};
  for (int i = 0; i < 5; i++)
    for (int t = 0; t < 4; t++)
      check_product(shapes[i][0], shapes[i][1], shapes[i][2], t & 1, t & 2);
  return check_report("test_sgemm");
}
