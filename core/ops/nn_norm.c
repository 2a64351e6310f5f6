/*
 * nn_norm.c -- batch_norm on tensors (2-d N x C, or N x C x ... inputs).
 *
 * Training uses batch statistics and updates the running ones in place
 * (PyTorch's momentum convention and unbiased running variance); evaluation
 * uses the running statistics.  The node saves x, the weight, and the mean
 * and 1/std actually used, so one backward serves both modes (the kernel
 * differs: batch statistics depend on x, running ones do not).
 *
 * Layout: x is made contiguous, except that on a backend with
 * `channels_last` (the CPU) a channels-last x stays so and runs as an
 * (N*H*W) x C array (bn_dims); y, dy and dx then are channels-last too.
 *
 * batch_norm_relu is relu(batch_norm(x)) as one node where the backend has
 * the fused entries (the CPU): one pass forward, and backward takes the
 * output y as relu's mask, so the relu pass, its output's twin and its
 * gradient tensor are never made.  The node saves y as well (relu would
 * have saved it).  A backend without them (CUDA) runs the two ops.
 *
 * batch_norm_add_relu is relu(batch_norm(x) + r) as one node, a residual
 * block's end: forward is one pass over x and r (the backend's entry);
 * backward makes relu's gradient once -- r's gradient, and the dy of the
 * plain batch-norm backward.  Without the entry: batch_norm, then add_relu.
 *
 * float16 (issue 16: inference on a backend with `half`, CUDA): eval mode
 * only.  As cuDNN wants for half data (cudnn_ops.h: the scale, bias, mean
 * and variance descriptor is float unless x is double), the per-channel
 * arrays the entry sees are float32: weight, bias and running statistics
 * in float16 (net:half() converts buffers, as PyTorch's) or float32 are
 * passed as float32 copies of C elements, and the saved mean and 1/std are
 * float32.  Training and backward in float16 are refused with a message
 * (train in float32, under cnn.autocast for half-precision convolutions).
 *
 * Backward writes dx over the gradient it received when that gradient is
 * private (cnn_grad_is_private: nobody else holds it) and the backend's
 * kernels allow it (bn_dx_over_dy): that memory was just written by the
 * layer after, so it is in cache, where a new dx would first be fetched
 * from memory; the step's footprint shrinks by one activation too.
 */
#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "ops_internal.h"
#include "tensor_internal.h"

#include <string.h>

static int check_channel_vector(const char *what, const cnn_tensor *v, const cnn_tensor *x,
                                int64_t C) {
  char a[CNN_SHAPE_STR], b[CNN_SHAPE_STR];
  if (!v) return 0;
  bool dt_ok = v->dtype == x->dtype ||
               (x->dtype == CNN_FLOAT16 && v->dtype == CNN_FLOAT32); /* float16: see above */
  if (v->ndim == 1 && v->shape[0] == C && dt_ok && cnn_tensor_is_contiguous(v) &&
      cnn_device_equal(cnn_tensor_device(v), cnn_tensor_device(x)))
    return 0;
  cnn_set_error(
      "batch_norm: %s %s (%s) does not match input %s (%s): expected %lld contiguous elements",
      what, cnn_tensor_shape_str(v, a), cnn_dtype_name(v->dtype), cnn_tensor_shape_str(x, b),
      cnn_dtype_name(x->dtype), (long long)C);
  return -1;
}

