/*
 * batch_norm.c -- batch normalisation over x viewed as N x C x L.
 *
 * Channel c owns the M = N*L values x[n, c, l]; everything is per channel,
 * so the loops run `#pragma omp parallel for` over C and each thread reads
 * and writes only its channel's elements and parameters.
 *
 *   training:  mean = sum x / M,  var = sum (x - mean)^2 / M, both from
 *              one pass over d = x - K (K = the channel's first value):
 *              mean = K + sum d / M,  var = sum d^2 / M - (sum d / M)^2
 *   eval:      mean, var = running_mean, running_var
 *   xhat = (x - mean) * invstd,  invstd = 1/sqrt(var + eps),  y = gamma*xhat + beta
 *
 * Backward (training, batch statistics):
 *   dbeta = sum dy,  dgamma = sum dy*xhat,
 *   dx = gamma*invstd * (dy - dbeta/M - xhat*dgamma/M)
 * Backward (eval, fixed statistics): dx = gamma*invstd*dy, same dgamma/dbeta.
 *
 * Fused relu (cnn_cpu_batch_norm_relu_*, the pair BatchNorm -> ReLU of a
 * network): forward writes relu(y) in the same pass; backward takes that
 * output and uses dy where it is > 0 (or NaN), 0 elsewhere, in place of
 * dy -- what relu's backward would have handed batch norm -- so neither
 * relu's pass nor its gradient tensor exists.  With a residual
 * (cnn_cpu_batch_norm_add_relu_forward, a residual block's end) forward
 * writes relu(y + r) in that pass; its backward is the plain one, over
 * relu's gradient, which core/ops makes once for r's input too.
 *
 * float32 has its own bodies: float partial sums added into double per
 * block of a row, and the elementwise passes in float (x - mean first).
 * The double bodies converted every element, which was the cost on
 * AVX-512 machines (A/B in the README).
 *
 * float32 with L = 1 (a channels-last tensor as N*H*W rows, BatchNorm1d)
 * runs in row order with the channels in the vector lanes
 * (batch_norm_rows.c).
 *
 * Training runs one channel per iteration (its statistics need all of
 * it), except float32 on AVX-512 at the shapes where batch_norm_planes.c
 * runs it in memory order (1.25-1.75x inside ResNet-20's step); eval needs no
 * statistics, so it runs plane by plane in memory order (one contiguous
 * stream per thread), 1.2-1.3x faster on 1000x32x28x28 and 1000x64x14x14.
 * Sums are in double for both dtypes, LANES partial sums each (`omp simd`
 * vectorises them; one accumulator was latency-bound).
 * gamma/beta NULL mean 1 and 0.  The per-channel bodies are instantiated
 * for float32/float64 by always-inline calls with a literal `f64`, chosen
 * inside the parallel loop (OpenMP outlines the loop before inlining).
 */
#include <assert.h>
#include <math.h>

#include "cpu/batch_norm_internal.h"
#include "cpu/kernels.h"
#include "elementwise_math.h" /* cnn_relu: the fused relu is the relu op's */

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Independent partial sums per reduction: one vector accumulator would
 * make every add wait for the previous one (4 cycles for 4 doubles), a
 * latency bound 3x below the L2 bandwidth the channel is read at. */
#define LANES 16

/* Sums over the channel's M values of d = x - K and of d^2, in one pass.
 * K (the channel's first value) keeps the one-pass variance
 * sum(d^2)/M - (sum(d)/M)^2 from cancelling when |mean| >> std. */
ALWAYS_INLINE void channel_moments(int f64, int64_t N, int64_t C, int64_t L, const void *x,
                                   int64_t c, double K, double *s1, double *s2) {
  double a1[LANES] = {0}, a2[LANES] = {0};
  for (int64_t n = 0; n < N; n++) {
    int64_t base = (n * C + c) * L, i = 0;
    for (; i + LANES <= L; i += LANES)
#pragma omp simd
      for (int j = 0; j < LANES; j++) {
        double d = cnn_cpu_ld(x, base + i + j, f64) - K;
        a1[j] += d, a2[j] += d * d;
      }
    for (; i < L; i++) {
      double d = cnn_cpu_ld(x, base + i, f64) - K;
      a1[i % LANES] += d, a2[i % LANES] += d * d;
    }
  }
  double t1 = 0, t2 = 0;
  for (int j = 0; j < LANES; j++) t1 += a1[j], t2 += a2[j];
  *s1 = t1, *s2 = t2;
}

