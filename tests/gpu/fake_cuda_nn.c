/*
 * fake_cuda_nn.c -- batch norm and softmax of the fake device, textbook
 * formulas in double, one channel (or one softmax column) at a time.
 *
 * Batch norm over x viewed as N x C x L (M = N*L values per channel):
 *   training: mean, biased var, invstd = 1/sqrt(var + eps),
 *             y = (x - mean) * invstd * gamma + beta, save_mean/save_invstd;
 *             running stats r = (1 - momentum) r + momentum s, with the
 *             unbiased variance var * M / (M - 1) (PyTorch);
 *   eval:     the running stats instead; save_* receive them (mean, invstd).
 *   backward (training): xhat = (x - mean) invstd, dbeta = sum dy,
 *             dgamma = sum dy xhat, dx = gamma invstd / M (M dy - dbeta - xhat dgamma);
 *   backward (eval): dx = dy gamma invstd, same dgamma and dbeta.
 * gamma/beta NULL mean 1 and 0; dx/dgamma/dbeta NULL are not computed.
 * float16 x/y (eval forward only, as gpu/cudnn_ops.cu): the per-channel
 * arrays are float32 (cuDNN's derived descriptor for half data).
 * Softmax over the middle dim of outer x D x inner: the max is subtracted
 * first; backward dx = y (dy - sum dy y), log: dx = dy - exp(y) sum dy;
 * float16 too (loaded as float, double sums, rounded back), as cuDNN's.
 */
#include <math.h>

#include "fake_cuda.h"

typedef struct {
  cnn_dtype dt;  /* x, y, dy, dx */
  cnn_dtype pdt; /* gamma, beta, running and saved statistics, dgamma, dbeta */
  int64_t N, C, L;
} bn_geom;

static int64_t bn_idx(const bn_geom *g, int64_t c, int64_t j) { /* j-th value of channel c */
  return (j / g->L * g->C + c) * g->L + j % g->L;
}

static double opt(cnn_dtype dt, const void *p, int64_t i, double dflt) {
  return p ? fake_load(dt, p, i) : dflt;
}

static void batch_stats(const bn_geom *g, const void *x, int64_t c, double *mean, double *var) {
  int64_t M = g->N * g->L;
  double s = 0, ss = 0;
  for (int64_t j = 0; j < M; j++) s += fake_load(g->dt, x, bn_idx(g, c, j));
  *mean = s / (double)M;
  for (int64_t j = 0; j < M; j++) {
    double d = fake_load(g->dt, x, bn_idx(g, c, j)) - *mean;
    ss += d * d;
  }
  *var = ss / (double)M;
}

static int bn_check(const char *op, const bn_geom *g, const void *const *pc, int npc,
                    const void *const *px, int npx) {
  for (int k = 0; k < npc; k++)
    if (pc[k] && fake_dev_n(op, pc[k], g->C, g->pdt)) return -1;
  for (int k = 0; k < npx; k++)
    if (px[k] && fake_dev_n(op, px[k], g->N * g->C * g->L, g->dt)) return -1;
  return 0;
}

/* one channel of the forward pass */
static void bn_channel(const bn_geom *g, int64_t c, const void *x, const void *gamma,
                       const void *beta, void *rm, void *rv, int training, double momentum,
                       double eps, void *y, void *sm, void *si) {
  int64_t M = g->N * g->L;
  double mean, var;
  if (training) {
    batch_stats(g, x, c, &mean, &var);
    if (rm) fake_store(g->pdt, rm, c, (1 - momentum) * fake_load(g->pdt, rm, c) + momentum * mean);
    if (rv)
      fake_store(g->pdt, rv, c,
                 (1 - momentum) * fake_load(g->pdt, rv, c) + momentum * var * M / (double)(M - 1));
  } else {
    mean = fake_load(g->pdt, rm, c), var = fake_load(g->pdt, rv, c);
  }
  double invstd = 1 / sqrt(var + eps), ga = opt(g->pdt, gamma, c, 1), be = opt(g->pdt, beta, c, 0);
  for (int64_t j = 0; j < M; j++) {
    int64_t i = bn_idx(g, c, j);
    fake_store(g->dt, y, i, (fake_load(g->dt, x, i) - mean) * invstd * ga + be);
  }
  if (sm) fake_store(g->pdt, sm, c, mean);
  if (si) fake_store(g->pdt, si, c, invstd);
}

static int bn_forward(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *x,
                      const void *gamma, const void *beta, void *rm, void *rv, int training,
                      double momentum, double eps, void *y, void *sm, void *si) {
  bn_geom g = {dt, dt == CNN_FLOAT16 ? CNN_FLOAT32 : dt, N, C, L};
  if (fake_float_dt("batch_norm", dt, dt == CNN_FLOAT16 && !training)) return -1;
  if ((!training && (!rm || !rv)) || (training && N * L < 2)) {
    fake_core.set_error("batch_norm: %s reached the device",
                        training ? "a batch of one value per channel"
                                 : "eval without running stats");
    return -1;
  }
  if (fake_enter("batch_norm", dev)) return -1;
  int rc = bn_check("batch_norm", &g, (const void *[]){gamma, beta, rm, rv, sm, si}, 6,
                    (const void *[]){x, y}, 2);
  for (int64_t c = 0; rc == 0 && c < C; c++)
    bn_channel(&g, c, x, gamma, beta, rm, rv, training, momentum, eps, y, sm, si);
  fake_leave();
  return rc;
}

