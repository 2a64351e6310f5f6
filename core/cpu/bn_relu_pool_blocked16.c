/*
 * bn_relu_pool_blocked16.c -- training batch norm, ReLU and the 2x2
 * stride-2 max pool as one pass over oneDNN's nChw16c or NHWC layout,
 * forward and backward, with AVX-512: the tail of the training block conv
 * -> batch norm -> ReLU -> max pool (conv_block_onednn.c) on whole channel
 * blocks (a vector is 16 channels of one pixel in either layout).
 * The block's tensors are float32, or bfloat16 under autocast (x, y, dy,
 * dx; the arithmetic is float32 and each result is rounded to nearest
 * even once, as oneDNN's bfloat16 batch norm and pooling do: the pool
 * compares the rounded values, so ties fall as they do there).
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
 * (and max_pool_2x2.c's): of the window's taps (0,0), (0,1), (1,0),
 * (1,1) a later one wins when greater or NaN.  Sums:
 * float lanes over one image's plane, added in double per (image, block),
 * then over images in order -- the bits do not depend on the threads; the
 * forward sums x - x[0] (the first image's first pixel of the channel) for
 * a variance without cancellation.
 *
 * The pooled edge in NCHW (layout CNN_B16_NCHW_EDGE, float32): x, dx and
 * the taps stay nChw16c, but y is written and dy read as the caller's
 * N x C x H/2 x W/2 array -- a vector of 16 channels of one pixel
 * scattered to (gathered from) 16 planes -- so that the block needs no
 * reorder of its output or of its output's gradient (on the example
 * network's two blocks, four reorders a step, ~0.5 ms of 8).  The
 * backward's first pass gathers dy once per pooled pixel and leaves an
 * nChw16c copy for the second, which reads each dy vector four times.
 *
 * The weight gradient in the second pass (backward_dw, float32): where
 * nothing wants the block's input gradient (a network's first block) and
 * its convolution is small (stride 1, at most 27 taps C x R x S), the
 * second pass folds each dx vector -- batch norm's input gradient, 16
 * output channels of one pixel -- into the convolution's weight and bias
 * gradients (dw[k, c, r, s] += dx[k] x[c, h + r - pt, w + s - pl], per
 * plane in registers, the planes' sums added in double in order) instead
 * of writing it for oneDNN's weight-gradient primitive to read back: on
 * the example network's first block (64 x 32 x 28 x 28) 6.4 MB neither
 * written nor read and one primitive fewer.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

#include "cpu/bn_relu_pool_shared.h"
#include "cpu/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
#define LANES         16

/* An array of the block's elements: float32, or bfloat16 (bf16 = 1);
 * indices count elements; pix is the distance of two pixels of a channel
 * (16 in nChw16c, C in NHWC, 1 in NCHW), lane that of two channels of a
 * pixel (1, or in NCHW the plane's size: float32 only, edge_ld/edge_st). */
typedef struct {
  void *p;
  int bf16;
  int64_t pix, lane;
} arr;

/* Where the plane of image n, channel block cb starts (elements). */
static int64_t plane_at(int nhwc, int64_t n, int64_t cb, int64_t CB, int64_t len) {
  return nhwc ? n * len * CB * LANES + cb * LANES : (n * CB + cb) * len * LANES;
}

/* float32 -> bfloat16 bits, to nearest even; NaNs stay (quiet) NaNs. */
TARGET_AVX512 static inline __m256i to_bf16(__m512 v) {
  __m512i b = _mm512_castps_si512(v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
  __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(b, _mm512_set1_epi32(0x00400000)));
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}

TARGET_AVX512 static inline __m512 from_bf16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

TARGET_AVX512 static inline __m512 ld(arr a, int64_t i) {
  if (a.bf16) return from_bf16(_mm256_loadu_si256((const __m256i *)((const uint16_t *)a.p + i)));
  return _mm512_loadu_ps((const float *)a.p + i);
}

