/*
 * strided.h -- the strided iteration space, shared by the CPU loops
 * (core/cpu/elementwise.c), the CUDA launchers (gpu/elementwise.cu) and
 * core's copies and backend arguments (copy.c, backend.c): broadcast
 * strides and coalescing, once.  Like elementwise_math.h, every function is
 * `static inline` and CNN_HD (host-and-device under nvcc), over plain
 * arrays; the unit of a stride (bytes or elements) is the caller's.
 *
 * Invariant of a coalesced space: nd >= 1, no dimension of size 1 unless
 * the space is a single element (nd = 1, shape[0] = 1, strides 0), and no
 * two adjacent dimensions contiguous for every operand.
 */
#ifndef CNN_STRIDED_H
#define CNN_STRIDED_H

#include <stdbool.h>
#include <stdint.h>

#include "elementwise_math.h" /* CNN_HD */

#define CNN_STRIDED_MAX_OPS  4 /* operands of one iteration (output first) */
#define CNN_STRIDED_MAX_DIMS 8 /* = CNN_MAX_DIMS */

/* Strides of an operand (tnd dims: tshape, tstride) broadcast to a shape of
 * nd dims (aligned at the right): 0 along dims the operand lacks or has of
 * size 1, its own stride elsewhere. */
CNN_HD static inline void cnn_strided_broadcast(int nd, int tnd, const int64_t *tshape,
                                                const int64_t *tstride, int64_t *out) {
  int lead = nd - tnd; /* dims the operand lacks */
  for (int d = 0; d < lead; d++) out[d] = 0;
  for (int td = 0; td < tnd; td++) out[lead + td] = tshape[td] == 1 ? 0 : tstride[td];
}

/* Drops size-1 dims and merges adjacent dims that are contiguous for every
 * one of the nops operands, in place over shape[nd] and st[k][nd]; returns
 * the new number of dims (>= 1). */
CNN_HD static inline int cnn_strided_coalesce(int nd, int64_t *shape, int nops,
                                              int64_t (*st)[CNN_STRIDED_MAX_DIMS]) {
  int kept = 0;
  for (int d = 0; d < nd; d++) { /* drop size-1 dims */
    if (shape[d] == 1) continue;
    shape[kept] = shape[d];
    for (int k = 0; k < nops; k++) st[k][kept] = st[k][d];
    kept++;
  }
  if (!kept) {
    shape[0] = 1;
    for (int k = 0; k < nops; k++) st[k][0] = 0;
    return 1;
  }
  int out = 0;
  for (int d = 1; d < kept; d++) { /* merge d into `out` when contiguous for all */
    bool merge = true;
    for (int k = 0; k < nops; k++)
      if (st[k][out] != st[k][d] * shape[d]) merge = false;
    if (merge) {
      shape[out] *= shape[d];
    } else {
      out++;
      shape[out] = shape[d];
    }
    for (int k = 0; k < nops; k++) st[k][out] = st[k][d];
  }
  return out + 1;
}

#endif /* CNN_STRIDED_H */
