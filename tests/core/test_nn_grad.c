/*
 * test_nn_grad.c -- finite-difference gradient checks (float64) of the
 * tensor-level NN ops of core/ops/nn_*.c through the autograd engine:
 * conv2d (stride, asymmetric padding, dilation, groups; every algorithm),
 * max/avg/adaptive pooling, batch_norm in training and evaluation,
 * softmax and log_softmax.  The scalar checked is L = sum(y * r) for a
 * fixed random r, so dL/dy = r is fed to backward directly.
 */
#include "check.h"
#include "cnn.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef cnn_tensor *(*op_fn)(cnn_tensor **in, void *ctx);

static double weighted_sum(cnn_tensor *y, cnn_tensor *r) {
  double s = 0;
  int64_t n = cnn_tensor_numel(y);
  for (int64_t i = 0; i < n; i++) s += cnn_tensor_get(y, i) * cnn_tensor_get(r, i);
  return s;
}

static double loss_at(op_fn f, cnn_tensor **in, void *ctx, cnn_tensor *r) {
  bool was = cnn_set_grad_enabled(false);
  cnn_tensor *y = f(in, ctx);
  cnn_set_grad_enabled(was);
  double l = y ? weighted_sum(y, r) : NAN;
  cnn_tensor_release(y);
  return l;
}

/* Check d(sum(f(in)*r))/d in[k] for every input k against central differences. */
static void gradcheck(const char *what, op_fn f, cnn_tensor **in, int nin, void *ctx) {
  for (int k = 0; k < nin; k++) {
    if (!in[k]) continue;
    cnn_tensor_release(in[k]->grad), in[k]->grad = NULL;
    cnn_set_requires_grad(in[k], true);
  }
  cnn_tensor *y = f(in, ctx);
  if (!y) {
    fprintf(stderr, "%s: forward failed: %s\n", what, cnn_error());
    check_failures++;
    return;
  }
  cnn_tensor *r = cnn_randn(y->ndim, y->shape, CNN_FLOAT64);
  CHECK(cnn_backward(y, r, false) == 0);
  for (int k = 0; k < nin; k++) {
    if (!in[k]) continue;
    int64_t n = cnn_tensor_numel(in[k]);
    double num[4096], ana[4096];
    const double eps = 1e-6;
    for (int64_t i = 0; i < n && i < 4096; i++) {
      double v = cnn_tensor_get(in[k], i);
      bool was = cnn_set_grad_enabled(false);
      cnn_tensor_set(in[k], i, v + eps);
      double lp = loss_at(f, in, ctx, r);
      cnn_tensor_set(in[k], i, v - eps);
      double lm = loss_at(f, in, ctx, r);
      cnn_tensor_set(in[k], i, v);
      cnn_set_grad_enabled(was);
      num[i] = (lp - lm) / (2 * eps);
      ana[i] = in[k]->grad ? cnn_tensor_get(in[k]->grad, i) : 0;
    }
    char label[160];
    snprintf(label, sizeof label, "%s: gradient of input %d", what, k + 1);
    check_arrays(label, ana, num, n < 4096 ? n : 4096, 1e-6, 1e-5);
  }
  cnn_tensor_release(y), cnn_tensor_release(r);
}

static cnn_tensor *randn64(int nd, const int64_t *shape) {
  return cnn_randn(nd, shape, CNN_FLOAT64);
}

/* ---- conv2d -------------------------------------------------------------------------- */

static cnn_tensor *conv_op(cnn_tensor **in, void *ctx) {
  return cnn_conv2d(in[0], in[1], in[2], ctx);
}

static void check_conv(const char *name, int64_t N, int64_t C, int64_t H, int64_t W, int64_t K,
                       int R, int S, cnn_conv_params p) {
  static const char *algo_names[] = {"auto", "onednn", "im2col", "naive"};
  for (int algo = CNN_CONV_AUTO; algo <= CNN_CONV_NAIVE; algo++) {
    cnn_set_conv_algo((cnn_conv_algo)algo);
    cnn_tensor *in[3] = {randn64(4, (int64_t[]){N, C, H, W}),
                         randn64(4, (int64_t[]){K, C / p.groups, R, S}), randn64(1, &K)};
    char what[128];
    snprintf(what, sizeof what, "conv2d %s (%s)", name, algo_names[algo]);
    gradcheck(what, conv_op, in, 3, &p);
    for (int k = 0; k < 3; k++) cnn_tensor_release(in[k]);
  }
  cnn_set_conv_algo(CNN_CONV_AUTO);
}

