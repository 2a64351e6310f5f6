/*
 * conv_1x1_strided_avx512.c -- the small products and the strided gather
 * of conv_1x1_strided.c with AVX-512 (chosen per call by
 * cnn_cpu_use_avx512()).
 *
 * Why: OpenBLAS packs both operands on every call, and here a call is one
 * block of one image (K x C weights, C = 16-64, times a few hundred
 * pixels): the weight-gradient products of ResNet-20's layer2 shortcut ran
 * at ~50 GFLOP/s a core with the data in cache.  These hold the output
 * tile in registers and read each operand once:
 *
 *   product  out (M x P) = A (M x D) B (D x P), or += : tiles of 4 rows
 *            x 64 columns, 16 accumulators; per d, 4 loads of B's row
 *            and 4 broadcasts of A; column tails masked, row tails one
 *            row a tile; under 64 columns, tiles of 8 rows x 16.  The
 *            weight gradient is this product too, with the gathered
 *            pixels transposed (P x C), so no tile ends in horizontal
 *            sums (dot products over an image's 64 pixels spent more time
 *            reducing than multiplying)
 *   gather   xs (C x P), for column stride 2: 32 floats of a row loaded
 *            and their even lanes kept by one permute
 *   gather_t the same pixels as P x C (the weight gradient's operand): a
 *            pixel's 16 channels, H*W floats apart, in one gather
 *            instruction (any stride)
 *   scatter  dx's rows for column stride 2: t's values expand-loaded into
 *            the even lanes, zeros in the odd ones and the other rows
 *            (per-row memset and scalar stores cost more than the bytes:
 *            ResNet-20's layer3 rows are 16 floats); for a large dx
 *            (stream = 1) as non-temporal stores, which skip reading
 *            the lines in before writing them: ResNet-20's layer2
 *            shortcut backward 0.72-0.81 -> 0.55-0.58 ms in the step,
 *            of which the gradient sum that reads dx next gave back
 *            0.07 ms (layer3's: 0.10 saved, 0.09 given back)
 *
 * Accumulation is in float in d order, as OpenBLAS's kernels do; results
 * match the portable path to rounding.
 */
#include <stdint.h>

#include "cpu/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define LANES         16

TARGET_AVX512 ALWAYS_INLINE __mmask16 lanes_below(int64_t n) {
  return n >= LANES ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1);
}

/* ---- product -------------------------------------------------------------------------- */

/* out[r][p0 + 16v + l] for rows r < ROWS and vectors v < VECS; the last
 * vector keeps the lanes in `last`.  ROWS, VECS are literals. */
