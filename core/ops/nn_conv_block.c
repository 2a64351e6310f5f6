/*
 * nn_conv_block.c -- conv2d -> batch_norm (training) -> relu -> max_pool2d
 * as one autograd node (cnn_conv_bn_relu_pool, cnn.h), on a backend with
 * the conv_block entries (the CPU: core/cpu/conv_block_onednn.c keeps the
 * block's activations in oneDNN's blocked layouts from end to end).
 *
 * The node's inputs are x, w, b, gamma, beta (any but x and w may be
 * absent).  It saves x, w, gamma, beta and the *state* -- a uint8 tensor
 * holding what the backend's backward reads (the convolution's output, the
 * batch statistics, the ReLU mask and the pool's argmax, in the backend's
 * layouts) -- and the block's shape as its geometry.  The running
 * statistics move as in cnn_batch_norm (momentum; unbiased variance), in
 * double.
 *
 * Declining.  The block is an optimisation of four ops whose unfused forms
 * stay the reference: any operand the backend's block does not take makes
 * the op return NULL with *declined set, before anything is written, and
 * nn.Sequential runs the layers one by one (with their usual messages for
 * bad input).  Errors are reserved for operands that are wrong for the
 * block itself (the per-channel vectors, the pool window).
 */
#include <string.h>

#include "autocast.h"
#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "ops_internal.h"
#include "tensor_internal.h"

static const char OP[] = "conv_bn_relu_pool";

/* ---- checks ---------------------------------------------------------------------------- */

static int check_channel_vector(const char *what, const cnn_tensor *v, const cnn_tensor *x,
                                int64_t K) {
  char a[CNN_SHAPE_STR];
  if (!v ||
      (v->ndim == 1 && v->shape[0] == K && v->dtype == CNN_FLOAT32 && cnn_tensor_is_contiguous(v) &&
       cnn_device_equal(cnn_tensor_device(v), cnn_tensor_device(x))))
    return 0;
  cnn_set_error("%s: %s %s (%s) does not match the convolution's %lld output channels: expected "
                "%lld contiguous float32 elements on the input's device",
                OP, what, cnn_tensor_shape_str(v, a), cnn_dtype_name(v->dtype), (long long)K,
                (long long)K);
  return -1;
}

static int check_pool(const cnn_conv_block_params *p) {
  for (int i = 0; i < 2; i++)
    if (p->pool_kernel[i] < 1 || p->pool_stride[i] < 1) {
      cnn_set_error("%s: pool kernel %dx%d and stride %dx%d must be positive", OP,
                    p->pool_kernel[0], p->pool_kernel[1], p->pool_stride[0], p->pool_stride[1]);
      return -1;
    }
  return 0;
}

/* The arithmetic of the block under autocast into *math (CNN_FLOAT32 or
 * CNN_BFLOAT16); false where autocast wants one the block has not (float16,
 * bfloat16 without the backend's arithmetic: the layers' own rules). */
static bool block_math(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b, cnn_dtype *math) {
  *math = cnn_autocast_target((cnn_tensor *[]){x, w, b}, 3);
  return *math == CNN_FLOAT32 ||
         (*math == CNN_BFLOAT16 && cnn_autocast_backend_math(CNN_BFLOAT16, x));
}

/* Whether the block applies to these operands (else: declined). */
static bool block_applies(const cnn_backend *be, cnn_tensor *x, cnn_tensor *w, cnn_tensor *b,
                          const cnn_conv_block_params *p) {
  cnn_conv_algo algo = cnn_get_conv_algo();
  return be->conv_block_forward && x->dtype == CNN_FLOAT32 && w->dtype == CNN_FLOAT32 &&
         (!b || b->dtype == CNN_FLOAT32) && p->conv.groups == 1 &&
         (algo == CNN_CONV_AUTO || algo == CNN_CONV_ONEDNN);
}

/* The block's shape (zeroed first: plans compare it field by field);
 * 0, -1 (error), or 1 (declined: the layers would report or handle it). */
