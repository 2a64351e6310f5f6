/*
 * bench/conv_1x1_strided.c -- the strided 1x1 convolution (ResNet's
 * projection shortcut) on NCHW float32: cnnsh's own kernels
 * (core/cpu/conv_1x1_strided.c) against oneDNN's, the measurement behind
 * the shapes conv.c gives them (MAX_WEIGHTS there).
 *
 * For each shape (ResNet-20's two shortcuts at batch 64, ResNet-18's three
 * at batch 16 and 224x224) and each way -- ours, ours without AVX-512,
 * oneDNN -- times the forward and both backward passes in one call, with
 * the caches warm ("warm") and after 64 MB of other writes ("cold", as in
 * a training step, where a backward reads what its forward left long
 * before): 3 calls untimed, then the median of 31.  Prints one JSON line
 * per shape, pass and cache state:
 *
 *   {"bench":"conv_1x1_strided","N":64,"C":16,"H":32,"K":32,"pass":"bwd",
 *    "cache":"cold","ours_ms":...,"portable_ms":...,"onednn_ms":...,
 *    "onednn_over_ours":...}
 *
 * Built by hand against a cnnsh build (not by CMake); pin the threads:
 *
 *   cc -O2 -fopenmp -Icore -o /tmp/conv_1x1_strided bench/conv_1x1_strided.c \
 *      build/core/libcnn_core.a -ldnnl -lsleef -lm -ldl -lpthread
 *   OMP_NUM_THREADS=2 /tmp/conv_1x1_strided
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench_clock.h"
#include "cpu/kernels.h"

#define REPS   31
#define WARMUP 3
#define JUNK   ((size_t)64 << 20)

typedef struct {
  float *x, *w, *y, *dy, *dx, *dw;
} arrays;

enum { OURS, PORTABLE, ONEDNN, WAYS };

static char *junk;

static void evict(void) {
  for (size_t i = 0; i < JUNK; i += 64) junk[i]++;
}

static float *filled(size_t n) {
  float *a = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
  if (!a) exit(1);
  for (size_t i = 0; i < n; i++) a[i] = (float)rand() / RAND_MAX - 0.5f;
  return a;
}

static int run(int way, int backward, const cnn_conv_shape *s, arrays *a) {
  if (way == ONEDNN)
    return backward ? cnn_cpu_conv2d_onednn_backward(s, a->dy, a->x, a->w, a->dx, a->dw, NULL)
                    : cnn_cpu_conv2d_onednn_forward(s, a->x, a->w, NULL, a->y);
  cnn_cpu_allow_avx512(way == OURS);
  int rc = backward ? cnn_cpu_conv2d_1x1_strided_backward(s, a->dy, a->x, a->w, a->dx, a->dw, NULL)
                    : cnn_cpu_conv2d_1x1_strided_forward(s, a->x, a->w, NULL, a->y);
  cnn_cpu_allow_avx512(1);
  return rc;
}

static double median_ms(int way, int backward, int cold, const cnn_conv_shape *s, arrays *a) {
  double t[REPS];
  for (int r = 0; r < WARMUP + REPS; r++) {
    if (cold) evict();
    double t0 = now();
    if (run(way, backward, s, a)) {
      fprintf(stderr, "conv_1x1_strided: %s\n", cnn_error());
      exit(1);
    }
    if (r >= WARMUP) t[r - WARMUP] = now() - t0;
  }
  qsort(t, REPS, sizeof t[0], by_value);
  return t[REPS / 2] * 1e3;
}

static void bench_shape(int64_t N, int64_t C, int64_t H, int64_t K) {
  cnn_conv_shape s = {.N = N,
                      .C = C,
                      .H = H,
                      .W = H,
                      .K = K,
                      .R = 1,
                      .S = 1,
                      .OH = (H - 1) / 2 + 1,
                      .OW = (H - 1) / 2 + 1,
                      .sh = 2,
                      .sw = 2,
                      .dh = 1,
                      .dw = 1,
                      .groups = 1,
                      .math = CNN_FLOAT32};
  size_t nx = (size_t)(N * C * H * H), ny = (size_t)(N * K * s.OH * s.OW), nw = (size_t)(K * C);
  arrays a = {filled(nx), filled(nw), filled(ny), filled(ny), filled(nx), filled(nw)};
  for (int backward = 0; backward < 2; backward++)
    for (int cold = 0; cold < 2; cold++) {
      double ms[WAYS];
      for (int way = 0; way < WAYS; way++) ms[way] = median_ms(way, backward, cold, &s, &a);
      printf("{\"bench\":\"conv_1x1_strided\",\"N\":%lld,\"C\":%lld,\"H\":%lld,\"K\":%lld,"
             "\"pass\":\"%s\",\"cache\":\"%s\",\"ours_ms\":%.4g,\"portable_ms\":%.4g,"
             "\"onednn_ms\":%.4g,\"onednn_over_ours\":%.3g}\n",
             (long long)N, (long long)C, (long long)H, (long long)K, backward ? "bwd" : "fwd",
             cold ? "cold" : "warm", ms[OURS], ms[PORTABLE], ms[ONEDNN], ms[ONEDNN] / ms[OURS]);
      fflush(stdout);
    }
  free(a.x), free(a.w), free(a.y), free(a.dy), free(a.dx), free(a.dw);
}

int main(void) {
  if (!(junk = calloc(JUNK, 1))) return 1;
  bench_shape(64, 16, 32, 32);   /* ResNet-20 layer2 */
  bench_shape(64, 32, 16, 64);   /* ResNet-20 layer3 */
  bench_shape(16, 64, 56, 128);  /* ResNet-18 layer2 at 224x224 */
  bench_shape(16, 128, 28, 256); /* layer3 */
  bench_shape(16, 256, 14, 512); /* layer4 */
  free(junk);
  cnn_cpu_onednn_cache_clear();
  return 0;
}