TARGET_AVX512 ALWAYS_INLINE void product_tile(int ROWS, int VECS, __mmask16 last, int add,
                                              int64_t D, const float *A, int64_t lda,
                                              const float *B, int64_t ldb, float *out,
                                              int64_t ldo) {
  __m512 acc[8][4]; /* ROWS <= 8, VECS <= 4 */
  for (int r = 0; r < ROWS; r++)
    for (int v = 0; v < VECS; v++)
      acc[r][v] =
          add ? _mm512_maskz_loadu_ps(v == VECS - 1 ? last : 0xFFFF, out + r * ldo + v * LANES)
              : _mm512_setzero_ps();
  for (int64_t d = 0; d < D; d++) {
    __m512 b[4];
    for (int v = 0; v < VECS; v++)
      b[v] = _mm512_maskz_loadu_ps(v == VECS - 1 ? last : 0xFFFF, B + d * ldb + v * LANES);
    for (int r = 0; r < ROWS; r++) {
      __m512 a = _mm512_set1_ps(A[r * lda + d]);
      for (int v = 0; v < VECS; v++) acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < ROWS; r++)
    for (int v = 0; v < VECS; v++)
      _mm512_mask_storeu_ps(out + r * ldo + v * LANES, v == VECS - 1 ? last : 0xFFFF, acc[r][v]);
}

/* Rows [r0, r1) of the product, ROWS at a time (a literal). */
TARGET_AVX512 ALWAYS_INLINE void product_rows(int ROWS, int64_t r0, int64_t r1, int add, int64_t D,
                                              int64_t P, const float *A, int64_t lda,
                                              const float *B, int64_t ldb, float *out,
                                              int64_t ldo) {
  for (int64_t r = r0; r + ROWS <= r1; r += ROWS) {
    const float *a = A + r * lda;
    float *o = out + r * ldo;
    int64_t p = 0;
    for (; p + 4 * LANES <= P; p += 4 * LANES)
      product_tile(ROWS, 4, 0xFFFF, add, D, a, lda, B + p, ldb, o + p, ldo);
    for (; p < P; p += LANES)
      product_tile(ROWS, 1, lanes_below(P - p), add, D, a, lda, B + p, ldb, o + p, ldo);
  }
}

/* product_rows for fewer than 64 columns: one vector a tile, so ROWS
 * accumulators (4 would leave the FMA units waiting on each other). */
TARGET_AVX512 ALWAYS_INLINE void product_narrow(int ROWS, int64_t r0, int64_t r1, int add,
                                                int64_t D, int64_t P, const float *A, int64_t lda,
                                                const float *B, int64_t ldb, float *out,
                                                int64_t ldo) {
  for (int64_t r = r0; r + ROWS <= r1; r += ROWS)
    for (int64_t p = 0; p < P; p += LANES)
      product_tile(ROWS, 1, lanes_below(P - p), add, D, A + r * lda, lda, B + p, ldb,
                   out + r * ldo + p, ldo);
}

TARGET_AVX512 void cnn_cpu_product_f32_avx512(int add, int64_t M, int64_t D, int64_t P,
                                              const float *A, int64_t lda, const float *B,
                                              int64_t ldb, float *out, int64_t ldo) {
  if (P < 4 * LANES) { /* narrow: 8 rows of one vector a tile */
    int64_t full = M / 8 * 8;
    product_narrow(8, 0, full, add, D, P, A, lda, B, ldb, out, ldo);
    product_narrow(1, full, M, add, D, P, A, lda, B, ldb, out, ldo);
    return;
  }
  int64_t full = M / 4 * 4;
  product_rows(4, 0, full, add, D, P, A, lda, B, ldb, out, ldo);
  product_rows(1, full, M, add, D, P, A, lda, B, ldb, out, ldo);
}

/* ---- gather and scatter ---------------------------------------------------------------- */

/* out[j] = row[2j] for j < n: 32 floats loaded, their even lanes kept by
 * one permute; the tail masked (the last kept float is row[2n - 2]). */
TARGET_AVX512 ALWAYS_INLINE void gather_row_2(const float *row, int64_t n, float *out) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  for (int64_t j = 0; j < n; j += LANES) {
    int64_t floats = 2 * (n - j) - 1; /* row[2j ..] up to the last kept one */
    __m512 lo = _mm512_maskz_loadu_ps(lanes_below(floats), row + 2 * j);
    __m512 hi = _mm512_maskz_loadu_ps(floats > LANES ? lanes_below(floats - LANES) : 0,
                                      row + 2 * j + LANES);
    _mm512_mask_storeu_ps(out + j, lanes_below(n - j), _mm512_permutex2var_ps(lo, even, hi));
  }
}

TARGET_AVX512 void cnn_cpu_strided_gather_f32_avx512(const cnn_conv_shape *s, const float *x,
                                                     int64_t i0, int64_t i1, float *xs) {
  int64_t P = (i1 - i0) * s->OW;
  for (int64_t c = 0; c < s->C; c++)
    for (int64_t i = i0; i < i1; i++)
      gather_row_2(x + (c * s->H + i * s->sh) * s->W, s->OW, xs + c * P + (i - i0) * s->OW);
}

/* Pixel by pixel, 16 channels at a time with one gather instruction (the
 * channels lie H*W floats apart: 15*H*W fits the 32-bit offsets, which
 * cnn_cpu_conv2d_1x1_strided_takes() ensures). */
