/*
 * nn_conv.c -- conv2d on tensors: validation, output allocation, autograd.
 *
 * The arithmetic is in core/cpu (naive oracle, im2col + GEMM, oneDNN),
 * chosen by cnn_get_conv_algo().  Inputs are made contiguous NCHW first,
 * except that where the backend runs channels-last (the CPU) an input that
 * prefers channels-last stays so, and the output, dy and dx follow it
 * (s.channels_last; core/cpu/conv.c).
 * The node saves x and w (what the two backward passes need) and the
 * geometry in n->geometry.  The passes are the backend's conv entries
 * (the CPU's conv.c; cuDNN, or the direct kernel for CNN_CONV_NAIVE, on a
 * CUDA device); where the backend has conv2d_backward both backward passes
 * are one call (the CPU's oneDNN reorders dy once).  float16/bfloat16 run
 * only on a backend with `half` (CUDA; autocast); under cnn.autocast the
 * op hands itself to core/autocast.c, which calls it back with cast
 * operands or, on the CPU, with bfloat16 arithmetic (cnn_conv_shape.math).
 * Validation: cnn_conv2d_shape() holds conv's shape rules, the only place they
 * are checked; the backends assert what follows (cnn_cpu_conv2d_shape_valid).
 * cnn_conv2d_int8 (cnn.quantize) shares them: an inference-only op over
 * quantized operands (core/cpu/conv_int8.c).
 */
#include "autocast.h"
#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "ops_internal.h"
#include "tensor_internal.h"

#include <math.h>
#include <stdlib.h>

int cnn_conv_check_dtypes(const char *op, const cnn_tensor *x, const cnn_tensor *w,
                          const cnn_tensor *b) {
  char d1[32], d2[32];
  bool half = x->dtype == CNN_FLOAT16 || x->dtype == CNN_BFLOAT16;
  if (half && !cnn_backend_half(x)) {
    cnn_set_error("%s: %s convolutions run on a CUDA device only (on the CPU use float32, "
                  "or cnn.autocast('bfloat16', ...))",
                  op, cnn_dtype_name(x->dtype));
    return -1;
  }
  if (x->dtype != CNN_FLOAT32 && x->dtype != CNN_FLOAT64 && !half) {
    cnn_set_error("%s: input dtype %s is not supported (use float32 or float64)", op,
                  cnn_dtype_name(x->dtype));
    return -1;
  }
  if (w->dtype != x->dtype || (b && b->dtype != x->dtype)) {
    cnn_set_error("%s: input is %s but weight is %s%s%s", op, cnn_dtype_name(x->dtype),
                  cnn_dtype_name(w->dtype), b ? " and bias " : "",
                  b ? cnn_dtype_name(b->dtype) : "");
    return -1;
  }
  if (!cnn_device_equal(cnn_tensor_device(x), cnn_tensor_device(w)) ||
      (b && !cnn_device_equal(cnn_tensor_device(x), cnn_tensor_device(b)))) {
    cnn_set_error("%s: input is on %s but weight is on %s", op,
                  cnn_device_str(cnn_tensor_device(x), d1),
                  cnn_device_str(cnn_tensor_device(w), d2));
    return -1;
  }
  return 0;
}

static int check_conv_ranks(const char *op, const cnn_tensor *x, const cnn_tensor *w) {
  char a[CNN_SHAPE_STR], c[CNN_SHAPE_STR];
  if (x->ndim == 4 && w->ndim == 4 && w->shape[2] > 0 && w->shape[3] > 0) return 0;
  cnn_set_error("%s: expected a 4-d input (N x C x H x W) and a 4-d weight with a kernel of "
                "at least 1x1, got input %s and weight %s",
                op, cnn_tensor_shape_str(x, a), cnn_tensor_shape_str(w, c));
  return -1;
}

static int check_conv_params(const char *op, const cnn_conv_params *p) {
  if (p->groups >= 1 && p->stride[0] >= 1 && p->stride[1] >= 1 && p->dilation[0] >= 1 &&
      p->dilation[1] >= 1 && p->pad[0] >= 0 && p->pad[1] >= 0 && p->pad[2] >= 0 && p->pad[3] >= 0)
    return 0;
  cnn_set_error("%s: stride, dilation and groups must be positive and padding non-negative", op);
  return -1;
}

