/*
 * batch_norm_avx512.c -- the float32 per-channel bodies of batch_norm.c with
 * AVX-512 intrinsics, chosen per call by cnn_cpu_use_avx512() (as
 * max_pool_2x2.c): the two sums of a channel, its normalisation (+ relu)
 * and its dx, and the sums of all channels over a run of images in memory
 * order (batch_norm_planes.c).  A channel is N rows of L floats, `stride` floats apart
 * (x[n*stride + l]); everything else is batch_norm.c's.
 *
 * Why: batch norm is memory-bound, but the portable bodies were not.  GCC
 * kept their 16-lane partial-sum arrays on the stack (the remainder loop
 * indexes them by i % 16), so every add waited on a store-to-load forward,
 * and read dy under the relu mask with vmaskmovps; the fused backward ran
 * at 12 GB/s against a 19-55 GB/s copy of its bytes (one thread, quiet).
 * Here the accumulators are registers (two vectors per sum, 32 floats a
 * step), a row's tail is one masked step, and the row two ahead is
 * prefetched line by line during the sums (rows are 0.8-3 KB runs 50-100 KB apart, too
 * short for the hardware prefetcher to get going).  The second pass of
 * each body (normalise, dx) rereads the channel from L2 (N*L*4 bytes: 200
 * KB at 64x32x28x28).
 *
 * Same semantics as the portable bodies: float partial sums over at most
 * BLOCK values of a row, added into double per block (32 lanes: at most 32
 * terms a lane before the double add); the sums in memory order
 * (image_sums) keep the float lanes across a run's rows of a channel up to
 * BLOCK values (ResNet-20's 8x8 planes: one double add per four rows, not
 * per row; its 64x64x8x8 forward in cache 34 -> 28 us); relu keeps NaN and maps -0.0 to +0.0
 * (cnn_relu_f); the gradient passes where y is > 0 or NaN.  Elementwise
 * results are the same expressions, (x - m)*k + b as one FMA after the
 * subtraction, so fused and unfused calls give the same bits (the tests
 * compare them bit for bit, and both paths against the double oracle).
 */
#include "cpu/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
#define BLOCK         1024 /* values of a row per float partial sum */
#define AHEAD         2    /* rows prefetched ahead by the sums */

/* The lanes of a row's step at i: all 16, or the tail's. */
TARGET_AVX512 static inline __mmask16 lanes(int64_t L, int64_t i) {
  return L - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (L - i)) - 1);
}

/* dy where y > 0 or y is NaN (relu's gradient), 0 elsewhere; dy alone
 * without y.  Masked-off lanes are 0. */
TARGET_AVX512 static inline __m512 grad_of(__mmask16 k, const float *dy, const float *y,
                                           int64_t i) {
  if (!y) return _mm512_maskz_loadu_ps(k, dy + i);
  __m512 yv = _mm512_maskz_loadu_ps(k, y + i);
  __mmask16 pass = _mm512_mask_cmp_ps_mask(k, yv, _mm512_setzero_ps(), _CMP_NLE_UQ);
  return _mm512_maskz_loadu_ps(pass, dy + i);
}

/* the sum of a vector's 16 floats into double, added to *acc */
TARGET_AVX512 static inline __m512d widen_add(__m512d acc, __m512 v) {
  acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
  return _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
}

/* One block [i0, i1) of a row: s1 += t, s2 += t*d with d = x - ref and t =
 * d (forward) or the gradient (backward, `grad` a literal).  Each step also
 * prefetches its lines of the row AHEAD rows on (pf floats further; 0: the
 * last rows), one prefetch per line read: prefetching a whole row at its
 * start measured slower (the burst fills the miss buffers and stalls). */
#define SUM_STEP(i, k, A1, A2)                                                                     \
  do {                                                                                             \
    if (pf) {                                                                                      \
      _mm_prefetch((const char *)(x + (i) + pf), _MM_HINT_T0);                                     \
      if (grad) _mm_prefetch((const char *)(dy + (i) + pf), _MM_HINT_T0);                          \
      if (grad && y) _mm_prefetch((const char *)(y + (i) + pf), _MM_HINT_T0);                      \
    }                                                                                              \
    __m512 d = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, x + (i)), r);                       \
    __m512 t = grad ? grad_of(k, dy, y, i) : d;                                                    \
    A1 = _mm512_add_ps(A1, t), A2 = _mm512_fmadd_ps(t, d, A2);                                     \
  } while (0)

