/*
 * nn_pool.c -- max_pool2d, avg_pool2d and adaptive_avg_pool2d on tensors.
 *
 * Validation and output sizes (PyTorch's rules, including ceil_mode's "the
 * last window must start inside the input or left padding" and max
 * pooling's dilation, which widens the window to (k-1)*d + 1) live here; the
 * loops are in core/cpu/pool.c.  Max pooling saves the argmax indices for
 * backward; it computes them only when backward will need them or the
 * caller asks (under no_grad they were an int64 array twice the output's
 * size, 50 MB per 1000x32x28x28 input); average pooling saves only the
 * geometry.  Where the backend runs channels-last (the CPU), a
 * channels-last input of max pooling (unless the caller takes the
 * indices) or of a pool to 1x1 (a ResNet's global average pool) stays in
 * its layout, output and gradient too.  The kernels are the pooling
 * entries of the tensor's backend (core/cpu/pool.c on the CPU), called
 * through POOL_CALL.
 */
#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "ops_internal.h"
#include "tensor_internal.h"

#include <stdlib.h>

/* PyTorch's pooling_output_shape; `ek` is the effective (dilated) kernel
 * (k-1)*d + 1, and in + 2p >= ek has been checked. */
static int64_t pool_out_size(int64_t in, int64_t ek, int s, int p, bool ceil_mode) {
  int64_t span = in + 2 * p - ek;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) out--; /* last window must start inside */
  return out;
}

int cnn_check_image_input(const char *op, const cnn_tensor *x, bool half) {
  char a[CNN_SHAPE_STR];
  if (x->ndim != 4) {
    cnn_set_error("%s: expected a 4-d input (N x C x H x W), got %s", op,
                  cnn_tensor_shape_str(x, a));
    return -1;
  }
  if (x->dtype != CNN_FLOAT32 && x->dtype != CNN_FLOAT64 && !(half && cnn_half_ok(x))) {
    cnn_set_error("%s: input dtype %s is not supported (use float32 or float64)", op,
                  cnn_dtype_name(x->dtype));
    return -1;
  }
  return 0;
}

/* entry `e` of the backend of t's device, on t's device and dtype */
#define POOL_CALL(t, op, e, ...)                                                                   \
  CNN_TENSOR_CALL(t, op, e, cnn_backend_dev(t), (t)->dtype, __VA_ARGS__)

/* The kernel, stride, padding and dilation of p as PyTorch checks them
 * (pool2d_shape_check): all positive but padding, padding at most half the
 * kernel (undilated, as PyTorch). */
static int check_pool_params(const char *op, const cnn_pool_params *p, const int dil[2]) {
  if (p->kernel[0] < 1 || p->kernel[1] < 1 || p->stride[0] < 1 || p->stride[1] < 1 ||
      p->pad[0] < 0 || p->pad[1] < 0 || dil[0] < 1 || dil[1] < 1) {
    cnn_set_error("%s: kernel, stride and dilation must be positive, padding non-negative", op);
    return -1;
  }
  if (p->pad[0] * 2 > p->kernel[0] || p->pad[1] * 2 > p->kernel[1]) {
    cnn_set_error("%s: padding %dx%d must be at most half the kernel %dx%d", op, p->pad[0],
                  p->pad[1], p->kernel[0], p->kernel[1]);
    return -1;
  }
  return 0;
}

/* Validates p for x and fills s; dil is {1, 1} for average pooling. */
static int pool_geometry(const char *op, const cnn_tensor *x, const cnn_pool_params *p,
                         const int dil[2], cnn_pool_shape *s) {
  char a[CNN_SHAPE_STR];
  if (check_pool_params(op, p, dil)) return -1;
  int64_t ekh = (int64_t)(p->kernel[0] - 1) * dil[0] + 1,
          ekw = (int64_t)(p->kernel[1] - 1) * dil[1] + 1;
  if (x->shape[2] + 2 * p->pad[0] < ekh || x->shape[3] + 2 * p->pad[1] < ekw) {
    cnn_set_error("%s: input %s (padded by %dx%d) is smaller than the kernel %lldx%lld%s", op,
                  cnn_tensor_shape_str(x, a), p->pad[0], p->pad[1], (long long)ekh, (long long)ekw,
                  dil[0] > 1 || dil[1] > 1 ? " (dilated)" : "");
    return -1;
  }
  *s = (cnn_pool_shape){.N = x->shape[0],
                        .C = x->shape[1],
                        .H = x->shape[2],
                        .W = x->shape[3],
                        .kh = p->kernel[0],
                        .kw = p->kernel[1],
                        .sh = p->stride[0],
                        .sw = p->stride[1],
                        .ph = p->pad[0],
                        .pw = p->pad[1],
                        .count_include_pad = p->count_include_pad,
                        .dh = dil[0],
                        .dw = dil[1]};
  s->OH = pool_out_size(s->H, ekh, s->sh, s->ph, p->ceil_mode);
  s->OW = pool_out_size(s->W, ekw, s->sw, s->pw, p->ceil_mode);
  if (s->OH > 0 && s->OW > 0) return 0;
  cnn_set_error("%s: input %s is smaller than the kernel %dx%d", op, cnn_tensor_shape_str(x, a),
                s->kh, s->kw);
  return -1;
}

