/*
 * test_loss.c -- losses, linear and dropout against independent naive
 * formulas and hand-computed values: cross_entropy (weights, label
 * smoothing, ignore_index, reductions), nll_loss, mse_loss,
 * bce_with_logits (pos_weight), linear (2-D and 3-D inputs), dropout
 * (rate, scaling, eval, seed), and the error messages.
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "cnn.h"

#define SH(...) ((int64_t[]){__VA_ARGS__})

static cnn_tensor *values(int nd, const int64_t *shape, cnn_dtype dt, int seed) {
  cnn_tensor *t = cnn_empty(nd, shape, dt, CNN_DEVICE_CPU);
  for (int64_t i = 0; i < cnn_tensor_numel(t); i++)
    cnn_tensor_set(t, i, 2 * sin(1.7 * (double)i + seed));
  return t;
}

/* PyTorch's cross_entropy written out naively (log_softmax, then weights) */
static double naive_ce(const cnn_tensor *x, const int64_t *t, const double *w, int red, double eps,
                       int64_t ignore, double *rows) {
  int64_t N = x->shape[0], C = x->shape[1];
  double total = 0, denom = 0;
  for (int64_t i = 0; i < N; i++) {
    double m = -INFINITY, s = 0, lp[16];
    for (int64_t c = 0; c < C; c++) m = fmax(m, cnn_tensor_get(x, i * C + c));
    for (int64_t c = 0; c < C; c++) s += exp(cnn_tensor_get(x, i * C + c) - m);
    for (int64_t c = 0; c < C; c++) lp[c] = cnn_tensor_get(x, i * C + c) - m - log(s);
    rows[i] = 0;
    if (t[i] == ignore) continue;
    double wt = w ? w[t[i]] : 1, smooth = 0;
    for (int64_t c = 0; c < C; c++) smooth += -(w ? w[c] : 1) * lp[c];
    rows[i] = (1 - eps) * (-wt * lp[t[i]]) + eps / C * smooth;
    total += rows[i], denom += wt;
  }
  return red == CNN_REDUCTION_MEAN ? total / denom : total;
}

static void test_cross_entropy(void) {
  cnn_tensor *x = values(2, SH(6, 5), CNN_FLOAT32, 1);
  int64_t tv[6] = {4, 0, 2, 2, 1, 3};
  cnn_tensor *t = cnn_from_buffer(1, SH(6), CNN_INT64, tv);
  double wv[5] = {0.5, 1, 2, 1.5, 0.25};
  cnn_tensor *w = cnn_from_buffer(1, SH(5), CNN_FLOAT64, wv);
  for (int red = 0; red < 3; red++)
    for (int variant = 0; variant < 4; variant++) {
      bool use_w = variant & 1;
      double eps = variant & 2 ? 0.1 : 0;
      int64_t ignore = variant == 3 ? 2 : -100;
      cnn_tensor *y = cnn_cross_entropy(x, t, use_w ? w : NULL, (cnn_reduction)red, eps, ignore);
      double rows[6], ref = naive_ce(x, tv, use_w ? wv : NULL, red, eps, ignore, rows);
      CHECK(y && y->dtype == CNN_FLOAT32);
      if (!y) continue;
      char what[64];
      snprintf(what, sizeof what, "cross_entropy red %d variant %d", red, variant);
      if (red == CNN_REDUCTION_NONE) {
        double got[6];
        for (int i = 0; i < 6; i++) got[i] = cnn_tensor_get(y, i);
        CHECK(y->ndim == 1 && y->shape[0] == 6);
        check_arrays(what, got, rows, 6, 1e-6, 1e-6);
      } else {
        double got = cnn_tensor_get(y, 0);
        CHECK(y->ndim == 0);
        check_arrays(what, &got, &ref, 1, 1e-6, 1e-6);
      }
      cnn_tensor_release(y);
    }
  /* a known value: logits (0, 0) target 0 -> log 2 */
  cnn_tensor *z = cnn_zeros(2, SH(1, 2), CNN_FLOAT64, CNN_DEVICE_CPU),
             *t0 = cnn_zeros(1, SH(1), CNN_INT64, CNN_DEVICE_CPU);
  cnn_tensor *l = cnn_cross_entropy(z, t0, NULL, CNN_REDUCTION_MEAN, 0, -100);
  CHECK_CLOSE(cnn_tensor_get(l, 0), log(2), 1e-15);
  cnn_tensor_release(l), cnn_tensor_release(z), cnn_tensor_release(t0);
  /* errors name the op and the shapes */
  cnn_tensor *x8 = cnn_zeros(2, SH(8, 10), CNN_FLOAT32, CNN_DEVICE_CPU),
             *t7 = cnn_zeros(1, SH(7), CNN_INT64, CNN_DEVICE_CPU);
  CHECK(cnn_cross_entropy(x8, t7, NULL, CNN_REDUCTION_MEAN, 0, -100) == NULL &&
        strcmp(cnn_error(), "cross_entropy: target has 7 elements but input has 8 rows (8x10)") ==
            0);
  cnn_tensor *t8 = cnn_zeros(1, SH(8), CNN_INT64, CNN_DEVICE_CPU);
  cnn_tensor_set(t8, 3, 11);
  CHECK(cnn_cross_entropy(x8, t8, NULL, CNN_REDUCTION_MEAN, 0, -100) == NULL &&
        strcmp(cnn_error(), "cross_entropy: target 11 out of range for 10 classes") == 0);
  cnn_tensor *tf = cnn_zeros(1, SH(8), CNN_FLOAT32, CNN_DEVICE_CPU);
  CHECK(cnn_cross_entropy(x8, tf, NULL, CNN_REDUCTION_MEAN, 0, -100) == NULL &&
        strstr(cnn_error(), "int64"));
  CHECK(cnn_cross_entropy(x8, t7, w, CNN_REDUCTION_MEAN, 0, -100) == NULL &&
        strstr(cnn_error(), "cross_entropy"));
  cnn_tensor_release(x8), cnn_tensor_release(t7), cnn_tensor_release(t8), cnn_tensor_release(tf);
  cnn_tensor_release(x), cnn_tensor_release(t), cnn_tensor_release(w);
}

