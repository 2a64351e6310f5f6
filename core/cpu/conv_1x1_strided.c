/*
 * conv_1x1_strided.c -- the strided 1x1 convolution on NCHW arrays
 * (ResNet's projection shortcut: 1x1, stride 2, no padding), float32, in
 * one pass over memory.
 *
 * Why: oneDNN 2.6 reorders NCHW activations to its blocked layouts and
 * back around its jit_1x1 kernels; in ResNet-20's training step the layer2
 * shortcut (64 x 16 x 32 x 32 -> 32 channels, stride 2) read 0.35 of the
 * DRAM copy bandwidth forward and 0.28 backward.  The work is a small
 * product (K x C weights) over the pixels the stride keeps.  Here, for
 * blocks of output rows of one image (P = rows x OW pixels):
 *
 *   xs  = the input pixels the stride keeps, gathered (C x P): one read
 *         of the rows they lie on
 *   forward          y_blk  = W xs                  (K x C times C x P)
 *   backward data    t      = W^T dy_blk (C x P), then dx's rows written
 *                    once: t at the kept pixels, 0 everywhere else
 *   backward weight  dW    += dy_blk xs^T (xs gathered as P x C; per
 *                    thread, summed)
 *   bias             b added to y; db = the sums of dy
 *
 * The products, gathers and scatters are conv_1x1_strided_avx512.c's
 * where cnn_cpu_use_avx512() (the gather and scatter only at column stride
 * 2), else plain loops and OpenBLAS's products (core/blas.c; inside the parallel loop it runs
 * single-threaded).  Both backward passes come out of one walk over dy.
 * The per-thread dW and db partials are summed in thread order (a static
 * schedule: the same split for the same thread count).
 *
 * Channels-last tensors keep oneDNN: on nhwc it runs this shape without
 * reorders.  It was faster alone than these loops on pixel rows (1.5x
 * forward), and in the step their backward only matched it (0.63-0.80
 * against 0.72-0.78 ms at layer2), so they were not kept.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "cpu/kernels.h"

/* The largest weight (K x C) these kernels take: above it oneDNN's jit
 * kernels win, the product outweighing the reorders.  bench/conv_1x1_strided.c
 * (2 threads, oneDNN's time over ours, warm / cold caches): ResNet-20's
 * 16 -> 32 and 32 -> 64 forward 1.57-2.33, backward 1.65-2.33; ResNet-18's
 * at 224x224, batch 16: 64 -> 128 forward 1.36-1.41, backward 1.11-1.21;
 * 128 -> 256 forward 1.09-1.15 but backward 0.92-0.95; 256 -> 512
 * 0.66-0.71 and 0.57-0.62. */
#define MAX_WEIGHTS (64 * 128)
/* Output pixels a block of rows holds at most (unless one row is longer). */
#define BLOCK_PIXELS 512
/* dx arrays of this many bytes or more are written with non-temporal
 * stores (conv_1x1_strided_avx512.c): more than one core's L2 here, so
 * most of it would leave the cache before the next op reads it. */
#define STREAM_DX_BYTES ((int64_t)2 << 20)

/* One block: output rows [i0, i1) of image n. */
typedef struct {
  int64_t n, i0, i1;
} block;

typedef struct {
  const cnn_conv_shape *s;
  int avx512;
  int stream_dx; /* dx written with non-temporal stores (STREAM_DX_BYTES) */
  int64_t rows_per_block, blocks_per_image;
  float *wt; /* W^T (C x K), for backward data */
} plan;

/* The AVX-512 transposed gather addresses 16 channels by 32-bit element
 * offsets c*H*W, and OpenBLAS takes int sizes: planes above 2^31/16
 * floats stay oneDNN's. */
bool cnn_cpu_conv2d_1x1_strided_takes(cnn_dtype dt, const cnn_conv_shape *s) {
  return dt == CNN_FLOAT32 && s->math == CNN_FLOAT32 && !s->channels_last && s->R == 1 &&
         s->S == 1 && (s->sh > 1 || s->sw > 1) && s->pt == 0 && s->pb == 0 && s->pl == 0 &&
         s->pr == 0 && s->groups == 1 && s->N > 0 && s->C > 0 && s->K > 0 && s->OH > 0 &&
         s->OW > 0 && s->K * s->C <= MAX_WEIGHTS && s->OW <= INT32_MAX / s->C &&
         s->OH * s->OW <= INT32_MAX && s->H * s->W <= INT32_MAX / 16;
}

static plan plan_of(const cnn_conv_shape *s) {
  int64_t rows = BLOCK_PIXELS / s->OW;
  if (rows < 1) rows = 1;
  if (rows > s->OH) rows = s->OH;
  int stream_dx = s->N * s->C * s->H * s->W * (int64_t)sizeof(float) >= STREAM_DX_BYTES;
  return (plan){s, cnn_cpu_use_avx512(), stream_dx, rows, (s->OH + rows - 1) / rows, NULL};
}