static int max_pool_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  const cnn_pool_shape *s = (const cnn_pool_shape *)n->geometry;
  cnn_tensor *idx = cnn_node_saved(n, 0);
  cnn_tensor *dy = s->channels_last ? cnn_contiguous_channels_last(g) : cnn_contiguous(g);
  if (!idx || !dy) return cnn_tensor_release(dy), -1;
  gin[0] = s->channels_last
               ? cnn_empty_channels_last(n->in_shape[0], g->dtype, cnn_tensor_device(g))
               : cnn_empty(n->in_ndim[0], n->in_shape[0], g->dtype, cnn_tensor_device(g));
  int rc = gin[0] ? POOL_CALL(dy, "max_pool2d", max_pool2d_backward, s, cnn_tensor_data(dy),
                              cnn_tensor_data(idx), cnn_tensor_data(gin[0]))
                  : -1;
  cnn_tensor_release(dy);
  return rc;
}

cnn_tensor *cnn_max_pool2d(cnn_tensor *x, const cnn_pool_params *p, cnn_tensor **indices) {
  cnn_pool_shape s;
  if (cnn_check_image_input("max_pool2d", x, true) ||
      pool_geometry("max_pool2d", x, p, p->dilation, &s))
    return NULL;
  int64_t shape[4] = {s.N, s.C, s.OH, s.OW};
  bool want_idx = indices || cnn_any_requires_grad(1, &x); /* else no int64 array at all */
  /* channels-last in and out where the backend runs it, unless the caller
   * takes the indices (they are handed out in NCHW order) */
  s.channels_last = !indices && x->dtype != CNN_FLOAT16 && cnn_runs_channels_last(x, "max_pool2d");
  cnn_tensor *xc = s.channels_last ? (cnn_tensor_retain(x), x) : cnn_contiguous(x);
  cnn_device dev = cnn_tensor_device(x);
  cnn_tensor *y = !xc               ? NULL
                  : s.channels_last ? cnn_empty_channels_last(shape, x->dtype, dev)
                                    : cnn_empty(4, shape, x->dtype, dev);
  cnn_tensor *idx = !y || !want_idx   ? NULL
                    : s.channels_last ? cnn_empty_channels_last(shape, CNN_INT64, dev)
                                      : cnn_empty(4, shape, CNN_INT64, dev);
  if (y && want_idx && !idx) cnn_tensor_release(y), y = NULL;
  if (y && POOL_CALL(x, "max_pool2d", max_pool2d_forward, &s, cnn_tensor_data(xc),
                     cnn_tensor_data(y), idx ? cnn_tensor_data(idx) : NULL))
    cnn_tensor_release(y), y = NULL;
  cnn_node *n = y ? cnn_autograd_record(y, "MaxPool2dBackward", max_pool_backward, 1, &x) : NULL;
  if (n) {
    cnn_node_save(n, 0, idx);
    cnn_node_set_geometry(n, &s, sizeof s);
  }
  if (indices && y)
    *indices = idx;
  else
    cnn_tensor_release(idx);
  cnn_tensor_release(xc);
  return y;
}

static int avg_pool_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *dy = cnn_contiguous(g);
  if (!dy) return -1;
  const int64_t *in = n->in_shape[0];
  bool nhwc = n->ip[0] == 2; /* channels-last, to 1x1 */
  gin[0] = nhwc ? cnn_empty_channels_last(in, g->dtype, cnn_tensor_device(g))
                : cnn_empty(n->in_ndim[0], in, g->dtype, cnn_tensor_device(g));
  int rc = -1;
  if (gin[0] && nhwc)
    rc = POOL_CALL(dy, "adaptive_avg_pool2d", global_avg_pool_nhwc_backward, in[0], in[2] * in[3],
                   in[1], cnn_tensor_data(dy), cnn_tensor_data(gin[0]));
  else if (gin[0] && n->ip[0] == 0)
    rc = POOL_CALL(dy, "avg_pool2d", avg_pool2d_backward, (const cnn_pool_shape *)n->geometry,
                   cnn_tensor_data(dy), cnn_tensor_data(gin[0]));
  else if (gin[0])
    rc = POOL_CALL(dy, "adaptive_avg_pool2d", adaptive_avg_pool2d_backward, in[0], in[1], in[2],
                   in[3], g->shape[2], g->shape[3], cnn_tensor_data(dy), cnn_tensor_data(gin[0]));
  cnn_tensor_release(dy);
  return rc;
}

