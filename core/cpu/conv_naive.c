/*
 * conv_naive.c -- the direct-loop 2-D convolution: the oracle of the tests
 * and the path for zero-sized problems.
 *
 * Definition (g = group of output channel k, Cg = C/groups, Kg = K/groups):
 *
 *   y[n,k,oh,ow] = b[k] + sum_{c<Cg, r<R, s<S} x[n, g*Cg+c, ih, iw] * w[k,c,r,s]
 *   with ih = oh*sh - pt + r*dh,  iw = ow*sw - pl + s*dw,
 *   and x = 0 outside 0 <= ih < H, 0 <= iw < W (padding).
 *
 * The backward passes are the same sum read the other way: backward data
 * scatters dy*w into dx, backward weight gathers dy*x into dw.  Sums are
 * kept in double for both dtypes, so the float32 oracle is at least as
 * accurate as the paths it checks.  Loops stay plain and readable; the
 * only parallelism is over output channels (forward, weight) or input
 * channels (data) inside one image, and the interrupt flag is polled
 * between images.  Bodies are instantiated per dtype by always-inline
 * calls with a literal `f64` inside the parallel loops.
 *
 * Layouts: x N x C x H x W, w K x Cg x R x S, b K, y N x K x OH x OW.
 */
#include <stdlib.h>

#include "cpu/kernels.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Is input row/column `i` inside the image (not padding)? */
static inline int inside(int64_t i, int64_t size) { return i >= 0 && i < size; }

/* y[n,k,oh,ow] for one output position: the sum above. */
ALWAYS_INLINE double fwd_point(int f64, const cnn_conv_shape *s, const void *x, const void *w,
                               int64_t n, int64_t k, int64_t oh, int64_t ow) {
  int64_t Cg = s->C / s->groups, g = k / (s->K / s->groups);
  double acc = 0;
  for (int64_t c = 0; c < Cg; c++)
    for (int64_t r = 0; r < s->R; r++) {
      int64_t ih = oh * s->sh - s->pt + r * s->dh;
      if (!inside(ih, s->H)) continue;
      for (int64_t q = 0; q < s->S; q++) {
        int64_t iw = ow * s->sw - s->pl + q * s->dw;
        if (!inside(iw, s->W)) continue;
        int64_t xi = ((n * s->C + g * Cg + c) * s->H + ih) * s->W + iw;
        int64_t wi = ((k * Cg + c) * s->R + r) * s->S + q;
        acc += cnn_cpu_ld(x, xi, f64) * cnn_cpu_ld(w, wi, f64);
      }
    }
  return acc;
}

/* y[n, k, :, :] for one image and output channel. */
ALWAYS_INLINE void fwd_channel(int f64, const cnn_conv_shape *s, const void *x, const void *w,
                               const void *b, void *y, int64_t n, int64_t k) {
  for (int64_t oh = 0; oh < s->OH; oh++)
    for (int64_t ow = 0; ow < s->OW; ow++) {
      double v = (b ? cnn_cpu_ld(b, k, f64) : 0) + fwd_point(f64, s, x, w, n, k, oh, ow);
      cnn_cpu_st(y, ((n * s->K + k) * s->OH + oh) * s->OW + ow, v, f64);
    }
}

int cnn_cpu_conv2d_naive_forward(cnn_dtype dt, const cnn_conv_shape *s, const void *x,
                                 const void *w, const void *b, void *y) {
  for (int64_t n = 0; n < s->N; n++) {
    if (cnn_interrupt_pending()) {
      cnn_set_error("conv2d: interrupted");
      return -1;
    }
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < s->K; k++) {
      if (dt == CNN_FLOAT64)
        fwd_channel(1, s, x, w, b, y, n, k);
      else
        fwd_channel(0, s, x, w, b, y, n, k);
    }
  }
  return 0;
}

/* dx[n, g*Cg+c, :, :] for one input channel c of group g: scatter from
 * every output channel k of the group.  Accumulates in `acc` (H x W). */
ALWAYS_INLINE void bwd_data_channel(int f64, const cnn_conv_shape *s, const void *dy, const void *w,
                                    int64_t n, int64_t g, int64_t c, double *acc) {
  int64_t Cg = s->C / s->groups, Kg = s->K / s->groups;
  for (int64_t i = 0; i < s->H * s->W; i++) acc[i] = 0;
  for (int64_t k = g * Kg; k < (g + 1) * Kg; k++)
    for (int64_t oh = 0; oh < s->OH; oh++)
      for (int64_t ow = 0; ow < s->OW; ow++) {
        double d = cnn_cpu_ld(dy, ((n * s->K + k) * s->OH + oh) * s->OW + ow, f64);
        for (int64_t r = 0; r < s->R; r++) {
          int64_t ih = oh * s->sh - s->pt + r * s->dh;
          if (!inside(ih, s->H)) continue;
          for (int64_t q = 0; q < s->S; q++) {
            int64_t iw = ow * s->sw - s->pl + q * s->dw;
            if (!inside(iw, s->W)) continue;
            acc[ih * s->W + iw] += d * cnn_cpu_ld(w, ((k * Cg + c) * s->R + r) * s->S + q, f64);
          }
        }
      }
}

