/*
 * loss.c -- the CPU backend's loss entries: the rows of nll_loss and
 * cross_entropy (forward and backward) and binary cross-entropy with
 * logits (the dropout mask is dropout_mask.c's).  core/ops/loss.c
 * validates (targets in range or ignore_index), reduces and records
 * autograd.
 *
 * Formulas (PyTorch's; core/ops/loss.c's header has them in full): row i
 * with target t, class weights w (1 when absent) and smoothing e:
 *   loss_i = (1 - e)(-w[t] logp[i,t]) + (e / C)(-sum_c w[c] logp[i,c])
 *   d loss_i / d x[i,j] = (1-e) w[t] (p_j - [j=t]) + (e/C)(W p_j - w[j])
 * in double; cross_entropy's log-softmax subtracts the row maximum and the
 * backward recomputes it from the logits.  gpu/loss.cu runs the same
 * formulas; BCE uses elementwise_math.h, as it does.
 */
#include <math.h>
#include <stdlib.h>

#include "cpu/backend_cpu.h"
#include "tensor_internal.h" /* cnn_load_double, cnn_store_double */

static double wt(cnn_dtype dt, const void *w, int64_t c) {
  return w ? cnn_load_double(dt, w, c) : 1.0;
}

/* log-softmax of row i of x (N x C) into lp[C] */
static void row_logp(cnn_dtype dt, const void *x, int64_t i, int64_t C, double *lp) {
  double m = -INFINITY, s = 0;
  for (int64_t c = 0; c < C; c++) {
    lp[c] = cnn_load_double(dt, x, i * C + c);
    if (lp[c] > m) m = lp[c];
  }
  for (int64_t c = 0; c < C; c++) s += exp(lp[c] - m);
  double lse = m + log(s);
  for (int64_t c = 0; c < C; c++) lp[c] -= lse;
}

int cnn_cpu_class_loss_forward(int dev, cnn_dtype dt, const cnn_be_class_loss *a, const void *x,
                               const int64_t *t, const void *w, void *loss, void *wsum) {
  (void)dev;
  const char *op = a->logits ? "cross_entropy" : "nll_loss";
  double *lp = malloc(sizeof(double) * (size_t)(a->C ? a->C : 1));
  if (!lp) return cnn_set_error("%s: out of memory", op), -1;
  double e = a->logits ? a->smoothing : 0.0;
  for (int64_t i = 0; i < a->N; i++) {
    double li = 0, wi = 0;
    if (t[i] != a->ignore) {
      if (a->logits) row_logp(dt, x, i, a->C, lp);
      double lpt = a->logits ? lp[t[i]] : cnn_load_double(dt, x, i * a->C + t[i]), smooth = 0;
      for (int64_t c = 0; e != 0 && c < a->C; c++) smooth -= wt(dt, w, c) * lp[c];
      wi = wt(dt, w, t[i]);
      li = (1 - e) * (-wi * lpt) + (e / (double)a->C) * smooth;
    }
    cnn_store_double(dt, loss, i, li);
    cnn_store_double(dt, wsum, i, wi);
  }
  free(lp);
  return 0;
}

int cnn_cpu_class_loss_backward(int dev, cnn_dtype dt, const cnn_be_class_loss *a, const void *x,
                                const int64_t *t, const void *w, const void *g, int g_per_row,
                                double scale, void *gx) {
  (void)dev;
  const char *op = a->logits ? "cross_entropy" : "nll_loss";
  double *lp = malloc(sizeof(double) * (size_t)(a->C ? a->C : 1)), e = a->smoothing, W = 0;
  if (!lp) return cnn_set_error("%s: out of memory", op), -1;
  for (int64_t c = 0; c < a->C; c++) W += wt(dt, w, c);
  for (int64_t i = 0; i < a->N; i++) {
    for (int64_t c = 0; c < a->C; c++) cnn_store_double(dt, gx, i * a->C + c, 0);
    if (t[i] == a->ignore) continue;
    double s = g_per_row ? cnn_load_double(dt, g, i) : cnn_load_double(dt, g, 0) * scale;
    double wti = wt(dt, w, t[i]);
    if (!a->logits) {
      cnn_store_double(dt, gx, i * a->C + t[i], -wti * s);
      continue;
    }
    row_logp(dt, x, i, a->C, lp);
    for (int64_t c = 0; c < a->C; c++) {
      double p = exp(lp[c]);
      double d = (1 - e) * wti * (p - (c == t[i])) + (e / (double)a->C) * (W * p - wt(dt, w, c));
      cnn_store_double(dt, gx, i * a->C + c, s * d);
    }
  }
  free(lp);
  return 0;
}

int cnn_cpu_bce_forward(int dev, cnn_dtype dt, int64_t n, const void *x, const void *y,
                        const void *pw, void *out) {
  (void)dev;
  for (int64_t i = 0; i < n; i++)
    cnn_store_double(dt, out, i,
                     cnn_bce_logits(cnn_load_double(dt, x, i), cnn_load_double(dt, y, i),
                                    pw ? cnn_load_double(dt, pw, i) : 1.0));
  return 0;
}

int cnn_cpu_bce_backward(int dev, cnn_dtype dt, int64_t n, int which, const void *x, const void *y,
                         const void *pw, const void *g, void *out) {
  (void)dev;
  for (int64_t i = 0; i < n; i++) {
    double xv = cnn_load_double(dt, x, i), yv = cnn_load_double(dt, y, i);
    double pv = pw ? cnn_load_double(dt, pw, i) : 1.0;
    double d = which == 0   ? cnn_bce_logits_dx(xv, yv, pv)
               : which == 1 ? cnn_bce_logits_dy(xv, yv, pv)
                            : cnn_bce_logits_dpw(xv, yv);
    cnn_store_double(dt, out, i, cnn_load_double(dt, g, i) * d);
  }
  return 0;
}
