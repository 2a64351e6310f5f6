/*
 * fake_cuda_loss.c -- losses of the fake device: the class losses (nll and
 * cross-entropy rows with class weights, label smoothing, ignore_index),
 * binary cross-entropy with logits, and the dropout mask.
 *
 * Class losses, row i with target t, weights w (1 without), smoothing e,
 * lp = log_softmax(x_i) for cross_entropy or x_i itself for nll:
 *   loss_i = (1 - e) (-w[t] lp[t]) + (e / C) (-sum_c w[c] lp[c]),  wsum_i = w[t]
 *   (both 0 for an ignored row).  Backward, s = g[i] (per row) or g[0]*scale:
 *   logits: dx[i,c] = s ((1-e) w[t] (p_c - [c=t]) + (e/C)(W p_c - w[c])),
 *           p = softmax(x_i), W = sum_c w[c];
 *   nll:    dx[i,c] = s ((1-e)(-w[t]) [c=t] + (e/C)(-w[c])).
 * BCE: elementwise_math.h's cnn_bce_logits* (float versions for float32, as
 * a kernel would run them).  Dropout: element i is kept (1/(1-p)) unless a
 * 24-bit uniform from a splitmix64 hash of (seed, i) is below p; the mask
 * may be float16 (stored rounded, as gpu/loss.cu).
 */
#include <math.h>
#include <stdlib.h>

#include "elementwise_math.h"
#include "fake_cuda.h"

/* ---- class losses ---------------------------------------------------------------------------- */

static double wt(cnn_dtype dt, const void *w, int64_t c) { return w ? fake_load(dt, w, c) : 1.0; }

/* lp[C] = log-probabilities of row i (log_softmax of logits, or x itself) */
static void row_logp(cnn_dtype dt, const cnn_be_class_loss *c, const void *x, int64_t i,
                     double *lp) {
  double m = -INFINITY, s = 0;
  for (int64_t k = 0; k < c->C; k++) lp[k] = fake_load(dt, x, i * c->C + k), m = fmax(m, lp[k]);
  if (!c->logits) return;
  for (int64_t k = 0; k < c->C; k++) s += exp(lp[k] - m);
  for (int64_t k = 0; k < c->C; k++) lp[k] -= m + log(s);
}

static int class_check(const char *op, cnn_dtype dt, const cnn_be_class_loss *c, const void *x,
                       const int64_t *target, const void *weight) {
  if (fake_dev_n(op, x, c->N * c->C, dt) || fake_dev_n(op, target, c->N, CNN_INT64) ||
      (weight && fake_dev_n(op, weight, c->C, dt)))
    return -1;
  for (int64_t i = 0; i < c->N; i++)
    if (target[i] != c->ignore && (target[i] < 0 || target[i] >= c->C)) {
      fake_core.set_error("%s: target %lld out of range for %lld classes reached the device", op,
                          (long long)target[i], (long long)c->C);
      return -1;
    }
  return 0;
}

static void class_row(cnn_dtype dt, const cnn_be_class_loss *c, const void *x, int64_t t,
                      const void *weight, int64_t i, double *lp, void *loss, void *wsum) {
  double e = c->smoothing, smooth = 0;
  row_logp(dt, c, x, i, lp);
  for (int64_t k = 0; k < c->C; k++) smooth -= wt(dt, weight, k) * lp[k];
  fake_store(dt, loss, i, (1 - e) * (-wt(dt, weight, t) * lp[t]) + e / (double)c->C * smooth);
  fake_store(dt, wsum, i, wt(dt, weight, t));
}

static int class_forward(int dev, cnn_dtype dt, const cnn_be_class_loss *c, const void *x,
                         const int64_t *target, const void *weight, void *loss, void *wsum) {
  const char *op = c->logits ? "cross_entropy" : "nll_loss";
  if (fake_float_dt(op, dt, false) || fake_enter(op, dev)) return -1;
  double *lp = malloc(sizeof(double) * (size_t)(c->C > 0 ? c->C : 1));
  int rc = !lp || class_check(op, dt, c, x, target, weight) || fake_dev_n(op, loss, c->N, dt) ||
                   fake_dev_n(op, wsum, c->N, dt)
               ? -1
               : 0;
  for (int64_t i = 0; rc == 0 && i < c->N; i++) {
    bool ignored = c->ignore >= 0 && target[i] == c->ignore;
    if (ignored)
      fake_store(dt, loss, i, 0), fake_store(dt, wsum, i, 0);
    else
      class_row(dt, c, x, target[i], weight, i, lp, loss, wsum);
  }
  free(lp);
  fake_leave();
  return rc;
}

static void class_row_grad(cnn_dtype dt, const cnn_be_class_loss *c, const void *x, int64_t t,
                           const void *weight, int64_t i, double s, double *lp, void *gx) {
  double e = c->smoothing, W = 0, wtt = wt(dt, weight, t);
  for (int64_t k = 0; k < c->C; k++) W += wt(dt, weight, k);
  row_logp(dt, c, x, i, lp);
  for (int64_t k = 0; k < c->C; k++) {
    double d;
    if (c->logits) {
      double p = exp(lp[k]);
      d = (1 - e) * wtt * (p - (k == t)) + e / (double)c->C * (W * p - wt(dt, weight, k));
    } else {
      d = (1 - e) * -wtt * (k == t) - e / (double)c->C * wt(dt, weight, k);
    }
    fake_store(dt, gx, i * c->C + k, s * d);
  }
}

