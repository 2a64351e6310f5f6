/*
 * fake_cuda_norm.c -- layer/group/instance normalisation of the fake
 * device: textbook formulas in double over the row geometry of
 * core/norm_math.h (R rows of D values; element j of row r uses affine
 * parameter k = ((r % G) * D + j) / L).
 *   forward:  mean, biased var, rstd = 1/sqrt(var + eps),
 *             y = (x - mean) * rstd * gamma[k] + beta[k]; mean/rstd saved
 *   backward: dx = rstd / D * (D dxhat - sum dxhat - xhat sum dxhat xhat),
 *             dxhat = dy gamma[k]; dgamma[k] += dy xhat and dbeta[k] += dy
 *             accumulated element by element over all rows.
 * gamma/beta NULL mean 1 and 0; dx/dgamma/dbeta NULL are not computed.
 */
#include <math.h>
#include <stdlib.h>

#include "fake_cuda.h"
#include "norm_math.h"

static double opt(cnn_dtype dt, const void *p, int64_t i, double dflt) {
  return p ? fake_load(dt, p, i) : dflt;
}

static int check_ptrs(const char *op, cnn_dtype dt, const cnn_norm_shape *s,
                      const void *const *rows, int nrows, const void *const *stats, int nstats,
                      const void *const *params, int nparams) {
  int64_t A = cnn_norm_affine_count(s);
  for (int k = 0; k < nrows; k++)
    if (rows[k] && fake_dev_n(op, rows[k], s->R * s->D, dt)) return -1;
  for (int k = 0; k < nstats; k++)
    if (stats[k] && fake_dev_n(op, stats[k], s->R, dt)) return -1;
  for (int k = 0; k < nparams; k++)
    if (params[k] && fake_dev_n(op, params[k], A, dt)) return -1;
  return 0;
}

static int check_shape(const char *op, cnn_dtype dt, const cnn_norm_shape *s) {
  if (fake_float_dt(op, dt, false)) return -1;
  if (s->R < 0 || s->D < 0 || s->G < 1 || s->L < 1 || s->D % s->L) {
    fake_core.set_error("%s: bad row geometry", op);
    return -1;
  }
  return 0;
}

static void forward_row(cnn_dtype dt, const cnn_norm_shape *s, int64_t r, const void *x,
                        const void *gamma, const void *beta, double eps, void *y, void *mean,
                        void *rstd) {
  double sum = 0, ss = 0;
  for (int64_t j = 0; j < s->D; j++) sum += fake_load(dt, x, r * s->D + j);
  double m = s->D ? sum / (double)s->D : 0;
  for (int64_t j = 0; j < s->D; j++) {
    double d = fake_load(dt, x, r * s->D + j) - m;
    ss += d * d;
  }
  double rs = 1 / sqrt((s->D ? ss / (double)s->D : 0) + eps);
  for (int64_t j = 0; j < s->D; j++) {
    int64_t k = cnn_norm_affine_index(s, r, j), i = r * s->D + j;
    fake_store(dt, y, i,
               (fake_load(dt, x, i) - m) * rs * opt(dt, gamma, k, 1) + opt(dt, beta, k, 0));
  }
  fake_store(dt, mean, r, m), fake_store(dt, rstd, r, rs);
}

static int norm_forward(int dev, cnn_dtype dt, const cnn_norm_shape *s, const void *x,
                        const void *gamma, const void *beta, double eps, void *y, void *mean,
                        void *rstd) {
  const char *op = "norm_rows";
  if (check_shape(op, dt, s) || fake_enter(op, dev)) return -1;
  int rc = check_ptrs(op, dt, s, (const void *[]){x, y}, 2, (const void *[]){mean, rstd}, 2,
                      (const void *[]){gamma, beta}, 2);
  for (int64_t r = 0; rc == 0 && r < s->R; r++)
    forward_row(dt, s, r, x, gamma, beta, eps, y, mean, rstd);
  fake_leave();
  return rc;
}

typedef struct {
  cnn_dtype dt;
  const cnn_norm_shape *s;
  const void *dy, *x, *mean, *rstd, *gamma;
} grads;

static void backward_row(const grads *g, int64_t r, void *dx, double *dgamma, double *dbeta) {
  const cnn_norm_shape *s = g->s;
  double m = fake_load(g->dt, g->mean, r), rs = fake_load(g->dt, g->rstd, r), sd = 0, sdx = 0;
  for (int64_t j = 0; j < s->D; j++) {
    int64_t i = r * s->D + j, k = cnn_norm_affine_index(s, r, j);
    double dyv = fake_load(g->dt, g->dy, i), xh = (fake_load(g->dt, g->x, i) - m) * rs;
    double dxh = dyv * opt(g->dt, g->gamma, k, 1);
    sd += dxh, sdx += dxh * xh;
    dgamma[k] += dyv * xh, dbeta[k] += dyv;
  }
  for (int64_t j = 0; dx && j < s->D; j++) {
    int64_t i = r * s->D + j, k = cnn_norm_affine_index(s, r, j);
    double xh = (fake_load(g->dt, g->x, i) - m) * rs,
           dxh = fake_load(g->dt, g->dy, i) * opt(g->dt, g->gamma, k, 1);
    fake_store(g->dt, dx, i, rs / (double)s->D * ((double)s->D * dxh - sd - xh * sdx));
  }
}

static int norm_backward(int dev, cnn_dtype dt, const cnn_norm_shape *s, const void *dy,
                         const void *x, const void *mean, const void *rstd, const void *gamma,
                         void *dx, void *dgamma, void *dbeta) {
  const char *op = "norm_rows_backward";
  if (check_shape(op, dt, s) || fake_enter(op, dev)) return -1;
  int64_t A = cnn_norm_affine_count(s);
  double *sg = calloc((size_t)A + 1, sizeof *sg), *sb = calloc((size_t)A + 1, sizeof *sb);
  int rc = check_ptrs(op, dt, s, (const void *[]){dy, x, dx}, 3, (const void *[]){mean, rstd}, 2,
                      (const void *[]){gamma, dgamma, dbeta}, 3);
  if (!sg || !sb) rc = -1, fake_core.set_error("%s: out of host memory", op);
  grads g = {dt, s, dy, x, mean, rstd, gamma};
  for (int64_t r = 0; rc == 0 && r < s->R; r++) backward_row(&g, r, dx, sg, sb);
  for (int64_t k = 0; rc == 0 && k < A; k++) {
    if (dgamma) fake_store(dt, dgamma, k, sg[k]);
    if (dbeta) fake_store(dt, dbeta, k, sb[k]);
  }
  free(sg), free(sb);
  fake_leave();
  return rc;
}

void fake_norm_register(cnn_backend *be) {
  be->norm_rows_forward = norm_forward;
  be->norm_rows_backward = norm_backward;
}