/* y = (x - mean)*invstd*gamma + beta over one channel (float64), then
 * relu (cnn_relu: NaN stays NaN) when asked (relu 1), or the residual r
 * added and then relu (relu 2) -- batch norm's value plus r, rounded as
 * the add op rounds it, so the same bits as the ops one after another. */
static void channel_normalize_f64(int64_t N, int64_t C, int64_t L, const double *x, int64_t c,
                                  double mean, double invstd, double g, double b, double *y,
                                  int relu, const double *r) {
  double k = invstd * g, k0 = b - mean * k;
  for (int64_t n = 0; n < N; n++) {
    int64_t base = (n * C + c) * L;
    if (relu == 2) {
#pragma omp simd
      for (int64_t i = 0; i < L; i++) {
        double v = x[base + i] * k + k0;
        y[base + i] = cnn_relu(v + r[base + i]);
      }
    } else if (relu) {
#pragma omp simd
      for (int64_t i = 0; i < L; i++) y[base + i] = cnn_relu(x[base + i] * k + k0);
    } else {
#pragma omp simd
      for (int64_t i = 0; i < L; i++) y[base + i] = x[base + i] * k + k0;
    }
  }
}

/* The gradient reaching batch norm's output: dy, or through the fused relu
 * (y its output, NULL when unfused) dy where y > 0 or NaN, as PyTorch's
 * threshold_backward: y <= 0 ? 0 : dy. */
ALWAYS_INLINE double grad_at(int f64, const void *dy, const void *y, int64_t i) {
  double d = cnn_cpu_ld(dy, i, f64);
  return y && cnn_cpu_ld(y, i, f64) <= 0 ? 0 : d;
}
static inline float grad_at_f32(const float *dy, const float *y, int64_t i) {
  float d = dy[i]; /* loaded either way: a load under the mask was vmaskmovps */
  return y && y[i] <= 0 ? 0.0f : d;
}

#define BLOCK 1024

/* 8 floats as one value (GCC/Clang vector extensions: AVX2 registers on
 * x86-64-v3, pairs of SSE or NEON registers elsewhere), loaded from any
 * float address.  The partial sums live in such values, so they stay in
 * registers: as `float a[16]` arrays under `omp simd` GCC spilled them
 * and every add waited on a store-to-load forward. */
typedef float v8f __attribute__((vector_size(32), aligned(4), may_alias));
typedef int32_t v8i __attribute__((vector_size(32), aligned(4), may_alias));

/* t = d (grad 0) or the gradient: dy where y > 0 or NaN (y NULL: dy) */
ALWAYS_INLINE v8f grad8(int grad, const float *dy, const float *y, int64_t i, v8f d) {
  if (!grad) return d;
  v8f g = *(const v8f *)(dy + i);
  if (!y) return g;
  v8i blocked = *(const v8f *)(y + i) <= 0; /* -1 where y <= 0, 0 elsewhere (NaN too) */
  return (v8f)((v8i)g & ~blocked);
}

/* One block [i0, i1) of a row into *t1, *t2 (see channel_sums_f32). */
ALWAYS_INLINE void block_sums_f32(int grad, const float *x, const float *dy, const float *y,
                                  float ref, int64_t i0, int64_t i1, double *t1, double *t2) {
  v8f a1 = {0}, a2 = {0}, b1 = {0}, b2 = {0};
  int64_t i = i0;
  for (; i + 16 <= i1; i += 16) {
    v8f d = *(const v8f *)(x + i) - ref, e = *(const v8f *)(x + i + 8) - ref;
    v8f t = grad8(grad, dy, y, i, d), u = grad8(grad, dy, y, i + 8, e);
    a1 += t, a2 += t * d, b1 += u, b2 += u * e;
  }
  a1 += b1, a2 += b2;
  float r1 = 0, r2 = 0;
  for (; i < i1; i++) {
    float d = x[i] - ref, t = grad ? grad_at_f32(dy, y, i) : d;
    r1 += t, r2 += t * d;
  }
  double h1 = r1, h2 = r2;
  for (int j = 0; j < 8; j++) h1 += a1[j], h2 += a2[j];
  *t1 += h1, *t2 += h2;
}

