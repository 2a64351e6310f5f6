/*
 * batch_norm_rows.c -- batch normalisation of float32 M x C arrays (L = 1
 * in batch_norm.c's N x C x L): a channels-last N x C x H x W tensor as
 * its N*H*W rows of C channels (core/ops/nn_norm.c), and BatchNorm1d's
 * N x C input.
 *
 * batch_norm.c's loops take one channel at a time, which here would read
 * one float out of every row; these walk the rows in memory order with
 * the channels in the vector lanes:
 *
 *   sums:        the rows are split into at most RUNS runs (a split that
 *                depends on M only, so results do not depend on the thread
 *                count); a run sums blocks of BLOCK_ROWS rows in float
 *                (BLOCK_ROWS terms a lane, as batch_norm.c's float32 blocks)
 *                and adds each block into its own double sums; a channel's
 *                totals add the runs' in run order;
 *   elementwise: y (forward) or dx (backward) row by row from per-channel
 *                constants, the rows split over the threads.
 *
 * The arithmetic is batch_norm.c's float32 one: forward sums of d = x - K
 * (K the channel's first value) and d^2, y = (x - mean)*k + beta; backward
 * sums of t and t*(x - mean), t = dy (through the fused relu: 0 where
 * y <= 0), dx = k*t + kx*(x - mean) + k0.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "cpu/batch_norm_internal.h"
#include "cpu/kernels.h"
#include "elementwise_math.h" /* cnn_relu_f */

#define RUNS       16
#define RUN_MIN    64 /* rows a run at least */
#define BLOCK_ROWS 64
/* The elementwise passes run over groups of whole rows of at least this
 * many floats, with the constants repeated to match: a loop over one row
 * of 16 channels was two vectors, and the loop's set-up per row cost as
 * much as its work. */
#define GROUP_FLOATS 256

typedef struct {
  int64_t runs, per; /* runs of `per` rows (the last may be shorter) */
  double *acc;       /* runs x 2 x C double sums */
  float *part;       /* runs x 2 x C float block sums */
  int64_t span;      /* GROUP_FLOATS or more: whole rows, span / C of them */
  float *k[4];       /* per-channel constants of the elementwise pass, each
                      * repeated over `span` floats (replicate_constants) */
} rows_scratch;

static void scratch_free(rows_scratch *s) { free(s->acc), free(s->part), free(s->k[0]); }

static int scratch_alloc(int64_t M, int64_t C, rows_scratch *s) {
  int64_t runs = (M + RUN_MIN - 1) / RUN_MIN;
  s->runs = runs < 1 ? 1 : runs > RUNS ? RUNS : runs;
  s->per = (M + s->runs - 1) / s->runs;
  s->runs = (M + s->per - 1) / s->per;
  s->acc = calloc((size_t)(s->runs * 2 * C), sizeof(double));
  s->part = malloc((size_t)(s->runs * 2 * C) * sizeof(float));
  s->span = C * (C < GROUP_FLOATS ? (GROUP_FLOATS + C - 1) / C : 1);
  s->k[0] = malloc((size_t)(4 * s->span) * sizeof(float));
  if (!s->acc || !s->part || !s->k[0]) return scratch_free(s), -1;
  for (int i = 1; i < 4; i++) s->k[i] = s->k[0] + i * s->span;
  return 0;
}

/* The first C values of s->k[0..count) repeated over their span. */
static void replicate_constants(const rows_scratch *s, int count, int64_t C) {
  for (int i = 0; i < count; i++)
    for (int64_t j = C; j < s->span; j++) s->k[i][j] = s->k[i][j - C];
}

/* Rows [m0, m1) of a block into the float sums f1, f2 (zeroed by the
 * caller).  grad 0: d = x - ref, sums d and d*d; grad 1: t = dy (0 where
 * y <= 0 when y is given), sums t and t*(x - ref). */
static inline __attribute__((always_inline)) void
block_sums(int grad, int64_t m0, int64_t m1, int64_t C, const float *x, const float *dy,
           const float *y, const float *ref, float *f1, float *f2) {
  for (int64_t m = m0; m < m1; m++) {
    const float *xr = x + m * C;
#pragma omp simd
    for (int64_t c = 0; c < C; c++) {
      float d = xr[c] - ref[c], t = d;
      if (grad) t = y && y[m * C + c] <= 0 ? 0.0f : dy[m * C + c];
      f1[c] += t, f2[c] += t * d;
    }
  }
}

/* 8 floats as one value (GCC/Clang vector extensions, as batch_norm.c's):
 * a chunk of up to CHUNK of them, 8*CHUNK channels, is summed over a block
 * of rows in registers.  The plain loop above kept its sums in f1, f2, so
 * each row's adds waited on the previous row's stores. */
typedef float v8f __attribute__((vector_size(32), aligned(4), may_alias));
typedef int32_t v8i __attribute__((vector_size(32), aligned(4), may_alias));
#define CHUNK 4

