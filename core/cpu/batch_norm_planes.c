/*
 * batch_norm_planes.c -- batch normalisation's float32 training passes on
 * AVX-512 (or, without it, AVX2: batch_norm_planes_avx2.c's bodies) in
 * memory order (batch_norm.c runs everything else: float64, the portable
 * loops, eval).
 *
 * batch_norm.c's training loop takes one channel at a time, and channel
 * c's values are N runs of L floats one image apart: at ResNet-20's 8x8
 * planes, 64 runs of 256 bytes 16 KB apart, too short for the hardware
 * prefetcher, and its output rows are written the same way, each a write
 * miss of its own.  Here every pass streams the tensor in memory order:
 *
 *   sums:       the images are split into at most RUNS contiguous runs,
 *               each run's sums of every channel go to its own partial
 *               sums (threads take whole runs), and a channel's totals add
 *               the runs' in run order -- a split that depends on N only,
 *               so the results do not depend on the thread count;
 *   elementwise: normalisation (forward) and dx (backward) plane by plane,
 *               each plane with its channel's constants.
 *
 * The arithmetic is batch_norm_avx512.c's (float partial sums over blocks
 * of a row, added into double; the same elementwise expressions), only
 * the order of the sums' additions differs.  A run sums a channel's rows
 * (one per image) in registers, so runs hold at least RUN_MIN images: with
 * one image a run, 16x512x7x7 in cache ran at 0.65-0.71x of the channel
 * loops.  Figures (2 threads), at the shapes cnn_cpu_bn_planes_pay picks:
 * bench/bn_order.c (the two orders alternated in one process), on memory
 * that left the cache (as in a training step larger than the L3) 1.1-1.9x,
 * in cache 0.93-1.67x; inside ResNet-20's step at batch 64
 * (bench/step_profile.lua, builds alternated) forward 1.3-1.5x, backward
 * 1.25-1.75x.
 */
#include <math.h>
#include <stdlib.h>

#include "cpu/batch_norm_internal.h"
#include "cpu/kernels.h"

#define RUNS      16 /* at most this many runs of images for the sums, */
#define RUN_MIN   4  /* of at least this many images (a run sums a channel's rows in registers) */
#define MIN_BYTES (1 << 20) /* the tensors this order runs: 1 MiB and more, */
#define MAX_ROW   1024      /* with planes of at most this many floats */

static int allow = 1; /* 0: never, 1: where worth_it, 2: always (tests) */

int cnn_cpu_bn_allow_planes(int mode) {
  int prev = allow;
  allow = mode;
  return prev;
}

/* Where memory order pays, by bench/bn_order.c over four runs: 1.0-1.8x
 * at every shape of 1 MiB and more with planes of at most 4 KB.  Below 1
 * MiB the tensor stays in cache whichever order reads it, and the gain
 * swung with the run (16x128x4x4: 0.67-1.64x, 16x512x1x1 0.76-1.01x);
 * planes longer than 4 KB are long runs for the prefetcher in channel
 * order too (16x64x56x56: 0.83-1.36x).  Those keep the channel loops. */
int cnn_cpu_bn_planes_pay(int64_t N, int64_t C, int64_t L) {
  return N * C * L * (int64_t)sizeof(float) >= MIN_BYTES && L <= MAX_ROW;
}

static int worth_it(int64_t N, int64_t C, int64_t L) {
  return allow == 1 ? cnn_cpu_bn_planes_pay(N, C, L) : allow == 2;
}

/* Runs of *per images each (the last may be shorter) covering N. */
static int64_t image_runs(int64_t N, int64_t *per) {
  int64_t runs = N < RUNS ? N : RUNS;
  *per = (N + runs - 1) / runs;
  if (*per < RUN_MIN) *per = N < RUN_MIN ? N : RUN_MIN;
  return (N + *per - 1) / *per;
}

/* Every run's two sums of every channel into acc (runs x C x 2 doubles),
 * with the AVX-512 bodies or (avx512 0) the AVX2 ones. */
static void run_sums(int avx512, int grad, int64_t runs, int64_t per, int64_t N, int64_t C,
                     int64_t L, const float *x, const float *dy, const float *y, const float *ref,
                     double *acc) {
  void (*sums)(int, int64_t, int64_t, int64_t, int64_t, const float *, const float *, const float *,
               const float *, double *) =
      avx512 ? cnn_cpu_bn_image_sums_f32_avx512 : cnn_cpu_bn_image_sums_f32_avx2;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs; r++)
    sums(grad, r * per, (r + 1) * per < N ? (r + 1) * per : N, C, L, x, dy, y, ref,
         acc + r * C * 2);
}

/* Planes a step of the elementwise loops takes: about STEP_FLOATS values
 * (a plane a call, 4,096 calls at 64x64x8x8, cost a division and the
 * constants' set-up each). */
#define STEP_FLOATS 4096
static int64_t plane_step(int64_t L) { return L >= STEP_FLOATS ? 1 : STEP_FLOATS / L; }

