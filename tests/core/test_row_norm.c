/*
 * test_row_norm.c -- layer_norm, group_norm and instance_norm
 * (core/ops/nn_row_norm.c, core/cpu/norm_rows.c).
 *
 * Evidence, none comparing a path with itself:
 *  - forward against a naive oracle written here another way: for each
 *    sample and group, the mean and biased variance by plain loops over
 *    the 4-d indices (n, c, h, w), then the affine map by the channel (or
 *    the trailing index for layer norm); float64 and float32;
 *  - a hand case: layer norm of {1, 2, 3, 4} is (x - 2.5) / sqrt(1.25 + eps);
 *  - backward by central finite differences in float64 for x, weight and
 *    bias (gradcheck.h), with non-contiguous x, no weight, weight without
 *    bias, 1 group, C groups, several trailing dims;
 *  - instance norm's running statistics against the mean over the batch of
 *    the per-instance mean and unbiased variance; its eval mode against
 *    the oracle normalising with the running statistics;
 *  - bad input names the op and the shapes; empty input gives zero grads.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cnn.h"
#include "gradcheck.h"

#define EPS 1e-5

/* ---- the oracle ---------------------------------------------------------------------- */

/* x N x C x S (S = positions per channel, flattened); groups of C/G
 * channels; param_of_channel: weight/bias indexed by channel (group/instance
 * norm) or, for layer norm (G = 1 and by_position), by c*S + s */
static void oracle(const cnn_tensor *x, int64_t G, const cnn_tensor *w, const cnn_tensor *b,
                   bool by_position, double *y) {
  int64_t N = x->shape[0], C = x->shape[1], S = cnn_tensor_numel(x) / (N * C), Cg = C / G;
  for (int64_t n = 0; n < N; n++)
    for (int64_t g = 0; g < G; g++) {
      double sum = 0, sq = 0, cnt = (double)(Cg * S);
      for (int64_t c = g * Cg; c < (g + 1) * Cg; c++)
        for (int64_t s = 0; s < S; s++) sum += cnn_tensor_get(x, (n * C + c) * S + s);
      double mean = sum / cnt;
      for (int64_t c = g * Cg; c < (g + 1) * Cg; c++)
        for (int64_t s = 0; s < S; s++) sq += pow(cnn_tensor_get(x, (n * C + c) * S + s) - mean, 2);
      double var = sq / cnt;
      for (int64_t c = g * Cg; c < (g + 1) * Cg; c++)
        for (int64_t s = 0; s < S; s++) {
          int64_t i = (n * C + c) * S + s, k = by_position ? c * S + s : c;
          double v = (cnn_tensor_get(x, i) - mean) / sqrt(var + EPS);
          y[i] = v * (w ? cnn_tensor_get(w, k) : 1) + (b ? cnn_tensor_get(b, k) : 0);
        }
    }
}

static double *values(cnn_tensor *t) {
  int64_t n = cnn_tensor_numel(t);
  double *v = malloc(sizeof *v * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) v[i] = cnn_tensor_get(t, i);
  return v;
}

static cnn_tensor *leaf(int nd, const int64_t *shape, int seed, cnn_dtype dt) {
  cnn_tensor *t = gc_leaf(nd, shape, -2, 3, seed), *c = cnn_to_dtype(t, dt);
  cnn_tensor_release(t);
  cnn_set_requires_grad(c, true);
  return c;
}

static void compare(const char *what, cnn_tensor *y, const double *ref, double tol) {
  CHECK(y != NULL);
  if (!y) {
    fprintf(stderr, "%s: %s\n", what, cnn_error());
    return;
  }
  double *got = values(y);
  check_arrays(what, got, ref, cnn_tensor_numel(y), tol, tol);
  free(got);
}

/* ---- forward ---------------------------------------------------------------------------- */

