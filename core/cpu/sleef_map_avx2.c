/*
 * sleef_map_avx2.c -- SLEEF's u10 functions over float32 arrays at the
 * build's baseline ISA (sleef_map.h): 8 lanes through SLEEF's __m256
 * entries (which pick AVX2+FMA or AVX at run time) when the build targets
 * AVX, SLEEF's scalar entries otherwise.
 */
#include <sleef.h>

#include "cpu/sleef_map.h"

#ifdef __AVX__
#include <immintrin.h>

/* the entries' own type: sleef.h declares them CONST, which is a const
 * qualifier on the result for some compilers (clang) */
typedef __typeof__(Sleef_expf8_u10) *vec8_fn;

static vec8_fn entry8(cnn_sleef_fn fn) {
  switch (fn) {
  case SLEEF_EXP: return Sleef_expf8_u10;
  case SLEEF_LOG: return Sleef_logf8_u10;
  default: return Sleef_expm1f8_u10;
  }
}

/* lanes [0, m) of the mask set, m in 0..8 */
static __m256i tail_mask(int64_t m) {
  __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)m), lane);
}

void cnn_cpu_sleef_map_base(cnn_sleef_fn fn, int64_t n, const float *x, float *y) {
  vec8_fn f = entry8(fn);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i)));
  if (i < n) {
    __m256i mask = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, mask, f(_mm256_maskload_ps(x + i, mask)));
  }
}

/* 0.5 x erfc(-x / sqrt 2) in double, 4 lanes */
static __m256d gelu4(__m256d x) {
  __m256d e = Sleef_erfcd4_u15(_mm256_mul_pd(x, _mm256_set1_pd(-0.70710678118654752440)));
  return _mm256_mul_pd(_mm256_mul_pd(x, _mm256_set1_pd(0.5)), e);
}
static __m256 gelu8(__m256 x) {
  __m128 lo = _mm256_cvtpd_ps(gelu4(_mm256_cvtps_pd(_mm256_castps256_ps128(x))));
  __m128 hi = _mm256_cvtpd_ps(gelu4(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))));
  return _mm256_set_m128(hi, lo);
}

void cnn_cpu_sleef_gelu_base(int64_t n, const float *x, float *y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, gelu8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    __m256i mask = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, mask, gelu8(_mm256_maskload_ps(x + i, mask)));
  }
}

/* g gelu'(x) = g (0.5 erfc(-x / sqrt 2) + x e^(-x^2/2) / sqrt(2 pi)), 4 lanes;
 * the same operations as sleef_map_avx512.c's, FMA included, for the same
 * bits */
static __m256d gelu_grad4(__m256d g, __m256d x) {
  __m256d z = _mm256_mul_pd(x, _mm256_set1_pd(-0.70710678118654752440));
  __m256d cdf = _mm256_mul_pd(_mm256_set1_pd(0.5), Sleef_erfcd4_u15(z));
  __m256d e = Sleef_expd4_u10(_mm256_mul_pd(_mm256_set1_pd(-0.5), _mm256_mul_pd(x, x)));
  __m256d pdf = _mm256_mul_pd(_mm256_set1_pd(0.39894228040143267794), e);
#ifdef __FMA__
  return _mm256_mul_pd(g, _mm256_fmadd_pd(x, pdf, cdf));
#else
  return _mm256_mul_pd(g, _mm256_add_pd(_mm256_mul_pd(x, pdf), cdf));
#endif
}
static __m128 gelu_grad_half(__m128 g, __m128 x) {
  return _mm256_cvtpd_ps(gelu_grad4(_mm256_cvtps_pd(g), _mm256_cvtps_pd(x)));
}
static __m256 gelu_grad8(__m256 g, __m256 x) {
  __m128 lo = gelu_grad_half(_mm256_castps256_ps128(g), _mm256_castps256_ps128(x));
  __m128 hi = gelu_grad_half(_mm256_extractf128_ps(g, 1), _mm256_extractf128_ps(x, 1));
  return _mm256_set_m128(hi, lo);
}

void cnn_cpu_sleef_gelu_grad_base(int64_t n, const float *g, const float *x, float *out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, gelu_grad8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(x + i)));
  if (i < n) {
    __m256i m = tail_mask(n - i);
    __m256 r = gelu_grad8(_mm256_maskload_ps(g + i, m), _mm256_maskload_ps(x + i, m));
    _mm256_maskstore_ps(out + i, m, r);
  }
}
#else
void cnn_cpu_sleef_gelu_grad_base(int64_t n, const float *g, const float *x, float *out) {
  for (int64_t i = 0; i < n; i++) {
    double d = x[i], cdf = 0.5 * Sleef_erfc_u15(d * -0.70710678118654752440);
    double pdf = 0.39894228040143267794 * Sleef_exp_u10(-0.5 * (d * d));
    out[i] = (float)(g[i] * (cdf + d * pdf));
  }
}

void cnn_cpu_sleef_gelu_base(int64_t n, const float *x, float *y) {
  for (int64_t i = 0; i < n; i++) {
    double d = x[i];
    y[i] = (float)(0.5 * d * Sleef_erfc_u15(d * -0.70710678118654752440));
  }
}

typedef __typeof__(Sleef_expf_u10) *scalar_fn;

static scalar_fn entry1(cnn_sleef_fn fn) {
  switch (fn) {
  case SLEEF_EXP: return Sleef_expf_u10;
  case SLEEF_LOG: return Sleef_logf_u10;
  default: return Sleef_expm1f_u10;
  }
}

void cnn_cpu_sleef_map_base(cnn_sleef_fn fn, int64_t n, const float *x, float *y) {
  scalar_fn f = entry1(fn);
  for (int64_t i = 0; i < n; i++) y[i] = f(x[i]);
}
#endif
