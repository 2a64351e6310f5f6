/*
 * bn_relu_pool_blocked16.c -- training batch norm, ReLU and the 2x2
 * stride-2 max pool as one pass over oneDNN's nChw16c layout, forward and
 * backward, float32 with AVX-512: the tail of the training block conv ->
 * batch norm -> ReLU -> max pool (conv_block_onednn.c) where it runs
 * float32 on whole channel blocks.
 *
 * Why: oneDNN's batch norm wrote its normalised output (the size of the
 * convolution's output) for the pool to read back, and its backward read
 * the pool's gradient of that size twice; on the example network's first
 * block (64x32x28x28, 6.4 MB) those passes ran at the L3's rate and were
 * most of the block's time.  Here nothing of that size is written but the
 * input gradient:
 *
 *   forward   1. the batch statistics of x, channel by channel (a lane of
 *                a vector is a channel of its block)
 *             2. y = maxpool(relu(gamma (x - mean) rstd + beta)) and the
 *                window's tap (0-3), from x alone
 *   backward  g = dy at the chosen tap where the normalised value is > 0
 *             (ReLU's mask recomputed from x), else 0;
 *             1. dbeta = sum g, dgamma = sum g xhat
 *             2. dx = gamma rstd (g - dbeta/M - xhat dgamma/M), every
 *                element (the odd edge, in no window, has g = 0)
 *
 * with xhat = (x - mean) rstd, rstd = 1/sqrt(var + eps), M = N*H*W, var
 * biased (PyTorch's training batch norm).  The pool's rule is pool.c's
 * (max_pool_blocked16.c): a later tap wins when greater or NaN.  Sums:
 * float lanes over one image's plane, added in double per (image, block),
 * then over images in order -- the bits do not depend on the threads; the
 * forward sums x - x[0] (the first image's first pixel of the channel) for
 * a variance without cancellation.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "cpu/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
#define LANES         16

/* acc[0..16) += the lanes of v, in double. */
TARGET_AVX512 static inline void add_lanes(double *acc, __m512 v) {
  __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
  __m512d hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
  _mm512_storeu_pd(acc, _mm512_add_pd(_mm512_loadu_pd(acc), lo));
  _mm512_storeu_pd(acc + 8, _mm512_add_pd(_mm512_loadu_pd(acc + 8), hi));
}

/* ---- forward ------------------------------------------------------------------- */

/* Sums of d = x - shift and d*d over one plane (len vectors) into s1, s2. */
TARGET_AVX512 static void plane_sums(const float *x, int64_t len, __m512 shift, double *s1,
                                     double *s2) {
  __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a;
  for (int64_t i = 0; i < len; i++) {
    __m512 v = _mm512_sub_ps(_mm512_loadu_ps(x + i * LANES), shift);
    if (i & 1)
      b = _mm512_add_ps(b, v), d = _mm512_fmadd_ps(v, v, d);
    else
      a = _mm512_add_ps(a, v), c = _mm512_fmadd_ps(v, v, c);
  }
  add_lanes(s1, _mm512_add_ps(a, b));
  add_lanes(s2, _mm512_add_ps(c, d));
}

/* The 32 doubles of every (image, block) -- then mean and biased variance. */
TARGET_AVX512 static void statistics(const float *x, int64_t N, int64_t CB, int64_t len,
                                     double *part, float *mean, float *var) {
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * CB; p++) {
    double *s = part + p * 2 * LANES;
    for (int i = 0; i < 2 * LANES; i++) s[i] = 0;
    __m512 shift = _mm512_loadu_ps(x + (p % CB) * len * LANES); /* image 0's first pixel */
    plane_sums(x + p * len * LANES, len, shift, s, s + LANES);
  }
  double M = (double)(N * len);
  for (int64_t cb = 0; cb < CB; cb++)
    for (int l = 0; l < LANES; l++) {
      double s1 = 0, s2 = 0;
      for (int64_t n = 0; n < N; n++) {
        const double *s = part + (n * CB + cb) * 2 * LANES;
        s1 += s[l], s2 += s[LANES + l];
      }
      double m = s1 / M, v = s2 / M - m * m;
      mean[cb * LANES + l] = (float)(x[cb * len * LANES + l] + m);
      var[cb * LANES + l] = (float)(v > 0 ? v : 0);
    }
}

