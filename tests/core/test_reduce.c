/*
 * test_reduce.c -- reductions against naive loops: every dimension mask of
 * a 3x4x5 tensor (contiguous and permuted views), keepdim shapes, the
 * leading-dims path, max/min with indices, argmax over all dims, var/std
 * with corrections, norms, integer dtypes, NaN propagation, sum_to, and
 * the error messages.
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "cnn.h"

#define SH(...) ((int64_t[]){__VA_ARGS__})

static cnn_tensor *values(int nd, const int64_t *shape, cnn_dtype dt) {
  cnn_tensor *t = cnn_empty(nd, shape, dt, CNN_DEVICE_CPU);
  for (int64_t i = 0; i < cnn_tensor_numel(t); i++)
    cnn_tensor_set(t, i,
                   dt == CNN_UINT8 ? (double)((i * 37) % 11) : sin(1.3 * (double)i + 0.2) * 3);
  return t;
}

/* naive reduction of x (3-D) over mask: result in row-major order of kept dims */
static void naive(cnn_reduce_op op, const cnn_tensor *x, uint32_t mask, double p, double *out) {
  int64_t S[3] = {x->shape[0], x->shape[1], x->shape[2]}, R = 1;
  for (int d = 0; d < 3; d++)
    if ((mask >> d) & 1) R *= S[d];
  int64_t K[3];
  for (int d = 0; d < 3; d++) K[d] = (mask >> d) & 1 ? 1 : S[d];
  for (int64_t o = 0; o < K[0] * K[1] * K[2]; o++) {
    int64_t o0 = o / (K[1] * K[2]), o1 = (o / K[2]) % K[1], o2 = o % K[2];
    double sum = 0, sq = 0, mx = -INFINITY, mn = INFINITY, prod = 1, np = 0;
    int64_t amax = -1, amin = -1, r = 0;
    for (int64_t i = 0; i < S[0]; i++)
      for (int64_t j = 0; j < S[1]; j++)
        for (int64_t k = 0; k < S[2]; k++) {
          if (((mask & 1) ? 0 : i != o0) || ((mask & 2) ? 0 : j != o1) ||
              ((mask & 4) ? 0 : k != o2))
            continue;
          double v = cnn_tensor_get(x, (i * S[1] + j) * S[2] + k);
          sum += v, sq += v * v, prod *= v;
          np += p == 2 ? v * v : pow(fabs(v), p);
          if (v > mx) mx = v, amax = r;
          if (v < mn) mn = v, amin = r;
          r++;
        }
    double mean = sum / (double)R;
    switch (op) {
    case CNN_RED_SUM: out[o] = sum; break;
    case CNN_RED_MEAN: out[o] = mean; break;
    case CNN_RED_MAX: out[o] = mx; break;
    case CNN_RED_MIN: out[o] = mn; break;
    case CNN_RED_PROD: out[o] = prod; break;
    case CNN_RED_VAR: out[o] = (sq - R * mean * mean) / (R - p); break;
    case CNN_RED_STD: out[o] = sqrt((sq - R * mean * mean) / (R - p)); break;
    case CNN_RED_NORM: out[o] = pow(np, 1 / p); break;
    case CNN_RED_ARGMAX: out[o] = (double)amax; break;
    default: out[o] = (double)amin; break;
    }
  }
}

static void check_all_masks(cnn_tensor *x, const char *label) {
  cnn_reduce_op ops[] = {CNN_RED_SUM,  CNN_RED_MEAN, CNN_RED_MAX, CNN_RED_MIN,
                         CNN_RED_PROD, CNN_RED_VAR,  CNN_RED_STD, CNN_RED_NORM};
  double ps[] = {0, 0, 0, 0, 0, 1, 0, 3};
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
    for (uint32_t mask = 1; mask < 8; mask++)
      for (int keep = 0; keep < 2; keep++) {
        cnn_tensor *y = cnn_reduce(ops[k], x, mask, keep, ps[k]);
        CHECK(y != NULL);
        if (!y) continue;
        int expect_nd = keep ? 3 : 3 - __builtin_popcount(mask);
        CHECK(y->ndim == expect_nd);
        double got[60], ref[60];
        int64_t n = cnn_tensor_numel(y);
        for (int64_t i = 0; i < n; i++) got[i] = cnn_tensor_get(y, i);
        naive(ops[k], x, mask, ps[k], ref);
        char what[96];
        snprintf(what, sizeof what, "reduce op %d mask %u keepdim %d %s", ops[k], mask, keep,
                 label);
        check_arrays(what, got, ref, n, 1e-5, 1e-5);
        cnn_tensor_release(y);
      }
  for (uint32_t mask = 1; mask < 8; mask <<= 1) { /* argmax/argmin: one dim */
    for (int op = CNN_RED_ARGMAX; op <= CNN_RED_ARGMIN; op++) {
      cnn_tensor *y = cnn_reduce((cnn_reduce_op)op, x, mask, false, 0);
      double got[60], ref[60];
      for (int64_t i = 0; i < cnn_tensor_numel(y); i++) got[i] = cnn_tensor_get(y, i);
      naive((cnn_reduce_op)op, x, mask, 0, ref);
      CHECK(y->dtype == CNN_INT64);
      check_arrays("argmax/argmin one dim", got, ref, cnn_tensor_numel(y), 0, 0);
      cnn_tensor_release(y);
    }
  }
}

