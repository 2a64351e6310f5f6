/*
 * norm.cu -- layer, group and instance normalisation: our own kernels over
 * the row geometry of core/norm_math.h (whose formulas they call, so the
 * CPU tests cover the arithmetic).
 *
 * Forward: one block per row (grid-stride over rows); two passes over the
 * row in registers and shared memory (block sum of x, then of the squared
 * deviations: the second pass reads the row from L2), then y.
 * Backward dx: one block per row, two block sums (dxhat, dxhat*xhat), then
 * dx; nothing materialised.  dgamma/dbeta: for layer norm (L = 1, G = 1)
 * one thread per column walking the rows (coalesced across the warp); for
 * group/instance norm one block per channel summing its N runs of L values.
 * Accumulation in double for both dtypes, as the CPU.  Kernels first, then
 * the launchers; every launch is checked.
 */
#include "gpu.h"
#include "norm_math.h"

#define GRID_ROWS(r, n) for (int64_t r = blockIdx.x; r < (n); r += gridDim.x)

template <typename T> __device__ __forceinline__ double prm(const T *p, int64_t k, double dflt) {
  return p ? (double)p[k] : dflt;
}

template <typename T>
__global__ void k_norm_fwd(cnn_norm_shape s, const T *x, const T *gamma, const T *beta, double eps,
                           T *y, T *mean, T *rstd) {
  __shared__ double sh[GPU_THREADS];
  GRID_ROWS(r, s.R) {
    const T *xr = x + r * s.D;
    double acc = 0;
    for (int64_t j = threadIdx.x; j < s.D; j += blockDim.x) acc += (double)xr[j];
    double tot = gpu_block_sum(acc, sh), m = s.D > 0 ? tot / (double)s.D : 0.0;
    acc = 0;
    for (int64_t j = threadIdx.x; j < s.D; j += blockDim.x) {
      double d = (double)xr[j] - m;
      acc += d * d;
    }
    double rs = cnn_norm_rstd(gpu_block_sum(acc, sh), s.D, eps);
    for (int64_t j = threadIdx.x; j < s.D; j += blockDim.x) {
      int64_t k = cnn_norm_affine_index(&s, r, j);
      y[r * s.D + j] = (T)(((double)xr[j] - m) * rs * prm(gamma, k, 1.0) + prm(beta, k, 0.0));
    }
    if (threadIdx.x == 0) mean[r] = (T)m, rstd[r] = (T)rs;
  }
}

template <typename T>
__global__ void k_norm_bwd_dx(cnn_norm_shape s, const T *dy, const T *x, const T *mean,
                              const T *rstd, const T *gamma, T *dx) {
  __shared__ double sh[GPU_THREADS];
  GRID_ROWS(r, s.R) {
    int64_t base = r * s.D;
    double m = (double)mean[r], rs = (double)rstd[r], s1 = 0, s2 = 0;
    for (int64_t j = threadIdx.x; j < s.D; j += blockDim.x) {
      double dxh = (double)dy[base + j] * prm(gamma, cnn_norm_affine_index(&s, r, j), 1.0);
      s1 += dxh, s2 += dxh * ((double)x[base + j] - m) * rs;
    }
    double D = s.D > 0 ? (double)s.D : 1.0;
    double m1 = gpu_block_sum(s1, sh) / D, m2 = gpu_block_sum(s2, sh) / D;
    for (int64_t j = threadIdx.x; j < s.D; j += blockDim.x) {
      double dxh = (double)dy[base + j] * prm(gamma, cnn_norm_affine_index(&s, r, j), 1.0);
      dx[base + j] = (T)cnn_norm_dx(dxh, ((double)x[base + j] - m) * rs, rs, m1, m2);
    }
  }
}

/* layer norm: thread k sums column k over the rows */
template <typename T>
__global__ void k_norm_affine_columns(cnn_norm_shape s, const T *dy, const T *x, const T *mean,
                                      const T *rstd, T *dgamma, T *dbeta) {
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < s.D;
       k += (int64_t)gridDim.x * blockDim.x) {
    double sg = 0, sb = 0;
    for (int64_t r = 0; r < s.R; r++) {
      double d = (double)dy[r * s.D + k];
      sg += d * ((double)x[r * s.D + k] - (double)mean[r]) * (double)rstd[r];
      sb += d;
    }
    if (dgamma) dgamma[k] = (T)sg;
    if (dbeta) dbeta[k] = (T)sb;
  }
}