/* N x C x H x W logits: row (n, h, w) holds x[n, :, h, w] */
static void test_cross_entropy_spatial(void) {
  cnn_tensor *x = values(4, SH(2, 3, 2, 2), CNN_FLOAT64, 8);
  int64_t tv[8] = {0, 2, 1, 1, 2, 0, 0, 1};
  cnn_tensor *t = cnn_from_buffer(3, SH(2, 2, 2), CNN_INT64, tv);
  cnn_tensor *rows = cnn_empty(2, SH(8, 3), CNN_FLOAT64, CNN_DEVICE_CPU);
  for (int n = 0; n < 2; n++)
    for (int c = 0; c < 3; c++)
      for (int p = 0; p < 4; p++)
        cnn_tensor_set(rows, (n * 4 + p) * 3 + c, cnn_tensor_get(x, (n * 3 + c) * 4 + p));
  double ref_rows[8], ref = naive_ce(rows, tv, NULL, CNN_REDUCTION_MEAN, 0.1, 1, ref_rows);
  cnn_tensor *none = cnn_cross_entropy(x, t, NULL, CNN_REDUCTION_NONE, 0.1, 1);
  cnn_tensor *mean = cnn_cross_entropy(x, t, NULL, CNN_REDUCTION_MEAN, 0.1, 1);
  CHECK(none && none->ndim == 3 && none->shape[2] == 2);
  double got[8];
  for (int i = 0; i < 8; i++) got[i] = cnn_tensor_get(none, i);
  check_arrays("cross_entropy 2x3x2x2 none", got, ref_rows, 8, 1e-12, 1e-12);
  CHECK_CLOSE(cnn_tensor_get(mean, 0), ref, 1e-12);
  cnn_tensor *bad = cnn_zeros(2, SH(2, 4), CNN_INT64, CNN_DEVICE_CPU);
  CHECK(cnn_cross_entropy(x, bad, NULL, CNN_REDUCTION_MEAN, 0, -100) == NULL &&
        strstr(cnn_error(), "cross_entropy: target 2x4 does not match input 2x3x2x2"));
  cnn_tensor_release(bad), cnn_tensor_release(none), cnn_tensor_release(mean),
      cnn_tensor_release(rows);
  cnn_tensor_release(x), cnn_tensor_release(t);
}

