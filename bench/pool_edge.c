/*
 * bench/pool_edge.c -- the conv block's batch norm + ReLU + 2x2 max pool
 * (core/cpu/bn_relu_pool_blocked16.c on an AVX-512 CPU, nChw16c;
 * bn_relu_pool_blocked8.c on an AVX2 one, nChw8c: the "lanes" field) with
 * its pooled edge blocked (CNN_B16_BLOCKED) against the same passes
 * writing y and reading dy as NCHW arrays (CNN_B16_NCHW_EDGE, a vector's
 * worth of pixels at a time through a transpose in registers), at the
 * example network's two block shapes, batch 64;
 * the two alternated, 41 rounds, the median of each; the arrays in cache
 * (the same ones every round).  What the edge costs inside the kernel; the
 * reorders it spares (oneDNN's, nChw16c <-> NCHW of y and dy) are timed by
 * DNNL_VERBOSE in the training step (README).  And at the first block, the
 * backward that folds batch norm's input gradient into a 1 x 3 x 3
 * convolution's weight gradient (backward_dw) against the plain backward,
 * which writes that gradient for oneDNN's weight-gradient primitive (not
 * timed here; DNNL_VERBOSE in the README).  Built by hand, not by CMake:
 *
 *   cmake --build build --target cnn_core
 *   cc -O2 -fopenmp -Icore bench/pool_edge.c build/core/libcnn_core.a -o /tmp/pool_edge \
 *      $(pkg-config --libs dnnl 2>/dev/null || echo -ldnnl) -lsleef -lopenblas -lm && \
 *      OMP_NUM_THREADS=2 /tmp/pool_edge
 *
 * One JSON line per shape and pass, and one for the weight gradient:
 *   {"bench":"pool_edge","lanes":8,"shape":"64x32x28x28","pass":"fwd","blocked_us":...,
 *    "nchw_edge_us":...,"edge_cost_us":...,"copy_us":...,"blocked_of_copy":...}
 * copy_us: memcpy of the bytes the blocked pass must move (forward: x
 * twice -- statistics, then the pool -- and y and the taps out; backward:
 * x, dy and the taps twice, dx out), the same arrays every round, so
 * blocked_of_copy = copy_us / blocked_us is the pass's fraction of a copy
 * at its own working set.
 *   {"bench":"pool_edge_dw","shape":"64x32x28x28","conv":"1x3x3","backward_us":...,
 *    "backward_dw_us":...}
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include <string.h>

#include "cnn.h"
#include "cpu/kernels.h"

#define ROUNDS 41

/* The kernel of this CPU: its width and entries. */
static int L;
static cnn_bn_relu_pool_kernel K;

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static float *filled(int64_t n, unsigned seed) {
  float *a = malloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; i++) a[i] = (float)((i * 2654435761u + seed) % 1000) / 500.0f - 1;
  return a;
}

/* Median microseconds of memcpy(dst, src, bytes) (both of at least bytes),
 * split between the threads. */
static double copy_us(void *dst, const void *src, size_t bytes) {
  double t[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = omp_get_wtime();
#pragma omp parallel
    {
      int nt = omp_get_num_threads(), i = omp_get_thread_num();
      size_t part = bytes / nt, at = part * i;
      memcpy((char *)dst + at, (const char *)src + at, i == nt - 1 ? bytes - at : part);
    }
    t[r] = (omp_get_wtime() - t0) * 1e6;
  }
  qsort(t, ROUNDS, sizeof(double), cmp);
  return t[ROUNDS / 2];
}