static int check_conv_channels(const char *op, const cnn_tensor *x, const cnn_tensor *w,
                               const cnn_tensor *b, const cnn_conv_params *p) {
  char a[CNN_SHAPE_STR], c[CNN_SHAPE_STR];
  if (x->shape[1] != w->shape[1] * p->groups || w->shape[0] % p->groups) {
    cnn_set_error("%s: input %s has %lld channels, weight %s expects %lld (groups %d)", op,
                  cnn_tensor_shape_str(x, a), (long long)x->shape[1], cnn_tensor_shape_str(w, c),
                  (long long)(w->shape[1] * p->groups), p->groups);
    return -1;
  }
  if (b && (b->ndim != 1 || b->shape[0] != w->shape[0])) {
    cnn_set_error("%s: bias %s does not match weight %s (expected %lld elements)", op,
                  cnn_tensor_shape_str(b, a), cnn_tensor_shape_str(w, c), (long long)w->shape[0]);
    return -1;
  }
  return 0;
}

static int conv_geometry(const char *op, const cnn_tensor *x, const cnn_tensor *w,
                         const cnn_conv_params *p, cnn_conv_shape *s) {
  *s = (cnn_conv_shape){.N = x->shape[0],
                        .C = x->shape[1],
                        .H = x->shape[2],
                        .W = x->shape[3],
                        .K = w->shape[0],
                        .R = w->shape[2],
                        .S = w->shape[3],
                        .sh = p->stride[0],
                        .sw = p->stride[1],
                        .pt = p->pad[0],
                        .pb = p->pad[1],
                        .pl = p->pad[2],
                        .pr = p->pad[3],
                        .dh = p->dilation[0],
                        .dw = p->dilation[1],
                        .groups = p->groups,
                        .math = CNN_FLOAT32}; /* OH, OW below; the rest 0 */
  s->OH = cnn_conv_out_size(s->H, s->pt, s->pb, (int)s->R, s->sh, s->dh);
  s->OW = cnn_conv_out_size(s->W, s->pl, s->pr, (int)s->S, s->sw, s->dw);
  if (s->OH > 0 && s->OW > 0) return 0;
  char a[CNN_SHAPE_STR], c[CNN_SHAPE_STR];
  cnn_set_error("%s: input %s is too small for kernel %s with this padding/dilation (output "
                "would be %lldx%lld)",
                op, cnn_tensor_shape_str(x, a), cnn_tensor_shape_str(w, c), (long long)s->OH,
                (long long)s->OW);
  return -1;
}

/* Conv's shape rules, the only place they are checked (conv2d and
 * conv2d_int8; the backends assert what follows from them): the geometry
 * in *s, or -1 with a message naming `op` and the shapes. */
int cnn_conv2d_shape(const char *op, const cnn_tensor *x, const cnn_tensor *w, const cnn_tensor *b,
                     const cnn_conv_params *p, cnn_conv_shape *s) {
  if (check_conv_ranks(op, x, w) || check_conv_params(op, p) || check_conv_channels(op, x, w, b, p))
    return -1;
  return conv_geometry(op, x, w, p, s);
}

/* Both backward passes: one entry where the backend has it (the CPU's
 * oneDNN reorders dy once for both), else the two passes in turn. */
static int conv_backward_call(const cnn_backend *be, int dev, cnn_conv_algo algo, cnn_dtype dt,
                              const cnn_conv_shape *s, const void *dy, const void *x, const void *w,
                              void *dx, void *dw, void *db) {
  if (be->conv2d_backward) return be->conv2d_backward(dev, algo, dt, s, dy, x, w, dx, dw, db);
  int rc = 0;
  if (dx) rc = CNN_BE_CALL(be, "conv2d", conv2d_backward_data, dev, algo, dt, s, dy, w, dx);
  if (rc == 0 && dw)
    rc = CNN_BE_CALL(be, "conv2d", conv2d_backward_weight, dev, algo, dt, s, dy, x, dw, db);
  return rc;
}

void cnn_conv_grad_keep_dw(cnn_node *n, cnn_tensor **gin, cnn_tensor *dw) {
  if (n->needs[1])
    gin[1] = dw;
  else
    cnn_tensor_release(dw);
}

int cnn_conv_grad_buffers(cnn_node *n, cnn_tensor *x, cnn_tensor *w, int64_t nbias,
                          cnn_tensor **gin, cnn_tensor **dw) {
  int want_b = n->ninputs > 2 && n->needs[2];
  if (n->needs[0] && !(gin[0] = cnn_empty_like_layout(x, x->dtype))) return -1;
  if ((n->needs[1] || want_b) &&
      !(*dw = cnn_empty(w->ndim, w->shape, w->dtype, cnn_tensor_device(w))))
    return -1;
  if (want_b && !(gin[2] = cnn_empty(1, &nbias, w->dtype, cnn_tensor_device(w)))) return -1;
  return 0;
}

