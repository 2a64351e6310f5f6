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
 * 32-bit int.  The bias loops are channel_bias.c's.  The element loops
 * (im2col, col2im) are written once
 * over double and instantiated per dtype by always-inline calls with a
 * literal `f64`, chosen inside each parallel loop (OpenMP outlines loop
 * bodies before inlining, so a flag passed in would stay a variable).
 */
#include "blas.h"
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
static void gemm(int f64, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const void *A,
                 int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc) {
  bool ta = trans_a, tb = trans_b;
  if (f64)
    cnn_blas_dgemm(ta, tb, (int)M, (int)N, (int)K, 1.0, A, (int)lda, B, (int)ldb, beta, C,
                   (int)ldc);
  else
    cnn_blas_sgemm(ta, tb, (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb, (float)beta, C,
                   (int)ldc);
}

/* No lowering needed: the image planes already form the CRS x P matrix. */
static int is_pointwise(const cnn_conv_shape *s) {
  return s->R == 1 && s->S == 1 && s->sh == 1 && s->sw == 1 && s->pt == 0 && s->pb == 0 &&
         s->pl == 0 && s->pr == 0;
}

/* The outputs o in [0, n) whose input o*stride + off falls in [0, size)
 * form one range [*lo, *hi); the rest read padding. */
static void valid_range(int64_t off, int64_t size, int stride, int64_t n, int64_t *lo,
                        int64_t *hi) {
  int64_t a = off >= 0 ? 0 : (-off + stride - 1) / stride;              /* o*stride + off >= 0 */
  int64_t b = size - off <= 0 ? 0 : (size - off + stride - 1) / stride; /* ... < size */
  *lo = a < n ? a : n;
  *hi = b < n ? b : n;
  if (*hi < *lo) *hi = *lo;
}

/* One row of col: tap (r, q) of one input channel plane (H x W) at every
 * output position; out has OH x OW entries. */
ALWAYS_INLINE void im2col_row(int f64, cnn_conv_shape s, const void *plane, int64_t r, int64_t q,
                              void *out) {
  int64_t lo, hi, off = q * s.dw - s.pl;
  valid_range(off, s.W, s.sw, s.OW, &lo, &hi);
  for (int64_t oh = 0; oh < s.OH; oh++) {
    int64_t ih = oh * s.sh - s.pt + r * s.dh, o = oh * s.OW;
    int pad_row = ih < 0 || ih >= s.H;
    int64_t a = pad_row ? s.OW : lo, b = pad_row ? s.OW : hi; /* copy [a, b), zero the rest */
    for (int64_t ow = 0; ow < a; ow++) cnn_cpu_st(out, o + ow, 0, f64);
    for (int64_t ow = a; ow < b; ow++)
      cnn_cpu_st(out, o + ow, cnn_cpu_ld(plane, ih * s.W + ow * s.sw + off, f64), f64);
    for (int64_t ow = b; ow < s.OW; ow++) cnn_cpu_st(out, o + ow, 0, f64);
  }
}

/* col (CRS x P) <- the patches of x[n, g*Cg .. g*Cg+Cg-1] (see the top). */
static void im2col(cnn_dtype dt, const cnn_conv_shape *s, const void *x, int64_t n, int64_t g,
                   void *col) {
  int64_t Cg = s->C / s->groups, RS = s->R * s->S, P = s->OH * s->OW, f64 = dt == CNN_FLOAT64;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < Cg * RS; row++) {
    const void *plane = at(x, (n * s->C + g * Cg + row / RS) * s->H * s->W, f64);
    int64_t r = row % RS / s->S, q = row % s->S;
    if (f64)
      im2col_row(1, *s, plane, r, q, at(col, row * P, 1));
    else
      im2col_row(0, *s, plane, r, q, at(col, row * P, 0));
  }
}

/* The adjoint of im2col_row: plane (H x W) += the row's entries. */
ALWAYS_INLINE void col2im_row(int f64, cnn_conv_shape s, const void *in, int64_t r, int64_t q,
                              void *plane) {
  int64_t lo, hi, off = q * s.dw - s.pl;
  valid_range(off, s.W, s.sw, s.OW, &lo, &hi);
  for (int64_t oh = 0; oh < s.OH; oh++) {
    int64_t ih = oh * s.sh - s.pt + r * s.dh;
    if (ih < 0 || ih >= s.H) continue;
    for (int64_t ow = lo; ow < hi; ow++) {
      int64_t d = ih * s.W + ow * s.sw + off;
      cnn_cpu_st(plane, d, cnn_cpu_ld(plane, d, f64) + cnn_cpu_ld(in, oh * s.OW + ow, f64), f64);
    }
  }
}

