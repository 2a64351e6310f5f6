/*
 * deconv_onednn.c -- the float32 transposed convolution through oneDNN's
 * deconvolution primitive, on conv_onednn.c's machinery
 * (primitive cache, ports, arena: onednn_conv.h).
 *
 * Why the deconvolution primitive rather than the convolution's passes
 * with their roles swapped: its weight pass sums the bias gradient, and
 * its two backward passes read the same dy, so one reorder of dy serves
 * both (conv_onednn.c's backward pair).  The bias gradient was as long as
 * the convolution itself on the bench's layers (a generic reduction over
 * N, H, W of a 16x32x32x32 dy: ~2.7 ms against ~2.2 ms for all three
 * oneDNN passes, one thread).
 *
 * Forward bias.  Not inside the forward primitive: oneDNN 2.6 adds a
 * float32 deconvolution's bias in a reference loop after the convolution
 * kernel (the U-Net layer of bench/conv_transpose.lua, 16x32x32x32 output:
 * 2.1 ms with the bias, 0.44 ms without, one thread), so the primitive
 * runs without it and channel_bias.c adds it to the plain output.
 *
 * Shapes.  s is the convolution whose input-gradient the deconvolution is
 * (onednn_conv.h), so oneDNN sees
 *   src     N x K x OH x OW         (the transposed op's input x)
 *   weights C x K x R x S, groups:  g x C/g x K/g x R x S, in the caller's
 *           K x C/g x R x S memory: the "iohw" ("giohw") tag
 *   dst     N x C x H x W           (its output y), bias C
 * with the convolution's strides, dilations and paddings; oneDNN's
 * deconvolution accepts exactly the output sizes for which its
 * convolution's floor division gives the input back, as cnn_conv_shape's
 * do (output_padding ends up in the bottom/right padding, see "Geometry"
 * in core/ops/nn_conv_transpose.c).
 */
#include "cpu/onednn_conv.h"

void cnn_onednn_deconv_mds(const cnn_conv_shape *s, conv_mds *m) {
  dnnl_dims_t x = {s->N, s->K, s->OH, s->OW}, y = {s->N, s->C, s->H, s->W}, b = {s->C};
  dnnl_dims_t w = {s->C, s->K, s->R, s->S};
  dnnl_dims_t gw = {s->groups, s->C / s->groups, s->K / s->groups, s->R, s->S};
  int g = s->groups > 1, wn = g ? 5 : 4;
  dnnl_memory_desc_init_by_tag(&m->plain[T_SRC], 4, x, dnnl_f32, dnnl_nchw);
  dnnl_memory_desc_init_by_tag(&m->plain[T_WEI], wn, g ? gw : w, dnnl_f32,
                               g ? dnnl_giohw : dnnl_iohw);
  dnnl_memory_desc_init_by_tag(&m->plain[T_DST], 4, y, dnnl_f32, dnnl_nchw);
  dnnl_memory_desc_init_by_tag(&m->any[T_SRC], 4, x, dnnl_f32, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&m->any[T_WEI], wn, g ? gw : w, dnnl_f32, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&m->any[T_DST], 4, y, dnnl_f32, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&m->bias, 1, b, dnnl_f32, dnnl_x);
  m->strides[0] = s->sh, m->strides[1] = s->sw;
  m->dilates[0] = s->dh - 1, m->dilates[1] = s->dw - 1;
  m->pad_l[0] = s->pt, m->pad_l[1] = s->pl;
  m->pad_r[0] = s->pb, m->pad_r[1] = s->pr;
}

dnnl_status_t cnn_onednn_deconv_desc(conv_kind kind, conv_mds *m, int has_bias,
                                     dnnl_deconvolution_desc_t *d) {
  const dnnl_memory_desc_t *bias = has_bias ? &m->bias : NULL;
  if (kind == FWD)
    return dnnl_dilated_deconvolution_forward_desc_init(
        d, dnnl_forward_training, dnnl_deconvolution_direct, &m->any[T_SRC], &m->any[T_WEI], bias,
        &m->any[T_DST], m->strides, m->dilates, m->pad_l, m->pad_r);
  if (kind == BWD_DATA)
    return dnnl_dilated_deconvolution_backward_data_desc_init(
        d, dnnl_deconvolution_direct, &m->any[T_SRC], &m->any[T_WEI], &m->any[T_DST], m->strides,
        m->dilates, m->pad_l, m->pad_r);
  return dnnl_dilated_deconvolution_backward_weights_desc_init(
      d, dnnl_deconvolution_direct, &m->any[T_SRC], &m->any[T_WEI], bias, &m->any[T_DST],
      m->strides, m->dilates, m->pad_l, m->pad_r);
}

/* The bias is added after the primitive, to the caller's plain output (see
 * "Forward bias" at the top). */
int cnn_cpu_conv_transpose2d_onednn_forward(const cnn_conv_shape *s, const float *x, const float *w,
                                            const float *b, float *y) {
  int rc = cnn_onednn_conv_run(DECONVOLUTION, FWD, s, (const void *[3]){x, w, y}, NULL);
  if (rc == 0 && b) cnn_cpu_add_channel_bias(0, s->N, s->C, s->H * s->W, b, y);
  return rc;
}

int cnn_cpu_conv_transpose2d_onednn_backward(const cnn_conv_shape *s, const float *dy,
                                             const float *x, const float *w, float *dx, float *dw,
                                             float *db) {
  return cnn_onednn_conv_backward_pair(DECONVOLUTION, s, dy, x, w, dx, dw, db);
}
