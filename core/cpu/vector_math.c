/*
 * vector_math.c -- float32 exp, log, tanh and sigmoid over contiguous arrays,
 * written so that the compiler vectorises them (AVX2 here: 8 floats per
 * iteration, the polynomials on two halves of 4 doubles).  The contract is in
 * vector_math.h.
 *
 * Why not libm or libmvec.  Scalar expf/logf/tanhf cost 10-30 ns each and
 * cannot be vectorised; glibc 2.36's libmvec (_ZGVdN8v_expf and friends) is
 * fast but was measured over all 2^32 inputs at up to 3 ulp (exp) and 4 ulp
 * (log) from libm, over this project's 2-ulp budget.
 *
 * Design.  Each element is widened to double, evaluated with a short
 * polynomial whose truncation error is below 2^-31 relative, and rounded to
 * float once, so the result is within 0.5 ulp + 2^-7 ulp of the exact value
 * (libm's float functions are within about 0.5-1 ulp of it).  Computing in
 * double removes the hard parts of a float implementation: float denormal
 * results are normal doubles that the final conversion rounds correctly;
 * overflow happens in that conversion; |x| small needs no special path.
 *
 *   exp:  x = k ln2 + r, |r| <= ln2/2, k = round(x / ln2) by the 1.5*2^52
 *         shift trick; e^x = 2^k (1 + q(r)), q(r) = e^r - 1 by its Taylor
 *         series to r^8 (error < 0.347^9/9! < 2^-31).  x is first clamped to
 *         [-104, 89], where e^x already rounds to 0 and +inf in float.
 *   log:  x = 2^e m with m in [sqrt(1/2), sqrt(2)) read from the float's
 *         bits (denormals scaled by 2^23 first); with s = (m-1)/(m+1),
 *         log m = 2 atanh s = 2 (s + s^3/3 + ... + s^11/11), |s| < 0.1716,
 *         error < 0.1716^12/13 < 2^-33; log x = e ln2 + log m.
 *   tanh: tanh|x| = E / (E + 2), E = e^(2|x|) - 1 = 2^k q + (2^k - 1) (no
 *         cancellation near 0), |x| clamped to 20 (tanh rounds to 1 past 9.01);
 *         the sign is copied from x, so -0 stays -0.
 *   sigmoid: with e = e^-|x|, 1/(1+e) for x >= 0 and e/(1+e) below, as the
 *         scalar cnn_sigmoid_f (no overflow for any x).
 *
 * NaN inputs return x + x (the quiet NaN, as libm), selected at the end;
 * log's invalid inputs (x < 0) return the default NaN.  The loops use
 * `#pragma omp simd`, which also tells the compiler that y == x is safe
 * (each element is read before it is written), and every lane and the
 * scalar remainder run the same code, so a value's result never depends on
 * where it sits in the array.  Bits are moved between types with unions
 * (defined in GNU C).  No errno, no tables.
 *
 * ISA.  The build targets AVX2 (cmake/Flags.cmake) and these loops are
 * compute-bound there (~1 ns per element per core against ~0.15 for relu),
 * so the same loop is also compiled for AVX-512 (a target attribute; 16
 * floats per iteration) and chosen per call when the CPU has it, which
 * about halves the time.  Both clones evaluate the same IEEE operations
 * (same contractions into FMA), so they give the same bits: checked over
 * all 2^32 inputs when this was written, and over the unit test's sweeps.
 * cnn_cpu_vector_math_allow_avx512(0) forces the baseline clone (tests, benches);
 * the only state is that flag, an atomic.  The file is compiled with
 * -fno-trapping-math (core/CMakeLists.txt): without it GCC keeps the
 * special-value selects as branches and does not vectorise.
 */
#include <math.h>
#include <stdint.h>

#include "cpu/vector_math.h"

#define VM static inline __attribute__((always_inline))

#define LN2   0x1.62e42fefa39efp-1
#define LOG2E 0x1.71547652b82fep+0
#define SHIFT 0x1.8p52 /* t + SHIFT rounds t to an integer held in the low bits */

VM uint64_t bits64(double d) {
  union {
    double d;
    uint64_t u;
  } v = {.d = d};
  return v.u;
}
VM double double_of(uint64_t u) {
  union {
    uint64_t u;
    double d;
  } v = {.u = u};
  return v.d;
}
VM uint32_t bits32(float f) {
  union {
    float f;
    uint32_t u;
  } v = {.f = f};
  return v.u;
}
VM float float_of(uint32_t u) {
  union {
    uint32_t u;
    float f;
  } v = {.u = u};
  return v.f;
}

/* e^r - 1 for |r| <= ln2/2: Taylor series r + r^2/2! + ... + r^8/8! */
VM double expm1_poly(double r) {
  double p = 1.0 / 40320;
  p = p * r + 1.0 / 5040;
  p = p * r + 1.0 / 720;
  p = p * r + 1.0 / 120;
  p = p * r + 1.0 / 24;
  p = p * r + 1.0 / 6;
  p = p * r + 0.5;
  p = p * r + 1.0;
  return p * r;
}

