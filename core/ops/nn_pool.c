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
 * geometry.  The kernels of the tensor's device are picked in the pool_*
 * wrappers below (the dispatch point: core/cpu/pool.c, or the CUDA
 * backend's).
 */
#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "cpu/kernels.h"
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

static int pool_input_ok(const char *op, const cnn_tensor *x) {
  char a[CNN_SHAPE_STR];
  if (x->ndim != 4) {
    cnn_set_error("%s: expected a 4-d input (N x C x H x W), got %s", op, cnn_tensor_shape_str(x, a));
    return -1;
  }
  if (x->dtype != CNN_FLOAT32 && x->dtype != CNN_FLOAT64) {
    cnn_set_error("%s: input dtype %s is not supported (use float32 or float64)", op, cnn_dtype_name(x->dtype));
    return -1;
  }
  return 0;
}

/* ---- the kernels of t's device ------------------------------------------------------ */

static int pool_max_fwd(const cnn_tensor *t, const cnn_pool_shape *s, const void *x, void *y, int64_t *idx) {
  if (!cnn_on_cuda(t)) return cnn_cpu_max_pool2d_forward(t->dtype, s, x, y, idx);
  const cnn_backend *be = cnn_cuda_backend("max_pool2d");
  if (!be) return -1;
  if (!be->max_pool2d_forward) return cnn_backend_unsupported("max_pool2d");
  return be->max_pool2d_forward(cnn_tensor_device(t).index, t->dtype, s, x, y, idx);
}

static int pool_max_bwd(const cnn_tensor *t, const cnn_pool_shape *s, const void *dy, const int64_t *idx, void *dx) {
  if (!cnn_on_cuda(t)) return cnn_cpu_max_pool2d_backward(t->dtype, s, dy, idx, dx);
  const cnn_backend *be = cnn_cuda_backend("max_pool2d");
  if (!be) return -1;
  if (!be->max_pool2d_backward) return cnn_backend_unsupported("max_pool2d");
  return be->max_pool2d_backward(cnn_tensor_device(t).index, t->dtype, s, dy, idx, dx);
}

/* average pooling: forward when `bwd` is 0 (in = x, out = y), else backward (in = dy, out = dx) */
static int pool_avg(const cnn_tensor *t, int bwd, const cnn_pool_shape *s, const void *in, void *out) {
  if (!cnn_on_cuda(t))
    return bwd ? cnn_cpu_avg_pool2d_backward(t->dtype, s, in, out) : cnn_cpu_avg_pool2d_forward(t->dtype, s, in, out);
  const cnn_backend *be = cnn_cuda_backend("avg_pool2d");
  if (!be) return -1;
  int dev = cnn_tensor_device(t).index;
  if (!bwd && be->avg_pool2d_forward) return be->avg_pool2d_forward(dev, t->dtype, s, in, out);
  if (bwd && be->avg_pool2d_backward) return be->avg_pool2d_backward(dev, t->dtype, s, in, out);
  return cnn_backend_unsupported("avg_pool2d");
}

/* adaptive average pooling of N x C planes H x W <-> OH x OW, as pool_avg */
static int pool_adaptive(const cnn_tensor *t, int bwd, const int64_t *nchw, int64_t oh, int64_t ow,
                         const void *in, void *out) {
  int64_t N = nchw[0], C = nchw[1], H = nchw[2], W = nchw[3];
  if (!cnn_on_cuda(t))
    return bwd ? cnn_cpu_adaptive_avg_pool2d_backward(t->dtype, N, C, H, W, oh, ow, in, out)
               : cnn_cpu_adaptive_avg_pool2d_forward(t->dtype, N, C, H, W, oh, ow, in, out);
  const cnn_backend *be = cnn_cuda_backend("adaptive_avg_pool2d");
  if (!be) return -1;
  int dev = cnn_tensor_device(t).index;
  if (!bwd && be->adaptive_avg_pool2d_forward)
    return be->adaptive_avg_pool2d_forward(dev, t->dtype, N, C, H, W, oh, ow, in, out);
  if (bwd && be->adaptive_avg_pool2d_backward)
    return be->adaptive_avg_pool2d_backward(dev, t->dtype, N, C, H, W, oh, ow, in, out);
  return cnn_backend_unsupported("adaptive_avg_pool2d");
}

/* The kernel, stride, padding and dilation of p as PyTorch checks them
 * (pool2d_shape_check): all positive but padding, padding at most half the
 * kernel (undilated, as PyTorch). */
static int pool_params_ok(const char *op, const cnn_pool_params *p, const int dil[2]) {
  if (p->kernel[0] < 1 || p->kernel[1] < 1 || p->stride[0] < 1 || p->stride[1] < 1 || p->pad[0] < 0 ||
      p->pad[1] < 0 || dil[0] < 1 || dil[1] < 1) {
    cnn_set_error("%s: kernel, stride and dilation must be positive, padding non-negative", op);
    return -1;
  }
  if (p->pad[0] * 2 > p->kernel[0] || p->pad[1] * 2 > p->kernel[1]) {
    cnn_set_error("%s: padding %dx%d must be at most half the kernel %dx%d", op, p->pad[0], p->pad[1],
                  p->kernel[0], p->kernel[1]);
    return -1;
  }
  return 0;
}

/* Validates p for x and fills s; dil is {1, 1} for average pooling. */
static int pool_geometry(const char *op, const cnn_tensor *x, const cnn_pool_params *p, const int dil[2],
                         cnn_pool_shape *s) {
  char a[CNN_SHAPE_STR];
  if (pool_params_ok(op, p, dil)) return -1;
  int64_t ekh = (int64_t)(p->kernel[0] - 1) * dil[0] + 1, ekw = (int64_t)(p->kernel[1] - 1) * dil[1] + 1;
  if (x->shape[2] + 2 * p->pad[0] < ekh || x->shape[3] + 2 * p->pad[1] < ekw) {
    cnn_set_error("%s: input %s (padded by %dx%d) is smaller than the kernel %lldx%lld%s", op,
                  cnn_tensor_shape_str(x, a), p->pad[0], p->pad[1], (long long)ekh, (long long)ekw,
                  dil[0] > 1 || dil[1] > 1 ? " (dilated)" : "");
    return -1;
  }
  *s = (cnn_pool_shape){.N = x->shape[0], .C = x->shape[1], .H = x->shape[2], .W = x->shape[3],
                        .kh = p->kernel[0], .kw = p->kernel[1], .sh = p->stride[0], .sw = p->stride[1],
                        .ph = p->pad[0], .pw = p->pad[1], .count_include_pad = p->count_include_pad,
                        .dh = dil[0], .dw = dil[1]};
  s->OH = pool_out_size(s->H, ekh, s->sh, s->ph, p->ceil_mode);
  s->OW = pool_out_size(s->W, ekw, s->sw, s->pw, p->ceil_mode);
  if (s->OH > 0 && s->OW > 0) return 0;
  cnn_set_error("%s: input %s is smaller than the kernel %dx%d", op, cnn_tensor_shape_str(x, a), s->kh, s->kw);
  return -1;
}

static int max_pool_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  const cnn_pool_shape *s = (const cnn_pool_shape *)n->geometry;
  cnn_tensor *idx = cnn_node_saved(n, 0), *dy = cnn_contiguous(g);
  if (!idx || !dy) return cnn_tensor_release(dy), -1;
  gin[0] = cnn_empty(n->in_ndim[0], n->in_shape[0], g->dtype, cnn_tensor_device(g));
  int rc = gin[0] ? pool_max_bwd(dy, s, cnn_tensor_data(dy), cnn_tensor_data(idx), cnn_tensor_data(gin[0])) : -1;
  cnn_tensor_release(dy);
  return rc;
}

