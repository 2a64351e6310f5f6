/*
 * conv_winograd.c -- when oneDNN's Winograd convolution takes a float32
 * convolution instead of its direct kernels.
 *
 * oneDNN 2.6 has F(4x4, 3x3) Winograd kernels for AVX-512 (forward,
 * backward data and backward weights, in the training layouts: the
 * tensors keep the direct kernels' nChw16c / OIhw16i16o, so nothing
 * around them changes).  Each 4x4 output tile costs a 6x6 transform and
 * 36 C x K products -- about a quarter of the direct kernels'
 * multiplications -- which pays off with enough tiles and channels and
 * little padding to whole tiles.  Measured on an Intel Xeon (AVX-512, 2
 * threads; a C harness over oneDNN, fp32, the median of 21 calls),
 * Winograd against direct, forward / backward data / backward weights,
 * tiles = N ceil(OH/4) ceil(OW/4):
 *
 *   batch 64, 32->64 at 14x14 (tiles 1024)   1.25 / 1.12 / 1.16
 *   batch 64, 32->32 at 16x16 (1024)         1.28 / 1.30 / 1.24
 *   batch 64, 64->64 at 8x8 (256)            1.57 / 1.68 / 1.39
 *   batch 16, 128->128 at 28x28 (784)        2.38 / 2.41 / 1.88
 *   batch 16, 512->512 at 7x7 (64)           1.11 / 1.10 / 1.66
 *   batch 1, 64->64 at 56x56 (196)           1.69 / 1.70 / 1.38
 *   batch 16, 64->64 at 12x12 (144)          1.23 / 1.08 / 1.32
 *   batch 64, 32->32 at 8x8 (256)            0.95 / 0.97 / 0.84   tiles x min(C, K) = 2^13
 *   batch 2, 64->64 at 28x28 (98)            1.31 / 1.32 / 1.07   (2^13 - 2,000: left out)
 *   batch 8, 32->32 at 16x16 (128)           0.69 / 0.66 / 0.66
 *   batch 1, 512->512 at 7x7 (4)             0.20 / 0.18 / 0.22   under 64 tiles
 *   batch 1, 256->256 at 14x14 (16)          0.46 / 0.46 / 0.59
 *   batch 64, 32->32 at 6x6 (256)            0.48 / 0.51 / 0.61   36 of 64 tile pixels used
 *   batch 64, 16->16 at 32x32 (4096)         0.71 / 0.67 / 1.05   16 channels
 *   batch 64, 3->16 at 32x32                 0.14 / 0.70 / 0.19
 *
 * (bench/conv_winograd.c prints these and 17 more.)  So the rule: 'auto'
 * (cnn.set_conv_algo; the dispatcher sets the shape's allow_winograd,
 * oneDNN's entry points called directly keep 0), float32 arithmetic, 3x3,
 * stride 1, no dilation, one group, at least 32 input and output channels
 * in multiples of 16 (the kernels' vector width), at least 64 tiles,
 * tiles x min(C, K) above 2^13, and at least 3/4 of the tiles' pixels
 * inside the output.  More threads would want more tiles; the thresholds
 * are this 2-thread machine's.  Results differ from the direct kernels'
 * by rounding: relative to the largest output, 1.1e-6 to 2.3e-6 against
 * 3e-7 for direct (float64 reference, unit-scale data).  'onednn' keeps
 * the direct kernels everywhere.  A shape the Winograd kernels refuse
 * (padding over 1, for one) falls back to direct (conv_onednn.c,
 * conv_block_onednn.c).
 */
#include "cpu/onednn_conv.h"

static int64_t tiles_along(int64_t n) { return (n + 3) / 4; }

/* The tiles and channels are enough, and padding to whole tiles wastes
 * at most a quarter. */
static int enough_work(const cnn_conv_shape *s) {
  int64_t th = tiles_along(s->OH), tw = tiles_along(s->OW), tiles = s->N * th * tw;
  int64_t channels = s->C < s->K ? s->C : s->K;
  return tiles >= 64 && tiles * channels > (1 << 13) &&
         4 * s->OH * s->OW >= 3 * (4 * th) * (4 * tw);
}

static int mode = 1; /* 0: never, 1: the rule, 2: every float32 shape (tests) */

int cnn_onednn_winograd_mode(int m) {
  int prev = mode;
  mode = m;
  return prev;
}

int cnn_onednn_conv_winograd(const cnn_conv_shape *s) {
  if (!s->allow_winograd || s->math != CNN_FLOAT32 || mode == 0) return 0;
  if (mode == 2) return 1; /* the kernels refuse what they cannot run: callers fall back */
  return s->groups == 1 && s->R == 3 && s->S == 3 && s->sh == 1 && s->sw == 1 && s->dh == 1 &&
         s->dw == 1 && s->C >= 32 && s->K >= 32 && s->C % 16 == 0 && s->K % 16 == 0 &&
         enough_work(s);
}
