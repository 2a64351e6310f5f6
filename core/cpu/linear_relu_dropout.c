/*
 * linear_relu_dropout.c -- the CPU's element passes of the block linear ->
 * ReLU -> dropout (core/ops/nn_linear_block.c), each one pass over the
 * block's output:
 *
 *   forward, in place over the product y[rows x cols] = x w^T:
 *     y[i] = relu(y[i] + bias[c]) * mask_i,  mask_i = 0 or 1/(1-p)
 *   with mask_i = cnn_dropout_value(seed, i, p) as dropout_mask.c draws it
 *   (1 when p = 0), so one seed gives the bits of the three layers run one
 *   by one (the bias add, relu and the mask product are the same float
 *   operations in the same order);
 *   backward: dz[i] = (y[i] > 0 ? g[i] : 0) * scale, scale = 1/(1-p) or 1
 *   (dz may be g itself).
 *
 * The mask's splitmix64 hash has three 64-bit multiplies an element; as in
 * dropout_mask.c the forward is also compiled for AVX-512DQ (vpmullq),
 * chosen at run time.  Outputs above PARALLEL_MIN elements are split
 * across threads by rows (an element's value depends only on its index).
 */
#include "cpu/backend_cpu.h"
#include "cpu/kernels.h"
#include "elementwise_math.h"

#define PARALLEL_MIN (1 << 16) /* elements: below this one thread is faster */

/* rows [r0, r1) of the forward, float32 (double when f64) */
static inline __attribute__((always_inline)) void forward_rows(int f64, int64_t r0, int64_t r1,
                                                               int64_t cols, void *y,
                                                               const void *bias, double p,
                                                               uint64_t seed) {
  double keep = p > 0 ? 1.0 / (1.0 - p) : 1.0;
  for (int64_t r = r0; r < r1; r++) {
    int64_t base = r * cols;
    if (f64) {
      double *row = (double *)y + base;
      const double *b = bias;
#pragma omp simd
      for (int64_t c = 0; c < cols; c++) {
        double m = p > 0 && cnn_dropout_uniform(seed, base + c) < p ? 0.0 : keep;
        row[c] = cnn_relu(b ? row[c] + b[c] : row[c]) * m;
      }
    } else {
      float *row = (float *)y + base, keep_f = (float)keep;
      const float *b = bias;
#pragma omp simd
      for (int64_t c = 0; c < cols; c++) {
        float m = p > 0 && cnn_dropout_uniform(seed, base + c) < p ? 0.0f : keep_f;
        row[c] = cnn_relu_f(b ? row[c] + b[c] : row[c]) * m;
      }
    }
  }
}

static void forward_portable(int f64, int64_t r0, int64_t r1, int64_t cols, void *y,
                             const void *bias, double p, uint64_t seed) {
  forward_rows(f64, r0, r1, cols, y, bias, p, seed);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512dq,avx512vl"))) static void
forward_avx512(int f64, int64_t r0, int64_t r1, int64_t cols, void *y, const void *bias, double p,
               uint64_t seed) {
  forward_rows(f64, r0, r1, cols, y, bias, p, seed);
}
#else
static void forward_avx512(int f64, int64_t r0, int64_t r1, int64_t cols, void *y, const void *bias,
                           double p, uint64_t seed) {
  forward_rows(f64, r0, r1, cols, y, bias, p, seed);
}
#endif

int cnn_cpu_linear_relu_dropout_forward(int dev, cnn_dtype dt, int64_t rows, int64_t cols, void *y,
                                        const void *bias, double p, uint64_t seed) {
  (void)dev;
  int f64 = dt == CNN_FLOAT64;
  void (*run)(int, int64_t, int64_t, int64_t, void *, const void *, double, uint64_t) =
      cnn_cpu_use_avx512() ? forward_avx512 : forward_portable;
  if (rows * cols < PARALLEL_MIN) {
    run(f64, 0, rows, cols, y, bias, p, seed);
    return 0;
  }
  int64_t chunk = cols >= 4096 ? 1 : 4096 / cols; /* rows a task */
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < (rows + chunk - 1) / chunk; t++)
    run(f64, t * chunk, t * chunk + chunk < rows ? t * chunk + chunk : rows, cols, y, bias, p,
        seed);
  return 0;
}

/* dz[i0..i1) = (y > 0 ? g : 0) * scale, in this form so that it
 * vectorises: GCC keeps a branch for a select with arithmetic in an arm
 * (the multiply may trap under -ftrapping-math), which ran scalar at ~20
 * cycles an element on a random mask.  As relu's backward, y = NaN passes
 * g. */
static void backward_range(int f64, int64_t i0, int64_t i1, const void *y, const void *g,
                           double scale, void *dz) {
  if (f64) {
    const double *yy = y, *gg = g;
    double *d = dz;
#pragma omp simd
    for (int64_t i = i0; i < i1; i++) {
      double kept = yy[i] <= 0 ? 0.0 : gg[i];
      d[i] = kept * scale;
    }
  } else {
    const float *yy = y, *gg = g;
    float *d = dz, s = (float)scale;
#pragma omp simd
    for (int64_t i = i0; i < i1; i++) {
      float kept = yy[i] <= 0 ? 0.0f : gg[i];
      d[i] = kept * s;
    }
  }
}

int cnn_cpu_linear_relu_dropout_backward(int dev, cnn_dtype dt, int64_t n, const void *y,
                                         const void *g, double scale, void *dz) {
  (void)dev;
  int f64 = dt == CNN_FLOAT64;
  if (n < PARALLEL_MIN) {
    backward_range(f64, 0, n, y, g, scale, dz);
    return 0;
  }
  enum { CHUNK = 4096 };
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < (n + CHUNK - 1) / CHUNK; c++)
    backward_range(f64, c * CHUNK, c * CHUNK + CHUNK < n ? c * CHUNK + CHUNK : n, y, g, scale, dz);
  return 0;
}