static int check_bn_inputs(cnn_tensor *x, cnn_tensor *rm, cnn_tensor *rv, cnn_tensor *w,
                           cnn_tensor *b, bool training) {
  char a[CNN_SHAPE_STR];
  if (x->ndim < 2 || (x->dtype != CNN_FLOAT32 && x->dtype != CNN_FLOAT64 && !cnn_half_ok(x))) {
    cnn_set_error("batch_norm: expected a float input of at least 2 dims (N x C ...), got %s %s",
                  cnn_tensor_shape_str(x, a), cnn_dtype_name(x->dtype));
    return -1;
  }
  if (training && x->dtype == CNN_FLOAT16) {
    cnn_set_error("batch_norm: training mode in float16 is not supported (input %s): float16 is "
                  "for inference (net:eval()); train in float32, with cnn.autocast for "
                  "half-precision convolutions",
                  cnn_tensor_shape_str(x, a));
    return -1;
  }
  int64_t C = x->shape[1], M = cnn_tensor_numel(x) / (C ? C : 1);
  if (check_channel_vector("running_mean", rm, x, C) ||
      check_channel_vector("running_var", rv, x, C) || check_channel_vector("weight", w, x, C) ||
      check_channel_vector("bias", b, x, C))
    return -1;
  if (training && M <= 1) {
    cnn_set_error("batch_norm: expected more than 1 value per channel when training, got input %s",
                  cnn_tensor_shape_str(x, a));
    return -1;
  }
  if (!training && (!rm || !rv)) {
    cnn_set_error("batch_norm: evaluation mode needs running_mean and running_var");
    return -1;
  }
  return 0;
}

/* x as the N x C x L array the entries take.  A channels-last x (kept so
 * only on a backend with `channels_last`, see batch_norm) is an (N*H*W) x C
 * array: N*H*W "images" of L = 1 value a channel. */
static void bn_dims(const cnn_tensor *x, int64_t *N, int64_t *L) {
  int64_t C = x->shape[1], rows = C > 0 ? cnn_tensor_numel(x) / C : 0;
  if (cnn_prefers_channels_last(x)) {
    *N = rows, *L = 1;
    return;
  }
  *N = x->shape[0], *L = x->shape[0] > 0 ? rows / x->shape[0] : 0;
}

/* ---- the backward entry of the mode ------------------------------------------------------- */

static int bn_backward_call(const cnn_tensor *x, bool training, double eps, int64_t N, int64_t C,
                            int64_t L, const void *dy, const void *xd, const void *gamma,
                            const void *mean, const void *invstd, void *dx, void *dg, void *db) {
  if (training)
    return CNN_TENSOR_CALL(x, "batch_norm", batch_norm_backward, cnn_backend_dev(x), x->dtype, N, C,
                           L, dy, xd, gamma, mean, invstd, dx, dg, db, eps);
  return CNN_TENSOR_CALL(x, "batch_norm", batch_norm_backward_eval, cnn_backend_dev(x), x->dtype, N,
                         C, L, dy, xd, gamma, mean, invstd, dx, dg, db, eps);
}

/* batch_norm_add_relu's relu gradient (the output y as the mask), which
 * is the residual's gradient (gin[3], where wanted) and batch norm's dy */
static cnn_tensor *add_relu_grad(cnn_node *n, cnn_tensor *g, cnn_tensor *y, cnn_tensor **gin) {
  cnn_tensor *m = cnn_unary_grad(CNN_OP_RELU, g, y, y, 0, 0);
  if (m && n->needs[3]) cnn_tensor_retain(m), gin[3] = m;
  return m;
}

/* batch norm's backward from g, the gradient at its output, through the
 * fused relu whose output y is given (else NULL) */
