/*
 * fake_cuda_optim.c -- the fused optimizer updates of the fake device: SGD,
 * Adam/AdamW, RMSprop over n contiguous elements, one element at a time
 * through core's shared host/device formulas (elementwise_math.h), exactly
 * as gpu/optim.cu calls them: the float versions (_f) for float32, the
 * double ones for float64.  State arrays a formula does not use may be
 * NULL; a local dummy stands in for them.
 */
#include "elementwise_math.h"
#include "fake_cuda.h"

static int check(const char *op, cnn_dtype dt, int64_t n, void *const *arrays, const bool *need,
                 int count) {
  for (int k = 0; k < count; k++) {
    if (!arrays[k] && need[k]) {
      fake_core.set_error("%s: missing state array %d", op, k);
      return -1;
    }
    if (arrays[k] && fake_dev_n(op, arrays[k], n, dt)) return -1;
  }
  return 0;
}

static int sgd_step(int dev, cnn_dtype dt, int64_t n, void *p, const void *g, void *buf,
                    cnn_sgd_hp h) {
  if (fake_float_dt("sgd_update", dt, false) || fake_enter("sgd_update", dev)) return -1;
  int rc = check("sgd_update", dt, n, (void *const[]){p, (void *)g, buf},
                 (const bool[]){true, true, h.momentum != 0}, 3);
  for (int64_t i = 0; rc == 0 && i < n; i++) {
    if (dt == CNN_FLOAT32) {
      float dummy = 0, *b = buf ? (float *)buf + i : &dummy;
      cnn_sgd_step_f((float *)p + i, ((const float *)g)[i], b, h);
    } else {
      double dummy = 0, *b = buf ? (double *)buf + i : &dummy;
      cnn_sgd_step((double *)p + i, ((const double *)g)[i], b, h);
    }
  }
  fake_leave();
  return rc;
}

static int adam_step(int dev, cnn_dtype dt, int64_t n, void *p, const void *g, void *m, void *v,
                     void *vmax, cnn_adam_hp h) {
  if (fake_float_dt("adam_update", dt, false) || fake_enter("adam_update", dev)) return -1;
  int rc = check("adam_update", dt, n, (void *const[]){p, (void *)g, m, v, vmax},
                 (const bool[]){true, true, true, true, h.amsgrad != 0}, 5);
  for (int64_t i = 0; rc == 0 && i < n; i++) {
    if (dt == CNN_FLOAT32) {
      float dummy = 0, *x = vmax ? (float *)vmax + i : &dummy;
      cnn_adam_step_f((float *)p + i, ((const float *)g)[i], (float *)m + i, (float *)v + i, x, h);
    } else {
      double dummy = 0, *x = vmax ? (double *)vmax + i : &dummy;
      cnn_adam_step((double *)p + i, ((const double *)g)[i], (double *)m + i, (double *)v + i, x,
                    h);
    }
  }
  fake_leave();
  return rc;
}

static int rmsprop_step(int dev, cnn_dtype dt, int64_t n, void *p, const void *g, void *sq,
                        void *ga, void *buf, cnn_rmsprop_hp h) {
  if (fake_float_dt("rmsprop_update", dt, false) || fake_enter("rmsprop_update", dev)) return -1;
  int rc = check("rmsprop_update", dt, n, (void *const[]){p, (void *)g, sq, ga, buf},
                 (const bool[]){true, true, true, h.centered != 0, h.momentum > 0}, 5);
  for (int64_t i = 0; rc == 0 && i < n; i++) {
    if (dt == CNN_FLOAT32) {
      float d1 = 0, d2 = 0, *a = ga ? (float *)ga + i : &d1, *b = buf ? (float *)buf + i : &d2;
      cnn_rmsprop_step_f((float *)p + i, ((const float *)g)[i], (float *)sq + i, a, b, h);
    } else {
      double d1 = 0, d2 = 0, *a = ga ? (double *)ga + i : &d1, *b = buf ? (double *)buf + i : &d2;
      cnn_rmsprop_step((double *)p + i, ((const double *)g)[i], (double *)sq + i, a, b, h);
    }
  }
  fake_leave();
  return rc;
}

void fake_optim_register(cnn_backend *be) {
  be->sgd_step = sgd_step;
  be->adam_step = adam_step;
  be->rmsprop_step = rmsprop_step;
}
