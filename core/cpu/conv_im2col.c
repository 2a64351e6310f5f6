/*
 * conv_im2col.c -- convolution as matrix products: im2col + OpenBLAS GEMM.
 *
 * The readable "lowering" path, for teaching and as the fallback where
 * oneDNN does not apply (float64, odd shapes).  For one image n and one
 * group g (Cg = C/groups, Kg = K/groups, P = OH*OW, CRS = Cg*R*S):
 *
 *   col[(c*R + r)*S + q][oh*OW + ow] = x[n, g*Cg+c, ih, iw]   (0 in padding)
 *       with ih = oh*sh - pt + r*dh, iw = ow*sw - pl + q*dw   -- CRS x P
 *
 *   forward          y_g  (Kg x P)   = W_g (Kg x CRS) * col (CRS x P)  (+ b)
 *   backward data    col  (CRS x P)  = W_g^T * dy_g (Kg x P), then col2im
 *                                      sums every column entry back into dx
 *   backward weight  dW_g (Kg x CRS) = sum_n dy_g (Kg x P) * col^T (P x CRS)
 *
 * where W_g is the weight rows of group g, which are already a row-major
 * Kg x CRS matrix in the K x Cg x R x S layout.  A 1x1 kernel with stride 1
 * and no padding needs no im2col: the image itself is the CRS x P matrix.
 *
 * One col workspace (CRS x P elements of dt) is allocated per call.  The
 * interrupt flag is polled once per image.  GEMM sizes must fit OpenBLAS's
 * 32-bit int.
 */
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* &p[i] for an array of float (f64 = 0) or double (f64 = 1) */
static inline void *at(const void *p, int64_t i, int f64) {
  return (char *)p + i * (f64 ? sizeof(double) : sizeof(float));
}

/* C = alpha * op(A) * op(B) + beta * C, row-major, in the dtype. */
static void gemm(int f64, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                 const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C,
                 int64_t ldc) {
  enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  enum CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if (f64)
    cblas_dgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, 1.0, A, (int)lda, B, (int)ldb,
                beta, C, (int)ldc);
  else
    cblas_sgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb,
                (float)beta, C, (int)ldc);
}

/* No lowering needed: the image planes already form the CRS x P matrix. */
static int is_pointwise(const cnn_conv_shape *s) {
  return s->R == 1 && s->S == 1 && s->sh == 1 && s->sw == 1 && s->pt == 0 && s->pb == 0 &&
         s->pl == 0 && s->pr == 0;
}

/* col (CRS x P) <- the patches of x[n, g*Cg .. g*Cg+Cg-1] (see the top). */
ALWAYS_INLINE void im2col(int f64, const cnn_conv_shape *s, const void *x, int64_t n,
                          int64_t g, void *col) {
  int64_t Cg = s->C / s->groups, RS = s->R * s->S, P = s->OH * s->OW;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < Cg * RS; row++) {
    int64_t c = row / RS, r = row % RS / s->S, q = row % s->S;
    int64_t plane = (n * s->C + g * Cg + c) * s->H * s->W;
    for (int64_t oh = 0; oh < s->OH; oh++) {
      int64_t ih = oh * s->sh - s->pt + r * s->dh, out = row * P + oh * s->OW;
      for (int64_t ow = 0; ow < s->OW; ow++) {
        int64_t iw = ow * s->sw - s->pl + q * s->dw;
        int in = ih >= 0 && ih < s->H && iw >= 0 && iw < s->W;
        cnn_cpu_st(col, out + ow, in ? cnn_cpu_ld(x, plane + ih * s->W + iw, f64) : 0, f64);
      }
    }
  }
}

/* dx[n, g*Cg + c] += the col entries that came from it (the adjoint of
 * im2col).  Parallel over channels: each owns its dx plane. */
ALWAYS_INLINE void col2im(int f64, const cnn_conv_shape *s, const void *col, int64_t n,
                          int64_t g, void *dx) {
  int64_t Cg = s->C / s->groups, RS = s->R * s->S, P = s->OH * s->OW;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < Cg; c++) {
    int64_t plane = (n * s->C + g * Cg + c) * s->H * s->W;
    for (int64_t rq = 0; rq < RS; rq++) {
      int64_t r = rq / s->S, q = rq % s->S, row = c * RS + rq;
      for (int64_t oh = 0; oh < s->OH; oh++) {
        int64_t ih = oh * s->sh - s->pt + r * s->dh;
        if (ih < 0 || ih >= s->H) continue;
        for (int64_t ow = 0; ow < s->OW; ow++) {
          int64_t iw = ow * s->sw - s->pl + q * s->dw;
          if (iw < 0 || iw >= s->W) continue;
          int64_t d = plane + ih * s->W + iw;
          double v = cnn_cpu_ld(dx, d, f64) + cnn_cpu_ld(col, row * P + oh * s->OW + ow, f64);
          cnn_cpu_st(dx, d, v, f64);
        }
      }
    }
  }
}

/* Allocates the CRS x P workspace (NULL for pointwise shapes); -1 + error. */
static int alloc_col(const cnn_conv_shape *s, int f64, void **col) {
  int64_t CRS = s->C / s->groups * s->R * s->S, P = s->OH * s->OW;
  *col = NULL;
  if (CRS > INT_MAX || P > INT_MAX || s->K > INT_MAX) {
    cnn_set_error("conv2d: im2col matrix %lldx%lld too large for BLAS", (long long)CRS,
                  (long long)P);
    return -1;
  }
  if (is_pointwise(s)) return 0;
  *col = malloc((size_t)(CRS * P) * (f64 ? sizeof(double) : sizeof(float)));
  if (!*col) {
    cnn_set_error("conv2d: out of memory for a %lldx%lld im2col workspace", (long long)CRS,
                  (long long)P);
    return -1;
  }
  return 0;
}

