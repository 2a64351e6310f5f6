/*
 * global_pool_avx512.c -- global average pooling of float32 planes with
 * AVX-512 (pool.c's adaptive average pool when OH = OW = 1, chosen per call
 * by cnn_cpu_use_avx512()): the mean of each plane, and backward each
 * plane filled with its gradient over the plane's size.
 *
 * Why: pool.c's loops sum in double with `omp simd`, which GCC turned into
 * partial sums spilled to the stack and added one by one, and work out the
 * bins with two integer divisions a plane; ResNet-20's global pool
 * (64x64x8x8: 4,096 planes of 64 floats) read its 1 MB at 33 GB/s, half
 * the rate of a copy made at that point of the step.  Here a plane is four
 * 16-lane float accumulators (64 floats a step, a masked tail), added into
 * double every BLOCK floats, as batch_norm_avx512.c; the mean is the double
 * sum over the plane's size, rounded once to float.  Backward stores
 * (float)(dy / size) over the plane: the bits of pool.c's zero-and-add.
 */
#include "cpu/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
#define BLOCK         1024 /* floats of a plane per float partial sum */

/* The lanes of a step at i of n: all 16, or the tail's. */
TARGET_AVX512 static inline __mmask16 lanes(int64_t n, int64_t i) {
  return n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
}

/* The sum of x[i0, i1) (i1 - i0 <= BLOCK) in float lanes, added to acc. */
TARGET_AVX512 static inline __m512d block_sum(const float *x, int64_t i0, int64_t i1, __m512d acc) {
  __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a;
  int64_t i = i0;
  for (; i + 64 <= i1; i += 64) {
    a = _mm512_add_ps(a, _mm512_loadu_ps(x + i));
    b = _mm512_add_ps(b, _mm512_loadu_ps(x + i + 16));
    c = _mm512_add_ps(c, _mm512_loadu_ps(x + i + 32));
    d = _mm512_add_ps(d, _mm512_loadu_ps(x + i + 48));
  }
  for (; i < i1; i += 16) a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(lanes(i1, i), x + i));
  __m512 s = _mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d));
  acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(s)));
  return _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_extractf32x8_ps(s, 1)));
}

TARGET_AVX512 void cnn_cpu_global_avg_pool_f32_avx512(const float *x, int64_t planes, int64_t len,
                                                      float *y) {
  for (int64_t p = 0; p < planes; p++) {
    const float *xp = x + p * len;
    __m512d acc = _mm512_setzero_pd();
    for (int64_t i0 = 0; i0 < len; i0 += BLOCK)
      acc = block_sum(xp, i0, len - i0 < BLOCK ? len : i0 + BLOCK, acc);
    y[p] = (float)(_mm512_reduce_add_pd(acc) / (double)len);
  }
}

TARGET_AVX512 void cnn_cpu_global_avg_pool_backward_f32_avx512(const float *dy, int64_t planes,
                                                               int64_t len, float *dx) {
  for (int64_t p = 0; p < planes; p++) {
    float *dxp = dx + p * len;
    __m512 g = _mm512_set1_ps((float)((double)dy[p] / (double)len));
    int64_t i = 0;
    for (; i + 16 <= len; i += 16) _mm512_storeu_ps(dxp + i, g);
    if (i < len) _mm512_mask_storeu_ps(dxp + i, lanes(len, i), g);
  }
}

#else /* not x86-64 GCC/Clang: cnn_cpu_use_avx512() is 0, never called */

void cnn_cpu_global_avg_pool_f32_avx512(const float *x, int64_t planes, int64_t len, float *y) {
  (void)x, (void)planes, (void)len, (void)y;
}

void cnn_cpu_global_avg_pool_backward_f32_avx512(const float *dy, int64_t planes, int64_t len,
                                                 float *dx) {
  (void)dy, (void)planes, (void)len, (void)dx;
}

#endif