/* float32, the two sums of a channel with float partial sums over blocks
 * of at most BLOCK values of a row (16 lanes as two 8-float values: 64
 * terms a lane at most, relative error below 64 * 2^-24), added into
 * double per block.  Float lanes are twice as many per vector as double
 * ones and need no conversion, which was the pass's cost.  `grad` is a literal:
 *   0 (forward):  sum d, sum d^2 with d = x - ref  (ref = K)
 *   1 (backward): sum g, sum g*(x - ref)  with g = grad_at_f32 (ref = mean) */
ALWAYS_INLINE void channel_sums_f32(int grad, int64_t N, int64_t C, int64_t L, const float *x,
                                    const float *dy, const float *y, int64_t c, float ref,
                                    double *s1, double *s2) {
  double t1 = 0, t2 = 0;
  for (int64_t n = 0; n < N; n++) {
    int64_t base = (n * C + c) * L;
    for (int64_t i0 = 0; i0 < L; i0 += BLOCK)
      block_sums_f32(grad, x + base, grad ? dy + base : NULL, grad && y ? y + base : NULL, ref, i0,
                     L - i0 < BLOCK ? L : i0 + BLOCK, &t1, &t2);
  }
  *s1 = t1, *s2 = t2;
}

/* float32 y = (x - mean)*k + b over one channel, in float: x - mean first,
 * so an offset |mean| >> std cancels exactly (x and mean are close) before
 * the scaling; then relu when asked. */
static void channel_normalize_f32(int64_t N, int64_t C, int64_t L, const float *x, int64_t c,
                                  double mean, double invstd, double g, double b, float *y,
                                  int relu, const float *r) {
  float m = (float)mean, k = (float)(invstd * g), bf = (float)b;
  for (int64_t n = 0; n < N; n++) {
    int64_t base = (n * C + c) * L;
    if (relu == 2) {
#pragma omp simd
      for (int64_t i = 0; i < L; i++) {
        float v = (x[base + i] - m) * k + bf;
        y[base + i] = cnn_relu_f(v + r[base + i]);
      }
    } else if (relu) {
#pragma omp simd
      for (int64_t i = 0; i < L; i++) y[base + i] = cnn_relu_f((x[base + i] - m) * k + bf);
    } else {
#pragma omp simd
      for (int64_t i = 0; i < L; i++) y[base + i] = (x[base + i] - m) * k + bf;
    }
  }
}

/* one channel of either dtype (float32 on AVX-512 when `avx512`); r: the
 * residual of relu 2, laid out as x */
static void channel_normalize(int f64, int avx512, int64_t N, int64_t C, int64_t L, const void *x,
                              int64_t c, double mean, double invstd, double g, double b, void *y,
                              int relu, const void *r) {
  if (f64)
    channel_normalize_f64(N, C, L, x, c, mean, invstd, g, b, y, relu, r);
  else if (avx512)
    cnn_cpu_bn_normalize_f32_avx512(N, C * L, L, (const float *)x + c * L,
                                    r ? (const float *)r + c * L : NULL, (float)mean,
                                    (float)(invstd * g), (float)b, (float *)y + c * L, relu);
  else
    channel_normalize_f32(N, C, L, x, c, mean, invstd, g, b, y, relu, r);
}

void cnn_cpu_bn_store_stats(const bn_args *a, int f64, int64_t c, int64_t M, double mean,
                            double var, double invstd) {
  if (a->save_mean) cnn_cpu_st(a->save_mean, c, mean, f64);
  if (a->save_invstd) cnn_cpu_st(a->save_invstd, c, invstd, f64);
  if (!a->training) return;
  double m = a->momentum;
  if (a->running_mean)
    cnn_cpu_st(a->running_mean, c, (1 - m) * cnn_cpu_ld(a->running_mean, c, f64) + m * mean, f64);
  if (a->running_var)
    cnn_cpu_st(a->running_var, c,
               (1 - m) * cnn_cpu_ld(a->running_var, c, f64) + m * var * M / (M - 1), f64);
}

