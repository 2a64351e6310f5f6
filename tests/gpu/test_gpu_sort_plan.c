/*
 * test_gpu_sort_plan.c -- gpu/sort.cu's sort replayed on the host (label
 * unit, every configuration: gpu/sort_plan.h is plain C).
 *
 * The kernels cannot run here, so this test runs their work: for the TILE
 * layout every block's tile (rows of P entries, pads after D), every step
 * (s, j) of the network with every pair q of the tile through
 * gpu_bitonic_step -- the pairs of a step are disjoint, so running them
 * one after another is what the threads do between two barriers -- and
 * the first k entries out; for long rows the sorted tiles, every merge
 * pass with every thread's chunk through gpu_merge_items, and the first k
 * out.  The result (values and positions of x: outer x D x inner) is
 * compared with a naive stable insertion sort written here that compares
 * the VALUES (NaN above every number and equal to NaN, -0 == +0), not
 * sort_order.h's keys, over rows with many ties, NaNs, signed zeros and
 * infinities, int64 extremes, ascending and descending, k < D (topk),
 * D from 1 to past four tiles, and inner > 1 (a strided row).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sort_plan.h"

/* ---- the naive reference ------------------------------------------------------------------ */

/* a > b in sort order for doubles: NaN above every number, equal to NaN */
static bool greater_f(double a, double b) {
  if (isnan(a)) return !isnan(b);
  return !isnan(b) && a > b;
}

/* stable insertion sort of positions 0..D-1 of row (o, in): an entry moves
 * only past strictly greater (descending: strictly smaller) ones */
static void naive_row(const double *xf, const int64_t *xi, int64_t base, int64_t D, int64_t inner,
                      bool desc, int64_t *p) {
  for (int64_t d = 0; d < D; d++) {
    int64_t j = d;
    for (; j > 0; j--) {
      int64_t a = base + p[j - 1] * inner, b = base + d * inner;
      bool gt = xi ? (desc ? xi[b] > xi[a] : xi[a] > xi[b])
                   : (desc ? greater_f(xf[b], xf[a]) : greater_f(xf[a], xf[b]));
      if (!gt) break;
      p[j] = p[j - 1];
    }
    p[j] = d;
  }
}

/* ---- the kernels' work, replayed ----------------------------------------------------------- */

typedef struct {
  const double *xf;  /* float rows (NULL for int64) */
  const int64_t *xi; /* int64 rows (NULL for floats) */
  int64_t outer, D, inner, k;
  bool desc;
} problem;

static int64_t row_elem(const problem *pb, int64_t r, int64_t d) {
  return (r / pb->inner * pb->D + d) * pb->inner + r % pb->inner;
}

static gpu_sort_entry entry_of(const problem *pb, int64_t r, int64_t d) {
  int64_t e = row_elem(pb, r, d);
  uint64_t key = pb->xi ? cnn_sort_key_i64(pb->xi[e]) : cnn_sort_key_f64(pb->xf[e]);
  gpu_sort_entry t = {cnn_sort_directed(key, pb->desc), d};
  return t;
}

static void bitonic_tile(gpu_sort_entry *tile, int64_t P) {
  for (int64_t s = 2; s <= P; s <<= 1)
    for (int64_t j = s >> 1; j > 0; j >>= 1)
      for (int64_t q = 0; q < GPU_SORT_TILE / 2; q++) gpu_bitonic_step(tile, P, s, j, q);
}

/* k_sort_tile: positions of the first k of each row into pos (rows x k) */
static void replay_tile(const problem *pb, int64_t *pos) {
  static gpu_sort_entry tile[GPU_SORT_TILE];
  int64_t rows = pb->outer * pb->inner, P = gpu_sort_pow2(pb->D), per = GPU_SORT_TILE / P;
  for (int64_t r0 = 0; r0 < rows; r0 += per) { /* one block per group of rows */
    for (int64_t t = 0; t < GPU_SORT_TILE; t++) {
      int64_t r = r0 + t / P, d = t % P;
      tile[t] = r < rows && d < pb->D ? entry_of(pb, r, d) : gpu_sort_pad();
    }
    bitonic_tile(tile, P);
    for (int64_t t = 0; t < GPU_SORT_TILE; t++) {
      int64_t r = r0 + t / P, d = t % P;
      if (r < rows && d < pb->k) pos[r * pb->k + d] = tile[t].pos;
    }
  }
}

/* k_sort_runs, the k_merge_pass passes, k_sort_write */
static void replay_long(const problem *pb, int64_t *pos) {
  static gpu_sort_entry tile[GPU_SORT_TILE];
  int64_t rows = pb->outer * pb->inner, D = pb->D, tiles = (D + GPU_SORT_TILE - 1) / GPU_SORT_TILE;
  gpu_sort_entry *a = malloc(sizeof *a * (size_t)(rows * D)),
                 *b = malloc(sizeof *b * (size_t)(rows * D));
  for (int64_t blk = 0; blk < rows * tiles; blk++) {
    int64_t r = blk / tiles, first = blk % tiles * GPU_SORT_TILE;
    int64_t len = D - first < GPU_SORT_TILE ? D - first : GPU_SORT_TILE;
    for (int64_t t = 0; t < GPU_SORT_TILE; t++)
      tile[t] = t < len ? entry_of(pb, r, first + t) : gpu_sort_pad();
    bitonic_tile(tile, GPU_SORT_TILE);
    for (int64_t t = 0; t < len; t++) a[r * D + first + t] = tile[t];
  }
  for (int64_t w = GPU_SORT_TILE; w < D; w *= 2) {
    memset(b, 0xee, sizeof *b * (size_t)(rows * D)); /* a missed output shows */
    int64_t per_row = (D + GPU_SORT_ITEMS - 1) / GPU_SORT_ITEMS;
    for (int64_t c = 0; c < rows * per_row; c++)
      gpu_merge_items(a + c / per_row * D, b + c / per_row * D, D, w, c % per_row * GPU_SORT_ITEMS);
    gpu_sort_entry *t = a;
    a = b, b = t;
  }
  for (int64_t e = 0; e < rows * pb->k; e++) pos[e] = a[e / pb->k * D + e % pb->k].pos;
  free(a), free(b);
}

