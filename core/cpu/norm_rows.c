/*
 * norm_rows.c -- layer, group and instance normalisation on the CPU: rows
 * of D values, each normalised by its own statistics (core/norm_math.h has
 * the geometry and the formulas).
 *
 * Forward: `omp parallel for` over rows; per row two passes in registers
 * (sum, then sum of squared deviations; both in double, the row stays in
 * cache between them), then y in a third pass.  The per-row mean and rstd
 * are saved for backward.
 * Backward: dx row by row (two row sums, then dx), no intermediate tensor;
 * dgamma/dbeta are sums over the rows that share a parameter: for layer
 * norm (L = 1, G = 1) a column sum done in blocks of 64 columns, each
 * thread walking every row over its block (contiguous reads); otherwise per
 * parameter (a channel: N runs of L contiguous values).
 * The bodies are instantiated for float32/float64 by always-inline calls
 * with a literal `f64` inside the parallel loops (as batch_norm.c).
 */
#include <assert.h>

#include "cpu/kernels.h"
#include "norm_math.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define COL_BLOCK     64

typedef struct {
  const cnn_norm_shape *s;
  const void *gamma, *beta; /* A values or NULL (1 and 0) */
} affine;

ALWAYS_INLINE double param(const void *p, int64_t k, double dflt, int f64) {
  return p ? cnn_cpu_ld(p, k, f64) : dflt;
}

/* mean and rstd of row r of x */
ALWAYS_INLINE void row_stats(int f64, const cnn_norm_shape *s, const void *x, int64_t r, double eps,
                             double *mean, double *rstd) {
  int64_t D = s->D, base = r * D;
  double sum = 0, sq = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < D; j++) sum += cnn_cpu_ld(x, base + j, f64);
  double m = D > 0 ? sum / (double)D : 0;
#pragma omp simd reduction(+ : sq)
  for (int64_t j = 0; j < D; j++) {
    double d = cnn_cpu_ld(x, base + j, f64) - m;
    sq += d * d;
  }
  *mean = m, *rstd = cnn_norm_rstd(sq, D, eps);
}

/* y = (x - mean) * rstd * gamma[k] + beta[k] over row r, one run of L
 * values per parameter */
ALWAYS_INLINE void row_normalize(int f64, const affine *a, const void *x, int64_t r, double mean,
                                 double rstd, void *y) {
  const cnn_norm_shape *s = a->s;
  int64_t L = s->L, runs = L > 0 ? s->D / L : 0;
  for (int64_t c = 0; c < runs; c++) {
    int64_t k = cnn_norm_affine_index(s, r, c * L), base = r * s->D + c * L;
    double scale = rstd * param(a->gamma, k, 1, f64),
           shift = param(a->beta, k, 0, f64) - mean * scale;
#pragma omp simd
    for (int64_t l = 0; l < L; l++)
      cnn_cpu_st(y, base + l, cnn_cpu_ld(x, base + l, f64) * scale + shift, f64);
  }
}

/* layer norm's row (L = 1): a parameter per element */
ALWAYS_INLINE void row_normalize_elementwise(int f64, const affine *a, const void *x, int64_t r,
                                             double mean, double rstd, void *y) {
  int64_t D = a->s->D, base = r * D;
#pragma omp simd
  for (int64_t j = 0; j < D; j++) {
    double v = (cnn_cpu_ld(x, base + j, f64) - mean) * rstd;
    cnn_cpu_st(y, base + j, v * param(a->gamma, j, 1, f64) + param(a->beta, j, 0, f64), f64);
  }
}

ALWAYS_INLINE void forward_row(int f64, const affine *a, const void *x, int64_t r, double eps,
                               void *y, void *mean, void *rstd) {
  double m, rs;
  row_stats(f64, a->s, x, r, eps, &m, &rs);
  if (a->s->L == 1 && a->s->G == 1)
    row_normalize_elementwise(f64, a, x, r, m, rs, y);
  else
    row_normalize(f64, a, x, r, m, rs, y);
  cnn_cpu_st(mean, r, m, f64), cnn_cpu_st(rstd, r, rs, f64);
}

/* The invariants of the row geometry (core/ops/nn_row_norm.c validates;
 * only inside assert()). */
static bool shape_valid(cnn_dtype dt, const cnn_norm_shape *s) {
  return cnn_cpu_float_sizes_valid(dt, s->R, s->D, s->G) && s->G >= 1 && s->L >= 1 &&
         s->D % s->L == 0;
}

int cnn_cpu_norm_rows_forward(cnn_dtype dt, const cnn_norm_shape *s, const void *x,
                              const void *gamma, const void *beta, double eps, void *y, void *mean,
                              void *rstd) {
  assert(shape_valid(dt, s));
  affine a = {s, gamma, beta};
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < s->R; r++) {
    if (dt == CNN_FLOAT64)
      forward_row(1, &a, x, r, eps, y, mean, rstd);
    else
      forward_row(0, &a, x, r, eps, y, mean, rstd);
  }
  return 0;
}

/* ---- backward ----------------------------------------------------------------------------- */

typedef struct {
  const cnn_norm_shape *s;
  const void *dy, *x, *mean, *rstd, *gamma;
} grads_in;

