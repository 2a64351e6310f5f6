/*
 * loss.cu -- the losses' own kernels: nll_loss / cross_entropy rows,
 * binary cross-entropy with logits, and the dropout mask.
 *
 * Class losses follow core/cpu/loss.c's formulas exactly (see its header):
 * one block per row (grid-stride over rows), in double: the block's
 * threads stride over the classes and combine through shared memory
 * (gpu_block_sum / gpu_block_max, gpu.h); cross_entropy's log-softmax
 * subtracts the row maximum; the backward recomputes it from the saved
 * logits.  Core
 * validates the targets (range, ignore_index) before calling.  BCE uses
 * elementwise_math.h's cnn_bce_logits* (the functions the CPU runs).
 *
 * Dropout is counter-based (elementwise_math.h's cnn_dropout_value, the
 * CPU's too): the mask needs no generator state on the device and a seed
 * taken from core's generator reproduces it.  The mask may be float16
 * (dropout on float16 tensors: 0 or 1/(1-p) rounded to half).
 */
#include "gpu.h"

#define GRID_LOOP(i, n)                                                                            \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                        \
       i += (int64_t)gridDim.x * blockDim.x)

template <typename T> __device__ __forceinline__ double wt(const T *w, int64_t c) {
  return w ? (double)w[c] : 1.0;
}

/* log-sum-exp of row x[0..C) (max subtracted), by the whole block; a NaN
 * never becomes the maximum but makes the sum NaN, as the CPU's loop */
template <typename T> __device__ double row_lse(const T *x, int64_t C, double *sh) {
  double m = -INFINITY, s = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) m = (double)x[c] > m ? (double)x[c] : m;
  m = gpu_block_max(m, sh);
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += exp((double)x[c] - m);
  return m + log(gpu_block_sum(s, sh));
}

/* sum over the classes of w(c) * (x[c] - lse) (label smoothing), by the block */
template <typename T>
__device__ double row_smooth(const T *x, const T *w, int64_t C, double lse, double *sh) {
  double s = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s -= wt(w, c) * ((double)x[c] - lse);
  return gpu_block_sum(s, sh);
}

/* every branch below is taken by the whole block (it depends on the row
 * only), so the block-wide reductions are reached by all threads */
template <typename T>
__global__ void k_class_fwd(cnn_be_class_loss a, const T *x, const int64_t *t, const T *w, T *loss,
                            T *wsum) {
  __shared__ double sh[GPU_THREADS];
  for (int64_t i = blockIdx.x; i < a.N; i += gridDim.x) {
    int64_t ti = t[i];
    if (ti == a.ignore) {
      if (!threadIdx.x) loss[i] = 0, wsum[i] = 0;
      continue;
    }
    const T *row = x + i * a.C;
    double lse = a.logits ? row_lse(row, a.C, sh) : 0.0, e = a.logits ? a.smoothing : 0.0;
    double smooth = e != 0 ? row_smooth(row, w, a.C, lse, sh) : 0.0;
    if (threadIdx.x) continue;
    double wti = wt(w, ti);
    loss[i] = (T)((1 - e) * (-wti * ((double)row[ti] - lse)) + (e / (double)a.C) * smooth);
    wsum[i] = (T)wti;
  }
}

template <typename T>
__global__ void k_class_bwd(cnn_be_class_loss a, const T *x, const int64_t *t, const T *w,
                            const T *g, int per_row, double scale, T *gx) {
  __shared__ double sh[GPU_THREADS];
  for (int64_t i = blockIdx.x; i < a.N; i += gridDim.x) {
    int64_t ti = t[i];
    T *out = gx + i * a.C;
    if (ti == a.ignore) {
      for (int64_t c = threadIdx.x; c < a.C; c += blockDim.x) out[c] = 0;
      continue;
    }
    double s = per_row ? (double)g[i] : (double)g[0] * scale, wti = wt(w, ti);
    if (!a.logits) {
      for (int64_t c = threadIdx.x; c < a.C; c += blockDim.x)
        out[c] = (T)(c == ti ? -wti * s : 0.0);
      continue;
    }
    const T *row = x + i * a.C;
    double lse = row_lse(row, a.C, sh), e = a.smoothing, W = 0;
    for (int64_t c = threadIdx.x; c < a.C; c += blockDim.x) W += wt(w, c);
    W = gpu_block_sum(W, sh);
    for (int64_t c = threadIdx.x; c < a.C; c += blockDim.x) {
      double p = exp((double)row[c] - lse);
      double d = (1 - e) * wti * (p - (c == ti)) + (e / (double)a.C) * (W * p - wt(w, c));
      out[c] = (T)(s * d);
    }
  }
}

template <typename T>
__global__ void k_bce(int64_t n, int which, bool fwd, const T *x, const T *y, const T *pw,
                      const T *g, T *out) {
  GRID_LOOP(i, n) {
    double xv = x[i], yv = y[i], pv = pw ? (double)pw[i] : 1.0;
    if (fwd) {
      out[i] = (T)cnn_bce_logits(xv, yv, pv);
      continue;
    }
    double d = which == 0   ? cnn_bce_logits_dx(xv, yv, pv)
               : which == 1 ? cnn_bce_logits_dy(xv, yv, pv)
                            : cnn_bce_logits_dpw(xv, yv);
    out[i] = (T)((double)g[i] * d);
  }
}