TARGET_AVX512 static inline void st(arr a, int64_t i, __m512 v) {
  if (a.bf16)
    _mm256_storeu_si256((__m256i *)((uint16_t *)a.p + i), to_bf16(v));
  else
    _mm512_storeu_ps((float *)a.p + i, v);
}

/* a's elements from i on. */
static inline arr from(arr a, int64_t i) {
  arr b = {(char *)a.p + i * (a.bf16 ? 2 : 4), a.bf16, a.pix, a.lane};
  return b;
}

/* r[i] lane j becomes r[j] lane i (a 16 x 16 transpose in registers). */
TARGET_AVX512 static void transpose16(__m512 r[LANES]) {
  __m512 t[LANES], u[LANES];
  for (int i = 0; i < LANES; i += 2) { /* 2 x 2 blocks of single floats */
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < LANES; i += 4) { /* of pairs */
    u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < LANES; i += 8) /* of 128-bit quarters, twice */
    for (int j = 0; j < 4; j++) {
      t[i + j] = _mm512_shuffle_f32x4(u[i + j], u[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_f32x4(u[i + j], u[i + j + 4], 0xDD);
    }
  for (int j = 0; j < 8; j++) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xDD);
  }
}

/* An NCHW edge (a.lane != 1) written and read 16 pixels at a time: v[j]
 * the 16 channels of pixel px0 + j, j < n; the planes' rows of 16 pixels
 * through a transpose in registers (16 scattered or gathered floats a
 * pixel cost twice as much alone: bench figures in the README). */
TARGET_AVX512 static void edge_store_run(arr a, int64_t px0, int n, __m512 v[LANES]) {
  for (int j = n; j < LANES; j++) v[j] = _mm512_setzero_ps();
  transpose16(v);
  __mmask16 m = (__mmask16)((1u << n) - 1);
  for (int l = 0; l < LANES; l++) _mm512_mask_storeu_ps((float *)a.p + l * a.lane + px0, m, v[l]);
}

TARGET_AVX512 static void edge_load_run(arr a, int64_t px0, int n, __m512 v[LANES]) {
  __mmask16 m = (__mmask16)((1u << n) - 1);
  for (int l = 0; l < LANES; l++)
    v[l] = _mm512_maskz_loadu_ps(m, (const float *)a.p + l * a.lane + px0);
  transpose16(v);
}

/* acc[0..16) += the lanes of v, in double. */
TARGET_AVX512 static inline void add_lanes(double *acc, __m512 v) {
  __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
  __m512d hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
  _mm512_storeu_pd(acc, _mm512_add_pd(_mm512_loadu_pd(acc), lo));
  _mm512_storeu_pd(acc + 8, _mm512_add_pd(_mm512_loadu_pd(acc + 8), hi));
}

/* ---- forward ------------------------------------------------------------------- */

/* Sums of d = x - shift and d*d over one plane (len vectors) into s1, s2. */
TARGET_AVX512 static void plane_sums(arr x, int64_t len, __m512 shift, double *s1, double *s2) {
  __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a;
  for (int64_t i = 0; i < len; i++) {
    __m512 v = _mm512_sub_ps(ld(x, i * x.pix), shift);
    if (i & 1)
      b = _mm512_add_ps(b, v), d = _mm512_fmadd_ps(v, v, d);
    else
      a = _mm512_add_ps(a, v), c = _mm512_fmadd_ps(v, v, c);
  }
  add_lanes(s1, _mm512_add_ps(a, b));
  add_lanes(s2, _mm512_add_ps(c, d));
}

/* The 32 doubles of plane p = (image, block): sums shifted by image 0's first
 * pixel. Vector values stay inside: OpenMP's outlined loop bodies do not
 * inherit the AVX-512 target, so no __m512 crosses into or out of them. */