static void bench_shape(int64_t N, int64_t C, int64_t H, int64_t W) {
  int64_t CB = C / L, nx = N * C * H * W, ny = N * C * (H / 2) * (W / 2);
  float *x = filled(nx, 1), *dy = filled(ny, 2), *dx = malloc(nx * 4), *y = malloc(ny * 4);
  float *dyc = malloc(ny * 4), *k = malloc(6 * C * 4);
  uint8_t *tap = malloc(ny);
  float *g = k, *b = k + C, *mean = k + 2 * C, *var = k + 3 * C, *dg = k + 4 * C, *db = k + 5 * C;
  for (int64_t c = 0; c < C; c++) g[c] = 1, b[c] = 0.1f;
  static double t[2][2][ROUNDS]; /* [edge][pass][round] */
  for (int r = 0; r < ROUNDS; r++)
    for (int e = 0; e < 2; e++) {
      int layout = e ? CNN_B16_NCHW_EDGE : CNN_B16_BLOCKED;
      double t0 = omp_get_wtime();
      int rc = K.forward(x, 0, layout, N, CB, H, W, g, b, 1e-5f, mean, var, y, tap);
      double t1 = omp_get_wtime();
      rc |= K.backward(x, dy, tap, 0, layout, N, CB, H, W, g, b, mean, var, 1e-5f, dx, dg, db, dyc);
      double t2 = omp_get_wtime();
      if (rc) fprintf(stderr, "pool_edge: %s\n", cnn_error()), exit(1);
      t[e][0][r] = (t1 - t0) * 1e6, t[e][1][r] = (t2 - t1) * 1e6;
    }
  size_t moved[2] = {(size_t)(2 * nx * 4 + ny * 5), (size_t)(2 * (nx * 4 + ny * 5) + nx * 4)};
  size_t most = moved[1] > moved[0] ? moved[1] : moved[0];
  char *from = malloc(most), *to = malloc(most);
  memset(from, 1, most), memset(to, 2, most);
  for (int p = 0; p < 2; p++) {
    for (int e = 0; e < 2; e++) qsort(t[e][p], ROUNDS, sizeof(double), cmp);
    double blocked = t[0][p][ROUNDS / 2], edge = t[1][p][ROUNDS / 2];
    double copy = copy_us(to, from, moved[p] / 2); /* a copy moves each byte twice */
    printf("{\"bench\":\"pool_edge\",\"lanes\":%d,\"shape\":\"%lldx%lldx%lldx%lld\","
           "\"pass\":\"%s\",\"blocked_us\":%.1f,\"nchw_edge_us\":%.1f,\"edge_cost_us\":%.1f,"
           "\"copy_us\":%.1f,\"blocked_of_copy\":%.2f}\n",
           L, (long long)N, (long long)C, (long long)H, (long long)W, p ? "bwd" : "fwd", blocked,
           edge, edge - blocked, copy, copy / blocked);
  }
  free(from), free(to);
  free(x), free(dy), free(dx), free(y), free(dyc), free(k), free(tap);
}

/* The first block's backward (NCHW edge) without and with the weight gradient. */
static void bench_dw(int64_t N, int64_t C, int64_t H, int64_t W) {
  int64_t CB = C / L, nx = N * C * H * W, ny = N * C * (H / 2) * (W / 2);
  float *x = filled(nx, 1), *dy = filled(ny, 2), *xi = filled(N * H * W, 3), *dx = malloc(nx * 4);
  float *y = malloc(ny * 4), *dyc = malloc(ny * 4), *k = malloc(6 * C * 4), *dw = malloc(C * 9 * 4);
  float *g = k, *b = k + C, *mean = k + 2 * C, *var = k + 3 * C, *dg = k + 4 * C, *db = k + 5 * C;
  float *dbias = malloc(C * 4);
  uint8_t *tap = malloc(ny);
  for (int64_t c = 0; c < C; c++) g[c] = 1, b[c] = 0.1f;
  int rc = K.forward(x, 0, CNN_B16_NCHW_EDGE, N, CB, H, W, g, b, 1e-5f, mean, var, y, tap);
  cnn_b16_conv_src src = {xi, 1, H, W, 3, 3, 1, 1};
  static double t[2][ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = omp_get_wtime();
    rc |= K.backward(x, dy, tap, 0, CNN_B16_NCHW_EDGE, N, CB, H, W, g, b, mean, var, 1e-5f, dx, dg,
                     db, dyc);
    double t1 = omp_get_wtime();
    rc |= K.backward_dw(x, dy, tap, CNN_B16_NCHW_EDGE, N, CB, H, W, g, b, mean, var, 1e-5f, &src,
                        dw, dbias, dg, db, dyc);
    t[0][r] = (t1 - t0) * 1e6, t[1][r] = (omp_get_wtime() - t1) * 1e6;
  }
  if (rc) fprintf(stderr, "pool_edge: %s\n", cnn_error()), exit(1);
  qsort(t[0], ROUNDS, sizeof(double), cmp), qsort(t[1], ROUNDS, sizeof(double), cmp);
  printf("{\"bench\":\"pool_edge_dw\",\"lanes\":%d,\"shape\":\"%lldx%lldx%lldx%lld\",\"conv\":"
         "\"1x3x3\","
         "\"backward_us\":%.1f,\"backward_dw_us\":%.1f}\n",
         L, (long long)N, (long long)C, (long long)H, (long long)W, t[0][ROUNDS / 2],
         t[1][ROUNDS / 2]);
  free(x), free(dy), free(xi), free(dx), free(y), free(dyc), free(k), free(dw), free(dbias),
      free(tap);
}

int main(void) {
  int lanes = cnn_cpu_use_avx512() ? 16 : cnn_cpu_use_avx2() ? 8 : 0;
  if (!lanes) {
    fprintf(stderr, "pool_edge: neither AVX-512 nor AVX2 on this CPU\n");
    return 0;
  }
  K = *cnn_cpu_bn_relu_pool_kernel(lanes), L = lanes;
  bench_shape(64, 32, 28, 28); /* the example network's first block */
  bench_shape(64, 64, 14, 14); /* its second */
  bench_dw(64, 32, 28, 28);
  return 0;
}
