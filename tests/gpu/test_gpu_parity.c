/*
 * test_gpu_parity.c -- every op forward and backward on the GPU against
 * the CPU (label `gpu`).  Exits 77 (CTest: skipped) when CUDA cannot be
 * used here, with the reason on stderr -- never "passed" without a device.
 *
 * parity() runs an op on CPU inputs and on their copies on cuda:0, then
 * backpropagates loss = sum(y * r) (r a fixed random tensor, so every
 * output element gets a different gradient) and compares y and every
 * input's gradient with |gpu - cpu| <= atol + rtol*|cpu|, printing the op,
 * the shape and the worst element (check_arrays).  Shapes are odd on
 * purpose (7x5, 3 channels, stride 2 with padding).  Tolerances: 1e-5 for
 * elementwise float32 math, 1e-4 to 1e-3 where the GPU sums in another
 * order (reductions, matmul, convolution), stated per call.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "cnn.h"

#define MAXIN 5
static const cnn_device GPU = {CNN_CUDA, 0};

typedef cnn_tensor *(*op_fn)(cnn_tensor **in, const void *ctx);

static cnn_tensor *randn(int nd, const int64_t *shape) { return cnn_randn(nd, shape, CNN_FLOAT32); }

/* t as doubles on the host (caller frees) */
static double *host_doubles(cnn_tensor *t) {
  cnn_tensor *c = cnn_to_device(t, CNN_DEVICE_CPU);
  cnn_tensor *d = c ? cnn_to_dtype(c, CNN_FLOAT64) : NULL;
  cnn_tensor *e = d ? cnn_contiguous(d) : NULL;
  int64_t n = e ? cnn_tensor_numel(e) : 0;
  double *out = malloc(sizeof(double) * (size_t)(n ? n : 1));
  if (e && out) memcpy(out, cnn_tensor_data(e), sizeof(double) * (size_t)n);
  cnn_tensor_release(c), cnn_tensor_release(d), cnn_tensor_release(e);
  return out;
}

static void compare(const char *op, const char *what, cnn_tensor *gpu, cnn_tensor *cpu, double atol,
                    double rtol) {
  char label[256], s[CNN_SHAPE_STR];
  snprintf(label, sizeof label, "%s %s %s", op, what, cnn_tensor_shape_str(cpu, s));
  CHECK(gpu != NULL);
  if (!gpu) {
    fprintf(stderr, "%s: no GPU result: %s\n", label, cnn_error());
    return;
  }
  CHECK(cnn_same_shape(gpu, cpu));
  CHECK(cnn_tensor_device(gpu).type == CNN_CUDA);
  double *g = host_doubles(gpu), *c = host_doubles(cpu);
  if (cnn_same_shape(gpu, cpu)) check_arrays(label, g, c, cnn_tensor_numel(cpu), atol, rtol);
  free(g), free(c);
}

/* run f on inputs (grads for float inputs with needs[i]); returns y, fills grads */
static cnn_tensor *run(const char *op_name, op_fn f, const void *ctx, int nin, cnn_tensor **in,
                       const bool *needs, cnn_tensor *r, cnn_tensor **grads) {
  for (int i = 0; i < nin; i++)
    if (needs[i]) cnn_set_requires_grad(in[i], true);
  cnn_tensor *y = f(in, ctx);
  if (!y) return NULL;
  bool any = false;
  for (int i = 0; i < nin; i++) any |= needs[i];
  if (any && r && cnn_dtype_is_float(y->dtype)) {
    cnn_tensor *p = cnn_binary(CNN_OP_MUL, y, r);
    cnn_tensor *l = p ? cnn_reduce(CNN_RED_SUM, p, 0, false, 0) : NULL;
    if (!l || cnn_backward(l, NULL, false))
      fprintf(stderr, "%s: backward failed: %s\n", op_name, cnn_error());
    cnn_tensor_release(p), cnn_tensor_release(l);
  }
  for (int i = 0; i < nin; i++) grads[i] = needs[i] ? in[i]->grad : NULL;
  return y;
}

static void parity(const char *op, op_fn f, const void *ctx, int nin, cnn_tensor **cpu_in,
                   const bool *needs, double atol, double rtol) {
  cnn_tensor *gin[MAXIN], *gc[MAXIN], *gg[MAXIN];
  bool prev = cnn_set_grad_enabled(false); /* fresh device leaves, even for inputs reused */
  for (int i = 0; i < nin; i++) gin[i] = cpu_in[i] ? cnn_to_device(cpu_in[i], GPU) : NULL;
  cnn_set_grad_enabled(prev);
  cnn_tensor *yc = run(op, f, ctx, nin, cpu_in, needs, NULL, gc);
  cnn_tensor *r = yc ? cnn_randn(yc->ndim, yc->shape, CNN_FLOAT32) : NULL;
  cnn_tensor *r64 = r && yc->dtype == CNN_FLOAT64 ? cnn_to_dtype(r, CNN_FLOAT64)
                                                  : (r ? (cnn_tensor_retain(r), r) : NULL);
  cnn_tensor *rg = r64 ? cnn_to_device(r64, GPU) : NULL;
  cnn_tensor_release(yc);
  for (int i = 0; i < nin; i++) /* fresh leaves: the forward above recorded nothing we keep */
    if (needs[i]) cnn_tensor_release(cpu_in[i]->grad), cpu_in[i]->grad = NULL;
  yc = run(op, f, ctx, nin, cpu_in, needs, r64, gc);
  CHECK(yc != NULL);
  if (!yc) fprintf(stderr, "%s: cpu failed: %s\n", op, cnn_error());
  cnn_tensor *yg = yc ? run(op, f, ctx, nin, gin, needs, rg, gg) : NULL;
  if (yc) compare(op, "forward", yg, yc, atol, rtol);
  for (int i = 0; yc && yg && i < nin; i++) {
    if (!needs[i]) continue;
    char what[32];
    snprintf(what, sizeof what, "grad %d", i + 1);
    compare(op, what, gg[i], gc[i], atol, rtol);
  }
  cnn_tensor_release(yc), cnn_tensor_release(yg), cnn_tensor_release(r), cnn_tensor_release(r64);
  cnn_tensor_release(rg);
  for (int i = 0; i < nin; i++) cnn_tensor_release(gin[i]);
}

/* ---- the ops ------------------------------------------------------------------------ */