static void test_hand(void) {
  cnn_tensor *x = cnn_empty(2, (int64_t[]){1, 4}, CNN_FLOAT64, CNN_DEVICE_CPU);
  for (int i = 0; i < 4; i++) cnn_tensor_set(x, i, i + 1);
  cnn_tensor *y = cnn_layer_norm(x, 1, (int64_t[]){4}, NULL, NULL, EPS);
  for (int i = 0; i < 4; i++)
    CHECK_CLOSE(cnn_tensor_get(y, i), (i + 1 - 2.5) / sqrt(1.25 + EPS), 1e-12);
  cnn_tensor_release(x), cnn_tensor_release(y);
}

static void test_forward(cnn_dtype dt, double tol) {
  const int64_t xs[4] = {3, 6, 5, 7};
  cnn_tensor *x = leaf(4, xs, 1, dt), *w6 = leaf(1, (int64_t[]){6}, 2, dt),
             *b6 = leaf(1, (int64_t[]){6}, 3, dt);
  double *ref = malloc(sizeof *ref * 3 * 6 * 5 * 7);
  char what[96];
  int64_t groups[] = {1, 2, 3, 6};
  for (int i = 0; i < 4; i++) {
    oracle(x, groups[i], w6, b6, false, ref);
    snprintf(what, sizeof what, "group_norm %s G=%lld", cnn_dtype_name(dt), (long long)groups[i]);
    cnn_tensor *y = cnn_group_norm(x, groups[i], w6, b6, EPS);
    compare(what, y, ref, tol);
    cnn_tensor_release(y);
  }
  oracle(x, 6, w6, b6, false, ref);
  cnn_tensor *y = cnn_instance_norm(x, NULL, NULL, w6, b6, true, 0.1, EPS);
  compare("instance_norm", y, ref, tol);
  cnn_tensor_release(y);
  /* layer norm over the last 3 dims: N x (6*5*7) rows, a parameter per position */
  cnn_tensor *w3 = leaf(3, xs + 1, 4, dt), *b3 = leaf(3, xs + 1, 5, dt);
  oracle(x, 1, w3, b3, true, ref);
  y = cnn_layer_norm(x, 3, xs + 1, w3, b3, EPS);
  compare("layer_norm over 6x5x7", y, ref, tol);
  cnn_tensor_release(y);
  cnn_tensor_release(x), cnn_tensor_release(w6), cnn_tensor_release(b6), cnn_tensor_release(w3),
      cnn_tensor_release(b3);
  free(ref);
}

/* layer norm over the last dim of a 2-d view: the oracle's N x C x 1 */
static void test_layer_norm_rows(void) {
  cnn_tensor *x = leaf(3, (int64_t[]){4, 5, 70}, 6, CNN_FLOAT32),
             *w = leaf(1, (int64_t[]){70}, 7, CNN_FLOAT32);
  cnn_tensor *v = cnn_view(x, 2, (int64_t[]){20, 70}), *v3 = cnn_view(x, 3, (int64_t[]){20, 70, 1});
  double *ref = malloc(sizeof *ref * 20 * 70);
  oracle(v3, 1, w, NULL, false, ref); /* channel c = position along the row */
  cnn_tensor *y = cnn_layer_norm(x, 1, (int64_t[]){70}, w, NULL, EPS);
  compare("layer_norm last dim, weight only (float32)", y, ref, 1e-5);
  cnn_tensor_release(y), cnn_tensor_release(v), cnn_tensor_release(v3), cnn_tensor_release(x),
      cnn_tensor_release(w);
  free(ref);
}

/* ---- backward by finite differences ------------------------------------------------------ */

typedef struct {
  int op; /* 0 layer, 1 group, 2 instance */
  int k;
  int64_t nshape[4], groups;
} norm_ctx;

static cnn_tensor *run(cnn_tensor **in, void *p) {
  norm_ctx *c = p;
  if (c->op == 0) return cnn_layer_norm(in[0], c->k, c->nshape, in[1], in[2], EPS);
  if (c->op == 1) return cnn_group_norm(in[0], c->groups, in[1], in[2], EPS);
  return cnn_instance_norm(in[0], NULL, NULL, in[1], in[2], true, 0.1, EPS);
}

