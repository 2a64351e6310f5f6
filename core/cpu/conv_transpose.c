/*
 * conv_transpose.c -- entry points of the CPU transposed convolution:
 * dispatch, as conv.c is for the convolution.
 *
 *   float32, AUTO / ONEDNN -> oneDNN's deconvolution (deconv_onednn.c),
 *                             bias and its gradient inside the primitive
 *   otherwise, or a shape oneDNN rejects -> the convolution's passes with
 *                             the roles swapped (the table in core/ops/
 *                             nn_conv_transpose.c), through conv.c's
 *                             dispatch (im2col, naive, float64), and the
 *                             bias loops of channel_bias.c
 *
 * s is the convolution whose input-gradient the transposed one is
 * (kernels.h), validated by core/ops/nn_conv_transpose.c: the entries
 * assert cnn_cpu_conv2d_shape_valid() like any convolution's.  Errors of
 * the fallback's conv passes read "conv2d: ..." (the op renames them).
 */
#include <assert.h>

#include "cpu/kernels.h"

/* Zero-sized problems take the fallback (the naive loops behind conv.c). */
static int onednn_applies(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s) {
  int empty =
      s->N == 0 || s->C == 0 || s->K == 0 || s->H == 0 || s->W == 0 || s->OH == 0 || s->OW == 0;
  return dt == CNN_FLOAT32 && (algo == CNN_CONV_AUTO || algo == CNN_CONV_ONEDNN) && !empty;
}

int cnn_cpu_conv_transpose2d_forward(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                                     const void *x, const void *w, const void *b, void *y) {
  assert(cnn_cpu_conv2d_shape_valid(dt, s));
  if (onednn_applies(algo, dt, s)) {
    int r = cnn_cpu_conv_transpose2d_onednn_forward(s, x, w, b, y);
    if (r != -2) return r; /* -2: no oneDNN primitive for this shape */
  }
  if (cnn_cpu_conv2d_backward_data(algo, dt, s, x, w, y)) return -1;
  if (b) cnn_cpu_add_channel_bias(dt == CNN_FLOAT64, s->N, s->C, s->H * s->W, b, y);
  return 0;
}

/* The fallback: dx is the convolution of dy (no bias), dw the
 * convolution's weight-gradient with x and dy exchanged. */
static int swapped_backward(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                            const void *dy, const void *x, const void *w, void *dx, void *dw,
                            void *db) {
  if (dx && cnn_cpu_conv2d_forward(algo, dt, s, dy, w, NULL, dx)) return -1;
  if (dw && cnn_cpu_conv2d_backward_weight(algo, dt, s, x, dy, dw, NULL)) return -1;
  if (dw && db) cnn_cpu_channel_sums(dt == CNN_FLOAT64, s->N, s->C, s->H * s->W, dy, db);
  return 0;
}

int cnn_cpu_conv_transpose2d_backward(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                                      const void *dy, const void *x, const void *w, void *dx,
                                      void *dw, void *db) {
  assert(cnn_cpu_conv2d_shape_valid(dt, s));
  if (dx && dw && onednn_applies(algo, dt, s)) {
    int r = cnn_cpu_conv_transpose2d_onednn_backward(s, dy, x, w, dx, dw, db);
    if (r != -2) return r; /* -2: no oneDNN primitive for this shape */
  }
  return swapped_backward(algo, dt, s, dy, x, w, dx, dw, db);
}