static int bn_backward_of(cnn_node *n, cnn_tensor *g, cnn_tensor *y, cnn_tensor **gin) {
  cnn_tensor *x = cnn_node_saved(n, 0), *w = n->saved[1], *mean = n->saved[2],
             *invstd = n->saved[3];
  if (!x) return -1;
  if (x->dtype == CNN_FLOAT16)
    return cnn_set_error("batch_norm: backward in float16 is not supported (float16 is for "
                         "inference; train in float32, with cnn.autocast for half-precision "
                         "convolutions)"),
           -1;
  /* dx over dy when nothing else holds dy: its memory was just written (by
   * the layer after, in cache) where a new tensor would be fetched from
   * memory first; 3-4% of the example network's step at one thread */
  const cnn_backend *be = cnn_backend_of(x, "batch_norm");
  if (!be) return -1;
  bool over = n->needs[0] && be->bn_dx_over_dy && cnn_grad_is_private(g, x);
  cnn_tensor *dy = cnn_contiguous_like(g, x); /* x's layout (and y's) */
  if (!dy) return -1;
  int64_t N, C = x->shape[1], L;
  bn_dims(x, &N, &L);
  if (over)
    cnn_tensor_retain(g), gin[0] = g;
  else if (n->needs[0])
    gin[0] = cnn_empty_like_layout(x, x->dtype);
  if (n->needs[1]) gin[1] = cnn_empty(1, &C, x->dtype, cnn_tensor_device(x));
  if (n->needs[2]) gin[2] = cnn_empty(1, &C, x->dtype, cnn_tensor_device(x));
  int rc = -1;
  if ((gin[0] || !n->needs[0]) && (gin[1] || !n->needs[1]) && (gin[2] || !n->needs[2])) {
    void *dx = gin[0] ? cnn_tensor_data(gin[0]) : NULL,
         *dg = gin[1] ? cnn_tensor_data(gin[1]) : NULL;
    void *db = gin[2] ? cnn_tensor_data(gin[2]) : NULL, *gamma = w ? cnn_tensor_data(w) : NULL;
    double eps;
    memcpy(&eps, &n->ip[1], sizeof eps);
    if (y)
      rc = CNN_TENSOR_CALL(x, "batch_norm_relu", batch_norm_relu_backward, cnn_backend_dev(x),
                           x->dtype, N, C, L, cnn_tensor_data(dy), cnn_tensor_data(y),
                           cnn_tensor_data(x), gamma, cnn_tensor_data(mean),
                           cnn_tensor_data(invstd), dx, dg, db, eps, (int)n->ip[0]);
    else
      rc = bn_backward_call(x, n->ip[0], eps, N, C, L, cnn_tensor_data(dy), cnn_tensor_data(x),
                            gamma, cnn_tensor_data(mean), cnn_tensor_data(invstd), dx, dg, db);
  }
  cnn_tensor_release(dy);
  return rc;
}

static int bn_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *y = NULL;
  if (n->ip[2] && !(y = cnn_node_saved(n, 4))) return -1; /* fused relu: its output */
  if (n->ip[2] != 2) return bn_backward_of(n, g, y, gin);
  cnn_tensor *m = add_relu_grad(n, g, y, gin); /* relu 2: batch norm's dy */
  int rc = m ? bn_backward_of(n, m, NULL, gin) : -1;
  cnn_tensor_release(m);
  return rc;
}

/* The per-channel arrays a float16 input's entry takes: float32 copies of
 * the float16 ones (eval only: the running statistics are only read), the
 * others retained; NULL stays NULL.  0, or -1 (the copies made are in v). */
static int bn_float32_vectors(cnn_tensor **v, int n) {
  bool prev = cnn_set_grad_enabled(false);
  int rc = 0;
  for (int i = 0; i < n; i++) {
    cnn_tensor *t = v[i];
    if (!t) continue;
    if (t->dtype == CNN_FLOAT32)
      cnn_tensor_retain(t);
    else if (!(v[i] = cnn_to_dtype(t, CNN_FLOAT32)))
      rc = -1;
  }
  cnn_set_grad_enabled(prev);
  return rc;
}

/* A forward call's data: x and the residual (relu 2) in, the per-channel
 * arrays (any may be NULL), y and the saved statistics out. */
typedef struct {
  const void *x, *residual, *weight, *bias;
  void *running_mean, *running_var, *y, *save_mean, *save_invstd;
} bn_data;

/* The forward entry of the mode: relu 0 (batch_norm), 1 (relu fused) or
 * 2 (the residual added, then relu). */
