/*
 * bn_relu_pool_blocked8.c -- training batch norm, ReLU and the 2x2
 * stride-2 max pool as one pass over oneDNN's nChw8c (or NHWC) layout,
 * forward and backward, with AVX2 + FMA: what an AVX2-only CPU runs in the
 * conv block (conv_block_onednn.c), where oneDNN lays the convolution's
 * output out in blocks of 8 channels.  The same algorithm, layouts and
 * bits of its sums as bn_relu_pool_blocked16.c (AVX-512, 16 channels a
 * vector), whose header comment explains them; float32 only (oneDNN 2.6
 * has no bfloat16 convolution on AVX2, so the block never asks).
 *
 * Why a kernel of our own here too: on an AVX2 Zen 3 (2 threads) oneDNN's
 * jit:avx2 pooling took 3.1 ms forward and 2.3 ms backward on the example
 * network's first block (64 x 32 x 28 x 28, 6.4 MB), its batch norm 0.9
 * and 1.2 ms, and the first block's weight gradient went through a 0.9 ms
 * reorder of batch norm's input gradient to NCHW and a 2.5 ms GEMM-based
 * primitive: a third of the step.  Here: forward = statistics, then y and
 * the taps from x alone; backward = dgamma/dbeta, then dx (or, where
 * nothing wants dx, the convolution's weight and bias gradients, 6.4 MB
 * neither written nor read); the pooled edge written and read as the
 * caller's NCHW arrays through 8 x 8 transposes in registers.
 *
 * The window's tap lives in a vector as one int32 per lane and in memory
 * as one byte per output, in the blocked layout as the AVX-512 kernel
 * keeps it.
 *
 * The two kernels are twins by design -- one algorithm in each ISA's
 * intrinsics -- and share their scalar parts (bn_relu_pool_shared.c).
 * One body over a vector-width layer would remove the rest of the
 * likeness; it was not done here because this file was written on an
 * AVX2-only machine, where the AVX-512 side cannot run to be checked.
 */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

#include "cpu/bn_relu_pool_shared.h"
#include "cpu/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define TARGET_AVX2 __attribute__((target("avx2,fma")))
#define LANES       8

/* A float32 array of the block: pix is the distance of two pixels of a
 * channel (8 in nChw8c, C in NHWC, 1 in NCHW), lane that of two channels
 * of a pixel (1, or in NCHW the plane's size). */
typedef struct {
  float *p;
  int64_t pix, lane;
} arr;

static int64_t plane_at(int nhwc, int64_t n, int64_t cb, int64_t CB, int64_t len) {
  return nhwc ? n * len * CB * LANES + cb * LANES : (n * CB + cb) * len * LANES;
}

static inline arr from(arr a, int64_t i) {
  arr b = {a.p + i, a.pix, a.lane};
  return b;
}

TARGET_AVX2 static inline __m256 ld(arr a, int64_t i) { return _mm256_loadu_ps(a.p + i); }
TARGET_AVX2 static inline void st(arr a, int64_t i, __m256 v) { _mm256_storeu_ps(a.p + i, v); }

/* The taps of 8 outputs: bytes in memory, int32 lanes in a register. */
TARGET_AVX2 static inline __m256i tap_load(const uint8_t *p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

TARGET_AVX2 static inline void tap_store(uint8_t *p, __m256i t) {
  __m128i lo = _mm256_castsi256_si128(t), hi = _mm256_extracti128_si256(t, 1);
  __m128i w = _mm_packus_epi32(lo, hi); /* 8 x u16 */
  _mm_storel_epi64((__m128i *)p, _mm_packus_epi16(w, w));
}

/* r[i] lane j becomes r[j] lane i (an 8 x 8 transpose in registers). */
TARGET_AVX2 static void transpose8(__m256 r[LANES]) {
  __m256 t[LANES], u[LANES];
  for (int i = 0; i < LANES; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < LANES; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int j = 0; j < 4; j++) {
    r[j] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x20);
    r[j + 4] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x31);
  }
}