/* The gradient at 8 channels of row m from offset i: dy, or 0 where y <= 0. */
static inline __attribute__((always_inline)) v8f grad8(const float *dy, const float *y, int64_t i) {
  v8f t = *(const v8f *)(dy + i);
  if (!y) return t;
  v8i blocked = *(const v8f *)(y + i) <= 0; /* -1 where y <= 0 (not NaN) */
  return (v8f)((v8i)t & ~blocked);
}

/* block_sums over channels [c0, c0 + 8*nv), nv a literal <= CHUNK. */
static inline __attribute__((always_inline)) void
chunk_sums(int grad, int nv, int64_t m0, int64_t m1, int64_t C, int64_t c0, const float *x,
           const float *dy, const float *y, const float *ref, float *f1, float *f2) {
  v8f a1[CHUNK] = {0}, a2[CHUNK] = {0}, r[CHUNK];
  for (int j = 0; j < nv; j++) r[j] = *(const v8f *)(ref + c0 + 8 * j);
  for (int64_t m = m0; m < m1; m++) {
    int64_t i = m * C + c0;
    for (int j = 0; j < nv; j++) {
      v8f d = *(const v8f *)(x + i + 8 * j) - r[j];
      v8f t = grad ? grad8(dy, y, i + 8 * j) : d;
      a1[j] += t, a2[j] += t * d;
    }
  }
  for (int j = 0; j < nv; j++) *(v8f *)(f1 + c0 + 8 * j) = a1[j], *(v8f *)(f2 + c0 + 8 * j) = a2[j];
}

/* block_sums for C a multiple of 8, chunk by chunk. */
static inline __attribute__((always_inline)) void
block_sums8(int grad, int64_t m0, int64_t m1, int64_t C, const float *x, const float *dy,
            const float *y, const float *ref, float *f1, float *f2) {
  int64_t c0 = 0;
  for (; c0 + 8 * CHUNK <= C; c0 += 8 * CHUNK)
    chunk_sums(grad, CHUNK, m0, m1, C, c0, x, dy, y, ref, f1, f2);
  switch ((C - c0) / 8) {
  case 3: chunk_sums(grad, 3, m0, m1, C, c0, x, dy, y, ref, f1, f2); break;
  case 2: chunk_sums(grad, 2, m0, m1, C, c0, x, dy, y, ref, f1, f2); break;
  case 1: chunk_sums(grad, 1, m0, m1, C, c0, x, dy, y, ref, f1, f2); break;
  default: break;
  }
}

/* Run r's sums into s->acc. */
static void run_sums(int grad, const rows_scratch *s, int64_t r, int64_t M, int64_t C,
                     const float *x, const float *dy, const float *y, const float *ref) {
  double *a1 = s->acc + r * 2 * C, *a2 = a1 + C;
  float *f1 = s->part + r * 2 * C, *f2 = f1 + C;
  int64_t end = (r + 1) * s->per < M ? (r + 1) * s->per : M;
  for (int64_t m0 = r * s->per; m0 < end; m0 += BLOCK_ROWS) {
    for (int64_t c = 0; c < C; c++) f1[c] = f2[c] = 0;
    int64_t m1 = m0 + BLOCK_ROWS < end ? m0 + BLOCK_ROWS : end;
    if (C % 8 == 0 && grad)
      block_sums8(1, m0, m1, C, x, dy, y, ref, f1, f2);
    else if (C % 8 == 0)
      block_sums8(0, m0, m1, C, x, NULL, NULL, ref, f1, f2);
    else if (grad)
      block_sums(1, m0, m1, C, x, dy, y, ref, f1, f2);
    else
      block_sums(0, m0, m1, C, x, NULL, NULL, ref, f1, f2);
    for (int64_t c = 0; c < C; c++) a1[c] += f1[c], a2[c] += f2[c];
  }
}

/* Every run's sums, then channel c's totals in t1[c], t2[c] (run order). */
static void sums(int grad, rows_scratch *s, int64_t M, int64_t C, const float *x, const float *dy,
                 const float *y, const float *ref, double *t1, double *t2) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < s->runs; r++) run_sums(grad, s, r, M, C, x, dy, y, ref);
  for (int64_t c = 0; c < C; c++) {
    double u1 = 0, u2 = 0;
    for (int64_t r = 0; r < s->runs; r++)
      u1 += s->acc[r * 2 * C + c], u2 += s->acc[r * 2 * C + C + c];
    t1[c] = u1, t2[c] = u2;
  }
}

/* y = (x - mean)*k + b (then relu when asked, relu 1; the residual r
 * added and then relu, relu 2) over groups of rows: group g is the
 * n <= span floats from g*span, constants repeated over span. */
