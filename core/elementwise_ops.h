/*
 * elementwise_ops.h -- the op-code switches of the elementwise ops, shared
 * by the CPU loops (core/ops/elementwise.c) and the CUDA kernels
 * (gpu/elementwise.cu): unary, its derivative, binary, for float, double
 * and int64.  Like elementwise_math.h (which holds the formulas these call)
 * everything is host-and-device, so the CPU tests exercise exactly the
 * arithmetic the GPU runs, and a fix lands on both at once.
 *
 * The functions are forced inline: the CPU loops call them with a constant
 * op, so the switch folds away and the loop vectorises.
 * Integer arithmetic wraps (two's complement, through uint64_t) rather than
 * overflowing, as PyTorch's does; conversions from double saturate.
 */
#ifndef CNN_ELEMENTWISE_OPS_H
#define CNN_ELEMENTWISE_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "cnn.h"
#include "elementwise_math.h"

#ifdef __CUDACC__
#define CNN_EW static __host__ __device__ __forceinline__
#else
#define CNN_EW static inline __attribute__((always_inline))
#endif

/* double -> int64 without undefined behaviour: NaN -> 0, out of range -> the limit */
CNN_EW int64_t cnn_saturate_i64(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}

CNN_EW double cnn_ew_unary_f64(int op, double x, double p0, double p1) {
  switch (op) {
  case CNN_OP_NEG: return -x;
  case CNN_OP_ABS: return fabs(x);
  case CNN_OP_EXP: return exp(x);
  case CNN_OP_LOG: return log(x);
  case CNN_OP_SQRT: return sqrt(x);
  case CNN_OP_RSQRT: return 1.0 / sqrt(x);
  case CNN_OP_TANH: return tanh(x);
  case CNN_OP_SIGMOID: return cnn_sigmoid(x);
  case CNN_OP_RELU: return cnn_relu(x);
  case CNN_OP_SIN: return sin(x);
  case CNN_OP_COS: return cos(x);
  case CNN_OP_SIGN: return x > 0 ? 1.0 : x < 0 ? -1.0 : x; /* keeps 0, -0, NaN */
  case CNN_OP_FLOOR: return floor(x);
  case CNN_OP_CEIL: return ceil(x);
  case CNN_OP_ROUND: return rint(x); /* half to even, as PyTorch */
  case CNN_OP_RECIPROCAL: return 1.0 / x;
  case CNN_OP_SQUARE: return x * x;
  case CNN_OP_GELU: return cnn_gelu(x);
  case CNN_OP_LOG1P: return log1p(x);
  case CNN_OP_EXPM1: return expm1(x);
  case CNN_OP_LEAKY_RELU: return cnn_leaky_relu(x, p0);
  case CNN_OP_ELU: return cnn_elu(x, p0);
  case CNN_OP_CLAMP: return x < p0 ? p0 : x > p1 ? p1 : x; /* NaN bound: never true */
  case CNN_OP_POW_SCALAR: return p0 == 2 ? x * x : pow(x, p0);
  case CNN_OP_ADD_SCALAR: return x + p0;
  /* activations beyond relu/sigmoid/tanh */
  case CNN_OP_HARDTANH: return cnn_hardtanh(x, p0, p1);
  case CNN_OP_SILU: return cnn_silu(x);
  case CNN_OP_HARDSWISH: return cnn_hardswish(x);
  case CNN_OP_HARDSIGMOID: return cnn_hardsigmoid(x);
  case CNN_OP_MISH: return cnn_mish(x);
  case CNN_OP_GELU_TANH: return cnn_gelu_tanh(x);
  case CNN_OP_SOFTPLUS: return cnn_softplus_beta(x, p0, p1);
  default: return x * p0; /* MUL_SCALAR */
  }
}