/* Float partial sums of [i0, i1) added into the lanes f[0..3] (a1, a2,
 * b1, b2: two vectors per sum). */
TARGET_AVX512 static inline void float_sums(int grad, const float *x, const float *dy,
                                            const float *y, __m512 r, int64_t i0, int64_t i1,
                                            int64_t pf, __m512 f[4]) {
  __m512 a1 = f[0], a2 = f[1], b1 = f[2], b2 = f[3];
  int64_t i = i0;
  for (; i + 32 <= i1; i += 32) {
    SUM_STEP(i, (__mmask16)0xFFFF, a1, a2);
    SUM_STEP(i + 16, (__mmask16)0xFFFF, b1, b2);
  }
  for (; i < i1; i += 16) SUM_STEP(i, lanes(i1, i), a1, a2);
  f[0] = a1, f[1] = a2, f[2] = b1, f[3] = b2;
}
#undef SUM_STEP

/* The float lanes added into the double sums, and cleared. */
TARGET_AVX512 static inline void widen_lanes(__m512 f[4], __m512d *s1, __m512d *s2) {
  *s1 = widen_add(*s1, _mm512_add_ps(f[0], f[2]));
  *s2 = widen_add(*s2, _mm512_add_ps(f[1], f[3]));
  f[0] = f[1] = f[2] = f[3] = _mm512_setzero_ps();
}

TARGET_AVX512 static inline void block_sums(int grad, const float *x, const float *dy,
                                            const float *y, __m512 r, int64_t i0, int64_t i1,
                                            int64_t pf, __m512d *s1, __m512d *s2) {
  __m512 f[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                 _mm512_setzero_ps()};
  float_sums(grad, x, dy, y, r, i0, i1, pf, f);
  widen_lanes(f, s1, s2);
}

/* The sums of batch_norm.c's channel_sums_f32 over a channel's N rows:
 *   grad 0: sum d, sum d^2 with d = x - ref;  grad 1: sum g, sum g*(x - ref). */
TARGET_AVX512 static void sums(int grad, int64_t N, int64_t stride, int64_t L, const float *x,
                               const float *dy, const float *y, float ref, double *s1, double *s2) {
  __m512d t1 = _mm512_setzero_pd(), t2 = t1;
  __m512 r = _mm512_set1_ps(ref);
  for (int64_t n = 0; n < N; n++) {
    int64_t o = n * stride;
    int64_t pf = n + AHEAD < N ? AHEAD * stride : 0;
    for (int64_t i0 = 0; i0 < L; i0 += BLOCK)
      block_sums(grad, x + o, grad ? dy + o : NULL, grad && y ? y + o : NULL, r, i0,
                 L - i0 < BLOCK ? L : i0 + BLOCK, pf, &t1, &t2);
  }
  *s1 = _mm512_reduce_add_pd(t1), *s2 = _mm512_reduce_add_pd(t2);
}

void cnn_cpu_bn_sums_f32_avx512(int grad, int64_t N, int64_t stride, int64_t L, const float *x,
                                const float *dy, const float *y, float ref, double *s1,
                                double *s2) {
  if (grad)
    sums(1, N, stride, L, x, dy, y, ref, s1, s2);
  else
    sums(0, N, stride, L, x, NULL, NULL, ref, s1, s2);
}

/* The sums of every channel over images [n0, n1), channel by channel
 * within the run (the run's rows of a channel: one per image, so a few
 * streams at once): out[2c] = sum t, out[2c+1] = sum t*d with d = x -
 * ref[c] and t = d (grad 0) or the gradient (grad 1; dy, through the relu
 * when y is given). */