TARGET_AVX512 static void plane_statistics(arr x, int nhwc, int64_t p, int64_t CB, int64_t len,
                                           double *s) {
  for (int i = 0; i < 2 * LANES; i++) s[i] = 0;
  __m512 shift = ld(x, plane_at(nhwc, 0, p % CB, CB, len));
  plane_sums(from(x, plane_at(nhwc, p / CB, p % CB, CB, len)), len, shift, s, s + LANES);
}

/* The 32 doubles of every (image, block) -- then mean and biased variance;
 * first: C floats of scratch. */
TARGET_AVX512 static void statistics(arr x, int nhwc, int64_t N, int64_t CB, int64_t len,
                                     double *part, float *first, float *mean, float *var) {
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * CB; p++) plane_statistics(x, nhwc, p, CB, len, part + p * 2 * LANES);
  for (int64_t cb = 0; cb < CB; cb++)
    _mm512_storeu_ps(first + cb * LANES, ld(x, plane_at(nhwc, 0, cb, CB, len)));
  cnn_brp_statistics(part, first, N, CB, LANES, (double)(N * len), mean, var);
}

/* relu(x*scale + shift) with NaN kept (max with 0 returns its second
 * operand), rounded to bfloat16 for a bfloat16 block. */
TARGET_AVX512 static inline __m512 norm_relu(arr x, int64_t i, __m512 scale, __m512 shift) {
  __m512 v = _mm512_max_ps(_mm512_setzero_ps(), _mm512_fmadd_ps(ld(x, i), scale, shift));
  return x.bf16 ? from_bf16(to_bf16(v)) : v;
}