/* Per channel: scale = gamma rstd, shift = beta - mean scale (float). */
static void affine(int64_t C, const float *gamma, const float *beta, const float *mean,
                   const float *var, float eps, float *scale, float *shift, float *rstd) {
  for (int64_t c = 0; c < C; c++) {
    rstd[c] = (float)(1.0 / sqrt((double)var[c] + (double)eps));
    scale[c] = gamma[c] * rstd[c];
    shift[c] = beta[c] - mean[c] * scale[c];
  }
}

/* relu(x*scale + shift) with NaN kept (max with 0 returns its second operand). */
TARGET_AVX512 static inline __m512 norm_relu(const float *x, __m512 scale, __m512 shift) {
  return _mm512_max_ps(_mm512_setzero_ps(), _mm512_fmadd_ps(_mm512_loadu_ps(x), scale, shift));
}

TARGET_AVX512 static inline void take(__m512 v, int t, __m512 *best, __m128i *tap) {
  __mmask16 m = _mm512_cmp_ps_mask(v, *best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  *best = _mm512_mask_mov_ps(*best, m, v);
  *tap = _mm_mask_mov_epi8(*tap, m, _mm_set1_epi8((char)t));
}

TARGET_AVX512 static void forward_plane(const float *x, int64_t H, int64_t W, __m512 scale,
                                        __m512 shift, float *y, uint8_t *tap) {
  int64_t OH = H / 2, OW = W / 2;
  for (int64_t oh = 0; oh < OH; oh++)
    for (int64_t ow = 0; ow < OW; ow++) {
      const float *a = x + ((2 * oh) * W + 2 * ow) * LANES, *c = a + W * LANES;
      __m512 best = norm_relu(a, scale, shift);
      __m128i t = _mm_setzero_si128();
      take(norm_relu(a + LANES, scale, shift), 1, &best, &t);
      take(norm_relu(c, scale, shift), 2, &best, &t);
      take(norm_relu(c + LANES, scale, shift), 3, &best, &t);
      int64_t o = (oh * OW + ow) * LANES;
      _mm512_storeu_ps(y + o, best);
      _mm_storeu_si128((__m128i *)(tap + o), t);
    }
}

/* A 64-byte aligned scratch of `bytes`; NULL with the error set. */
static void *scratch(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  void *p = aligned_alloc(64, bytes ? bytes : 64);
  if (!p) cnn_set_error("conv_bn_relu_pool: out of memory for %zu bytes of partial sums", bytes);
  return p;
}

TARGET_AVX512 int cnn_cpu_bn_relu_pool_blocked16_forward(const float *x, int64_t N, int64_t CB,
                                                         int64_t H, int64_t W, const float *gamma,
                                                         const float *beta, float eps, float *mean,
                                                         float *var, float *y, uint8_t *tap) {
  int64_t C = CB * LANES, len = H * W, out = (H / 2) * (W / 2) * LANES;
  double *part = scratch((size_t)(N * CB * 2 * LANES) * sizeof(double));
  float *k = scratch((size_t)(3 * C) * sizeof(float));
  if (!part || !k) return free(part), free(k), -1;
  statistics(x, N, CB, len, part, mean, var);
  float *scale = k, *shift = k + C, *rstd = k + 2 * C;
  affine(C, gamma, beta, mean, var, eps, scale, shift, rstd);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * CB; p++) {
    int64_t cb = p % CB;
    forward_plane(x + p * len * LANES, H, W, _mm512_loadu_ps(scale + cb * LANES),
                  _mm512_loadu_ps(shift + cb * LANES), y + p * out, tap + p * out);
  }
  free(part), free(k);
  return 0;
}