int cnn_cpu_conv2d_naive_backward_data(cnn_dtype dt, const cnn_conv_shape *s, const void *dy,
                                       const void *w, void *dx) {
  int64_t Cg = s->C / s->groups, HW = s->H * s->W;
  for (int64_t n = 0; n < s->N; n++) {
    if (cnn_interrupt_pending()) {
      cnn_set_error("conv2d: interrupted");
      return -1;
    }
    int failed = 0;
#pragma omp parallel
    {
      double *acc = malloc((size_t)(HW > 0 ? HW : 1) * sizeof(double));
      if (!acc) {
#pragma omp atomic write
        failed = 1;
      }
#pragma omp for schedule(static)
      for (int64_t ci = 0; ci < s->C; ci++) {
        if (!acc) continue;
        if (dt == CNN_FLOAT64)
          bwd_data_channel(1, s, dy, w, n, ci / Cg, ci % Cg, acc);
        else
          bwd_data_channel(0, s, dy, w, n, ci / Cg, ci % Cg, acc);
        for (int64_t i = 0; i < HW; i++)
          cnn_cpu_st(dx, (n * s->C + ci) * HW + i, acc[i], dt == CNN_FLOAT64);
      }
      free(acc);
    }
    if (failed) {
      cnn_set_error("conv2d: out of memory for a %lldx%lld backward buffer", (long long)s->H,
                    (long long)s->W);
      return -1;
    }
  }
  return 0;
}

/* dw[k,c,r,q] = sum over n, oh, ow of dy[n,k,oh,ow] * x[n, g*Cg+c, ih, iw]. */
ALWAYS_INLINE double bwd_weight_point(int f64, const cnn_conv_shape *s, const void *dy,
                                      const void *x, int64_t k, int64_t c, int64_t r, int64_t q) {
  int64_t Cg = s->C / s->groups, g = k / (s->K / s->groups);
  double acc = 0;
  for (int64_t n = 0; n < s->N; n++)
    for (int64_t oh = 0; oh < s->OH; oh++) {
      int64_t ih = oh * s->sh - s->pt + r * s->dh;
      if (!inside(ih, s->H)) continue;
      for (int64_t ow = 0; ow < s->OW; ow++) {
        int64_t iw = ow * s->sw - s->pl + q * s->dw;
        if (!inside(iw, s->W)) continue;
        acc += cnn_cpu_ld(dy, ((n * s->K + k) * s->OH + oh) * s->OW + ow, f64) *
               cnn_cpu_ld(x, ((n * s->C + g * Cg + c) * s->H + ih) * s->W + iw, f64);
      }
    }
  return acc;
}

/* db[k] = sum over n, oh, ow of dy[n,k,oh,ow]. */
ALWAYS_INLINE double bias_grad(int f64, const cnn_conv_shape *s, const void *dy, int64_t k) {
  int64_t P = s->OH * s->OW;
  double acc = 0;
  for (int64_t n = 0; n < s->N; n++)
    for (int64_t i = 0; i < P; i++) acc += cnn_cpu_ld(dy, (n * s->K + k) * P + i, f64);
  return acc;
}

/* dw[k, :, :, :] and db[k] for one output channel. */
ALWAYS_INLINE void bwd_weight_channel(int f64, const cnn_conv_shape *s, const void *dy,
                                      const void *x, void *dw, void *db, int64_t k) {
  int64_t Cg = s->C / s->groups, RS = s->R * s->S;
  for (int64_t c = 0; c < Cg; c++)
    for (int64_t r = 0; r < s->R; r++)
      for (int64_t q = 0; q < s->S; q++)
        cnn_cpu_st(dw, (k * Cg + c) * RS + r * s->S + q,
                   bwd_weight_point(f64, s, dy, x, k, c, r, q), f64);
  if (db) cnn_cpu_st(db, k, bias_grad(f64, s, dy, k), f64);
}

int cnn_cpu_conv2d_naive_backward_weight(cnn_dtype dt, const cnn_conv_shape *s, const void *dy,
                                         const void *x, void *dw, void *db) {
  if (cnn_interrupt_pending()) {
    cnn_set_error("conv2d: interrupted");
    return -1;
  }
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < s->K; k++) {
    if (dt == CNN_FLOAT64)
      bwd_weight_channel(1, s, dy, x, dw, db, k);
    else
      bwd_weight_channel(0, s, dy, x, dw, db, k);
  }
  return 0;
}