static void grad_case(const char *what, norm_ctx *c, cnn_tensor *x, int pdim, const int64_t *pshape,
                      bool w, bool b) {
  cnn_tensor *in[3] = {x, w ? gc_leaf(pdim, pshape, 0.5, 1.5, 11) : NULL,
                       b ? gc_leaf(pdim, pshape, -1, 1, 12) : NULL};
  gradcheck_tol(what, run, c, 3, in, 1e-6, 1e-5);
  for (int i = 0; i < 3; i++) cnn_tensor_release(in[i]);
}

static void test_grads(void) {
  const int64_t xs[4] = {2, 6, 3, 4};
  norm_ctx ln = {0, 2, {3, 4}, 0}, ln1 = {0, 1, {4}, 0}, gn = {1, 0, {0}, 3}, gn1 = {1, 0, {0}, 1},
           in = {2, 0, {0}, 0};
  grad_case("layer_norm over 3x4", &ln, gc_leaf(4, xs, -1, 2, 1), 2, (int64_t[]){3, 4}, true, true);
  grad_case("layer_norm last dim, weight only", &ln1, gc_leaf(4, xs, -1, 2, 2), 1, (int64_t[]){4},
            true, false);
  grad_case("layer_norm no affine", &ln1, gc_leaf(4, xs, -1, 2, 3), 1, (int64_t[]){4}, false,
            false);
  grad_case("group_norm G=3", &gn, gc_leaf(4, xs, -1, 2, 4), 1, (int64_t[]){6}, true, true);
  grad_case("group_norm G=1, bias only", &gn1, gc_leaf(4, xs, -1, 2, 5), 1, (int64_t[]){6}, false,
            true);
  grad_case("group_norm 2-d input (N x C)", &gn, gc_leaf(2, (int64_t[]){4, 6}, -1, 2, 6), 1,
            (int64_t[]){6}, true, true);
  grad_case("instance_norm", &in, gc_leaf(4, xs, -1, 2, 7), 1, (int64_t[]){6}, true, true);
  /* a non-contiguous x: the transpose of a 4 x 5 leaf, normalised over its rows of 4 */
  grad_case("layer_norm transposed input", &ln1, gc_leaf_t(5, 4, -1, 2, 8), 1, (int64_t[]){4}, true,
            true);
}

/* ---- instance norm's running statistics ------------------------------------------------------ */

static void test_running_stats(void) {
  const int64_t xs[4] = {3, 2, 4, 5};
  cnn_tensor *x = leaf(4, xs, 9, CNN_FLOAT64);
  cnn_tensor *rm = cnn_zeros(1, (int64_t[]){2}, CNN_FLOAT64, CNN_DEVICE_CPU);
  cnn_tensor *rv = cnn_full(1, (int64_t[]){2}, 1, CNN_FLOAT64, CNN_DEVICE_CPU);
  cnn_tensor *y = cnn_instance_norm(x, rm, rv, NULL, NULL, true, 0.25, EPS);
  CHECK(y != NULL);
  for (int c = 0; c < 2; c++) {
    double bm = 0, bv = 0;
    for (int n = 0; n < 3; n++) {
      double s = 0, q = 0;
      for (int i = 0; i < 20; i++) s += cnn_tensor_get(x, (n * 2 + c) * 20 + i);
      for (int i = 0; i < 20; i++) q += pow(cnn_tensor_get(x, (n * 2 + c) * 20 + i) - s / 20, 2);
      bm += s / 20 / 3, bv += q / 19 / 3;
    }
    CHECK_CLOSE(cnn_tensor_get(rm, c), 0.25 * bm, 1e-12);
    CHECK_CLOSE(cnn_tensor_get(rv, c), 0.75 + 0.25 * bv, 1e-12);
  }
  /* eval: normalise with the running statistics */
  cnn_tensor *ye = cnn_instance_norm(x, rm, rv, NULL, NULL, false, 0.1, EPS);
  CHECK(ye != NULL);
  for (int64_t i = 0; ye && i < cnn_tensor_numel(x); i++) {
    int64_t c = i / 20 % 2;
    double want =
        (cnn_tensor_get(x, i) - cnn_tensor_get(rm, c)) / sqrt(cnn_tensor_get(rv, c) + EPS);
    if (fabs(cnn_tensor_get(ye, i) - want) > 1e-12) {
      CHECK_CLOSE(cnn_tensor_get(ye, i), want, 1e-12);
      break;
    }
  }
  cnn_tensor_release(x), cnn_tensor_release(rm), cnn_tensor_release(rv), cnn_tensor_release(y),
      cnn_tensor_release(ye);
}

