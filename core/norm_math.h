/*
 * norm_math.h -- the per-row math of layer, group and instance
 * normalisation, shared by the CPU loops (core/cpu/norm_rows.c), the CUDA
 * kernels (gpu/norm.cu) and the fake device (tests/gpu/fake_cuda_norm.c).
 *
 * One geometry serves the three ops.  x is R rows of D contiguous values;
 * each row is normalised by its own mean and biased variance:
 *   xhat = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps),
 *   y = xhat * gamma[k] + beta[k]
 * where element j of row r takes the affine parameter
 *   k = ((r % G) * D + j) / L          (A = G * D / L parameters).
 *   layer norm:    R = numel / D, G = 1, L = 1        (k = j)
 *   group norm:    R = N * G, D = C/G * HW, L = HW    (k = channel)
 *   instance norm: R = N * C, D = HW, G = C, L = HW   (k = channel)
 *
 * Backward, with g = gamma[k] (1 without weight) and means over the row:
 *   dxhat = dy * g
 *   dx    = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
 *   dgamma[k] = sum dy * xhat,  dbeta[k] = sum dy   over the rows and
 *   positions that use k (for layer norm a column sum over the rows).
 *
 * CNN_HD static inline functions (elementwise_math.h's convention): no
 * libc beyond <math.h>, no allocation, callers validate.
 */
#ifndef CNN_NORM_MATH_H
#define CNN_NORM_MATH_H

#include <math.h>
#include <stdint.h>

#include "elementwise_math.h" /* CNN_HD */

typedef struct {
  int64_t R; /* rows */
  int64_t D; /* values per row */
  int64_t G; /* groups: rows cycle through G parameter blocks (1 for layer norm) */
  int64_t L; /* consecutive values of a row sharing one parameter (1 for layer norm) */
} cnn_norm_shape;

/* number of affine parameters: G * D / L */
CNN_HD static inline int64_t cnn_norm_affine_count(const cnn_norm_shape *s) {
  return s->L > 0 ? s->G * (s->D / s->L) : 0;
}

/* the affine parameter of element j of row r */
CNN_HD static inline int64_t cnn_norm_affine_index(const cnn_norm_shape *s, int64_t r, int64_t j) {
  return ((r % s->G) * s->D + j) / s->L;
}

/* 1/sqrt(var + eps); var from the sum of squared deviations of n values */
CNN_HD static inline double cnn_norm_rstd(double sum_sq_dev, int64_t n, double eps) {
  return 1.0 / sqrt((n > 0 ? sum_sq_dev / (double)n : 0.0) + eps);
}

/* dx of one element from its dxhat = dy * gamma, xhat, the row's rstd and
 * the row means of dxhat and dxhat * xhat */
CNN_HD static inline double cnn_norm_dx(double dxhat, double xhat, double rstd, double mean_dxhat,
                                        double mean_dxhat_xhat) {
  return rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
}

#endif /* CNN_NORM_MATH_H */
