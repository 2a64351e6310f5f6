/*
 * blas.c -- SGEMM/DGEMM through OpenBLAS, loaded on first use.
 *
 * OpenBLAS is dlopen()ed rather than linked, for two reasons measured here:
 *  - start-up: cnnsh does not pay for loading it until a matrix product runs;
 *  - kernel choice: OpenBLAS 0.3.21 (Debian 12) does not recognise recent
 *    Xeons and falls back to its generic "Prescott" SSE3 kernels (~3x
 *    slower SGEMM here).  OpenBLAS reads OPENBLAS_CORETYPE only when it is
 *    loaded, so before loading we ask for the AVX-512 (SkylakeX) or AVX2
 *    (Haswell) kernels that this CPU supports -- unless the user has set
 *    OPENBLAS_CORETYPE, which always wins.
 * If the library cannot be loaded, a plain triple loop computes the same
 * product (slowly) and cnn_blas_info() says why.
 * The OpenMP build of OpenBLAS shares libgomp's thread pool with oneDNN and
 * our loops (DESIGN.md).
 */
#include "blas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef CNNSH_OPENBLAS_LIB
#define CNNSH_OPENBLAS_LIB "libopenblas.so.0"
#endif

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *,
                         int, float, float *, int);
typedef void (*dgemm_fn)(int, int, int, int, int, int, double, const double *, int, const double *,
                         int, double, double *, int);
typedef char *(*corename_fn)(void);

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static sgemm_fn sgemm_impl;
static dgemm_fn dgemm_impl;
static char info[256] = "not loaded";

static void choose_coretype(void) {
  if (getenv("OPENBLAS_CORETYPE")) return;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    setenv("OPENBLAS_CORETYPE", "Haswell", 0);
}

static void load_openblas(void) {
  choose_coretype();
  void *h = dlopen(CNNSH_OPENBLAS_LIB, RTLD_NOW | RTLD_LOCAL);
  if (!h) h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(info, sizeof info, "OpenBLAS not loaded (%s); using the naive loop", dlerror());
    return;
  }
  sgemm_impl = (sgemm_fn)dlsym(h, "cblas_sgemm");
  dgemm_impl = (dgemm_fn)dlsym(h, "cblas_dgemm");
  corename_fn corename = (corename_fn)dlsym(h, "openblas_get_corename");
  snprintf(info, sizeof info, "OpenBLAS (%s kernels)", corename ? corename() : "unknown");
}

const char *cnn_blas_info(void) {
  pthread_once(&load_once, load_openblas);
  return info;
}

/* The naive fallback: C = alpha * op(A) op(B) + beta * C, row-major. */
#define NAIVE_GEMM(T)                                                                              \
  for (int i = 0; i < M; i++)                                                                      \
    for (int j = 0; j < N; j++) {                                                                  \
      double s = 0;                                                                                \
      for (int k = 0; k < K; k++)                                                                  \
        s += (double)(ta ? A[k * lda + i] : A[i * lda + k]) *                                      \
             (tb ? B[j * ldb + k] : B[k * ldb + j]);                                               \
      C[i * ldc + j] = (T)(alpha * s + (beta == 0 ? 0 : beta * C[i * ldc + j]));                   \
    }

void cnn_blas_sgemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc) {
  pthread_once(&load_once, load_openblas);
  if (sgemm_impl) {
    sgemm_impl(CNN_BLAS_ROW_MAJOR, ta ? CNN_BLAS_TRANS : CNN_BLAS_NO_TRANS,
               tb ? CNN_BLAS_TRANS : CNN_BLAS_NO_TRANS, M, N, K, alpha, A, lda, B, ldb, beta, C,
               ldc);
    return;
  }
  NAIVE_GEMM(float)
}

void cnn_blas_dgemm(bool ta, bool tb, int M, int N, int K, double alpha, const double *A, int lda,
                    const double *B, int ldb, double beta, double *C, int ldc) {
  pthread_once(&load_once, load_openblas);
  if (dgemm_impl) {
    dgemm_impl(CNN_BLAS_ROW_MAJOR, ta ? CNN_BLAS_TRANS : CNN_BLAS_NO_TRANS,
               tb ? CNN_BLAS_TRANS : CNN_BLAS_NO_TRANS, M, N, K, alpha, A, lda, B, ldb, beta, C,
               ldc);
    return;
  }
  NAIVE_GEMM(double)
}