/* ---- bad input and edges ------------------------------------------------------------------ */

static void expect_error(const char *what, cnn_tensor *y, const char *needle) {
  CHECK(y == NULL);
  if (y) {
    cnn_tensor_release(y);
    return;
  }
  if (!strstr(cnn_error(), needle)) {
    fprintf(stderr, "%s: message \"%s\" lacks \"%s\"\n", what, cnn_error(), needle);
    check_failures++;
  }
}

static void test_errors(void) {
  cnn_tensor *x = cnn_zeros(4, (int64_t[]){2, 6, 3, 4}, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *w5 = cnn_full(1, (int64_t[]){5}, 1, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *xi = cnn_zeros(2, (int64_t[]){2, 3}, CNN_INT64, CNN_DEVICE_CPU);
  expect_error("ln shape", cnn_layer_norm(x, 1, (int64_t[]){5}, NULL, NULL, EPS), "2x6x3x4");
  expect_error("ln weight", cnn_layer_norm(x, 1, (int64_t[]){4}, w5, NULL, EPS), "weight 5");
  expect_error("gn groups", cnn_group_norm(x, 4, NULL, NULL, EPS), "divisible by num_groups");
  expect_error("gn weight", cnn_group_norm(x, 2, w5, NULL, EPS), "group_norm: weight 5");
  expect_error("gn dtype", cnn_group_norm(xi, 1, NULL, NULL, EPS), "int64");
  expect_error("in dims", cnn_instance_norm(xi, NULL, NULL, NULL, NULL, true, 0.1, EPS),
               "instance_norm");
  expect_error("in eval", cnn_instance_norm(x, NULL, NULL, NULL, NULL, false, 0.1, EPS),
               "running_mean");
  expect_error("eps", cnn_layer_norm(x, 1, (int64_t[]){4}, NULL, NULL, -1), "eps");
  cnn_tensor *x1 = cnn_zeros(3, (int64_t[]){2, 6, 1}, CNN_FLOAT32, CNN_DEVICE_CPU);
  expect_error("in 1 position", cnn_instance_norm(x1, NULL, NULL, NULL, NULL, true, 0.1, EPS),
               "spatial");
  cnn_tensor_release(x), cnn_tensor_release(w5), cnn_tensor_release(xi), cnn_tensor_release(x1);
}

/* N = 0: an empty output, and zero gradients for weight and bias */
static void test_empty(void) {
  cnn_tensor *x = gc_leaf(4, (int64_t[]){0, 6, 3, 4}, 0, 1, 1),
             *w = gc_leaf(1, (int64_t[]){6}, 0, 1, 2);
  cnn_tensor *y = cnn_group_norm(x, 3, w, NULL, EPS);
  CHECK(y && cnn_tensor_numel(y) == 0);
  cnn_tensor *s = y ? cnn_reduce(CNN_RED_SUM, y, 0, false, 0) : NULL;
  CHECK(s && cnn_backward(s, NULL, false) == 0);
  CHECK(w->grad && cnn_tensor_get(w->grad, 0) == 0 && cnn_tensor_get(w->grad, 5) == 0);
  cnn_tensor_release(s), cnn_tensor_release(y), cnn_tensor_release(x), cnn_tensor_release(w);
}

int main(void) {
  test_hand();
  test_forward(CNN_FLOAT64, 1e-10);
  test_forward(CNN_FLOAT32, 2e-5);
  test_layer_norm_rows();
  test_grads();
  test_running_stats();
  test_errors();
  test_empty();
  return check_report("test_row_norm");
}