/* ---- backward ------------------------------------------------------------------ */

/* The constants of one channel block for the backward. */
typedef struct {
  __m512 scale, shift; /* of the forward: v = x scale + shift */
  __m512 mean, rstd;
} block_consts;

/* g at tap t of a window: dy where the window chose t and v > 0. */
TARGET_AVX512 static inline __m512 grad_at(const float *x, const block_consts *k, __m512 dy,
                                           __m128i tap, int t) {
  __mmask16 chosen = _mm_cmpeq_epi8_mask(tap, _mm_set1_epi8((char)t));
  __m512 v = _mm512_fmadd_ps(_mm512_loadu_ps(x), k->scale, k->shift);
  __mmask16 live = _mm512_mask_cmp_ps_mask(chosen, v, _mm512_setzero_ps(), _CMP_GT_OQ);
  return _mm512_maskz_mov_ps(live, dy);
}

/* Sums of g and g*xhat over one plane into s (16 each). */
TARGET_AVX512 static void backward_sums(const float *x, const float *dy, const uint8_t *tap,
                                        int64_t H, int64_t W, const block_consts *k, double *s) {
  int64_t OH = H / 2, OW = W / 2;
  __m512 sg = _mm512_setzero_ps(), sgx = sg;
  for (int64_t oh = 0; oh < OH; oh++)
    for (int64_t ow = 0; ow < OW; ow++) {
      int64_t o = (oh * OW + ow) * LANES;
      __m512 d = _mm512_loadu_ps(dy + o);
      __m128i t = _mm_loadu_si128((const __m128i *)(tap + o));
      const float *a = x + ((2 * oh) * W + 2 * ow) * LANES, *c = a + W * LANES;
      const float *at[4] = {a, a + LANES, c, c + LANES};
      for (int q = 0; q < 4; q++) {
        __m512 g = grad_at(at[q], k, d, t, q);
        __m512 xh = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(at[q]), k->mean), k->rstd);
        sg = _mm512_add_ps(sg, g);
        sgx = _mm512_fmadd_ps(g, xh, sgx);
      }
    }
  add_lanes(s, sg);
  add_lanes(s + LANES, sgx);
}

/* dx = A g + B + C (x - mean) over one plane, every element. */
TARGET_AVX512 static void backward_plane(const float *x, const float *dy, const uint8_t *tap,
                                         int64_t H, int64_t W, const block_consts *k, __m512 A,
                                         __m512 B, __m512 Cx, float *dx) {
  int64_t OH = H / 2, OW = W / 2;
  for (int64_t h = 0; h < H; h++)
    for (int64_t w = 0; w < W; w++) {
      int64_t i = (h * W + w) * LANES;
      __m512 g = _mm512_setzero_ps();
      if (h < 2 * OH && w < 2 * OW) {
        int64_t o = ((h / 2) * OW + w / 2) * LANES;
        __m128i t = _mm_loadu_si128((const __m128i *)(tap + o));
        g = grad_at(x + i, k, _mm512_loadu_ps(dy + o), t, (int)((h % 2) * 2 + w % 2));
      }
      __m512 r = _mm512_fmadd_ps(Cx, _mm512_sub_ps(_mm512_loadu_ps(x + i), k->mean), B);
      _mm512_storeu_ps(dx + i, _mm512_fmadd_ps(A, g, r));
    }
}

TARGET_AVX512 static block_consts consts_of(const float *scale, const float *shift,
                                            const float *mean, const float *rstd, int64_t cb) {
  block_consts k = {_mm512_loadu_ps(scale + cb * LANES), _mm512_loadu_ps(shift + cb * LANES),
                    _mm512_loadu_ps(mean + cb * LANES), _mm512_loadu_ps(rstd + cb * LANES)};
  return k;
}

