/*
 * reduce_plan.h -- how gpu/reduce.cu lays a row reduction (M rows of R
 * contiguous elements) over the GPU, and the per-element and combining
 * math of its partial results.  Plain C with CNN_HD functions (host and
 * device), so tests/gpu/test_gpu_reduce_plan.c replays the kernels' grids
 * on the host, with the same index arithmetic and the same merge order,
 * against a naive loop.
 *
 * Layouts (gpu_reduce_plan):
 *  - BLOCK: one 256-thread block per row (grid-stride over rows): the
 *    original kernel, for rows long enough to fill a block when there are
 *    rows enough to fill the GPU;
 *  - WARP: R <= GPU_RED_WARP_MAX: one 32-lane warp per row, 8 rows per
 *    block, so a short row does not leave 7/8 of a block idle;
 *  - SPLIT: few long rows (M < 2 x SMs, R >= GPU_RED_SPLIT_MIN): each row
 *    is cut into `chunks` ranges of `chunk_len` elements, one block per
 *    (row, chunk) writes a partial result (pass 1), and one thread per row
 *    merges its chunks in order (pass 2) -- a whole-tensor sum, norm or
 *    max, a loss mean or GradScaler's check then uses every SM, not one.
 *
 * Partial results (gpu_red_part) make the order of combination free:
 * floating sums, products and norm accumulations in double; variance as
 * (count, mean, M2) merged with Chan et al.'s pairwise formula (the block
 * kernel's two passes give the same value up to rounding); integer sum and
 * product wrapping in uint64; extremes as (value, index) where NaN beats
 * any number, then the better value, then the LOWER index -- so the first
 * extreme and the first NaN win whatever the merge order, as on the CPU.
 */
#ifndef CNN_GPU_REDUCE_PLAN_H
#define CNN_GPU_REDUCE_PLAN_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"          /* cnn_reduce_op */
#include "elementwise_math.h" /* CNN_HD */

#define GPU_RED_THREADS    256
#define GPU_RED_WARP       32
#define GPU_RED_WARP_MAX   256           /* rows this short: one warp each */
#define GPU_RED_SPLIT_MIN  8192          /* rows this long may be split */
#define GPU_RED_CHUNK_MIN  4096          /* elements per chunk, at least */
#define GPU_RED_MAX_BLOCKS (65535u * 8u) /* gpu_blocks' cap */

typedef enum { GPU_RED_BLOCK, GPU_RED_WARP_ROWS, GPU_RED_SPLIT } gpu_red_mode;

typedef struct {
  gpu_red_mode mode;
  int64_t chunks, chunk_len; /* SPLIT: per row (else 1, R) */
  unsigned blocks;           /* the first (or only) kernel's grid */
} gpu_red_plan;

static inline gpu_red_plan gpu_reduce_plan(int64_t M, int64_t R, int sms) {
  gpu_red_plan p = {GPU_RED_BLOCK, 1, R, 1};
  int64_t b = M;
  if (R <= GPU_RED_WARP_MAX) {
    p.mode = GPU_RED_WARP_ROWS;
    b = (M + GPU_RED_THREADS / GPU_RED_WARP - 1) / (GPU_RED_THREADS / GPU_RED_WARP);
  } else if (M < 2 * (int64_t)sms && R >= GPU_RED_SPLIT_MIN) {
    int64_t want = (4 * (int64_t)sms + M - 1) / M; /* ~4 blocks per SM overall */
    int64_t most = (R + GPU_RED_CHUNK_MIN - 1) / GPU_RED_CHUNK_MIN;
    p.chunks = want < most ? want : most;
    if (p.chunks >= 2) {
      p.mode = GPU_RED_SPLIT;
      p.chunk_len = (R + p.chunks - 1) / p.chunks;
      p.chunks = (R + p.chunk_len - 1) / p.chunk_len; /* no empty chunk */
      b = M * p.chunks;
    } else {
      p.chunks = 1;
    }
  }
  if (b < 1) b = 1;
  p.blocks = b > (int64_t)GPU_RED_MAX_BLOCKS ? GPU_RED_MAX_BLOCKS : (unsigned)b;
  return p;
}

/* [lo, hi) of chunk c of a row (SPLIT) */
static inline CNN_HD void gpu_red_chunk(const gpu_red_plan *p, int64_t R, int64_t c, int64_t *lo,
                                        int64_t *hi) {
  *lo = c * p->chunk_len;
  *hi = *lo + p->chunk_len < R ? *lo + p->chunk_len : R;
}

/* WARP: the row of warp w (0..7) of block `block`, for grid-stride pass `pass` */
static inline CNN_HD int64_t gpu_red_warp_row(int64_t block, int64_t w, int64_t pass,
                                              int64_t grid) {
  return (block + pass * grid) * (GPU_RED_THREADS / GPU_RED_WARP) + w;
}

/* ---- partial results --------------------------------------------------------------------- */

typedef struct {
  double acc;      /* sum, mean, prod, norm accumulation */
  double mean, m2; /* var/std: running mean and sum of squared deviations */
  int64_t n;       /* var/std: elements seen */
  uint64_t iacc;   /* integer sum/prod (wrapping) */
  double ev;       /* max/min/arg: the extreme so far */
  int64_t ei;      /* its index in the row; -1: none */
} gpu_red_part;