/* Channel c's two totals: the runs' partial sums added in run order. */
static void channel_totals(const double *acc, int64_t runs, int64_t C, int64_t c, double *s1,
                           double *s2) {
  double t1 = 0, t2 = 0;
  for (int64_t r = 0; r < runs; r++) t1 += acc[(r * C + c) * 2], t2 += acc[(r * C + c) * 2 + 1];
  *s1 = t1, *s2 = t2;
}

/* The scratch of a call: partial sums, and per channel the reference and
 * the elementwise pass's three constants. */
typedef struct {
  double *acc;
  float *ref, *k;
  int64_t runs, per; /* image_runs(N) */
} scratch;

static int scratch_alloc(scratch *s, int64_t N, int64_t C) {
  s->runs = image_runs(N, &s->per);
  s->acc = malloc((size_t)(s->runs * C * 2) * sizeof(double));
  s->ref = malloc((size_t)C * sizeof(float));
  s->k = malloc((size_t)C * 3 * sizeof(float));
  if (s->acc && s->ref && s->k) return 0;
  free(s->acc), free(s->ref), free(s->k);
  return -1;
}

static void scratch_free(scratch *s) { free(s->acc), free(s->ref), free(s->k); }

int cnn_cpu_bn_forward_planes_f32(const bn_args *a, int64_t N, int64_t C, int64_t L, const float *x,
                                  float *y) {
  scratch s;
  if (!worth_it(N, C, L) || N * C * L == 0 || scratch_alloc(&s, N, C)) return -1;
  for (int64_t c = 0; c < C; c++) s.ref[c] = x[c * L]; /* K: the channel's first value */
  run_sums(a->avx512, 0, s.runs, s.per, N, C, L, x, NULL, NULL, s.ref, s.acc);
  int64_t M = N * L;
  for (int64_t c = 0; c < C; c++) {
    double s1, s2;
    channel_totals(s.acc, s.runs, C, c, &s1, &s2);
    double dm = s1 / M, mean = s.ref[c] + dm, var = s2 / M - dm * dm; /* dm = mean - K */
    if (var < 0) var = 0;                                             /* rounding */
    double invstd = 1.0 / sqrt(var + a->eps);
    double g = a->gamma ? ((const float *)a->gamma)[c] : 1;
    double b = a->beta ? ((const float *)a->beta)[c] : 0;
    s.k[3 * c] = (float)mean, s.k[3 * c + 1] = (float)(invstd * g), s.k[3 * c + 2] = (float)b;
    cnn_cpu_bn_store_stats(a, 0, c, M, mean, var, invstd);
  }
  int64_t P = N * C, per = plane_step(L);
  void (*normalize)(int64_t, int64_t, int64_t, int64_t, const float *, const float *, const float *,
                    float *, int) =
      a->avx512 ? cnn_cpu_bn_normalize_planes_f32_avx512 : cnn_cpu_bn_normalize_planes_f32_avx2;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < P; p += per)
    normalize(p, p + per < P ? p + per : P, C, L, x, a->residual, s.k, y, a->relu);
  scratch_free(&s);
  return 0;
}

int cnn_cpu_bn_backward_planes_f32(const bn_grads *a, int64_t N, int64_t C, int64_t L,
                                   const float *dy, const float *x) {
  scratch s;
  if (!worth_it(N, C, L) || N * C * L == 0 || scratch_alloc(&s, N, C)) return -1;
  const float *mean = a->save_mean, *invstd = a->save_invstd, *y = a->y;
  for (int64_t c = 0; c < C; c++) s.ref[c] = mean[c];
  run_sums(a->avx512, 1, s.runs, s.per, N, C, L, x, dy, y, s.ref, s.acc);
  double M = (double)(N * L);
  for (int64_t c = 0; c < C; c++) {
    double sdy, sdyx, is = invstd[c], g = a->gamma ? ((const float *)a->gamma)[c] : 1;
    channel_totals(s.acc, s.runs, C, c, &sdy, &sdyx);
    sdyx *= is;
    if (a->dgamma) ((float *)a->dgamma)[c] = (float)sdyx;
    if (a->dbeta) ((float *)a->dbeta)[c] = (float)sdy;
    /* dx = k*(dy - mdy - xhat*mdyx) = k*g + kx*(x - mean) - k*mdy */
    double k = g * is, mdy = a->eval ? 0 : sdy / M, mdyx = a->eval ? 0 : sdyx / M;
    s.k[3 * c] = (float)k, s.k[3 * c + 1] = (float)(-k * is * mdyx);
    s.k[3 * c + 2] = (float)(-k * mdy);
  }
  if (a->dx) {
    float *dx = a->dx;
    int64_t P = N * C, per = plane_step(L);
    void (*dx_planes)(int64_t, int64_t, int64_t, int64_t, const float *, const float *,
                      const float *, const float *, const float *, float *) =
        a->avx512 ? cnn_cpu_bn_dx_planes_f32_avx512 : cnn_cpu_bn_dx_planes_f32_avx2;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < P; p += per)
      dx_planes(p, p + per < P ? p + per : P, C, L, dy, y, x, s.ref, s.k, dx);
  }
  scratch_free(&s);
  return 0;
}