TARGET_AVX512 static inline void take(__m512 v, int t, __m512 *best, __m128i *tap) {
  __mmask16 m = _mm512_cmp_ps_mask(v, *best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  *best = _mm512_mask_mov_ps(*best, m, v);
  *tap = _mm_mask_mov_epi8(*tap, m, _mm_set1_epi8((char)t));
}

/* One plane: y and tap at its pooled pixels (tap in x's layout). */
TARGET_AVX512 static void forward_plane(arr x, int64_t H, int64_t W, const float *scale16,
                                        const float *shift16, arr y, uint8_t *tap) {
  int64_t OH = H / 2, OW = W / 2;
  __m512 scale = _mm512_loadu_ps(scale16), shift = _mm512_loadu_ps(shift16);
  __m512 run[LANES]; /* an NCHW edge's pixels since the last store */
  int nrun = 0;
  for (int64_t oh = 0; oh < OH; oh++)
    for (int64_t ow = 0; ow < OW; ow++) {
      int64_t a = ((2 * oh) * W + 2 * ow) * x.pix, c = a + W * x.pix;
      __m512 best = norm_relu(x, a, scale, shift);
      __m128i t = _mm_setzero_si128();
      take(norm_relu(x, a + x.pix, scale, shift), 1, &best, &t);
      take(norm_relu(x, c, scale, shift), 2, &best, &t);
      take(norm_relu(x, c + x.pix, scale, shift), 3, &best, &t);
      int64_t px = oh * OW + ow;
      _mm_storeu_si128((__m128i *)(tap + px * x.pix), t);
      if (y.lane == 1) {
        st(y, px * y.pix, best);
        continue;
      }
      run[nrun++] = best;
      if (nrun == LANES) edge_store_run(y, px + 1 - LANES, LANES, run), nrun = 0;
    }
  if (nrun) edge_store_run(y, OH * OW - nrun, nrun, run);
}

/* The pooled edge (y or dy) of the layout at p. */
static arr edge_of(void *p, int layout, int bf16, int64_t pix, int64_t olen) {
  arr a = {p, bf16, pix, 1};
  if (layout == CNN_B16_NCHW_EDGE) a.pix = 1, a.lane = olen;
  return a;
}

TARGET_AVX512 int cnn_cpu_bn_relu_pool_blocked16_forward(const void *xp, int bf16, int layout,
                                                         int64_t N, int64_t CB, int64_t H,
                                                         int64_t W, const float *gamma,
                                                         const float *beta, float eps, float *mean,
                                                         float *var, void *yp, uint8_t *tap) {
  int nhwc = layout == CNN_B16_NHWC;
  int64_t pix = nhwc ? CB * LANES : LANES;
  int64_t C = CB * LANES, len = H * W, olen = (H / 2) * (W / 2);
  if (cnn_brp_check_layout(layout, bf16, 1, olen, LANES)) return -1;
  arr x = {(void *)xp, bf16, pix, 1}, y = edge_of(yp, layout, bf16, pix, olen);
  double *part = cnn_brp_scratch((size_t)(N * CB * 2 * LANES) * sizeof(double));
  float *k = cnn_brp_scratch((size_t)(3 * C) * sizeof(float));
  if (!part || !k) return free(part), free(k), -1;
  statistics(x, nhwc, N, CB, len, part, k, mean, var);
  float *scale = k, *shift = k + C, *rstd = k + 2 * C;
  cnn_brp_affine(C, gamma, beta, mean, var, eps, scale, shift, rstd);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * CB; p++) {
    int64_t n = p / CB, cb = p % CB, o = plane_at(nhwc, n, cb, CB, olen);
    forward_plane(from(x, plane_at(nhwc, n, cb, CB, len)), H, W, scale + cb * LANES,
                  shift + cb * LANES, from(y, o), tap + o);
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
TARGET_AVX512 static inline __m512 grad_at(__m512 x, const block_consts *k, __m512 dy, __m128i tap,
                                           int t) {
  __mmask16 chosen = _mm_cmpeq_epi8_mask(tap, _mm_set1_epi8((char)t));
  __m512 v = _mm512_fmadd_ps(x, k->scale, k->shift);
  __mmask16 live = _mm512_mask_cmp_ps_mask(chosen, v, _mm512_setzero_ps(), _CMP_GT_OQ);
  return _mm512_maskz_mov_ps(live, dy);
}

/* Sums of g and g*xhat over one plane into s (16 each); with dy in NCHW
 * planes, its vectors copied into dyc in x's layout (else dyc.p NULL). */
TARGET_AVX512 static void backward_sums(arr x, arr dy, arr dyc, const uint8_t *tap, int64_t H,
                                        int64_t W, const block_consts *k, double *s) {
  int64_t OH = H / 2, OW = W / 2;
  __m512 sg = _mm512_setzero_ps(), sgx = sg;
  __m512 run[LANES]; /* an NCHW edge's next 16 pixels */
  for (int64_t oh = 0; oh < OH; oh++)
    for (int64_t ow = 0; ow < OW; ow++) {
      int64_t px = oh * OW + ow, left = OH * OW - px;
      if (dy.lane != 1 && px % LANES == 0)
        edge_load_run(dy, px, left < LANES ? (int)left : LANES, run);
      __m512 d = dy.lane == 1 ? ld(dy, px * dy.pix) : run[px % LANES];
      if (dyc.p) st(dyc, px * x.pix, d);
      __m128i t = _mm_loadu_si128((const __m128i *)(tap + px * x.pix));
      int64_t a = ((2 * oh) * W + 2 * ow) * x.pix, c = a + W * x.pix;
      int64_t at[4] = {a, a + x.pix, c, c + x.pix};
      for (int q = 0; q < 4; q++) {
        __m512 xv = ld(x, at[q]);
        __m512 g = grad_at(xv, k, d, t, q);
        __m512 xh = _mm512_mul_ps(_mm512_sub_ps(xv, k->mean), k->rstd);
        sg = _mm512_add_ps(sg, g);
        sgx = _mm512_fmadd_ps(g, xh, sgx);
      }
    }
  add_lanes(s, sg);
  add_lanes(s + LANES, sgx);
}

/* The second pass's constants of a channel block: dx = A g + B + C (x - mean). */
typedef struct {
  __m512 A, B, Cx;
} dx_consts;

TARGET_AVX512 static dx_consts dx_consts_of(const float *A16, const float *B16, const float *C16) {
  dx_consts d = {_mm512_loadu_ps(A16), _mm512_loadu_ps(B16), _mm512_loadu_ps(C16)};
  return d;
}

/* Batch norm's input gradient at pixel (h, w) of a plane (x, dy and tap
 * in the block's layout); g = 0 outside every window (an odd edge). */
TARGET_AVX512 static inline __m512 dx_at(arr x, arr dy, const uint8_t *tap, int64_t h, int64_t w,
                                         int64_t H, int64_t W, const block_consts *k,
                                         const dx_consts *d) {
  int64_t OH = H / 2, OW = W / 2;
  __m512 xv = ld(x, (h * W + w) * x.pix), g = _mm512_setzero_ps();
  if (h < 2 * OH && w < 2 * OW) {
    int64_t o = ((h / 2) * OW + w / 2) * dy.pix;
    __m128i t = _mm_loadu_si128((const __m128i *)(tap + o));
    g = grad_at(xv, k, ld(dy, o), t, (int)((h % 2) * 2 + w % 2));
  }
  __m512 r = _mm512_fmadd_ps(d->Cx, _mm512_sub_ps(xv, k->mean), d->B);
  return _mm512_fmadd_ps(d->A, g, r);
}

/* dx = A g + B + C (x - mean) over one plane, every element. */
TARGET_AVX512 static void backward_plane(arr x, arr dy, const uint8_t *tap, int64_t H, int64_t W,
                                         const block_consts *k, const float *A16, const float *B16,
                                         const float *C16, arr dx) {
  dx_consts d = dx_consts_of(A16, B16, C16);
  for (int64_t h = 0; h < H; h++)
    for (int64_t w = 0; w < W; w++)
      st(dx, (h * W + w) * x.pix, dx_at(x, dy, tap, h, w, H, W, k, &d));
}

TARGET_AVX512 static void consts_of(const float *scale, const float *shift, const float *mean,
                                    const float *rstd, int64_t cb, block_consts *k) {
  k->scale = _mm512_loadu_ps(scale + cb * LANES), k->shift = _mm512_loadu_ps(shift + cb * LANES);
  k->mean = _mm512_loadu_ps(mean + cb * LANES), k->rstd = _mm512_loadu_ps(rstd + cb * LANES);
}

/* What the backward's two passes share: the block's arrays and shape,
 * and per channel scale, shift, rstd (the forward's) and A, B, Cx (dx's). */
typedef struct {
  arr x, dy;
  const uint8_t *tap;
  int layout, nhwc; /* nhwc: layout == CNN_B16_NHWC */
  int64_t N, CB, H, W;
  const float *mean;
  float *k; /* 6 x C: scale, shift, rstd, A, B, Cx */
} bwd;

static float *bwd_k(const bwd *b, int i) { return b->k + i * b->CB * LANES; }

/* The plane of image n, channel block cb: where it starts in x (and dx),
 * and in dy and tap. */
static int64_t x_plane(const bwd *b, int64_t n, int64_t cb) {
  return plane_at(b->nhwc, n, cb, b->CB, b->H * b->W);
}
static int64_t out_plane(const bwd *b, int64_t n, int64_t cb) {
  return plane_at(b->nhwc, n, cb, b->CB, (b->H / 2) * (b->W / 2));
}

/* The first pass (dgamma, dbeta, then A, B, Cx); with an NCHW edge, dy is
 * then its nChw16c copy.  0, or -1 with the error set. */
TARGET_AVX512 static int backward_first(bwd *b, const void *dyp, float *dy_copy, const float *gamma,
                                        const float *beta, const float *var, float eps,
                                        float *dgamma, float *dbeta) {
  int layout = b->layout, bf16 = b->x.bf16;
  int64_t N = b->N, CB = b->CB, C = CB * LANES, len = b->H * b->W, olen = (b->H / 2) * (b->W / 2);
  if (cnn_brp_check_layout(layout, bf16, 1, olen, LANES)) return -1;
  if (layout == CNN_B16_NCHW_EDGE && !dy_copy)
    return cnn_set_error("conv_bn_relu_pool: the NCHW edge's backward needs dy's copy"), -1;
  arr dyc = {layout == CNN_B16_NCHW_EDGE ? dy_copy : NULL, bf16, b->x.pix, 1};
  b->dy = edge_of((void *)dyp, layout, bf16, b->x.pix, olen);
  double *part = cnn_brp_scratch((size_t)(N * CB * 2 * LANES) * sizeof(double));
  b->k = cnn_brp_scratch((size_t)(6 * C) * sizeof(float));
  if (!part || !b->k) return free(part), free(b->k), b->k = NULL, -1;
  float *scale = bwd_k(b, 0), *shift = bwd_k(b, 1), *rstd = bwd_k(b, 2);
  cnn_brp_affine(C, gamma, beta, b->mean, var, eps, scale, shift, rstd);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * CB; p++) {
    double *s = part + p * 2 * LANES;
    for (int i = 0; i < 2 * LANES; i++) s[i] = 0;
    int64_t n = p / CB, cb = p % CB, o = out_plane(b, n, cb);
    block_consts kc;
    consts_of(scale, shift, b->mean, rstd, cb, &kc);
    arr dyc_p = dyc.p ? from(dyc, o) : dyc;
    backward_sums(from(b->x, x_plane(b, n, cb)), from(b->dy, o), dyc_p, b->tap + o, b->H, b->W, &kc,
                  s);
  }
  cnn_brp_backward_consts(part, N, CB, LANES, (double)(N * len), gamma, rstd, dgamma, dbeta,
                          bwd_k(b, 3), bwd_k(b, 4), bwd_k(b, 5));
  free(part);
  if (dyc.p) b->dy = dyc;
  return 0;
}

static bwd bwd_of(const void *xp, const uint8_t *tap, int bf16, int layout, int64_t N, int64_t CB,
                  int64_t H, int64_t W, const float *mean) {
  int nhwc = layout == CNN_B16_NHWC;
  bwd b = {.x = {(void *)xp, bf16, nhwc ? CB * LANES : LANES, 1},
           .tap = tap,
           .layout = layout,
           .nhwc = nhwc,
           .N = N,
           .CB = CB,
           .H = H,
           .W = W,
           .mean = mean};
  return b;
}

TARGET_AVX512 int cnn_cpu_bn_relu_pool_blocked16_backward(
    const void *xp, const void *dyp, const uint8_t *tap, int bf16, int layout, int64_t N,
    int64_t CB, int64_t H, int64_t W, const float *gamma, const float *beta, const float *mean,
    const float *var, float eps, void *dxp, float *dgamma, float *dbeta, float *dy_copy) {
  bwd b = bwd_of(xp, tap, bf16, layout, N, CB, H, W, mean);
  if (backward_first(&b, dyp, dy_copy, gamma, beta, var, eps, dgamma, dbeta)) return -1;
  arr dx = {dxp, bf16, b.x.pix, 1};
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * CB; p++) {
    int64_t n = p / CB, cb = p % CB, o = out_plane(&b, n, cb), i = x_plane(&b, n, cb);
    block_consts kc;
    consts_of(bwd_k(&b, 0), bwd_k(&b, 1), mean, bwd_k(&b, 2), cb, &kc);
    backward_plane(from(b.x, i), from(b.dy, o), tap + o, H, W, &kc, bwd_k(&b, 3) + cb * LANES,
                   bwd_k(&b, 4) + cb * LANES, bwd_k(&b, 5) + cb * LANES, from(dx, i));
  }
  free(b.k);
  return 0;
}

