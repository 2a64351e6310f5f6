/*
 * vector_math.c -- float32 exp, log, expm1, tanh and sigmoid, and the
 * activations gelu (erf and tanh forms), elu, softplus and mish, over
 * contiguous arrays.  The contract is in vector_math.h.
 *
 * exp, log, expm1: SLEEF's 1-ulp (u10) vector functions
 * (sleef_map.h), 16 lanes with AVX-512, 8 with AVX2.  Measured against the
 * project's own double-precision polynomials they replaced
 * (bench/sleef_vs_own.c, AMD Zen 4 with AVX-512, one thread, 4M elements):
 * exp 1.6-2.0x, log 1.42x faster; worst error over every 61st bit pattern
 * 0.977 ulp (exp) and 0.607 (log) against the exact value, within the
 * contract (ours were 0.503 and 0.500).  expm1 had no vector path (scalar
 * libm per element).  log1p stays scalar libm: SLEEF 3.5.1's log1pf_u10
 * returns +inf for x above about 1e38 and flushes denormal inputs to zero
 * (tests/core/test_vector_math.c caught both), outside this contract.
 *
 * gelu (erf form): 0.5 x erfc(-x / sqrt 2) with SLEEF's double erfc
 * (sleef_map.h), never 1 + erf(x / sqrt 2), which cancels for x < -3 (the
 * float formula of elementwise_math.h returns 0 below about -5.5, where the
 * result is still -1e-7).  Float erfcf would not do: the argument's
 * rounding is magnified about x^2 times in the tail (a 2^-23 relative
 * error in 1/sqrt 2 gave 330 ulp near x = -13 in the unit test).
 *
 * tanh, sigmoid, gelu-tanh, elu, softplus, mish: our own code, because
 * SLEEF's tanh measured 0.3-0.5x ours in the same run, SLEEF has no
 * sigmoid (1/(1 + exp(-x)) from its exp rounds twice), and the
 * activations are a few operations around one e^a.  Each element is
 * widened to double, evaluated with short polynomials whose truncation
 * error is below 2^-31 relative, and rounded to float once (within
 * 0.5 ulp + 2^-7 ulp of the exact value; float denormal results are normal
 * doubles that the final conversion rounds correctly, so softplus's tail
 * e^x below x = -87 is no flush to zero; overflow happens in that
 * conversion):
 *
 *   e^a:  a = k ln2 + r, |r| <= ln2/2, k = round(a / ln2) by the 1.5*2^52
 *         shift trick; e^a = 2^k (1 + q(r)), q(r) = e^r - 1 by its Taylor
 *         series to r^8 (error < 0.347^9/9! < 2^-31).  Exponents are
 *         clamped to [-700, 0] where the result must stay a normal double.
 *   tanh: tanh|x| = E / (E + 2), E = e^(2|x|) - 1 = 2^k q + (2^k - 1) (no
 *         cancellation near 0), |x| clamped to 20 (tanh rounds to 1 past 9.01);
 *         the sign is copied from x, so -0 stays -0.
 *   sigmoid: with e = e^-|x| (|x| clamped to 104, where it rounds to 0 in
 *         float), 1/(1+e) for x >= 0 and e/(1+e) below, as the scalar
 *         cnn_sigmoid_f (no overflow for any x).
 *   gelu-tanh: 0.5 x (1 + tanh u) = x sigmoid(2u), sigmoid as above (no
 *         1 + tanh u ~ 0 for negative u).
 *   elu:  alpha (e^x - 1) as tanh's E, x clamped to -40; +-0 give alpha * +-0.
 *   softplus: max(z, 0) + log1p(e^-|z|); log1p(e) for e in (0, 1] is
 *         2 atanh(e / (2 + e)) by its odd series to s^17 (s <= 1/3: error
 *         < 2^-31).  z = x beta is rounded to float first, as PyTorch's
 *         (and the GPU's) float formula does, so that the threshold test
 *         agrees with them.
 *   mish: tanh(log(1 + e)) = (e^2 + 2e) / (e^2 + 2e + 2), e = e^x, and
 *         for x >= 0 the same over e^2x; one e^-|x|, one division.
 *
 * Derivatives (out = g f'(x), the backward of the activations): the same
 * pieces in double, g multiplied in before the one rounding; gelu' through
 * SLEEF's double erfc and exp.  sech^2 and sigmoid come from e = e^-|w| as
 * 4e / (1 + e)^2 and 1 / (1 + e) or e / (1 + e), so only a sum of two
 * terms of opposite sign next to a zero of f' loses digits (1 ulp +
 * 2^-40 |g|, vector_math.h).
 *
 * Speed against the libm-per-element loops they replaced
 * (bench/compare_builds.py --only ops, 16M elements, 2 threads, Zen 4 with
 * AVX-512, shared machine): forward gelu 1.97x (SLEEF's double erfc is
 * the cost), gelu-tanh 18x, elu 14x, softplus 9.7x, mish 44x; forward +
 * backward gelu 2.35x, gelu-tanh 18x, elu 15x, softplus 12x, mish 36x
 * (the table in core/README.md).
 *
 * Special values follow the formulas of elementwise_math.h (and PyTorch):
 * gelu, gelu-tanh and mish of -inf are NaN (-inf * 0), elu(-inf) = -alpha,
 * softplus(-inf) = 0.
 * NaN inputs return x + x (the quiet NaN, as libm), selected at the end.
 * The loops use `#pragma omp simd`, which also tells the compiler that
 * y == x is safe (each element is read before it is written), and every
 * lane and the scalar remainder run the same code, so a value's result
 * never depends on where it sits in the array.  Bits are moved between
 * types with unions (defined in GNU C).  No errno, no tables.
 *
 * ISA.  The build targets AVX2 (cmake/Flags.cmake); our
 * loops are also compiled for AVX-512 (a target attribute; 16 floats per
 * iteration) and chosen per call when the CPU has it, and so are SLEEF's
 * 16-lane entries (gelu: 8 doubles per erfc).  Both clones of our loops evaluate the same IEEE
 * operations (same contractions into FMA), so they give the same bits;
 * the unit test checks that for every function, SLEEF's included.
 * cnn_cpu_vector_math_allow_avx512(0) forces the baseline (tests, benches);
 * the only state is that flag, an atomic.  The file is compiled with
 * -fno-trapping-math (core/CMakeLists.txt): without it GCC keeps the
 * special-value selects as branches and does not vectorise.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "cpu/sleef_map.h"
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

/* e^a for -700 <= a <= 0 (a normal double: no denormal arithmetic) */
VM double exp_le0(double a) {
  double scale, r = exp_reduce(a, &scale);
  return scale + scale * expm1_poly(r);
}

