/*
 * max_pool_blocked16.c -- the float32 2x2 stride-2 max pool (no padding,
 * floor) on oneDNN's channel-blocked layout nChw16c, forward with a one-
 * byte tap index per output and backward from it, with AVX-512: the pool
 * inside the training block conv -> batch norm -> ReLU -> max pool
 * (conv_block_onednn.c), which ran oneDNN's pooling primitives there.
 *
 * Why: in nChw16c a pixel's 16 channels of a channel block are one
 * 64-byte vector, so a window is four vector loads, a maximum and a
 * compare per tap, and backward writes each window's four vectors once
 * (no zero-then-scatter).  oneDNN 2.6's jit pooling ran at 11 GB/s on the
 * example network's 64x32x28x28 block; this is 2.3-3.4x faster alone
 * (README, Performance).
 *
 * Layout: x is N x CB x H x W x 16 floats (CB = channels / 16), y and tap
 * N x CB x (H/2) x (W/2) x 16.  The rule is pool.c's and max_pool_2x2.c's:
 * the taps of a window in the order (0,0), (0,1), (1,0), (1,1), a later
 * tap v taken when v > best or v is NaN -- the first maximum wins ties and
 * the last NaN is kept; tap[i] is that tap's number, 0-3.  Backward writes
 * dy to the chosen tap and 0 to the other three, and 0 to the last row and
 * column of an odd H or W (floor: no window reads them).
 */
#include "cpu/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <string.h>

#define TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
#define LANES         16

/* best := v where v > best or v is NaN; tap := t there. */
TARGET_AVX512 static inline void take(__m512 v, int t, __m512 *best, __m128i *tap) {
  __mmask16 m = _mm512_cmp_ps_mask(v, *best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  *best = _mm512_mask_mov_ps(*best, m, v);
  *tap = _mm_mask_mov_epi8(*tap, m, _mm_set1_epi8((char)t));
}

/* One plane of one channel block: x H x W x 16 -> y, tap (H/2) x (W/2) x 16. */
TARGET_AVX512 static void forward_plane(const float *x, int64_t H, int64_t W, float *y,
                                        uint8_t *tap) {
  int64_t OH = H / 2, OW = W / 2;
  for (int64_t oh = 0; oh < OH; oh++)
    for (int64_t ow = 0; ow < OW; ow++) {
      const float *a = x + ((2 * oh) * W + 2 * ow) * LANES, *c = a + W * LANES;
      __m512 best = _mm512_loadu_ps(a);
      __m128i t = _mm_setzero_si128();
      take(_mm512_loadu_ps(a + LANES), 1, &best, &t);
      take(_mm512_loadu_ps(c), 2, &best, &t);
      take(_mm512_loadu_ps(c + LANES), 3, &best, &t);
      int64_t o = (oh * OW + ow) * LANES;
      _mm512_storeu_ps(y + o, best);
      _mm_storeu_si128((__m128i *)(tap + o), t);
    }
}

TARGET_AVX512 void cnn_cpu_max_pool2_blocked16_forward(const float *x, int64_t N, int64_t CB,
                                                       int64_t H, int64_t W, float *y,
                                                       uint8_t *tap) {
  int64_t in = H * W * LANES, out = (H / 2) * (W / 2) * LANES;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * CB; p++) forward_plane(x + p * in, H, W, y + p * out, tap + p * out);
}

/* One plane: every element of dx written (taps, the unchosen three and
 * the odd edge). */
TARGET_AVX512 static void backward_plane(const float *dy, const uint8_t *tap, int64_t H, int64_t W,
                                         float *dx) {
  int64_t OH = H / 2, OW = W / 2;
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t oh = 0; oh < OH; oh++) {
    float *r0 = dx + (2 * oh) * W * LANES, *r1 = r0 + W * LANES;
    for (int64_t ow = 0; ow < OW; ow++) {
      int64_t o = (oh * OW + ow) * LANES;
      __m512 g = _mm512_loadu_ps(dy + o);
      __m128i t = _mm_loadu_si128((const __m128i *)(tap + o));
      float *a = r0 + 2 * ow * LANES, *c = r1 + 2 * ow * LANES;
      _mm512_storeu_ps(a, _mm512_maskz_mov_ps(_mm_cmpeq_epi8_mask(t, _mm_set1_epi8(0)), g));
      _mm512_storeu_ps(a + LANES, _mm512_maskz_mov_ps(_mm_cmpeq_epi8_mask(t, _mm_set1_epi8(1)), g));
      _mm512_storeu_ps(c, _mm512_maskz_mov_ps(_mm_cmpeq_epi8_mask(t, _mm_set1_epi8(2)), g));
      _mm512_storeu_ps(c + LANES, _mm512_maskz_mov_ps(_mm_cmpeq_epi8_mask(t, _mm_set1_epi8(3)), g));
    }
    if (W % 2) {
      _mm512_storeu_ps(r0 + (W - 1) * LANES, zero);
      _mm512_storeu_ps(r1 + (W - 1) * LANES, zero);
    }
  }
  if (H % 2) memset(dx + (H - 1) * W * LANES, 0, (size_t)(W * LANES) * sizeof(float));
}

TARGET_AVX512 void cnn_cpu_max_pool2_blocked16_backward(const float *dy, const uint8_t *tap,
                                                        int64_t N, int64_t CB, int64_t H, int64_t W,
                                                        float *dx) {
  int64_t in = H * W * LANES, out = (H / 2) * (W / 2) * LANES;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * CB; p++)
    backward_plane(dy + p * out, tap + p * out, H, W, dx + p * in);
}

#else /* not x86-64 GCC/Clang: cnn_cpu_use_avx512() is 0, never called */

void cnn_cpu_max_pool2_blocked16_forward(const float *x, int64_t N, int64_t CB, int64_t H,
                                         int64_t W, float *y, uint8_t *tap) {
  (void)x, (void)N, (void)CB, (void)H, (void)W, (void)y, (void)tap;
}

void cnn_cpu_max_pool2_blocked16_backward(const float *dy, const uint8_t *tap, int64_t N,
                                          int64_t CB, int64_t H, int64_t W, float *dx) {
  (void)dy, (void)tap, (void)N, (void)CB, (void)H, (void)W, (void)dx;
}

#endif