TARGET_AVX512 static void image_sums(int grad, int64_t n0, int64_t n1, int64_t C, int64_t L,
                                     const float *x, const float *dy, const float *y,
                                     const float *ref, double *out) {
  for (int64_t c = 0; c < C; c++) {
    __m512d t1 = _mm512_setzero_pd(), t2 = t1;
    __m512 r = _mm512_set1_ps(ref[c]);
    __m512 f[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
    int64_t held = 0; /* values in the float lanes: at most BLOCK, across rows */
    for (int64_t n = n0; n < n1; n++) {
      int64_t o = (n * C + c) * L;
      for (int64_t i0 = 0; i0 < L; i0 += BLOCK) {
        int64_t i1 = L - i0 < BLOCK ? L : i0 + BLOCK;
        if (held + (i1 - i0) > BLOCK) widen_lanes(f, &t1, &t2), held = 0;
        float_sums(grad, x + o, grad ? dy + o : NULL, grad && y ? y + o : NULL, r, i0, i1, 0, f);
        held += i1 - i0;
      }
    }
    widen_lanes(f, &t1, &t2);
    out[2 * c] = _mm512_reduce_add_pd(t1), out[2 * c + 1] = _mm512_reduce_add_pd(t2);
  }
}

void cnn_cpu_bn_image_sums_f32_avx512(int grad, int64_t n0, int64_t n1, int64_t C, int64_t L,
                                      const float *x, const float *dy, const float *y,
                                      const float *ref, double *out) {
  if (grad)
    image_sums(1, n0, n1, C, L, x, dy, y, ref, out);
  else
    image_sums(0, n0, n1, C, L, x, NULL, NULL, ref, out);
}

/* One row: y = (x - m)*k + b, then relu (NaN kept, -0.0 -> +0.0) when
 * asked (relu 1), or the residual r added and then relu (relu 2: r's sum
 * rounded as the add op's); `relu` a literal at the calls. */
TARGET_AVX512 static inline void normalize_row(int relu, int64_t L, const float *x, const float *r,
                                               __m512 mv, __m512 kv, __m512 bv, float *y) {
  for (int64_t i = 0; i < L; i += 16) {
    __mmask16 lk = lanes(L, i);
    __m512 v = _mm512_fmadd_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(lk, x + i), mv), kv, bv);
    if (relu == 2) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(lk, r + i));
    if (relu) v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NLE_UQ), v);
    _mm512_mask_storeu_ps(y + i, lk, v);
  }
}

/* one row of any relu mode (r: relu 2's residual row) */
TARGET_AVX512 static inline void normalize_row_mode(int relu, int64_t L, const float *x,
                                                    const float *r, __m512 mv, __m512 kv, __m512 bv,
                                                    float *y) {
  if (relu == 2)
    normalize_row(2, L, x, r, mv, kv, bv, y);
  else if (relu)
    normalize_row(1, L, x, NULL, mv, kv, bv, y);
  else
    normalize_row(0, L, x, NULL, mv, kv, bv, y);
}

TARGET_AVX512 void cnn_cpu_bn_normalize_f32_avx512(int64_t N, int64_t stride, int64_t L,
                                                   const float *x, const float *r, float m, float k,
                                                   float b, float *y, int relu) {
  __m512 mv = _mm512_set1_ps(m), kv = _mm512_set1_ps(k), bv = _mm512_set1_ps(b);
  for (int64_t n = 0; n < N; n++)
    normalize_row_mode(relu, L, x + n * stride, r ? r + n * stride : NULL, mv, kv, bv,
                       y + n * stride);
}

TARGET_AVX512 void cnn_cpu_bn_normalize_planes_f32_avx512(int64_t p0, int64_t p1, int64_t C,
                                                          int64_t L, const float *x, const float *r,
                                                          const float *k, float *y, int relu) {
  int64_t c = p0 % C;
  for (int64_t p = p0; p < p1; p++) {
    const float *kc = k + 3 * c;
    __m512 mv = _mm512_set1_ps(kc[0]), kv = _mm512_set1_ps(kc[1]), bv = _mm512_set1_ps(kc[2]);
    normalize_row_mode(relu, L, x + p * L, r ? r + p * L : NULL, mv, kv, bv, y + p * L);
    if (++c == C) c = 0;
  }
}

/* One row of dx = k*g + kx*(x - m) + k0, g the gradient reaching batch
 * norm's output (through relu when y is given). */