CNN_EW float cnn_ew_unary_f32(int op, float x, float p0, float p1) {
  switch (op) {
  case CNN_OP_NEG: return -x;
  case CNN_OP_ABS: return fabsf(x);
  case CNN_OP_EXP: return expf(x);
  case CNN_OP_LOG: return logf(x);
  case CNN_OP_SQRT: return sqrtf(x);
  case CNN_OP_RSQRT: return 1.0f / sqrtf(x);
  case CNN_OP_TANH: return tanhf(x);
  case CNN_OP_SIGMOID: return cnn_sigmoid_f(x);
  case CNN_OP_RELU: return cnn_relu_f(x);
  case CNN_OP_SIN: return sinf(x);
  case CNN_OP_COS: return cosf(x);
  case CNN_OP_SIGN: return x > 0 ? 1.0f : x < 0 ? -1.0f : x;
  case CNN_OP_FLOOR: return floorf(x);
  case CNN_OP_CEIL: return ceilf(x);
  case CNN_OP_ROUND: return rintf(x);
  case CNN_OP_RECIPROCAL: return 1.0f / x;
  case CNN_OP_SQUARE: return x * x;
  case CNN_OP_GELU: return cnn_gelu_f(x);
  case CNN_OP_LOG1P: return log1pf(x);
  case CNN_OP_EXPM1: return expm1f(x);
  case CNN_OP_LEAKY_RELU: return cnn_leaky_relu_f(x, p0);
  case CNN_OP_ELU: return cnn_elu_f(x, p0);
  case CNN_OP_CLAMP: return x < p0 ? p0 : x > p1 ? p1 : x;
  case CNN_OP_POW_SCALAR: return p0 == 2 ? x * x : powf(x, p0);
  case CNN_OP_ADD_SCALAR: return x + p0;
  /* activations beyond relu/sigmoid/tanh */
  case CNN_OP_HARDTANH: return cnn_hardtanh_f(x, p0, p1);
  case CNN_OP_SILU: return cnn_silu_f(x);
  case CNN_OP_HARDSWISH: return cnn_hardswish_f(x);
  case CNN_OP_HARDSIGMOID: return cnn_hardsigmoid_f(x);
  case CNN_OP_MISH: return cnn_mish_f(x);
  case CNN_OP_GELU_TANH: return cnn_gelu_tanh_f(x);
  case CNN_OP_SOFTPLUS: return cnn_softplus_beta_f(x, p0, p1);
  default: return x * p0;
  }
}

CNN_EW int64_t cnn_ew_ipow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
  int64_t r = 1;
  while (b) {
    if (b & 1) r = (int64_t)((uint64_t)r * (uint64_t)a);
    a = (int64_t)((uint64_t)a * (uint64_t)a);
    b >>= 1;
  }
  return r;
}

CNN_EW int64_t cnn_ew_unary_i64(int op, int64_t x, double p0, double p1) {
  switch (op) {
  case CNN_OP_NEG: return (int64_t)(0 - (uint64_t)x);
  case CNN_OP_ABS:
    return x < 0 ? (int64_t)(0 - (uint64_t)x) : x; /* wraps at INT64_MIN, as C's unsigned */
  case CNN_OP_SIGN: return x > 0 ? 1 : x < 0 ? -1 : 0;
  case CNN_OP_RELU: return x > 0 ? x : 0;
  case CNN_OP_SQUARE: return (int64_t)((uint64_t)x * (uint64_t)x);
  case CNN_OP_CLAMP:
    if (p0 == p0 && (double)x < p0) return cnn_saturate_i64(ceil(p0));
    if (p1 == p1 && (double)x > p1) return cnn_saturate_i64(floor(p1));
    return x;
  case CNN_OP_POW_SCALAR: return cnn_ew_ipow(x, (int64_t)p0);
  case CNN_OP_ADD_SCALAR: return (int64_t)((uint64_t)x + (uint64_t)(int64_t)p0);
  case CNN_OP_MUL_SCALAR: return (int64_t)((uint64_t)x * (uint64_t)(int64_t)p0);
  case CNN_OP_HARDTANH: { /* bounds truncated to integers, as PyTorch's hardtanh */
    int64_t lo = cnn_saturate_i64(p0), hi = cnn_saturate_i64(p1);
    int64_t r = x < lo ? lo : x;
    return r > hi ? hi : r;
  }
  default: return x; /* FLOOR, CEIL, ROUND */
  }
}