/* The first n of 8 lanes set (a maskload/maskstore mask). */
TARGET_AVX2 static inline __m256i first_lanes(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* An NCHW edge (a.lane != 1) written and read 8 pixels at a time: v[j]
 * the 8 channels of pixel px0 + j, j < n.  Masked moves only for a
 * plane's last, partial run: AMD's Zen cores microcode vmaskmovps, and
 * with them on every run the edge cost the first block 0.55 ms forward
 * (bench/pool_edge.c, Zen 3), more than the reorder it spares. */
TARGET_AVX2 static void edge_store_run(arr a, int64_t px0, int n, __m256 v[LANES]) {
  for (int j = n; j < LANES; j++) v[j] = _mm256_setzero_ps();
  transpose8(v);
  if (n == LANES) {
    for (int l = 0; l < LANES; l++) _mm256_storeu_ps(a.p + l * a.lane + px0, v[l]);
    return;
  }
  __m256i m = first_lanes(n);
  for (int l = 0; l < LANES; l++) _mm256_maskstore_ps(a.p + l * a.lane + px0, m, v[l]);
}

TARGET_AVX2 static void edge_load_run(arr a, int64_t px0, int n, __m256 v[LANES]) {
  if (n == LANES) {
    for (int l = 0; l < LANES; l++) v[l] = _mm256_loadu_ps(a.p + l * a.lane + px0);
  } else {
    __m256i m = first_lanes(n);
    for (int l = 0; l < LANES; l++) v[l] = _mm256_maskload_ps(a.p + l * a.lane + px0, m);
  }
  transpose8(v);
}

/* acc[0..8) += the lanes of v, in double. */
TARGET_AVX2 static inline void add_lanes(double *acc, __m256 v) {
  __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
  __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
  _mm256_storeu_pd(acc, _mm256_add_pd(_mm256_loadu_pd(acc), lo));
  _mm256_storeu_pd(acc + 4, _mm256_add_pd(_mm256_loadu_pd(acc + 4), hi));
}

/* ---- forward ------------------------------------------------------------------- */

/* Sums of d = x - shift and d*d over one plane (len vectors) into s1, s2. */
TARGET_AVX2 static void plane_sums(arr x, int64_t len, __m256 shift, double *s1, double *s2) {
  __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
  for (int64_t i = 0; i < len; i++) {
    __m256 v = _mm256_sub_ps(ld(x, i * x.pix), shift);
    if (i & 1)
      b = _mm256_add_ps(b, v), d = _mm256_fmadd_ps(v, v, d);
    else
      a = _mm256_add_ps(a, v), c = _mm256_fmadd_ps(v, v, c);
  }
  add_lanes(s1, _mm256_add_ps(a, b));
  add_lanes(s2, _mm256_add_ps(c, d));
}

/* The 16 doubles of plane p = (image, block): sums shifted by image 0's
 * first pixel (no vector value crosses OpenMP's outlined bodies). */
TARGET_AVX2 static void plane_statistics(arr x, int nhwc, int64_t p, int64_t CB, int64_t len,
                                         double *s) {
  for (int i = 0; i < 2 * LANES; i++) s[i] = 0;
  __m256 shift = ld(x, plane_at(nhwc, 0, p % CB, CB, len));
  plane_sums(from(x, plane_at(nhwc, p / CB, p % CB, CB, len)), len, shift, s, s + LANES);
}

/* Mean and biased variance; first: C floats of scratch. */
TARGET_AVX2 static void statistics(arr x, int nhwc, int64_t N, int64_t CB, int64_t len,
                                   double *part, float *first, float *mean, float *var) {
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * CB; p++) plane_statistics(x, nhwc, p, CB, len, part + p * 2 * LANES);
  for (int64_t cb = 0; cb < CB; cb++)
    _mm256_storeu_ps(first + cb * LANES, ld(x, plane_at(nhwc, 0, cb, CB, len)));
  cnn_brp_statistics(part, first, N, CB, LANES, (double)(N * len), mean, var);
}

/* relu(x*scale + shift), NaN kept (max returns its second operand). */
TARGET_AVX2 static inline __m256 norm_relu(arr x, int64_t i, __m256 scale, __m256 shift) {
  return _mm256_max_ps(_mm256_setzero_ps(), _mm256_fmadd_ps(ld(x, i), scale, shift));
}

