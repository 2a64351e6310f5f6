/*
 * sort_plan.h -- how gpu/sort.cu sorts the rows of sort and topk, as
 * plain C with CNN_HD functions (host and device), so
 * tests/gpu/test_gpu_sort_plan.c replays the kernels' work on the host,
 * with the same index arithmetic, against a naive stable sort.
 *
 * Every element of a row becomes an entry (key, position): the key is
 * sort_order.h's (NaN largest, -0 == +0, complemented for descending) and
 * (key, position) is a total order with no two entries equal.  So any
 * correct sorting network or merge gives THE stable permutation -- the
 * CPU's (qsort over the same pairs) -- even though neither bitonic sort
 * nor our merge is stable by itself.
 *
 * Two layouts:
 *  - TILE: rows of D <= GPU_SORT_TILE entries.  A row is padded to P, the
 *    power of two >= D, with pad entries (after every real one; equal to
 *    each other, which a sorting network allows); a block holds
 *    GPU_SORT_TILE / P rows in shared memory and runs the bitonic network
 *    on each: log2(P) (log2(P) + 1) / 2 steps of P/2 independent
 *    compare-exchanges (gpu_bitonic_step), a barrier between steps.
 *  - RUNS + MERGE: longer rows.  Each tile of GPU_SORT_TILE positions is
 *    sorted as above and its real entries written to a scratch row; then
 *    passes merge adjacent sorted runs of width w = TILE, 2 TILE, ... into
 *    a second scratch row until one run covers the row.  In a pass, each
 *    thread writes GPU_SORT_ITEMS consecutive outputs: it finds where its
 *    first output's predecessors split between the two runs by a binary
 *    search (gpu_merge_corank, "merge path"), then merges sequentially.
 *    Work: O(D log D) per row for the merge passes (O(D) each, plus a
 *    search of O(log D) per GPU_SORT_ITEMS outputs), O(D log^2 TILE) for
 *    the tiles -- where the kernel it replaces compared every pair (D^2).
 */
#ifndef CNN_GPU_SORT_PLAN_H
#define CNN_GPU_SORT_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "sort_order.h" /* cnn_sort_before, CNN_HD */

#define GPU_SORT_TILE    2048 /* entries per block in shared memory (32 KiB) */
#define GPU_SORT_THREADS 256
#define GPU_SORT_ITEMS   8 /* merge outputs per thread */

typedef struct {
  uint64_t key; /* sort_order.h's key in the requested direction */
  int64_t pos;  /* 0-based position along the sorted dimension */
} gpu_sort_entry;

CNN_HD static inline bool gpu_sort_entry_before(gpu_sort_entry a, gpu_sort_entry b) {
  return cnn_sort_before(a.key, a.pos, b.key, b.pos);
}

/* the pad of a tile: after every real entry (positions < D < INT64_MAX) */
CNN_HD static inline gpu_sort_entry gpu_sort_pad(void) {
  gpu_sort_entry e = {UINT64_MAX, INT64_MAX};
  return e;
}

/* P: the power of two >= D (1 for D <= 1) */
CNN_HD static inline int64_t gpu_sort_pow2(int64_t D) {
  int64_t p = 1;
  while (p < D) p <<= 1;
  return p;
}

/* One compare-exchange of the bitonic network over a tile of rows of P
 * entries each (P a power of two dividing GPU_SORT_TILE): step (s, j) --
 * s = 2, 4, .., P the size of the bitonic sequences being merged, j = s/2,
 * .., 1 the distance compared -- pair q of the tile (0 <= q <
 * GPU_SORT_TILE / 2).  Pair q belongs to row q / (P/2); its local pair
 * p = q % (P/2) compares local entries i = 2j (p / j) + p % j and i + j,
 * ascending where (i & s) == 0.  The pairs of a step are disjoint. */
CNN_HD static inline void gpu_bitonic_step(gpu_sort_entry *tile, int64_t P, int64_t s, int64_t j,
                                           int64_t q) {
  int64_t half = P / 2, row = q / half, p = q % half;
  int64_t i = 2 * j * (p / j) + p % j, l = i + j;
  bool ascending = (i & s) == 0;
  gpu_sort_entry *a = tile + row * P + i, *b = tile + row * P + l;
  if (gpu_sort_entry_before(*b, *a) == ascending) {
    gpu_sort_entry t = *a;
    *a = *b;
    *b = t;
  }
}

/* How many of the first k outputs of merging sorted runs A (m entries) and
 * B (n entries) come from A (0 <= k <= m + n).  A[mid] is among the first
 * k exactly when it comes before B[k - mid - 1]: the predicate is
 * monotone in mid, so a binary search finds the count. */
CNN_HD static inline int64_t gpu_merge_corank(int64_t k, const gpu_sort_entry *A, int64_t m,
                                              const gpu_sort_entry *B, int64_t n) {
  int64_t lo = k > n ? k - n : 0, hi = k < m ? k : m;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2; /* lo <= mid < hi: A[mid] and B[k - mid - 1] exist */
    if (gpu_sort_entry_before(A[mid], B[k - mid - 1]))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* One thread of a merge pass over one row of D entries: src holds sorted
 * runs of width w (the last may be shorter), dst receives runs of 2w.
 * Outputs o .. o + GPU_SORT_ITEMS - 1 (o a multiple of GPU_SORT_ITEMS,
 * which divides 2w, so they lie in one pair of runs), clipped at D. */
CNN_HD static inline void gpu_merge_items(const gpu_sort_entry *src, gpu_sort_entry *dst, int64_t D,
                                          int64_t w, int64_t o) {
  int64_t base = o / (2 * w) * (2 * w), rest = D - base;
  int64_t m = rest < w ? rest : w, n = rest - m < w ? rest - m : w;
  const gpu_sort_entry *A = src + base, *B = A + m;
  int64_t k = o - base, i = gpu_merge_corank(k, A, m, B, n), j = k - i;
  for (int64_t t = 0; t < GPU_SORT_ITEMS && k + t < m + n; t++) {
    bool from_a = j >= n || (i < m && gpu_sort_entry_before(A[i], B[j]));
    dst[base + k + t] = from_a ? A[i++] : B[j++];
  }
}

#endif