static void test_nll(void) {
  cnn_tensor *lp = values(2, SH(3, 4), CNN_FLOAT64, 2);
  cnn_tensor *t = cnn_from_buffer(1, SH(3), CNN_INT64, (int64_t[]){1, 3, 1});
  cnn_tensor *w = cnn_from_buffer(1, SH(4), CNN_FLOAT64, (double[]){1, 2, 3, 4});
  cnn_tensor *y = cnn_nll_loss(lp, t, w, CNN_REDUCTION_MEAN, -100);
  double ref =
      -(2 * cnn_tensor_get(lp, 1) + 4 * cnn_tensor_get(lp, 7) + 2 * cnn_tensor_get(lp, 9)) / 8;
  CHECK_CLOSE(cnn_tensor_get(y, 0), ref, 1e-14);
  cnn_tensor_release(y);
  y = cnn_nll_loss(lp, t, NULL, CNN_REDUCTION_SUM, 1); /* ignore class 1: only row 1 */
  CHECK_CLOSE(cnn_tensor_get(y, 0), -cnn_tensor_get(lp, 7), 1e-14);
  cnn_tensor_release(y);
  cnn_tensor_release(lp), cnn_tensor_release(t), cnn_tensor_release(w);
}

static void test_mse_bce(void) {
  cnn_tensor *x = values(2, SH(3, 4), CNN_FLOAT32, 3), *y = values(2, SH(3, 4), CNN_FLOAT32, 4);
  cnn_tensor *m = cnn_mse_loss(x, y, CNN_REDUCTION_MEAN),
             *s = cnn_mse_loss(x, y, CNN_REDUCTION_SUM);
  double ref = 0;
  for (int i = 0; i < 12; i++) ref += pow(cnn_tensor_get(x, i) - cnn_tensor_get(y, i), 2);
  CHECK_CLOSE(cnn_tensor_get(s, 0), ref, 1e-4);
  CHECK_CLOSE(cnn_tensor_get(m, 0), ref / 12, 1e-5);
  cnn_tensor_release(m), cnn_tensor_release(s);
  cnn_tensor *bad = cnn_zeros(1, SH(5), CNN_FLOAT32, CNN_DEVICE_CPU);
  CHECK(cnn_mse_loss(x, bad, CNN_REDUCTION_MEAN) == NULL &&
        strstr(cnn_error(), "mse_loss: shapes 3x4 and 5"));
  /* bce with logits: naive -[pw y log s + (1-y) log(1-s)] */
  cnn_tensor *prob = cnn_empty(2, SH(3, 4), CNN_FLOAT32, CNN_DEVICE_CPU);
  for (int i = 0; i < 12; i++) cnn_tensor_set(prob, i, (i % 5) / 4.0);
  cnn_tensor *pw = cnn_from_buffer(1, SH(4), CNN_FLOAT32, (float[]){1, 2, 0.5, 3});
  cnn_tensor *l = cnn_bce_with_logits(x, prob, pw, NULL, CNN_REDUCTION_NONE);
  double got[12], want[12];
  for (int i = 0; i < 12; i++) {
    double xv = cnn_tensor_get(x, i), yv = cnn_tensor_get(prob, i), sg = 1 / (1 + exp(-xv));
    double p = cnn_tensor_get(pw, i % 4);
    want[i] = -(p * yv * log(sg) + (1 - yv) * log(1 - sg));
    got[i] = cnn_tensor_get(l, i);
  }
  check_arrays("bce_with_logits pos_weight 3x4", got, want, 12, 1e-6, 1e-6);
  /* weight (3x1, broadcast over columns) rescales each element's loss; sum */
  cnn_tensor *w = cnn_from_buffer(2, SH(3, 1), CNN_FLOAT32, (float[]){0.5, 2, 0});
  cnn_tensor *lw = cnn_bce_with_logits(x, prob, pw, w, CNN_REDUCTION_SUM);
  double wsum = 0;
  for (int i = 0; i < 12; i++) wsum += (i / 4 == 0 ? 0.5 : i / 4 == 1 ? 2 : 0) * want[i];
  CHECK(lw && lw->ndim == 0);
  if (lw) CHECK_CLOSE(cnn_tensor_get(lw, 0), wsum, 1e-5);
  cnn_tensor *wbad = cnn_from_buffer(1, SH(3), CNN_FLOAT32, (float[]){1, 2, 3});
  CHECK(cnn_bce_with_logits(x, prob, NULL, wbad, CNN_REDUCTION_SUM) == NULL &&
        strstr(cnn_error(),
               "binary_cross_entropy_with_logits: weight 3 cannot be broadcast to input 3x4"));
  cnn_tensor_release(lw), cnn_tensor_release(w), cnn_tensor_release(wbad);
  cnn_tensor *lm = cnn_bce_with_logits(x, prob, NULL, NULL, CNN_REDUCTION_MEAN);
  CHECK(lm && lm->ndim == 0);
  CHECK(cnn_bce_with_logits(x, bad, NULL, NULL, CNN_REDUCTION_MEAN) == NULL &&
        strstr(cnn_error(), "binary_cross_entropy_with_logits: target 5 does not match input 3x4"));
  cnn_tensor_release(lm), cnn_tensor_release(l), cnn_tensor_release(pw), cnn_tensor_release(prob);
  cnn_tensor_release(bad), cnn_tensor_release(x), cnn_tensor_release(y);
}

