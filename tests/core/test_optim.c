/*
 * test_optim.c -- the fused optimizer updates (core/ops/optim.c) against
 * torch.optim's formulas written out here independently, for 3 steps, in
 * float64 and float32, plus their argument checks.
 */
#include "check.h"
#include "cnn.h"

#include <math.h>
#include <string.h>

#define N 3
static const double P0[N] = {1.0, -2.0, 0.5}, G[N] = {0.3, -0.1, 2.0};

static cnn_tensor *vec(const double *v, cnn_dtype dt) {
  cnn_tensor *t = cnn_zeros(1, (int64_t[]){N}, dt, CNN_DEVICE_CPU);
  for (int i = 0; i < N; i++) cnn_tensor_set(t, i, v[i]);
  return t;
}

static void check_vec(const char *what, cnn_tensor *t, const double *ref, double tol) {
  double got[N];
  for (int i = 0; i < N; i++) got[i] = cnn_tensor_get(t, i);
  check_arrays(what, got, ref, N, tol, tol);
}

/* Adam with weight decay 0.1 (L2) and AdamW (decoupled), amsgrad off/on */
static void test_adam(cnn_dtype dt, bool decoupled, bool amsgrad, double tol) {
  double p[N], m[N] = {0}, v[N] = {0}, vmax[N] = {0}, lr = 0.01, b1 = 0.9, b2 = 0.99, eps = 1e-8,
               wd = 0.1;
  memcpy(p, P0, sizeof p);
  cnn_tensor *tp = vec(P0, dt), *tg = vec(G, dt),
             *tm = cnn_zeros(1, (int64_t[]){N}, dt, CNN_DEVICE_CPU);
  cnn_tensor *tv = cnn_zeros(1, (int64_t[]){N}, dt, CNN_DEVICE_CPU);
  cnn_tensor *tx = amsgrad ? cnn_zeros(1, (int64_t[]){N}, dt, CNN_DEVICE_CPU) : NULL;
  for (int step = 1; step <= 3; step++) {
    for (int i = 0; i < N; i++) {
      double g = G[i];
      if (decoupled)
        p[i] *= 1 - lr * wd;
      else
        g += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      vmax[i] = fmax(vmax[i], v[i]);
      double vv = amsgrad ? vmax[i] : v[i];
      p[i] -= lr / (1 - pow(b1, step)) * m[i] / (sqrt(vv) / sqrt(1 - pow(b2, step)) + eps);
    }
    CHECK(cnn_adam_update(tp, tg, tm, tv, tx, lr, b1, b2, eps, wd, decoupled, step) == 0);
  }
  check_vec(decoupled ? "adamw" : "adam", tp, p, tol);
  check_vec("adam exp_avg", tm, m, tol);
  cnn_tensor_release(tp), cnn_tensor_release(tg), cnn_tensor_release(tm), cnn_tensor_release(tv);
  cnn_tensor_release(tx);
}

static void test_sgd(cnn_dtype dt, double tol) {
  double p[N], buf[N] = {0}, lr = 0.1, mom = 0.9, wd = 0.01;
  memcpy(p, P0, sizeof p);
  cnn_tensor *tp = vec(P0, dt), *tg = vec(G, dt),
             *tb = cnn_zeros(1, (int64_t[]){N}, dt, CNN_DEVICE_CPU);
  for (int step = 1; step <= 3; step++) {
    for (int i = 0; i < N; i++) { /* nesterov, dampening 0 */
      double g = G[i] + wd * p[i];
      buf[i] = step == 1 ? g : mom * buf[i] + g;
      p[i] -= lr * (g + mom * buf[i]);
    }
    CHECK(cnn_sgd_update(tp, tg, tb, lr, mom, 0, wd, true, step == 1) == 0);
  }
  check_vec("sgd nesterov", tp, p, tol);
  cnn_tensor_release(tp), cnn_tensor_release(tg), cnn_tensor_release(tb);
}

static void test_rmsprop(cnn_dtype dt, double tol) {
  double p[N], sq[N] = {0}, ga[N] = {0}, buf[N] = {0}, lr = 0.01, a = 0.9, eps = 1e-8, mom = 0.5;
  memcpy(p, P0, sizeof p);
  cnn_tensor *tp = vec(P0, dt), *tg = vec(G, dt);
  cnn_tensor *ts = cnn_zeros(1, (int64_t[]){N}, dt, CNN_DEVICE_CPU),
             *ta = cnn_zeros(1, (int64_t[]){N}, dt, CNN_DEVICE_CPU);
  cnn_tensor *tb = cnn_zeros(1, (int64_t[]){N}, dt, CNN_DEVICE_CPU);
  for (int step = 1; step <= 3; step++) {
    for (int i = 0; i < N; i++) { /* centered, momentum */
      sq[i] = a * sq[i] + (1 - a) * G[i] * G[i];
      ga[i] = a * ga[i] + (1 - a) * G[i];
      buf[i] = mom * buf[i] + G[i] / (sqrt(sq[i] - ga[i] * ga[i]) + eps);
      p[i] -= lr * buf[i];
    }
    CHECK(cnn_rmsprop_update(tp, tg, ts, ta, tb, lr, a, eps, 0, mom, true) == 0);
  }
  check_vec("rmsprop centered momentum", tp, p, tol);
  cnn_tensor *r[] = {tp, tg, ts, ta, tb};
  for (int i = 0; i < 5; i++) cnn_tensor_release(r[i]);
}

static void test_errors(void) {
  cnn_tensor *p = cnn_zeros(1, (int64_t[]){3}, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *g = cnn_zeros(1, (int64_t[]){4}, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *m = cnn_zeros(1, (int64_t[]){3}, CNN_FLOAT64, CNN_DEVICE_CPU);
  CHECK(cnn_sgd_update(p, g, NULL, 0.1, 0, 0, 0, false, false) == -1);
  CHECK(strstr(cnn_error(), "sgd_update: gradient 4 does not match the parameter 3"));
  CHECK(cnn_adam_update(p, p, m, m, NULL, 0.1, 0.9, 0.99, 1e-8, 0, false, 1) == -1);
  CHECK(strstr(cnn_error(), "adam_update: exp_avg 3 (float64)"));
  cnn_tensor_release(p), cnn_tensor_release(g), cnn_tensor_release(m);
}

int main(void) {
  for (int k = 0; k < 4; k++) test_adam(CNN_FLOAT64, k & 1, k & 2, 1e-12);
  test_adam(CNN_FLOAT32, true, false, 1e-5);
  test_sgd(CNN_FLOAT64, 1e-12);
  test_sgd(CNN_FLOAT32, 1e-5);
  test_rmsprop(CNN_FLOAT64, 1e-12);
  test_rmsprop(CNN_FLOAT32, 1e-5);
  test_errors();
  return check_report("test_optim");
}
