/*
 * conv_post_ops.c -- the activations that oneDNN runs inside a float32
 * convolution as eltwise post-ops (net:fuse()), and the
 * forward that uses them.
 *
 * Each activation is cnnsh's unary op with its parameters (p0, p1 as
 * cnn_unary takes them); the table below gives oneDNN's eltwise algorithm
 * for it, with alpha and beta, and at most two steps:
 *
 *   relu            relu (alpha 0)        leaky_relu  relu (alpha = slope)
 *   elu             elu (alpha)           hardtanh    clip (p0, p1); relu6 is (0, 6)
 *   sigmoid         logistic              tanh        tanh
 *   gelu            gelu_erf              gelu_tanh   gelu_tanh
 *   silu            swish (alpha 1)       hardswish   hardswish
 *   mish            mish                  hardsigmoid linear (1/6, 1/2), then clip (0, 1)
 *   softplus        soft_relu, only for beta 1 and threshold >= 20 (PyTorch
 *                   returns x above the threshold; log(1 + e^x) differs from
 *                   x there by at most e^-20)
 *
 * Anything else (softplus with another beta, other unary ops) has no
 * post-op here: the caller applies the activation after the convolution.
 */
#include "cpu/onednn_conv.h"

/* One step: algorithm, alpha, beta. */
static void step(conv_post *post, int i, dnnl_alg_kind_t alg, double alpha, double beta) {
  post->alg[i] = alg, post->alpha[i] = (float)alpha, post->beta[i] = (float)beta;
}

int cnn_onednn_post_of(cnn_unary_op act, double p0, double p1, conv_post *post) {
  *post = (conv_post){0};
  switch (act) {
  case CNN_OP_RELU: step(post, 0, dnnl_eltwise_relu, 0, 0); return 1;
  case CNN_OP_LEAKY_RELU: step(post, 0, dnnl_eltwise_relu, p0, 0); return 1;
  case CNN_OP_ELU: step(post, 0, dnnl_eltwise_elu, p0, 0); return 1;
  case CNN_OP_HARDTANH: step(post, 0, dnnl_eltwise_clip, p0, p1); return 1;
  case CNN_OP_SIGMOID: step(post, 0, dnnl_eltwise_logistic, 0, 0); return 1;
  case CNN_OP_TANH: step(post, 0, dnnl_eltwise_tanh, 0, 0); return 1;
  case CNN_OP_GELU: step(post, 0, dnnl_eltwise_gelu_erf, 0, 0); return 1;
  case CNN_OP_GELU_TANH: step(post, 0, dnnl_eltwise_gelu_tanh, 0, 0); return 1;
  case CNN_OP_SILU: step(post, 0, dnnl_eltwise_swish, 1, 0); return 1;
  case CNN_OP_HARDSWISH: step(post, 0, dnnl_eltwise_hardswish, 0, 0); return 1;
  case CNN_OP_MISH: step(post, 0, dnnl_eltwise_mish, 0, 0); return 1;
  case CNN_OP_HARDSIGMOID:
    step(post, 0, dnnl_eltwise_linear, 1.0 / 6, 0.5);
    step(post, 1, dnnl_eltwise_clip, 0, 1);
    return 1;
  case CNN_OP_SOFTPLUS:
    if (p0 != 1 || !(p1 >= 20)) return 0;
    step(post, 0, dnnl_eltwise_soft_relu, 0, 0);
    return 1;
  default: return 0;
  }
}

int cnn_cpu_conv2d_onednn_forward_act(const cnn_conv_shape *s, const float *x, const float *w,
                                      const float *b, cnn_unary_op act, double p0, double p1,
                                      float *y) {
  conv_post post;
  if (!cnn_onednn_post_of(act, p0, p1, &post)) {
    cnn_set_error("conv2d: no oneDNN post-op for activation %d with parameters %g, %g", (int)act,
                  p0, p1);
    return -2;
  }
  return cnn_onednn_conv_forward_post(s, x, w, b, &post, y);
}
