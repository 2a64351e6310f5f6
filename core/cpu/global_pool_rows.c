/*
 * global_pool_rows.c -- global average pooling (output 1x1) of a
 * channels-last tensor: image n is an L x C array (L = H*W rows of C
 * channels), y[n, c] its column means; backward spreads dy[n, c] / L over
 * the column.  float32 and float64; images split over the threads.
 *
 * Sums: float32 in chunks of 32 channels summed over blocks of 64 rows in
 * registers and added into double (as global_pool_avx512.c's float
 * accumulators go into double), the rest in double lane by lane; the
 * backward's values are pool.c's, (float)(dy / L) computed in double.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"

/* 8 floats as one value (GCC/Clang vector extensions, as batch_norm.c's). */
typedef float v8f __attribute__((vector_size(32), aligned(4), may_alias));

#define BLOCK_ROWS 64 /* float sums over at most this many rows, then into double */

/* Channels [c0, c0 + 32) of rows [l0, l1): sums in registers, added into acc. */
static void chunk_sums(int64_t l0, int64_t l1, int64_t C, int64_t c0, const float *x, double *acc) {
  v8f a[4] = {0};
  for (int64_t l = l0; l < l1; l++)
    for (int j = 0; j < 4; j++) a[j] += *(const v8f *)(x + l * C + c0 + 8 * j);
  for (int j = 0; j < 4; j++)
    for (int i = 0; i < 8; i++) acc[c0 + 8 * j + i] += a[j][i];
}

/* One image's column sums into acc (C doubles, zeroed here): float32
 * chunks of 32 channels in registers where C allows, the rest lane by lane
 * in double. */
static void image_sums(int f64, int64_t L, int64_t C, const void *x, double *acc) {
  for (int64_t c = 0; c < C; c++) acc[c] = 0;
  int64_t c0 = 0;
  if (!f64)
    for (; c0 + 32 <= C; c0 += 32)
      for (int64_t l0 = 0; l0 < L; l0 += BLOCK_ROWS)
        chunk_sums(l0, l0 + BLOCK_ROWS < L ? l0 + BLOCK_ROWS : L, C, c0, x, acc);
  for (int64_t l = 0; l < L && c0 < C; l++) {
    if (f64) {
      const double *r = (const double *)x + l * C;
#pragma omp simd
      for (int64_t c = c0; c < C; c++) acc[c] += r[c];
    } else {
      const float *r = (const float *)x + l * C;
#pragma omp simd
      for (int64_t c = c0; c < C; c++) acc[c] += r[c];
    }
  }
}

static void image_means(int f64, int64_t L, int64_t C, const void *x, double *acc, void *y) {
  image_sums(f64, L, C, x, acc);
  for (int64_t c = 0; c < C; c++) cnn_cpu_st(y, c, acc[c] / (double)L, f64);
}

int cnn_cpu_global_avg_pool_nhwc_forward(cnn_dtype dt, int64_t N, int64_t L, int64_t C,
                                         const void *x, void *y) {
  int f64 = dt == CNN_FLOAT64, es = f64 ? 8 : 4;
  int threads = omp_get_max_threads();
  /* acc: C sums for each thread */
  double *acc = malloc((size_t)(C > 0 ? C : 1) * sizeof(double) * (size_t)threads);
  if (!acc) return cnn_set_error("adaptive_avg_pool2d: out of memory"), -1;
#pragma omp parallel for schedule(static) num_threads(threads) if (N * L * C > 4096)
  for (int64_t n = 0; n < N; n++)
    image_means(f64, L, C, (const char *)x + n * L * C * es, acc + omp_get_thread_num() * C,
                (char *)y + n * C * es);
  free(acc);
  return 0;
}

/* Image n's gradient: its first row computed, then copied to the others. */
static void image_grad(int64_t L, int64_t C, size_t es, const void *dy, void *dx) {
  for (int64_t c = 0; c < C; c++)
    if (es == 8)
      ((double *)dx)[c] = ((const double *)dy)[c] / (double)L;
    else
      ((float *)dx)[c] = (float)((double)((const float *)dy)[c] / (double)L);
  /* rows [0, done) filled: copy them after themselves, doubling (log2 L
   * calls; one 256-byte memcpy a row was the pass's cost at C = 64) */
  for (int64_t done = 1; done < L; done *= 2) {
    int64_t n = done < L - done ? done : L - done;
    memcpy((char *)dx + done * C * es, dx, (size_t)(n * C) * es);
  }
}

int cnn_cpu_global_avg_pool_nhwc_backward(cnn_dtype dt, int64_t N, int64_t L, int64_t C,
                                          const void *dy, void *dx) {
  size_t es = dt == CNN_FLOAT64 ? 8 : 4;
#pragma omp parallel for schedule(static) if (N * L * C > 4096)
  for (int64_t n = 0; n < N; n++)
    image_grad(L, C, es, (const char *)dy + n * C * es, (char *)dx + n * L * C * es);
  return 0;
}
