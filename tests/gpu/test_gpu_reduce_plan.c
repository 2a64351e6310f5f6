/*
 * test_gpu_reduce_plan.c -- gpu/reduce.cu's layouts replayed on the host
 * (label unit, every configuration: gpu/reduce_plan.h is plain C).
 *
 * The kernels cannot run here, so this test runs their grids: for the warp
 * layout every (block, warp, lane, grid-stride pass) with the kernel's row
 * formula and the lane-order merge; for the split layout every (block,
 * thread) of pass 1 with the chunk ranges, the shared-memory tree merge in
 * the kernel's order, then pass 2's in-order merge -- all through the
 * header's own functions, as the kernels call them.  Each result is
 * compared with a naive loop written here (two-pass variance, first
 * extreme, first NaN), over every reduction, rows with ties and NaNs, and
 * integer wrap-around.  Also checked: the plan's choice of layout, that
 * chunks cover each row exactly once, and the grid caps.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "reduce_plan.h"

/* ---- the naive reference ------------------------------------------------------------------ */

static double naive(int op, const double *x, int64_t R, double p, int64_t *idx) {
  if (op == CNN_RED_MAX || op == CNN_RED_MIN || op == CNN_RED_ARGMAX || op == CNN_RED_ARGMIN) {
    bool mn = op == CNN_RED_MIN || op == CNN_RED_ARGMIN;
    int64_t best = 0;
    for (int64_t i = 0; i < R; i++) {
      if (isnan(x[i])) {
        best = i;
        break;
      }                                                   /* the first NaN wins */
      if (mn ? x[i] < x[best] : x[i] > x[best]) best = i; /* strict: the first extreme stays */
    }
    *idx = best;
    return x[best];
  }
  double acc = op == CNN_RED_PROD ? 1 : 0, mean = 0;
  for (int64_t i = 0; i < R; i++) mean += x[i];
  mean /= (double)R;
  for (int64_t i = 0; i < R; i++) {
    double a = fabs(x[i]);
    switch (op) {
    case CNN_RED_PROD: acc *= x[i]; break;
    case CNN_RED_VAR:
    case CNN_RED_STD: acc += (x[i] - mean) * (x[i] - mean); break;
    case CNN_RED_NORM:
      if (isinf(p))
        acc = i == 0 ? a : (isnan(a) || isnan(acc)) ? NAN : p > 0 ? fmax(acc, a) : fmin(acc, a);
      else
        acc += p == 0 ? (a != 0) : pow(a, p);
      break;
    default: acc += x[i];
    }
  }
  if (op == CNN_RED_MEAN) return acc / (double)R;
  if (op == CNN_RED_VAR) return acc / ((double)R - p);
  if (op == CNN_RED_STD) return sqrt(acc / ((double)R - p));
  if (op == CNN_RED_NORM && !isinf(p) && p != 0) return pow(acc, 1.0 / p);
  return acc;
}

/* ---- the kernels' grids, replayed ---------------------------------------------------------- */

typedef struct {
  int op;
  bool integer;
  double p;
  const double *x;    /* M x R values */
  const uint64_t *ix; /* M x R integers (integer dtypes) */
  int64_t M, R;
} job;

static void add(const job *j, gpu_red_part *r, int64_t m, int64_t col) {
  int64_t at = m * j->R + col;
  gpu_red_add(r, j->op, j->integer, j->p, j->x[at], j->ix ? j->ix[at] : 0, col);
}

/* k_reduce_warp_rows over `grid` blocks: parts[m] = the row's merged state */
static void replay_warp(const job *j, unsigned grid, gpu_red_part *parts, int *visits) {
  for (unsigned block = 0; block < grid; block++)
    for (int64_t w = 0; w < GPU_RED_THREADS / GPU_RED_WARP; w++)
      for (int64_t pass = 0;; pass++) {
        int64_t m = gpu_red_warp_row(block, w, pass, grid);
        if (m >= j->M) break;
        gpu_red_part lanes[GPU_RED_WARP];
        for (int64_t lane = 0; lane < GPU_RED_WARP; lane++) {
          lanes[lane] = gpu_red_init(j->op, j->p);
          for (int64_t col = lane; col < j->R; col += GPU_RED_WARP) add(j, &lanes[lane], m, col);
        }
        for (int l = 1; l < GPU_RED_WARP; l++)
          gpu_red_merge(&lanes[0], &lanes[l], j->op, j->integer, j->p);
        parts[m] = lanes[0];
        visits[m]++;
      }
}

