/*
 * machine_peak.c -- what this machine can do at best, measured rather than
 * looked up: the float32 FMA peak of the OpenMP threads and the copy
 * bandwidth at a chosen working-set size.  The benchmarks divide a layer's
 * achieved FLOP/s or bytes/s by these (bench/step_profile.lua: "fraction of
 * peak"), so the figures hold on whatever machine runs them.
 *
 * FMA peak: every thread runs ACC independent accumulator chains of
 * a = a*b + c over register-wide vectors (8 or 16 floats) (ACC covers FMA latency x FMA ports on
 * current x86 cores: 4 cycles x 2 ports needs 8; 12 leaves slack), so the
 * loop is bound by FMA throughput alone.  The body is compiled twice, for
 * the build's baseline ISA and for AVX-512 (chosen at run time, as
 * vector_math.c does); GCC contracts a*b + c into one FMA under gnu11's
 * default -ffp-contract=fast.  FLOPs = 2 per lane per FMA.
 *
 * Copy bandwidth: y = x over `bytes` per array, threads splitting the
 * array, repeated for at least `seconds`; counted as STREAM counts copy,
 * 2*bytes per pass (one read, one write; write-allocate traffic not
 * counted).  Size it like the tensors being judged: activations of a few MB
 * sit in the last-level cache, a 256 MB array measures DRAM.
 *
 * Both return the best of several timed rounds (the peak is what the
 * machine can do; a slower round was disturbed).
 *
 * The copy's arrays are written with non-zero bytes and copied once
 * untimed before the timed rounds, and there are at least MIN_ROUNDS of
 * those whatever `seconds` says.  It used to memset dst to 0, which GCC
 * turns (with the malloc before it) into calloc: a large calloc is fresh
 * mmap memory the kernel hands out zeroed and untouched, so the first copy
 * took a page fault every 4 KB of dst.  At 256 MB one round outlasted the
 * 0.1 s the bench allowed, so that faulting round was the only one, and
 * the figure read 0.7-4.7 GB/s (the VM's DRAM copies at ~20-25 GB/s once
 * the pages are in; measured with perf stat: 65,536 faults in the round).
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"

/* Vectors as wide as the ISA's registers: wider ones are split and spilled. */
typedef float v8f __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));
#define ACC        12   /* independent FMA chains per thread */
#define FMA_INNER  4096 /* iterations of the first round */
#define MIN_ROUNDS 3    /* timed copy rounds at least */

/* ACC chains of `iters` FMAs over vectors of type V (W floats); returns
 * the sum of the lanes, kept live by the caller. */
#define FMA_BODY(V, W)                                                                             \
  V a[ACC], b, c;                                                                                  \
  for (int k = 0; k < W; k++) b[k] = 0.999999f, c[k] = 1e-7f;                                      \
  for (int j = 0; j < ACC; j++)                                                                    \
    for (int k = 0; k < W; k++) a[j][k] = (float)(j + 1);                                          \
  for (int64_t i = 0; i < iters; i++)                                                              \
    for (int j = 0; j < ACC; j++) a[j] = a[j] * b + c;                                             \
  float s = 0;                                                                                     \
  for (int j = 0; j < ACC; j++)                                                                    \
    for (int k = 0; k < W; k++) s += a[j][k];                                                      \
  return s;

/* Not instrumented: under the sanitizers the chains would live in
 * redzoned stack memory instead of registers and measure a third of the
 * peak (no user data passes through them). */
#define NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))
NO_SANITIZE static float fma_chains_v8(int64_t iters){FMA_BODY(v8f, 8)} NO_SANITIZE __attribute__((
    target("avx512f,prefer-vector-width=512"))) static float fma_chains_v16(int64_t iters) {
  FMA_BODY(v16f, 16)
}

/* the lanes of the vectors the chains run on */
static int chain_width(int avx512) { return avx512 ? 16 : 8; }

static float run_chains(int avx512, int64_t iters) {
  return avx512 ? fma_chains_v16(iters) : fma_chains_v8(iters);
}

/* FLOP/s of one round: every thread runs `iters` iterations. */
static double fma_round(int avx512, int64_t iters, volatile float *sink) {
  double t0 = omp_get_wtime();
  int nt = 1;
#pragma omp parallel
  {
#pragma omp single
    nt = omp_get_num_threads();
    float s = run_chains(avx512, iters);
#pragma omp atomic
    *sink += s;
  }
  double dt = omp_get_wtime() - t0;
  return dt > 0 ? 2.0 * chain_width(avx512) * ACC * (double)iters * nt / dt : 0;
}

int cnn_cpu_fma_peak(double seconds, double *flops) {
  if (!(seconds > 0 && seconds <= 60)) {
    cnn_set_error("fma_peak: seconds must be in (0, 60], got %g", seconds);
    return -1;
  }
  int avx512 = __builtin_cpu_supports("avx512f");
  volatile float sink = 0;
  double best = 0, t_end = omp_get_wtime() + seconds;
  int64_t iters = FMA_INNER;
  do {
    double r = fma_round(avx512, iters, &sink);
    if (r > best) best = r;
    if (iters < (1 << 15)) iters *= 2; /* short rounds: one undisturbed is enough */
  } while (omp_get_wtime() < t_end);
  *flops = best;
  return 0;
}

/* bytes/s of `reps` parallel copies of n bytes (2n bytes moved each):
 * one parallel region, each thread copying its share `reps` times with no
 * barrier in between (a region per copy measured fork/join and, on a
 * loaded machine, a descheduled thread at every join). */
static double copy_round(char *dst, const char *src, size_t n, int reps) {
  double t0 = omp_get_wtime();
#pragma omp parallel
  {
    size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
    size_t lo = n * t / nt, hi = n * (t + 1) / nt;
    for (int r = 0; r < reps; r++) memcpy(dst + lo, src + lo, hi - lo);
  }
  double dt = omp_get_wtime() - t0;
  return dt > 0 ? 2.0 * (double)n * reps / dt : 0;
}

int cnn_cpu_copy_bandwidth(int64_t bytes, double seconds, double *bytes_per_s) {
  if (bytes < 4096 || bytes > ((int64_t)1 << 32) || !(seconds > 0 && seconds <= 60)) {
    cnn_set_error("copy_bandwidth: bytes must be in [4096, 2^32] and seconds in (0, 60], "
                  "got %lld and %g",
                  (long long)bytes, seconds);
    return -1;
  }
  char *src = malloc((size_t)bytes), *dst = malloc((size_t)bytes);
  if (!src || !dst) {
    free(src), free(dst);
    cnn_set_error("copy_bandwidth: out of memory for 2 x %lld bytes", (long long)bytes);
    return -1;
  }
  /* fault every page in: non-zero, or malloc + memset 0 becomes calloc */
  memset(src, 1, (size_t)bytes), memset(dst, 2, (size_t)bytes);
  int reps = (int)(((int64_t)1 << 24) / bytes) + 1; /* >= 16 MB a round */
  copy_round(dst, src, (size_t)bytes, 1);           /* untimed: caches, TLB, thread team */
  double best = 0, t_end = omp_get_wtime() + seconds;
  for (int round = 0; round < MIN_ROUNDS || omp_get_wtime() < t_end; round++) {
    double r = copy_round(dst, src, (size_t)bytes, reps);
    if (r > best) best = r;
  }
  free(src), free(dst);
  *bytes_per_s = best;
  return 0;
}