static block block_at(const plan *p, int64_t t) {
  block b = {t / p->blocks_per_image, (t % p->blocks_per_image) * p->rows_per_block, 0};
  b.i1 = b.i0 + p->rows_per_block < p->s->OH ? b.i0 + p->rows_per_block : p->s->OH;
  return b;
}

static int64_t pixels(const cnn_conv_shape *s, block b) { return (b.i1 - b.i0) * s->OW; }

/* Floats of one block's workspace (xs or t: C x P). */
static size_t block_floats(const cnn_conv_shape *s) {
  return (size_t)(s->C * (BLOCK_PIXELS + s->OW));
}

/* ---- the block's arrays ---------------------------------------------------------- */

/* The image's C x H x W planes in x or dx. */
static int64_t image_offset(const cnn_conv_shape *s, block b) { return b.n * s->C * s->H * s->W; }

/* xs of block b: C x P, the kept pixels of each channel's rows. */
static void gather(const plan *p, block b, const float *x, float *xs) {
  const cnn_conv_shape *s = p->s;
  const float *image = x + image_offset(s, b);
  int64_t P = pixels(s, b);
  if (p->avx512 && s->sw == 2) {
    cnn_cpu_strided_gather_f32_avx512(s, image, b.i0, b.i1, xs);
    return;
  }
  for (int64_t c = 0; c < s->C; c++)
    for (int64_t i = b.i0; i < b.i1; i++) {
      const float *row = image + (c * s->H + i * s->sh) * s->W;
      float *out = xs + c * P + (i - b.i0) * s->OW;
      for (int64_t j = 0; j < s->OW; j++) out[j] = row[j * s->sw];
    }
}

/* xs of block b transposed: P x C. */
static void gather_transposed(const plan *p, block b, const float *x, float *xt) {
  const cnn_conv_shape *s = p->s;
  const float *image = x + image_offset(s, b);
  if (p->avx512) {
    cnn_cpu_strided_gather_t_f32_avx512(s, image, b.i0, b.i1, xt);
    return;
  }
  for (int64_t c = 0; c < s->C; c++)
    for (int64_t i = b.i0; i < b.i1; i++) {
      const float *row = image + (c * s->H + i * s->sh) * s->W;
      float *out = xt + (i - b.i0) * s->OW * s->C + c;
      for (int64_t j = 0; j < s->OW; j++) out[j * s->C] = row[j * s->sw];
    }
}

/* dx's rows of image b.n that block b writes: its output rows' strips of
 * sh rows, and for the last block every row below them.  t (C x P) goes
 * to the kept pixels, 0 everywhere else. */
static void scatter(const plan *p, block b, const float *t, float *dx) {
  const cnn_conv_shape *s = p->s;
  float *image = dx + image_offset(s, b);
  int64_t P = pixels(s, b), h0 = b.i0 * s->sh, h1 = b.i1 == s->OH ? s->H : b.i1 * s->sh;
  if (h1 > s->H) h1 = s->H;
  if (p->avx512 && s->sw == 2) {
    cnn_cpu_strided_scatter_f32_avx512(s, t, b.i0, b.i1, h0, h1, p->stream_dx, image);
    return;
  }
  for (int64_t c = 0; c < s->C; c++)
    for (int64_t h = h0; h < h1; h++) {
      float *row = image + (c * s->H + h) * s->W;
      memset(row, 0, (size_t)s->W * sizeof(float));
      if (h % s->sh || h / s->sh >= b.i1) continue;
      const float *kept = t + c * P + (h / s->sh - b.i0) * s->OW;
      for (int64_t j = 0; j < s->OW; j++) row[j * s->sw] = kept[j];
    }
}

/* ---- the products ---------------------------------------------------------------- */

/* out (M x P) = A (M x D) B (D x P), or += with add = 1 */
static void product(const plan *p, int add, int64_t M, int64_t D, int64_t P, const float *A,
                    int64_t lda, const float *B, int64_t ldb, float *out, int64_t ldo) {
  if (p->avx512)
    cnn_cpu_product_f32_avx512(add, M, D, P, A, lda, B, ldb, out, ldo);
  else
    cnn_blas_sgemm(false, false, (int)M, (int)P, (int)D, 1.0f, A, (int)lda, B, (int)ldb,
                   add ? 1.0f : 0.0f, out, (int)ldo);
}

/* &a[n][0][first pixel of b] of an output-shaped array (y or dy). */
static int64_t out_offset(const cnn_conv_shape *s, block b) {
  return b.n * s->K * s->OH * s->OW + b.i0 * s->OW;
}

static void forward_block(const plan *p, block b, const float *x, const float *w, const float *bias,
                          float *xs, float *y) {
  const cnn_conv_shape *s = p->s;
  int64_t P = pixels(s, b), ld = s->OH * s->OW;
  float *yb = y + out_offset(s, b);
  gather(p, b, x, xs);
  product(p, 0, s->K, s->C, P, w, s->C, xs, P, yb, ld);
  for (int64_t k = 0; bias && k < s->K; k++)
    for (int64_t q = 0; q < P; q++) yb[k * ld + q] += bias[k];
}