/* k_reduce_split (pass 1, `grid` blocks) then k_reduce_merge (pass 2) */
static void replay_split(const job *j, const gpu_red_plan *pl, unsigned grid, gpu_red_part *rows,
                         int *visits) {
  int64_t total = j->M * pl->chunks;
  gpu_red_part *parts = calloc((size_t)total, sizeof *parts);
  static gpu_red_part sh[GPU_RED_THREADS];
  for (unsigned block = 0; block < grid; block++)
    for (int64_t b = block; b < total; b += grid) {
      int64_t m = b / pl->chunks, lo, hi;
      gpu_red_chunk(pl, j->R, b % pl->chunks, &lo, &hi);
      for (int t = 0; t < GPU_RED_THREADS; t++) {
        sh[t] = gpu_red_init(j->op, j->p);
        for (int64_t col = lo + t; col < hi; col += GPU_RED_THREADS) {
          add(j, &sh[t], m, col);
          visits[m * j->R + col]++;
        }
      }
      for (int s = GPU_RED_THREADS / 2; s > 0; s >>= 1)
        for (int t = 0; t < s; t++) gpu_red_merge(&sh[t], &sh[t + s], j->op, j->integer, j->p);
      parts[b] = sh[0];
    }
  for (int64_t m = 0; m < j->M; m++) {
    rows[m] = parts[m * pl->chunks];
    for (int64_t c = 1; c < pl->chunks; c++)
      gpu_red_merge(&rows[m], &parts[m * pl->chunks + c], j->op, j->integer, j->p);
  }
  free(parts);
}

/* compare row m's state with the naive loop */
static int compare(const job *j, const gpu_red_part *r, int64_t m, const char *layout) {
  const double *row = j->x + m * j->R;
  if (j->integer) {
    uint64_t want = j->op == CNN_RED_PROD ? 1 : 0;
    for (int64_t i = 0; i < j->R; i++)
      want = j->op == CNN_RED_PROD ? want * j->ix[m * j->R + i] : want + j->ix[m * j->R + i];
    if (r->iacc == want) return 0;
    fprintf(stderr, "%s op %d row %lld: integer %llu, want %llu\n", layout, j->op, (long long)m,
            (unsigned long long)r->iacc, (unsigned long long)want);
    return 1;
  }
  int64_t idx = -1;
  double want = naive(j->op, row, j->R, j->p, &idx);
  if (gpu_red_is_ext(j->op)) {
    if (r->ei == idx) return 0;
    fprintf(stderr, "%s op %d row %lld: index %lld, want %lld\n", layout, j->op, (long long)m,
            (long long)r->ei, (long long)idx);
    return 1;
  }
  double got = gpu_red_final(r, j->op, j->R, j->p);
  if ((isnan(got) && isnan(want)) || got == want || fabs(got - want) <= 1e-10 * fabs(want) + 1e-12)
    return 0;
  fprintf(stderr, "%s op %d p %g row %lld: %.17g, want %.17g\n", layout, j->op, j->p, (long long)m,
          got, want);
  return 1;
}

/* ---- data ---------------------------------------------------------------------------------- */

static double *values(int64_t n, unsigned seed, bool nans) {
  double *x = malloc((size_t)n * sizeof *x);
  srand(seed);
  for (int64_t i = 0; i < n; i++) {
    x[i] = (double)(rand() % 41 - 20) / 8.0; /* few distinct values: ties everywhere */
    if (x[i] == 0 && rand() % 2) x[i] = 0.125;
  }
  if (nans)
    for (int64_t i = n / 3; i < n; i += n / 2 + 7) x[i] = NAN; /* later NaNs must not win */
  return x;
}

typedef struct {
  int op;
  double p;
} red;

static const red REDS[] = {{CNN_RED_SUM, 0},          {CNN_RED_MEAN, 0},  {CNN_RED_VAR, 1},
                           {CNN_RED_STD, 0},          {CNN_RED_NORM, 2},  {CNN_RED_NORM, 1},
                           {CNN_RED_NORM, 0},         {CNN_RED_NORM, 3},  {CNN_RED_NORM, INFINITY},
                           {CNN_RED_NORM, -INFINITY}, {CNN_RED_MAX, 0},   {CNN_RED_MIN, 0},
                           {CNN_RED_ARGMAX, 0},       {CNN_RED_ARGMIN, 0}};
#define NREDS (int)(sizeof REDS / sizeof *REDS)

static void warp_layout(int64_t M, int64_t R, unsigned grid, bool nans) {
  double *x = values(M * R, (unsigned)(M * 31 + R), nans);
  gpu_red_part *parts = calloc((size_t)M, sizeof *parts);
  int *visits = calloc((size_t)M, sizeof *visits);
  int bad = 0;
  for (int k = 0; k < NREDS; k++) {
    job j = {REDS[k].op, false, REDS[k].p, x, NULL, M, R};
    memset(visits, 0, (size_t)M * sizeof *visits);
    replay_warp(&j, grid, parts, visits);
    for (int64_t m = 0; m < M; m++) bad += visits[m] != 1 || compare(&j, &parts[m], m, "warp");
  }
  CHECK(bad == 0);
  free(x), free(parts), free(visits);
}

