/*
 * sleef_map.h -- SLEEF's 1-ulp (u10) float32 functions mapped over arrays,
 * one file per vector width: sleef_map_avx2.c (the build's baseline ISA:
 * SLEEF's 8-lane entries with AVX, its scalar ones without) and
 * sleef_map_avx512.c (compiled with -mavx512f, the 16-lane entries; call
 * it only when the CPU has AVX-512F).  core/cpu/vector_math.c picks one per
 * call; its header, vector_math.h, states the contract.
 *
 * Every lane and the tail run the same vector function (the tail through
 * a masked load and store), so a value's result never depends on where it
 * sits in the array; y may be x itself.
 */
#ifndef CNN_CPU_SLEEF_MAP_H
#define CNN_CPU_SLEEF_MAP_H

#include <stdint.h>

typedef enum { SLEEF_EXP, SLEEF_LOG, SLEEF_EXPM1 } cnn_sleef_fn;

void cnn_cpu_sleef_map_base(cnn_sleef_fn fn, int64_t n, const float *x, float *y);
void cnn_cpu_sleef_map_avx512(cnn_sleef_fn fn, int64_t n, const float *x, float *y);

/* y = gelu(x) = 0.5 x erfc(-x / sqrt 2), each element widened to double,
 * through SLEEF's double erfc (u15: 1.5 ulp of a double), rounded to
 * float once. */
void cnn_cpu_sleef_gelu_base(int64_t n, const float *x, float *y);
void cnn_cpu_sleef_gelu_avx512(int64_t n, const float *x, float *y);
/* out = g * gelu'(x) = g (0.5 erfc(-x / sqrt 2) + x e^(-x^2/2) / sqrt(2 pi)),
 * in double (SLEEF's erfc and exp), rounded once; out may be g or x. */
void cnn_cpu_sleef_gelu_grad_base(int64_t n, const float *g, const float *x, float *out);
void cnn_cpu_sleef_gelu_grad_avx512(int64_t n, const float *g, const float *x, float *out);

#endif