static void bn_channel_backward(const bn_geom *g, int64_t c, bool training, const void *dy,
                                const void *x, const void *gamma, const void *sm, const void *si,
                                void *dx, void *dgamma, void *dbeta) {
  int64_t M = g->N * g->L;
  double mean = fake_load(g->dt, sm, c), invstd = fake_load(g->dt, si, c),
         ga = opt(g->dt, gamma, c, 1);
  double sdy = 0, sdyx = 0;
  for (int64_t j = 0; j < M; j++) {
    int64_t i = bn_idx(g, c, j);
    double d = fake_load(g->dt, dy, i), xh = (fake_load(g->dt, x, i) - mean) * invstd;
    sdy += d, sdyx += d * xh;
  }
  if (dgamma) fake_store(g->dt, dgamma, c, sdyx);
  if (dbeta) fake_store(g->dt, dbeta, c, sdy);
  for (int64_t j = 0; dx && j < M; j++) {
    int64_t i = bn_idx(g, c, j);
    double d = fake_load(g->dt, dy, i), xh = (fake_load(g->dt, x, i) - mean) * invstd;
    double v =
        training ? ga * invstd / (double)M * ((double)M * d - sdy - xh * sdyx) : d * ga * invstd;
    fake_store(g->dt, dx, i, v);
  }
}

static int bn_backward_any(bool training, int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L,
                           const void *dy, const void *x, const void *gamma, const void *sm,
                           const void *si, void *dx, void *dgamma, void *dbeta) {
  bn_geom g = {dt, dt, N, C, L};
  if (fake_float_dt("batch_norm", dt, false) || fake_enter("batch_norm", dev)) return -1;
  int rc = bn_check("batch_norm", &g, (const void *[]){gamma, sm, si, dgamma, dbeta}, 5,
                    (const void *[]){dy, x, dx}, 3);
  if (rc == 0 && (!sm || !si)) {
    fake_core.set_error("batch_norm: backward without saved statistics");
    rc = -1;
  }
  for (int64_t c = 0; rc == 0 && c < C; c++)
    bn_channel_backward(&g, c, training, dy, x, gamma, sm, si, dx, dgamma, dbeta);
  fake_leave();
  return rc;
}

/* eps: the saved inverse std already holds it (the host math needs no other) */
static int bn_backward(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                       const void *x, const void *gamma, const void *sm, const void *si, void *dx,
                       void *dgamma, void *dbeta, double eps) {
  (void)eps;
  return bn_backward_any(true, dev, dt, N, C, L, dy, x, gamma, sm, si, dx, dgamma, dbeta);
}

static int bn_backward_eval(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                            const void *x, const void *gamma, const void *sm, const void *si,
                            void *dx, void *dgamma, void *dbeta, double eps) {
  (void)eps;
  return bn_backward_any(false, dev, dt, N, C, L, dy, x, gamma, sm, si, dx, dgamma, dbeta);
}

/* ---- softmax ------------------------------------------------------------------------------ */

static int softmax_forward(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int log_,
                           const void *x, void *y) {
  int64_t n = outer * D * inner;
  if (fake_float_dt("softmax", dt, dt == CNN_FLOAT16) || fake_enter("softmax", dev)) return -1;
  int rc = fake_dev_n("softmax", x, n, dt) || fake_dev_n("softmax", y, n, dt) ? -1 : 0;
  for (int64_t o = 0; rc == 0 && o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t b = o * D * inner + i;
      double m = -INFINITY, s = 0;
      for (int64_t d = 0; d < D; d++) m = fmax(m, fake_load(dt, x, b + d * inner));
      for (int64_t d = 0; d < D; d++) s += exp(fake_load(dt, x, b + d * inner) - m);
      for (int64_t d = 0; d < D; d++) {
        double z = fake_load(dt, x, b + d * inner) - m;
        fake_store(dt, y, b + d * inner, log_ ? z - log(s) : exp(z) / s);
      }
    }
  fake_leave();
  return rc;
}

static int softmax_backward(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner,
                            int log_, const void *y, const void *dy, void *dx) {
  int64_t n = outer * D * inner;
  if (fake_float_dt("softmax", dt, dt == CNN_FLOAT16) || fake_enter("softmax", dev)) return -1;
  int rc = fake_dev_n("softmax", y, n, dt) || fake_dev_n("softmax", dy, n, dt) ||
                   fake_dev_n("softmax", dx, n, dt)
               ? -1
               : 0;
  for (int64_t o = 0; rc == 0 && o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t b = o * D * inner + i;
      double s = 0;
      for (int64_t d = 0; d < D; d++)
        s += fake_load(dt, dy, b + d * inner) * (log_ ? 1 : fake_load(dt, y, b + d * inner));
      for (int64_t d = 0; d < D; d++) {
        double yv = fake_load(dt, y, b + d * inner), g = fake_load(dt, dy, b + d * inner);
        fake_store(dt, dx, b + d * inner, log_ ? g - exp(yv) * s : yv * (g - s));
      }
    }
  fake_leave();
  return rc;
}

void fake_nn_register(cnn_backend *be) {
  be->batch_norm_forward = bn_forward;
  be->batch_norm_backward = bn_backward;
  be->batch_norm_backward_eval = bn_backward_eval;
  be->softmax_forward = softmax_forward;
  be->softmax_backward = softmax_backward;
}