static cnn_tensor *op_binary(cnn_tensor **in, const void *ctx) {
  return cnn_binary(*(const cnn_binary_op *)ctx, in[0], in[1]);
}
static cnn_tensor *op_unary(cnn_tensor **in, const void *ctx) {
  cnn_unary_op op = *(const cnn_unary_op *)ctx;
  double p0 = op == CNN_OP_LEAKY_RELU ? 0.1
              : op == CNN_OP_ELU      ? 1.0
              : op == CNN_OP_CLAMP    ? -0.5
                                      : 3.0;
  return cnn_unary(op, in[0], p0, 0.5);
}
static cnn_tensor *op_reduce(cnn_tensor **in, const void *ctx) {
  const int *a = ctx; /* op, dims mask, keepdim, p */
  return cnn_reduce((cnn_reduce_op)a[0], in[0], (uint32_t)a[1], a[2], a[3]);
}
static cnn_tensor *op_max_dim(cnn_tensor **in, const void *ctx) {
  cnn_tensor *v = NULL, *ix = NULL;
  if (cnn_max_dim(in[0], 1, false, false, &v, &ix)) return NULL;
  cnn_tensor_release(ix);
  return v;
}
static cnn_tensor *op_matmul(cnn_tensor **in, const void *ctx) { return cnn_matmul(in[0], in[1]); }
static cnn_tensor *op_matmul_t(cnn_tensor **in, const void *ctx) {
  cnn_tensor *t = cnn_transpose(in[1], 0, 1), *y = t ? cnn_matmul(in[0], t) : NULL;
  cnn_tensor_release(t);
  return y;
}
static cnn_tensor *op_linear(cnn_tensor **in, const void *ctx) {
  return cnn_linear(in[0], in[1], in[2]);
}
static cnn_tensor *op_conv(cnn_tensor **in, const void *ctx) {
  return cnn_conv2d(in[0], in[1], in[2], (const cnn_conv_params *)ctx);
}
static cnn_tensor *op_maxpool(cnn_tensor **in, const void *ctx) {
  return cnn_max_pool2d(in[0], (const cnn_pool_params *)ctx, NULL);
}
static cnn_tensor *op_avgpool(cnn_tensor **in, const void *ctx) {
  return cnn_avg_pool2d(in[0], (const cnn_pool_params *)ctx);
}
static cnn_tensor *op_adaptive(cnn_tensor **in, const void *ctx) {
  return cnn_adaptive_avg_pool2d(in[0], 3, 2);
}
static cnn_tensor *op_softmax(cnn_tensor **in, const void *ctx) {
  return *(const int *)ctx ? cnn_log_softmax(in[0], 1) : cnn_softmax(in[0], 1);
}
/* in: x, weight, bias, running_mean, running_var */
static cnn_tensor *op_bn(cnn_tensor **in, const void *ctx) {
  bool training = *(const int *)ctx;
  return cnn_batch_norm(in[0], in[3], in[4], in[1], in[2], training, 0.1, 1e-5);
}
static cnn_tensor *op_ce(cnn_tensor **in, const void *ctx) {
  const double *e = ctx;
  return cnn_cross_entropy(in[0], in[1], in[2], (cnn_reduction)(int)e[1], e[0], 2);
}
static cnn_tensor *op_nll(cnn_tensor **in, const void *ctx) {
  return cnn_nll_loss(in[0], in[1], in[2], CNN_REDUCTION_MEAN, -1);
}
static cnn_tensor *op_mse(cnn_tensor **in, const void *ctx) {
  return cnn_mse_loss(in[0], in[1], CNN_REDUCTION_MEAN);
}
static cnn_tensor *op_bce(cnn_tensor **in, const void *ctx) {
  return cnn_bce_with_logits(in[0], in[1], in[2], NULL, CNN_REDUCTION_SUM);
}
static cnn_tensor *op_bce_weight(cnn_tensor **in, const void *ctx) {
  return cnn_bce_with_logits(in[0], in[1], in[2], in[3], CNN_REDUCTION_MEAN);
}
static cnn_tensor *op_cat(cnn_tensor **in, const void *ctx) { return cnn_cat(2, in, 1); }
static cnn_tensor *op_index_select(cnn_tensor **in, const void *ctx) {
  return cnn_index_select(in[0], 1, in[1]);
}
static cnn_tensor *op_gather(cnn_tensor **in, const void *ctx) {
  return cnn_gather(in[0], 1, in[1]);
}
static cnn_tensor *op_pad(cnn_tensor **in, const void *ctx) {
  int64_t pads[4] = {1, 2, 0, 1};
  return cnn_pad(in[0], 4, pads, 0.5);
}
static cnn_tensor *op_where(cnn_tensor **in, const void *ctx) {
  cnn_tensor *z = cnn_scalar(0, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *m = cnn_binary(CNN_OP_GT, in[0], z), *y = m ? cnn_where(m, in[0], in[1]) : NULL;
  cnn_tensor_release(z), cnn_tensor_release(m);
  return y;
}
static cnn_tensor *op_transpose_copy(cnn_tensor **in, const void *ctx) {
  cnn_tensor *t = cnn_transpose(in[0], 0, 1), *c = t ? cnn_contiguous(t) : NULL;
  cnn_tensor_release(t);
  return c;
}
static cnn_tensor *op_cast_half(cnn_tensor **in, const void *ctx) {
  cnn_tensor *h = cnn_to_dtype(in[0], *(const cnn_dtype *)ctx),
             *f = h ? cnn_to_dtype(h, CNN_FLOAT32) : NULL;
  cnn_tensor_release(h);
  return f;
}

/* ---- groups of checks ------------------------------------------------------------------ */

static void elementwise(void) {
  int64_t a[2] = {7, 5}, b[1] = {5}, c[2] = {7, 1};
  static const cnn_binary_op bops[] = {CNN_OP_ADD,     CNN_OP_SUB,     CNN_OP_MUL,     CNN_OP_DIV,
                                       CNN_OP_MAXIMUM, CNN_OP_MINIMUM, CNN_OP_ADD_RELU};
  for (size_t k = 0; k < sizeof bops / sizeof bops[0]; k++) {
    cnn_tensor *in[2] = {randn(2, a), randn(1, b)};
    parity(cnn_binary_name(bops[k]), op_binary, &bops[k], 2, in, (bool[]){true, true}, 1e-5, 1e-5);
    cnn_tensor_release(in[1]);
    in[1] = randn(2, c);
    parity(cnn_binary_name(bops[k]), op_binary, &bops[k], 2, in, (bool[]){true, true}, 1e-5, 1e-5);
    cnn_tensor_release(in[0]), cnn_tensor_release(in[1]);
  }
  static const cnn_unary_op uops[] = {
      CNN_OP_NEG,        CNN_OP_ABS,        CNN_OP_EXP, CNN_OP_TANH,   CNN_OP_SIGMOID,
      CNN_OP_RELU,       CNN_OP_SIN,        CNN_OP_COS, CNN_OP_SQUARE, CNN_OP_GELU,
      CNN_OP_EXPM1,      CNN_OP_LEAKY_RELU, CNN_OP_ELU, CNN_OP_CLAMP,  CNN_OP_MUL_SCALAR,
      CNN_OP_ADD_SCALAR, CNN_OP_FLOOR};
  for (size_t k = 0; k < sizeof uops / sizeof uops[0]; k++) {
    cnn_tensor *in[1] = {randn(2, a)};
    parity(cnn_unary_name(uops[k]), op_unary, &uops[k], 1, in, (bool[]){true}, 1e-5, 1e-5);
    cnn_tensor_release(in[0]);
  }
  static const cnn_unary_op pos[] = {CNN_OP_LOG,        CNN_OP_SQRT,  CNN_OP_RSQRT,
                                     CNN_OP_RECIPROCAL, CNN_OP_LOG1P, CNN_OP_POW_SCALAR};
  for (size_t k = 0; k < sizeof pos / sizeof pos[0]; k++) {
    cnn_tensor *r = cnn_rand(2, a, CNN_FLOAT32), *in[1] = {cnn_unary(CNN_OP_ADD_SCALAR, r, 0.5, 0)};
    parity(cnn_unary_name(pos[k]), op_unary, &pos[k], 1, in, (bool[]){true}, 1e-5, 1e-5);
    cnn_tensor_release(r), cnn_tensor_release(in[0]);
  }
  cnn_tensor *in[2] = {randn(2, a), randn(2, a)};
  parity("where", op_where, NULL, 2, in, (bool[]){true, true}, 0, 0);
  parity("contiguous(transpose)", op_transpose_copy, NULL, 1, in, (bool[]){true}, 0, 0);
  parity("to(float16)", op_cast_half, &(cnn_dtype){CNN_FLOAT16}, 1, in, (bool[]){false}, 0, 0);
  parity("to(bfloat16)", op_cast_half, &(cnn_dtype){CNN_BFLOAT16}, 1, in, (bool[]){false}, 0, 0);
  cnn_tensor_release(in[0]), cnn_tensor_release(in[1]);
}

/* activations of issue 13 (helper "act"): each with its options */
typedef struct {
  cnn_unary_op op;
  double p0, p1;
} act_case;
static cnn_tensor *op_activation(cnn_tensor **in, const void *ctx) {
  const act_case *a = ctx;
  return cnn_unary(a->op, in[0], a->p0, a->p1);
}
static void activations(void) {
  int64_t a[2] = {7, 5};
  static const act_case cases[] = {
      {CNN_OP_HARDTANH, -0.5, 0.5}, {CNN_OP_HARDTANH, 0, 6},    {CNN_OP_SILU, 0, 0},
      {CNN_OP_HARDSWISH, 0, 0},     {CNN_OP_HARDSIGMOID, 0, 0}, {CNN_OP_MISH, 0, 0},
      {CNN_OP_GELU_TANH, 0, 0},     {CNN_OP_SOFTPLUS, 1, 20},   {CNN_OP_SOFTPLUS, 0.5, 1}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    cnn_tensor *r = randn(2, a), *in[1] = {cnn_unary(CNN_OP_MUL_SCALAR, r, 4, 0)};
    parity(cnn_unary_name(cases[k].op), op_activation, &cases[k], 1, in, (bool[]){true}, 1e-5,
           1e-5);
    cnn_tensor_release(r), cnn_tensor_release(in[0]);
  }
}

/* losses of issue 13 (helper "act"), composed of ops: forward and both gradients */
static cnn_tensor *op_composed_loss(cnn_tensor **in, const void *ctx) {
  switch (*(const int *)ctx) {
  case 0: return cnn_l1_loss(in[0], in[1], CNN_REDUCTION_MEAN);
  case 1: return cnn_smooth_l1_loss(in[0], in[1], CNN_REDUCTION_SUM, 0.5);
  case 2: return cnn_huber_loss(in[0], in[1], CNN_REDUCTION_MEAN, 0.7);
  case 3: return cnn_kl_div(in[0], in[1], CNN_REDUCTION_SUM, true, true);
  default: return cnn_cross_entropy_probs(in[0], in[1], NULL, CNN_REDUCTION_MEAN, 0.1);
  }
}
static cnn_tensor *op_bce_probs(cnn_tensor **in, const void *ctx) {
  cnn_tensor *p = cnn_unary(CNN_OP_SIGMOID, in[0], 0, 0),
             *q = cnn_unary(CNN_OP_SIGMOID, in[1], 0, 0);
  cnn_tensor *l = p && q ? cnn_binary_cross_entropy(p, q, NULL, CNN_REDUCTION_MEAN) : NULL;
  cnn_tensor_release(p), cnn_tensor_release(q);
  return l;
}
static void composed_losses(void) {
  int64_t a[2] = {7, 5};
  static const int kinds[] = {0, 1, 2, 3, 4};
  static const char *names[] = {"l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
                                "cross_entropy(probs)"};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    cnn_tensor *in[2] = {randn(2, a), randn(2, a)};
    parity(names[k], op_composed_loss, &kinds[k], 2, in, (bool[]){true, true}, 1e-5, 1e-4);
    cnn_tensor_release(in[0]), cnn_tensor_release(in[1]);
  }
  cnn_tensor *in[2] = {randn(2, a), randn(2, a)};
  parity("binary_cross_entropy", op_bce_probs, NULL, 2, in, (bool[]){true, true}, 1e-5, 1e-4);
  cnn_tensor_release(in[0]), cnn_tensor_release(in[1]);
}

