/*
 * blas.cu -- matrix products through cuBLAS.
 *
 * Core stores matrices row-major (core/ops/matmul.c hands each product's
 * operands with a row stride `ld` and a transpose flag, as it does to
 * OpenBLAS); cuBLAS is column-major.  A row-major M x N matrix with row
 * stride ld is, read column-major, its N x M transpose with the same ld,
 * so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: the operands
 * swap places, M and N swap, and each keeps its own transpose flag.
 *
 * float32 uses cublasSgemm, float64 cublasDgemm, and float16/bfloat16
 * (autocast) cublasGemmEx with CUBLAS_COMPUTE_32F: half inputs and output,
 * float32 accumulation.  The handle's math mode is left at its default, so
 * float32 products do not silently use TF32 (parity with the CPU).
 */
#include <limits.h>

#include "gpu.h"

static int check_dims(int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
  int64_t v[6] = {M, N, K, lda, ldb, ldc};
  for (int i = 0; i < 6; i++)
    if (v[i] < 0 || v[i] > INT_MAX) {
      gpu_core.set_error("matmul: dimension %lld too large for cuBLAS (int)", (long long)v[i]);
      return -1;
    }
  return 0;
}

static int gemm_half(cublasHandle_t h, cnn_dtype dt, cublasOperation_t ob, cublasOperation_t oa,
                     int m, int n, int k, const void *B, int ldb, const void *A, int lda, void *C,
                     int ldc) {
  float one = 1.0f, zero = 0.0f;
  cudaDataType_t t = dt == CNN_FLOAT16 ? CUDA_R_16F : CUDA_R_16BF;
  CUBLAS_CHECK("matmul", cublasGemmEx(h, ob, oa, m, n, k, &one, B, t, ldb, A, t, lda, &zero, C, t,
                                      ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return 0;
}

static int gemm(int dev, cnn_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                const void *A, int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc) {
  if (check_dims(M, N, K, lda, ldb, ldc)) return -1;
  if (M == 0 || N == 0) return 0;
  cublasHandle_t h = gpu_cublas("matmul", dev);
  if (!h) return -1;
  if (K == 0) { /* empty inner dimension: zeros */
    CUDA_CHECK("matmul", cudaMemset2DAsync(C, (size_t)ldc * gpu_dtype_size(dt), 0,
                                           (size_t)N * gpu_dtype_size(dt), (size_t)M, 0));
    return 0;
  }
  cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  int m = (int)N, n = (int)M, k = (int)K; /* column-major problem: C^T = op(B)^T op(A)^T */
  if (dt == CNN_FLOAT32) {
    float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK("matmul", cublasSgemm(h, ob, oa, m, n, k, &one, (const float *)B, (int)ldb,
                                       (const float *)A, (int)lda, &zero, (float *)C, (int)ldc));
  } else if (dt == CNN_FLOAT64) {
    double one = 1.0, zero = 0.0;
    CUBLAS_CHECK("matmul", cublasDgemm(h, ob, oa, m, n, k, &one, (const double *)B, (int)ldb,
                                       (const double *)A, (int)lda, &zero, (double *)C, (int)ldc));
  } else if (dt == CNN_FLOAT16 || dt == CNN_BFLOAT16) {
    return gemm_half(h, dt, ob, oa, m, n, k, B, (int)ldb, A, (int)lda, C, (int)ldc);
  } else {
    gpu_core.set_error("matmul: dtype %s is not supported on cuda", gpu_core.dtype_name(dt));
    return -1;
  }
  return 0;
}

void gpu_blas_register(cnn_backend *be) { be->gemm = gemm; }