/* log1p(e) for 0 < e <= 1: 2 atanh(s), s = e / (2 + e) <= 1/3, by its
 * series s + s^3/3 + ... + s^17/17 (error < (1/9)^9 / 19 < 2^-31 relative) */
VM double log1p_01(double e) {
  double s = e / (2.0 + e), w = s * s;
  double p = 1.0 / 17;
  p = p * w + 1.0 / 15;
  p = p * w + 1.0 / 13;
  p = p * w + 1.0 / 11;
  p = p * w + 1.0 / 9;
  p = p * w + 1.0 / 7;
  p = p * w + 1.0 / 5;
  p = p * w + 1.0 / 3;
  p = p * w + 1.0;
  return 2.0 * s * p;
}

/* x for x > 0, alpha (e^x - 1) otherwise; +-0 give alpha * +-0 */
VM float elu_one(float x, float alpha) {
  double a = x < -40.0f ? -40.0 : x > 0 ? 0.0 : (double)x; /* e^-40 - 1 rounds to -1 */
  double scale, r = exp_reduce(a, &scale);
  double em = (scale - 1.0) + scale * expm1_poly(r); /* e^a - 1 */
  float y = x > 0 ? x : x == 0 ? alpha * x : (float)(alpha * em);
  return x != x ? x + x : y;
}