CNN_EW double cnn_ew_unary_deriv(int op, double v, double p0, double p1) {
  switch (op) { /* v is x, or y where marked */
  case CNN_OP_NEG: return -1;
  case CNN_OP_ABS: return v > 0 ? 1 : v < 0 ? -1 : 0;
  case CNN_OP_EXP: return v; /* y */
  case CNN_OP_LOG: return 1 / v;
  case CNN_OP_SQRT: return 0.5 / v;                /* y */
  case CNN_OP_RSQRT: return -0.5 * v * v * v;      /* y */
  case CNN_OP_TANH: return 1 - v * v;              /* y */
  case CNN_OP_SIGMOID: return cnn_sigmoid_grad(v); /* y */
  case CNN_OP_RELU: return v <= 0 ? 0 : 1;         /* PyTorch's threshold_backward: NaN passes */
  case CNN_OP_SIN: return cos(v);
  case CNN_OP_COS: return -sin(v);
  case CNN_OP_RECIPROCAL: return -v * v; /* y */
  case CNN_OP_SQUARE: return 2 * v;
  case CNN_OP_GELU: return cnn_gelu_grad(v);
  case CNN_OP_LOG1P: return 1 / (1 + v);
  case CNN_OP_EXPM1: return v + 1; /* y */
  case CNN_OP_LEAKY_RELU: return cnn_leaky_relu_grad(v, p0);
  case CNN_OP_ELU: return cnn_elu_grad(v, p0);
  case CNN_OP_CLAMP: return v >= p0 && v <= p1 ? 1 : 0; /* 1 at a bound, 0 at NaN (PyTorch) */
  case CNN_OP_POW_SCALAR: return p0 == 0 ? 0 : p0 * pow(v, p0 - 1);
  case CNN_OP_ADD_SCALAR: return 1;
  case CNN_OP_MUL_SCALAR: return p0;
  /* activations beyond relu/sigmoid/tanh */
  case CNN_OP_HARDTANH: return cnn_hardtanh_grad(v, p0, p1);
  case CNN_OP_SILU: return cnn_silu_grad(v);
  case CNN_OP_HARDSWISH: return cnn_hardswish_grad(v);
  case CNN_OP_HARDSIGMOID: return cnn_hardsigmoid_grad(v);
  case CNN_OP_MISH: return cnn_mish_grad(v);
  case CNN_OP_GELU_TANH: return cnn_gelu_tanh_grad(v);
  case CNN_OP_SOFTPLUS: return cnn_softplus_beta_grad(v, p0, p1);
  default: return 0; /* SIGN, FLOOR, CEIL, ROUND */
  }
}

CNN_EW double cnn_ew_binary_f64(int op, double a, double b) {
  switch (op) {
  case CNN_OP_ADD: return a + b;
  case CNN_OP_SUB: return a - b;
  case CNN_OP_MUL: return a * b;
  case CNN_OP_DIV: return a / b;
  case CNN_OP_POW: return pow(a, b);
  case CNN_OP_MAXIMUM: return (a > b || a != a) ? a : b;
  case CNN_OP_ADD_RELU: return cnn_relu(a + b); /* bit for bit relu's value of add's */
  default: return (a < b || a != a) ? a : b;    /* MINIMUM */
  }
}

CNN_EW float cnn_ew_binary_f32(int op, float a, float b) {
  switch (op) {
  case CNN_OP_ADD: return a + b;
  case CNN_OP_SUB: return a - b;
  case CNN_OP_MUL: return a * b;
  case CNN_OP_DIV: return a / b;
  case CNN_OP_POW: return powf(a, b);
  case CNN_OP_MAXIMUM: return (a > b || a != a) ? a : b;
  case CNN_OP_ADD_RELU: return cnn_relu_f(a + b);
  default: return (a < b || a != a) ? a : b;
  }
}

CNN_EW int64_t cnn_ew_binary_i64(int op, int64_t a, int64_t b) {
  switch (op) {
  case CNN_OP_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
  case CNN_OP_SUB: return (int64_t)((uint64_t)a - (uint64_t)b);
  case CNN_OP_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
  case CNN_OP_POW: return cnn_ew_ipow(a, b);
  case CNN_OP_MAXIMUM: return a > b ? a : b;
  case CNN_OP_ADD_RELU: {
    int64_t s = (int64_t)((uint64_t)a + (uint64_t)b);
    return s > 0 ? s : 0;
  }
  default: return a < b ? a : b;
  }
}

/* A comparison op's result from c, the sign of (a - b): -1, 0, 1, or 2
 * when unordered (a NaN: every comparison but NE is false). */
CNN_EW bool cnn_ew_compare(int op, int c) {
  switch (op) {
  case CNN_OP_EQ: return c == 0;
  case CNN_OP_NE: return c != 0;
  case CNN_OP_LT: return c == -1;
  case CNN_OP_LE: return c == -1 || c == 0;
  case CNN_OP_GT: return c == 1;
  default: return c == 1 || c == 0; /* GE */
  }
}

#endif