static void reductions(void) {
  int64_t s[3] = {4, 7, 5};
  static const int cases[][4] = {
      {CNN_RED_SUM, 0, 0, 0},    {CNN_RED_SUM, 2, 1, 0},   {CNN_RED_MEAN, 5, 0, 0},
      {CNN_RED_VAR, 4, 0, 1},    {CNN_RED_STD, 1, 1, 1},   {CNN_RED_NORM, 6, 0, 2},
      {CNN_RED_MAX, 2, 0, 0},    {CNN_RED_MIN, 0, 0, 0},   {CNN_RED_PROD, 4, 0, 0},
      {CNN_RED_ARGMAX, 2, 0, 0}, {CNN_RED_ARGMIN, 4, 1, 0}};
  static const char *names[] = {"sum",  "sum(2)", "mean", "var",    "std",   "norm",
                                "amax", "amin",   "prod", "argmax", "argmin"};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    cnn_tensor *in[1] = {randn(3, s)};
    bool g = cases[k][0] != CNN_RED_ARGMAX && cases[k][0] != CNN_RED_ARGMIN;
    parity(names[k], op_reduce, cases[k], 1, in, (bool[]){g}, 1e-5, 1e-4);
    cnn_tensor_release(in[0]);
  }
  cnn_tensor *in[1] = {randn(3, s)};
  parity("max(dim)", op_max_dim, NULL, 1, in, (bool[]){true}, 0, 0);
  cnn_tensor_release(in[0]);
}

static void products(void) {
  int64_t a[3] = {3, 7, 5}, b[2] = {5, 6}, w[2] = {6, 5}, bias[1] = {6};
  cnn_tensor *in[3] = {randn(3, a), randn(2, b), NULL};
  parity("matmul (batched, broadcast)", op_matmul, NULL, 2, in, (bool[]){true, true}, 1e-4, 1e-4);
  cnn_tensor_release(in[1]);
  in[1] = randn(2, w);
  parity("matmul (transposed view)", op_matmul_t, NULL, 2, in, (bool[]){true, true}, 1e-4, 1e-4);
  in[2] = randn(1, bias);
  parity("linear", op_linear, NULL, 3, in, (bool[]){true, true, true}, 1e-4, 1e-4);
  for (int i = 0; i < 3; i++) cnn_tensor_release(in[i]);
}

