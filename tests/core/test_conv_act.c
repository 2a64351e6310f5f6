/*
 * test_conv_act.c -- a convolution with its activation fused (net:fuse(),
 * issue 16 point 4): core/cpu/conv_post_ops.c (oneDNN eltwise post-ops),
 * the dispatcher cnn_cpu_conv2d_act_forward and the op cnn_conv2d_act.
 *
 * Evidence, none comparing a path with itself: the reference is the naive
 * convolution loop in float64 (conv_naive.c, the oracle of test_conv.c)
 * followed by each activation's formula written here from its definition
 * (PyTorch's); against it:
 *  1. oneDNN with the post-ops, called directly: it must accept every
 *     activation listed in conv_post_ops.c (-2 would be a silent fallback)
 *     and agree within 1e-5 (relative to the output's scale);
 *  2. the dispatcher under NAIVE and IM2COL (the convolution, then the
 *     unary loop in place) and under AUTO;
 *  3. cnn_conv2d_act on tensors without autograd (the fused route) and with
 *     a weight that requires grad (conv2d then the activation, recorded):
 *     the same values, and a gradient exists only in the second.
 * Shapes: 16 -> 32 channels (oneDNN's blocked layouts), padding, stride 2
 * with groups 2, and odd sizes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "check_core.h"
#include "cnn.h"
#include "cpu/kernels.h"

typedef struct {
  const char *name;
  cnn_unary_op op;
  double p0, p1;
} activation;

static const activation activations[] = {
    {"relu", CNN_OP_RELU, 0, 0},           {"leaky_relu 0.2", CNN_OP_LEAKY_RELU, 0.2, 0},
    {"elu 0.7", CNN_OP_ELU, 0.7, 0},       {"hardtanh -0.5 0.8", CNN_OP_HARDTANH, -0.5, 0.8},
    {"relu6", CNN_OP_HARDTANH, 0, 6},      {"sigmoid", CNN_OP_SIGMOID, 0, 0},
    {"tanh", CNN_OP_TANH, 0, 0},           {"gelu", CNN_OP_GELU, 0, 0},
    {"gelu tanh", CNN_OP_GELU_TANH, 0, 0}, {"silu", CNN_OP_SILU, 0, 0},
    {"hardswish", CNN_OP_HARDSWISH, 0, 0}, {"hardsigmoid", CNN_OP_HARDSIGMOID, 0, 0},
    {"mish", CNN_OP_MISH, 0, 0},           {"softplus", CNN_OP_SOFTPLUS, 1, 20},
};
#define NACT (int)(sizeof activations / sizeof activations[0])

/* The definitions (PyTorch's), in double. */
static double formula(const activation *a, double v) {
  const double pi = 3.14159265358979323846;
  switch (a->op) {
  case CNN_OP_RELU: return v > 0 ? v : 0;
  case CNN_OP_LEAKY_RELU: return v > 0 ? v : a->p0 * v;
  case CNN_OP_ELU: return v > 0 ? v : a->p0 * (exp(v) - 1);
  case CNN_OP_HARDTANH: return v < a->p0 ? a->p0 : v > a->p1 ? a->p1 : v;
  case CNN_OP_SIGMOID: return 1 / (1 + exp(-v));
  case CNN_OP_TANH: return tanh(v);
  case CNN_OP_GELU: return 0.5 * v * (1 + erf(v / sqrt(2.0)));
  case CNN_OP_GELU_TANH: return 0.5 * v * (1 + tanh(sqrt(2 / pi) * (v + 0.044715 * v * v * v)));
  case CNN_OP_SILU: return v / (1 + exp(-v));
  case CNN_OP_HARDSWISH: return v * fmin(fmax(v + 3, 0), 6) / 6;
  case CNN_OP_HARDSIGMOID: return fmin(fmax(v + 3, 0), 6) / 6;
  case CNN_OP_MISH: return v * tanh(log1p(exp(v)));
  case CNN_OP_SOFTPLUS: return a->p0 * v > a->p1 ? v : log1p(exp(a->p0 * v)) / a->p0;
  default: return NAN;
  }
}