/* ---- backward into the convolution's weight gradient ------------------------------ */

/* Over one plane: acc[t] (t = (c R + r) S + s) = sum of dx x_tap, and
 * acc[C R S] = sum of dx -- dx batch norm's input gradient, never stored.
 * Inlined with literal C, R, S for the common kernels (1 x 3 x 3, 3 x 3 x
 * 3), whose sums then stay in registers: with a run-time count they lived
 * in memory, and the pass took 1.7x the plain backward. */
TARGET_AVX512 static inline __attribute__((always_inline)) void
weight_plane_body(arr x, arr dy, const uint8_t *tap, int64_t H, int64_t W, const block_consts *k,
                  const dx_consts *d, int64_t C, int64_t R, int64_t S, const float *pad,
                  float *acc) {
  int64_t taps = C * R * S, PH = H + R - 1, PW = W + S - 1;
  __m512 a[CNN_B16_MAX_TAPS + 1];
  for (int64_t t = 0; t <= taps; t++) a[t] = _mm512_setzero_ps();
  for (int64_t h = 0; h < H; h++)
    for (int64_t w = 0; w < W; w++) {
      __m512 v = dx_at(x, dy, tap, h, w, H, W, k, d);
      a[taps] = _mm512_add_ps(a[taps], v);
      for (int64_t c = 0; c < C; c++)
        for (int64_t r = 0; r < R; r++) {
          const float *row = pad + (c * PH + h + r) * PW + w;
          for (int64_t q = 0; q < S; q++)
            a[(c * R + r) * S + q] =
                _mm512_fmadd_ps(v, _mm512_set1_ps(row[q]), a[(c * R + r) * S + q]);
        }
    }
  for (int64_t t = 0; t <= taps; t++) _mm512_storeu_ps(acc + t * LANES, a[t]);
}

