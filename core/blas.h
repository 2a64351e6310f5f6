/*
 * blas.h -- core-internal: the matrix products of the CPU backend
 * (OpenBLAS loaded on first use; see blas.c).  Row-major; ta/tb transpose
 * A and B.  C = alpha * op(A) * op(B) + beta * C.
 */
#ifndef CNN_BLAS_H
#define CNN_BLAS_H

#include <stdbool.h>

/* CBLAS enum values (cblas.h), so this header needs no BLAS headers. */
enum { CNN_BLAS_ROW_MAJOR = 101, CNN_BLAS_NO_TRANS = 111, CNN_BLAS_TRANS = 112 };

void cnn_blas_sgemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc);
void cnn_blas_dgemm(bool ta, bool tb, int M, int N, int K, double alpha, const double *A, int lda,
                    const double *B, int ldb, double beta, double *C, int ldc);
/* Which BLAS runs the products ("OpenBLAS (SkylakeX kernels)"). */
const char *cnn_blas_info(void);
#endif