static void test_masks(void) {
  cnn_tensor *x = values(3, SH(3, 4, 5), CNN_FLOAT32);
  check_all_masks(x, "3x4x5 f32");
  cnn_tensor *d = values(3, SH(5, 3, 4), CNN_FLOAT64);
  cnn_tensor *p = cnn_permute(d, (int[]){1, 2, 0}); /* 3x4x5 view, non-contiguous */
  check_all_masks(p, "3x4x5 permuted f64");
  /* argmax over everything is the flat row-major index */
  cnn_tensor *am = cnn_reduce(CNN_RED_ARGMAX, p, 0, false, 0);
  double best = -INFINITY;
  int64_t bi = -1;
  for (int64_t i = 0; i < 60; i++)
    if (cnn_tensor_get(p, i) > best) best = cnn_tensor_get(p, i), bi = i;
  CHECK(am->ndim == 0 && cnn_tensor_get(am, 0) == bi);
  cnn_tensor_release(am), cnn_tensor_release(p), cnn_tensor_release(d), cnn_tensor_release(x);
}

static void test_leading_and_big(void) {
  /* sum over dim 0 of a contiguous 700x70 (leading path) vs naive */
  cnn_tensor *x = values(2, SH(700, 70), CNN_FLOAT32);
  cnn_tensor *s = cnn_reduce(CNN_RED_SUM, x, 1, false, 0),
             *m = cnn_reduce(CNN_RED_MEAN, x, 1, true, 0);
  double got[70], ref[70], gm[70], rm[70];
  for (int j = 0; j < 70; j++) {
    ref[j] = 0;
    for (int i = 0; i < 700; i++) ref[j] += (float)cnn_tensor_get(x, i * 70 + j);
    got[j] = cnn_tensor_get(s, j), gm[j] = cnn_tensor_get(m, j), rm[j] = ref[j] / 700;
  }
  check_arrays("sum dim 0 700x70", got, ref, 70, 1e-4, 1e-6);
  check_arrays("mean dim 0 keepdim 700x70", gm, rm, 70, 1e-6, 1e-6);
  CHECK(m->ndim == 2 && m->shape[0] == 1 && m->shape[1] == 70);
  /* sum over dim 1 (rows, parallel path) */
  cnn_tensor *r = cnn_reduce(CNN_RED_SUM, x, 2, false, 0);
  double gr[700], rr[700];
  for (int i = 0; i < 700; i++) {
    rr[i] = 0;
    for (int j = 0; j < 70; j++) rr[i] += (float)cnn_tensor_get(x, i * 70 + j);
    gr[i] = cnn_tensor_get(r, i);
  }
  check_arrays("sum dim 1 700x70", gr, rr, 700, 1e-4, 1e-6);
  /* float32 sums accumulate in double: 1e6 ones + 1e-3 each */
  cnn_tensor *big = cnn_full(1, SH(1000000), 1.001f, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *bs = cnn_reduce(CNN_RED_SUM, big, 0, false, 0);
  CHECK_CLOSE(cnn_tensor_get(bs, 0), 1e6 * (double)1.001f, 0.5);
  cnn_tensor_release(big), cnn_tensor_release(bs);
  cnn_tensor_release(x), cnn_tensor_release(s), cnn_tensor_release(m), cnn_tensor_release(r);
}

static void test_max_dim(void) {
  cnn_tensor *x = cnn_from_buffer(2, SH(2, 3), CNN_FLOAT32, (float[]){1, 5, 5, -2, -7, 0});
  cnn_tensor *v, *i;
  CHECK(cnn_max_dim(x, 1, false, false, &v, &i) == 0);
  CHECK(v->ndim == 1 && cnn_tensor_get(v, 0) == 5 && cnn_tensor_get(i, 0) == 1); /* first of ties */
  CHECK(cnn_tensor_get(v, 1) == 0 && cnn_tensor_get(i, 1) == 2 && i->dtype == CNN_INT64);
  cnn_tensor_release(v), cnn_tensor_release(i);
  CHECK(cnn_max_dim(x, 0, true, true, &v, &i) == 0);
  CHECK(v->ndim == 2 && v->shape[0] == 1 && cnn_tensor_get(v, 1) == -7 &&
        cnn_tensor_get(i, 1) == 1);
  cnn_tensor_release(v), cnn_tensor_release(i);
  /* NaN propagates through max and argmax */
  cnn_tensor_set(x, 4, NAN);
  cnn_tensor *mx = cnn_reduce(CNN_RED_MAX, x, 0, false, 0),
             *am = cnn_reduce(CNN_RED_ARGMAX, x, 2, false, 0);
  CHECK(isnan(cnn_tensor_get(mx, 0)) && cnn_tensor_get(am, 1) == 1);
  cnn_tensor_release(mx), cnn_tensor_release(am);
  CHECK(cnn_max_dim(x, 2, false, false, &v, &i) == -1 &&
        strstr(cnn_error(), "max: dimension 3 out of range for input 2x3"));
  cnn_tensor_release(x);
}

static void test_int_and_special(void) {
  cnn_tensor *u = values(2, SH(3, 4), CNN_UINT8);
  cnn_tensor *s = cnn_reduce(CNN_RED_SUM, u, 0, false, 0),
             *m = cnn_reduce(CNN_RED_MEAN, u, 0, false, 0);
  double ref = 0;
  for (int i = 0; i < 12; i++) ref += (double)((i * 37) % 11);
  CHECK(s->dtype == CNN_INT64 && cnn_tensor_get(s, 0) == ref);
  CHECK(m->dtype == CNN_FLOAT32 && fabs(cnn_tensor_get(m, 0) - ref / 12) < 1e-5);
  cnn_tensor *mx = cnn_reduce(CNN_RED_MAX, u, 2, false, 0);
  CHECK(mx->dtype == CNN_UINT8 && cnn_tensor_get(mx, 0) == 8); /* row 0: 0 4 8 1 */
  cnn_tensor_release(s), cnn_tensor_release(m), cnn_tensor_release(mx), cnn_tensor_release(u);
  /* norms: p = inf, 0, 1, 2 on a known vector */
  cnn_tensor *v = cnn_from_buffer(1, SH(4), CNN_FLOAT64, (double[]){3, -4, 0, 1});
  double ps[] = {INFINITY, 0, 1, 2}, want[] = {4, 3, 8, sqrt(26)};
  for (int k = 0; k < 4; k++) {
    cnn_tensor *n = cnn_reduce(CNN_RED_NORM, v, 0, false, ps[k]);
    CHECK_CLOSE(cnn_tensor_get(n, 0), want[k], 1e-15);
    cnn_tensor_release(n);
  }
  /* var with correction 0 and 1: mean 0, squares 26 */
  cnn_tensor *v0 = cnn_reduce(CNN_RED_VAR, v, 0, false, 0),
             *v1 = cnn_reduce(CNN_RED_STD, v, 0, false, 1);
  CHECK_CLOSE(cnn_tensor_get(v0, 0), 26.0 / 4, 1e-15);
  CHECK_CLOSE(cnn_tensor_get(v1, 0), sqrt(26.0 / 3), 1e-15);
  cnn_tensor_release(v0), cnn_tensor_release(v1), cnn_tensor_release(v);
  /* empty: sum is 0, max is an error */
  cnn_tensor *e = cnn_empty(2, SH(0, 3), CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *es = cnn_reduce(CNN_RED_SUM, e, 1, false, 0);
  CHECK(es && es->shape[0] == 3 && cnn_tensor_get(es, 2) == 0);
  CHECK(cnn_reduce(CNN_RED_MAX, e, 1, false, 0) == NULL && strstr(cnn_error(), "max") &&
        strstr(cnn_error(), "0x3"));
  cnn_tensor_release(es), cnn_tensor_release(e);
}

static void test_sum_to_and_errors(void) {
  cnn_tensor *x = values(3, SH(2, 3, 4), CNN_FLOAT64);
  cnn_tensor *s = cnn_sum_to(x, 2, SH(3, 1));
  CHECK(s && s->ndim == 2 && s->shape[0] == 3 && s->shape[1] == 1);
  for (int j = 0; j < 3; j++) {
    double ref = 0;
    for (int i = 0; i < 2; i++)
      for (int k = 0; k < 4; k++) ref += cnn_tensor_get(x, (i * 3 + j) * 4 + k);
    CHECK_CLOSE(cnn_tensor_get(s, j), ref, 1e-12);
  }
  cnn_tensor *same = cnn_sum_to(x, 3, x->shape);
  CHECK(same == x);
  CHECK(cnn_sum_to(x, 2, SH(2, 4)) == NULL &&
        strstr(cnn_error(), "sum_to: cannot reduce 2x3x4 to 2x4"));
  CHECK(cnn_reduce(CNN_RED_SUM, x, 8, false, 0) == NULL &&
        strstr(cnn_error(), "sum: dimension 4 out of range for input 2x3x4"));
  CHECK(cnn_reduce(CNN_RED_ARGMAX, x, 3, false, 0) == NULL && strstr(cnn_error(), "argmax") &&
        strstr(cnn_error(), "2x3x4"));
  cnn_tensor_release(same), cnn_tensor_release(s), cnn_tensor_release(x);
}

int main(void) {
  test_masks();
  test_leading_and_big();
  test_max_dim();
  test_int_and_special();
  test_sum_to_and_errors();
  return check_report("test_reduce");
}
