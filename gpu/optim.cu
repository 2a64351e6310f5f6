/*
 * optim.cu -- fused optimizer updates over contiguous parameter arrays:
 * one thread per element calls elementwise_math.h's cnn_sgd_step /
 * cnn_adam_step / cnn_rmsprop_step (the _f variants for float32), the very
 * functions the CPU tests cover.  State arrays the formula does not need
 * may be NULL (momentum 0, no amsgrad, not centered).
 */
#include "gpu.h"

#define GRID_LOOP(i, n)                                                                            \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                        \
       i += (int64_t)gridDim.x * blockDim.x)

__global__ void k_sgd_f(int64_t n, float *p, const float *g, float *buf, cnn_sgd_hp h) {
  GRID_LOOP(i, n) cnn_sgd_step_f(p + i, g[i], buf ? buf + i : NULL, h);
}
__global__ void k_sgd_d(int64_t n, double *p, const double *g, double *buf, cnn_sgd_hp h) {
  GRID_LOOP(i, n) cnn_sgd_step(p + i, g[i], buf ? buf + i : NULL, h);
}
__global__ void k_adam_f(int64_t n, float *p, const float *g, float *m, float *v, float *vmax,
                         cnn_adam_hp h) {
  GRID_LOOP(i, n) cnn_adam_step_f(p + i, g[i], m + i, v + i, vmax ? vmax + i : NULL, h);
}
__global__ void k_adam_d(int64_t n, double *p, const double *g, double *m, double *v, double *vmax,
                         cnn_adam_hp h) {
  GRID_LOOP(i, n) cnn_adam_step(p + i, g[i], m + i, v + i, vmax ? vmax + i : NULL, h);
}
__global__ void k_rms_f(int64_t n, float *p, const float *g, float *sq, float *ga, float *buf,
                        cnn_rmsprop_hp h) {
  GRID_LOOP(i, n)
  cnn_rmsprop_step_f(p + i, g[i], sq + i, ga ? ga + i : NULL, buf ? buf + i : NULL, h);
}
__global__ void k_rms_d(int64_t n, double *p, const double *g, double *sq, double *ga, double *buf,
                        cnn_rmsprop_hp h) {
  GRID_LOOP(i, n)
  cnn_rmsprop_step(p + i, g[i], sq + i, ga ? ga + i : NULL, buf ? buf + i : NULL, h);
}

static int begin(const char *op, int dev, cnn_dtype dt) {
  if (dt != CNN_FLOAT32 && dt != CNN_FLOAT64) {
    gpu_core.set_error("%s: dtype %s is not supported on cuda", op, gpu_core.dtype_name(dt));
    return -1;
  }
  return gpu_device(op, dev);
}

static int sgd(int dev, cnn_dtype dt, int64_t n, void *p, const void *g, void *buf, cnn_sgd_hp h) {
  if (begin("sgd", dev, dt)) return -1;
  if (!n) return 0;
  if (dt == CNN_FLOAT32)
    k_sgd_f<<<gpu_blocks(n), GPU_THREADS>>>(n, (float *)p, (const float *)g, (float *)buf, h);
  else
    k_sgd_d<<<gpu_blocks(n), GPU_THREADS>>>(n, (double *)p, (const double *)g, (double *)buf, h);
  LAUNCH_CHECK("sgd");
  return 0;
}

static int adam(int dev, cnn_dtype dt, int64_t n, void *p, const void *g, void *m, void *v,
                void *vmax, cnn_adam_hp h) {
  if (begin("adam", dev, dt)) return -1;
  if (!n) return 0;
  if (dt == CNN_FLOAT32)
    k_adam_f<<<gpu_blocks(n), GPU_THREADS>>>(n, (float *)p, (const float *)g, (float *)m,
                                             (float *)v, (float *)vmax, h);
  else
    k_adam_d<<<gpu_blocks(n), GPU_THREADS>>>(n, (double *)p, (const double *)g, (double *)m,
                                             (double *)v, (double *)vmax, h);
  LAUNCH_CHECK("adam");
  return 0;
}

static int rmsprop(int dev, cnn_dtype dt, int64_t n, void *p, const void *g, void *sq, void *ga,
                   void *buf, cnn_rmsprop_hp h) {
  if (begin("rmsprop", dev, dt)) return -1;
  if (!n) return 0;
  if (dt == CNN_FLOAT32)
    k_rms_f<<<gpu_blocks(n), GPU_THREADS>>>(n, (float *)p, (const float *)g, (float *)sq,
                                            (float *)ga, (float *)buf, h);
  else
    k_rms_d<<<gpu_blocks(n), GPU_THREADS>>>(n, (double *)p, (const double *)g, (double *)sq,
                                            (double *)ga, (double *)buf, h);
  LAUNCH_CHECK("rmsprop");
  return 0;
}

void gpu_optim_register(cnn_backend *be) {
  be->sgd_step = sgd;
  be->adam_step = adam;
  be->rmsprop_step = rmsprop;
}