static void convolutions(void) {
  int64_t x[4] = {2, 4, 9, 7}, w[4] = {6, 2, 3, 3}, b[1] = {6};
  cnn_conv_params p = {
      {2, 1}, {1, 1, 1, 1}, {1, 2}, 2}; /* stride 2x1, pad 1, dilation 1x2, groups 2 */
  cnn_conv_params asym = {{1, 1}, {0, 1, 2, 0}, {1, 1}, 1};
  int64_t w1[4] = {5, 4, 3, 2}, b1[1] = {5};
  cnn_tensor *in[3] = {randn(4, x), randn(4, w), randn(1, b)};
  parity("conv2d (cuDNN, groups, stride, dilation)", op_conv, &p, 3, in, (bool[]){true, true, true},
         1e-4, 1e-4);
  cnn_set_conv_algo(CNN_CONV_NAIVE);
  parity("conv2d (direct kernel)", op_conv, &p, 3, in, (bool[]){true, true, true}, 1e-4, 1e-4);
  cnn_set_conv_algo(CNN_CONV_AUTO);
  cnn_tensor_release(in[1]), cnn_tensor_release(in[2]);
  in[1] = randn(4, w1), in[2] = randn(1, b1);
  /* asymmetric padding: a padded copy + symmetric cuDNN + cropped input
   * gradient (gpu/conv_pad.cu; the fake device runs the same plan) */
  parity("conv2d (asymmetric padding: padded copy)", op_conv, &asym, 3, in,
         (bool[]){true, true, true}, 1e-4, 1e-4);
  cnn_conv_params asym2 = {{2, 1}, {2, 0, 1, 3}, {1, 2}, 1}; /* top/right heavy, stride, dilation */
  parity("conv2d (asymmetric padding, stride, dilation)", op_conv, &asym2, 3, in,
         (bool[]){true, true, true}, 1e-4, 1e-4);
  cnn_set_conv_algo(CNN_CONV_NAIVE);
  parity("conv2d (asymmetric padding: direct)", op_conv, &asym, 3, in, (bool[]){true, true, true},
         1e-4, 1e-4);
  cnn_set_conv_algo(CNN_CONV_AUTO);
  for (int i = 0; i < 3; i++) cnn_tensor_release(in[i]);
}

/* ---- issue 13: transposed convolution (cuDNN's backward-data as the forward,
 * forward conv as its backward-data, backward-filter for the weight) ---- */
static cnn_tensor *op_conv_transpose(cnn_tensor **in, const void *ctx) {
  return cnn_conv_transpose2d(in[0], in[1], in[2], (const cnn_conv_transpose_params *)ctx);
}

static void transposed_convolutions(void) {
  int64_t x[4] = {2, 4, 5, 4}, w[4] = {4, 3, 3, 2}, b[1] = {6};
  /* stride 2x3, padding 1x0, output_padding 1x2, dilation 1x1, groups 2 */
  cnn_conv_transpose_params p = {{2, 3}, {1, 0}, {1, 2}, {1, 1}, 2};
  /* output_padding 1 >= stride 1 (dilation 2): the unreached last rows */
  cnn_conv_transpose_params crop = {{1, 1}, {0, 0}, {1, 1}, {2, 2}, 2};
  cnn_tensor *in[3] = {randn(4, x), randn(4, w), randn(1, b)};
  parity("conv_transpose2d (cuDNN backward-data)", op_conv_transpose, &p, 3, in,
         (bool[]){true, true, true}, 1e-4, 1e-4);
  parity("conv_transpose2d (output_padding >= stride)", op_conv_transpose, &crop, 3, in,
         (bool[]){true, true, true}, 1e-4, 1e-4);
  cnn_set_conv_algo(CNN_CONV_NAIVE);
  parity("conv_transpose2d (direct kernel)", op_conv_transpose, &p, 3, in,
         (bool[]){true, true, true}, 1e-4, 1e-4);
  cnn_set_conv_algo(CNN_CONV_AUTO);
  for (int i = 0; i < 3; i++) cnn_tensor_release(in[i]);
}

/* ---- issue 16 points 4 and 6: conv2d_act.  The device's fused entry
 * (conv2d_act_forward: cuDNN's convolution + bias + ReLU on a GPU, the
 * others as the plain forward and the activation in place; the fake
 * device's own loop and the activation's formula here) against the CPU
 * (no autograd, float32: oneDNN's eltwise post-op) -- different code on
 * each side ---- */
typedef struct {
  cnn_conv_params p;
  cnn_unary_op act;
  double p0, p1;
} conv_act_ctx;

static cnn_tensor *op_conv_act(cnn_tensor **in, const void *ctx) {
  const conv_act_ctx *c = ctx;
  return cnn_conv2d_act(in[0], in[1], in[2], &c->p, c->act, c->p0, c->p1);
}

static void fused_activations(void) {
  int64_t x[4] = {2, 16, 6, 5}, w[4] = {32, 8, 3, 3}, b[1] = {32};
  cnn_tensor *in[3] = {randn(4, x), randn(4, w), randn(1, b)};
  conv_act_ctx c = {{{1, 2}, {1, 1, 0, 2}, {1, 1}, 2}, CNN_OP_SILU, 0, 0};
  parity("conv2d_act silu (CPU: oneDNN post-op)", op_conv_act, &c, 3, in,
         (bool[]){false, false, false}, 1e-4, 1e-4);
  parity("conv2d_act silu (recorded)", op_conv_act, &c, 3, in, (bool[]){true, true, true}, 1e-4,
         1e-4);
  c.act = CNN_OP_HARDTANH, c.p0 = -0.5, c.p1 = 0.75;
  parity("conv2d_act hardtanh (CPU: oneDNN post-op)", op_conv_act, &c, 3, in,
         (bool[]){false, false, false}, 1e-4, 1e-4);
  c.act = CNN_OP_RELU, c.p0 = c.p1 = 0;
  parity("conv2d_act relu (GPU: cuDNN's fused call)", op_conv_act, &c, 3, in,
         (bool[]){false, false, false}, 1e-4, 1e-4);
  cnn_tensor *nob[3] = {in[0], in[1], NULL};
  parity("conv2d_act relu, no bias", op_conv_act, &c, 3, nob, (bool[]){false, false, false}, 1e-4,
         1e-4);
  conv_act_ctx sym = {{{2, 1}, {1, 1, 1, 1}, {1, 2}, 2}, CNN_OP_RELU, 0, 0};
  parity("conv2d_act relu (stride, dilation, symmetric padding)", op_conv_act, &sym, 3, in,
         (bool[]){false, false, false}, 1e-4, 1e-4);
  cnn_set_conv_algo(CNN_CONV_NAIVE);
  parity("conv2d_act relu (direct kernel)", op_conv_act, &sym, 3, in, (bool[]){false, false, false},
         1e-4, 1e-4);
  cnn_set_conv_algo(CNN_CONV_AUTO);
  for (int i = 0; i < 3; i++) cnn_tensor_release(in[i]);
}

/* The device's entry itself, called through the table (so the rows above
 * do reach it): ReLU and sigmoid against the CPU's conv2d then activation. */
static void conv_act_entry(cnn_unary_op act) {
  int64_t xs[4] = {2, 4, 9, 7}, ws[4] = {6, 2, 3, 3}, bs[1] = {6};
  cnn_tensor *x = randn(4, xs), *w = randn(4, ws), *b = randn(1, bs);
  cnn_conv_params p = {{2, 1}, {1, 1, 1, 1}, {1, 2}, 2};
  cnn_tensor *c = cnn_conv2d(x, w, b, &p), *ref = c ? cnn_unary(act, c, 0, 0) : NULL;
  const cnn_backend *be = cnn_backend_get(CNN_CUDA);
  CHECK(ref && be && be->conv2d_act_forward);
  if (ref && be && be->conv2d_act_forward) {
    cnn_tensor *g[3] = {cnn_to_device(x, GPU), cnn_to_device(w, GPU), cnn_to_device(b, GPU)};
    cnn_conv_shape s = {2, 4, 9, 7, 6,           3, 3, ref->shape[2], ref->shape[3], 2, 1, 1, 1, 1,
                        1, 1, 2, 2, CNN_FLOAT32, 0, 0};
    cnn_tensor *y = cnn_empty(4, ref->shape, CNN_FLOAT32, GPU);
    int rc = be->conv2d_act_forward(0, CNN_CONV_AUTO, CNN_FLOAT32, &s, cnn_tensor_data(g[0]),
                                    cnn_tensor_data(g[1]), cnn_tensor_data(g[2]), act, 0, 0,
                                    cnn_tensor_data(y));
    CHECK(rc == 0);
    if (rc == 0) compare("conv2d_act_forward entry", cnn_unary_name(act), y, ref, 1e-4, 1e-4);
    for (int i = 0; i < 3; i++) cnn_tensor_release(g[i]);
    cnn_tensor_release(y);
  }
  cnn_tensor_release(x), cnn_tensor_release(w), cnn_tensor_release(b), cnn_tensor_release(c);
  cnn_tensor_release(ref);
}