template <typename T> __global__ void k_dropout(int64_t n, double p, uint64_t seed, T *mask) {
  GRID_LOOP(i, n) mask[i] = gpu_narrow<T>(cnn_dropout_value(seed, i, p));
}

/* ---- launchers ------------------------------------------------------------------------- */

static int begin(const char *op, int dev, cnn_dtype dt) {
  if (dt != CNN_FLOAT32 && dt != CNN_FLOAT64) {
    gpu_core.set_error("%s: dtype %s is not supported on cuda", op, gpu_core.dtype_name(dt));
    return -1;
  }
  return gpu_device(op, dev);
}

/* one block per row, at most gpu_blocks' cap (rows stride) */
static unsigned row_blocks(int64_t N) { return N < 65535 * 8 ? (unsigned)N : 65535 * 8; }

static const char *class_name(const cnn_be_class_loss *c) {
  return c->logits ? "cross_entropy" : "nll_loss";
}

static int class_fwd(int dev, cnn_dtype dt, const cnn_be_class_loss *c, const void *x,
                     const int64_t *t, const void *w, void *loss, void *wsum) {
  if (begin(class_name(c), dev, dt)) return -1;
  if (!c->N) return 0;
  if (dt == CNN_FLOAT32)
    k_class_fwd<float><<<row_blocks(c->N), GPU_THREADS>>>(*c, (const float *)x, t, (const float *)w,
                                                          (float *)loss, (float *)wsum);
  else
    k_class_fwd<double><<<row_blocks(c->N), GPU_THREADS>>>(
        *c, (const double *)x, t, (const double *)w, (double *)loss, (double *)wsum);
  LAUNCH_CHECK(class_name(c));
  return 0;
}

static int class_bwd(int dev, cnn_dtype dt, const cnn_be_class_loss *c, const void *x,
                     const int64_t *t, const void *w, const void *g, int per_row, double scale,
                     void *gx) {
  if (begin(class_name(c), dev, dt)) return -1;
  if (!c->N) return 0;
  if (dt == CNN_FLOAT32)
    k_class_bwd<float><<<row_blocks(c->N), GPU_THREADS>>>(
        *c, (const float *)x, t, (const float *)w, (const float *)g, per_row, scale, (float *)gx);
  else
    k_class_bwd<double><<<row_blocks(c->N), GPU_THREADS>>>(*c, (const double *)x, t,
                                                           (const double *)w, (const double *)g,
                                                           per_row, scale, (double *)gx);
  LAUNCH_CHECK(class_name(c));
  return 0;
}

static int bce(bool fwd, int dev, cnn_dtype dt, int64_t n, int which, const void *x, const void *y,
               const void *pw, const void *g, void *out) {
  const char *op = "binary_cross_entropy_with_logits";
  if (begin(op, dev, dt)) return -1;
  if (!n) return 0;
  if (dt == CNN_FLOAT32)
    k_bce<float><<<gpu_blocks(n), GPU_THREADS>>>(n, which, fwd, (const float *)x, (const float *)y,
                                                 (const float *)pw, (const float *)g, (float *)out);
  else
    k_bce<double><<<gpu_blocks(n), GPU_THREADS>>>(n, which, fwd, (const double *)x,
                                                  (const double *)y, (const double *)pw,
                                                  (const double *)g, (double *)out);
  LAUNCH_CHECK(op);
  return 0;
}

static int bce_fwd(int dev, cnn_dtype dt, int64_t n, const void *x, const void *y, const void *pw,
                   void *out) {
  return bce(true, dev, dt, n, 0, x, y, pw, NULL, out);
}
static int bce_bwd(int dev, cnn_dtype dt, int64_t n, int which, const void *x, const void *y,
                   const void *pw, const void *g, void *out) {
  return bce(false, dev, dt, n, which, x, y, pw, g, out);
}

static int dropout_mask(int dev, cnn_dtype dt, int64_t n, double p, uint64_t seed, void *mask) {
  if (dt == CNN_FLOAT16) { /* a float16 mask (float16 inference also trains dropout) */
    if (gpu_device("dropout", dev)) return -1;
  } else if (begin("dropout", dev, dt)) {
    return -1;
  }
  if (!n) return 0;
  if (dt == CNN_FLOAT32)
    k_dropout<float><<<gpu_blocks(n), GPU_THREADS>>>(n, p, seed, (float *)mask);
  else if (dt == CNN_FLOAT16)
    k_dropout<__half><<<gpu_blocks(n), GPU_THREADS>>>(n, p, seed, (__half *)mask);
  else
    k_dropout<double><<<gpu_blocks(n), GPU_THREADS>>>(n, p, seed, (double *)mask);
  LAUNCH_CHECK("dropout");
  return 0;
}

void gpu_loss_register(cnn_backend *be) {
  be->class_loss_forward = class_fwd;
  be->class_loss_backward = class_bwd;
  be->bce_forward = bce_fwd;
  be->bce_backward = bce_bwd;
  be->dropout_mask = dropout_mask;
}