TARGET_AVX512 static void weight_plane(arr x, arr dy, const uint8_t *tap, int64_t H, int64_t W,
                                       const block_consts *k, const dx_consts *d,
                                       const cnn_b16_conv_src *src, const float *pad, float *acc) {
  if (src->C == 1 && src->R == 3 && src->S == 3)
    weight_plane_body(x, dy, tap, H, W, k, d, 1, 3, 3, pad, acc);
  else if (src->C == 3 && src->R == 3 && src->S == 3)
    weight_plane_body(x, dy, tap, H, W, k, d, 3, 3, 3, pad, acc);
  else
    weight_plane_body(x, dy, tap, H, W, k, d, src->C, src->R, src->S, pad, acc);
}

TARGET_AVX512 int cnn_cpu_bn_relu_pool_blocked16_backward_dw(
    const void *xp, const void *dyp, const uint8_t *tap, int layout, int64_t N, int64_t CB,
    int64_t H, int64_t W, const float *gamma, const float *beta, const float *mean,
    const float *var, float eps, const cnn_b16_conv_src *src, float *dw, float *db, float *dgamma,
    float *dbeta, float *dy_copy) {
  int64_t taps = src->C * src->R * src->S;
  if (src->C < 1 || src->R < 1 || src->S < 1 || taps > CNN_B16_MAX_TAPS)
    return cnn_set_error("conv_bn_relu_pool: the weight gradient in the backward takes a "
                         "stride-1 convolution of at most %d taps, got %lld",
                         CNN_B16_MAX_TAPS, (long long)taps),
           -1;
  bwd b = bwd_of(xp, tap, 0, layout, N, CB, H, W, mean);
  if (backward_first(&b, dyp, dy_copy, gamma, beta, var, eps, dgamma, dbeta)) return -1;
  size_t pad_floats = (size_t)(src->C * (H + src->R - 1) * (W + src->S - 1));
  float *acc = cnn_brp_scratch((size_t)(N * CB * (taps + 1) * LANES) * sizeof(float));
  int failed = !acc;
#pragma omp parallel reduction(| : failed)
  {
    float *pad = acc ? malloc(pad_floats * sizeof(float)) : NULL;
    int64_t padded = -1; /* the image pad holds */
    failed = !pad;
#pragma omp for schedule(static)
    for (int64_t p = 0; p < N * CB; p++) {
      if (!pad) continue;
      int64_t n = p / CB, cb = p % CB, o = out_plane(&b, n, cb);
      if (n != padded) cnn_brp_pad_image(src, n, H, W, pad), padded = n;
      block_consts kc;
      consts_of(bwd_k(&b, 0), bwd_k(&b, 1), mean, bwd_k(&b, 2), cb, &kc);
      dx_consts d = dx_consts_of(bwd_k(&b, 3) + cb * LANES, bwd_k(&b, 4) + cb * LANES,
                                 bwd_k(&b, 5) + cb * LANES);
      weight_plane(from(b.x, x_plane(&b, n, cb)), from(b.dy, o), tap + o, H, W, &kc, &d, src, pad,
                   acc + p * (taps + 1) * LANES);
    }
    free(pad);
  }
  if (!failed) cnn_brp_weight_sums(acc, N, CB, LANES, taps, dw, db);
  free(acc), free(b.k);
  if (failed) cnn_set_error("conv_bn_relu_pool: out of memory for the weight gradient's sums");
  return failed ? -1 : 0;
}

