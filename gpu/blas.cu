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
 *
 * gemm_batched is the same product `batch` times in one call:
 * cublas{S,D}gemmStridedBatched and cublasGemmStridedBatchedEx (half, with
 * CUBLAS_COMPUTE_32F).  The swap carries the batch strides along: B's
 * stride goes with B into cuBLAS's A slot.  cuBLAS takes the strides as
 * signed long long ("purposely signed", cublas_api.h) and a stride of 0 for
 * an input reuses one matrix for every product (NVIDIA's strided-batched
 * blog: "if a matrix stride is zero, then the batched GEMM is multiplying
 * many matrices by a single matrix"); the output's products must not
 * overlap, which core guarantees (contiguous output, stride M*N).
 * m, n, k, the lds and batchCount are int in this API: larger values are
 * refused with a message, never truncated.
 *
 * Memory: each handle's workspace comes from our caching allocator
 * (cublasSetWorkspace, backend.cu), and a product that still reports
 * CUBLAS_STATUS_ALLOC_FAILED runs once more after our cache is released
 * (CUBLAS_CHECK_RETRY, recover.h).
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

static int gemm_half(int dev, cublasHandle_t h, cnn_dtype dt, cublasOperation_t ob,
                     cublasOperation_t oa, int m, int n, int k, const void *B, int ldb,
                     const void *A, int lda, void *C, int ldc) {
  float one = 1.0f, zero = 0.0f;
  cudaDataType_t t = dt == CNN_FLOAT16 ? CUDA_R_16F : CUDA_R_16BF;
  CUBLAS_CHECK_RETRY("matmul", dev,
                     cublasGemmEx(h, ob, oa, m, n, k, &one, B, t, ldb, A, t, lda, &zero, C, t, ldc,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
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
    CUBLAS_CHECK_RETRY("matmul", dev,
                       cublasSgemm(h, ob, oa, m, n, k, &one, (const float *)B, (int)ldb,
                                   (const float *)A, (int)lda, &zero, (float *)C, (int)ldc));
  } else if (dt == CNN_FLOAT64) {
    double one = 1.0, zero = 0.0;
    CUBLAS_CHECK_RETRY("matmul", dev,
                       cublasDgemm(h, ob, oa, m, n, k, &one, (const double *)B, (int)ldb,
                                   (const double *)A, (int)lda, &zero, (double *)C, (int)ldc));
  } else if (dt == CNN_FLOAT16 || dt == CNN_BFLOAT16) {
    return gemm_half(dev, h, dt, ob, oa, m, n, k, B, (int)ldb, A, (int)lda, C, (int)ldc);
  } else {
    gpu_core.set_error("matmul: dtype %s is not supported on cuda", gpu_core.dtype_name(dt));
    return -1;
  }
  return 0;
}

/* ---- strided batched ------------------------------------------------------------- */

typedef struct {
  cublasOperation_t ob, oa;
  int dev, m, n, k, ldb, lda, ldc, batch;
  long long sb, sa, sc;
} batched_args;

static int batched_half(cublasHandle_t h, cnn_dtype dt, const batched_args *g, const void *B,
                        const void *A, void *C) {
  float one = 1.0f, zero = 0.0f;
  cudaDataType_t t = dt == CNN_FLOAT16 ? CUDA_R_16F : CUDA_R_16BF;
  CUBLAS_CHECK_RETRY("matmul", g->dev,
                     cublasGemmStridedBatchedEx(h, g->ob, g->oa, g->m, g->n, g->k, &one, B, t,
                                                g->ldb, g->sb, A, t, g->lda, g->sa, &zero, C, t,
                                                g->ldc, g->sc, g->batch, CUBLAS_COMPUTE_32F,
                                                CUBLAS_GEMM_DEFAULT));
  return 0;
}

/* the column-major call: C^T[b] = op(B[b])^T op(A[b])^T */
static int batched_call(cublasHandle_t h, cnn_dtype dt, const batched_args *g, const void *B,
                        const void *A, void *C) {
  if (dt == CNN_FLOAT32) {
    float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK_RETRY("matmul", g->dev,
                       cublasSgemmStridedBatched(h, g->ob, g->oa, g->m, g->n, g->k, &one,
                                                 (const float *)B, g->ldb, g->sb, (const float *)A,
                                                 g->lda, g->sa, &zero, (float *)C, g->ldc, g->sc,
                                                 g->batch));
    return 0;
  }
  if (dt == CNN_FLOAT64) {
    double one = 1.0, zero = 0.0;
    CUBLAS_CHECK_RETRY("matmul", g->dev,
                       cublasDgemmStridedBatched(h, g->ob, g->oa, g->m, g->n, g->k, &one,
                                                 (const double *)B, g->ldb, g->sb,
                                                 (const double *)A, g->lda, g->sa, &zero,
                                                 (double *)C, g->ldc, g->sc, g->batch));
    return 0;
  }
  if (dt == CNN_FLOAT16 || dt == CNN_BFLOAT16) return batched_half(h, dt, g, B, A, C);
  gpu_core.set_error("matmul: dtype %s is not supported on cuda", gpu_core.dtype_name(dt));
  return -1;
}

/* K == 0: every product is zeros */
static int batched_zeros(cnn_dtype dt, int64_t M, int64_t N, void *C, int64_t ldc, int64_t stride_c,
                         int64_t batch) {
  size_t es = gpu_dtype_size(dt);
  for (int64_t b = 0; b < batch; b++)
    CUDA_CHECK("matmul", cudaMemset2DAsync((char *)C + (size_t)(b * stride_c) * es,
                                           (size_t)ldc * es, 0, (size_t)N * es, (size_t)M, 0));
  return 0;
}

static int gemm_batched(int dev, cnn_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                        const void *A, int64_t lda, int64_t stride_a, const void *B, int64_t ldb,
                        int64_t stride_b, void *C, int64_t ldc, int64_t stride_c, int64_t batch) {
  if (check_dims(M, N, K, lda, ldb, ldc) || check_dims(batch, 0, 0, 0, 0, 0)) return -1;
  if (stride_a < 0 || stride_b < 0 || stride_c < M * ldc) {
    gpu_core.set_error("matmul: bad batch strides %lld, %lld, %lld for %lldx%lld products",
                       (long long)stride_a, (long long)stride_b, (long long)stride_c, (long long)M,
                       (long long)N);
    return -1;
  }
  if (M == 0 || N == 0 || batch == 0) return 0;
  if (gpu_device("matmul", dev)) return -1;
  if (K == 0) return batched_zeros(dt, M, N, C, ldc, stride_c, batch);
  cublasHandle_t h = gpu_cublas("matmul", dev);
  if (!h) return -1;
  batched_args g;
  g.dev = dev;
  g.ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N, g.oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  g.m = (int)N, g.n = (int)M, g.k = (int)K; /* column-major problem, as gemm */
  g.ldb = (int)ldb, g.lda = (int)lda, g.ldc = (int)ldc, g.batch = (int)batch;
  g.sb = stride_b, g.sa = stride_a, g.sc = stride_c;
  return batched_call(h, dt, &g, B, A, C);
}

void gpu_blas_register(cnn_backend *be) {
  be->gemm = gemm;
  be->gemm_batched = gemm_batched;
}