static inline CNN_HD bool gpu_red_is_ext(int op) {
  return op == CNN_RED_MAX || op == CNN_RED_MIN || op == CNN_RED_ARGMAX || op == CNN_RED_ARGMIN;
}
static inline CNN_HD bool gpu_red_is_min(int op) {
  return op == CNN_RED_MIN || op == CNN_RED_ARGMIN;
}

/* the p-norm accumulation (the CPU's row_norm): max/min of |v| for +-inf
 * (NaN propagates), count of non-zeros for 0, else a sum of |v|^p */
static inline CNN_HD double gpu_norm_acc(double acc, double a, double p) {
  if (p == INFINITY) return (a > acc || a != a) ? a : acc;
  if (p == -INFINITY) return (a < acc || a != a) ? a : acc;
  if (p == 0) return acc + (a != 0);
  if (p == 1) return acc + a;
  if (p == 2) return acc + a * a;
  return acc + pow(a, p);
}
/* two norm accumulations combined (sums add; +-inf keep max/min) */
static inline CNN_HD double gpu_norm_merge(double a, double b, double p) {
  return (p == INFINITY || p == -INFINITY) ? gpu_norm_acc(a, b, p) : a + b;
}

/* (bv, bi) better than (av, ai)?  NaN first, then value, then the lower index */
static inline CNN_HD bool gpu_ext_better(double av, int64_t ai, double bv, int64_t bi,
                                         bool is_min) {
  if (bi < 0) return false;
  if (ai < 0) return true;
  bool an = av != av, bn = bv != bv;
  if (an || bn) return bn && (!an || bi < ai);
  if (bv == av) return bi < ai;
  return is_min ? bv < av : bv > av;
}

static inline CNN_HD gpu_red_part gpu_red_init(int op, double p) {
  gpu_red_part r;
  r.acc = op == CNN_RED_PROD ? 1.0 : (op == CNN_RED_NORM && p == -INFINITY) ? INFINITY : 0.0;
  r.mean = 0, r.m2 = 0, r.n = 0;
  r.iacc = op == CNN_RED_PROD ? 1u : 0u;
  r.ev = 0, r.ei = -1;
  return r;
}

/* element i of the row, value v (as double) or iv (integer dtypes) */
static inline CNN_HD void gpu_red_add(gpu_red_part *r, int op, bool integer, double p, double v,
                                      uint64_t iv, int64_t i) {
  if (gpu_red_is_ext(op)) {
    if (gpu_ext_better(r->ev, r->ei, v, i, gpu_red_is_min(op))) r->ev = v, r->ei = i;
  } else if (integer && (op == CNN_RED_SUM || op == CNN_RED_PROD)) {
    r->iacc = op == CNN_RED_PROD ? r->iacc * iv : r->iacc + iv;
  } else if (op == CNN_RED_VAR || op == CNN_RED_STD) {
    r->n++;
    double d = v - r->mean;
    r->mean += d / (double)r->n;
    r->m2 += d * (v - r->mean);
  } else if (op == CNN_RED_PROD) {
    r->acc *= v;
  } else if (op == CNN_RED_NORM) {
    r->acc = gpu_norm_acc(r->acc, fabs(v), p);
  } else {
    r->acc += v;
  }
}

/* a := a combined with b (b may cover any other elements of the row) */
static inline CNN_HD void gpu_red_merge(gpu_red_part *a, const gpu_red_part *b, int op,
                                        bool integer, double p) {
  if (gpu_red_is_ext(op)) {
    if (gpu_ext_better(a->ev, a->ei, b->ev, b->ei, gpu_red_is_min(op)))
      a->ev = b->ev, a->ei = b->ei;
  } else if (integer && (op == CNN_RED_SUM || op == CNN_RED_PROD)) {
    a->iacc = op == CNN_RED_PROD ? a->iacc * b->iacc : a->iacc + b->iacc;
  } else if (op == CNN_RED_VAR || op == CNN_RED_STD) {
    if (!b->n) return;
    if (!a->n) {
      *a = *b;
      return;
    }
    int64_t n = a->n + b->n;
    double d = b->mean - a->mean;
    a->mean += d * (double)b->n / (double)n;
    a->m2 += b->m2 + d * d * (double)a->n * (double)b->n / (double)n;
    a->n = n;
  } else if (op == CNN_RED_PROD) {
    a->acc *= b->acc;
  } else if (op == CNN_RED_NORM) {
    a->acc = gpu_norm_merge(a->acc, b->acc, p);
  } else {
    a->acc += b->acc;
  }
}

/* the row's floating result (sum, mean, prod, var, std, norm) */
static inline CNN_HD double gpu_red_final(const gpu_red_part *r, int op, int64_t R, double p) {
  if (op == CNN_RED_MEAN) return r->acc / (double)R;
  if (op == CNN_RED_VAR || op == CNN_RED_STD) {
    double v = r->m2 / ((double)R - p); /* p carries the correction */
    return op == CNN_RED_STD ? sqrt(v) : v;
  }
  if (op == CNN_RED_NORM && !isinf(p) && p != 0 && p != 1)
    return p == 2 ? sqrt(r->acc) : pow(r->acc, 1.0 / p);
  return r->acc;
}

#endif