/* group/instance norm: block k sums channel k's runs (one per row of its group) */
template <typename T>
__global__ void k_norm_affine_channels(cnn_norm_shape s, int64_t A, const T *dy, const T *x,
                                       const T *mean, const T *rstd, T *dgamma, T *dbeta) {
  __shared__ double sh[GPU_THREADS];
  int64_t runs = s.D / s.L, rows = s.R / s.G;
  GRID_ROWS(k, A) {
    int64_t grp = k / runs, off = (k % runs) * s.L;
    double sg = 0, sb = 0;
    for (int64_t i = threadIdx.x; i < rows * s.L; i += blockDim.x) {
      int64_t r = (i / s.L) * s.G + grp, at = r * s.D + off + i % s.L;
      double d = (double)dy[at];
      sg += d * ((double)x[at] - (double)mean[r]) * (double)rstd[r];
      sb += d;
    }
    sg = gpu_block_sum(sg, sh), sb = gpu_block_sum(sb, sh);
    if (threadIdx.x == 0) {
      if (dgamma) dgamma[k] = (T)sg;
      if (dbeta) dbeta[k] = (T)sb;
    }
  }
}

/* ---- launchers ------------------------------------------------------------------------ */

static unsigned row_blocks(int64_t n) {
  return (unsigned)(n < 1 ? 1 : (n > 65535 * 8 ? 65535 * 8 : n));
}

static int begin(const char *op, int dev, cnn_dtype dt, const cnn_norm_shape *s) {
  if (dt != CNN_FLOAT32 && dt != CNN_FLOAT64) {
    gpu_core.set_error("%s: dtype %s is not supported on cuda", op, gpu_core.dtype_name(dt));
    return -1;
  }
  if (s->R < 0 || s->D < 0 || s->G < 1 || s->L < 1 || s->D % s->L) {
    gpu_core.set_error("%s: bad row geometry (R %lld, D %lld, G %lld, L %lld)", op, (long long)s->R,
                       (long long)s->D, (long long)s->G, (long long)s->L);
    return -1;
  }
  return gpu_device(op, dev);
}

template <typename T>
static void launch_fwd(const cnn_norm_shape *s, const void *x, const void *g, const void *b,
                       double eps, void *y, void *mean, void *rstd) {
  k_norm_fwd<T><<<row_blocks(s->R), GPU_THREADS>>>(*s, (const T *)x, (const T *)g, (const T *)b,
                                                   eps, (T *)y, (T *)mean, (T *)rstd);
}

static int norm_fwd(int dev, cnn_dtype dt, const cnn_norm_shape *s, const void *x,
                    const void *gamma, const void *beta, double eps, void *y, void *mean,
                    void *rstd) {
  if (begin("norm_rows", dev, dt, s)) return -1;
  if (!s->R) return 0;
  if (dt == CNN_FLOAT32)
    launch_fwd<float>(s, x, gamma, beta, eps, y, mean, rstd);
  else
    launch_fwd<double>(s, x, gamma, beta, eps, y, mean, rstd);
  LAUNCH_CHECK("norm_rows");
  return 0;
}

template <typename T>
static void launch_bwd(const cnn_norm_shape *s, const void *dy, const void *x, const void *mean,
                       const void *rstd, const void *g, void *dx, void *dg, void *db) {
  const T *dyt = (const T *)dy, *xt = (const T *)x, *mt = (const T *)mean, *rt = (const T *)rstd;
  if (dx && s->R)
    k_norm_bwd_dx<T><<<row_blocks(s->R), GPU_THREADS>>>(*s, dyt, xt, mt, rt, (const T *)g, (T *)dx);
  int64_t A = cnn_norm_affine_count(s);
  if (!(dg || db) || !A) return;
  if (s->L == 1 && s->G == 1)
    k_norm_affine_columns<T><<<gpu_blocks(A), GPU_THREADS>>>(*s, dyt, xt, mt, rt, (T *)dg, (T *)db);
  else
    k_norm_affine_channels<T>
        <<<row_blocks(A), GPU_THREADS>>>(*s, A, dyt, xt, mt, rt, (T *)dg, (T *)db);
}

static int norm_bwd(int dev, cnn_dtype dt, const cnn_norm_shape *s, const void *dy, const void *x,
                    const void *mean, const void *rstd, const void *gamma, void *dx, void *dgamma,
                    void *dbeta) {
  if (begin("norm_rows_backward", dev, dt, s)) return -1;
  if (dt == CNN_FLOAT32)
    launch_bwd<float>(s, dy, x, mean, rstd, gamma, dx, dgamma, dbeta);
  else
    launch_bwd<double>(s, dy, x, mean, rstd, gamma, dx, dgamma, dbeta);
  LAUNCH_CHECK("norm_rows_backward");
  return 0;
}

void gpu_norm_register(cnn_backend *be) {
  be->norm_rows_forward = norm_fwd;
  be->norm_rows_backward = norm_bwd;
}