static int bn_forward_call(const cnn_tensor *x, int relu, const bn_data *d, int64_t N, int64_t C,
                           int64_t L, bool training, double momentum, double eps) {
  if (relu == 2)
    return CNN_TENSOR_CALL(x, "batch_norm_add_relu", batch_norm_add_relu_forward,
                           cnn_backend_dev(x), x->dtype, N, C, L, d->x, d->residual, d->weight,
                           d->bias, d->running_mean, d->running_var, training, momentum, eps, d->y,
                           d->save_mean, d->save_invstd);
  if (relu)
    return CNN_TENSOR_CALL(x, "batch_norm_relu", batch_norm_relu_forward, cnn_backend_dev(x),
                           x->dtype, N, C, L, d->x, d->weight, d->bias, d->running_mean,
                           d->running_var, training, momentum, eps, d->y, d->save_mean,
                           d->save_invstd);
  return CNN_TENSOR_CALL(x, "batch_norm", batch_norm_forward, cnn_backend_dev(x), x->dtype, N, C, L,
                         d->x, d->weight, d->bias, d->running_mean, d->running_var, training,
                         momentum, eps, d->y, d->save_mean, d->save_invstd);
}

static const char *const BN_NODE_NAMES[3] = {"BatchNormBackward", "BatchNormReluBackward",
                                             "BatchNormAddReluBackward"};

/* batch_norm with the relu fused (relu 1: the backend has the entries),
 * or the residual res added before it (relu 2), or neither (0) */
static cnn_tensor *batch_norm(cnn_tensor *x, cnn_tensor *rm, cnn_tensor *rv, cnn_tensor *w,
                              cnn_tensor *b, bool training, double momentum, double eps, int relu,
                              cnn_tensor *res) {
  if (check_bn_inputs(x, rm, rv, w, b, training)) return NULL;
  bool cl = cnn_runs_channels_last(x, "batch_norm");
  cnn_tensor *xc = cl ? (cnn_tensor_retain(x), x) : cnn_contiguous(x);
  if (!xc) return NULL;
  int64_t N, C = x->shape[1], L;
  bn_dims(xc, &N, &L);
  /* v: running mean, running var, weight, bias as the entry takes them */
  cnn_tensor *v[4] = {rm, rv, w, b};
  bool half = x->dtype == CNN_FLOAT16;
  cnn_dtype sdt = half ? CNN_FLOAT32 : x->dtype; /* the saved mean and 1/std */
  if (half && bn_float32_vectors(v, 4)) {
    for (int i = 0; i < 4; i++) cnn_tensor_release(v[i]);
    cnn_tensor_release(xc);
    return NULL;
  }
  cnn_tensor *res_like = relu == 2 ? cnn_contiguous_like(res, xc) : NULL; /* x's layout */
  cnn_tensor *y = relu != 2 || res_like ? cnn_empty_like_layout(xc, x->dtype) : NULL;
  cnn_tensor *mean = y ? cnn_empty(1, &C, sdt, cnn_tensor_device(x)) : NULL;
  cnn_tensor *invstd = mean ? cnn_empty(1, &C, sdt, cnn_tensor_device(x)) : NULL;
  int rc = -1;
  if (invstd) {
    bn_data d = {.x = cnn_tensor_data(xc),
                 .residual = cnn_data_or_null(res_like),
                 .weight = cnn_data_or_null(v[2]),
                 .bias = cnn_data_or_null(v[3]),
                 .running_mean = cnn_data_or_null(v[0]),
                 .running_var = cnn_data_or_null(v[1]),
                 .y = cnn_tensor_data(y),
                 .save_mean = cnn_tensor_data(mean),
                 .save_invstd = cnn_tensor_data(invstd)};
    rc = bn_forward_call(x, relu, &d, N, C, L, training, momentum, eps);
  }
  if (rc) cnn_tensor_release(y), y = NULL;
  if (y && training && rm) cnn_tensor_bump_version(rm), cnn_tensor_bump_version(rv);
  cnn_node *n = y ? cnn_autograd_record(y, BN_NODE_NAMES[relu], bn_backward, relu == 2 ? 4 : 3,
                                        (cnn_tensor *[]){x, w, b, res})
                  : NULL;
  if (n) {
    cnn_node_save(n, 0, xc), cnn_node_save(n, 1, w), cnn_node_save(n, 2, mean),
        cnn_node_save(n, 3, invstd);
    if (relu) cnn_node_save(n, 4, y);
    n->ip[0] = training;
    memcpy(&n->ip[1], &eps, sizeof eps); /* the forward's eps, for cuDNN's backward */
    n->ip[2] = relu;
  }
  cnn_tensor_release(xc), cnn_tensor_release(res_like), cnn_tensor_release(mean),
      cnn_tensor_release(invstd);
  if (half)
    for (int i = 0; i < 4; i++) cnn_tensor_release(v[i]);
  return y;
}