static void test_conv(void) {
  check_conv("3x3 pad 1", 2, 3, 5, 4, 2, 3, 3, (cnn_conv_params){{1, 1}, {1, 1, 1, 1}, {1, 1}, 1});
  check_conv("stride 2, pad (1,0,2,1), dilation 2", 2, 3, 7, 5, 4, 3, 2,
             (cnn_conv_params){{2, 2}, {1, 0, 2, 1}, {2, 2}, 1});
  check_conv("groups 3", 1, 3, 5, 5, 6, 3, 3, (cnn_conv_params){{1, 2}, {1, 1, 0, 0}, {1, 1}, 3});
}

static void test_conv_errors(void) {
  cnn_tensor *x = randn64(4, (int64_t[]){8, 3, 32, 32}), *w = randn64(4, (int64_t[]){16, 4, 3, 3});
  cnn_conv_params p = {{1, 1}, {0, 0, 0, 0}, {1, 1}, 1};
  CHECK(cnn_conv2d(x, w, NULL, &p) == NULL);
  CHECK(strstr(cnn_error(), "conv2d: input 8x3x32x32 has 3 channels, weight 16x4x3x3 expects 4"));
  cnn_tensor *w2 = randn64(4, (int64_t[]){16, 3, 33, 3});
  CHECK(cnn_conv2d(x, w2, NULL, &p) == NULL && strstr(cnn_error(), "too small"));
  cnn_tensor *x3 = randn64(3, (int64_t[]){3, 32, 32});
  CHECK(cnn_conv2d(x3, w2, NULL, &p) == NULL && strstr(cnn_error(), "4-d input"));
  cnn_tensor_release(x), cnn_tensor_release(w), cnn_tensor_release(w2), cnn_tensor_release(x3);
}

/* ---- pooling ------------------------------------------------------------------------------ */

static cnn_tensor *max_pool_op(cnn_tensor **in, void *ctx) {
  return cnn_max_pool2d(in[0], ctx, NULL);
}
static cnn_tensor *avg_pool_op(cnn_tensor **in, void *ctx) { return cnn_avg_pool2d(in[0], ctx); }
static cnn_tensor *adaptive_op(cnn_tensor **in, void *ctx) {
  const int64_t *o = ctx;
  return cnn_adaptive_avg_pool2d(in[0], o[0], o[1]);
}

static void test_pool(void) {
  cnn_pool_params p = {{3, 2}, {2, 2}, {1, 1}, true, true, {1, 1}};
  cnn_tensor *x = randn64(4, (int64_t[]){2, 3, 7, 5});
  gradcheck("max_pool2d 3x2 stride 2 pad 1 ceil", max_pool_op, &x, 1, &p);
  cnn_pool_params pd = {{3, 2}, {1, 2}, {1, 1}, true, true, {2, 3}};
  gradcheck("max_pool2d 3x2 stride (1,2) pad 1 dilation (2,3) ceil", max_pool_op, &x, 1, &pd);
  gradcheck("avg_pool2d 3x2 stride 2 pad 1 ceil", avg_pool_op, &x, 1, &p);
  p.count_include_pad = false;
  gradcheck("avg_pool2d without pad count", avg_pool_op, &x, 1, &p);
  int64_t out[2] = {3, 2};
  gradcheck("adaptive_avg_pool2d 3x2", adaptive_op, &x, 1, out);
  cnn_tensor *idx = NULL;
  cnn_pool_params q = {{2, 2}, {2, 2}, {0, 0}, false, true, {1, 1}};
  cnn_tensor *y = cnn_max_pool2d(x, &q, &idx);
  CHECK(y && idx && y->shape[2] == 3 && y->shape[3] == 2 && idx->dtype == CNN_INT64);
  /* the index points at the maximum of its window */
  for (int64_t i = 0; y && i < cnn_tensor_numel(y); i++) {
    int64_t plane = i / 6, flat = (int64_t)cnn_tensor_get(idx, i);
    CHECK(cnn_tensor_get(x, plane * 35 + flat) == cnn_tensor_get(y, i));
  }
  cnn_tensor_release(y), cnn_tensor_release(idx), cnn_tensor_release(x);
}

/* ---- batch norm and softmax ------------------------------------------------------------------ */

typedef struct {
  cnn_tensor *rm, *rv;
  bool training;
} bn_ctx;

static cnn_tensor *bn_op(cnn_tensor **in, void *ctx) {
  bn_ctx *c = ctx;
  /* training updates the running stats: give each evaluation fresh copies */
  cnn_tensor *rm = cnn_clone(c->rm), *rv = cnn_clone(c->rv);
  cnn_tensor *y = cnn_batch_norm(in[0], rm, rv, in[1], in[2], c->training, 0.1, 1e-5);
  cnn_tensor_release(rm), cnn_tensor_release(rv);
  return y;
}