cnn_tensor *cnn_max_pool2d(cnn_tensor *x, const cnn_pool_params *p, cnn_tensor **indices) {
  cnn_pool_shape s;
  if (pool_input_ok("max_pool2d", x) || pool_geometry("max_pool2d", x, p, p->dilation, &s)) return NULL;
  int64_t shape[4] = {s.N, s.C, s.OH, s.OW};
  bool want_idx = indices || cnn_any_requires_grad(1, &x); /* else no int64 array at all */
  cnn_tensor *xc = cnn_contiguous(x);
  cnn_tensor *y = xc ? cnn_empty(4, shape, x->dtype, cnn_tensor_device(x)) : NULL;
  cnn_tensor *idx = y && want_idx ? cnn_empty(4, shape, CNN_INT64, cnn_tensor_device(x)) : NULL;
  if (y && want_idx && !idx) cnn_tensor_release(y), y = NULL;
  if (y && pool_max_fwd(x, &s, cnn_tensor_data(xc), cnn_tensor_data(y), idx ? cnn_tensor_data(idx) : NULL))
    cnn_tensor_release(y), y = NULL;
  cnn_node *n = y ? cnn_autograd_record(y, "MaxPool2dBackward", max_pool_backward, 1, &x) : NULL;
  if (n) {
    cnn_node_save(n, 0, idx);
    cnn_node_set_geometry(n, &s, sizeof s);
  }
  if (indices && y) *indices = idx;
  else cnn_tensor_release(idx);
  cnn_tensor_release(xc);
  return y;
}

