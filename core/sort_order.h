/*
 * sort_order.h -- the order of sort and topk, written once for the CPU
 * loops (core/cpu/sort.c) and the CUDA kernels (gpu/sort.cu).
 *
 * Every element becomes an unsigned 64-bit key whose unsigned order is
 * PyTorch's order of the values:
 *  - floats (float32 widened to double, exactly): the IEEE bits with the
 *    sign bit flipped for positives and every bit flipped for negatives,
 *    so -inf < ... < -0 = +0 < ... < +inf; -0 and +0 get the same key
 *    (they compare equal, so a stable sort keeps their order); every NaN
 *    gets the largest key (NaN sorts after +inf, as in PyTorch);
 *  - int64: the two's complement bits with the sign bit flipped;
 *  - uint8: the value.
 * Descending order sorts the complemented key ascending, so NaN comes
 * first and equal values keep their positions (stable), as PyTorch's
 * sort(descending = true, stable = true).
 * Ties between equal keys are broken by position: (key, position) is a
 * total order, so every backend gives the same permutation.
 *
 * Only CNN_HD static inline functions: no globals, no libc beyond memcpy.
 */
#ifndef CNN_SORT_ORDER_H
#define CNN_SORT_ORDER_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "elementwise_math.h" /* CNN_HD */

#define CNN_SORT_SIGN_BIT ((uint64_t)1 << 63)

CNN_HD static inline uint64_t cnn_sort_key_f64(double v) {
  if (v != v) return UINT64_MAX; /* NaN: after everything */
  if (v == 0) v = 0;             /* -0 == +0 */
  uint64_t b;
  memcpy(&b, &v, sizeof b);
  return b & CNN_SORT_SIGN_BIT ? ~b : b | CNN_SORT_SIGN_BIT;
}

CNN_HD static inline uint64_t cnn_sort_key_i64(int64_t v) {
  return (uint64_t)v ^ CNN_SORT_SIGN_BIT;
}

/* the key in the requested direction */
CNN_HD static inline uint64_t cnn_sort_directed(uint64_t key, bool descending) {
  return descending ? ~key : key;
}

/* element (key a, position i) comes before (key b, position j) */
CNN_HD static inline bool cnn_sort_before(uint64_t a, int64_t i, uint64_t b, int64_t j) {
  return a < b || (a == b && i < j);
}

#endif