static void split_layout(int64_t M, int64_t R, int sms, bool nans) {
  gpu_red_plan pl = gpu_reduce_plan(M, R, sms);
  CHECK(pl.mode == GPU_RED_SPLIT && pl.chunks >= 2);
  if (pl.mode != GPU_RED_SPLIT) return;
  int64_t lo, hi, covered = 0; /* chunks tile [0, R): none empty, none overlapping */
  for (int64_t c = 0; c < pl.chunks; c++) {
    gpu_red_chunk(&pl, R, c, &lo, &hi);
    CHECK(lo == covered && hi > lo);
    covered = hi;
  }
  CHECK(covered == R && pl.blocks == (unsigned)(M * pl.chunks));
  double *x = values(M * R, (unsigned)(M * 7 + R), nans);
  gpu_red_part *rows = calloc((size_t)M, sizeof *rows);
  int *visits = calloc((size_t)(M * R), sizeof *visits);
  int bad = 0;
  for (int k = 0; k < NREDS; k++) {
    job j = {REDS[k].op, false, REDS[k].p, x, NULL, M, R};
    memset(visits, 0, (size_t)(M * R) * sizeof *visits);
    replay_split(&j, &pl, pl.blocks > 3 ? pl.blocks - 3 : 1, rows,
                 visits); /* a smaller grid: stride */
    for (int64_t i = 0; i < M * R; i++) bad += visits[i] != 1;
    for (int64_t m = 0; m < M; m++) bad += compare(&j, &rows[m], m, "split");
  }
  CHECK(bad == 0);
  free(x), free(rows), free(visits);
}

/* int64 sum and product wrap modulo 2^64 in any merge order */
static void integer_rows(void) {
  int64_t M = 3, R = 20000;
  uint64_t *ix = malloc((size_t)(M * R) * sizeof *ix);
  double *x = calloc((size_t)(M * R), sizeof *x);
  for (int64_t i = 0; i < M * R; i++) ix[i] = (uint64_t)(i * 2654435761u) | 1u;
  gpu_red_plan pl = gpu_reduce_plan(M, R, 4);
  gpu_red_part *rows = calloc((size_t)M, sizeof *rows);
  int *visits = calloc((size_t)(M * R), sizeof *visits);
  int bad = 0;
  for (int op = CNN_RED_SUM; op <= CNN_RED_PROD; op += CNN_RED_PROD - CNN_RED_SUM) {
    job j = {op, true, 0, x, ix, M, R};
    replay_split(&j, &pl, pl.blocks, rows, visits);
    for (int64_t m = 0; m < M; m++) bad += compare(&j, &rows[m], m, "split int");
    job w = {op, true, 0, x, ix, M, 200};
    gpu_red_part parts[3];
    int v[3] = {0};
    replay_warp(&w, 1, parts, v);
    for (int64_t m = 0; m < M; m++) bad += compare(&w, &parts[m], m, "warp int");
  }
  CHECK(bad == 0);
  free(ix), free(x), free(rows), free(visits);
}

static void plans(void) {
  gpu_red_plan p = gpu_reduce_plan(10000, 50, 132); /* short rows: warps */
  CHECK(p.mode == GPU_RED_WARP_ROWS && p.blocks == 1250);
  p = gpu_reduce_plan(1000, 1000, 132); /* rows enough: a block each */
  CHECK(p.mode == GPU_RED_BLOCK && p.blocks == 1000);
  p = gpu_reduce_plan(1, 1 << 24, 132); /* a whole-tensor sum: every SM */
  CHECK(p.mode == GPU_RED_SPLIT && p.chunks >= 132 && p.chunk_len >= GPU_RED_CHUNK_MIN);
  p = gpu_reduce_plan(1, 5000, 132); /* too short to be worth two passes */
  CHECK(p.mode == GPU_RED_BLOCK && p.blocks == 1);
  p = gpu_reduce_plan(1000, 1 << 20, 132); /* many long rows: a block each */
  CHECK(p.mode == GPU_RED_BLOCK);
  p = gpu_reduce_plan((int64_t)1 << 40, 4, 132); /* the grid is capped; rows stride */
  CHECK(p.mode == GPU_RED_WARP_ROWS && p.blocks == GPU_RED_MAX_BLOCKS);
}

int main(void) {
  plans();
  warp_layout(37, 45, 2, true);  /* 2 blocks for 5 row groups: grid-stride passes */
  warp_layout(9, 256, 3, false); /* the longest warp row */
  warp_layout(5, 1, 1, true);    /* one element per row */
  split_layout(1, 50000, 8, true);
  split_layout(3, 20001, 4, false);
  integer_rows();
  return check_report("gpu_reduce_plan");
}
