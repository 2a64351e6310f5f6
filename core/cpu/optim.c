/*
 * optim.c -- the CPU backend's fused optimizer updates: one pass over a
 * parameter, its gradient and its state arrays (n contiguous elements).
 * The per-element arithmetic is elementwise_math.h's (cnn_sgd_step,
 * cnn_adam_step, cnn_rmsprop_step), the functions the CUDA kernels run
 * (gpu/optim.cu), so the CPU tests of the optimizers cover the GPU's
 * update too.  State arrays may be NULL where the formula does not use them.
 */
#include "cpu/backend_cpu.h"

int cnn_cpu_sgd_step(int dev, cnn_dtype dt, int64_t n, void *pp, const void *gg, void *bb,
                     cnn_sgd_hp h) {
  (void)dev;
  if (dt == CNN_FLOAT32) {
    for (int64_t i = 0; i < n; i++)
      cnn_sgd_step_f((float *)pp + i, ((const float *)gg)[i], bb ? (float *)bb + i : NULL, h);
  } else {
    for (int64_t i = 0; i < n; i++)
      cnn_sgd_step((double *)pp + i, ((const double *)gg)[i], bb ? (double *)bb + i : NULL, h);
  }
  return 0;
}

int cnn_cpu_adam_step(int dev, cnn_dtype dt, int64_t n, void *pp, const void *gg, void *mm,
                      void *vv, void *xx, cnn_adam_hp h) {
  (void)dev;
  if (dt == CNN_FLOAT32) {
    for (int64_t i = 0; i < n; i++)
      cnn_adam_step_f((float *)pp + i, ((const float *)gg)[i], (float *)mm + i, (float *)vv + i,
                      xx ? (float *)xx + i : NULL, h);
  } else {
    for (int64_t i = 0; i < n; i++)
      cnn_adam_step((double *)pp + i, ((const double *)gg)[i], (double *)mm + i,
                    (double *)vv + i, xx ? (double *)xx + i : NULL, h);
  }
  return 0;
}

int cnn_cpu_rmsprop_step(int dev, cnn_dtype dt, int64_t n, void *pp, const void *gg, void *ss,
                         void *aa, void *bb, cnn_rmsprop_hp h) {
  (void)dev;
  if (dt == CNN_FLOAT32) {
    for (int64_t i = 0; i < n; i++)
      cnn_rmsprop_step_f((float *)pp + i, ((const float *)gg)[i], (float *)ss + i,
                         aa ? (float *)aa + i : NULL, bb ? (float *)bb + i : NULL, h);
  } else {
    for (int64_t i = 0; i < n; i++)
      cnn_rmsprop_step((double *)pp + i, ((const double *)gg)[i], (double *)ss + i,
                       aa ? (double *)aa + i : NULL, bb ? (double *)bb + i : NULL, h);
  }
  return 0;
}
