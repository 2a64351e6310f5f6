/*
 * max_pool_2x2.c -- the float32 2x2 stride-2 max pool (MaxPool2d(2), no
 * padding, no dilation) on planes of even width, forward only; the
 * shapes pool.c sends here (cnn_cpu_max_pool_2x2_applies).  Backward
 * stays pool.c's zero-then-scatter: a one-pass version that writes each
 * window's four cells measured 0.95-1.2x of it with AVX-512 and 0.2x
 * portable, so it was not kept.
 *
 * Output (k, ow) takes the taps a b / c d of input rows 2k and 2k+1,
 * columns 2ow and 2ow+1, in that order, with pool.c's rule: start from a,
 * take a later tap v when v > best or v is NaN -- so the first maximum wins
 * ties (-0.0 against +0.0 included) and the last NaN's position is kept.
 * Its index is the flat position (2k + r)*W + 2ow + q in the plane.
 *
 * Two implementations, chosen per call by cnn_cpu_use_avx512():
 *  - portable: one output row per loop, written so the compiler vectorises
 *    it for the build's ISA (x86-64-v3).  On 14x14 planes (OW = 7) most of
 *    a row falls into the scalar remainder;
 *  - AVX-512 (a target attribute; intrinsics): 16 outputs of a row at a
 *    time from masked loads of 32 floats per input row, deinterleaved into
 *    a, b (c, d) by permutes, the rule as compare masks and blends, indices
 *    as int64 adds; a row shorter than 16 outputs is one masked step, and
 *    rows of at most 8 outputs go two at a time (rows_forward_narrow).
 *    Measured against the previous portable path (two flat passes through a
 *    stack buffer), one thread, 64x32x28x28 with indices: 7.5x; at
 *    64x64x14x14: 6.4x (the portable loop: 2.1x and 1.1x).
 * Both give the same bits (the same compares in the same order): the
 * tests run both against a naive reference (tests/core/test_eval_paths.c).
 */
#include "cpu/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX512_PATH 1
#define TARGET_AVX512    __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
#endif

#define ALWAYS_INLINE static inline __attribute__((always_inline))

bool cnn_cpu_max_pool_2x2_applies(cnn_dtype dt, const cnn_pool_shape *s) {
  return dt == CNN_FLOAT32 && s->kh == 2 && s->kw == 2 && s->sh == 2 && s->sw == 2 && s->ph == 0 &&
         s->pw == 0 && s->dh == 1 && s->dw == 1 && s->W % 2 == 0 && s->W < (1 << 30);
}

/* ---- portable ------------------------------------------------------------------------ */

/* One output row from input rows r0, r1; base = the flat position of r0[0].
 * `with_idx` is a literal. */
ALWAYS_INLINE void row_forward(const float *r0, const float *r1, float *y, int64_t *idx, int64_t OW,
                               int64_t base, int64_t W, int with_idx) {
#pragma omp simd
  for (int64_t ow = 0; ow < OW; ow++) {
    float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
    int t = (b > a) | (b != b);
    float m = t ? b : a;
    int64_t off = t;
    t = (c > m) | (c != c);
    m = t ? c : m, off = t ? W : off;
    t = (d > m) | (d != d);
    m = t ? d : m, off = t ? W + 1 : off;
    y[ow] = m;
    if (with_idx) idx[ow] = base + 2 * ow + off;
  }
}

static void forward_portable(const float *x, float *y, int64_t *idx, int64_t W, int64_t FH) {
  int64_t OW = W / 2;
  for (int64_t k = 0; k < FH; k++) {
    const float *r0 = x + 2 * k * W;
    if (idx)
      row_forward(r0, r0 + W, y + k * OW, idx + k * OW, OW, 2 * k * W, W, 1);
    else
      row_forward(r0, r0 + W, y + k * OW, NULL, OW, 2 * k * W, W, 0);
  }
}

/* ---- AVX-512 ------------------------------------------------------------------------- */

#ifdef HAVE_AVX512_PATH
/* Masks of a step of n <= 16 outputs: the outputs, and the first and
 * second 16 of the 2n input floats per row. */
typedef struct {
  __mmask16 out, lo, hi;
} step_masks;

TARGET_AVX512 static inline step_masks masks_of(int64_t n) {
  step_masks m;
  m.out = (__mmask16)((1u << n) - 1);
  m.lo = n >= 8 ? 0xFFFF : (__mmask16)((1u << (2 * n)) - 1);
  m.hi = n > 8 ? (__mmask16)((1u << (2 * n - 16)) - 1) : 0;
  return m;
}