cnn_tensor *cnn_avg_pool2d(cnn_tensor *x, const cnn_pool_params *p) {
  cnn_pool_shape s;
  static const int no_dilation[2] = {1, 1};
  if (cnn_check_image_input("avg_pool2d", x, true) ||
      pool_geometry("avg_pool2d", x, p, no_dilation, &s))
    return NULL;
  int64_t shape[4] = {s.N, s.C, s.OH, s.OW};
  cnn_tensor *xc = cnn_contiguous(x);
  cnn_tensor *y = xc ? cnn_empty(4, shape, x->dtype, cnn_tensor_device(x)) : NULL;
  if (y &&
      POOL_CALL(x, "avg_pool2d", avg_pool2d_forward, &s, cnn_tensor_data(xc), cnn_tensor_data(y)))
    cnn_tensor_release(y), y = NULL;
  cnn_node *n = y ? cnn_autograd_record(y, "AvgPool2dBackward", avg_pool_backward, 1, &x) : NULL;
  if (n) cnn_node_set_geometry(n, &s, sizeof s), n->ip[0] = 0;
  cnn_tensor_release(xc);
  return y;
}

/* A channels-last x pooled to 1x1 by its backend's entry for that layout
 * (the CPU's), so that neither pass makes x or dx contiguous. */
static bool global_pool_channels_last(const cnn_tensor *x) {
  if ((x->dtype != CNN_FLOAT32 && x->dtype != CNN_FLOAT64) ||
      !cnn_runs_channels_last(x, "adaptive_avg_pool2d"))
    return false;
  const cnn_backend *be = cnn_backend_of(x, "adaptive_avg_pool2d");
  return be->global_avg_pool_nhwc_forward && be->global_avg_pool_nhwc_backward;
}

static cnn_tensor *global_pool_nhwc(cnn_tensor *x, const int64_t shape[4]) {
  cnn_tensor *y = cnn_empty(4, shape, x->dtype, cnn_tensor_device(x)); /* N x C x 1 x 1 */
  if (y &&
      POOL_CALL(x, "adaptive_avg_pool2d", global_avg_pool_nhwc_forward, x->shape[0],
                x->shape[2] * x->shape[3], x->shape[1], cnn_tensor_data(x), cnn_tensor_data(y)))
    cnn_tensor_release(y), y = NULL;
  cnn_node *n =
      y ? cnn_autograd_record(y, "AdaptiveAvgPool2dBackward", avg_pool_backward, 1, &x) : NULL;
  if (n) n->ip[0] = 2;
  return y;
}

cnn_tensor *cnn_adaptive_avg_pool2d(cnn_tensor *x, int64_t oh, int64_t ow) {
  if (cnn_check_image_input("adaptive_avg_pool2d", x, true)) return NULL;
  if (oh < 1 || ow < 1 || oh > (int64_t)1 << 20 || ow > (int64_t)1 << 20) {
    cnn_set_error("adaptive_avg_pool2d: output size %lldx%lld must be positive", (long long)oh,
                  (long long)ow);
    return NULL;
  }
  int64_t shape[4] = {x->shape[0], x->shape[1], oh, ow};
  if (oh == 1 && ow == 1 && global_pool_channels_last(x)) return global_pool_nhwc(x, shape);
  cnn_tensor *xc = cnn_contiguous(x);
  cnn_tensor *y = xc ? cnn_empty(4, shape, x->dtype, cnn_tensor_device(x)) : NULL;
  if (y &&
      POOL_CALL(x, "adaptive_avg_pool2d", adaptive_avg_pool2d_forward, x->shape[0], x->shape[1],
                x->shape[2], x->shape[3], oh, ow, cnn_tensor_data(xc), cnn_tensor_data(y)))
    cnn_tensor_release(y), y = NULL;
  cnn_node *n =
      y ? cnn_autograd_record(y, "AdaptiveAvgPool2dBackward", avg_pool_backward, 1, &x) : NULL;
  if (n) n->ip[0] = 1;
  cnn_tensor_release(xc);
  return y;
}
