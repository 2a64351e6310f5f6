/*
 * conv_int8.c -- the quantized (int8) convolution of cnn.quantize:
 * quantize the input, an integer convolution, then scales, bias and ReLU.
 *
 * Definition (the rule of cnn_conv2d_int8 in cnn.h):
 *
 *   qx = clamp(round_half_even(x / x_scale), -128, 127)        (ONNX's int8
 *                                         QuantizeLinear with zero point 0)
 *   acc[n,k,oh,ow] = sum qx * wq   (the sum of conv_naive.c, exact in int32)
 *   y = (float)acc * (x_scale * w_scale[k]) + b[k],  then max(y, 0) if relu
 *
 * Paths.  NAIVE: conv_naive.c's float64 loop over the integer levels (exact;
 * the oracle).  Otherwise oneDNN's
 * u8 x s8 -> s32 convolution (conv_onednn.c, PREC_U8).  Why u8 and why
 * split: on CPUs without VNNI (AVX2, plain AVX-512) oneDNN multiplies with
 * vpmaddubsw, whose 16-bit sums of two u8*s8 products saturate above 32767;
 * with |qx| <= 128 and |wq| <= 127 two products stay below 32512, so the
 * sum is exact everywhere.  A signed s8 input would make oneDNN add 128 to
 * it and halve the weights (losing odd ones), so a signed qx is split into
 * its positive and negative parts (both u8 <= 128) and
 * acc = conv(pos) - conv(neg): two convolutions where x has negative
 * values (the first layer, on normalised images), one otherwise (after a
 * ReLU).  Padding is 0 in both parts, as it is in qx.
 *
 * Limits: C/groups * R * S <= INT8_MAX_TERMS, so |acc| < 2^31.
 * Buffers (qx parts, accumulators) are allocated per call.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>

#include "cpu/kernels.h"

#define INT8_MAX_TERMS ((int64_t)2147483647 / (128 * 127))

/* round_half_even(x / scale) clamped to [-128, 127]; NaN -> 0 */
static int quantize_one(float x, float scale) {
  float q = rintf(x / scale);
  if (q != q) return 0;
  return q < -128.f ? -128 : q > 127.f ? 127 : (int)q;
}

/* pos = max(qx, 0), neg = max(-qx, 0); returns 1 if any qx < 0 */
static int quantize_split(const float *x, int64_t n, float scale, uint8_t *pos, uint8_t *neg) {
  int any_negative = 0;
#pragma omp parallel for schedule(static) reduction(| : any_negative)
  for (int64_t i = 0; i < n; i++) {
    int q = quantize_one(x[i], scale);
    pos[i] = (uint8_t)(q > 0 ? q : 0);
    neg[i] = (uint8_t)(q < 0 ? -q : 0);
    any_negative |= q < 0;
  }
  return any_negative;
}

/* ---- the naive path (NAIVE) ------------------------------------------------------ */

/* acc through conv_naive.c's float64 loop (the oracle of every
 * convolution): qx and wq are whole numbers and every partial sum stays
 * below 2^31 (check_int8), so the float64 sums are exact. */
static int naive_acc(const cnn_conv_shape *s, const float *x, float scale, const float *wq,
                     int32_t *acc) {
  int64_t nx = s->N * s->C * s->H * s->W, ny = s->N * s->K * s->OH * s->OW;
  int64_t nw = s->K * (s->C / s->groups) * s->R * s->S;
  double *xd = malloc((size_t)(nx + nw + ny) * sizeof(double));
  if (!xd) {
    cnn_set_error("conv2d_int8: out of memory for the naive path (%lld elements)",
                  (long long)(nx + nw + ny));
    return -1;
  }
  double *wd = xd + nx, *yd = wd + nw;
  for (int64_t i = 0; i < nx; i++) xd[i] = quantize_one(x[i], scale);
  for (int64_t i = 0; i < nw; i++) wd[i] = wq[i];
  int rc = cnn_cpu_conv2d_naive_forward(CNN_FLOAT64, s, xd, wd, NULL, yd);
  for (int64_t i = 0; rc == 0 && i < ny; i++) acc[i] = (int32_t)yd[i];
  free(xd);
  return rc;
}

