/*
 * sort.c -- the CPU backend's sort entry (sort and topk): each row of D
 * elements (x seen as outer x D x inner) is turned into (key, position)
 * pairs by sort_order.h, sorted with qsort -- (key, position) is a total
 * order, so the unstable qsort gives the stable permutation -- and its
 * first k entries are written out.  Rows are independent: OpenMP over
 * rows, one scratch array per thread.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu/backend_cpu.h"
#include "sort_order.h"

typedef struct {
  uint64_t key;
  int64_t pos;
} sort_pair;

static int compare_pairs(const void *pa, const void *pb) {
  const sort_pair *a = pa, *b = pb;
  if (cnn_sort_before(a->key, a->pos, b->key, b->pos)) return -1;
  return cnn_sort_before(b->key, b->pos, a->key, a->pos) ? 1 : 0;
}

/* the order key of element i of x (dt) */
static uint64_t key_of(cnn_dtype dt, const void *x, int64_t i) {
  switch (dt) {
  case CNN_FLOAT32: return cnn_sort_key_f64(((const float *)x)[i]);
  case CNN_FLOAT64: return cnn_sort_key_f64(((const double *)x)[i]);
  case CNN_INT64: return cnn_sort_key_i64(((const int64_t *)x)[i]);
  default: return ((const uint8_t *)x)[i];
  }
}

/* sort row `r` (o = r / inner, i = r % inner) into its first k outputs */
static void sort_row(cnn_dtype dt, int64_t r, int64_t D, int64_t inner, int64_t k, bool desc,
                     const void *x, void *values, int64_t *indices, sort_pair *p) {
  int64_t o = r / inner, in = r % inner;
  size_t es = cnn_dtype_size(dt);
  for (int64_t d = 0; d < D; d++)
    p[d] = (sort_pair){cnn_sort_directed(key_of(dt, x, (o * D + d) * inner + in), desc), d};
  qsort(p, (size_t)D, sizeof *p, compare_pairs);
  for (int64_t j = 0; j < k; j++) {
    int64_t dst = (o * k + j) * inner + in;
    memcpy((char *)values + dst * (int64_t)es,
           (const char *)x + ((o * D + p[j].pos) * inner + in) * (int64_t)es, es);
    indices[dst] = p[j].pos;
  }
}

int cnn_cpu_sort(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int64_t k,
                 bool descending, const void *x, void *values, int64_t *indices) {
  (void)dev;
  if (dt != CNN_FLOAT32 && dt != CNN_FLOAT64 && dt != CNN_INT64 && dt != CNN_UINT8)
    return cnn_set_error("sort: dtype %s is not supported", cnn_dtype_name(dt)), -1;
  int64_t rows = outer * inner;
  if (rows == 0 || D == 0) return 0;
  int failed = 0;
#pragma omp parallel
  {
    sort_pair *p = malloc((size_t)D * sizeof *p);
    if (!p) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; r++)
      if (p) sort_row(dt, r, D, inner, k, descending, x, values, indices, p);
    free(p);
  }
  if (failed)
    return cnn_set_error("sort: out of memory for a row of %lld elements", (long long)D), -1;
  return 0;
}