TARGET_AVX512 int cnn_cpu_bn_relu_pool_blocked16_backward(const float *x, const float *dy,
                                                          const uint8_t *tap, int64_t N, int64_t CB,
                                                          int64_t H, int64_t W, const float *gamma,
                                                          const float *beta, const float *mean,
                                                          const float *var, float eps, float *dx,
                                                          float *dgamma, float *dbeta) {
  int64_t C = CB * LANES, len = H * W, out = (H / 2) * (W / 2) * LANES;
  double *part = scratch((size_t)(N * CB * 2 * LANES) * sizeof(double));
  float *k = scratch((size_t)(6 * C) * sizeof(float));
  if (!part || !k) return free(part), free(k), -1;
  float *scale = k, *shift = k + C, *rstd = k + 2 * C, *A = k + 3 * C, *B = k + 4 * C;
  float *Cx = k + 5 * C;
  affine(C, gamma, beta, mean, var, eps, scale, shift, rstd);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * CB; p++) {
    double *s = part + p * 2 * LANES;
    for (int i = 0; i < 2 * LANES; i++) s[i] = 0;
    block_consts kc = consts_of(scale, shift, mean, rstd, p % CB);
    backward_sums(x + p * len * LANES, dy + p * out, tap + p * out, H, W, &kc, s);
  }
  double M = (double)(N * len);
  for (int64_t c = 0; c < C; c++) {
    int64_t cb = c / LANES, l = c % LANES;
    double sg = 0, sgx = 0;
    for (int64_t n = 0; n < N; n++) {
      const double *s = part + (n * CB + cb) * 2 * LANES;
      sg += s[l], sgx += s[LANES + l];
    }
    dbeta[c] = (float)sg, dgamma[c] = (float)sgx;
    double a = (double)gamma[c] * rstd[c], cx = -a * rstd[c] * sgx / M;
    A[c] = (float)a, Cx[c] = (float)cx, B[c] = (float)(-a * sg / M);
  }
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * CB; p++) {
    int64_t cb = p % CB;
    block_consts kc = consts_of(scale, shift, mean, rstd, cb);
    backward_plane(x + p * len * LANES, dy + p * out, tap + p * out, H, W, &kc,
                   _mm512_loadu_ps(A + cb * LANES), _mm512_loadu_ps(B + cb * LANES),
                   _mm512_loadu_ps(Cx + cb * LANES), dx + p * len * LANES);
  }
  free(part), free(k);
  return 0;
}

#else /* not x86-64 GCC/Clang: cnn_cpu_use_avx512() is 0, never called */

int cnn_cpu_bn_relu_pool_blocked16_forward(const float *x, int64_t N, int64_t CB, int64_t H,
                                           int64_t W, const float *gamma, const float *beta,
                                           float eps, float *mean, float *var, float *y,
                                           uint8_t *tap) {
  (void)x, (void)N, (void)CB, (void)H, (void)W, (void)gamma, (void)beta, (void)eps;
  (void)mean, (void)var, (void)y, (void)tap;
  cnn_set_error("conv_bn_relu_pool: the AVX-512 path is not built here");
  return -1;
}

int cnn_cpu_bn_relu_pool_blocked16_backward(const float *x, const float *dy, const uint8_t *tap,
                                            int64_t N, int64_t CB, int64_t H, int64_t W,
                                            const float *gamma, const float *beta,
                                            const float *mean, const float *var, float eps,
                                            float *dx, float *dgamma, float *dbeta) {
  (void)x, (void)dy, (void)tap, (void)N, (void)CB, (void)H, (void)W, (void)gamma, (void)beta;
  (void)mean, (void)var, (void)eps, (void)dx, (void)dgamma, (void)dbeta;
  cnn_set_error("conv_bn_relu_pool: the AVX-512 path is not built here");
  return -1;
}

#endif