#else /* not x86-64 GCC/Clang: cnn_cpu_use_avx512() is 0, never called */

int cnn_cpu_bn_relu_pool_blocked16_forward(const void *x, int bf16, int layout, int64_t N,
                                           int64_t CB, int64_t H, int64_t W, const float *gamma,
                                           const float *beta, float eps, float *mean, float *var,
                                           void *y, uint8_t *tap) {
  (void)x, (void)bf16, (void)layout, (void)N, (void)CB, (void)H, (void)W, (void)gamma, (void)beta,
      (void)eps;
  (void)mean, (void)var, (void)y, (void)tap;
  cnn_set_error("conv_bn_relu_pool: the AVX-512 path is not built here");
  return -1;
}

int cnn_cpu_bn_relu_pool_blocked16_backward(const void *x, const void *dy, const uint8_t *tap,
                                            int bf16, int layout, int64_t N, int64_t CB, int64_t H,
                                            int64_t W, const float *gamma, const float *beta,
                                            const float *mean, const float *var, float eps,
                                            void *dx, float *dgamma, float *dbeta, float *dy_copy) {
  (void)x, (void)bf16, (void)layout, (void)dy_copy, (void)dy, (void)tap, (void)N, (void)CB, (void)H,
      (void)W, (void)gamma, (void)beta;
  (void)mean, (void)var, (void)eps, (void)dx, (void)dgamma, (void)dbeta;
  cnn_set_error("conv_bn_relu_pool: the AVX-512 path is not built here");
  return -1;
}

int cnn_cpu_bn_relu_pool_blocked16_backward_dw(const void *x, const void *dy, const uint8_t *tap,
                                               int layout, int64_t N, int64_t CB, int64_t H,
                                               int64_t W, const float *gamma, const float *beta,
                                               const float *mean, const float *var, float eps,
                                               const cnn_b16_conv_src *src, float *dw, float *db,
                                               float *dgamma, float *dbeta, float *dy_copy) {
  (void)x, (void)dy, (void)tap, (void)layout, (void)N, (void)CB, (void)H, (void)W, (void)gamma;
  (void)beta, (void)mean, (void)var, (void)eps, (void)src, (void)dw, (void)db, (void)dgamma;
  (void)dbeta, (void)dy_copy;
  cnn_set_error("conv_bn_relu_pool: the AVX-512 path is not built here");
  return -1;
}

#endif
