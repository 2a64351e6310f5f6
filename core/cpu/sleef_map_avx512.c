/*
 * sleef_map_avx512.c -- SLEEF's u10 functions over float32 arrays, 16 lanes
 * through its __m512 entries (sleef_map.h).  Compiled with -mavx512f
 * (core/CMakeLists.txt), so sleef.h declares those entries: call it only
 * when the CPU has AVX-512F.  Elsewhere (no x86 AVX-512 in the compiler)
 * it falls back to the baseline map.
 */
#include <sleef.h>

#include "cpu/sleef_map.h"

#ifdef __AVX512F__
#include <immintrin.h>

/* the entries' own type (sleef.h's CONST qualifies the result on clang) */
typedef __typeof__(Sleef_expf16_u10) *vec16_fn;

static vec16_fn entry16(cnn_sleef_fn fn) {
  switch (fn) {
  case SLEEF_EXP: return Sleef_expf16_u10;
  case SLEEF_LOG: return Sleef_logf16_u10;
  default: return Sleef_expm1f16_u10;
  }
}

void cnn_cpu_sleef_map_avx512(cnn_sleef_fn fn, int64_t n, const float *x, float *y) {
  vec16_fn f = entry16(fn);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(x + i)));
  if (i < n) {
    __mmask16 mask = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, mask, f(_mm512_maskz_loadu_ps(mask, x + i)));
  }
}

/* floats 8..15 of v */
static __m256 high_half(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

/* lo as floats 0..7 and hi as floats 8..15 */
static __m512 join_halves(__m256 lo, __m256 hi) {
  __m512d both =
      _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1);
  return _mm512_castpd_ps(both);
}

/* 0.5 x erfc(-x / sqrt 2) in double, 8 lanes */
static __m512d gelu8(__m512d x) {
  __m512d e = Sleef_erfcd8_u15(_mm512_mul_pd(x, _mm512_set1_pd(-0.70710678118654752440)));
  return _mm512_mul_pd(_mm512_mul_pd(x, _mm512_set1_pd(0.5)), e);
}
static __m512 gelu16(__m512 x) {
  __m256 lo = _mm512_cvtpd_ps(gelu8(_mm512_cvtps_pd(_mm512_castps512_ps256(x))));
  __m256 hi = _mm512_cvtpd_ps(gelu8(_mm512_cvtps_pd(high_half(x))));
  return join_halves(lo, hi);
}

void cnn_cpu_sleef_gelu_avx512(int64_t n, const float *x, float *y) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, gelu16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    __mmask16 mask = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, mask, gelu16(_mm512_maskz_loadu_ps(mask, x + i)));
  }
}

/* g gelu'(x) = g (0.5 erfc(-x / sqrt 2) + x e^(-x^2/2) / sqrt(2 pi)), 8 lanes;
 * -x^2/2 is exact in double */
static __m512d gelu_grad8(__m512d g, __m512d x) {
  __m512d z = _mm512_mul_pd(x, _mm512_set1_pd(-0.70710678118654752440));
  __m512d cdf = _mm512_mul_pd(_mm512_set1_pd(0.5), Sleef_erfcd8_u15(z));
  __m512d e = Sleef_expd8_u10(_mm512_mul_pd(_mm512_set1_pd(-0.5), _mm512_mul_pd(x, x)));
  __m512d pdf = _mm512_mul_pd(_mm512_set1_pd(0.39894228040143267794), e);
  return _mm512_mul_pd(g, _mm512_fmadd_pd(x, pdf, cdf));
}
static __m256 gelu_grad_half(__m256 g, __m256 x) {
  return _mm512_cvtpd_ps(gelu_grad8(_mm512_cvtps_pd(g), _mm512_cvtps_pd(x)));
}
static __m512 gelu_grad16(__m512 g, __m512 x) {
  __m256 lo = gelu_grad_half(_mm512_castps512_ps256(g), _mm512_castps512_ps256(x));
  __m256 hi = gelu_grad_half(high_half(g), high_half(x));
  return join_halves(lo, hi);
}

void cnn_cpu_sleef_gelu_grad_avx512(int64_t n, const float *g, const float *x, float *out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, gelu_grad16(_mm512_loadu_ps(g + i), _mm512_loadu_ps(x + i)));
  if (i < n) {
    __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    __m512 r = gelu_grad16(_mm512_maskz_loadu_ps(m, g + i), _mm512_maskz_loadu_ps(m, x + i));
    _mm512_mask_storeu_ps(out + i, m, r);
  }
}
#else
void cnn_cpu_sleef_gelu_grad_avx512(int64_t n, const float *g, const float *x, float *out) {
  cnn_cpu_sleef_gelu_grad_base(n, g, x, out);
}
void cnn_cpu_sleef_map_avx512(cnn_sleef_fn fn, int64_t n, const float *x, float *y) {
  cnn_cpu_sleef_map_base(fn, n, x, y);
}
void cnn_cpu_sleef_gelu_avx512(int64_t n, const float *x, float *y) {
  cnn_cpu_sleef_gelu_base(n, x, y);
}
#endif