static int interrupted(void *col) {
  if (!cnn_interrupt_pending()) return 0;
  free(col);
  cnn_set_error("conv2d: interrupted");
  return 1;
}

ALWAYS_INLINE int im2col_forward(int f64, const cnn_conv_shape *s, const void *x,
                                 const void *w, const void *b, void *y) {
  int64_t Cg = s->C / s->groups, Kg = s->K / s->groups, CRS = Cg * s->R * s->S;
  int64_t P = s->OH * s->OW;
  void *col;
  if (alloc_col(s, f64, &col)) return -1;
  for (int64_t n = 0; n < s->N; n++) {
    if (interrupted(col)) return -1;
    for (int64_t g = 0; g < s->groups; g++) {
      const void *B = col ? col : at(x, (n * s->C + g * Cg) * P, f64);
      if (col) im2col(f64, s, x, n, g, col);
      gemm(f64, 0, 0, Kg, P, CRS, at(w, g * Kg * CRS, f64), CRS, B, P, 0.0,
           at(y, (n * s->K + g * Kg) * P, f64), P);
    }
    if (!b) continue;
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < s->K; k++)
      for (int64_t i = (n * s->K + k) * P; i < (n * s->K + k + 1) * P; i++)
        cnn_cpu_st(y, i, cnn_cpu_ld(y, i, f64) + cnn_cpu_ld(b, k, f64), f64);
  }
  free(col);
  return 0;
}

int cnn_cpu_conv2d_im2col_forward(cnn_dtype dt, const cnn_conv_shape *s, const void *x,
                                  const void *w, const void *b, void *y) {
  return dt == CNN_FLOAT64 ? im2col_forward(1, s, x, w, b, y) : im2col_forward(0, s, x, w, b, y);
}

ALWAYS_INLINE int im2col_backward_data(int f64, const cnn_conv_shape *s, const void *dy,
                                       const void *w, void *dx) {
  int64_t Cg = s->C / s->groups, Kg = s->K / s->groups, CRS = Cg * s->R * s->S;
  int64_t P = s->OH * s->OW, HW = s->H * s->W;
  void *col;
  if (alloc_col(s, f64, &col)) return -1;
  for (int64_t n = 0; n < s->N; n++) {
    if (interrupted(col)) return -1;
    for (int64_t g = 0; g < s->groups; g++) {
      void *dxg = at(dx, (n * s->C + g * Cg) * HW, f64);
      gemm(f64, 1, 0, CRS, P, Kg, at(w, g * Kg * CRS, f64), CRS,
           at(dy, (n * s->K + g * Kg) * P, f64), P, 0.0, col ? col : dxg, P);
      if (!col) continue; /* pointwise: the product is dx itself */
      memset(dxg, 0, (size_t)(Cg * HW) * (f64 ? sizeof(double) : sizeof(float)));
      col2im(f64, s, col, n, g, dx);
    }
  }
  free(col);
  return 0;
}

int cnn_cpu_conv2d_im2col_backward_data(cnn_dtype dt, const cnn_conv_shape *s, const void *dy,
                                        const void *w, void *dx) {
  return dt == CNN_FLOAT64 ? im2col_backward_data(1, s, dy, w, dx)
                           : im2col_backward_data(0, s, dy, w, dx);
}

/* db[k] = sum over n and pixels of dy[n, k]. */
ALWAYS_INLINE void bias_grad(int f64, const cnn_conv_shape *s, const void *dy, void *db) {
  int64_t P = s->OH * s->OW;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < s->K; k++) {
    double acc = 0;
    for (int64_t n = 0; n < s->N; n++)
      for (int64_t i = 0; i < P; i++) acc += cnn_cpu_ld(dy, (n * s->K + k) * P + i, f64);
    cnn_cpu_st(db, k, acc, f64);
  }
}

ALWAYS_INLINE int im2col_backward_weight(int f64, const cnn_conv_shape *s, const void *dy,
                                         const void *x, void *dw, void *db) {
  int64_t Cg = s->C / s->groups, Kg = s->K / s->groups, CRS = Cg * s->R * s->S;
  int64_t P = s->OH * s->OW;
  void *col;
  if (alloc_col(s, f64, &col)) return -1;
  for (int64_t n = 0; n < s->N; n++) {
    if (interrupted(col)) return -1;
    for (int64_t g = 0; g < s->groups; g++) {
      const void *B = col ? col : at(x, (n * s->C + g * Cg) * P, f64);
      if (col) im2col(f64, s, x, n, g, col);
      gemm(f64, 0, 1, Kg, CRS, P, at(dy, (n * s->K + g * Kg) * P, f64), P, B, P,
           n == 0 ? 0.0 : 1.0, at(dw, g * Kg * CRS, f64), CRS);
    }
  }
  free(col);
  if (db) bias_grad(f64, s, dy, db);
  return 0;
}

int cnn_cpu_conv2d_im2col_backward_weight(cnn_dtype dt, const cnn_conv_shape *s, const void *dy,
                                          const void *x, void *dw, void *db) {
  return dt == CNN_FLOAT64 ? im2col_backward_weight(1, s, dy, x, dw, db)
                           : im2col_backward_weight(0, s, dy, x, dw, db);
}