TARGET_AVX512 static inline void dx_row(int64_t L, const float *dy, const float *y, const float *x,
                                        __m512 mv, __m512 kv, __m512 kxv, __m512 k0v, float *dx) {
  for (int64_t i = 0; i < L; i += 16) {
    __mmask16 lk = lanes(L, i);
    __m512 g = grad_of(lk, dy, y, i);
    __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(lk, x + i), mv);
    __m512 v = _mm512_fmadd_ps(kxv, d, _mm512_fmadd_ps(kv, g, k0v));
    _mm512_mask_storeu_ps(dx + i, lk, v);
  }
}

TARGET_AVX512 void cnn_cpu_bn_dx_f32_avx512(int64_t N, int64_t stride, int64_t L, const float *dy,
                                            const float *y, const float *x, float m, float k,
                                            float kx, float k0, float *dx) {
  __m512 mv = _mm512_set1_ps(m), kv = _mm512_set1_ps(k), kxv = _mm512_set1_ps(kx);
  __m512 k0v = _mm512_set1_ps(k0);
  for (int64_t n = 0; n < N; n++) {
    int64_t o = n * stride;
    dx_row(L, dy + o, y ? y + o : NULL, x + o, mv, kv, kxv, k0v, dx + o);
  }
}

TARGET_AVX512 void cnn_cpu_bn_dx_planes_f32_avx512(int64_t p0, int64_t p1, int64_t C, int64_t L,
                                                   const float *dy, const float *y, const float *x,
                                                   const float *mean, const float *k, float *dx) {
  int64_t c = p0 % C;
  for (int64_t p = p0; p < p1; p++) {
    const float *kc = k + 3 * c;
    __m512 mv = _mm512_set1_ps(mean[c]), kv = _mm512_set1_ps(kc[0]);
    __m512 kxv = _mm512_set1_ps(kc[1]), k0v = _mm512_set1_ps(kc[2]);
    int64_t o = p * L;
    dx_row(L, dy + o, y ? y + o : NULL, x + o, mv, kv, kxv, k0v, dx + o);
    if (++c == C) c = 0;
  }
}

#else /* no AVX-512 path on this compiler/architecture: never called */

void cnn_cpu_bn_image_sums_f32_avx512(int grad, int64_t n0, int64_t n1, int64_t C, int64_t L,
                                      const float *x, const float *dy, const float *y,
                                      const float *ref, double *out) {
  (void)grad, (void)n0, (void)n1, (void)C, (void)L, (void)x, (void)dy, (void)y, (void)ref;
  (void)out;
}

void cnn_cpu_bn_sums_f32_avx512(int grad, int64_t N, int64_t stride, int64_t L, const float *x,
                                const float *dy, const float *y, float ref, double *s1,
                                double *s2) {
  (void)grad, (void)N, (void)stride, (void)L, (void)x, (void)dy, (void)y, (void)ref;
  *s1 = *s2 = 0;
}
void cnn_cpu_bn_normalize_f32_avx512(int64_t N, int64_t stride, int64_t L, const float *x,
                                     const float *r, float m, float k, float b, float *y,
                                     int relu) {
  (void)N, (void)stride, (void)L, (void)x, (void)r, (void)m, (void)k, (void)b, (void)y, (void)relu;
}
void cnn_cpu_bn_dx_f32_avx512(int64_t N, int64_t stride, int64_t L, const float *dy, const float *y,
                              const float *x, float m, float k, float kx, float k0, float *dx) {
  (void)N, (void)stride, (void)L, (void)dy, (void)y, (void)x, (void)m, (void)k, (void)kx;
  (void)k0, (void)dx;
}
void cnn_cpu_bn_normalize_planes_f32_avx512(int64_t p0, int64_t p1, int64_t C, int64_t L,
                                            const float *x, const float *r, const float *k,
                                            float *y, int relu) {
  (void)p0, (void)p1, (void)C, (void)L, (void)x, (void)r, (void)k, (void)y, (void)relu;
}
void cnn_cpu_bn_dx_planes_f32_avx512(int64_t p0, int64_t p1, int64_t C, int64_t L, const float *dy,
                                     const float *y, const float *x, const float *mean,
                                     const float *k, float *dx) {
  (void)p0, (void)p1, (void)C, (void)L, (void)dy, (void)y, (void)x, (void)mean, (void)k, (void)dx;
}
#endif