static int class_backward(int dev, cnn_dtype dt, const cnn_be_class_loss *c, const void *x,
                          const int64_t *target, const void *weight, const void *g, int g_per_row,
                          double scale, void *gx) {
  const char *op = c->logits ? "cross_entropy" : "nll_loss";
  if (fake_float_dt(op, dt, false) || fake_enter(op, dev)) return -1;
  double *lp = malloc(sizeof(double) * (size_t)(c->C > 0 ? c->C : 1));
  int rc = !lp || class_check(op, dt, c, x, target, weight) ||
                   fake_dev_n(op, g, g_per_row ? c->N : 1, dt) ||
                   fake_dev_n(op, gx, c->N * c->C, dt)
               ? -1
               : 0;
  for (int64_t i = 0; rc == 0 && i < c->N; i++) {
    if (c->ignore >= 0 && target[i] == c->ignore) {
      for (int64_t k = 0; k < c->C; k++) fake_store(dt, gx, i * c->C + k, 0);
      continue;
    }
    double s = g_per_row ? fake_load(dt, g, i) : fake_load(dt, g, 0) * scale;
    class_row_grad(dt, c, x, target[i], weight, i, s, lp, gx);
  }
  free(lp);
  fake_leave();
  return rc;
}

/* ---- binary cross-entropy with logits ---------------------------------------------------------- */

static double bce_term(cnn_dtype dt, int which, double x, double y, double pw) {
  if (dt == CNN_FLOAT32) {
    float xf = (float)x, yf = (float)y, pf = (float)pw;
    return which < 0    ? cnn_bce_logits_f(xf, yf, pf)
           : which == 0 ? cnn_bce_logits_dx_f(xf, yf, pf)
           : which == 1 ? cnn_bce_logits_dy_f(xf, yf, pf)
                        : cnn_bce_logits_dpw_f(xf, yf);
  }
  return which < 0    ? cnn_bce_logits(x, y, pw)
         : which == 0 ? cnn_bce_logits_dx(x, y, pw)
         : which == 1 ? cnn_bce_logits_dy(x, y, pw)
                      : cnn_bce_logits_dpw(x, y);
}

/* which < 0: out = loss terms; 0, 1, 2: out = g * d/d(x, y, pw) */
static int bce_any(int dev, cnn_dtype dt, int64_t n, int which, const void *x, const void *y,
                   const void *pw, const void *g, void *out) {
  const char *op = "binary_cross_entropy_with_logits";
  if (fake_float_dt(op, dt, false) || fake_enter(op, dev)) return -1;
  if (which > 2) {
    fake_core.set_error("%s: no input %d", op, which);
    fake_leave();
    return -1;
  }
  int rc = fake_dev_n(op, x, n, dt) || fake_dev_n(op, y, n, dt) ||
                   (pw && fake_dev_n(op, pw, n, dt)) || (which >= 0 && fake_dev_n(op, g, n, dt)) ||
                   fake_dev_n(op, out, n, dt)
               ? -1
               : 0;
  for (int64_t i = 0; rc == 0 && i < n; i++) {
    double v = bce_term(dt, which, fake_load(dt, x, i), fake_load(dt, y, i),
                        pw ? fake_load(dt, pw, i) : 1.0);
    fake_store(dt, out, i, which >= 0 ? fake_load(dt, g, i) * v : v);
  }
  fake_leave();
  return rc;
}

static int bce_forward(int dev, cnn_dtype dt, int64_t n, const void *x, const void *y,
                       const void *pw, void *out) {
  return bce_any(dev, dt, n, -1, x, y, pw, NULL, out);
}

static int bce_backward(int dev, cnn_dtype dt, int64_t n, int which, const void *x, const void *y,
                        const void *pw, const void *g, void *out) {
  return bce_any(dev, dt, n, which < 0 ? 3 : which, x, y, pw, g, out);
}

/* ---- dropout ---------------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int dropout_mask(int dev, cnn_dtype dt, int64_t n, double p, uint64_t seed, void *mask) {
  if (fake_float_dt("dropout", dt, dt == CNN_FLOAT16) || fake_enter("dropout", dev)) return -1;
  int rc = fake_dev_n("dropout", mask, n, dt);
  double keep = 1.0 / (1.0 - p);
  for (int64_t i = 0; rc == 0 && i < n; i++) {
    double u = (double)(splitmix64(seed ^ splitmix64((uint64_t)i)) >> 40) * (1.0 / 16777216.0);
    fake_store(dt, mask, i, u < p ? 0.0 : keep);
  }
  fake_leave();
  return rc;
}

void fake_loss_register(cnn_backend *be) {
  be->class_loss_forward = class_forward;
  be->class_loss_backward = class_backward;
  be->bce_forward = bce_forward;
  be->bce_backward = bce_backward;
  be->dropout_mask = dropout_mask;
}