static int conv_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  const cnn_conv_shape *s = (const cnn_conv_shape *)n->geometry;
  cnn_tensor *x = cnn_node_saved(n, 0), *w = cnn_node_saved(n, 1), *dw = NULL;
  if (!x || !w) return -1;
  cnn_tensor *dy = cnn_contiguous_like(g, x); /* the layout of x and y (s->channels_last) */
  if (!dy) return -1;
  const cnn_backend *be = cnn_backend_of(x, "conv2d");
  int rc = be ? cnn_conv_grad_buffers(n, x, w, s->K, gin, &dw) : -1;
  if (rc == 0)
    rc = conv_backward_call(be, cnn_backend_dev(x), cnn_get_conv_algo(), x->dtype, s,
                            cnn_tensor_data(dy), cnn_tensor_data(x), cnn_tensor_data(w),
                            cnn_data_or_null(gin[0]), cnn_data_or_null(dw),
                            cnn_data_or_null(gin[2]));
  cnn_conv_grad_keep_dw(n, gin, dw);
  cnn_tensor_release(dy);
  return rc;
}

/* A forward's checks, geometry (*s, with arithmetic `math`), contiguous
 * operands (c: x, w and b or NULL; the caller releases them) and empty
 * output; NULL (error set) on failure.  With `channels_last_ok`, an input
 * that prefers channels-last on a backend that runs it stays so, and so
 * does the output (s->channels_last; core/memory_format.c); else x is made
 * NCHW. */
static cnn_tensor *forward_setup(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b,
                                 const cnn_conv_params *p, cnn_dtype math, bool channels_last_ok,
                                 cnn_conv_shape *s, cnn_tensor *c[3]) {
  c[0] = c[1] = c[2] = NULL;
  if (cnn_conv_check_dtypes("conv2d", x, w, b) || cnn_conv2d_shape("conv2d", x, w, b, p, s))
    return NULL;
  s->math = math;
  s->channels_last = channels_last_ok && cnn_runs_channels_last(x, "conv2d");
  c[0] = s->channels_last ? (cnn_tensor_retain(x), x) : cnn_contiguous(x);
  c[1] = cnn_contiguous(w), c[2] = b ? cnn_contiguous(b) : NULL;
  if (!c[0] || !c[1] || (b && !c[2])) return NULL;
  int64_t shape[4] = {s->N, s->K, s->OH, s->OW};
  if (s->channels_last) return cnn_empty_channels_last(shape, x->dtype, cnn_tensor_device(x));
  return cnn_empty(4, shape, x->dtype, cnn_tensor_device(x));
}

/* conv2d with arithmetic `math` (CNN_BFLOAT16 under autocast on the CPU:
 * kept in the node's geometry, so the backward runs in it too). */
static cnn_tensor *conv2d_math(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b,
                               const cnn_conv_params *p, cnn_dtype math) {
  cnn_conv_shape s;
  cnn_tensor *c[3];
  cnn_tensor *y = forward_setup(x, w, b, p, math, true, &s, c), *xc = c[0], *wc = c[1], *bc = c[2];
  const cnn_backend *be = y ? cnn_backend_of(x, "conv2d") : NULL;
  if (y &&
      (!be || CNN_BE_CALL(be, "conv2d", conv2d_forward, cnn_backend_dev(x), cnn_get_conv_algo(),
                          x->dtype, &s, cnn_tensor_data(xc), cnn_tensor_data(wc),
                          bc ? cnn_tensor_data(bc) : NULL, cnn_tensor_data(y))))
    cnn_tensor_release(y), y = NULL;
  cnn_node *n = y ? cnn_autograd_record(y, "Conv2dBackward", conv_backward, b ? 3 : 2,
                                        (cnn_tensor *[]){x, w, b})
                  : NULL;
  if (n) {
    cnn_node_save(n, 0, xc);
    cnn_node_save(n, 1, wc);
    cnn_node_set_geometry(n, &s, sizeof s);
  }
  cnn_tensor_release(xc), cnn_tensor_release(wc), cnn_tensor_release(bc);
  return y;
}

static cnn_tensor *conv2d_op(cnn_tensor **in, cnn_dtype math, const void *p) {
  return conv2d_math(in[0], in[1], in[2], p, math);
}

