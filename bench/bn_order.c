/*
 * bench/bn_order.c -- batch normalisation's float32 training passes in
 * memory order (core/cpu/batch_norm_planes.c) against batch_norm.c's
 * channel loops, in one process: the two alternated, 31 rounds, the median
 * of each; 2 threads (OMP_NUM_THREADS).  Built by hand, not by CMake:
 *
 *   cmake --build build --target cnn_core
 *   cc -O2 -fopenmp -Icore bench/bn_order.c build/core/libcnn_core.a -o /tmp/bn_order \
 *      $(pkg-config --libs dnnl 2>/dev/null || echo -ldnnl) -lsleef -lm && /tmp/bn_order
 *
 * Two conditions per shape: "hot", the same input and output every round
 * (in cache, as bench/layers.lua times), and "cold", inputs and outputs
 * rotated through 256 MB of buffers, so each call reads and writes memory
 * that left the cache (as inside a training step larger than the L3:
 * bench/step_profile.lua).  One JSON line per shape (N x C x L),
 * condition and pass, with the order cnnsh chooses for the shape:
 *   {"bench":"bn_order","shape":"64x64x64","cond":"cold","pass":"fwd",
 *    "planes_us":...,"channels_us":...,"speedup":...,"chosen":"planes"}
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn.h"
#include "cpu/batch_norm_internal.h"
#include "cpu/kernels.h"

#define ROUNDS     31
#define COLD_BYTES ((size_t)256 << 20)

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct {
  int64_t N, C, L;
  int nbuf; /* buffers rotated through (1: hot) */
  float **x, **y, **dy, **dx;
  float *g, *b, *rm, *rv, *sm, *si, *dg, *db;
} setup;

static float *filled(size_t n, unsigned seed) {
  float *a = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) a[i] = (float)((i * 2654435761u + seed) % 1000) / 250.0f - 2;
  return a;
}

static void one_call(setup *s, int i, int pass) {
  int k = i % s->nbuf;
  if (pass == 0)
    cnn_cpu_batch_norm_forward(CNN_FLOAT32, s->N, s->C, s->L, s->x[k], s->g, s->b, s->rm, s->rv, 1,
                               0.1, 1e-5, s->y[k], s->sm, s->si);
  else
    cnn_cpu_batch_norm_backward(CNN_FLOAT32, s->N, s->C, s->L, s->dy[k], s->x[k], s->g, s->sm,
                                s->si, s->dx[k], s->dg, s->db);
}

static double time_us(setup *s, int round, int pass, int planes) {
  cnn_cpu_bn_allow_planes(planes ? 2 : 0);
  double t0 = cnn_now_seconds();
  one_call(s, round, pass);
  return (cnn_now_seconds() - t0) * 1e6;
}

static void run(int64_t N, int64_t C, int64_t L, int cold) {
  size_t n = (size_t)(N * C * L);
  setup s = {N, C, L, cold ? (int)(COLD_BYTES / (4 * n * sizeof(float))) + 1 : 1};
  s.x = malloc(s.nbuf * sizeof(float *)), s.y = malloc(s.nbuf * sizeof(float *));
  s.dy = malloc(s.nbuf * sizeof(float *)), s.dx = malloc(s.nbuf * sizeof(float *));
  for (int k = 0; k < s.nbuf; k++)
    s.x[k] = filled(n, k), s.dy[k] = filled(n, 7 * k + 1), s.y[k] = filled(n, 3),
    s.dx[k] = filled(n, 5);
  s.g = filled(C, 11), s.b = filled(C, 13), s.rm = filled(C, 17), s.rv = filled(C, 19);
  for (int64_t c = 0; c < C; c++) s.rv[c] = 1;
  s.sm = filled(C, 1), s.si = filled(C, 1), s.dg = filled(C, 1), s.db = filled(C, 1);
  for (int pass = 0; pass < 2; pass++) {
    double tp[ROUNDS], tc[ROUNDS];
    for (int i = 0; i < 3; i++) one_call(&s, i, pass); /* warm-up */
    for (int r = 0; r < ROUNDS; r++) {
      tp[r] = time_us(&s, 2 * r, pass, 1);
      tc[r] = time_us(&s, 2 * r + 1, pass, 0);
    }
    qsort(tp, ROUNDS, sizeof(double), cmp), qsort(tc, ROUNDS, sizeof(double), cmp);
    printf("{\"bench\":\"bn_order\",\"shape\":\"%lldx%lldx%lld\",\"cond\":\"%s\",\"pass\":\"%s\","
           "\"planes_us\":%.1f,\"channels_us\":%.1f,\"speedup\":%.3f,\"chosen\":\"%s\"}\n",
           (long long)N, (long long)C, (long long)L, cold ? "cold" : "hot", pass ? "bwd" : "fwd",
           tp[ROUNDS / 2], tc[ROUNDS / 2], tc[ROUNDS / 2] / tp[ROUNDS / 2],
           cnn_cpu_bn_planes_pay(N, C, L) ? "planes" : "channels");
  }
  cnn_cpu_bn_allow_planes(1);
  for (int k = 0; k < s.nbuf; k++) free(s.x[k]), free(s.y[k]), free(s.dy[k]), free(s.dx[k]);
  free(s.x), free(s.y), free(s.dy), free(s.dx), free(s.g), free(s.b), free(s.rm), free(s.rv);
  free(s.sm), free(s.si), free(s.dg), free(s.db);
}

int main(void) {
  /* ResNet-20 at batch 64 (32x32, 16x16, 8x8), the example network's two
   * (28x28, 14x14), a ResNet-18 shape at 224 and batch 16 (56x56, 7x7) */
  int64_t shapes[][3] = {{64, 16, 1024}, {64, 32, 256}, {64, 64, 64}, {64, 32, 784}, {64, 64, 196},
                         {16, 64, 3136}, {16, 512, 49}, {16, 512, 1}, {16, 128, 16}, {16, 64, 64}};
  for (int cold = 0; cold <= 1; cold++)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
      run(shapes[i][0], shapes[i][1], shapes[i][2], cold);
  return 0;
}
