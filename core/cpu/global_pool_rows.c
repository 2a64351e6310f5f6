/*
 * global_pool_rows.c -- global average pooling (output 1x1) of a
 * channels-last tensor: image n is an L x C array (L = H*W rows of C
 * channels), y[n, c] its column means; backward spreads dy[n, c] / L over
 * the column.  float32 and float64; images split over the threads.
 *
 * Sums are in double (a row of C values added lane by lane into C double
 * sums, in row order), as pool.c's adaptive pooling sums in double; the
 * backward's values are pool.c's, (float)(dy / L) computed in double.
 */
#include <omp.h>
#include <stdlib.h>

#include "cpu/kernels.h"

/* One image: sums into acc (C doubles), then the means into y. */
static void image_means(int f64, int64_t L, int64_t C, const void *x, double *acc, void *y) {
  for (int64_t c = 0; c < C; c++) acc[c] = 0;
  for (int64_t l = 0; l < L; l++) {
    if (f64) {
      const double *r = (const double *)x + l * C;
#pragma omp simd
      for (int64_t c = 0; c < C; c++) acc[c] += r[c];
    } else {
      const float *r = (const float *)x + l * C;
#pragma omp simd
      for (int64_t c = 0; c < C; c++) acc[c] += r[c];
    }
  }
  for (int64_t c = 0; c < C; c++) cnn_cpu_st(y, c, acc[c] / (double)L, f64);
}

int cnn_cpu_global_avg_pool_nhwc_forward(cnn_dtype dt, int64_t N, int64_t L, int64_t C,
                                         const void *x, void *y) {
  int f64 = dt == CNN_FLOAT64, es = f64 ? 8 : 4;
  int threads = omp_get_max_threads();
  double *acc = malloc((size_t)(C > 0 ? C : 1) * sizeof(double) * (size_t)threads);
  if (!acc) return cnn_set_error("adaptive_avg_pool2d: out of memory"), -1;
    /* acc: C sums for each thread */
#pragma omp parallel for schedule(static) num_threads(threads) if (N * L * C > 4096)
  for (int64_t n = 0; n < N; n++)
    image_means(f64, L, C, (const char *)x + n * L * C * es, acc + omp_get_thread_num() * C,
                (char *)y + n * C * es);
  free(acc);
  return 0;
}

int cnn_cpu_global_avg_pool_nhwc_backward(cnn_dtype dt, int64_t N, int64_t L, int64_t C,
                                          const void *dy, void *dx) {
  int f64 = dt == CNN_FLOAT64;
#pragma omp parallel for schedule(static) if (N * L * C > 4096)
  for (int64_t n = 0; n < N; n++)
    for (int64_t l = 0; l < L; l++) {
      if (f64) {
        const double *g = (const double *)dy + n * C;
        double *r = (double *)dx + (n * L + l) * C;
#pragma omp simd
        for (int64_t c = 0; c < C; c++) r[c] = g[c] / (double)L;
      } else {
        const float *g = (const float *)dy + n * C;
        float *r = (float *)dx + (n * L + l) * C;
#pragma omp simd
        for (int64_t c = 0; c < C; c++) r[c] = (float)((double)g[c] / (double)L);
      }
    }
  return 0;
}
