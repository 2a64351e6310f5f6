/*
 * fake_cuda_batched.c -- gemm_batched of the fake device: `batch` triple
 * loops, registered through fake_cuda.h's weak hook fake_register_batched.
 *
 * The contract is core/backend.h's, read literally (no cuBLAS operand
 * swap): for b < batch, with Ab = A + b*stride_a, Bb = B + b*stride_b and
 * Cb = C + b*stride_c (strides in elements),
 *   Cb[i*ldc + j] = sum_k opA(i, k) * opB(k, j),  i < M, j < N, k < K,
 *   opA(i, k) = trans_a ? Ab[k*lda + i] : Ab[i*lda + k],
 *   opB(k, j) = trans_b ? Bb[j*ldb + k] : Bb[k*ldb + j],
 * accumulated in double from the stored values and rounded once to dt.
 * A stride of 0 for A or B reuses one matrix (broadcast); C's products must
 * not overlap (stride_c >= M*ldc) and a negative stride is refused, as the
 * real backend does.  Every operand's whole extent over the batch must lie
 * in one device block.
 *
 * fake_gemm_batched_calls counts successful calls; it is exported so a test
 * can dlsym() it and prove that core took the batched path.
 */
#include "fake_cuda.h"

__attribute__((visibility("default"))) long fake_gemm_batched_calls;

static int bad(const char *what, long long v) {
  fake_core.set_error("matmul: gemm_batched: %s %lld is invalid", what, v);
  return -1;
}

/* the elements operand X spans over the batch: (batch-1)*stride + one matrix */
static int check_operand(const void *X, int64_t rows, int64_t cols, int64_t ld, int64_t stride,
                         int64_t batch, cnn_dtype dt) {
  if (rows == 0 || cols == 0) return 0;
  if (ld < cols) return bad("leading dimension (smaller than the columns)", (long long)ld);
  return fake_dev_n("matmul", X, (batch - 1) * stride + (rows - 1) * ld + cols, dt);
}

static int check_args(int64_t M, int64_t N, int64_t K, int64_t sa, int64_t sb, int64_t ldc,
                      int64_t sc, int64_t batch) {
  if (M < 0 || N < 0 || K < 0) return bad("dimension", (long long)(M < 0 ? M : N < 0 ? N : K));
  if (batch < 0) return bad("batch", (long long)batch);
  if (sa < 0 || sb < 0) return bad("input stride", (long long)(sa < 0 ? sa : sb));
  if (batch > 1 && sc < M * ldc) return bad("output stride (products overlap)", (long long)sc);
  return 0;
}

static void product(cnn_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
                    int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double acc = 0;
      for (int64_t k = 0; k < K; k++)
        acc += fake_load(dt, A, ta ? k * lda + i : i * lda + k) *
               fake_load(dt, B, tb ? j * ldb + k : k * ldb + j);
      fake_store(dt, C, i * ldc + j, acc);
    }
}

static int gemm_batched(int dev, cnn_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                        const void *A, int64_t lda, int64_t sa, const void *B, int64_t ldb,
                        int64_t sb, void *C, int64_t ldc, int64_t sc, int64_t batch) {
  if (check_args(M, N, K, sa, sb, ldc, sc, batch)) return -1;
  if (fake_float_dt("matmul", dt, true) || fake_enter("matmul", dev)) return -1;
  int rc = 0;
  if (M > 0 && N > 0 && batch > 0)
    rc = check_operand(A, ta ? K : M, ta ? M : K, lda, sa, batch, dt) ||
                 check_operand(B, tb ? N : K, tb ? K : N, ldb, sb, batch, dt) ||
                 check_operand(C, M, N, ldc, sc, batch, dt)
             ? -1
             : 0;
  size_t es = cnn_dtype_size(dt);
  for (int64_t b = 0; rc == 0 && b < batch && M > 0 && N > 0; b++)
    product(dt, ta, tb, M, N, K, (const char *)A + (size_t)(b * sa) * es, lda,
            (const char *)B + (size_t)(b * sb) * es, ldb, (char *)C + (size_t)(b * sc) * es, ldc);
  fake_leave();
  if (rc == 0) fake_gemm_batched_calls++;
  return rc;
}

void fake_register_batched(cnn_backend *be) { be->gemm_batched = gemm_batched; }
