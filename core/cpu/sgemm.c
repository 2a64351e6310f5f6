/*
 * sgemm.c -- the CPU's float32 matrix product: oneDNN's SGEMM (dnnl_sgemm)
 * for medium products, OpenBLAS (core/blas.c) for the rest.
 *
 * Why: on an AVX-512 Xeon (2 threads) oneDNN 2.6's jit SGEMM ran the
 * example network's linear layer 3136 -> 128 at batch 64 1.3x faster than
 * OpenBLAS 0.3.21's SkylakeX kernels in all three of its products
 * (x w^T, g w, g^T x), and products of 256^3, 512x64x576 and 196x64x576
 * 1.3-1.7x; OpenBLAS won below ~1 MFLOP (oneDNN's call costs ~0.3 us more:
 * 2x3x4 took 0.5 us against 0.1), at 16x1000x512 (0.94x) and at 1024^3
 * (0.93x).  So oneDNN takes products of 10 MFLOP to 1 GFLOP with M and N
 * at least 32 (bench by hand: README, Performance); a oneDNN failure falls
 * back to OpenBLAS.  Both are row-major here and thread with OpenMP.
 */
#include <dnnl.h>

#include "blas.h"
#include "cpu/kernels.h"

#define ONEDNN_MIN_FLOP 1e7
#define ONEDNN_MAX_FLOP 1e9
#define ONEDNN_MIN_SIDE 32

static int onednn_takes(int64_t M, int64_t N, int64_t K) {
  double flop = 2.0 * (double)M * (double)N * (double)K;
  return flop >= ONEDNN_MIN_FLOP && flop <= ONEDNN_MAX_FLOP && M >= ONEDNN_MIN_SIDE &&
         N >= ONEDNN_MIN_SIDE;
}

void cnn_cpu_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                   const float *B, int64_t ldb, float *C, int64_t ldc) {
  if (onednn_takes(M, N, K) && dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, A, lda, B,
                                          ldb, 0.0f, C, ldc) == dnnl_success)
    return;
  cnn_blas_sgemm(ta, tb, (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb, 0.0f, C, (int)ldc);
}