cnn_tensor *cnn_conv2d(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b, const cnn_conv_params *p) {
  cnn_tensor *operands[3] = {x, w, b};
  cnn_dtype run = x && w ? cnn_autocast_target(operands, 3) : CNN_FLOAT32;
  if (run != CNN_FLOAT32) return cnn_autocast_call(run, 3, operands, conv2d_op, true, p);
  return conv2d_math(x, w, b, p, CNN_FLOAT32);
}

/* ---- quantized inference (cnn.quantize): cnn_conv2d_int8 ------------------------------- */

static int check_int8_dtypes(const cnn_tensor *x, const cnn_tensor *wq, const cnn_tensor *ws,
                             const cnn_tensor *b) {
  const cnn_tensor *all[4] = {x, wq, ws, b};
  static const char *names[4] = {"input", "weight", "weight scales", "bias"};
  for (int i = 0; i < 4; i++)
    if (all[i] && all[i]->dtype != CNN_FLOAT32) {
      cnn_set_error("conv2d_int8: %s is %s (float32 expected)", names[i],
                    cnn_dtype_name(all[i]->dtype));
      return -1;
    }
  for (int i = 1; i < 4; i++)
    if (all[i] && cnn_check_same_device("conv2d_int8", x, all[i])) return -1;
  return 0;
}

/* The entry exists on the CPU only, so wq and w_scale (contiguous) are host memory. */
static int check_int8_values(const cnn_tensor *wq, const cnn_tensor *ws, double x_scale) {
  const float *w = cnn_tensor_data(wq), *s = cnn_tensor_data(ws);
  if (!(x_scale > 0 && x_scale < INFINITY))
    return cnn_set_error("conv2d_int8: input scale %g must be positive and finite", x_scale), -1;
  for (int64_t i = 0, n = cnn_tensor_numel(wq); i < n; i++)
    if (!(w[i] >= -127.f && w[i] <= 127.f && w[i] == rintf(w[i])))
      return cnn_set_error(
                 "conv2d_int8: weight element %lld is %g (whole numbers in [-127, 127] expected)",
                 (long long)i + 1, w[i]),
             -1;
  for (int64_t i = 0, n = cnn_tensor_numel(ws); i < n; i++)
    if (!(s[i] > 0 && s[i] < INFINITY))
      return cnn_set_error("conv2d_int8: weight scale %lld is %g (positive and finite expected)",
                           (long long)i + 1, s[i]),
             -1;
  return 0;
}

static int check_int8_scales_shape(const cnn_tensor *wq, const cnn_tensor *ws) {
  char a[CNN_SHAPE_STR], c[CNN_SHAPE_STR];
  if (ws->ndim == 1 && ws->shape[0] == wq->shape[0]) return 0;
  cnn_set_error(
      "conv2d_int8: weight scales %s do not match weight %s (one per output channel: %lld)",
      cnn_tensor_shape_str(ws, a), cnn_tensor_shape_str(wq, c), (long long)wq->shape[0]);
  return -1;
}

static int check_int8_args(cnn_tensor *x, cnn_tensor *wq, cnn_tensor *ws, cnn_tensor *b,
                           const cnn_conv_params *p, cnn_conv_shape *s) {
  if (!x || !wq || !ws)
    return cnn_set_error("conv2d_int8: input, weight and weight scales are required"), -1;
  if (check_int8_dtypes(x, wq, ws, b) || cnn_conv2d_shape("conv2d_int8", x, wq, b, p, s)) return -1;
  return check_int8_scales_shape(wq, ws);
}

cnn_tensor *cnn_conv2d_int8(cnn_tensor *x, cnn_tensor *wq, cnn_tensor *w_scale, cnn_tensor *b,
                            double x_scale, bool relu, const cnn_conv_params *p) {
  cnn_conv_shape s;
  if (check_int8_args(x, wq, w_scale, b, p, &s)) return NULL;
  const cnn_backend *be = cnn_backend_of(x, "conv2d_int8");
  if (!be) return NULL;
  if (!be->conv2d_int8_forward) return cnn_backend_unsupported("conv2d_int8"), NULL;
  cnn_tensor *xc = cnn_contiguous(x), *wc = cnn_contiguous(wq), *sc = cnn_contiguous(w_scale);
  cnn_tensor *bc = b ? cnn_contiguous(b) : NULL, *y = NULL;
  int64_t shape[4] = {s.N, s.K, s.OH, s.OW};
  if (xc && wc && sc && (bc || !b) && !check_int8_values(wc, sc, x_scale))
    y = cnn_empty(4, shape, CNN_FLOAT32, cnn_tensor_device(x));
  if (y && cnn_tensor_numel(y) > 0 &&
      be->conv2d_int8_forward(cnn_backend_dev(x), cnn_get_conv_algo(), &s, cnn_tensor_data(xc),
                              (float)x_scale, cnn_tensor_data(wc), cnn_tensor_data(sc),
                              bc ? cnn_tensor_data(bc) : NULL, relu, cnn_tensor_data(y)))
    cnn_tensor_release(y), y = NULL;
  cnn_tensor_release(xc), cnn_tensor_release(wc), cnn_tensor_release(sc), cnn_tensor_release(bc);
  return y;
}