cnn_tensor *cnn_batch_norm(cnn_tensor *x, cnn_tensor *rm, cnn_tensor *rv, cnn_tensor *w,
                           cnn_tensor *b, bool training, double momentum, double eps) {
  return batch_norm(x, rm, rv, w, b, training, momentum, eps, 0, NULL);
}

cnn_tensor *cnn_batch_norm_relu(cnn_tensor *x, cnn_tensor *rm, cnn_tensor *rv, cnn_tensor *w,
                                cnn_tensor *b, bool training, double momentum, double eps) {
  const cnn_backend *be = cnn_backend_of(x, "batch_norm_relu");
  if (!be) return NULL;
  if (be->batch_norm_relu_forward && be->batch_norm_relu_backward)
    return batch_norm(x, rm, rv, w, b, training, momentum, eps, 1, NULL);
  cnn_tensor *y = batch_norm(x, rm, rv, w, b, training, momentum, eps, 0, NULL);
  cnn_tensor *r = y ? cnn_unary(CNN_OP_RELU, y, 0, 0) : NULL;
  cnn_tensor_release(y);
  return r;
}

/* residual: x's shape, dtype and device, or an error naming both */
static int check_residual(const cnn_tensor *x, const cnn_tensor *r) {
  if (r->dtype == x->dtype && cnn_same_shape(x, r) &&
      cnn_device_equal(cnn_tensor_device(r), cnn_tensor_device(x)))
    return 0;
  char a[CNN_SHAPE_STR], b[CNN_SHAPE_STR], da[32], db[32];
  cnn_set_error("batch_norm_add_relu: residual %s (%s, %s) must match input %s (%s, %s)",
                cnn_tensor_shape_str(r, a), cnn_dtype_name(r->dtype),
                cnn_device_str(cnn_tensor_device(r), da), cnn_tensor_shape_str(x, b),
                cnn_dtype_name(x->dtype), cnn_device_str(cnn_tensor_device(x), db));
  return -1;
}

cnn_tensor *cnn_batch_norm_add_relu(cnn_tensor *x, cnn_tensor *r, cnn_tensor *rm, cnn_tensor *rv,
                                    cnn_tensor *w, cnn_tensor *b, bool training, double momentum,
                                    double eps) {
  if (check_residual(x, r)) return NULL;
  const cnn_backend *be = cnn_backend_of(x, "batch_norm_add_relu");
  if (!be) return NULL;
  if (be->batch_norm_add_relu_forward && (x->dtype == CNN_FLOAT32 || x->dtype == CNN_FLOAT64))
    return batch_norm(x, rm, rv, w, b, training, momentum, eps, 2, r);
  cnn_tensor *y = batch_norm(x, rm, rv, w, b, training, momentum, eps, 0, NULL);
  cnn_tensor *out = y ? cnn_binary(CNN_OP_ADD_RELU, y, r) : NULL;
  cnn_tensor_release(y);
  return out;
}