/* issue 13: F.pad's reflect/replicate/circular (index_select per padded dim) */
static cnn_tensor *op_pad_mode(cnn_tensor **in, const void *ctx) {
  return cnn_pad_mode(in[0], 4, (const int64_t[]){2, 1, 1, 3}, *(const cnn_padding_mode *)ctx);
}

static void pad_modes(void) {
  int64_t x[4] = {2, 3, 5, 4};
  cnn_tensor *in[1] = {randn(4, x)};
  const cnn_padding_mode modes[3] = {CNN_PAD_REFLECT, CNN_PAD_REPLICATE, CNN_PAD_CIRCULAR};
  parity("pad reflect", op_pad_mode, &modes[0], 1, in, (bool[]){true}, 1e-6, 1e-6);
  parity("pad replicate", op_pad_mode, &modes[1], 1, in, (bool[]){true}, 1e-6, 1e-6);
  parity("pad circular", op_pad_mode, &modes[2], 1, in, (bool[]){true}, 1e-6, 1e-6);
  cnn_tensor_release(in[0]);
}

static void nn_ops(void) {
  int64_t x[4] = {2, 3, 7, 5}, c[1] = {3}, r[2] = {6, 7};
  cnn_pool_params mp = {{3, 2}, {2, 2}, {1, 0}, true, false, {1, 1}},
                  ap = {{3, 3}, {2, 2}, {1, 1}, true, false, {1, 1}};
  cnn_pool_params dp = {{2, 3}, {1, 2}, {1, 1}, true, false, {3, 2}};
  cnn_tensor *in[5] = {randn(4, x), NULL, NULL, NULL, NULL};
  parity("max_pool2d (ceil_mode)", op_maxpool, &mp, 1, in, (bool[]){true}, 0, 0);
  parity("max_pool2d (dilation 3x2, padding, ceil_mode)", op_maxpool, &dp, 1, in, (bool[]){true},
         1e-6, 1e-6);
  parity("avg_pool2d (ceil_mode, pad)", op_avgpool, &ap, 1, in, (bool[]){true}, 1e-6, 1e-5);
  ap.count_include_pad = true;
  parity("avg_pool2d (count_include_pad)", op_avgpool, &ap, 1, in, (bool[]){true}, 1e-6, 1e-5);
  parity("adaptive_avg_pool2d", op_adaptive, NULL, 1, in, (bool[]){true}, 1e-6, 1e-5);
  in[1] = randn(1, c), in[2] = randn(1, c);
  in[3] = randn(1, c), in[4] = cnn_rand(1, c, CNN_FLOAT32);
  parity("batch_norm (train)", op_bn, &(int){1}, 5, in, (bool[]){true, true, true, false, false},
         1e-4, 1e-4);
  parity("batch_norm (eval)", op_bn, &(int){0}, 5, in, (bool[]){true, true, true, false, false},
         1e-4, 1e-4);
  cnn_tensor *sm[1] = {randn(2, r)};
  parity("softmax", op_softmax, &(int){0}, 1, sm, (bool[]){true}, 1e-6, 1e-5);
  parity("log_softmax", op_softmax, &(int){1}, 1, sm, (bool[]){true}, 1e-5, 1e-5);
  cnn_tensor_release(sm[0]);
  for (int i = 0; i < 5; i++) cnn_tensor_release(in[i]);
}

static void losses(void) {
  int64_t x[2] = {6, 7}, t[1] = {6}, w[1] = {7};
  int64_t tv[6] = {0, 3, 2, 6, 2, 1};
  cnn_tensor *in[3] = {randn(2, x), cnn_from_buffer(1, t, CNN_INT64, tv), NULL};
  double ce_plain[2] = {0, CNN_REDUCTION_MEAN}, ce_smooth[2] = {0.1, CNN_REDUCTION_NONE};
  parity("cross_entropy", op_ce, ce_plain, 3, in, (bool[]){true, false, false}, 1e-5, 1e-5);
  in[2] = cnn_rand(1, w, CNN_FLOAT32);
  parity("cross_entropy (weight, smoothing, ignore 2, none)", op_ce, ce_smooth, 3, in,
         (bool[]){true, false, false}, 1e-5, 1e-5);
  parity("nll_loss (weight)", op_nll, NULL, 3, in, (bool[]){true, false, false}, 1e-5, 1e-5);
  cnn_tensor *m[3] = {randn(2, x), randn(2, x), NULL};
  parity("mse_loss", op_mse, NULL, 2, m, (bool[]){true, true}, 1e-5, 1e-5);
  cnn_tensor *u = cnn_rand(2, x, CNN_FLOAT32);
  cnn_tensor_release(m[1]);
  m[1] = u, m[2] = cnn_rand(1, w, CNN_FLOAT32);
  parity("binary_cross_entropy_with_logits (pos_weight)", op_bce, NULL, 3, m,
         (bool[]){true, true, true}, 1e-4, 1e-5);
  int64_t wc[2] = {6, 1};
  cnn_tensor *mw[4] = {m[0], m[1], m[2], cnn_rand(2, wc, CNN_FLOAT32)};
  parity("binary_cross_entropy_with_logits (pos_weight, weight 6x1)", op_bce_weight, NULL, 4, mw,
         (bool[]){true, true, true, true}, 1e-4, 1e-5);
  cnn_tensor_release(mw[3]);
  for (int i = 0; i < 3; i++) cnn_tensor_release(in[i]), cnn_tensor_release(m[i]);
}

static void indexing(void) {
  int64_t a[2] = {7, 5}, b[2] = {7, 3}, k[1] = {4}, kv[4] = {4, 0, 4, 2};
  int64_t gv[21];
  for (int i = 0; i < 21; i++) gv[i] = (i * 7 + 3) % 5;
  cnn_tensor *in[2] = {randn(2, a), randn(2, b)};
  parity("cat", op_cat, NULL, 2, in, (bool[]){true, true}, 0, 0);
  cnn_tensor_release(in[1]);
  in[1] = cnn_from_buffer(1, k, CNN_INT64, kv);
  parity("index_select (repeated)", op_index_select, NULL, 2, in, (bool[]){true, false}, 1e-6, 0);
  cnn_tensor_release(in[1]);
  in[1] = cnn_from_buffer(2, b, CNN_INT64, gv);
  parity("gather", op_gather, NULL, 2, in, (bool[]){true, false}, 1e-6, 0);
  parity("pad", op_pad, NULL, 1, in, (bool[]){true}, 0, 0);
  cnn_tensor_release(in[0]), cnn_tensor_release(in[1]);
}