/* z = x beta (rounded to float, as PyTorch); x where z > threshold, else
 * softplus(z) / beta = (max(z, 0) + log1p(e^-|z|)) / beta.  |z| clamped to
 * 700: e^-700 / beta still rounds to 0 for every float beta. */
VM float softplus_one(float x, float beta, double inv_beta, float threshold) {
  float z = x * beta;
  double a = -fabs((double)z);
  a = a < -700.0 ? -700.0 : a;
  double sp = (z > 0 ? (double)z : 0.0) + log1p_01(exp_le0(a));
  float y = z > threshold ? x : (float)(sp * inv_beta);
  return x != x ? x + x : y;
}

/* x tanh(softplus(x)): with e = e^x, tanh(log(1 + e)) = (e^2 + 2e) /
 * (e^2 + 2e + 2); for x >= 0 in e = e^-x, (1 + 2e) / (1 + 2e + 2e^2).
 * No cancellation either way.  -inf gives NaN, as x * tanh(softplus(x)). */
VM float mish_one(float x) {
  double d = x, a = -fabs(d);
  double e = exp_le0(a < -700.0 ? -700.0 : a);
  double num = d >= 0 ? 1.0 + 2.0 * e : e * (e + 2.0);
  double den = num + (d >= 0 ? 2.0 * e * e : 2.0);
  float y = (float)(d * (num / den));
  return x != x ? x + x : x == -INFINITY ? NAN : y;
}

/* 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = k (x + 0.044715 x^3), k =
 * sqrt(2/pi), in double (x^3 does not overflow); -inf gives NaN, as the
 * tanh form. */
VM float gelu_tanh_one(float x) {
  double d = x, w = 2.0 * 0.79788456080286535588 * (d + 0.044715 * d * d * d);
  double a = -fabs(w);
  double e = exp_le0(a < -700.0 ? -700.0 : a); /* e^-|w| */
  float y = (float)(d * ((w >= 0 ? 1.0 : e) / (1.0 + e)));
  return x != x ? x + x : x == -INFINITY ? NAN : y;
}

/* ---- derivatives, in double: the result is multiplied by g and rounded once ---- */

/* e^-|a| with the exponent clamped to [-700, 0] */
VM double exp_neg_abs(double a) {
  double m = -fabs(a);
  return exp_le0(m < -700.0 ? -700.0 : m);
}

/* elu'(x) = 1 for x > 0, alpha e^x otherwise */
VM double elu_grad(float x, double alpha) { return x > 0 ? 1.0 : alpha * exp_neg_abs(x); }

/* softplus'(x) = 1 where x beta > threshold, else sigmoid(x beta); z in
 * double, as elementwise_math.h's cnn_softplus_beta_grad */
VM double softplus_grad(float x, double beta, double threshold) {
  double z = x * beta, e = exp_neg_abs(z);
  return z > threshold ? 1.0 : (z >= 0 ? 1.0 : e) / (1.0 + e);
}

/* mish'(x) = t + x sigmoid(x) (1 - t^2), t = tanh(softplus(x)): with e =
 * e^-|x| and t = num / den as in mish_one, x sigmoid(x) (1 - t^2) =
 * 4 x e (1 + e) / den^2 (x < 0) or 4 x e^2 (1 + e) / den^2 (x >= 0): no
 * cancellation.  +-inf give NaN (inf * 0), as the formula. */
VM double mish_grad(float x) {
  double d = x, e = exp_neg_abs(d);
  double num = d >= 0 ? 1.0 + 2.0 * e : e * (e + 2.0);
  double den = num + (d >= 0 ? 2.0 * e * e : 2.0);
  double term = 4.0 * d * (d >= 0 ? e * e : e) * (1.0 + e) / (den * den);
  return isinf(x) ? NAN : num / den + term;
}

/* gelu-tanh'(x) = sigmoid(2u) + 0.5 x sech^2(u) k (1 + 3 0.044715 x^2), u
 * as in gelu_tanh_one, sech^2(u) = 4e / (1 + e)^2 with e = e^-|2u|.  +-inf
 * give NaN, as the formula. */