static int block_shape(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b, const cnn_conv_block_params *p,
                       cnn_dtype math, double eps, cnn_conv_block_shape *s) {
  memset(s, 0, sizeof *s);
  if (x->ndim != 4 || w->ndim != 4) return 1;
  if (cnn_conv_check_dtypes(OP, x, w, b) || cnn_conv2d_shape(OP, x, w, b, &p->conv, &s->conv))
    return -1;
  if (check_pool(p)) return -1;
  s->conv.math = math;
  s->conv.allow_winograd = cnn_get_conv_algo() == CNN_CONV_AUTO;
  s->has_bias = b != NULL;
  s->eps = (float)eps;
  for (int i = 0; i < 2; i++) s->pk[i] = p->pool_kernel[i], s->ps[i] = p->pool_stride[i];
  int64_t OH = s->conv.OH, OW = s->conv.OW;
  if (OH < s->pk[0] || OW < s->pk[1] || s->conv.N * OH * OW <= 1) return 1;
  s->PH = (OH - s->pk[0]) / s->ps[0] + 1, s->PW = (OW - s->pk[1]) / s->ps[1] + 1;
  return 0;
}

/* ---- running statistics ----------------------------------------------------------------------- */

static void update_running(cnn_tensor *rm, cnn_tensor *rv, const float *mean, const float *var,
                           int64_t K, int64_t M, double momentum) {
  float *m = cnn_tensor_data(rm), *v = cnn_tensor_data(rv);
  for (int64_t k = 0; k < K; k++) {
    m[k] = (float)((1 - momentum) * m[k] + momentum * mean[k]);
    v[k] = (float)((1 - momentum) * v[k] + momentum * (double)var[k] * M / (M - 1));
  }
  cnn_tensor_bump_version(rm), cnn_tensor_bump_version(rv);
}

/* ---- backward ----------------------------------------------------------------------------------- */

static cnn_tensor *saved_or_null(cnn_node *n, int slot, bool *bad) {
  if (!n->saved[slot]) return NULL;
  cnn_tensor *t = cnn_node_saved(n, slot);
  if (!t) *bad = true;
  return t;
}

static cnn_tensor *vector_like(cnn_tensor *w, int64_t K) {
  return cnn_empty(1, &K, CNN_FLOAT32, cnn_tensor_device(w));
}

static int block_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  const cnn_conv_block_shape *s = (const cnn_conv_block_shape *)n->geometry;
  bool bad = false;
  cnn_tensor *x = cnn_node_saved(n, 0), *w = x ? cnn_node_saved(n, 1) : NULL;
  cnn_tensor *gamma = saved_or_null(n, 2, &bad), *beta = saved_or_null(n, 3, &bad);
  cnn_tensor *state = w && !bad ? cnn_node_saved(n, 4) : NULL;
  if (!state) return -1;
  int64_t K = s->conv.K;
  cnn_tensor *dy = cnn_contiguous(g);
  cnn_tensor *dw = dy ? cnn_empty(w->ndim, w->shape, CNN_FLOAT32, cnn_tensor_device(w)) : NULL;
  bool ok = dw != NULL;
  if (ok && n->needs[0])
    ok = (gin[0] = cnn_empty(x->ndim, x->shape, CNN_FLOAT32, cnn_tensor_device(x))) != NULL;
  for (int i = 2; i < 5 && ok; i++)
    if (n->needs[i]) ok = (gin[i] = vector_like(w, K)) != NULL;
  int rc = -1;
  if (ok)
    rc = CNN_TENSOR_CALL(x, OP, conv_block_backward, cnn_backend_dev(x), s, cnn_tensor_data(dy),
                         cnn_tensor_data(x), cnn_tensor_data(w), cnn_data_or_null(gamma),
                         cnn_data_or_null(beta), cnn_tensor_data(state), cnn_data_or_null(gin[0]),
                         cnn_tensor_data(dw), cnn_data_or_null(gin[2]), cnn_data_or_null(gin[3]),
                         cnn_data_or_null(gin[4]));
  if (n->needs[1])
    gin[1] = dw;
  else
    cnn_tensor_release(dw);
  cnn_tensor_release(dy);
  return rc;
}

/* ---- forward ---------------------------------------------------------------------------------- */

/* Runs the backend's forward into y and state; the running statistics
 * move.  0 or -1. */
