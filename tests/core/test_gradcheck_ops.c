/*
 * test_gradcheck_ops.c -- finite-difference gradient checks (float64,
 * central differences, eps 1e-6, tolerance 1e-6) through the autograd
 * engine for every differentiable op of elementwise.c, reduce.c, matmul.c,
 * join.c and loss.c, with broadcasting, non-contiguous leaves and odd
 * shapes.  See gradcheck.h for the method.
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "cnn.h"
#include "gradcheck.h"

#define SH(...) ((int64_t[]){__VA_ARGS__})
#define NIN(a)  ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct {
  int op;
  double p0, p1;
  int dim;
  uint32_t mask;
  bool keepdim;
  int red;
  double smoothing;
  int64_t ignore;
  int n;
} ctx_t;

/* ---- elementwise ---------------------------------------------------------------- */

static cnn_tensor *f_binary(cnn_tensor **in, void *c) {
  return cnn_binary((cnn_binary_op)((ctx_t *)c)->op, in[0], in[1]);
}
static cnn_tensor *f_unary(cnn_tensor **in, void *c) {
  ctx_t *x = c;
  return cnn_unary((cnn_unary_op)x->op, in[0], x->p0, x->p1);
}
static cnn_tensor *f_where(cnn_tensor **in, void *c) { return cnn_where(in[2], in[0], in[1]); }

static void test_binary(void) {
  const char *names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "add_relu"};
  for (int op = CNN_OP_ADD; op <= CNN_OP_ADD_RELU; op++) {
    ctx_t c = {.op = op};
    /* broadcast 2x1x3 with 4x1 */
    cnn_tensor *in[2] = {gc_leaf(3, SH(2, 1, 3), 0.5, 2.0, 1), gc_leaf(2, SH(4, 1), 0.6, 1.9, 2)};
    char what[64];
    snprintf(what, sizeof what, "%s 2x1x3 . 4x1", names[op]);
    gradcheck(what, f_binary, &c, 2, in);
    gc_release(2, in);
    /* transposed leaf with a 0-d scalar */
    cnn_tensor *in2[2] = {gc_leaf_t(3, 4, 0.5, 2.0, 3), gc_leaf(0, NULL, 1.3, 1.3, 4)};
    snprintf(what, sizeof what, "%s 3x4(T) . scalar", names[op]);
    gradcheck(what, f_binary, &c, 2, in2);
    gc_release(2, in2);
  }
  /* mixed dtypes: float32 leaf gets a float32 gradient (checked loosely elsewhere) */
}

/* add_relu across its kink: sums of both signs, each at least 0.05 from 0
 * (finite differences of step 1e-6 stay on one side), broadcast 2x1x3 . 4x1 */
static void test_add_relu_both_signs(void) {
  const double av[] = {-1.5, -0.5, 0.7, 1.1, -0.2, 0.3}, bv[] = {-0.9, 0.45, 0.05, -0.35};
  cnn_tensor *in[2] = {cnn_empty(3, SH(2, 1, 3), CNN_FLOAT64, CNN_DEVICE_CPU),
                       cnn_empty(2, SH(4, 1), CNN_FLOAT64, CNN_DEVICE_CPU)};
  for (int i = 0; i < 6; i++) cnn_tensor_set(in[0], i, av[i]);
  for (int i = 0; i < 4; i++) cnn_tensor_set(in[1], i, bv[i]);
  cnn_set_requires_grad(in[0], true), cnn_set_requires_grad(in[1], true);
  ctx_t c = {.op = CNN_OP_ADD_RELU};
  gradcheck("add_relu 2x1x3 . 4x1, both signs", f_binary, &c, 2, in);
  gc_release(2, in);
}

