/*
 * cpu_features.c -- which vector extensions the CPU running us has, asked
 * at run time, for the kernels that carry a hand-written AVX-512 path next
 * to their portable loop (max_pool_2x2.c), or an AVX2 one
 * (bn_relu_pool_blocked8.c: cnn_cpu_use_avx2()).
 *
 * The build targets x86-64-v3 at most (cmake/Flags.cmake), so a binary
 * built here also runs on an AVX2-only machine: a kernel calls its
 * AVX-512 function (compiled with a target attribute) only when
 * cnn_cpu_use_avx512() says so, and its portable loop otherwise.
 * cnn_cpu_allow_avx512(0) forces the portable loops (instead of the AVX2
 * kernels too), so tests compare the paths on one machine and benches
 * time them against each other.  The only state is that flag, an atomic.  (vector_math.c keeps its own flag,
 * cnn_cpu_vector_math_allow_avx512, for its loops.)
 */
#include "cpu/kernels.h"

static _Atomic int allow = 1;

static int cpu_has_avx512(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
#else
  return 0;
#endif
}

int cnn_cpu_use_avx512(void) { return allow && cpu_has_avx512(); }

int cnn_cpu_allow_avx512(int on) {
  allow = on != 0;
  return cnn_cpu_use_avx512();
}

int cnn_cpu_use_avx2(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  return allow && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return 0;
#endif
}