static int block_forward(const cnn_backend *be, const cnn_conv_block_shape *s, cnn_tensor *x,
                         cnn_tensor *w, cnn_tensor *b, cnn_tensor *gamma, cnn_tensor *beta,
                         cnn_tensor *rm, cnn_tensor *rv, double momentum, cnn_tensor *y,
                         cnn_tensor *state) {
  int64_t K = s->conv.K, two_k = 2 * K;
  cnn_tensor *stats = cnn_empty(1, &two_k, CNN_FLOAT32, (cnn_device){CNN_CPU, 0});
  if (!stats) return -1;
  float *mean = cnn_tensor_data(stats), *var = mean + K;
  int rc =
      be->conv_block_forward(cnn_backend_dev(x), s, cnn_tensor_data(x), cnn_tensor_data(w),
                             cnn_data_or_null(b), cnn_data_or_null(gamma), cnn_data_or_null(beta),
                             cnn_tensor_data(y), mean, var, cnn_tensor_data(state));
  if (rc == 0 && rm && rv)
    update_running(rm, rv, mean, var, K, s->conv.N * s->conv.OH * s->conv.OW, momentum);
  cnn_tensor_release(stats);
  return rc;
}

/* The checks and the shape: 0, -1 (error) or 1 (declined). */
static int block_setup(const cnn_backend *be, cnn_tensor *x, cnn_tensor *w, cnn_tensor *b,
                       cnn_tensor *const vec[4], double eps, const cnn_conv_block_params *p,
                       cnn_conv_block_shape *s, size_t *state_bytes) {
  static const char *names[4] = {"running_mean", "running_var", "weight", "bias"};
  cnn_dtype math;
  if (!block_applies(be, x, w, b, p) || !block_math(x, w, b, &math)) return 1;
  int rc = block_shape(x, w, b, p, math, eps, s);
  for (int i = 0; i < 4 && rc == 0; i++)
    if (check_channel_vector(names[i], vec[i], x, s->conv.K)) rc = -1;
  if (rc == 0) {
    rc = be->conv_block_state_bytes(cnn_backend_dev(x), s, state_bytes);
    if (rc == -2) rc = 1;
  }
  return rc;
}

cnn_tensor *cnn_conv_bn_relu_pool(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b, cnn_tensor *rm,
                                  cnn_tensor *rv, cnn_tensor *gamma, cnn_tensor *beta,
                                  double momentum, double eps, const cnn_conv_block_params *p,
                                  bool *declined) {
  *declined = false;
  if (!x || !w) return cnn_set_error("%s: missing input or weight", OP), NULL;
  const cnn_backend *be = cnn_backend_of(x, OP);
  if (!be) return NULL;
  cnn_conv_block_shape s;
  size_t bytes = 0;
  int rc =
      block_setup(be, x, w, b, (cnn_tensor *const[4]){rm, rv, gamma, beta}, eps, p, &s, &bytes);
  if (rc) return *declined = rc == 1, NULL;
  cnn_tensor *xc = cnn_contiguous(x), *wc = xc ? cnn_contiguous(w) : NULL;
  cnn_tensor *bc = wc && b ? cnn_contiguous(b) : NULL;
  int64_t yshape[4] = {s.conv.N, s.conv.K, s.PH, s.PW}, nbytes = (int64_t)bytes;
  cnn_tensor *y = wc && (bc || !b) ? cnn_empty(4, yshape, CNN_FLOAT32, cnn_tensor_device(x)) : NULL;
  cnn_tensor *state = y ? cnn_empty(1, &nbytes, CNN_UINT8, cnn_tensor_device(x)) : NULL;
  if (state && block_forward(be, &s, xc, wc, bc, gamma, beta, rm, rv, momentum, y, state))
    cnn_tensor_release(state), state = NULL;
  if (!state) cnn_tensor_release(y), y = NULL;
  cnn_node *n = y ? cnn_autograd_record(y, "ConvBnReluPoolBackward", block_backward, 5,
                                        (cnn_tensor *[]){x, w, b, gamma, beta})
                  : NULL;
  if (n) {
    cnn_node_save(n, 0, xc), cnn_node_save(n, 1, wc), cnn_node_save(n, 4, state);
    if (gamma) cnn_node_save(n, 2, gamma);
    if (beta) cnn_node_save(n, 3, beta);
    cnn_node_set_geometry(n, &s, sizeof s);
  }
  cnn_tensor_release(xc), cnn_tensor_release(wc), cnn_tensor_release(bc), cnn_tensor_release(state);
  return y;
}
