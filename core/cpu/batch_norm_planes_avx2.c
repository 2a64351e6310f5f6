/*
 * batch_norm_planes_avx2.c -- the three bodies batch_norm_planes.c runs in
 * memory order, with AVX2 + FMA, for CPUs without AVX-512 (chosen by
 * cnn_cpu_use_avx2()): every channel's sums over a run of images, and the
 * normalisation and dx plane by plane.  The AVX-512 bodies are
 * batch_norm_avx512.c's; the arithmetic here is the same (float partial
 * sums over at most BLOCK values, 32 lanes as four 8-lane vectors, added
 * into double; the same elementwise expressions, so fused and unfused
 * calls give the same bits), only the order of the double additions
 * differs between the two widths.
 *
 * Why: on an AVX2-only CPU batch norm ran channel by channel (the
 * portable loops of batch_norm.c), and at ResNet-20's 16x16 and 8x8
 * planes a channel is 64 runs of 1 KB or 256 bytes 16-32 KB apart -- too
 * short for the hardware prefetcher: in the training step on a Zen 3
 * those passes ran at 0.28-0.57 of the DRAM copy.
 */
#include "cpu/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define TARGET_AVX2 __attribute__((target("avx2,fma")))
#define BLOCK       1024 /* values of a row per float partial sum (batch_norm_avx512.c's) */

/* The first n (< 8) lanes set. */
TARGET_AVX2 static inline __m256i tail_mask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* 8 floats from p, or the first n of them (the rest 0) when n < 8. */
TARGET_AVX2 static inline __m256 load(const float *p, int64_t n) {
  return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tail_mask(n));
}

/* v's first min(n, 8) lanes to p (a row's tail through a copy: Zen cores
 * microcode vmaskmovps stores). */
TARGET_AVX2 static inline void store(float *p, int64_t n, __m256 v) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
    return;
  }
  float t[8];
  _mm256_storeu_ps(t, v);
  for (int64_t i = 0; i < n; i++) p[i] = t[i];
}

/* dy where y > 0 or y is NaN (relu's gradient), 0 elsewhere; dy alone
 * without y; lanes past n are 0. */
TARGET_AVX2 static inline __m256 grad_of(const float *dy, const float *y, int64_t i, int64_t n) {
  __m256 d = load(dy + i, n);
  if (!y) return d;
  __m256 pass = _mm256_cmp_ps(load(y + i, n), _mm256_setzero_ps(), _CMP_NLE_UQ);
  return _mm256_and_ps(pass, d);
}

/* The sum of a vector's 8 floats into double, added to acc. */
TARGET_AVX2 static inline __m256d widen_add(__m256d acc, __m256 v) {
  acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

/* One step of 8 values at i (n of them valid): s1 += t, s2 += t*d with d
 * = x - ref and t = d (forward) or the gradient (backward). */
#define SUM_STEP(i, n, A1, A2)                                                                     \
  do {                                                                                             \
    __m256 d = _mm256_sub_ps(load(x + (i), n), r);                                                 \
    if ((n) < 8) d = _mm256_and_ps(_mm256_castsi256_ps(tail_mask(n)), d);                          \
    __m256 t = grad ? grad_of(dy, y, i, n) : d;                                                    \
    A1 = _mm256_add_ps(A1, t), A2 = _mm256_fmadd_ps(t, d, A2);                                     \
  } while (0)

/* Float partial sums of [i0, i1) into the lanes f[0..8): four vectors per
 * sum, 32 values a step (f[2j] sum t, f[2j+1] sum t*d). */
TARGET_AVX2 static inline void float_sums(int grad, const float *x, const float *dy, const float *y,
                                          __m256 r, int64_t i0, int64_t i1, __m256 f[8]) {
  __m256 a1 = f[0], a2 = f[1], b1 = f[2], b2 = f[3], c1 = f[4], c2 = f[5], e1 = f[6], e2 = f[7];
  int64_t i = i0;
  for (; i + 32 <= i1; i += 32) {
    SUM_STEP(i, 8, a1, a2);
    SUM_STEP(i + 8, 8, b1, b2);
    SUM_STEP(i + 16, 8, c1, c2);
    SUM_STEP(i + 24, 8, e1, e2);
  }
  for (; i < i1; i += 8) SUM_STEP(i, i1 - i, a1, a2);
  f[0] = a1, f[1] = a2, f[2] = b1, f[3] = b2, f[4] = c1, f[5] = c2, f[6] = e1, f[7] = e2;
}
#undef SUM_STEP

/* The float lanes added into the double sums, and cleared. */
TARGET_AVX2 static inline void widen_lanes(__m256 f[8], __m256d *s1, __m256d *s2) {
  *s1 = widen_add(*s1, _mm256_add_ps(_mm256_add_ps(f[0], f[2]), _mm256_add_ps(f[4], f[6])));
  *s2 = widen_add(*s2, _mm256_add_ps(_mm256_add_ps(f[1], f[3]), _mm256_add_ps(f[5], f[7])));
  for (int j = 0; j < 8; j++) f[j] = _mm256_setzero_ps();
}

TARGET_AVX2 static inline double reduce(__m256d v) {
  __m128d h = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

/* batch_norm_avx512.c's image_sums: out[2c] = sum t, out[2c+1] = sum t*d
 * over images [n0, n1) of every channel. */
TARGET_AVX2 static void image_sums(int grad, int64_t n0, int64_t n1, int64_t C, int64_t L,
                                   const float *x, const float *dy, const float *y,
                                   const float *ref, double *out) {
  for (int64_t c = 0; c < C; c++) {
    __m256d t1 = _mm256_setzero_pd(), t2 = t1;
    __m256 r = _mm256_set1_ps(ref[c]);
    __m256 f[8];
    for (int j = 0; j < 8; j++) f[j] = _mm256_setzero_ps();
    int64_t held = 0; /* values in the float lanes: at most BLOCK, across rows */
    for (int64_t n = n0; n < n1; n++) {
      int64_t o = (n * C + c) * L;
      for (int64_t i0 = 0; i0 < L; i0 += BLOCK) {
        int64_t i1 = L - i0 < BLOCK ? L : i0 + BLOCK;
        if (held + (i1 - i0) > BLOCK) widen_lanes(f, &t1, &t2), held = 0;
        float_sums(grad, x + o, grad ? dy + o : NULL, grad && y ? y + o : NULL, r, i0, i1, f);
        held += i1 - i0;
      }
    }
    widen_lanes(f, &t1, &t2);
    out[2 * c] = reduce(t1), out[2 * c + 1] = reduce(t2);
  }
}

void cnn_cpu_bn_image_sums_f32_avx2(int grad, int64_t n0, int64_t n1, int64_t C, int64_t L,
                                    const float *x, const float *dy, const float *y,
                                    const float *ref, double *out) {
  if (grad)
    image_sums(1, n0, n1, C, L, x, dy, y, ref, out);
  else
    image_sums(0, n0, n1, C, L, x, NULL, NULL, ref, out);
}

/* One row: y = (x - m)*k + b, then relu (NaN kept, -0.0 -> +0.0) when
 * asked (relu 1), or the residual r added and then relu (relu 2). */
TARGET_AVX2 static inline void normalize_row(int relu, int64_t L, const float *x, const float *r,
                                             __m256 mv, __m256 kv, __m256 bv, float *y) {
  for (int64_t i = 0; i < L; i += 8) {
    int64_t n = L - i;
    __m256 v = _mm256_fmadd_ps(_mm256_sub_ps(load(x + i, n), mv), kv, bv);
    if (relu == 2) v = _mm256_add_ps(v, load(r + i, n));
    if (relu) v = _mm256_and_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_NLE_UQ), v);
    store(y + i, n, v);
  }
}