static void test_batch_norm(void) {
  int64_t C = 3;
  bn_ctx c = {cnn_zeros(1, &C, CNN_FLOAT64, CNN_DEVICE_CPU),
              cnn_full(1, &C, 1, CNN_FLOAT64, CNN_DEVICE_CPU), true};
  cnn_tensor_set(c.rm, 1, 0.5), cnn_tensor_set(c.rv, 2, 2.0);
  cnn_tensor *in[3] = {randn64(4, (int64_t[]){2, 3, 3, 2}), randn64(1, &C), randn64(1, &C)};
  gradcheck("batch_norm training 2x3x3x2", bn_op, in, 3, &c);
  c.training = false;
  gradcheck("batch_norm eval 2x3x3x2", bn_op, in, 3, &c);
  cnn_tensor *x2 = randn64(2, (int64_t[]){5, 3});
  cnn_tensor *in2[3] = {x2, in[1], in[2]};
  c.training = true;
  gradcheck("batch_norm training 5x3", bn_op, in2, 3, &c);
  /* running statistics: momentum 0.1, unbiased variance */
  cnn_tensor *rm = cnn_zeros(1, &C, CNN_FLOAT64, CNN_DEVICE_CPU),
             *rv = cnn_full(1, &C, 1, CNN_FLOAT64, CNN_DEVICE_CPU);
  cnn_tensor *y = cnn_batch_norm(x2, rm, rv, NULL, NULL, true, 0.1, 1e-5);
  double mean = 0, var = 0;
  for (int i = 0; i < 5; i++) mean += cnn_tensor_get(x2, i * 3) / 5;
  for (int i = 0; i < 5; i++) var += pow(cnn_tensor_get(x2, i * 3) - mean, 2) / 4;
  CHECK_CLOSE(cnn_tensor_get(rm, 0), 0.1 * mean, 1e-12);
  CHECK_CLOSE(cnn_tensor_get(rv, 0), 0.9 + 0.1 * var, 1e-12);
  cnn_tensor *one = randn64(2, (int64_t[]){1, 3});
  CHECK(cnn_batch_norm(one, rm, rv, NULL, NULL, true, 0.1, 1e-5) == NULL);
  CHECK(strstr(cnn_error(), "more than 1 value per channel"));
  cnn_tensor *release[] = {c.rm, c.rv, in[0], in[1], in[2], x2, rm, rv, y, one};
  for (size_t i = 0; i < sizeof release / sizeof *release; i++) cnn_tensor_release(release[i]);
}

static cnn_tensor *softmax_op(cnn_tensor **in, void *ctx) {
  return cnn_softmax(in[0], *(int *)ctx);
}
static cnn_tensor *log_softmax_op(cnn_tensor **in, void *ctx) {
  return cnn_log_softmax(in[0], *(int *)ctx);
}

static void test_softmax(void) {
  cnn_tensor *x = randn64(3, (int64_t[]){2, 5, 3});
  for (int dim = 0; dim < 3; dim++) {
    char what[64];
    snprintf(what, sizeof what, "softmax dim %d", dim + 1);
    gradcheck(what, softmax_op, &x, 1, &dim);
    snprintf(what, sizeof what, "log_softmax dim %d", dim + 1);
    gradcheck(what, log_softmax_op, &x, 1, &dim);
  }
  /* known values: softmax(0, ln 2, ln 3) = (1/6, 2/6, 3/6); large inputs stay finite */
  cnn_tensor *v = cnn_from_buffer(1, (int64_t[]){3}, CNN_FLOAT64,
                                  (double[]){1000, 1000 + log(2), 1000 + log(3)});
  cnn_tensor *s = cnn_softmax(v, 0), *ls = cnn_log_softmax(v, 0);
  CHECK_CLOSE(cnn_tensor_get(s, 0), 1.0 / 6, 1e-12);
  CHECK_CLOSE(cnn_tensor_get(s, 2), 0.5, 1e-12);
  CHECK_CLOSE(cnn_tensor_get(ls, 1), log(2.0 / 6), 1e-12);
  cnn_tensor_release(x), cnn_tensor_release(v), cnn_tensor_release(s), cnn_tensor_release(ls);
}

int main(void) {
  cnn_manual_seed(7);
  test_conv();
  test_conv_errors();
  test_pool();
  test_batch_norm();
  test_softmax();
  return check_report("test_nn_grad");
}
