/*
 * vector_math.h -- vectorised float32 exp, log, expm1, tanh and sigmoid, and
 * the activations gelu (erf and tanh forms), elu, softplus and mish, over
 * contiguous arrays (core/cpu/vector_math.c: SLEEF's u10 functions for exp,
 * log and expm1, SLEEF's double erfc inside gelu, our own code for the
 * rest), for the CPU fast paths of the elementwise ops
 * (core/cpu/elementwise.c) and of softmax (core/cpu/softmax.c).
 *
 * Contract of every function: y[i] = f(x[i]) for 0 <= i < n (n >= 0).
 *  - y may be x itself (in place) but must not otherwise overlap it.
 *  - Accuracy: within 1 ulp of the correctly rounded result for every float
 *    input (the unit tests tests/core/test_vector_math.c and
 *    test_vector_activations.c sweep every 4093rd bit pattern and each
 *    function's working range densely against libm in double), so within
 *    2 ulp of glibc's expf/logf/expm1f/tanhf and of the scalar
 *    cnn_sigmoid_f.  The activations keep this bound (measured <= 1 ulp;
 *    gelu 0) where their float formulas in elementwise_math.h, which the
 *    GPU runs, do not: 1 + erf(x/sqrt 2) and 1 + tanh(u) cancel for x below
 *    about -3, so the GPU's gelu is 0 where the exact value is -1e-7
 *    (differences of about 1e-7 absolute, far inside the parity tests'
 *    1e-5).  ulp is a fair measure for them: they are computed without
 *    cancellation, so their error is relative, down to the denormals.
 *  - Special values as libm: NaN in -> NaN out; exp: +inf -> +inf, -inf -> +0,
 *    overflow -> +inf, underflow -> denormals then +0; log: +0/-0 -> -inf,
 *    x < 0 -> NaN, +inf -> +inf, denormal inputs exact; tanh: odd, keeps -0,
 *    +-inf -> +-1; sigmoid: +inf -> 1, -inf -> 0; expm1: -inf -> -1, keeps
 *    -0.  The activations as their formulas in double (and PyTorch): gelu,
 *    gelu-tanh and mish give NaN for -inf (-inf * 0), elu -alpha, softplus
 *    +0; +inf gives +inf; signs of zero kept.  errno is never set.
 *  - The result of an element depends only on its value (and the op's
 *    parameters), never on its position, alignment, n, the ISA clone
 *    (AVX-512 or AVX2) or the thread that runs it.
 *
 * Why SLEEF for some and our own code for others, with the measurements:
 * the comment at the top of vector_math.c and core/README.md.
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

/* Their derivatives, out[i] = g[i] * f'(x[i]) (x the op's input), as
 * elementwise_math.h's double functions (cnn_gelu_grad, ...: same
 * parameters, in double; same NaNs), rounded once.  out may be g or x
 * itself.  Accuracy: |out - exact| <= 1 ulp + 2^-40 |g|; the absolute
 * part matters only near a zero of f', where two terms of about 1 cancel
 * (measured there: 6.4e-14 |g|, 803 ulp of the tiny result, for mish' at
 * -1.19; elsewhere <= 1 ulp). */
void cnn_cpu_gelu_grad_f32(int64_t n, const float *g, const float *x, float *out);
void cnn_cpu_gelu_tanh_grad_f32(int64_t n, const float *g, const float *x, float *out);
void cnn_cpu_elu_grad_f32(int64_t n, const float *g, const float *x, float *out, double alpha);
void cnn_cpu_softplus_grad_f32(int64_t n, const float *g, const float *x, float *out, double beta,
                               double threshold);
void cnn_cpu_mish_grad_f32(int64_t n, const float *g, const float *x, float *out);

/* Allows (1) or forbids (0) the AVX-512 clone of these loops (allowed by
 * default); returns 1 if the kernels now run it (allowed and the CPU and
 * compiler have it), 0 if they run the build's baseline ISA.  Both give the
 * same bits (checked by the unit test); this exists so that tests and
 * benchmarks can compare them. */
int cnn_cpu_vector_math_allow_avx512(int allow);

#endif