/* Splits x (|x| <= 150) as k ln2 + r: returns r, stores 2^k in *scale. */
VM double exp_reduce(double x, double *scale) {
  double t = x * LOG2E + SHIFT;
  double k = t - SHIFT;
  /* the low bits of t hold k; k + 1023 is the biased exponent of 2^k */
  *scale = double_of((bits64(t) + 1023) << 52);
  return x - k * LN2;
}

VM float exp_one(float x) {
  double d = x;
  d = d < -104.0 ? -104.0 : d; /* NaN passes both clamps */
  d = d > 89.0 ? 89.0 : d;
  double scale, r = exp_reduce(d, &scale);
  float y = (float)(scale + scale * expm1_poly(r));
  return x != x ? x + x : y;
}

/* log m for m in [sqrt(1/2), sqrt(2)): 2 atanh s, s = (m-1)/(m+1) */
VM double log_mantissa(double m) {
  double f = m - 1.0, s = f / (2.0 + f), s2 = s * s;
  double p = 1.0 / 11;
  p = p * s2 + 1.0 / 9;
  p = p * s2 + 1.0 / 7;
  p = p * s2 + 1.0 / 5;
  p = p * s2 + 1.0 / 3;
  p = p * s2 + 1.0;
  return 2.0 * s * p;
}

VM float log_one(float x) {
  int denormal = bits32(x) < 0x00800000u; /* +0 and positive denormals */
  float xs = denormal ? x * 0x1p23f : x;
  /* e = floor(log2(xs / sqrt(1/2))): offset the bits by those of sqrt(1/2) */
  int32_t e = (int32_t)(bits32(xs) - 0x3f3504f3u) >> 23; /* arithmetic shift (GCC) */
  float m = float_of(bits32(xs) - ((uint32_t)e << 23));
  double r = (double)(e - (denormal ? 23 : 0)) * LN2 + log_mantissa(m);
  float y = (float)r;
  y = x == 0 ? -INFINITY : y;
  y = x < 0 ? NAN : y;
  y = x == INFINITY ? x : y;
  return x != x ? x + x : y;
}

VM float tanh_one(float x) {
  double a = fabs((double)x);
  a = a > 20.0 ? 20.0 : a;
  double scale, r = exp_reduce(2.0 * a, &scale);
  double em = (scale - 1.0) + scale * expm1_poly(r); /* e^(2a) - 1 */
  float y = copysignf((float)(em / (em + 2.0)), x);
  return x != x ? x + x : y;
}

VM float sigmoid_one(float x) {
  double d = x, a = -fabs(d);
  a = a < -104.0 ? -104.0 : a;
  double scale, r = exp_reduce(a, &scale);
  double e = scale + scale * expm1_poly(r); /* e^-|x| */
  float y = (float)((d >= 0 ? 1.0 : e) / (1.0 + e));
  return x != x ? x + x : y;
}

/* ---- the loops, compiled for the build's ISA and for AVX-512 ----------------- */

enum { OP_EXP, OP_LOG, OP_TANH, OP_SIGMOID };

/* op is a constant at every call, so the chain folds to one function */
VM void run_loop(int op, int64_t n, const float *x, float *y) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++)
    y[i] = op == OP_EXP    ? exp_one(x[i])
           : op == OP_LOG  ? log_one(x[i])
           : op == OP_TANH ? tanh_one(x[i])
                           : sigmoid_one(x[i]);
}

VM void run_op(int op, int64_t n, const float *x, float *y) {
  switch (op) {
  case OP_EXP: run_loop(OP_EXP, n, x, y); break;
  case OP_LOG: run_loop(OP_LOG, n, x, y); break;
  case OP_TANH: run_loop(OP_TANH, n, x, y); break;
  default: run_loop(OP_SIGMOID, n, x, y); break;
  }
}

static void run_base(int op, int64_t n, const float *x, float *y) { run_op(op, n, x, y); }

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX512F__)
#define HAVE_AVX512_CLONE 1
#ifdef __clang__
#define TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
#else
#define TARGET_AVX512                                                                              \
  __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,prefer-vector-width=512")))
#endif
TARGET_AVX512 static void run_avx512(int op, int64_t n, const float *x, float *y) {
  run_op(op, n, x, y);
}
static _Atomic int allow_avx512 = 1;

static int cpu_has_avx512(void) {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
}
#endif

int cnn_cpu_vector_math_allow_avx512(int allow) {
#ifdef HAVE_AVX512_CLONE
  allow_avx512 = allow != 0;
  return allow && cpu_has_avx512();
#else
  return 0;
#endif
}

static void run(int op, int64_t n, const float *x, float *y) {
#ifdef HAVE_AVX512_CLONE
  if (allow_avx512 && cpu_has_avx512()) {
    run_avx512(op, n, x, y);
    return;
  }
#endif
  run_base(op, n, x, y);
}

void cnn_cpu_exp_f32(int64_t n, const float *x, float *y) { run(OP_EXP, n, x, y); }
void cnn_cpu_log_f32(int64_t n, const float *x, float *y) { run(OP_LOG, n, x, y); }
void cnn_cpu_tanh_f32(int64_t n, const float *x, float *y) { run(OP_TANH, n, x, y); }
void cnn_cpu_sigmoid_f32(int64_t n, const float *x, float *y) { run(OP_SIGMOID, n, x, y); }
