/*
 * fake_cuda_blas.c -- gemm of the fake device, the triple loop.
 *
 * Row-major, as core/backend.h documents: C[M x N] = op(A) op(B), C
 * OVERWRITTEN, op(A) is M x K.  A is stored M x K (row stride lda) or, with
 * trans_a, K x M; B is stored K x N (ldb) or, with trans_b, N x K; C has
 * row stride ldc.  Each dot product accumulates in double from the stored
 * values (float16/bfloat16 read exactly) and is rounded once to dt.
 * Every operand's extent ((rows - 1) * ld + cols elements) must lie in one
 * device block.
 */
#include "fake_cuda.h"

/* element (i, k) of op(X) where X is stored with row stride ld */
static double at(cnn_dtype dt, const void *X, bool trans, int64_t ld, int64_t i, int64_t k) {
  return fake_load(dt, X, trans ? k * ld + i : i * ld + k);
}

static int check_mat(const char *op, const void *p, int64_t rows, int64_t cols, int64_t ld,
                     cnn_dtype dt) {
  if (rows == 0 || cols == 0) return 0;
  if (ld < cols) {
    fake_core.set_error("%s: leading dimension %lld is smaller than the %lld columns", op,
                        (long long)ld, (long long)cols);
    return -1;
  }
  return fake_dev_n(op, p, (rows - 1) * ld + cols, dt);
}

static int gemm(int dev, cnn_dtype dt, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                const void *A, int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc) {
  if (fake_float_dt("matmul", dt, true) || fake_enter("matmul", dev)) return -1;
  int rc = check_mat("matmul", A, trans_a ? K : M, trans_a ? M : K, lda, dt) ||
                   check_mat("matmul", B, trans_b ? N : K, trans_b ? K : N, ldb, dt) ||
                   check_mat("matmul", C, M, N, ldc, dt)
               ? -1
               : 0;
  for (int64_t i = 0; rc == 0 && i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double acc = 0;
      for (int64_t k = 0; k < K; k++)
        acc += at(dt, A, trans_a, lda, i, k) * at(dt, B, trans_b, ldb, k, j);
      fake_store(dt, C, i * ldc + j, acc);
    }
  fake_leave();
  return rc;
}

void fake_blas_register(cnn_backend *be) { be->gemm = gemm; }