/* ---- cases ------------------------------------------------------------------------------------ */

static void check_problem(const problem *pb, const char *what) {
  int64_t rows = pb->outer * pb->inner, *got = malloc(sizeof *got * (size_t)(rows * pb->k + 1));
  int64_t *ref = malloc(sizeof *ref * (size_t)(pb->D + 1));
  if (pb->D > GPU_SORT_TILE)
    replay_long(pb, got);
  else
    replay_tile(pb, got);
  int64_t bad = 0, first = -1;
  for (int64_t r = 0; r < rows; r++) {
    naive_row(pb->xf, pb->xi, row_elem(pb, r, 0), pb->D, pb->inner, pb->desc, ref);
    for (int64_t d = 0; d < pb->k; d++)
      if (got[r * pb->k + d] != ref[d] && bad++ == 0) first = r * pb->k + d;
  }
  if (bad)
    fprintf(stderr,
            "%s: D %lld k %lld outer %lld inner %lld %s: %lld wrong positions, first at "
            "output %lld\n",
            what, (long long)pb->D, (long long)pb->k, (long long)pb->outer, (long long)pb->inner,
            pb->desc ? "descending" : "ascending", (long long)bad, (long long)first);
  CHECK(bad == 0);
  free(got), free(ref);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_u64(void) { /* xorshift64 */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

/* values with ties (-3..3), NaNs, signed zeros and infinities */
static double special_value(void) {
  switch (next_u64() % 16) {
  case 0: return NAN;
  case 1: return -0.0;
  case 2: return 0.0;
  case 3: return INFINITY;
  case 4: return -INFINITY;
  default: return (double)((int64_t)(next_u64() % 7) - 3);
  }
}

static void float_cases(int64_t outer, int64_t D, int64_t inner) {
  int64_t n = outer * D * inner;
  double *x = malloc(sizeof *x * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) x[i] = special_value();
  int64_t ks[3] = {D, D > 3 ? 3 : D, D > 1 ? D - 1 : D};
  for (int desc = 0; desc < 2; desc++)
    for (int c = 0; c < 3; c++) {
      problem pb = {x, NULL, outer, D, inner, ks[c], desc};
      check_problem(&pb, "float");
    }
  free(x);
}

static void int_cases(int64_t outer, int64_t D, int64_t inner) {
  int64_t n = outer * D * inner;
  int64_t *x = malloc(sizeof *x * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) {
    uint64_t u = next_u64();
    x[i] = u % 5 == 0 ? INT64_MIN : u % 5 == 1 ? INT64_MAX : (int64_t)(u % 9) - 4;
  }
  for (int desc = 0; desc < 2; desc++) {
    problem pb = {NULL, x, outer, D, inner, D, desc};
    check_problem(&pb, "int64");
  }
  free(x);
}

/* the merge's co-rank against counting, for every k of two short runs */
static void corank_cases(void) {
  gpu_sort_entry A[6], B[5];
  for (int i = 0; i < 6; i++) A[i] = (gpu_sort_entry){(uint64_t)(2 * i), i};
  for (int i = 0; i < 5; i++) B[i] = (gpu_sort_entry){(uint64_t)(2 * i + (i % 2)), 10 + i};
  for (int64_t k = 0; k <= 11; k++) {
    int64_t from_a = 0, i = 0, j = 0; /* merge k entries by hand */
    for (int64_t t = 0; t < k; t++) {
      if (j >= 5 || (i < 6 && gpu_sort_entry_before(A[i], B[j])))
        i++, from_a++;
      else
        j++;
    }
    CHECK(gpu_merge_corank(k, A, 6, B, 5) == from_a);
  }
}

int main(void) {
  corank_cases();
  static const int64_t tile_D[] = {1, 2, 3, 5, 7, 16, 31, 100, 257, 1000, 2047, 2048};
  for (size_t i = 0; i < sizeof tile_D / sizeof tile_D[0]; i++) {
    float_cases(3, tile_D[i], 1);
    float_cases(2, tile_D[i], 3); /* strided rows, several rows per block */
    int_cases(2, tile_D[i], 2);
  }
  float_cases(1, 1, 5000); /* many rows of one entry */
  static const int64_t long_D[] = {2049, 4096, 5000, 9000};
  for (size_t i = 0; i < sizeof long_D / sizeof long_D[0]; i++) {
    float_cases(2, long_D[i], 1);
    int_cases(1, long_D[i], 2);
  }
  float_cases(1, 3 * GPU_SORT_TILE + 17, 2); /* a short last tile and run, strided */
  return check_report("gpu_sort_plan");
}