/* Statistics, normalisation and running-stat update of channel c. */
ALWAYS_INLINE void bn_channel(int f64, int64_t N, int64_t C, int64_t L, const void *x,
                              const bn_args *a, void *y, int64_t c) {
  int64_t M = N * L;
  double mean, var;
  if (a->training) {
    double K = cnn_cpu_ld(x, c * L, f64), s1, s2;
    if (f64)
      channel_moments(1, N, C, L, x, c, K, &s1, &s2);
    else if (a->avx512)
      cnn_cpu_bn_sums_f32_avx512(0, N, C * L, L, (const float *)x + c * L, NULL, NULL, (float)K,
                                 &s1, &s2);
    else
      channel_sums_f32(0, N, C, L, x, NULL, NULL, c, (float)K, &s1, &s2);
    double dm = s1 / M; /* mean - K */
    mean = K + dm, var = s2 / M - dm * dm;
    if (var < 0) var = 0; /* rounding */
  } else {
    mean = cnn_cpu_ld(a->running_mean, c, f64), var = cnn_cpu_ld(a->running_var, c, f64);
  }
  double invstd = 1.0 / sqrt(var + a->eps);
  double g = a->gamma ? cnn_cpu_ld(a->gamma, c, f64) : 1;
  double b = a->beta ? cnn_cpu_ld(a->beta, c, f64) : 0;
  channel_normalize(f64, a->avx512, N, C, L, x, c, mean, invstd, g, b, y, a->relu, a->residual);
  cnn_cpu_bn_store_stats(a, f64, c, M, mean, var, invstd);
}

/* Eval: y = x*k + k0 per channel from the running statistics, plane by
 * plane (p = n*C + c) in memory order, so each thread streams one
 * contiguous range; the per-channel loop of training would read channel
 * c's N separate runs of L values, 100 KB apart at 32x28x28. */
ALWAYS_INLINE void eval_plane(int f64, int64_t L, const void *x, const bn_args *a, void *y,
                              int64_t p, int64_t c) {
  double mean = cnn_cpu_ld(a->running_mean, c, f64), var = cnn_cpu_ld(a->running_var, c, f64);
  double invstd = 1.0 / sqrt(var + a->eps);
  double g = a->gamma ? cnn_cpu_ld(a->gamma, c, f64) : 1;
  double b = a->beta ? cnn_cpu_ld(a->beta, c, f64) : 0;
  int64_t off = p * L * (f64 ? 8 : 4);
  const void *r = a->residual ? (const char *)a->residual + off : NULL;
  channel_normalize(f64, a->avx512, 1, 1, L, (const char *)x + off, 0, mean, invstd, g, b,
                    (char *)y + off, a->relu, r);
}

static int bn_eval(cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *x, const bn_args *a,
                   void *y) {
  int f64 = dt == CNN_FLOAT64;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * C; p++) {
    if (f64)
      eval_plane(1, L, x, a, y, p, p % C);
    else
      eval_plane(0, L, x, a, y, p, p % C);
  }
  for (int64_t c = 0; c < C; c++) { /* what training saves: the statistics used */
    double mean = cnn_cpu_ld(a->running_mean, c, f64), var = cnn_cpu_ld(a->running_var, c, f64);
    if (a->save_mean) cnn_cpu_st(a->save_mean, c, mean, f64);
    if (a->save_invstd) cnn_cpu_st(a->save_invstd, c, 1.0 / sqrt(var + a->eps), f64);
  }
  return 0;
}

static int forward(int relu, const void *residual, cnn_dtype dt, int64_t N, int64_t C, int64_t L,
                   const void *x, const void *gamma, const void *beta, void *running_mean,
                   void *running_var, int training, double momentum, double eps, void *y,
                   void *save_mean, void *save_invstd) {
  /* core/ops/nn_norm.c validates; the invariants that follow: */
  assert(cnn_cpu_float_sizes_valid(dt, N, C, L));
  assert(training ? N * L > 1 || C == 0 : running_mean && running_var);
  assert((relu == 2) == (residual != NULL));
  bn_args a = {.gamma = gamma,
               .beta = beta,
               .running_mean = running_mean,
               .running_var = running_var,
               .save_mean = save_mean,
               .save_invstd = save_invstd,
               .training = training,
               .relu = relu,
               .residual = residual,
               .momentum = momentum,
               .eps = eps,
               .avx512 = cnn_cpu_use_avx512()};
  if (dt == CNN_FLOAT32 && L == 1 && N > 1 && cnn_cpu_bn_forward_rows_f32(&a, N, C, x, y) == 0)
    return 0;
  if (!training) return bn_eval(dt, N, C, L, x, &a, y);
  if (dt == CNN_FLOAT32 && (a.avx512 || cnn_cpu_use_avx2()) &&
      cnn_cpu_bn_forward_planes_f32(&a, N, C, L, x, y) == 0)
    return 0;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < C; c++) {
    if (dt == CNN_FLOAT64)
      bn_channel(1, N, C, L, x, &a, y, c);
    else
      bn_channel(0, N, C, L, x, &a, y, c);
  }
  return 0;
}

