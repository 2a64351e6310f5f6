/*
 * layout_transpose.c -- N x C x L arrays to N x L x C and back (NCHW <->
 * NHWC with L = H*W): the channels-last convolution's way into the paths
 * that take NCHW only (conv.c).  float32 and float64.
 *
 * Each image is a C x L matrix transposed in tiles of TILE x TILE, so that
 * both the reads and the writes stay within a few cache lines at a time;
 * the images are split over the threads.
 */
#include "cpu/kernels.h"

#define TILE 16

/* dst (L x C) = src (C x L)^T for one image, element size `es` (4 or 8). */
static void transpose_image(int es, int64_t C, int64_t L, const char *src, char *dst) {
  for (int64_t c0 = 0; c0 < C; c0 += TILE)
    for (int64_t l0 = 0; l0 < L; l0 += TILE) {
      int64_t c1 = c0 + TILE < C ? c0 + TILE : C, l1 = l0 + TILE < L ? l0 + TILE : L;
      for (int64_t c = c0; c < c1; c++)
        for (int64_t l = l0; l < l1; l++) {
          if (es == 4)
            ((float *)dst)[l * C + c] = ((const float *)src)[c * L + l];
          else
            ((double *)dst)[l * C + c] = ((const double *)src)[c * L + l];
        }
    }
}

/* Per image: rows x cols into cols x rows. */
static void transpose_images(cnn_dtype dt, int64_t N, int64_t rows, int64_t cols, const void *src,
                             void *dst) {
  int es = dt == CNN_FLOAT64 ? 8 : 4;
  int64_t image = rows * cols * es;
#pragma omp parallel for schedule(static) if (N * image > (1 << 16))
  for (int64_t n = 0; n < N; n++)
    transpose_image(es, rows, cols, (const char *)src + n * image, (char *)dst + n * image);
}

void cnn_cpu_nchw_to_nhwc(cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *src,
                          void *dst) {
  transpose_images(dt, N, C, L, src, dst);
}

void cnn_cpu_nhwc_to_nchw(cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *src,
                          void *dst) {
  transpose_images(dt, N, L, C, src, dst);
}
