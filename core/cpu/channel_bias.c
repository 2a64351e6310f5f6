/*
 * channel_bias.c -- the per-channel bias of the convolution paths that do
 * not fuse it (im2col, and the transposed convolution where oneDNN's
 * deconvolution does not apply): y[n, c, :] += b[c] and its gradient
 * db[c] = sum over n and the plane of dy[n, c, :], over N x C planes of P
 * values of float32 or float64.
 *
 * Written once over double and instantiated per dtype by always-inline
 * calls with a literal `f64`, chosen inside each parallel loop (the
 * pattern of conv_im2col.c).
 */
#include "cpu/kernels.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE void add_to_plane(int f64, int64_t P, double bc, void *plane, int64_t at) {
  for (int64_t i = at; i < at + P; i++) cnn_cpu_st(plane, i, cnn_cpu_ld(plane, i, f64) + bc, f64);
}

void cnn_cpu_add_channel_bias(int f64, int64_t N, int64_t C, int64_t P, const void *b, void *y) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) {
      if (f64)
        add_to_plane(1, P, cnn_cpu_ld(b, c, 1), y, (n * C + c) * P);
      else
        add_to_plane(0, P, cnn_cpu_ld(b, c, 0), y, (n * C + c) * P);
    }
}

/* The sum of one plane (P values from index `at`). */
ALWAYS_INLINE double plane_sum(int f64, int64_t P, const void *p, int64_t at) {
  double acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = at; i < at + P; i++) acc += cnn_cpu_ld(p, i, f64);
  return acc;
}

void cnn_cpu_channel_sums(int f64, int64_t N, int64_t C, int64_t P, const void *dy, void *db) {
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < C; c++) {
    double acc = 0;
    for (int64_t n = 0; n < N; n++)
      acc += f64 ? plane_sum(1, P, dy, (n * C + c) * P) : plane_sum(0, P, dy, (n * C + c) * P);
    cnn_cpu_st(db, c, acc, f64);
  }
}