static void test_linear(void) {
  cnn_tensor *x = values(3, SH(2, 3, 4), CNN_FLOAT32, 5), *w = values(2, SH(5, 4), CNN_FLOAT32, 6);
  cnn_tensor *b = values(1, SH(5), CNN_FLOAT32, 7);
  cnn_tensor *y = cnn_linear(x, w, b);
  CHECK(y && y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 3 && y->shape[2] == 5);
  double got[30], ref[30];
  for (int r = 0; r < 6; r++)
    for (int o = 0; o < 5; o++) {
      double s = cnn_tensor_get(b, o);
      for (int i = 0; i < 4; i++) s += cnn_tensor_get(x, r * 4 + i) * cnn_tensor_get(w, o * 4 + i);
      ref[r * 5 + o] = s, got[r * 5 + o] = cnn_tensor_get(y, r * 5 + o);
    }
  check_arrays("linear 2x3x4 by 5x4 + 5", got, ref, 30, 1e-5, 1e-5);
  cnn_tensor_release(y);
  cnn_tensor *x2 = cnn_zeros(2, SH(64, 1600), CNN_FLOAT32, CNN_DEVICE_CPU),
             *w2 = cnn_zeros(2, SH(128, 9216), CNN_FLOAT32, CNN_DEVICE_CPU);
  CHECK(cnn_linear(x2, w2, NULL) == NULL &&
        strcmp(cnn_error(),
               "linear: input has 1600 features (64x1600) but weight expects 9216 (128x9216)") ==
            0);
  cnn_tensor *b3 = cnn_zeros(1, SH(3), CNN_FLOAT32, CNN_DEVICE_CPU);
  CHECK(cnn_linear(x, w, b3) == NULL && strstr(cnn_error(), "linear: bias 3"));
  cnn_tensor_release(b3), cnn_tensor_release(x2), cnn_tensor_release(w2);
  cnn_tensor_release(x), cnn_tensor_release(w), cnn_tensor_release(b);
}

static void test_dropout(void) {
  cnn_tensor *x = cnn_full(1, SH(100000), 2, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_manual_seed(1);
  cnn_tensor *y = cnn_dropout(x, 0.3, true);
  int64_t zeros = 0, other = 0;
  for (int64_t i = 0; i < 100000; i++) {
    double v = cnn_tensor_get(y, i);
    if (v == 0)
      zeros++;
    else if (fabs(v - 2 / 0.7) > 1e-6)
      other++;
  }
  CHECK(other == 0);
  CHECK(zeros > 29400 && zeros < 30600); /* 30000 +- 4 sigma */
  cnn_manual_seed(1);
  cnn_tensor *y2 = cnn_dropout(x, 0.3, true);
  CHECK(memcmp(cnn_tensor_data(y), cnn_tensor_data(y2), 400000) == 0);
  cnn_tensor *e = cnn_dropout(x, 0.3, false);
  CHECK(e == x);
  CHECK(cnn_dropout(x, 1.5, true) == NULL &&
        strstr(cnn_error(), "dropout: probability must be between 0 and 1, got 1.5"));
  cnn_tensor *all = cnn_dropout(x, 1, true);
  CHECK(cnn_tensor_get(all, 7) == 0);
  cnn_tensor_release(all), cnn_tensor_release(e), cnn_tensor_release(y), cnn_tensor_release(y2),
      cnn_tensor_release(x);
}

int main(void) {
  test_cross_entropy();
  test_cross_entropy_spatial();
  test_nll();
  test_mse_bce();
  test_linear();
  test_dropout();
  return check_report("test_loss");
}