/* dx[n, g*Cg + c] += the col entries that came from it.  Parallel over
 * channels: each owns its dx plane and its R*S rows of col. */
static void col2im(cnn_dtype dt, const cnn_conv_shape *s, const void *col, int64_t n, int64_t g,
                   void *dx) {
  int64_t Cg = s->C / s->groups, RS = s->R * s->S, P = s->OH * s->OW, f64 = dt == CNN_FLOAT64;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < Cg; c++) {
    void *plane = at(dx, (n * s->C + g * Cg + c) * s->H * s->W, f64);
    for (int64_t rq = 0; rq < RS; rq++) {
      const void *in = at(col, (c * RS + rq) * P, f64);
      if (f64)
        col2im_row(1, *s, in, rq / s->S, rq % s->S, plane);
      else
        col2im_row(0, *s, in, rq / s->S, rq % s->S, plane);
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

static int im2col_forward(int f64, const cnn_conv_shape *s, const void *x, const void *w,
                          const void *b, void *y) {
  int64_t Cg = s->C / s->groups, Kg = s->K / s->groups, CRS = Cg * s->R * s->S;
  int64_t P = s->OH * s->OW;
  cnn_dtype dt = f64 ? CNN_FLOAT64 : CNN_FLOAT32;
  void *col;
  if (alloc_col(s, f64, &col)) return -1;
  for (int64_t n = 0; n < s->N; n++) {
    if (interrupted(col)) return -1;
    for (int64_t g = 0; g < s->groups; g++) {
      const void *B = col ? col : at(x, (n * s->C + g * Cg) * P, f64);
      if (col) im2col(dt, s, x, n, g, col);
      gemm(f64, 0, 0, Kg, P, CRS, at(w, g * Kg * CRS, f64), CRS, B, P, 0.0,
           at(y, (n * s->K + g * Kg) * P, f64), P);
    }
    if (b) cnn_cpu_add_channel_bias(f64, 1, s->K, P, b, at(y, n * s->K * P, f64));
  }
  free(col);
  return 0;
}

int cnn_cpu_conv2d_im2col_forward(cnn_dtype dt, const cnn_conv_shape *s, const void *x,
                                  const void *w, const void *b, void *y) {
  return im2col_forward(dt == CNN_FLOAT64, s, x, w, b, y);
}

static int im2col_backward_data(int f64, const cnn_conv_shape *s, const void *dy, const void *w,
                                void *dx) {
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
      col2im(f64 ? CNN_FLOAT64 : CNN_FLOAT32, s, col, n, g, dx);
    }
  }
  free(col);
  return 0;
}

int cnn_cpu_conv2d_im2col_backward_data(cnn_dtype dt, const cnn_conv_shape *s, const void *dy,
                                        const void *w, void *dx) {
  return im2col_backward_data(dt == CNN_FLOAT64, s, dy, w, dx);
}

static int im2col_backward_weight(int f64, const cnn_conv_shape *s, const void *dy, const void *x,
                                  void *dw, void *db) {
  int64_t Cg = s->C / s->groups, Kg = s->K / s->groups, CRS = Cg * s->R * s->S;
  int64_t P = s->OH * s->OW;
  void *col;
  if (alloc_col(s, f64, &col)) return -1;
  for (int64_t n = 0; n < s->N; n++) {
    if (interrupted(col)) return -1;
    for (int64_t g = 0; g < s->groups; g++) {
      const void *B = col ? col : at(x, (n * s->C + g * Cg) * P, f64);
      if (col) im2col(f64 ? CNN_FLOAT64 : CNN_FLOAT32, s, x, n, g, col);
      gemm(f64, 0, 1, Kg, CRS, P, at(dy, (n * s->K + g * Kg) * P, f64), P, B, P, n == 0 ? 0.0 : 1.0,
           at(dw, g * Kg * CRS, f64), CRS);
    }
  }
  free(col);
  if (db) cnn_cpu_channel_sums(f64, s->N, s->K, P, dy, db);
  return 0;
}

int cnn_cpu_conv2d_im2col_backward_weight(cnn_dtype dt, const cnn_conv_shape *s, const void *dy,
                                          const void *x, void *dw, void *db) {
  return im2col_backward_weight(dt == CNN_FLOAT64, s, dy, x, dw, db);
}
