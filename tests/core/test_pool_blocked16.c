/*
 * test_pool_blocked16.c -- the block's 2x2 stride-2 max pool on oneDNN's
 * nChw16c layout (core/cpu/max_pool_blocked16.c).
 *
 * Evidence: a reference written here on the plain NCHW view of the same
 * numbers (index arithmetic of the blocked layout done separately, pool.c's
 * rule spelled out as scalar compares: a later tap wins when greater or
 * NaN), forward values, tap numbers and backward, bit for bit; inputs with
 * ties (values drawn from a few levels, -0.0 against +0.0), NaNs, and odd
 * H and W (the last row and column belong to no window and get a zero
 * gradient).  Skipped (77) on a CPU without AVX-512, where the block keeps
 * oneDNN's pooling.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cnn.h"
#include "cpu/kernels.h"

/* Offset of element (n, c, h, w) in nChw16c with CB = C / 16 blocks. */
static int64_t at(int64_t CB, int64_t H, int64_t W, int64_t n, int64_t c, int64_t h, int64_t w) {
  return (((n * CB + c / 16) * H + h) * W + w) * 16 + c % 16;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng >> 11);
}

/* Few levels, so windows tie often; both zeros; a NaN now and then. */
static float value(void) {
  uint32_t r = next() % 64;
  if (r == 0) return NAN;
  if (r == 1) return -0.0f;
  if (r == 2) return 0.0f;
  return (float)((int)(r % 5) - 2);
}

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

static void check_shape(int64_t N, int64_t C, int64_t H, int64_t W) {
  int64_t CB = C / 16, OH = H / 2, OW = W / 2, nx = N * C * H * W, ny = N * C * OH * OW;
  float *x = malloc(nx * 4), *y = malloc(ny * 4), *dy = malloc(ny * 4), *dx = malloc(nx * 4);
  uint8_t *tap = malloc(ny);
  for (int64_t i = 0; i < nx; i++) x[i] = value(), dx[i] = NAN;
  for (int64_t i = 0; i < ny; i++) dy[i] = (float)(i % 13) + 0.5f;
  cnn_cpu_max_pool2_blocked16_forward(x, N, CB, H, W, y, tap);
  cnn_cpu_max_pool2_blocked16_backward(dy, tap, N, CB, H, W, dx);
  int64_t bad_y = 0, bad_tap = 0, bad_dx = 0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) {
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          int best_t = 0;
          float best = x[at(CB, H, W, n, c, 2 * oh, 2 * ow)];
          for (int t = 1; t < 4; t++) {
            float v = x[at(CB, H, W, n, c, 2 * oh + t / 2, 2 * ow + t % 2)];
            if (v > best || isnan(v)) best = v, best_t = t;
          }
          int64_t o = at(CB, OH, OW, n, c, oh, ow);
          bad_y += !same_bits(y[o], best);
          bad_tap += tap[o] != best_t;
          for (int t = 0; t < 4; t++) {
            float want = t == best_t ? dy[o] : 0.0f;
            bad_dx += !same_bits(dx[at(CB, H, W, n, c, 2 * oh + t / 2, 2 * ow + t % 2)], want);
          }
        }
      for (int64_t h = 0; h < H; h++) /* the odd edge: exactly +0.0 */
        for (int64_t w = 0; w < W; w++)
          if (h >= 2 * OH || w >= 2 * OW) bad_dx += !same_bits(dx[at(CB, H, W, n, c, h, w)], 0.0f);
    }
  printf("  %lldx%lldx%lldx%lld: %lld outputs, bad y %lld, taps %lld, dx %lld\n", (long long)N,
         (long long)C, (long long)H, (long long)W, (long long)ny, (long long)bad_y,
         (long long)bad_tap, (long long)bad_dx);
  CHECK(bad_y == 0);
  CHECK(bad_tap == 0);
  CHECK(bad_dx == 0);
  free(x), free(y), free(dy), free(dx), free(tap);
}

int main(void) {
  if (!cnn_cpu_use_avx512()) {
    printf("test_pool_blocked16: no AVX-512 on this CPU: skipped\n");
    return 77;
  }
  check_shape(3, 32, 8, 8);
  check_shape(2, 16, 7, 9);   /* odd H and W */
  check_shape(2, 48, 5, 4);   /* odd H only, three blocks */
  check_shape(1, 16, 2, 3);   /* one window wide */
  check_shape(4, 64, 14, 14); /* the example network's second block */
  return check_report("test_pool_blocked16");
}