/* A later tap wins when greater or NaN (pool.c's rule). */
TARGET_AVX2 static inline void take(__m256 v, int t, __m256 *best, __m256i *tap) {
  __m256 m = _mm256_or_ps(_mm256_cmp_ps(v, *best, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  *best = _mm256_blendv_ps(*best, v, m);
  *tap = _mm256_blendv_epi8(*tap, _mm256_set1_epi32(t), _mm256_castps_si256(m));
}

TARGET_AVX2 static void forward_plane(arr x, int64_t H, int64_t W, const float *scale8,
                                      const float *shift8, arr y, uint8_t *tap) {
  int64_t OH = H / 2, OW = W / 2;
  __m256 scale = _mm256_loadu_ps(scale8), shift = _mm256_loadu_ps(shift8);
  __m256 run[LANES]; /* an NCHW edge's pixels since the last store */
  int nrun = 0;
  for (int64_t oh = 0; oh < OH; oh++)
    for (int64_t ow = 0; ow < OW; ow++) {
      int64_t a = ((2 * oh) * W + 2 * ow) * x.pix, c = a + W * x.pix;
      __m256 best = norm_relu(x, a, scale, shift);
      __m256i t = _mm256_setzero_si256();
      take(norm_relu(x, a + x.pix, scale, shift), 1, &best, &t);
      take(norm_relu(x, c, scale, shift), 2, &best, &t);
      take(norm_relu(x, c + x.pix, scale, shift), 3, &best, &t);
      int64_t px = oh * OW + ow;
      tap_store(tap + px * x.pix, t);
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
static arr edge_of(void *p, int layout, int64_t pix, int64_t olen) {
  arr a = {p, pix, 1};
  if (layout == CNN_B16_NCHW_EDGE) a.pix = 1, a.lane = olen;
  return a;
}

TARGET_AVX2 int cnn_cpu_bn_relu_pool_blocked8_forward(const void *xp, int bf16, int layout,
                                                      int64_t N, int64_t CB, int64_t H, int64_t W,
                                                      const float *gamma, const float *beta,
                                                      float eps, float *mean, float *var, void *yp,
                                                      uint8_t *tap) {
  int nhwc = layout == CNN_B16_NHWC;
  int64_t pix = nhwc ? CB * LANES : LANES;
  int64_t C = CB * LANES, len = H * W, olen = (H / 2) * (W / 2);
  if (cnn_brp_check_layout(layout, bf16, 0, olen, LANES)) return -1;
  arr x = {(float *)xp, pix, 1}, y = edge_of(yp, layout, pix, olen);
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

typedef struct {
  __m256 scale, shift; /* of the forward: v = x scale + shift */
  __m256 mean, rstd;
} block_consts;

/* g at tap t of a window: dy where the window chose t and v > 0. */
TARGET_AVX2 static inline __m256 grad_at(__m256 x, const block_consts *k, __m256 dy, __m256i tap,
                                         int t) {
  __m256 chosen = _mm256_castsi256_ps(_mm256_cmpeq_epi32(tap, _mm256_set1_epi32(t)));
  __m256 v = _mm256_fmadd_ps(x, k->scale, k->shift);
  __m256 live = _mm256_and_ps(chosen, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ));
  return _mm256_and_ps(live, dy);
}

/* Sums of g and g*xhat over one plane into s (8 each); with dy in NCHW
 * planes, its vectors copied into dyc in x's layout (else dyc.p NULL). */
TARGET_AVX2 static void backward_sums(arr x, arr dy, arr dyc, const uint8_t *tap, int64_t H,
                                      int64_t W, const block_consts *k, double *s) {
  int64_t OH = H / 2, OW = W / 2;
  __m256 sg = _mm256_setzero_ps(), sgx = sg;
  __m256 run[LANES]; /* an NCHW edge's next 8 pixels */
  for (int64_t oh = 0; oh < OH; oh++)
    for (int64_t ow = 0; ow < OW; ow++) {
      int64_t px = oh * OW + ow, left = OH * OW - px;
      if (dy.lane != 1 && px % LANES == 0)
        edge_load_run(dy, px, left < LANES ? (int)left : LANES, run);
      __m256 d = dy.lane == 1 ? ld(dy, px * dy.pix) : run[px % LANES];
      if (dyc.p) st(dyc, px * x.pix, d);
      __m256i t = tap_load(tap + px * x.pix);
      int64_t a = ((2 * oh) * W + 2 * ow) * x.pix, c = a + W * x.pix;
      int64_t at[4] = {a, a + x.pix, c, c + x.pix};
      for (int q = 0; q < 4; q++) {
        __m256 xv = ld(x, at[q]);
        __m256 g = grad_at(xv, k, d, t, q);
        __m256 xh = _mm256_mul_ps(_mm256_sub_ps(xv, k->mean), k->rstd);
        sg = _mm256_add_ps(sg, g);
        sgx = _mm256_fmadd_ps(g, xh, sgx);
      }
    }
  add_lanes(s, sg);
  add_lanes(s + LANES, sgx);
}

/* The second pass's constants of a channel block: dx = A g + B + C (x - mean). */
typedef struct {
  __m256 A, B, Cx;
} dx_consts;

TARGET_AVX2 static dx_consts dx_consts_of(const float *A8, const float *B8, const float *C8) {
  dx_consts d = {_mm256_loadu_ps(A8), _mm256_loadu_ps(B8), _mm256_loadu_ps(C8)};
  return d;
}

/* Batch norm's input gradient at pixel (h, w) of a plane; g = 0 outside
 * every window (an odd edge). */
TARGET_AVX2 static inline __m256 dx_at(arr x, arr dy, const uint8_t *tap, int64_t h, int64_t w,
                                       int64_t H, int64_t W, const block_consts *k,
                                       const dx_consts *d) {
  int64_t OH = H / 2, OW = W / 2;
  __m256 xv = ld(x, (h * W + w) * x.pix), g = _mm256_setzero_ps();
  if (h < 2 * OH && w < 2 * OW) {
    int64_t o = ((h / 2) * OW + w / 2) * dy.pix;
    g = grad_at(xv, k, ld(dy, o), tap_load(tap + o), (int)((h % 2) * 2 + w % 2));
  }
  __m256 r = _mm256_fmadd_ps(d->Cx, _mm256_sub_ps(xv, k->mean), d->B);
  return _mm256_fmadd_ps(d->A, g, r);
}

TARGET_AVX2 static void backward_plane(arr x, arr dy, const uint8_t *tap, int64_t H, int64_t W,
                                       const block_consts *k, const dx_consts *d, arr dx) {
  for (int64_t h = 0; h < H; h++)
    for (int64_t w = 0; w < W; w++)
      st(dx, (h * W + w) * x.pix, dx_at(x, dy, tap, h, w, H, W, k, d));
}

/* What the backward's two passes share: the block's arrays and shape,
 * and per channel scale, shift, rstd (the forward's) and A, B, Cx (dx's). */
typedef struct {
  arr x, dy;
  const uint8_t *tap;
  int layout, nhwc;
  int64_t N, CB, H, W;
  const float *mean;
  float *k; /* 6 x C: scale, shift, rstd, A, B, Cx */
} bwd;

static float *bwd_k(const bwd *b, int i) { return b->k + i * b->CB * LANES; }

static int64_t x_plane(const bwd *b, int64_t n, int64_t cb) {
  return plane_at(b->nhwc, n, cb, b->CB, b->H * b->W);
}
static int64_t out_plane(const bwd *b, int64_t n, int64_t cb) {
  return plane_at(b->nhwc, n, cb, b->CB, (b->H / 2) * (b->W / 2));
}

TARGET_AVX2 static void block_consts_of(const bwd *b, int64_t cb, block_consts *kc, dx_consts *d) {
  int64_t o = cb * LANES;
  kc->scale = _mm256_loadu_ps(bwd_k(b, 0) + o), kc->shift = _mm256_loadu_ps(bwd_k(b, 1) + o);
  kc->mean = _mm256_loadu_ps(b->mean + o), kc->rstd = _mm256_loadu_ps(bwd_k(b, 2) + o);
  if (d) *d = dx_consts_of(bwd_k(b, 3) + o, bwd_k(b, 4) + o, bwd_k(b, 5) + o);
}

/* The first pass (dgamma, dbeta, then A, B, Cx); with an NCHW edge, dy is
 * then its nChw8c copy.  0, or -1 with the error set. */
TARGET_AVX2 static int backward_first(bwd *b, const void *dyp, float *dy_copy, const float *gamma,
                                      const float *beta, const float *var, float eps, float *dgamma,
                                      float *dbeta) {
  int64_t N = b->N, CB = b->CB, C = CB * LANES, len = b->H * b->W, olen = (b->H / 2) * (b->W / 2);
  if (cnn_brp_check_layout(b->layout, 0, 0, olen, LANES)) return -1;
  if (b->layout == CNN_B16_NCHW_EDGE && !dy_copy)
    return cnn_set_error("conv_bn_relu_pool: the NCHW edge's backward needs dy's copy"), -1;
  arr dyc = {b->layout == CNN_B16_NCHW_EDGE ? dy_copy : NULL, b->x.pix, 1};
  b->dy = edge_of((void *)dyp, b->layout, b->x.pix, olen);
  double *part = cnn_brp_scratch((size_t)(N * CB * 2 * LANES) * sizeof(double));
  b->k = cnn_brp_scratch((size_t)(6 * C) * sizeof(float));
  if (!part || !b->k) return free(part), free(b->k), b->k = NULL, -1;
  cnn_brp_affine(C, gamma, beta, b->mean, var, eps, bwd_k(b, 0), bwd_k(b, 1), bwd_k(b, 2));
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * CB; p++) {
    double *s = part + p * 2 * LANES;
    for (int i = 0; i < 2 * LANES; i++) s[i] = 0;
    int64_t n = p / CB, cb = p % CB, o = out_plane(b, n, cb);
    block_consts kc;
    block_consts_of(b, cb, &kc, NULL);
    arr dyc_p = dyc.p ? from(dyc, o) : dyc;
    backward_sums(from(b->x, x_plane(b, n, cb)), from(b->dy, o), dyc_p, b->tap + o, b->H, b->W, &kc,
                  s);
  }
  cnn_brp_backward_consts(part, N, CB, LANES, (double)(N * len), gamma, bwd_k(b, 2), dgamma, dbeta,
                          bwd_k(b, 3), bwd_k(b, 4), bwd_k(b, 5));
  free(part);
  if (dyc.p) b->dy = dyc;
  return 0;
}

static bwd bwd_of(const void *xp, const uint8_t *tap, int layout, int64_t N, int64_t CB, int64_t H,
                  int64_t W, const float *mean) {
  int nhwc = layout == CNN_B16_NHWC;
  bwd b = {.x = {(float *)xp, nhwc ? CB * LANES : LANES, 1},
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

TARGET_AVX2 int cnn_cpu_bn_relu_pool_blocked8_backward(
    const void *xp, const void *dyp, const uint8_t *tap, int bf16, int layout, int64_t N,
    int64_t CB, int64_t H, int64_t W, const float *gamma, const float *beta, const float *mean,
    const float *var, float eps, void *dxp, float *dgamma, float *dbeta, float *dy_copy) {
  if (cnn_brp_check_layout(layout, bf16, 0, (H / 2) * (W / 2), LANES)) return -1;
  bwd b = bwd_of(xp, tap, layout, N, CB, H, W, mean);
  if (backward_first(&b, dyp, dy_copy, gamma, beta, var, eps, dgamma, dbeta)) return -1;
  arr dx = {dxp, b.x.pix, 1};
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * CB; p++) {
    int64_t n = p / CB, cb = p % CB, o = out_plane(&b, n, cb), i = x_plane(&b, n, cb);
    block_consts kc;
    dx_consts d;
    block_consts_of(&b, cb, &kc, &d);
    backward_plane(from(b.x, i), from(b.dy, o), tap + o, H, W, &kc, &d, from(dx, i));
  }
  free(b.k);
  return 0;
}

/* ---- backward into the convolution's weight gradient ------------------------------ */

/* Over one plane: acc[t] (t = (c R + r) S + s) = sum of dx x_tap, and
 * acc[C R S] = sum of dx, dx never stored; literal C, R, S for the common
 * kernels keep the sums in registers (bn_relu_pool_blocked16.c). */
TARGET_AVX2 static inline __attribute__((always_inline)) void
weight_plane_body(arr x, arr dy, const uint8_t *tap, int64_t H, int64_t W, const block_consts *k,
                  const dx_consts *d, int64_t C, int64_t R, int64_t S, const float *pad,
                  float *acc) {
  int64_t taps = C * R * S, PH = H + R - 1, PW = W + S - 1;
  __m256 a[CNN_B16_MAX_TAPS + 1];
  for (int64_t t = 0; t <= taps; t++) a[t] = _mm256_setzero_ps();
  for (int64_t h = 0; h < H; h++)
    for (int64_t w = 0; w < W; w++) {
      __m256 v = dx_at(x, dy, tap, h, w, H, W, k, d);
      a[taps] = _mm256_add_ps(a[taps], v);
      for (int64_t c = 0; c < C; c++)
        for (int64_t r = 0; r < R; r++) {
          const float *row = pad + (c * PH + h + r) * PW + w;
          for (int64_t q = 0; q < S; q++)
            a[(c * R + r) * S + q] =
                _mm256_fmadd_ps(v, _mm256_broadcast_ss(row + q), a[(c * R + r) * S + q]);
        }
    }
  for (int64_t t = 0; t <= taps; t++) _mm256_storeu_ps(acc + t * LANES, a[t]);
}

TARGET_AVX2 static void weight_plane(arr x, arr dy, const uint8_t *tap, int64_t H, int64_t W,
                                     const block_consts *k, const dx_consts *d,
                                     const cnn_b16_conv_src *src, const float *pad, float *acc) {
  if (src->C == 1 && src->R == 3 && src->S == 3)
    weight_plane_body(x, dy, tap, H, W, k, d, 1, 3, 3, pad, acc);
  else if (src->C == 3 && src->R == 3 && src->S == 3)
    weight_plane_body(x, dy, tap, H, W, k, d, 3, 3, 3, pad, acc);
  else
    weight_plane_body(x, dy, tap, H, W, k, d, src->C, src->R, src->S, pad, acc);
}

TARGET_AVX2 int cnn_cpu_bn_relu_pool_blocked8_backward_dw(
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
  bwd b = bwd_of(xp, tap, layout, N, CB, H, W, mean);
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
      dx_consts d;
      block_consts_of(&b, cb, &kc, &d);
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

#else /* not x86-64 GCC/Clang: cnn_cpu_use_avx2() is 0, never called */

static int not_built(void) {
  cnn_set_error("conv_bn_relu_pool: the AVX2 path is not built here");
  return -1;
}

int cnn_cpu_bn_relu_pool_blocked8_forward(const void *x, int bf16, int layout, int64_t N,
                                          int64_t CB, int64_t H, int64_t W, const float *gamma,
                                          const float *beta, float eps, float *mean, float *var,
                                          void *y, uint8_t *tap) {
  return not_built();
}

int cnn_cpu_bn_relu_pool_blocked8_backward(const void *x, const void *dy, const uint8_t *tap,
                                           int bf16, int layout, int64_t N, int64_t CB, int64_t H,
                                           int64_t W, const float *gamma, const float *beta,
                                           const float *mean, const float *var, float eps, void *dx,
                                           float *dgamma, float *dbeta, float *dy_copy) {
  return not_built();
}

int cnn_cpu_bn_relu_pool_blocked8_backward_dw(const void *x, const void *dy, const uint8_t *tap,
                                              int layout, int64_t N, int64_t CB, int64_t H,
                                              int64_t W, const float *gamma, const float *beta,
                                              const float *mean, const float *var, float eps,
                                              const cnn_b16_conv_src *src, float *dw, float *db,
                                              float *dgamma, float *dbeta, float *dy_copy) {
  return not_built();
}

#endif
