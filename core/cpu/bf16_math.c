/*
 * bf16_math.c -- bfloat16 arithmetic over float32 arrays on the CPU
 * (cnn.autocast('bfloat16')): which path runs, the
 * rounding, and the matrix products' dispatch.
 *
 * Design.  The arrays stay float32 everywhere (the caller's tensors, the
 * saved operands of autograd, the outputs); what changes is the
 * arithmetic: operands rounded to bfloat16 (nearest even), products summed
 * in float32.  Two paths compute that:
 *  - "onednn": oneDNN's bfloat16 kernels (AVX512-BF16, AMX-BF16), whose
 *    reorders from the caller's float32 arrays into the primitive's
 *    bfloat16 layouts do the rounding (conv_onednn.c PREC_BF16,
 *    matmul_onednn.c).  Chosen once, when oneDNN's effective ISA contains
 *    avx512_core_bf16 (DNNL_MAX_CPU_ISA lowers it, e.g. for tests);
 *  - "emulated": elsewhere (an AVX2 CPU: oneDNN 2.6 creates no bfloat16
 *    convolution there, and on plain AVX-512 it would emulate the
 *    instructions), and for a shape or algorithm oneDNN does not take, the
 *    operands are rounded into float32 copies and the float32 kernels run:
 *    every product of two bfloat16 values is exact in float32, so this is
 *    the same arithmetic up to the order of the sums, without the speed.
 * The convolution's dispatch is in conv.c; the products' is here.
 */
#include <dnnl.h>
#include <dnnl_debug.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "cpu/kernels.h"

static struct {
  pthread_once_t once;
  int native;
  char detail[160];
} P = {.once = PTHREAD_ONCE_INIT};

static void decide(void) {
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  const char *name = dnnl_cpu_isa2str(isa);
  if (!name) name = "unknown";
  if (!strncmp(name, "cpu_isa_", 8)) name += 8;
  P.native = (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
  snprintf(P.detail, sizeof P.detail,
           P.native ? "oneDNN bfloat16 kernels, ISA %s"
                    : "operands rounded to bfloat16, float32 kernels: oneDNN's ISA %s has no "
                      "AVX512-BF16",
           name);
}

int cnn_cpu_bf16_native(void) {
  pthread_once(&P.once, decide);
  return P.native;
}

const char *cnn_cpu_bf16_path(const char **detail) {
  pthread_once(&P.once, decide);
  if (detail) *detail = P.detail;
  return P.native ? "onednn" : "emulated";
}

/* f rounded to the nearest bfloat16 (ties to even), as a float; NaN stays NaN. */
static inline float round_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000)
    u |= 0x00400000; /* quiet NaN: keep it a NaN once the low bits go */
  else
    u += 0x7fff + ((u >> 16) & 1);
  u &= 0xffff0000u;
  memcpy(&f, &u, 4);
  return f;
}

void cnn_cpu_bf16_round_into(float *dst, const float *src, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; i++) dst[i] = round_bf16(src[i]);
}

float *cnn_cpu_bf16_rounded_copy(const char *op, const float *src, int64_t n) {
  float *dst = malloc((size_t)(n > 0 ? n : 1) * sizeof *dst);
  if (!dst) {
    cnn_set_error("%s: out of memory for %lld bfloat16-rounded operands", op, (long long)n);
    return NULL;
  }
  cnn_cpu_bf16_round_into(dst, src, n);
  return dst;
}

/* ---- the products -------------------------------------------------------------- */

/* Elements spanned by `batch` matrices of `rows` x `cols` as stored (row
 * stride ld, batch stride step; 0 broadcasts one matrix). */
static int64_t span(int64_t rows, int64_t cols, int64_t ld, int64_t step, int64_t batch) {
  return (batch - 1) * step + (rows - 1) * ld + cols;
}

/* The emulated products: A and B rounded (each stored span once, gaps
 * included, so every offset is unchanged), then one sgemm per batch. */
static int gemm_rounded(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A,
                        int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float *C,
                        int64_t ldc, int64_t sc, int64_t batch) {
  float *ar = cnn_cpu_bf16_rounded_copy("matmul", A, span(ta ? K : M, ta ? M : K, lda, sa, batch));
  float *br =
      ar ? cnn_cpu_bf16_rounded_copy("matmul", B, span(tb ? N : K, tb ? K : N, ldb, sb, batch))
         : NULL;
  for (int64_t i = 0; br && i < batch; i++)
    cnn_blas_sgemm(ta, tb, (int)M, (int)N, (int)K, 1.0f, ar + i * sa, (int)lda, br + i * sb,
                   (int)ldb, 0.0f, C + i * sc, (int)ldc);
  int rc = br ? 0 : -1;
  free(ar), free(br);
  return rc;
}

int cnn_cpu_gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A,
                      int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float *C,
                      int64_t ldc, int64_t sc, int64_t batch) {
  if (M <= 0 || N <= 0 || batch <= 0) return 0;
  if (K == 0) { /* zeros (BLAS refuses lda = 0) */
    for (int64_t b = 0; b < batch; b++)
      for (int64_t i = 0; i < M; i++) memset(C + b * sc + i * ldc, 0, (size_t)N * sizeof *C);
    return 0;
  }
  if (cnn_cpu_bf16_native()) {
    int r = cnn_cpu_gemm_bf16_onednn(ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, batch);
    if (r != -2) return r; /* -2: no oneDNN primitive for this layout */
  }
  return gemm_rounded(ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, batch);
}
