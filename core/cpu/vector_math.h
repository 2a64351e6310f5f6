/*
 * vector_math.h -- vectorised float32 exp, log, expm1, tanh and sigmoid over
 * contiguous arrays (core/cpu/vector_math.c: SLEEF's u10 functions for the
 * first three, our own code for tanh and sigmoid), for the
 * CPU fast paths of the elementwise ops (core/cpu/elementwise.c) and of
 * softmax (core/cpu/softmax.c).
 *
 * Contract of every function: y[i] = f(x[i]) for 0 <= i < n (n >= 0).
 *  - y may be x itself (in place) but must not otherwise overlap it.
 *  - Accuracy: within 1 ulp of the correctly rounded result for every float
 *    input (the unit test tests/core/test_vector_math.c sweeps every
 *    4093rd bit pattern and each function's working range densely against
 *    libm in double), so within 2 ulp of glibc's expf/logf/expm1f/
 *    tanhf and of the scalar cnn_sigmoid_f.
 *  - Special values as libm: NaN in -> NaN out; exp: +inf -> +inf, -inf -> +0,
 *    overflow -> +inf, underflow -> denormals then +0; log: +0/-0 -> -inf,
 *    x < 0 -> NaN, +inf -> +inf, denormal inputs exact; tanh: odd, keeps -0,
 *    +-inf -> +-1; sigmoid: +inf -> 1, -inf -> 0; expm1: -inf -> -1, keeps
 *    -0.  errno is never set.
 *  - The result of an element depends only on its value, never on its
 *    position, alignment, n or the thread that runs it.
 */
#ifndef CNN_CPU_VECTOR_MATH_H
#define CNN_CPU_VECTOR_MATH_H

#include <stdint.h>

void cnn_cpu_exp_f32(int64_t n, const float *x, float *y);
void cnn_cpu_log_f32(int64_t n, const float *x, float *y);
void cnn_cpu_expm1_f32(int64_t n, const float *x, float *y);
void cnn_cpu_tanh_f32(int64_t n, const float *x, float *y);
/* sigmoid(x) = 1 / (1 + e^-x) */
void cnn_cpu_sigmoid_f32(int64_t n, const float *x, float *y);

/* The activations of elementwise_math.h (same definitions, PyTorch's): */
/* gelu(x) = x Phi(x) = 0.5 x erfc(-x / sqrt 2), the exact (erf) form */
void cnn_cpu_gelu_f32(int64_t n, const float *x, float *y);
/* gelu, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
void cnn_cpu_gelu_tanh_f32(int64_t n, const float *x, float *y);
/* elu(x) = x for x > 0, alpha (e^x - 1) otherwise */
void cnn_cpu_elu_f32(int64_t n, const float *x, float *y, float alpha);
/* softplus: z = x beta (in float); x where z > threshold, else
 * log(1 + e^z) / beta */
void cnn_cpu_softplus_f32(int64_t n, const float *x, float *y, float beta, float threshold);
/* mish(x) = x tanh(softplus(x)) */
void cnn_cpu_mish_f32(int64_t n, const float *x, float *y);

/* Allows (1) or forbids (0) the AVX-512 clone of these loops (allowed by
 * default); returns 1 if the kernels now run it (allowed and the CPU and
 * compiler have it), 0 if they run the build's baseline ISA.  Both give the
 * same bits (checked by the unit test); this exists so that tests and
 * benchmarks can compare them. */
int cnn_cpu_vector_math_allow_avx512(int allow);

#endif