TARGET_AVX512 void cnn_cpu_strided_gather_t_f32_avx512(const cnn_conv_shape *s, const float *x,
                                                       int64_t i0, int64_t i1, float *xt) {
  int64_t HW = s->H * s->W;
  __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i apart = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int)HW));
  for (int64_t i = i0; i < i1; i++)
    for (int64_t j = 0; j < s->OW; j++) {
      const float *pixel = x + i * s->sh * s->W + j * s->sw;
      float *out = xt + ((i - i0) * s->OW + j) * s->C;
      for (int64_t c = 0; c < s->C; c += LANES) {
        __mmask16 m = lanes_below(s->C - c);
        __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, apart, pixel + c * HW, 4);
        _mm512_mask_storeu_ps(out + c, m, v);
      }
    }
}

/* A vector of dx: streamed past the caches (stream = 1) when it is a
 * whole aligned vector, else stored. */
TARGET_AVX512 ALWAYS_INLINE void put(int stream, float *p, __mmask16 m, __m512 v) {
  if (stream && m == 0xFFFF && ((uintptr_t)p & 63) == 0)
    _mm512_stream_ps(p, v);
  else
    _mm512_mask_storeu_ps(p, m, v);
}

/* One input row of dx: t's values at the even columns, 0 at the odd ones
 * (expand-loads put consecutive floats into the even lanes). */
TARGET_AVX512 ALWAYS_INLINE void scatter_row_2(int stream, const float *t, int64_t W, float *row) {
  for (int64_t w = 0; w < W; w += LANES) {
    __mmask16 in = lanes_below(W - w);
    put(stream, row + w, in, _mm512_maskz_expandloadu_ps(in & 0x5555, t + w / 2));
  }
}

TARGET_AVX512 void cnn_cpu_strided_scatter_f32_avx512(const cnn_conv_shape *s, const float *t,
                                                      int64_t i0, int64_t i1, int64_t h0,
                                                      int64_t h1, int stream, float *dx) {
  int64_t P = (i1 - i0) * s->OW;
  for (int64_t c = 0; c < s->C; c++)
    for (int64_t h = h0; h < h1; h++) {
      float *row = dx + (c * s->H + h) * s->W;
      if (h % s->sh == 0 && h / s->sh < i1) {
        scatter_row_2(stream, t + c * P + (h / s->sh - i0) * s->OW, s->W, row);
      } else {
        for (int64_t w = 0; w < s->W; w += LANES)
          put(stream, row + w, lanes_below(s->W - w), _mm512_setzero_ps());
      }
    }
  if (stream) _mm_sfence(); /* the streamed stores before anything that reads dx */
}

#else /* no AVX-512 path on this compiler or architecture: never called */

void cnn_cpu_product_f32_avx512(int add, int64_t M, int64_t D, int64_t P, const float *A,
                                int64_t lda, const float *B, int64_t ldb, float *out, int64_t ldo) {
  (void)add, (void)M, (void)D, (void)P, (void)A, (void)lda, (void)B, (void)ldb, (void)out,
      (void)ldo;
}
void cnn_cpu_strided_gather_f32_avx512(const cnn_conv_shape *s, const float *x, int64_t i0,
                                       int64_t i1, float *xs) {
  (void)s, (void)x, (void)i0, (void)i1, (void)xs;
}
void cnn_cpu_strided_gather_t_f32_avx512(const cnn_conv_shape *s, const float *x, int64_t i0,
                                         int64_t i1, float *xt) {
  (void)s, (void)x, (void)i0, (void)i1, (void)xt;
}
void cnn_cpu_strided_scatter_f32_avx512(const cnn_conv_shape *s, const float *t, int64_t i0,
                                        int64_t i1, int64_t h0, int64_t h1, int stream, float *dx) {
  (void)s, (void)t, (void)i0, (void)i1, (void)h0, (void)h1, (void)stream, (void)dx;
}
#endif