/* dropout's mask is drawn differently on the device: check its statistics */
static void dropout(void) {
  int64_t s[1] = {100000};
  cnn_tensor *x = cnn_full(1, s, 1.0, CNN_FLOAT32, GPU);
  cnn_tensor *y = x ? cnn_dropout(x, 0.25, true) : NULL;
  double *h = y ? host_doubles(y) : NULL;
  int64_t zeros = 0, bad = 0;
  for (int64_t i = 0; h && i < s[0]; i++) {
    if (h[i] == 0)
      zeros++;
    else if (fabs(h[i] - 1 / 0.75) > 1e-6)
      bad++;
  }
  CHECK(h != NULL);
  CHECK(bad == 0);
  CHECK(fabs(zeros / (double)s[0] - 0.25) < 0.01);
  free(h);
  cnn_tensor_release(x), cnn_tensor_release(y);
}

/* ---- tensor ops (issue 13 point 7): sort, topk, scans, scatter, flip/roll/repeat ---- */

static cnn_tensor *op_sort(cnn_tensor **in, const void *ctx) {
  const int *a = ctx; /* dim, descending */
  cnn_tensor *v = NULL, *i = NULL;
  if (cnn_sort(in[0], a[0], a[1], &v, &i)) return NULL;
  cnn_tensor_release(i);
  return v;
}
static cnn_tensor *op_topk(cnn_tensor **in, const void *ctx) {
  const int *a = ctx; /* k, dim, largest */
  cnn_tensor *v = NULL, *i = NULL;
  if (cnn_topk(in[0], a[0], a[1], a[2], &v, &i)) return NULL;
  cnn_tensor_release(i);
  return v;
}
static cnn_tensor *op_cumsum(cnn_tensor **in, const void *ctx) {
  return cnn_cumsum(in[0], *(const int *)ctx);
}
static cnn_tensor *op_cumprod(cnn_tensor **in, const void *ctx) {
  return cnn_cumprod(in[0], *(const int *)ctx);
}
static cnn_tensor *op_scatter(cnn_tensor **in, const void *ctx) {
  return *(const int *)ctx ? cnn_scatter_add(in[0], 1, in[1], in[2])
                           : cnn_scatter(in[0], 1, in[1], in[2], 0);
}
static cnn_tensor *op_flip_roll_repeat(cnn_tensor **in, const void *ctx) {
  static const int dims[2] = {0, 2};
  static const int64_t shifts[2] = {2, -1}, reps[4] = {2, 1, 1, 2};
  cnn_tensor *f = cnn_flip(in[0], 2, dims);
  cnn_tensor *r = f ? cnn_roll(f, 2, shifts, 2, dims) : NULL;
  cnn_tensor *t = r ? cnn_repeat(r, 4, reps) : NULL;
  cnn_tensor_release(f), cnn_tensor_release(r);
  (void)ctx;
  return t;
}

/* sort's indices (ties, NaN, int64 values) equal on both devices, over
 * a rows x cols tensor sorted along each dim (cols past 2048: the CUDA
 * module's merge passes) */
static void sort_indices(cnn_dtype dt, bool descending, int64_t rows, int64_t cols) {
  int64_t s[2] = {rows, cols}, n = rows * cols;
  cnn_tensor *ri = cnn_randint(-3, 3, 2, s, CNN_INT64), *x = ri ? cnn_to_dtype(ri, dt) : NULL;
  for (int64_t i = 0; x && dt != CNN_INT64 && i < n; i += 11) cnn_tensor_set(x, i, NAN);
  cnn_tensor *xg = x ? cnn_to_device(x, GPU) : NULL, *vc = NULL, *ic = NULL, *vg = NULL, *ig = NULL;
  for (int dim = 0; xg && dim < 2; dim++) {
    CHECK(cnn_sort(x, dim, descending, &vc, &ic) == 0 &&
          cnn_sort(xg, dim, descending, &vg, &ig) == 0);
    compare("sort", "indices", ig, ic, 0, 0);
    cnn_tensor_release(vc), cnn_tensor_release(ic), cnn_tensor_release(vg), cnn_tensor_release(ig);
    vc = ic = vg = ig = NULL;
  }
  cnn_tensor_release(ri), cnn_tensor_release(x), cnn_tensor_release(xg);
}

static void tensor_ops(void) {
  int64_t s[3] = {4, 7, 5}, is[3] = {3, 7, 5};
  cnn_tensor *x = randn(3, s), *src = randn(3, s);
  cnn_tensor *ri = cnn_randint(0, 3, 3, is, CNN_INT64); /* 0-based rows of dim 1 */
  const bool x_only[1] = {true}, scatter_needs[3] = {true, false, true};
  static const int sort_cases[][2] = {{0, 0}, {1, 1}, {2, 0}},
                   topk_cases[][3] = {{3, 1, 1}, {2, 2, 0}};
  for (int i = 0; i < 3; i++) parity("sort", op_sort, sort_cases[i], 1, &x, x_only, 0, 0);
  for (int i = 0; i < 2; i++) parity("topk", op_topk, topk_cases[i], 1, &x, x_only, 0, 0);
  for (int d = 0; d < 3; d++) {
    parity("cumsum", op_cumsum, &d, 1, &x, x_only, 1e-5, 1e-5);
    parity("cumprod", op_cumprod, &d, 1, &x, x_only, 1e-5, 1e-4);
  }
  int add = 0;
  parity("scatter", op_scatter, &add, 3, (cnn_tensor *[]){x, ri, src}, scatter_needs, 1e-6, 1e-6);
  add = 1;
  parity("scatter_add", op_scatter, &add, 3, (cnn_tensor *[]){x, ri, src}, scatter_needs, 1e-5,
         1e-5);
  parity("flip/roll/repeat", op_flip_roll_repeat, NULL, 1, &x, x_only, 1e-6, 1e-6);
  for (int desc = 0; desc < 2; desc++) {
    sort_indices(CNN_FLOAT32, desc, 6, 37), sort_indices(CNN_FLOAT64, desc, 6, 37);
    sort_indices(CNN_INT64, desc, 6, 37), sort_indices(CNN_FLOAT32, desc, 3, 2300);
  }
  cnn_tensor_release(x), cnn_tensor_release(src), cnn_tensor_release(ri);
}

/* scatter_add of float64 and of the integer dtypes (int64 exact, uint8
 * modulo 256: values up to 199, repeated indices, so sums wrap) */
static void scatter_add_dtypes(void) {
  int64_t s[3] = {4, 7, 5}, is[3] = {3, 7, 5};
  static const cnn_dtype dts[3] = {CNN_FLOAT64, CNN_INT64, CNN_UINT8};
  static const char *names[3] = {"scatter_add float64", "scatter_add int64", "scatter_add uint8"};
  cnn_tensor *ri = cnn_randint(0, 3, 3, is, CNN_INT64);
  for (int i = 0; i < 3; i++) {
    cnn_tensor *a = cnn_randint(0, 200, 3, s, CNN_INT64), *b = cnn_randint(0, 200, 3, s, CNN_INT64);
    cnn_tensor *x = a ? cnn_to_dtype(a, dts[i]) : NULL, *src = b ? cnn_to_dtype(b, dts[i]) : NULL;
    bool g = dts[i] == CNN_FLOAT64;
    int add = 1;
    parity(names[i], op_scatter, &add, 3, (cnn_tensor *[]){x, ri, src}, (bool[]){g, false, g}, 0,
           1e-12);
    cnn_tensor_release(a), cnn_tensor_release(b), cnn_tensor_release(x), cnn_tensor_release(src);
  }
  cnn_tensor_release(ri);
}