/* take v over the running best m: v > m or v is NaN */
TARGET_AVX512 static inline __mmask16 takes(__m512 v, __m512 m) {
  return _mm512_cmp_ps_mask(v, m, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
}

/* The rule over the taps a b / c d of 16 windows: their maxima, and in
 * *off the offset of each one's tap in its plane row pair (0, 1, W, W+1). */
TARGET_AVX512 static inline __m512 window_max(__m512 a, __m512 b, __m512 c, __m512 d, int64_t W,
                                              __m512i *off) {
  __mmask16 t = takes(b, a);
  __m512 m = _mm512_mask_blend_ps(t, a, b);
  __m512i o = _mm512_maskz_set1_epi32(t, 1);
  t = takes(c, m);
  m = _mm512_mask_blend_ps(t, m, c), o = _mm512_mask_blend_epi32(t, o, _mm512_set1_epi32((int)W));
  t = takes(d, m);
  m = _mm512_mask_blend_ps(t, m, d);
  *off = _mm512_mask_blend_epi32(t, o, _mm512_set1_epi32((int)W + 1));
  return m;
}

/* int64 indices of lanes 0..7 (base0 + 2*lane + off) and 8..15 (base1 +
 * 2*(lane - 8) + off) */
TARGET_AVX512 static inline void index_halves(__m512i off, int64_t base0, int64_t base1,
                                              __m512i *i0, __m512i *i1) {
  const __m512i two_iota = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
  *i0 = _mm512_add_epi64(_mm512_add_epi64(_mm512_set1_epi64(base0), two_iota),
                         _mm512_cvtepi32_epi64(_mm512_castsi512_si256(off)));
  *i1 = _mm512_add_epi64(_mm512_add_epi64(_mm512_set1_epi64(base1), two_iota),
                         _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(off, 1)));
}

TARGET_AVX512 static void row_forward_avx512(const float *r0, const float *r1, float *y,
                                             int64_t *idx, int64_t OW, int64_t base, int64_t W) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int64_t o = 0; o < OW; o += 16) {
    step_masks k = masks_of(OW - o < 16 ? OW - o : 16);
    const float *p0 = r0 + 2 * o, *p1 = r1 + 2 * o;
    __m512 lo0 = _mm512_maskz_loadu_ps(k.lo, p0), hi0 = _mm512_maskz_loadu_ps(k.hi, p0 + 16);
    __m512 lo1 = _mm512_maskz_loadu_ps(k.lo, p1), hi1 = _mm512_maskz_loadu_ps(k.hi, p1 + 16);
    __m512 a = _mm512_permutex2var_ps(lo0, even, hi0), b = _mm512_permutex2var_ps(lo0, odd, hi0);
    __m512 c = _mm512_permutex2var_ps(lo1, even, hi1), d = _mm512_permutex2var_ps(lo1, odd, hi1);
    __m512i off, i0, i1;
    _mm512_mask_storeu_ps(y + o, k.out, window_max(a, b, c, d, W, &off));
    if (!idx) continue;
    index_halves(off, base + 2 * o, base + 2 * o + 16, &i0, &i1);
    _mm512_mask_storeu_epi64(idx + o, (__mmask8)k.out, i0);
    _mm512_mask_storeu_epi64(idx + o + 8, (__mmask8)(k.out >> 8), i1);
  }
}

/* Narrow planes (OW <= 8, e.g. 14x14): output rows k and k+1 in one step,
 * row k in lanes 0..7 and row k+1 in lanes 8..15 -- the same permutes,
 * with input rows 2k and 2k+2 (2k+1 and 2k+3) as the two sources; a row
 * at a time left 9 of 16 lanes idle at OW = 7 and measured 2-3x slower
 * than a copy of its bytes. */
TARGET_AVX512 static void rows_forward_narrow(const float *x, float *y, int64_t *idx, int64_t OW,
                                              int64_t W, int64_t k) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  __mmask16 in = (__mmask16)((1u << (2 * OW)) - 1);
  __mmask8 out = (__mmask8)((1u << OW) - 1);
  const float *r0 = x + 2 * k * W; /* input rows 2k .. 2k+3 */
  __m512 R0 = _mm512_maskz_loadu_ps(in, r0), R1 = _mm512_maskz_loadu_ps(in, r0 + W);
  __m512 R2 = _mm512_maskz_loadu_ps(in, r0 + 2 * W), R3 = _mm512_maskz_loadu_ps(in, r0 + 3 * W);
  __m512 a = _mm512_permutex2var_ps(R0, even, R2), b = _mm512_permutex2var_ps(R0, odd, R2);
  __m512 c = _mm512_permutex2var_ps(R1, even, R3), d = _mm512_permutex2var_ps(R1, odd, R3);
  __m512i off, i0, i1;
  __m512 m = window_max(a, b, c, d, W, &off);
  _mm256_mask_storeu_ps(y + k * OW, out, _mm512_castps512_ps256(m));
  _mm256_mask_storeu_ps(y + (k + 1) * OW, out, _mm512_extractf32x8_ps(m, 1));
  if (!idx) return;
  index_halves(off, 2 * k * W, 2 * (k + 1) * W, &i0, &i1);
  _mm512_mask_storeu_epi64(idx + k * OW, out, i0);
  _mm512_mask_storeu_epi64(idx + (k + 1) * OW, out, i1);
}

TARGET_AVX512 static void forward_avx512(const float *x, float *y, int64_t *idx, int64_t W,
                                         int64_t FH) {
  int64_t OW = W / 2, k = 0;
  if (OW <= 8)
    for (; k + 2 <= FH; k += 2) rows_forward_narrow(x, y, idx, OW, W, k);
  for (; k < FH; k++)
    row_forward_avx512(x + 2 * k * W, x + (2 * k + 1) * W, y + k * OW, idx ? idx + k * OW : NULL,
                       OW, 2 * k * W, W);
}

#endif

/* ---- entries ------------------------------------------------------------------------- */

void cnn_cpu_max_pool_2x2_forward(int avx512, const float *x, float *y, int64_t *idx, int64_t W,
                                  int64_t FH) {
#ifdef HAVE_AVX512_PATH
  if (avx512) {
    forward_avx512(x, y, idx, W, FH);
    return;
  }
#endif
  forward_portable(x, y, idx, W, FH);
}