int cnn_cpu_batch_norm_forward(cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *x,
                               const void *gamma, const void *beta, void *running_mean,
                               void *running_var, int training, double momentum, double eps,
                               void *y, void *save_mean, void *save_invstd) {
  return forward(0, NULL, dt, N, C, L, x, gamma, beta, running_mean, running_var, training,
                 momentum, eps, y, save_mean, save_invstd);
}

int cnn_cpu_batch_norm_relu_forward(cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *x,
                                    const void *gamma, const void *beta, void *running_mean,
                                    void *running_var, int training, double momentum, double eps,
                                    void *y, void *save_mean, void *save_invstd) {
  return forward(1, NULL, dt, N, C, L, x, gamma, beta, running_mean, running_var, training,
                 momentum, eps, y, save_mean, save_invstd);
}

int cnn_cpu_batch_norm_add_relu_forward(cnn_dtype dt, int64_t N, int64_t C, int64_t L,
                                        const void *x, const void *residual, const void *gamma,
                                        const void *beta, void *running_mean, void *running_var,
                                        int training, double momentum, double eps, void *y,
                                        void *save_mean, void *save_invstd) {
  return forward(2, residual, dt, N, C, L, x, gamma, beta, running_mean, running_var, training,
                 momentum, eps, y, save_mean, save_invstd);
}

/* sum dy and sum dy*xhat over one channel (dy through the relu of y). */
ALWAYS_INLINE void channel_grad_sums(int f64, int64_t N, int64_t C, int64_t L, const void *dy,
                                     const void *y, const void *x, int64_t c, double mean,
                                     double invstd, double *sum_dy, double *sum_dy_xhat) {
  double a0[LANES] = {0}, a1[LANES] = {0};
  for (int64_t n = 0; n < N; n++) {
    int64_t base = (n * C + c) * L, i = 0;
    for (; i + LANES <= L; i += LANES)
#pragma omp simd
      for (int j = 0; j < LANES; j++) {
        double d = grad_at(f64, dy, y, base + i + j);
        a0[j] += d, a1[j] += d * (cnn_cpu_ld(x, base + i + j, f64) - mean);
      }
    for (; i < L; i++) {
      double d = grad_at(f64, dy, y, base + i);
      a0[i % LANES] += d, a1[i % LANES] += d * (cnn_cpu_ld(x, base + i, f64) - mean);
    }
  }
  double s0 = 0, s1 = 0;
  for (int j = 0; j < LANES; j++) s0 += a0[j], s1 += a1[j];
  *sum_dy = s0, *sum_dy_xhat = s1 * invstd;
}

/* float32 dx = k*dy - k*mdy - k*invstd*mdyx*(x - mean) over one channel,
 * x - mean first as in the forward. */
static void channel_dx_f32(int64_t N, int64_t C, int64_t L, const float *dy, const float *y,
                           const float *x, int64_t c, double mean, double k, double kxm, double k0,
                           float *dx) {
  float m = (float)mean, kf = (float)k, kxf = (float)kxm, k0f = (float)k0;
  for (int64_t n = 0; n < N; n++) {
    int64_t base = (n * C + c) * L;
    if (y) {
#pragma omp simd
      for (int64_t i = 0; i < L; i++)
        dx[base + i] = kf * grad_at_f32(dy, y, base + i) + kxf * (x[base + i] - m) + k0f;
    } else {
#pragma omp simd
      for (int64_t i = 0; i < L; i++)
        dx[base + i] = kf * dy[base + i] + kxf * (x[base + i] - m) + k0f;
    }
  }
}