static cnn_conv_shape mk(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int s,
                         int pad, int groups) {
  cnn_conv_shape c = {N, C,   H,   W,   K,   R, R, 0,      0,           s,
                      s, pad, pad, pad, pad, 1, 1, groups, CNN_FLOAT32, 0, 0};
  c.OH = cnn_conv_out_size(H, pad, pad, (int)R, s, 1);
  c.OW = cnn_conv_out_size(W, pad, pad, (int)R, s, 1);
  return c;
}

typedef struct {
  cnn_conv_shape s;
  int64_t nx, nw, ny;
  double *x, *w, *b, *conv; /* conv: the naive float64 convolution */
  float *xf, *wf, *bf;
} problem;

static void problem_init(problem *q, cnn_conv_shape s) {
  q->s = s;
  q->nx = s.N * s.C * s.H * s.W, q->nw = s.K * (s.C / s.groups) * s.R * s.S;
  q->ny = s.N * s.K * s.OH * s.OW;
  q->x = check_rand_f64(q->nx), q->w = check_rand_f64(q->nw), q->b = check_rand_f64(s.K);
  for (int64_t i = 0; i < q->nx; i++) q->x[i] *= 3; /* reach both sides of every knee */
  q->conv = malloc((size_t)q->ny * sizeof(double));
  CHECK(cnn_cpu_conv2d_naive_forward(CNN_FLOAT64, &s, q->x, q->w, q->b, q->conv) == 0);
  q->xf = malloc((size_t)q->nx * sizeof(float)), q->wf = malloc((size_t)q->nw * sizeof(float));
  q->bf = malloc((size_t)s.K * sizeof(float));
  for (int64_t i = 0; i < q->nx; i++) q->xf[i] = (float)q->x[i];
  for (int64_t i = 0; i < q->nw; i++) q->wf[i] = (float)q->w[i];
  for (int64_t i = 0; i < s.K; i++) q->bf[i] = (float)q->b[i];
}

static void problem_free(problem *q) {
  free(q->x), free(q->w), free(q->b), free(q->conv), free(q->xf), free(q->wf), free(q->bf);
}

/* got (float32) against the activation of the naive convolution */
static void check_values(const char *what, const problem *q, const activation *a, const float *y) {
  double *ref = malloc((size_t)q->ny * sizeof(double)),
         *got = malloc((size_t)q->ny * sizeof(double));
  for (int64_t i = 0; i < q->ny; i++) ref[i] = formula(a, q->conv[i]), got[i] = y[i];
  check_arrays(what, got, ref, q->ny, 1e-5, 1e-5);
  free(ref), free(got);
}

/* ---- 1 and 2: the kernels ------------------------------------------------------------ */

static void check_kernels(const problem *q, const activation *a) {
  float *y = malloc((size_t)q->ny * sizeof(float));
  char what[160];
  int r = cnn_cpu_conv2d_onednn_forward_act(&q->s, q->xf, q->wf, q->bf, a->op, a->p0, a->p1, y);
  snprintf(what, sizeof what, "oneDNN post-op %s", a->name);
  if (r != 0) {
    fprintf(stderr, "%s: returned %d: %s\n", what, r, cnn_error());
    check_failures++;
  } else {
    check_values(what, q, a, y);
  }
  static const cnn_conv_algo algos[] = {CNN_CONV_AUTO, CNN_CONV_IM2COL, CNN_CONV_NAIVE};
  static const char *names[] = {"auto", "im2col", "naive"};
  for (int i = 0; i < 3; i++) {
    snprintf(what, sizeof what, "conv2d_act_forward %s (%s)", a->name, names[i]);
    CHECK(cnn_cpu_conv2d_act_forward(algos[i], CNN_FLOAT32, &q->s, q->xf, q->wf, q->bf, a->op,
                                     a->p0, a->p1, y) == 0);
    check_values(what, q, a, y);
  }
  free(y);
}