static void test_unary(void) {
  struct {
    cnn_unary_op op;
    double lo, hi, p0, p1;
  } cases[] = {
      {CNN_OP_NEG, -2, 2, 0, 0},
      {CNN_OP_ABS, 0.2, 2, 0, 0},
      {CNN_OP_EXP, -2, 2, 0, 0},
      {CNN_OP_LOG, 0.3, 3, 0, 0},
      {CNN_OP_SQRT, 0.3, 3, 0, 0},
      {CNN_OP_RSQRT, 0.3, 3, 0, 0},
      {CNN_OP_TANH, -2, 2, 0, 0},
      {CNN_OP_SIGMOID, -3, 3, 0, 0},
      {CNN_OP_RELU, 0.1, 2, 0, 0},
      {CNN_OP_SIN, -3, 3, 0, 0},
      {CNN_OP_COS, -3, 3, 0, 0},
      {CNN_OP_RECIPROCAL, 0.5, 3, 0, 0},
      {CNN_OP_SQUARE, -2, 2, 0, 0},
      {CNN_OP_GELU, -3, 3, 0, 0},
      {CNN_OP_LOG1P, -0.5, 3, 0, 0},
      {CNN_OP_EXPM1, -2, 2, 0, 0},
      {CNN_OP_LEAKY_RELU, 0.1, 2, 0.1, 0},
      {CNN_OP_LEAKY_RELU, -2, -0.1, 0.1, 0},
      {CNN_OP_ELU, -2, -0.1, 1.3, 0},
      {CNN_OP_ELU, 0.1, 2, 1.3, 0},
      {CNN_OP_CLAMP, -2, 2, -1, 1},
      {CNN_OP_POW_SCALAR, 0.3, 2, 2.5, 0},
      {CNN_OP_POW_SCALAR, -2, 2, 3, 0},
      {CNN_OP_ADD_SCALAR, -2, 2, 0.7, 0},
      {CNN_OP_MUL_SCALAR, -2, 2, -1.5, 0},
      {CNN_OP_RELU, -2, -0.1, 0, 0},
      /* activations of issue 13 (helper "act"); the pieces between the kinks */
      {CNN_OP_HARDTANH, -0.9, 1.9, -1, 2},
      {CNN_OP_HARDTANH, 2.1, 4, -1, 2},
      {CNN_OP_HARDTANH, -3, -1.1, -1, 2},
      {CNN_OP_SILU, -3, 3, 0, 0},
      {CNN_OP_HARDSWISH, -2.9, 2.9, 0, 0},
      {CNN_OP_HARDSWISH, 3.1, 5, 0, 0},
      {CNN_OP_HARDSWISH, -5, -3.1, 0, 0},
      {CNN_OP_HARDSIGMOID, -2.9, 2.9, 0, 0},
      {CNN_OP_HARDSIGMOID, 3.1, 5, 0, 0},
      {CNN_OP_MISH, -3, 3, 0, 0},
      {CNN_OP_GELU_TANH, -3, 3, 0, 0},
      {CNN_OP_SOFTPLUS, -3, 3, 1, 20},
      {CNN_OP_SOFTPLUS, -2, 0.9, 2, 2},
      {CNN_OP_SOFTPLUS, 1.1, 3, 2, 2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ctx_t c = {.op = cases[i].op, .p0 = cases[i].p0, .p1 = cases[i].p1};
    cnn_tensor *in[1] = {gc_leaf_t(3, 5, cases[i].lo, cases[i].hi, (int)i)};
    if (cases[i].op == CNN_OP_CLAMP) { /* keep values away from the bounds */
      for (int64_t k = 0; k < 15; k++) {
        double v = cnn_tensor_get(in[0], k);
        if (fabs(fabs(v) - 1) < 0.05) cnn_tensor_set(in[0], k, v * 0.9);
      }
    }
    char what[64];
    snprintf(what, sizeof what, "%s(p0=%g) 3x5(T)", cnn_unary_name(cases[i].op), cases[i].p0);
    gradcheck(what, f_unary, &c, 1, in);
    gc_release(1, in);
  }
}

static void test_where(void) {
  cnn_tensor *cond = cnn_empty(2, SH(3, 1), CNN_UINT8, CNN_DEVICE_CPU);
  for (int i = 0; i < 3; i++) cnn_tensor_set(cond, i, i % 2);
  cnn_tensor *in[3] = {gc_leaf(2, SH(3, 4), -1, 1, 5), gc_leaf(1, SH(4), -1, 1, 6), cond};
  gradcheck("where 3x1 ? 3x4 : 4", f_where, NULL, 3, in);
  gc_release(3, in);
}

/* ---- reductions ---------------------------------------------------------------------- */

static cnn_tensor *f_reduce(cnn_tensor **in, void *c) {
  ctx_t *x = c;
  return cnn_reduce((cnn_reduce_op)x->op, in[0], x->mask, x->keepdim, x->p0);
}
static cnn_tensor *f_max_dim(cnn_tensor **in, void *c) {
  ctx_t *x = c;
  cnn_tensor *v, *i;
  if (cnn_max_dim(in[0], x->dim, x->keepdim, x->op, &v, &i)) return NULL;
  cnn_tensor_release(i);
  return v;
}
static cnn_tensor *f_sum_to(cnn_tensor **in, void *c) { return cnn_sum_to(in[0], 2, SH(3, 1)); }

static void test_reduce(void) {
  struct {
    cnn_reduce_op op;
    uint32_t mask;
    bool keep;
    double p, lo, hi;
  } cases[] = {
      {CNN_RED_SUM, 0, false, 0, -1, 1},     {CNN_RED_SUM, 2, false, 0, -1, 1},
      {CNN_RED_SUM, 5, true, 0, -1, 1},      {CNN_RED_MEAN, 1, false, 0, -1, 1},
      {CNN_RED_MEAN, 0, false, 0, -1, 1},    {CNN_RED_MAX, 2, false, 0, -1, 1},
      {CNN_RED_MIN, 0, false, 0, -1, 1},     {CNN_RED_MAX, 5, true, 0, -1, 1},
      {CNN_RED_PROD, 4, false, 0, 0.5, 1.5}, {CNN_RED_PROD, 0, false, 0, 0.8, 1.2},
      {CNN_RED_VAR, 4, false, 1, -1, 1},     {CNN_RED_VAR, 0, false, 0, -1, 1},
      {CNN_RED_STD, 3, true, 1, -1, 1},      {CNN_RED_STD, 0, false, 0, -1, 1},
      {CNN_RED_NORM, 0, false, 2, -1, 1},    {CNN_RED_NORM, 4, false, 1, 0.1, 1},
      {CNN_RED_NORM, 2, false, 3, -1, 1},    {CNN_RED_NORM, 4, false, INFINITY, -1, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ctx_t c = {
        .op = cases[i].op, .mask = cases[i].mask, .keepdim = cases[i].keep, .p0 = cases[i].p};
    cnn_tensor *in[1] = {gc_leaf(3, SH(2, 3, 4), cases[i].lo, cases[i].hi, 10 + (int)i)};
    char what[80];
    snprintf(what, sizeof what, "reduce op %d mask %u keepdim %d p %g 2x3x4", cases[i].op,
             cases[i].mask, cases[i].keep, cases[i].p);
    gradcheck(what, f_reduce, &c, 1, in);
    gc_release(1, in);
  }
  for (int is_min = 0; is_min < 2; is_min++)
    for (int keep = 0; keep < 2; keep++) {
      ctx_t c = {.op = is_min, .dim = 1, .keepdim = keep};
      cnn_tensor *in[1] = {gc_leaf_t(4, 5, -1, 1, 30 + keep)};
      gradcheck(is_min ? "min(dim) 4x5(T)" : "max(dim) 4x5(T)", f_max_dim, &c, 1, in);
      gc_release(1, in);
    }
  cnn_tensor *in[1] = {gc_leaf(3, SH(2, 3, 4), -1, 1, 40)};
  gradcheck("sum_to 2x3x4 -> 3x1", f_sum_to, NULL, 1, in);
  gc_release(1, in);
}

/* ---- matmul ---------------------------------------------------------------------------- */

static cnn_tensor *f_matmul(cnn_tensor **in, void *c) {
  ctx_t *x = c;
  return x->op == 1   ? cnn_mm(in[0], in[1])
         : x->op == 2 ? cnn_bmm(in[0], in[1])
                      : cnn_matmul(in[0], in[1]);
}

static void test_matmul(void) {
  struct {
    int op, na, nb;
    int64_t a[4], b[4];
  } cases[] = {
      {0, 2, 2, {3, 4}, {4, 5}},
      {0, 1, 2, {4}, {4, 3}},
      {0, 2, 1, {3, 4}, {4}},
      {0, 1, 1, {5}, {5}},
      {0, 4, 3, {2, 1, 3, 4}, {5, 4, 2}},
      {0, 3, 1, {2, 3, 4}, {4}},
      {0, 1, 3, {3}, {2, 3, 4}},
      {1, 2, 2, {2, 3}, {3, 4}},
      {2, 3, 3, {2, 3, 4}, {2, 4, 2}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ctx_t c = {.op = cases[i].op};
    cnn_tensor *in[2] = {gc_leaf(cases[i].na, cases[i].a, -1, 1, 50 + (int)i),
                         gc_leaf(cases[i].nb, cases[i].b, -1, 1, 60 + (int)i)};
    char what[80], s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
    snprintf(what, sizeof what, "matmul(%d) %s @ %s", cases[i].op, cnn_tensor_shape_str(in[0], s1),
             cnn_tensor_shape_str(in[1], s2));
    gradcheck(what, f_matmul, &c, 2, in);
    gc_release(2, in);
  }
  ctx_t c = {.op = 0}; /* both operands transposed views */
  cnn_tensor *in[2] = {gc_leaf_t(3, 4, -1, 1, 70), gc_leaf_t(4, 2, -1, 1, 71)};
  gradcheck("matmul 3x4(T) @ 4x2(T)", f_matmul, &c, 2, in);
  gc_release(2, in);
}

/* ---- joining -------------------------------------------------------------------------------- */

static cnn_tensor *f_cat(cnn_tensor **in, void *c) {
  ctx_t *x = c;
  return x->op ? cnn_stack(x->n, in, x->dim) : cnn_cat(x->n, in, x->dim);
}
static cnn_tensor *f_index_select(cnn_tensor **in, void *c) {
  return cnn_index_select(in[0], ((ctx_t *)c)->dim, in[1]);
}
static cnn_tensor *f_gather(cnn_tensor **in, void *c) {
  return cnn_gather(in[0], ((ctx_t *)c)->dim, in[1]);
}
static cnn_tensor *f_pad(cnn_tensor **in, void *c) {
  ctx_t *x = c;
  int64_t pads[4] = {1, 2, x->n ? -1 : 0, 1};
  return cnn_pad(in[0], 4, pads, 0.5);
}

static cnn_tensor *int_tensor(int ndim, const int64_t *shape, const int64_t *vals) {
  return cnn_from_buffer(ndim, shape, CNN_INT64, vals);
}

static void test_join(void) {
  ctx_t c = {.op = 0, .dim = 1, .n = 2};
  cnn_tensor *in[2] = {gc_leaf(2, SH(3, 2), -1, 1, 80), gc_leaf_t(3, 4, -1, 1, 81)};
  gradcheck("cat 3x2, 3x4(T) dim 1", f_cat, &c, 2, in);
  gc_release(2, in);
  cnn_tensor *six[6];
  for (int i = 0; i < 6; i++) six[i] = gc_leaf(2, SH(i + 1, 3), -1, 1, 90 + i);
  c = (ctx_t){.op = 0, .dim = 0, .n = 6};
  gradcheck("cat of 6 (grouped nodes) dim 0", f_cat, &c, 6, six);
  gc_release(6, six);
  for (int i = 0; i < 6; i++) six[i] = gc_leaf(2, SH(2, 3), -1, 1, 100 + i);
  c = (ctx_t){.op = 1, .dim = 1, .n = 6};
  gradcheck("stack of 6 2x3 dim 1", f_cat, &c, 6, six);
  c = (ctx_t){.op = 1, .dim = 2, .n = 3};
  gradcheck("stack of 3 2x3 dim 2", f_cat, &c, 3, six);
  gc_release(6, six);

  cnn_tensor *is[2] = {gc_leaf(3, SH(4, 3, 2), -1, 1, 110),
                       int_tensor(1, SH(5), (int64_t[]){2, 0, 2, 3, 2})};
  c = (ctx_t){.dim = 0};
  gradcheck("index_select dim 0 (repeats)", f_index_select, &c, 2, is);
  cnn_tensor_release(is[1]);
  is[1] = int_tensor(1, SH(3), (int64_t[]){1, 1, 0});
  c.dim = 2;
  gradcheck("index_select dim 2", f_index_select, &c, 2, is);
  gc_release(2, is);

  cnn_tensor *ga[2] = {gc_leaf(2, SH(3, 4), -1, 1, 120),
                       int_tensor(2, SH(3, 2), (int64_t[]){0, 3, 3, 3, 1, 0})};
  c = (ctx_t){.dim = 1};
  gradcheck("gather dim 1 3x4 by 3x2", f_gather, &c, 2, ga);
  cnn_tensor_release(ga[1]);
  ga[1] = int_tensor(2, SH(2, 4), (int64_t[]){0, 1, 2, 2, 2, 2, 0, 1});
  c.dim = 0;
  gradcheck("gather dim 0 3x4 by 2x4", f_gather, &c, 2, ga);
  gc_release(2, ga);

  for (int neg = 0; neg < 2; neg++) {
    c = (ctx_t){.n = neg};
    cnn_tensor *p[1] = {gc_leaf(3, SH(2, 3, 4), -1, 1, 130 + neg)};
    gradcheck(neg ? "pad (1,2,-1,1) 2x3x4" : "pad (1,2,0,1) 2x3x4", f_pad, &c, 1, p);
    gc_release(1, p);
  }
}

/* ---- nn ops and losses ------------------------------------------------------------------------ */

static cnn_tensor *f_linear(cnn_tensor **in, void *c) { return cnn_linear(in[0], in[1], in[2]); }
static cnn_tensor *f_dropout(cnn_tensor **in, void *c) {
  cnn_manual_seed(7);
  return cnn_dropout(in[0], 0.4, true);
}
static cnn_tensor *f_ce(cnn_tensor **in, void *c) {
  ctx_t *x = c;
  return cnn_cross_entropy(in[0], in[1], in[2], (cnn_reduction)x->red, x->smoothing, x->ignore);
}
static cnn_tensor *f_nll(cnn_tensor **in, void *c) {
  ctx_t *x = c;
  return cnn_nll_loss(in[0], in[1], in[2], (cnn_reduction)x->red, x->ignore);
}
static cnn_tensor *f_mse(cnn_tensor **in, void *c) {
  return cnn_mse_loss(in[0], in[1], (cnn_reduction)((ctx_t *)c)->red);
}
static cnn_tensor *f_bce(cnn_tensor **in, void *c) {
  return cnn_bce_with_logits(in[0], in[1], in[2], NULL, (cnn_reduction)((ctx_t *)c)->red);
}
static cnn_tensor *f_bce_weight(cnn_tensor **in, void *c) {
  return cnn_bce_with_logits(in[0], in[1], in[2], in[3], (cnn_reduction)((ctx_t *)c)->red);
}

static void test_linear_dropout(void) {
  cnn_tensor *in[3] = {gc_leaf(2, SH(4, 3), -1, 1, 140), gc_leaf(2, SH(5, 3), -1, 1, 141),
                       gc_leaf(1, SH(5), -1, 1, 142)};
  gradcheck("linear 4x3, 5x3, 5", f_linear, NULL, 3, in);
  gc_release(3, in);
  cnn_tensor *in3[3] = {gc_leaf(3, SH(2, 3, 4), -1, 1, 143), gc_leaf_t(5, 4, -1, 1, 144), NULL};
  gradcheck("linear 2x3x4, 5x4(T), no bias", f_linear, NULL, 3, in3);
  gc_release(3, in3);
  cnn_tensor *d[1] = {gc_leaf(2, SH(6, 7), -1, 1, 145)};
  gradcheck("dropout p=0.4 6x7", f_dropout, NULL, 1, d);
  gc_release(1, d);
}

static void test_class_losses(void) {
  int64_t tv[5] = {2, 0, 3, 3, 1};
  for (int red = 0; red < 3; red++)
    for (int variant = 0; variant < 4; variant++) {
      /* variant: 0 plain, 1 weights, 2 weights + smoothing + ignore, 3 smoothing */
      ctx_t c = {
          .red = red, .smoothing = variant >= 2 ? 0.2 : 0, .ignore = variant == 2 ? 3 : -100};
      cnn_tensor *in[3] = {gc_leaf(2, SH(5, 4), -2, 2, 150 + variant), int_tensor(1, SH(5), tv),
                           variant == 1 || variant == 2 ? gc_leaf(1, SH(4), 0.5, 2, 160) : NULL};
      if (in[2]) cnn_set_requires_grad(in[2], false);
      char what[80];
      snprintf(what, sizeof what, "cross_entropy red %d variant %d 5x4", red, variant);
      gradcheck(what, f_ce, &c, 3, in);
      snprintf(what, sizeof what, "nll_loss red %d variant %d 5x4", red, variant);
      if (variant != 3) gradcheck(what, f_nll, &c, 3, in);
      gc_release(3, in);
    }
  ctx_t c = {.red = CNN_REDUCTION_MEAN, .ignore = -1};
  cnn_tensor *in[3] = {gc_leaf(1, SH(6), -2, 2, 170), int_tensor(0, NULL, (int64_t[]){4}), NULL};
  gradcheck("cross_entropy 1-D input, 0-d target", f_ce, &c, 3, in);
  gc_release(3, in);
  for (int red = 0; red < 3; red++) {
    c = (ctx_t){.red = red, .smoothing = 0.1, .ignore = 1};
    cnn_tensor *sp[3] = {gc_leaf(4, SH(2, 3, 2, 2), -2, 2, 171),
                         int_tensor(3, SH(2, 2, 2), (int64_t[]){0, 2, 1, 1, 2, 0, 0, 1}), NULL};
    gradcheck("cross_entropy 2x3x2x2 (spatial)", f_ce, &c, 3, sp);
    gradcheck("nll_loss 2x3x2x2 (spatial)", f_nll, &c, 3, sp);
    gc_release(3, sp);
  }
}

static void test_regression_losses(void) {
  for (int red = 0; red < 3; red++) {
    ctx_t c = {.red = red};
    cnn_tensor *m[2] = {gc_leaf(2, SH(3, 4), -1, 1, 180), gc_leaf(1, SH(4), -1, 1, 181)};
    gradcheck("mse_loss 3x4 vs 4 (broadcast)", f_mse, &c, 2, m);
    gc_release(2, m);
    cnn_tensor *b[3] = {gc_leaf(2, SH(3, 4), -3, 3, 182), gc_leaf(2, SH(3, 4), 0, 1, 183),
                        gc_leaf(1, SH(4), 0.5, 3, 184)};
    gradcheck("bce_with_logits 3x4, pos_weight 4", f_bce, &c, 3, b);
    gc_release(3, b);
    cnn_tensor *b2[3] = {gc_leaf_t(3, 4, -3, 3, 185), gc_leaf(2, SH(3, 4), 0, 1, 186), NULL};
    gradcheck("bce_with_logits 3x4(T)", f_bce, &c, 3, b2);
    gc_release(3, b2);
    cnn_tensor *b3[4] = {gc_leaf(2, SH(3, 4), -3, 3, 187), gc_leaf(2, SH(3, 4), 0, 1, 188),
                         gc_leaf(1, SH(4), 0.5, 3, 189), gc_leaf(2, SH(3, 1), -2, 2, 190)};
    gradcheck("bce_with_logits 3x4, pos_weight 4, weight 3x1", f_bce_weight, &c, 4, b3);
    gc_release(4, b3);
  }
}

/* float32 leaves get float32 gradients (cast back from a float64 product),
 * broadcast gradients are reduced to the leaf's shape, and y = (w*w).sum()
 * gives 2w (TOUR.md) */
static void test_dtypes_and_shapes(void) {
  cnn_tensor *a = cnn_full(2, SH(2, 3), 1.5, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *b = cnn_full(1, SH(3), 2.0, CNN_FLOAT64, CNN_DEVICE_CPU);
  cnn_set_requires_grad(a, true), cnn_set_requires_grad(b, true);
  cnn_tensor *y = cnn_binary(CNN_OP_MUL, a, b);
  cnn_tensor *s = cnn_reduce(CNN_RED_SUM, y, 0, false, 0);
  CHECK(y->dtype == CNN_FLOAT64 && strcmp(cnn_grad_fn_name(y), "MulBackward") == 0);
  CHECK(cnn_backward(s, NULL, false) == 0);
  CHECK(a->grad && a->grad->dtype == CNN_FLOAT32 && cnn_same_shape(a->grad, a) &&
        cnn_tensor_get(a->grad, 4) == 2.0);
  CHECK(b->grad && b->grad->ndim == 1 && b->grad->shape[0] == 3 &&
        cnn_tensor_get(b->grad, 1) == 3.0);
  cnn_tensor *w = gc_leaf(2, SH(3, 3), -1, 1, 200);
  cnn_tensor *ww = cnn_binary(CNN_OP_MUL, w, w), *l = cnn_reduce(CNN_RED_SUM, ww, 0, false, 0);
  CHECK(cnn_backward(l, NULL, false) == 0);
  for (int i = 0; i < 9; i++) CHECK(cnn_tensor_get(w->grad, i) == 2 * cnn_tensor_get(w, i));
  /* comparisons and argmax record nothing */
  cnn_tensor *m = cnn_binary(CNN_OP_GT, w, w), *am = cnn_reduce(CNN_RED_ARGMAX, w, 1, false, 0);
  CHECK(!m->requires_grad && !am->requires_grad);
  cnn_tensor_release(m), cnn_tensor_release(am), cnn_tensor_release(ww), cnn_tensor_release(l),
      cnn_tensor_release(w);
  cnn_tensor_release(y), cnn_tensor_release(s), cnn_tensor_release(a), cnn_tensor_release(b);
}

int main(void) {
  test_dtypes_and_shapes();
  test_binary();
  test_add_relu_both_signs();
  test_unary();
  test_where();
  test_reduce();
  test_matmul();
  test_join();
  test_linear_dropout();
  test_class_losses();
  test_regression_losses();
  return check_report("test_gradcheck_ops");
}