static void normalize(int relu, int64_t total, int64_t span, const float *x, const float *r,
                      const float *mean, const float *k, const float *b, float *y) {
  int64_t groups = (total + span - 1) / span;
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < groups; g++) {
    const float *xg = x + g * span;
    float *yg = y + g * span;
    int64_t n = total - g * span < span ? total - g * span : span;
    if (relu == 2) {
      const float *rg = r + g * span;
#pragma omp simd
      for (int64_t j = 0; j < n; j++) {
        float v = (xg[j] - mean[j]) * k[j] + b[j];
        yg[j] = cnn_relu_f(v + rg[j]);
      }
    } else if (relu) {
#pragma omp simd
      for (int64_t j = 0; j < n; j++) yg[j] = cnn_relu_f((xg[j] - mean[j]) * k[j] + b[j]);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < n; j++) yg[j] = (xg[j] - mean[j]) * k[j] + b[j];
    }
  }
}

static double ld_or(const void *v, int64_t c, double def) {
  return v ? ((const float *)v)[c] : def;
}

int cnn_cpu_bn_forward_rows_f32(const bn_args *a, int64_t M, int64_t C, const float *x, float *y) {
  rows_scratch s;
  if (scratch_alloc(M, C, &s)) return -1;
  double *t = malloc((size_t)(2 * C) * sizeof(double));
  if (!t) return scratch_free(&s), -1;
  float *mean = s.k[0], *k = s.k[1], *b = s.k[2];
  if (a->training) sums(0, &s, M, C, x, NULL, NULL, x, t, t + C); /* ref: the first row */
  for (int64_t c = 0; c < C; c++) {
    double mu, var;
    if (a->training) {
      double dm = t[c] / M;
      mu = x[c] + dm, var = t[C + c] / M - dm * dm;
      if (var < 0) var = 0; /* rounding */
    } else {
      mu = ((const float *)a->running_mean)[c], var = ((const float *)a->running_var)[c];
    }
    double invstd = 1.0 / sqrt(var + a->eps);
    mean[c] = (float)mu, k[c] = (float)(invstd * ld_or(a->gamma, c, 1));
    b[c] = (float)ld_or(a->beta, c, 0);
    cnn_cpu_bn_store_stats(a, 0, c, M, mu, var, invstd);
  }
  replicate_constants(&s, 3, C);
  normalize(a->relu, M * C, s.span, x, a->residual, mean, k, b, y);
  free(t);
  scratch_free(&s);
  return 0;
}

/* dx = k*t + kx*(x - mean) + k0 over groups of rows (as normalize), t the
 * gradient at batch norm's output (dy, or 0 where the fused relu's y <= 0).
 * dx may be dy. */
static void input_grad(int64_t total, int64_t span, const float *dy, const float *y, const float *x,
                       const float *mean, const float *k, const float *kx, const float *k0,
                       float *dx) {
  int64_t groups = (total + span - 1) / span;
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < groups; g++) {
    int64_t o = g * span, n = total - o < span ? total - o : span;
    const float *xg = x + o, *dyg = dy + o, *yg = y ? y + o : NULL;
    float *dxg = dx + o;
    if (yg) {
#pragma omp simd
      for (int64_t j = 0; j < n; j++) {
        float t = yg[j] <= 0 ? 0.0f : dyg[j];
        dxg[j] = k[j] * t + kx[j] * (xg[j] - mean[j]) + k0[j];
      }
    } else {
#pragma omp simd
      for (int64_t j = 0; j < n; j++) dxg[j] = k[j] * dyg[j] + kx[j] * (xg[j] - mean[j]) + k0[j];
    }
  }
}

int cnn_cpu_bn_backward_rows_f32(const bn_grads *a, int64_t M, int64_t C, const float *dy,
                                 const float *x) {
  rows_scratch s;
  if (scratch_alloc(M, C, &s)) return -1;
  double *t = malloc((size_t)(2 * C) * sizeof(double));
  if (!t) return scratch_free(&s), -1;
  float *mean = s.k[0], *k = s.k[1], *kx = s.k[2], *k0 = s.k[3];
  for (int64_t c = 0; c < C; c++) mean[c] = ((const float *)a->save_mean)[c];
  sums(1, &s, M, C, x, dy, a->y, mean, t, t + C);
  for (int64_t c = 0; c < C; c++) {
    double invstd = ((const float *)a->save_invstd)[c], sdy = t[c], sdyx = t[C + c] * invstd;
    if (a->dgamma) ((float *)a->dgamma)[c] = (float)sdyx;
    if (a->dbeta) ((float *)a->dbeta)[c] = (float)sdy;
    double kk = ld_or(a->gamma, c, 1) * invstd;
    double mdy = a->eval ? 0 : sdy / M, mdyx = a->eval ? 0 : sdyx / M;
    k[c] = (float)kk, kx[c] = (float)(-kk * invstd * mdyx), k0[c] = (float)(-kk * mdy);
  }
  replicate_constants(&s, 4, C);
  if (a->dx) input_grad(M * C, s.span, dy, a->y, x, mean, k, kx, k0, a->dx);
  free(t);
  scratch_free(&s);
  return 0;
}