/* dx of row r: two row sums, then the formula of norm_math.h */
ALWAYS_INLINE void backward_row(int f64, const grads_in *g, int64_t r, void *dx) {
  const cnn_norm_shape *s = g->s;
  int64_t D = s->D, base = r * D;
  double m = cnn_cpu_ld(g->mean, r, f64), rs = cnn_cpu_ld(g->rstd, r, f64), s1 = 0, s2 = 0;
#pragma omp simd reduction(+ : s1, s2)
  for (int64_t j = 0; j < D; j++) {
    double dxh =
        cnn_cpu_ld(g->dy, base + j, f64) * param(g->gamma, cnn_norm_affine_index(s, r, j), 1, f64);
    s1 += dxh;
    s2 += dxh * (cnn_cpu_ld(g->x, base + j, f64) - m) * rs;
  }
  double m1 = D > 0 ? s1 / (double)D : 0, m2 = D > 0 ? s2 / (double)D : 0;
#pragma omp simd
  for (int64_t j = 0; j < D; j++) {
    double dxh =
        cnn_cpu_ld(g->dy, base + j, f64) * param(g->gamma, cnn_norm_affine_index(s, r, j), 1, f64);
    double xh = (cnn_cpu_ld(g->x, base + j, f64) - m) * rs;
    cnn_cpu_st(dx, base + j, cnn_norm_dx(dxh, xh, rs, m1, m2), f64);
  }
}

/* layer norm's dgamma/dbeta for columns [k0, k1): every row, in row order */
ALWAYS_INLINE void column_block(int f64, const grads_in *g, int64_t k0, int64_t k1, void *dgamma,
                                void *dbeta) {
  double sg[COL_BLOCK] = {0}, sb[COL_BLOCK] = {0};
  int64_t D = g->s->D;
  for (int64_t r = 0; r < g->s->R; r++) {
    double m = cnn_cpu_ld(g->mean, r, f64), rs = cnn_cpu_ld(g->rstd, r, f64);
#pragma omp simd
    for (int64_t k = k0; k < k1; k++) {
      double d = cnn_cpu_ld(g->dy, r * D + k, f64);
      sg[k - k0] += d * (cnn_cpu_ld(g->x, r * D + k, f64) - m) * rs;
      sb[k - k0] += d;
    }
  }
  for (int64_t k = k0; k < k1; k++) {
    if (dgamma) cnn_cpu_st(dgamma, k, sg[k - k0], f64);
    if (dbeta) cnn_cpu_st(dbeta, k, sb[k - k0], f64);
  }
}

/* dgamma/dbeta of parameter k (a channel): its run of L values in each of
 * the R / G rows of its group */
ALWAYS_INLINE void channel_param(int f64, const grads_in *g, int64_t k, void *dgamma, void *dbeta) {
  const cnn_norm_shape *s = g->s;
  int64_t runs = s->D / s->L, grp = k / runs, off = (k % runs) * s->L;
  double sg = 0, sb = 0;
  for (int64_t r = grp; r < s->R; r += s->G) {
    double m = cnn_cpu_ld(g->mean, r, f64), rs = cnn_cpu_ld(g->rstd, r, f64);
    int64_t base = r * s->D + off;
#pragma omp simd reduction(+ : sg, sb)
    for (int64_t l = 0; l < s->L; l++) {
      double d = cnn_cpu_ld(g->dy, base + l, f64);
      sg += d * (cnn_cpu_ld(g->x, base + l, f64) - m) * rs;
      sb += d;
    }
  }
  if (dgamma) cnn_cpu_st(dgamma, k, sg, f64);
  if (dbeta) cnn_cpu_st(dbeta, k, sb, f64);
}

static void affine_grads(cnn_dtype dt, const grads_in *g, void *dgamma, void *dbeta) {
  int64_t A = cnn_norm_affine_count(g->s);
  int f64 = dt == CNN_FLOAT64;
  if (g->s->L == 1 && g->s->G == 1) {
#pragma omp parallel for schedule(static)
    for (int64_t k0 = 0; k0 < A; k0 += COL_BLOCK) {
      int64_t k1 = k0 + COL_BLOCK < A ? k0 + COL_BLOCK : A;
      if (f64)
        column_block(1, g, k0, k1, dgamma, dbeta);
      else
        column_block(0, g, k0, k1, dgamma, dbeta);
    }
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < A; k++) {
    if (f64)
      channel_param(1, g, k, dgamma, dbeta);
    else
      channel_param(0, g, k, dgamma, dbeta);
  }
}

int cnn_cpu_norm_rows_backward(cnn_dtype dt, const cnn_norm_shape *s, const void *dy, const void *x,
                               const void *mean, const void *rstd, const void *gamma, void *dx,
                               void *dgamma, void *dbeta) {
  assert(shape_valid(dt, s));
  grads_in g = {s, dy, x, mean, rstd, gamma};
  if (dx) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < s->R; r++) {
      if (dt == CNN_FLOAT64)
        backward_row(1, &g, r, dx);
      else
        backward_row(0, &g, r, dx);
    }
  }
  if (dgamma || dbeta) affine_grads(dt, &g, dgamma, dbeta);
  return 0;
}