ALWAYS_INLINE void bn_channel_backward(int f64, int64_t N, int64_t C, int64_t L, const void *dy,
                                       const void *x, const bn_grads *a, int64_t c) {
  double M = (double)(N * L);
  double mean = cnn_cpu_ld(a->save_mean, c, f64), invstd = cnn_cpu_ld(a->save_invstd, c, f64);
  double g = a->gamma ? cnn_cpu_ld(a->gamma, c, f64) : 1, sdy, sdyx;
  int64_t o = c * L; /* the channel's first value */
  if (f64)
    channel_grad_sums(1, N, C, L, dy, a->y, x, c, mean, invstd, &sdy, &sdyx);
  else if (a->avx512)
    cnn_cpu_bn_sums_f32_avx512(1, N, C * L, L, (const float *)x + o, (const float *)dy + o,
                               a->y ? (const float *)a->y + o : NULL, (float)mean, &sdy, &sdyx),
        sdyx *= invstd;
  else
    channel_sums_f32(1, N, C, L, x, dy, a->y, c, (float)mean, &sdy, &sdyx), sdyx *= invstd;
  if (a->dgamma) cnn_cpu_st(a->dgamma, c, sdyx, f64);
  if (a->dbeta) cnn_cpu_st(a->dbeta, c, sdy, f64);
  if (!a->dx) return;
  /* dx = k*(dy - mdy - xhat*mdyx) = k*dy + kx*x + k0 */
  double k = g * invstd, mdy = a->eval ? 0 : sdy / M, mdyx = a->eval ? 0 : sdyx / M;
  double kx = -k * invstd * mdyx, k0 = -k * mdy + k * invstd * mdyx * mean;
  if (!f64 && a->avx512) {
    cnn_cpu_bn_dx_f32_avx512(N, C * L, L, (const float *)dy + o,
                             a->y ? (const float *)a->y + o : NULL, (const float *)x + o,
                             (float)mean, (float)k, (float)kx, (float)(-k * mdy),
                             (float *)a->dx + o);
    return;
  }
  if (!f64) {
    channel_dx_f32(N, C, L, dy, a->y, x, c, mean, k, kx, -k * mdy, a->dx);
    return;
  }
  for (int64_t n = 0; n < N; n++) {
    int64_t base = (n * C + c) * L;
#pragma omp simd
    for (int64_t i = 0; i < L; i++)
      cnn_cpu_st(a->dx, base + i,
                 k * grad_at(1, dy, a->y, base + i) + kx * cnn_cpu_ld(x, base + i, 1) + k0, 1);
  }
}

static int backward(int eval, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                    const void *y, const void *x, const void *gamma, const void *save_mean,
                    const void *save_invstd, void *dx, void *dgamma, void *dbeta) {
  assert(cnn_cpu_float_sizes_valid(dt, N, C, L) && save_mean && save_invstd);
  bn_grads a = {gamma, save_mean, save_invstd, y, dx, dgamma, dbeta, eval, cnn_cpu_use_avx512()};
  if (dt == CNN_FLOAT32 && L == 1 && N > 1 && cnn_cpu_bn_backward_rows_f32(&a, N, C, dy, x) == 0)
    return 0;
  if (dt == CNN_FLOAT32 && (a.avx512 || cnn_cpu_use_avx2()) &&
      cnn_cpu_bn_backward_planes_f32(&a, N, C, L, dy, x) == 0)
    return 0;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < C; c++) {
    if (dt == CNN_FLOAT64)
      bn_channel_backward(1, N, C, L, dy, x, &a, c);
    else
      bn_channel_backward(0, N, C, L, dy, x, &a, c);
  }
  return 0;
}
int cnn_cpu_batch_norm_backward(cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                                const void *x, const void *gamma, const void *save_mean,
                                const void *save_invstd, void *dx, void *dgamma, void *dbeta) {
  return backward(0, dt, N, C, L, dy, NULL, x, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}

int cnn_cpu_batch_norm_backward_eval(cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                                     const void *x, const void *gamma, const void *save_mean,
                                     const void *save_invstd, void *dx, void *dgamma, void *dbeta) {
  return backward(1, dt, N, C, L, dy, NULL, x, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}

int cnn_cpu_batch_norm_relu_backward(cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                                     const void *y, const void *x, const void *gamma,
                                     const void *save_mean, const void *save_invstd, void *dx,
                                     void *dgamma, void *dbeta, int training) {
  assert(y);
  return backward(!training, dt, N, C, L, dy, y, x, gamma, save_mean, save_invstd, dx, dgamma,
                  dbeta);
}