static void data_block(const plan *p, block b, const float *dy, float *t, float *dx) {
  const cnn_conv_shape *s = p->s;
  int64_t P = pixels(s, b);
  product(p, 0, s->C, s->K, P, p->wt, s->K, dy + out_offset(s, b), s->OH * s->OW, t, P);
  scatter(p, b, t, dx);
}

/* dw += dy_blk xs^T (K x P times P x C); dbias += dy_blk's sums (may be NULL) */
static void weight_block(const plan *p, block b, const float *dy, const float *x, float *xt,
                         float *dw, double *dbias) {
  const cnn_conv_shape *s = p->s;
  int64_t P = pixels(s, b), ld = s->OH * s->OW;
  const float *dyb = dy + out_offset(s, b);
  gather_transposed(p, b, x, xt);
  product(p, 1, s->K, P, s->C, dyb, ld, xt, s->C, dw, s->C);
  for (int64_t k = 0; dbias && k < s->K; k++) {
    float sum = 0.0f;
    for (int64_t q = 0; q < P; q++) sum += dyb[k * ld + q];
    dbias[k] += sum;
  }
}

/* ---- the passes ------------------------------------------------------------------- */

int cnn_cpu_conv2d_1x1_strided_forward(const cnn_conv_shape *s, const float *x, const float *w,
                                       const float *b, float *y) {
  plan p = plan_of(s);
  int64_t tasks = s->N * p.blocks_per_image;
  int failed = 0;
#pragma omp parallel reduction(| : failed)
  {
    float *xs = malloc(block_floats(s) * sizeof(float));
    failed = !xs;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; t++)
      if (xs) forward_block(&p, block_at(&p, t), x, w, b, xs, y);
    free(xs);
  }
  if (failed) cnn_set_error("conv2d: out of memory");
  return failed ? -1 : 0;
}

/* Every thread's dw (K*C floats) and db (K doubles) partials. */
typedef struct {
  float *dw;
  double *db;
} partials;

static void sum_partials(const cnn_conv_shape *s, int threads, partials pt, float *dw, float *db) {
  int64_t KC = s->K * s->C;
  for (int64_t e = 0; e < KC; e++) {
    float sum = 0.0f;
    for (int r = 0; r < threads; r++) sum += pt.dw[r * KC + e];
    dw[e] = sum;
  }
  for (int64_t k = 0; db && k < s->K; k++) {
    double sum = 0.0;
    for (int r = 0; r < threads; r++) sum += pt.db[r * s->K + k];
    db[k] = (float)sum;
  }
}

/* Both passes over the blocks; 1 where a workspace could not be had. */
static int backward_blocks(plan *p, int threads, const float *dy, const float *x, float *dx,
                           partials pt) {
  const cnn_conv_shape *s = p->s;
  int64_t tasks = s->N * p->blocks_per_image;
  int failed = 0;
#pragma omp parallel num_threads(threads) reduction(| : failed)
  {
    float *xt = pt.dw ? malloc(block_floats(s) * sizeof(float)) : NULL;
    float *t = dx ? malloc(block_floats(s) * sizeof(float)) : NULL;
    int r = omp_get_thread_num(), ok = (xt || !pt.dw) && (t || !dx);
    failed = !ok;
#pragma omp for schedule(static)
    for (int64_t task = 0; task < tasks; task++) {
      if (!ok) continue;
      block b = block_at(p, task);
      if (dx) data_block(p, b, dy, t, dx);
      if (pt.dw)
        weight_block(p, b, dy, x, xt, pt.dw + r * s->K * s->C, pt.db ? pt.db + r * s->K : NULL);
    }
    free(xt);
    free(t);
  }
  return failed;
}

/* dx, or dw (and db), may be NULL; the ones given are overwritten. */
int cnn_cpu_conv2d_1x1_strided_backward(const cnn_conv_shape *s, const float *dy, const float *x,
                                        const float *w, float *dx, float *dw, float *db) {
  plan p = plan_of(s);
  int threads = omp_get_max_threads(), failed = 0;
  partials pt = {0};
  if (dx && (p.wt = malloc((size_t)(s->K * s->C) * sizeof(float))))
    for (int64_t k = 0; k < s->K; k++)
      for (int64_t c = 0; c < s->C; c++) p.wt[c * s->K + k] = w[k * s->C + c];
  if (dw) pt.dw = calloc((size_t)(threads * s->K * s->C), sizeof(float));
  if (dw && db) pt.db = calloc((size_t)(threads * s->K), sizeof(double));
  if ((dx && !p.wt) || (dw && !pt.dw) || (db && dw && !pt.db))
    failed = 1;
  else
    failed = backward_blocks(&p, threads, dy, x, dx, pt);
  if (!failed && dw) sum_partials(s, threads, pt, dw, db);
  free(p.wt);
  free(pt.dw);
  free(pt.db);
  if (failed) cnn_set_error("conv2d: out of memory");
  return failed ? -1 : 0;
}
