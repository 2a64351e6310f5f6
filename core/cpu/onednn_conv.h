/*
 * onednn_conv.h -- core/cpu-internal: what conv_onednn.c (oneDNN's engine,
 * the per-shape primitive cache, the ports and the arena) shares with
 * deconv_onednn.c (the transposed convolution through oneDNN's
 * deconvolution primitive), so that both run on one machinery.
 *
 * A cache entry is one primitive of a `family` (convolution or
 * deconvolution) and a `kind` (forward, backward data, backward weights).
 * Both families take the same cnn_conv_shape -- for a deconvolution it is
 * the convolution whose input-gradient the deconvolution is (C, H, W: the
 * deconvolution's output; K, OH, OW: its input), as core/ops/
 * nn_conv_transpose.c describes it -- and the same three ports by role
 * (the table at the top of conv_onednn.c): SRC is the x of the pass, DST
 * its y.  Only the memory descriptors and the operation descriptor differ;
 * deconv_onednn.c makes those of the deconvolution.
 */
#ifndef CNN_CPU_ONEDNN_CONV_H
#define CNN_CPU_ONEDNN_CONV_H

#include <dnnl.h>

#include "cpu/kernels.h"

typedef enum { FWD = 0, BWD_DATA, BWD_WEIGHT } conv_kind;

typedef enum { CONVOLUTION = 0, DECONVOLUTION } conv_family;

/* The three tensors of a convolution, by role. */
enum { T_SRC = 0, T_WEI = 1, T_DST = 2 };

typedef struct {
  dnnl_memory_desc_t plain[3]; /* the caller's layouts: nchw, (g)oihw or (g)iohw, nchw */
  dnnl_memory_desc_t any[3];   /* same dims, dnnl_format_tag_any */
  dnnl_memory_desc_t bias;     /* x (the pass's output channels) */
  dnnl_dims_t strides, dilates, pad_l, pad_r;
} conv_mds;

/* Up to two eltwise post-ops of a float32 convolution forward
 * (net:fuse()): oneDNN's algorithm (dnnl_alg_kind_undef, zero: none) with
 * its alpha and beta, in order.  Part of the cache key. */
typedef struct {
  dnnl_alg_kind_t alg[2];
  float alpha[2], beta[2];
} conv_post;

/* conv_post_ops.c: the post-ops of activation `act` (cnnsh's unary op)
 * with its parameters p0, p1; 0 when oneDNN has no eltwise for it. */
int cnn_onednn_post_of(cnn_unary_op act, double p0, double p1, conv_post *post);

/* conv_onednn.c: the float32 convolution forward with post-ops; 0, -1, or
 * -2 (oneDNN has no primitive for the shape with them). */
int cnn_onednn_conv_forward_post(const cnn_conv_shape *s, const float *x, const float *w,
                                 const float *b, const conv_post *post, float *y);

/* conv_winograd.c: 1 when oneDNN's Winograd kernels should take the float32
 * convolution of shape s (s->allow_winograd and a shape they are faster
 * on), else 0: the direct kernels. */
int cnn_onednn_conv_winograd(const cnn_conv_shape *s);
/* Tests: which shapes cnn_onednn_conv_winograd() offers to the Winograd
 * kernels -- 0 none, 1 the rule (the default), 2 every float32 shape with
 * allow_winograd, so that the kernels' refusals and the callers' fallback
 * to the direct kernels run.  Returns the previous mode. */
int cnn_onednn_winograd_mode(int mode);

/* deconv_onednn.c: the float32 descriptors of the deconvolution of shape s. */
void cnn_onednn_deconv_mds(const cnn_conv_shape *s, conv_mds *m);
dnnl_status_t cnn_onednn_deconv_desc(conv_kind kind, conv_mds *m, int has_bias,
                                     dnnl_deconvolution_desc_t *d);

/* conv_onednn.c: one float32 pass of `family` through the cache: arrays[]
 * in the port order of the table at the top of conv_onednn.c; forward
 * passes of large batches run in slices.  0, -1 (error set) or -2 (oneDNN
 * has no primitive for the shape: the caller falls back). */
int cnn_onednn_conv_run(conv_family family, conv_kind kind, const cnn_conv_shape *s,
                        const void *arrays[3], const void *bias);
/* Both backward passes of `family` from one reorder of dy (dx: the data
 * pass's output, dw and db the weight pass's; db may be NULL). */
int cnn_onednn_conv_backward_pair(conv_family family, const cnn_conv_shape *s, const float *dy,
                                  const float *x, const float *w, float *dx, float *dw, float *db);

#endif