/* ---- float16 inference (issue 16 point 6): each op on cuda in float16 against
 * the same op on the CPU in float32, forward only.  The CPU's inputs are
 * the float16 inputs widened (rounded to float16 and back), so the two
 * sides see the same numbers and differ only by the device's float16
 * output (one rounding, 2^-11 relative) and float arithmetic inside:
 * rtol 1e-3 for one rounding, more where a sum of many terms is rounded
 * (stated per call). ---- */

/* t rounded to float16 and widened back to float32, on the CPU */
static cnn_tensor *rounded_to_half(cnn_tensor *t) {
  cnn_tensor *h = cnn_to_dtype(t, CNN_FLOAT16), *f = h ? cnn_to_dtype(h, CNN_FLOAT32) : NULL;
  cnn_tensor_release(h);
  return f;
}

/* in: float32 CPU inputs (int64 ones are passed as they are) */
static void half_parity(const char *op, op_fn f, const void *ctx, int nin, cnn_tensor **in,
                        double atol, double rtol) {
  cnn_tensor *ref_in[MAXIN] = {0}, *dev_in[MAXIN] = {0};
  for (int i = 0; i < nin; i++) {
    bool fl = in[i] && in[i]->dtype == CNN_FLOAT32;
    cnn_tensor *h = fl ? cnn_to_dtype(in[i], CNN_FLOAT16) : NULL;
    ref_in[i] = fl ? rounded_to_half(in[i]) : in[i];
    if (!fl && in[i]) cnn_tensor_retain(in[i]);
    dev_in[i] = in[i] ? cnn_to_device(fl ? h : in[i], GPU) : NULL;
    cnn_tensor_release(h);
  }
  char name[128];
  snprintf(name, sizeof name, "%s (float16)", op);
  cnn_tensor *yc = f(ref_in, ctx), *yg = f(dev_in, ctx);
  CHECK(yc != NULL);
  if (!yg) fprintf(stderr, "%s: cuda failed: %s\n", name, cnn_error());
  bool exact = yg && yg->dtype == yc->dtype && (yg->dtype == CNN_INT64 || yg->dtype == CNN_UINT8);
  CHECK(yg != NULL && (yg->dtype == CNN_FLOAT16 || exact));
  if (yc && exact) { /* indices, comparisons: exactly the CPU's */
    compare(name, "forward", yg, yc, 0, 0);
  } else if (yc && yg) {
    cnn_tensor *yf = cnn_to_dtype(yg, CNN_FLOAT32);
    compare(name, "forward", yf, yc, atol, rtol);
    cnn_tensor_release(yf);
  }
  cnn_tensor_release(yc), cnn_tensor_release(yg);
  for (int i = 0; i < nin; i++) cnn_tensor_release(ref_in[i]), cnn_tensor_release(dev_in[i]);
}

static cnn_tensor *op_argmax(cnn_tensor **in, const void *ctx) {
  return cnn_reduce(CNN_RED_ARGMAX, in[0], 1u << 1, false, 0);
}
static cnn_tensor *op_dropout_eval(cnn_tensor **in, const void *ctx) {
  cnn_tensor *y = cnn_dropout(in[0], 0.3, false), *r = y ? cnn_clone(y) : NULL;
  cnn_tensor_release(y);
  return r;
}

static void half_elementwise(void) {
  int64_t a[2] = {7, 5}, b[1] = {5}, c[2] = {7, 1};
  static const cnn_binary_op bops[] = {CNN_OP_ADD, CNN_OP_SUB,     CNN_OP_MUL,
                                       CNN_OP_DIV, CNN_OP_MAXIMUM, CNN_OP_GT};
  for (size_t k = 0; k < sizeof bops / sizeof bops[0]; k++) {
    cnn_tensor *in[2] = {randn(2, a), randn(1, b)}; /* broadcast along rows */
    half_parity(cnn_binary_name(bops[k]), op_binary, &bops[k], 2, in, 1e-4, 1e-3);
    cnn_tensor_release(in[1]);
    in[1] = randn(2, c); /* along columns */
    half_parity(cnn_binary_name(bops[k]), op_binary, &bops[k], 2, in, 1e-4, 1e-3);
    cnn_tensor_release(in[0]), cnn_tensor_release(in[1]);
  }
  static const cnn_unary_op uops[] = {CNN_OP_RELU,       CNN_OP_SIGMOID, CNN_OP_TANH,
                                      CNN_OP_GELU,       CNN_OP_EXP,     CNN_OP_NEG,
                                      CNN_OP_LEAKY_RELU, CNN_OP_ELU,     CNN_OP_CLAMP};
  for (size_t k = 0; k < sizeof uops / sizeof uops[0]; k++) {
    cnn_tensor *in[1] = {randn(2, a)};
    half_parity(cnn_unary_name(uops[k]), op_unary, &uops[k], 1, in, 1e-4, 1e-3);
    cnn_tensor_release(in[0]);
  }
  /* 0-d float32 scalar with a float16 tensor: float16 (PyTorch's rule) */
  cnn_tensor *in[2] = {randn(2, a), cnn_scalar(0.25, CNN_FLOAT32, CNN_DEVICE_CPU)};
  half_parity("add 0-d", op_binary, &(cnn_binary_op){CNN_OP_ADD}, 2, in, 1e-4, 1e-3);
  half_parity("where", op_where, NULL, 2, (cnn_tensor *[]){in[0], in[0]}, 0, 0);
  half_parity("dropout (eval)", op_dropout_eval, NULL, 1, in, 0, 0);
  cnn_tensor_release(in[0]), cnn_tensor_release(in[1]);
}

static void half_nn_ops(void) {
  int64_t x[4] = {2, 3, 7, 5}, c[1] = {3}, r[2] = {6, 7}, w[2] = {4, 7}, o[1] = {4};
  cnn_pool_params mp = {{3, 2}, {2, 2}, {1, 0}, true, false, {1, 1}},
                  ap = {{3, 3}, {2, 2}, {1, 1}, true, false, {1, 1}};
  cnn_tensor *in[5] = {randn(4, x), randn(1, c), randn(1, c), randn(1, c),
                       cnn_rand(1, c, CNN_FLOAT32)};
  half_parity("max_pool2d (ceil_mode)", op_maxpool, &mp, 1, in, 0, 0); /* a maximum: exact */
  half_parity("avg_pool2d (ceil_mode, pad)", op_avgpool, &ap, 1, in, 1e-4, 1e-3);
  half_parity("adaptive_avg_pool2d", op_adaptive, NULL, 1, in, 1e-4, 1e-3);
  half_parity("batch_norm (eval)", op_bn, &(int){0}, 5, in, 1e-3, 2e-3);
  cnn_tensor *sm[1] = {randn(2, r)};
  half_parity("softmax", op_softmax, &(int){0}, 1, sm, 1e-4, 1e-3);
  half_parity("log_softmax", op_softmax, &(int){1}, 1, sm, 1e-3, 1e-3);
  half_parity("argmax", op_argmax, NULL, 1, sm, 0, 0);
  half_parity("max(dim)", op_max_dim, NULL, 1, sm, 0, 0); /* a maximum: exact */
  static const int sum_args[4] = {CNN_RED_SUM, 1u << 1, 0, 0},
                   mean_args[4] = {CNN_RED_MEAN, 0, 0, 0};
  half_parity("sum(dim 2)", op_reduce, sum_args, 1, sm, 1e-3, 1e-3);
  half_parity("mean", op_reduce, mean_args, 1, sm, 1e-3, 1e-3);
  /* linear: float32 accumulation on the device, one rounding of the result */
  cnn_tensor *lin[3] = {sm[0], randn(2, w), randn(1, o)}; /* 6x7 . (4x7)^T + 4 */
  half_parity("linear", op_linear, NULL, 3, lin, 1e-3, 2e-3);
  cnn_tensor_release(lin[1]), cnn_tensor_release(lin[2]);
  cnn_tensor_release(sm[0]);
  for (int i = 0; i < 5; i++) cnn_tensor_release(in[i]);
}