/* ---- oneDNN ------------------------------------------------------------------------ */

/* acc = conv(pos) - conv(neg).  -2: no oneDNN primitive (nothing usable written). */
static int onednn_acc(const cnn_conv_shape *s, const float *x, float scale, const float *wq,
                      uint8_t *pos, uint8_t *neg, int32_t *acc, int32_t *acc_neg) {
  int64_t nx = s->N * s->C * s->H * s->W, ny = s->N * s->K * s->OH * s->OW;
  int negative = quantize_split(x, nx, scale, pos, neg);
  int rc = cnn_cpu_conv2d_onednn_forward_u8(s, pos, wq, acc);
  if (rc || !negative) return rc;
  if ((rc = cnn_cpu_conv2d_onednn_forward_u8(s, neg, wq, acc_neg))) return rc;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < ny; i++) acc[i] -= acc_neg[i];
  return 0;
}

/* ---- scales, bias, ReLU ------------------------------------------------------------ */

static void epilogue(const cnn_conv_shape *s, const int32_t *acc, float x_scale,
                     const float *w_scale, const float *b, int relu, float *y) {
  int64_t plane = s->OH * s->OW;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < s->N; n++)
    for (int64_t k = 0; k < s->K; k++) {
      float scale = x_scale * w_scale[k], bias = b ? b[k] : 0.f;
      const int32_t *a = acc + (n * s->K + k) * plane;
      float *out = y + (n * s->K + k) * plane;
      for (int64_t p = 0; p < plane; p++) {
        float v = (float)a[p] * scale + bias;
        out[p] = relu && !(v > 0.f) ? 0.f : v;
      }
    }
}

/* ---- entry -------------------------------------------------------------------------- */

static int check_int8(const cnn_conv_shape *s) {
  char d[256];
  assert(cnn_cpu_conv2d_shape_valid(CNN_FLOAT32, s));
  if (s->C / s->groups * s->R * s->S <= INT8_MAX_TERMS) return 0;
  cnn_set_error("conv2d_int8: %lld products per output overflow the int32 accumulator "
                "(at most %lld) (%s)",
                (long long)(s->C / s->groups * s->R * s->S), (long long)INT8_MAX_TERMS,
                cnn_conv_shape_str(s, d));
  return -1;
}

typedef struct {
  uint8_t *pos, *neg; /* qx parts */
  int32_t *acc, *acc_neg;
} int8_buffers;

static void buffers_free(int8_buffers *b) {
  free(b->pos), free(b->neg), free(b->acc), free(b->acc_neg);
}

static int buffers_alloc(const cnn_conv_shape *s, int8_buffers *b) {
  int64_t nx = s->N * s->C * s->H * s->W, ny = s->N * s->K * s->OH * s->OW;
  *b = (int8_buffers){malloc((size_t)nx + 1), malloc((size_t)nx + 1), malloc((size_t)ny * 4 + 4),
                      malloc((size_t)ny * 4 + 4)};
  if (b->pos && b->neg && b->acc && b->acc_neg) return 0;
  buffers_free(b);
  cnn_set_error("conv2d_int8: out of memory for %lld input and %lld output elements", (long long)nx,
                (long long)ny);
  return -1;
}

int cnn_cpu_conv2d_int8_forward(cnn_conv_algo algo, const cnn_conv_shape *s, const float *x,
                                float x_scale, const float *wq, const float *w_scale,
                                const float *b, int relu, float *y) {
  int8_buffers buf;
  if (check_int8(s) || buffers_alloc(s, &buf)) return -1;
  int rc = -2;
  if (algo != CNN_CONV_NAIVE)
    rc = onednn_acc(s, x, x_scale, wq, buf.pos, buf.neg, buf.acc, buf.acc_neg);
  if (rc == -2) rc = naive_acc(s, x, x_scale, wq, buf.acc);
  if (rc == 0) epilogue(s, buf.acc, x_scale, w_scale, b, relu, y);
  buffers_free(&buf);
  return rc;
}