VM double gelu_tanh_grad(float x) {
  double d = x, k = 0.79788456080286535588;
  double w = 2.0 * k * (d + 0.044715 * d * d * d), e = exp_neg_abs(w), ope = 1.0 + e;
  double dinner = k * (1.0 + 3.0 * 0.044715 * d * d);
  double g = (w >= 0 ? 1.0 : e) / ope + 2.0 * d * e * dinner / (ope * ope);
  return isinf(x) ? NAN : g;
}

/* ---- the loops, compiled for the build's ISA and for AVX-512 ----------------- */

enum { OP_TANH, OP_SIGMOID, OP_ELU, OP_SOFTPLUS, OP_MISH, OP_GELU_TANH };

/* op is a constant at every call, so the choice folds away; p0, p1 are
 * the op's parameters (elu: alpha; softplus: beta, threshold) */
VM float one(int op, float x, float p0, double inv_p0, float p1) {
  switch (op) {
  case OP_TANH: return tanh_one(x);
  case OP_SIGMOID: return sigmoid_one(x);
  case OP_ELU: return elu_one(x, p0);
  case OP_SOFTPLUS: return softplus_one(x, p0, inv_p0, p1);
  case OP_MISH: return mish_one(x);
  default: return gelu_tanh_one(x);
  }
}

VM void run_loop(int op, int64_t n, const float *x, float *y, float p0, float p1) {
  double inv_p0 = 1.0 / p0;
#pragma omp simd
  for (int64_t i = 0; i < n; i++) y[i] = one(op, x[i], p0, inv_p0, p1);
}

VM void run_op(int op, int64_t n, const float *x, float *y, float p0, float p1) {
  switch (op) {
  case OP_TANH: run_loop(OP_TANH, n, x, y, p0, p1); break;
  case OP_SIGMOID: run_loop(OP_SIGMOID, n, x, y, p0, p1); break;
  case OP_ELU: run_loop(OP_ELU, n, x, y, p0, p1); break;
  case OP_SOFTPLUS: run_loop(OP_SOFTPLUS, n, x, y, p0, p1); break;
  case OP_MISH: run_loop(OP_MISH, n, x, y, p0, p1); break;
  default: run_loop(OP_GELU_TANH, n, x, y, p0, p1); break;
  }
}

static void run_base(int op, int64_t n, const float *x, float *y, float p0, float p1) {
  run_op(op, n, x, y, p0, p1);
}

enum { GRAD_ELU, GRAD_SOFTPLUS, GRAD_MISH, GRAD_GELU_TANH };

VM double deriv(int op, float x, double p0, double p1) {
  switch (op) {
  case GRAD_ELU: return elu_grad(x, p0);
  case GRAD_SOFTPLUS: return softplus_grad(x, p0, p1);
  case GRAD_MISH: return mish_grad(x);
  default: return gelu_tanh_grad(x);
  }
}

/* out[i] = g[i] f'(x[i]); out may be g or x */
VM void grad_loop(int op, int64_t n, const float *g, const float *x, float *out, double p0,
                  double p1) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) out[i] = (float)((double)g[i] * deriv(op, x[i], p0, p1));
}

VM void grad_op(int op, int64_t n, const float *g, const float *x, float *out, double p0,
                double p1) {
  switch (op) {
  case GRAD_ELU: grad_loop(GRAD_ELU, n, g, x, out, p0, p1); break;
  case GRAD_SOFTPLUS: grad_loop(GRAD_SOFTPLUS, n, g, x, out, p0, p1); break;
  case GRAD_MISH: grad_loop(GRAD_MISH, n, g, x, out, p0, p1); break;
  default: grad_loop(GRAD_GELU_TANH, n, g, x, out, p0, p1); break;
  }
}

static void grad_base(int op, int64_t n, const float *g, const float *x, float *out, double p0,
                      double p1) {
  grad_op(op, n, g, x, out, p0, p1);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX512F__)
#define HAVE_AVX512_CLONE 1
#ifdef __clang__
#define TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
#else
#define TARGET_AVX512                                                                              \
  __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,prefer-vector-width=512")))