/* ---- a fused activation (net:fuse()): cnn_conv2d_act ------------------------------- */

static bool is_activation(cnn_unary_op op) {
  switch (op) {
  case CNN_OP_RELU:
  case CNN_OP_LEAKY_RELU:
  case CNN_OP_ELU:
  case CNN_OP_HARDTANH:
  case CNN_OP_SIGMOID:
  case CNN_OP_TANH:
  case CNN_OP_GELU:
  case CNN_OP_GELU_TANH:
  case CNN_OP_SILU:
  case CNN_OP_HARDSWISH:
  case CNN_OP_HARDSIGMOID:
  case CNN_OP_MISH:
  case CNN_OP_SOFTPLUS: return true;
  default: return false;
  }
}

static bool records_grad(const cnn_tensor *x, const cnn_tensor *w, const cnn_tensor *b) {
  return cnn_grad_enabled() && (x->requires_grad || w->requires_grad || (b && b->requires_grad));
}

/* conv2d, then the activation: in place on the fresh output when nothing
 * is recorded, else recorded out of place */
static cnn_tensor *conv_then_activation(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b,
                                        const cnn_conv_params *p, cnn_unary_op act, double p0,
                                        double p1) {
  cnn_tensor *y = cnn_conv2d(x, w, b, p);
  if (!y) return NULL;
  if (!records_grad(x, w, b)) return cnn_unary_(act, y, p0, p1) ? cnn_tensor_release(y), NULL : y;
  cnn_tensor *z = cnn_unary(act, y, p0, p1);
  cnn_tensor_release(y);
  return z;
}

/* The backend's fused entry: validation as conv2d's, y allocated and written. */
static cnn_tensor *fused_forward(const cnn_backend *be, cnn_tensor *x, cnn_tensor *w, cnn_tensor *b,
                                 const cnn_conv_params *p, cnn_unary_op act, double p0, double p1) {
  cnn_conv_shape s;
  cnn_tensor *c[3];
  cnn_tensor *y = forward_setup(x, w, b, p, CNN_FLOAT32, true, &s, c);
  if (y && be->conv2d_act_forward(cnn_backend_dev(x), cnn_get_conv_algo(), x->dtype, &s,
                                  cnn_tensor_data(c[0]), cnn_tensor_data(c[1]),
                                  cnn_data_or_null(c[2]), act, p0, p1, cnn_tensor_data(y)))
    cnn_tensor_release(y), y = NULL;
  for (int i = 0; i < 3; i++) cnn_tensor_release(c[i]);
  return y;
}

cnn_tensor *cnn_conv2d_act(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b, const cnn_conv_params *p,
                           cnn_unary_op act, double p0, double p1) {
  if (act < 0 || act >= CNN_NUNARY || !is_activation(act)) {
    cnn_set_error("conv2d_act: %s is not an activation (relu, leaky_relu, elu, hardtanh, sigmoid, "
                  "tanh, gelu, silu, hardswish, hardsigmoid, mish, softplus)",
                  act >= 0 && act < CNN_NUNARY ? cnn_unary_ops[act].name : "the op");
    return NULL;
  }
  if (!x || !w) return cnn_conv2d(x, w, b, p); /* its error */
  cnn_tensor *operands[3] = {x, w, b};
  const cnn_backend *be = cnn_backend_of(x, "conv2d");
  bool fuse = be && be->conv2d_act_forward && x->dtype == CNN_FLOAT32 &&
              cnn_autocast_target(operands, 3) == CNN_FLOAT32 && !records_grad(x, w, b);
  if (!fuse) return conv_then_activation(x, w, b, p, act, p0, p1);
  return fused_forward(be, x, w, b, p, act, p0, p1);
}