static int avg_pool_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *dy = cnn_contiguous(g);
  if (!dy) return -1;
  gin[0] = cnn_empty(n->in_ndim[0], n->in_shape[0], g->dtype, cnn_tensor_device(g));
  int rc = -1;
  if (gin[0] && n->ip[0] == 0)
    rc = pool_avg(dy, 1, (const cnn_pool_shape *)n->geometry, cnn_tensor_data(dy), cnn_tensor_data(gin[0]));
  else if (gin[0])
    rc = pool_adaptive(dy, 1, n->in_shape[0], g->shape[2], g->shape[3], cnn_tensor_data(dy), cnn_tensor_data(gin[0]));
  cnn_tensor_release(dy);
  return rc;
}

cnn_tensor *cnn_avg_pool2d(cnn_tensor *x, const cnn_pool_params *p) {
  cnn_pool_shape s;
  static const int no_dilation[2] = {1, 1};
  if (pool_input_ok("avg_pool2d", x) || pool_geometry("avg_pool2d", x, p, no_dilation, &s)) return NULL;
  int64_t shape[4] = {s.N, s.C, s.OH, s.OW};
  cnn_tensor *xc = cnn_contiguous(x);
  cnn_tensor *y = xc ? cnn_empty(4, shape, x->dtype, cnn_tensor_device(x)) : NULL;
  if (y && pool_avg(x, 0, &s, cnn_tensor_data(xc), cnn_tensor_data(y)))
    cnn_tensor_release(y), y = NULL;
  cnn_node *n = y ? cnn_autograd_record(y, "AvgPool2dBackward", avg_pool_backward, 1, &x) : NULL;
  if (n) cnn_node_set_geometry(n, &s, sizeof s), n->ip[0] = 0;
  cnn_tensor_release(xc);
  return y;
}

cnn_tensor *cnn_adaptive_avg_pool2d(cnn_tensor *x, int64_t oh, int64_t ow) {
  if (pool_input_ok("adaptive_avg_pool2d", x)) return NULL;
  if (oh < 1 || ow < 1 || oh > (int64_t)1 << 20 || ow > (int64_t)1 << 20) {
    cnn_set_error("adaptive_avg_pool2d: output size %lldx%lld must be positive", (long long)oh, (long long)ow);
    return NULL;
  }
  int64_t shape[4] = {x->shape[0], x->shape[1], oh, ow};
  cnn_tensor *xc = cnn_contiguous(x);
  cnn_tensor *y = xc ? cnn_empty(4, shape, x->dtype, cnn_tensor_device(x)) : NULL;
  if (y && pool_adaptive(x, 0, x->shape, oh, ow, cnn_tensor_data(xc), cnn_tensor_data(y)))
    cnn_tensor_release(y), y = NULL;
  cnn_node *n = y ? cnn_autograd_record(y, "AdaptiveAvgPool2dBackward", avg_pool_backward, 1, &x) : NULL;
  if (n) n->ip[0] = 1;
  cnn_tensor_release(xc);
  return y;
}