#endif
TARGET_AVX512 static void run_avx512(int op, int64_t n, const float *x, float *y, float p0,
                                     float p1) {
  run_op(op, n, x, y, p0, p1);
}
TARGET_AVX512 static void grad_avx512(int op, int64_t n, const float *g, const float *x, float *out,
                                      double p0, double p1) {
  grad_op(op, n, g, x, out, p0, p1);
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

static bool use_avx512(void) {
#ifdef HAVE_AVX512_CLONE
  return allow_avx512 && cpu_has_avx512();
#else
  return false;
#endif
}

static void run(int op, int64_t n, const float *x, float *y, float p0, float p1) {
#ifdef HAVE_AVX512_CLONE
  if (use_avx512()) {
    run_avx512(op, n, x, y, p0, p1);
    return;
  }
#endif
  run_base(op, n, x, y, p0, p1);
}

static void grad(int op, int64_t n, const float *g, const float *x, float *out, double p0,
                 double p1) {
#ifdef HAVE_AVX512_CLONE
  if (use_avx512()) {
    grad_avx512(op, n, g, x, out, p0, p1);
    return;
  }
#endif
  grad_base(op, n, g, x, out, p0, p1);
}

static void run_sleef(cnn_sleef_fn fn, int64_t n, const float *x, float *y) {
  if (use_avx512())
    cnn_cpu_sleef_map_avx512(fn, n, x, y);
  else
    cnn_cpu_sleef_map_base(fn, n, x, y);
}

void cnn_cpu_exp_f32(int64_t n, const float *x, float *y) { run_sleef(SLEEF_EXP, n, x, y); }
void cnn_cpu_log_f32(int64_t n, const float *x, float *y) { run_sleef(SLEEF_LOG, n, x, y); }
void cnn_cpu_expm1_f32(int64_t n, const float *x, float *y) { run_sleef(SLEEF_EXPM1, n, x, y); }
void cnn_cpu_tanh_f32(int64_t n, const float *x, float *y) { run(OP_TANH, n, x, y, 1, 0); }
void cnn_cpu_sigmoid_f32(int64_t n, const float *x, float *y) { run(OP_SIGMOID, n, x, y, 1, 0); }
void cnn_cpu_elu_f32(int64_t n, const float *x, float *y, float alpha) {
  run(OP_ELU, n, x, y, alpha, 0);
}
void cnn_cpu_softplus_f32(int64_t n, const float *x, float *y, float beta, float threshold) {
  run(OP_SOFTPLUS, n, x, y, beta, threshold);
}
void cnn_cpu_mish_f32(int64_t n, const float *x, float *y) { run(OP_MISH, n, x, y, 1, 0); }
void cnn_cpu_gelu_tanh_f32(int64_t n, const float *x, float *y) {
  run(OP_GELU_TANH, n, x, y, 1, 0);
}
void cnn_cpu_gelu_f32(int64_t n, const float *x, float *y) {
  if (use_avx512())
    cnn_cpu_sleef_gelu_avx512(n, x, y);
  else
    cnn_cpu_sleef_gelu_base(n, x, y);
}

void cnn_cpu_elu_grad_f32(int64_t n, const float *g, const float *x, float *out, double alpha) {
  grad(GRAD_ELU, n, g, x, out, alpha, 0);
}
void cnn_cpu_softplus_grad_f32(int64_t n, const float *g, const float *x, float *out, double beta,
                               double threshold) {
  grad(GRAD_SOFTPLUS, n, g, x, out, beta, threshold);
}
void cnn_cpu_mish_grad_f32(int64_t n, const float *g, const float *x, float *out) {
  grad(GRAD_MISH, n, g, x, out, 0, 0);
}
void cnn_cpu_gelu_tanh_grad_f32(int64_t n, const float *g, const float *x, float *out) {
  grad(GRAD_GELU_TANH, n, g, x, out, 0, 0);
}
void cnn_cpu_gelu_grad_f32(int64_t n, const float *g, const float *x, float *out) {
  if (use_avx512())
    cnn_cpu_sleef_gelu_grad_avx512(n, g, x, out);
  else
    cnn_cpu_sleef_gelu_grad_base(n, g, x, out);
}