/* the device's errors: mixed devices name both */
static void errors(void) {
  int64_t a[1] = {3};
  cnn_tensor *c = cnn_zeros(1, a, CNN_FLOAT32, CNN_DEVICE_CPU),
             *g = cnn_zeros(1, a, CNN_FLOAT32, GPU);
  cnn_tensor *y = g ? cnn_binary(CNN_OP_ADD, c, g) : NULL;
  CHECK(g != NULL && y == NULL);
  CHECK(strstr(cnn_error(), "cpu") && strstr(cnn_error(), "cuda:0"));
  cnn_tensor_release(c), cnn_tensor_release(g), cnn_tensor_release(y);
}

/* ---- helper "norm": layer/group/instance norm, interpolate, adaptive max pooling, pixel shuffle ---- */

/* ctx: {k, normalized_shape...} */
static cnn_tensor *op_layer_norm(cnn_tensor **in, const void *ctx) {
  const int64_t *k = ctx;
  return cnn_layer_norm(in[0], (int)k[0], k + 1, in[1], in[2], 1e-5);
}
static cnn_tensor *op_group_norm(cnn_tensor **in, const void *ctx) {
  return cnn_group_norm(in[0], *(const int *)ctx, in[1], in[2], 1e-5);
}
static cnn_tensor *op_instance_norm(cnn_tensor **in, const void *ctx) {
  return cnn_instance_norm(in[0], NULL, NULL, in[1], in[2], true, 0.1, 1e-5);
}
typedef struct {
  int64_t oh, ow;
  int mode;
  bool ac;
  double s;
} resize_case;
static cnn_tensor *op_interpolate(cnn_tensor **in, const void *ctx) {
  const resize_case *c = ctx;
  return cnn_interpolate(in[0], c->oh, c->ow, c->mode, c->ac, c->s, c->s);
}
static cnn_tensor *op_adaptive_max(cnn_tensor **in, const void *ctx) {
  return cnn_adaptive_max_pool2d(in[0], 3, 2, NULL);
}
static cnn_tensor *op_pixel_shuffle(cnn_tensor **in, const void *ctx) {
  return *(const int *)ctx ? cnn_pixel_shuffle(in[0], 2) : cnn_pixel_unshuffle(in[0], 2);
}

static void norm_resize_ops(void) {
  int64_t xs[4] = {2, 6, 7, 5}, c[1] = {6}, last[2] = {7, 5}, big[2] = {3, 700};
  cnn_tensor *in[3] = {randn(4, xs), randn(1, c), randn(1, c)};
  bool all[3] = {true, true, true};
  parity("group_norm (3 groups)", op_group_norm, &(int){3}, 3, in, all, 1e-4, 1e-4);
  parity("group_norm (1 group)", op_group_norm, &(int){1}, 3, in, all, 1e-4, 1e-4);
  parity("instance_norm", op_instance_norm, NULL, 3, in, all, 1e-4, 1e-4);
  cnn_tensor_release(in[1]), cnn_tensor_release(in[2]);
  in[1] = randn(2, last), in[2] = randn(2, last);
  parity("layer_norm (last 2 dims)", op_layer_norm, (int64_t[]){2, 7, 5}, 3, in, all, 1e-4, 1e-4);
  cnn_tensor *w = randn(1, (int64_t[]){5});
  cnn_tensor *l1[3] = {in[0], w, NULL};
  parity("layer_norm (last dim, weight only)", op_layer_norm, (int64_t[]){1, 5}, 3, l1,
         (bool[]){true, true, false}, 1e-4, 1e-4);
  cnn_tensor_release(w);
  cnn_tensor *rows[3] = {randn(2, big), NULL, NULL}; /* rows longer than a block */
  parity("layer_norm (rows of 700, no affine)", op_layer_norm, (int64_t[]){1, 700}, 3, rows,
         (bool[]){true, false, false}, 1e-4, 1e-4);
  cnn_tensor_release(rows[0]);
  resize_case rc[] = {
      {14, 10, CNN_RESIZE_NEAREST, false, 0},   {9, 11, CNN_RESIZE_NEAREST, false, 0},
      {9, 11, CNN_RESIZE_BILINEAR, false, 0},   {9, 11, CNN_RESIZE_BILINEAR, true, 0},
      {10, 7, CNN_RESIZE_BILINEAR, false, 1.5}, {3, 2, CNN_RESIZE_BILINEAR, false, 0}};
  const char *rn[] = {"interpolate nearest x2",         "interpolate nearest 9x11",
                      "interpolate bilinear 9x11",      "interpolate bilinear align_corners",
                      "interpolate bilinear scale 1.5", "interpolate bilinear down"};
  for (int i = 0; i < 6; i++) parity(rn[i], op_interpolate, &rc[i], 1, in, all, 1e-5, 1e-5);
  parity("adaptive_max_pool2d", op_adaptive_max, NULL, 1, in, all, 0, 0);
  int64_t ps[4] = {2, 8, 4, 6};
  cnn_tensor *p[1] = {randn(4, ps)};
  parity("pixel_shuffle", op_pixel_shuffle, &(int){1}, 1, p, all, 0, 0);
  parity("pixel_unshuffle", op_pixel_shuffle, &(int){0}, 1, p, all, 0, 0);
  cnn_tensor_release(p[0]);
  for (int i = 0; i < 3; i++) cnn_tensor_release(in[i]);
}

int main(void) {
  const char *why = cnn_cuda_unavailable_reason();
  if (why || !cnn_backend_get(CNN_CUDA)) {
    fprintf(stderr, "test_gpu_parity: skipped: %s\n", why ? why : cnn_error());
    return 77;
  }
  const char *mod = cnn_cuda_module_info();
  printf("test_gpu_parity: testing %s\n", mod ? mod : "(no module information)");
  cnn_manual_seed(7);
  elementwise();
  activations(); /* issue 13, helper "act" */
  composed_losses();
  reductions();
  products();
  convolutions();
  transposed_convolutions();                                   /* issue 13 */
  fused_activations();                                         /* issue 16 point 4 */
  conv_act_entry(CNN_OP_RELU), conv_act_entry(CNN_OP_SIGMOID); /* issue 16 point 6 */
  pad_modes();                                                 /* issue 13 */
  nn_ops();
  losses();
  indexing();
  dropout();
  tensor_ops(); /* issue 13 point 7 */
  scatter_add_dtypes();
  errors();
  norm_resize_ops();                 /* helper "norm" */
  half_elementwise(), half_nn_ops(); /* issue 16 point 6: float16 inference */
  return check_report("gpu_parity");
}