/* softplus with beta 2 has no post-op: -2, and the dispatcher still computes it */
static void test_no_post_op(void) {
  problem q;
  problem_init(&q, mk(2, 16, 7, 7, 32, 3, 1, 1, 1));
  activation a = {"softplus beta 2", CNN_OP_SOFTPLUS, 2, 20};
  float *y = malloc((size_t)q.ny * sizeof(float));
  CHECK(cnn_cpu_conv2d_onednn_forward_act(&q.s, q.xf, q.wf, q.bf, a.op, a.p0, a.p1, y) == -2);
  CHECK(cnn_cpu_conv2d_act_forward(CNN_CONV_AUTO, CNN_FLOAT32, &q.s, q.xf, q.wf, q.bf, a.op, a.p0,
                                   a.p1, y) == 0);
  check_values("conv2d_act_forward softplus beta 2 (no post-op)", &q, &a, y);
  free(y);
  problem_free(&q);
}

/* ---- 3: the op on tensors --------------------------------------------------------------- */

static cnn_tensor *floats(int nd, const int64_t *shape, const float *v) {
  cnn_tensor *t = cnn_empty(nd, shape, CNN_FLOAT32, CNN_DEVICE_CPU);
  for (int64_t i = 0; i < cnn_tensor_numel(t); i++) cnn_tensor_set(t, i, v[i]);
  return t;
}

static void check_op(const problem *q, const activation *a) {
  const cnn_conv_shape *s = &q->s;
  int64_t xs[4] = {s->N, s->C, s->H, s->W}, ws[4] = {s->K, s->C / s->groups, s->R, s->S};
  cnn_tensor *x = floats(4, xs, q->xf), *w = floats(4, ws, q->wf), *b = floats(1, &s->K, q->bf);
  cnn_conv_params p = {{s->sh, s->sw}, {s->pt, s->pb, s->pl, s->pr}, {1, 1}, s->groups};
  float *y = malloc((size_t)q->ny * sizeof(float));
  char what[160];
  for (int grad = 0; grad < 2; grad++) {
    cnn_set_requires_grad(w, grad);
    cnn_tensor *t = cnn_conv2d_act(x, w, b, &p, a->op, a->p0, a->p1);
    snprintf(what, sizeof what, "cnn_conv2d_act %s (%s)", a->name, grad ? "recorded" : "fused");
    CHECK(t && cnn_tensor_numel(t) == q->ny);
    if (!t) continue;
    CHECK((t->grad_fn != NULL) == grad);
    for (int64_t i = 0; i < q->ny; i++) y[i] = (float)cnn_tensor_get(t, i);
    check_values(what, q, a, y);
    cnn_tensor_release(t);
  }
  free(y);
  cnn_tensor_release(x), cnn_tensor_release(w), cnn_tensor_release(b);
}

static void test_activations(void) {
  cnn_conv_shape shapes[] = {mk(2, 16, 7, 6, 32, 3, 1, 1, 1), mk(3, 6, 9, 8, 4, 3, 2, 0, 2)};
  for (int k = 0; k < 2; k++) {
    problem q;
    problem_init(&q, shapes[k]);
    for (int i = 0; i < NACT; i++) {
      check_kernels(&q, &activations[i]);
      check_op(&q, &activations[i]);
    }
    problem_free(&q);
  }
}

static void test_errors(void) {
  cnn_tensor *x = cnn_zeros(4, (int64_t[]){1, 2, 4, 4}, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *w = cnn_zeros(4, (int64_t[]){3, 2, 3, 3}, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_conv_params p = {{1, 1}, {0, 0, 0, 0}, {1, 1}, 1};
  cnn_tensor *y = cnn_conv2d_act(x, w, NULL, &p, CNN_OP_EXP, 0, 0);
  check_error(y == NULL, "conv2d_act: exp is not an activation");
  y = cnn_conv2d_act(x, w, NULL, &p, CNN_OP_RELU, 0, 0);
  CHECK(y && y->shape[1] == 3 && y->shape[2] == 2);
  cnn_tensor_release(y), cnn_tensor_release(x), cnn_tensor_release(w);
}

int main(void) {
  cnn_manual_seed(16);
  test_activations();
  test_no_post_op();
  test_errors();
  return check_report("test_conv_act");
}
