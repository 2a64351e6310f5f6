/*
 * optim.c -- the CPU backend's fused optimizer updates: one pass over a
 * parameter, its gradient and its state arrays (n contiguous elements).
 * The per-element arithmetic is elementwise_math.h's (cnn_sgd_step,
 * cnn_adam_step, cnn_rmsprop_step), the functions the CUDA kernels run
 * (gpu/optim.cu), so the CPU tests of the optimizers cover the GPU's
 * update too.  State arrays may be NULL where the formula does not use them.
 *
 * Adam runs as slices (cnn_adam_slice: one parameter and its state): the
 * per-tensor entry is one slice, the many-tensor entry all of a model's
 * parameters, in ONE parallel region whose threads split the concatenated
 * elements evenly (a thread may cover the end of one slice and the start
 * of the next).  The inner loops are `omp simd` over restrict pointers:
 * the scalar loop ran 6 ns a parameter (2.6 ms for the example network's
 * 421,834), memory-bound Adam moves 28 bytes a float32 parameter.  Every
 * element is computed by the same cnn_adam_step_f/cnn_adam_step, so the
 * result does not depend on the split or the thread count.
 */
#include <omp.h>

#include "cpu/backend_cpu.h"

/* below this many elements in all, one thread: a parallel region costs more */
#define ADAM_PARALLEL 32768

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

/* Elements [lo, hi) of slice s (float32 and float64; amsgrad or not). */
static void adam_range_f32(const cnn_adam_slice *s, int64_t lo, int64_t hi) {
  float *restrict p = s->p, *restrict m = s->m, *restrict v = s->v, *restrict x = s->vmax;
  const float *restrict g = s->g;
  cnn_adam_hp h = s->h;
  if (x) {
#pragma omp simd
    for (int64_t i = lo; i < hi; i++) cnn_adam_step_f(p + i, g[i], m + i, v + i, x + i, h);
  } else {
#pragma omp simd
    for (int64_t i = lo; i < hi; i++) cnn_adam_step_f(p + i, g[i], m + i, v + i, NULL, h);
  }
}

static void adam_range_f64(const cnn_adam_slice *s, int64_t lo, int64_t hi) {
  double *restrict p = s->p, *restrict m = s->m, *restrict v = s->v, *restrict x = s->vmax;
  const double *restrict g = s->g;
  cnn_adam_hp h = s->h;
  if (x) {
#pragma omp simd
    for (int64_t i = lo; i < hi; i++) cnn_adam_step(p + i, g[i], m + i, v + i, x + i, h);
  } else {
#pragma omp simd
    for (int64_t i = lo; i < hi; i++) cnn_adam_step(p + i, g[i], m + i, v + i, NULL, h);
  }
}

/* The elements [lo, hi) of the slices' concatenation. */
static void adam_span(cnn_dtype dt, int count, const cnn_adam_slice *s, int64_t lo, int64_t hi) {
  int64_t base = 0; /* index of slice k's first element in the concatenation */
  for (int k = 0; k < count && base < hi; base += s[k].n, k++) {
    int64_t a = lo > base ? lo - base : 0, b = hi - base < s[k].n ? hi - base : s[k].n;
    if (a >= b) continue;
    if (dt == CNN_FLOAT32)
      adam_range_f32(&s[k], a, b);
    else
      adam_range_f64(&s[k], a, b);
  }
}

int cnn_cpu_adam_step_many(int dev, cnn_dtype dt, int count, const cnn_adam_slice *s) {
  (void)dev;
  int64_t total = 0;
  for (int k = 0; k < count; k++) total += s[k].n;
#pragma omp parallel if (total > ADAM_PARALLEL)
  {
    int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    adam_span(dt, count, s, total * t / nt, total * (t + 1) / nt);
  }
  return 0;
}

int cnn_cpu_adam_step(int dev, cnn_dtype dt, int64_t n, void *pp, const void *gg, void *mm,
                      void *vv, void *xx, cnn_adam_hp h) {
  cnn_adam_slice s = {pp, mm, vv, xx, gg, n, h};
  return cnn_cpu_adam_step_many(dev, dt, 1, &s);
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