TARGET_AVX2 void cnn_cpu_bn_normalize_planes_f32_avx2(int64_t p0, int64_t p1, int64_t C, int64_t L,
                                                      const float *x, const float *r,
                                                      const float *k, float *y, int relu) {
  int64_t c = p0 % C;
  for (int64_t p = p0; p < p1; p++) {
    const float *kc = k + 3 * c;
    __m256 mv = _mm256_set1_ps(kc[0]), kv = _mm256_set1_ps(kc[1]), bv = _mm256_set1_ps(kc[2]);
    const float *rp = r ? r + p * L : NULL;
    if (relu == 2)
      normalize_row(2, L, x + p * L, rp, mv, kv, bv, y + p * L);
    else if (relu)
      normalize_row(1, L, x + p * L, NULL, mv, kv, bv, y + p * L);
    else
      normalize_row(0, L, x + p * L, NULL, mv, kv, bv, y + p * L);
    if (++c == C) c = 0;
  }
}

TARGET_AVX2 void cnn_cpu_bn_dx_planes_f32_avx2(int64_t p0, int64_t p1, int64_t C, int64_t L,
                                               const float *dy, const float *y, const float *x,
                                               const float *mean, const float *k, float *dx) {
  int64_t c = p0 % C;
  for (int64_t p = p0; p < p1; p++) {
    const float *kc = k + 3 * c;
    __m256 mv = _mm256_set1_ps(mean[c]), kv = _mm256_set1_ps(kc[0]);
    __m256 kxv = _mm256_set1_ps(kc[1]), k0v = _mm256_set1_ps(kc[2]);
    int64_t o = p * L;
    for (int64_t i = 0; i < L; i += 8) {
      int64_t n = L - i;
      __m256 g = grad_of(dy + o, y ? y + o : NULL, i, n);
      __m256 d = _mm256_sub_ps(load(x + o + i, n), mv);
      store(dx + o + i, n, _mm256_fmadd_ps(kxv, d, _mm256_fmadd_ps(kv, g, k0v)));
    }
    if (++c == C) c = 0;
  }
}

#else /* no AVX2 path on this compiler/architecture: never called */

void cnn_cpu_bn_image_sums_f32_avx2(int grad, int64_t n0, int64_t n1, int64_t C, int64_t L,
                                    const float *x, const float *dy, const float *y,
                                    const float *ref, double *out) {}
void cnn_cpu_bn_normalize_planes_f32_avx2(int64_t p0, int64_t p1, int64_t C, int64_t L,
                                          const float *x, const float *r, const float *k, float *y,
                                          int relu) {}
void cnn_cpu_bn_dx_planes_f32_avx2(int64_t p0, int64_t p1, int64_t C, int64_t L, const float *dy,
                                   const float *y, const float *x, const float *mean,
                                   const float *k, float *dx) {}
#endif
