/*
 * reduce.cu -- reductions of M contiguous rows of R elements (core's
 * cnn_reduce permutes the reduced dims last and makes the input contiguous,
 * on the device, before calling this; see core/ops/reduce.c).
 *
 * Design.  One block per row (grid-stride over rows); the block's threads
 * stride over the row and combine through shared memory.  Semantics are
 * the CPU's: floating sums, means, products, variances and norms
 * accumulate in double; integer sum/prod in wrapping int64 (exact: modular
 * arithmetic does not depend on the order); max/min/argmax/argmin return
 * the FIRST extreme and the first NaN wins (each thread scans increasing
 * indices; the combine prefers NaN, then the better value, then the lower
 * index).  Variance is two-pass (mean, then squared deviations), divided
 * by R - correction; max/min copy the winning element bit for bit.
 */
#include <math.h>

#include "gpu.h"

struct Ext {
  double v;
  int64_t i; /* -1: none */
};

__device__ __forceinline__ double rld(cnn_dtype dt, const void *base, int64_t i) {
  switch (dt) {
  case CNN_FLOAT32: return ((const float *)base)[i];
  case CNN_FLOAT64: return ((const double *)base)[i];
  case CNN_INT64: return (double)((const int64_t *)base)[i];
  default: return ((const uint8_t *)base)[i];
  }
}
__device__ __forceinline__ int64_t rld_int(cnn_dtype dt, const void *base, int64_t i) {
  return dt == CNN_UINT8 ? ((const uint8_t *)base)[i] : ((const int64_t *)base)[i];
}
__device__ __forceinline__ void rst(cnn_dtype dt, void *base, int64_t i, double v) {
  switch (dt) {
  case CNN_FLOAT32: ((float *)base)[i] = (float)v; break;
  case CNN_FLOAT64: ((double *)base)[i] = v; break;
  default: ((int64_t *)base)[i] = (int64_t)v; break;
  }
}

/* b better than a?  NaN first, then value, then the lower index */
__device__ __forceinline__ bool ext_better(Ext a, Ext b, bool is_min) {
  if (b.i < 0) return false;
  if (a.i < 0) return true;
  bool an = a.v != a.v, bn = b.v != b.v;
  if (an || bn) return bn && (!an || b.i < a.i);
  if (b.v == a.v) return b.i < a.i;
  return is_min ? b.v < a.v : b.v > a.v;
}

/* block-wide sum of one double per thread (all threads call) */
__device__ double block_sum(double v, double *sh) {
  __syncthreads();
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  return sh[0];
}

__device__ int64_t block_int(int64_t v, bool prod, int64_t *sh) {
  __syncthreads();
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) {
      uint64_t a = (uint64_t)sh[threadIdx.x], b = (uint64_t)sh[threadIdx.x + s];
      sh[threadIdx.x] = (int64_t)(prod ? a * b : a + b);
    }
    __syncthreads();
  }
  return sh[0];
}

__device__ Ext block_ext(Ext e, bool is_min, Ext *sh) {
  __syncthreads();
  sh[threadIdx.x] = e;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s && ext_better(sh[threadIdx.x], sh[threadIdx.x + s], is_min))
      sh[threadIdx.x] = sh[threadIdx.x + s];
    __syncthreads();
  }
  return sh[0];
}

/* the p-norm accumulation of the CPU's row_norm */
__device__ __forceinline__ double norm_acc(double acc, double a, double p) {
  if (p == INFINITY) return (a > acc || a != a) ? a : acc;
  if (p == -INFINITY) return (a < acc || a != a) ? a : acc;
  if (p == 0) return acc + (a != 0);
  if (p == 1) return acc + a;
  if (p == 2) return acc + a * a;
  return acc + pow(a, p);
}

struct RowArgs {
  int op;
  cnn_dtype dt, odt;
  int64_t M, R;
  const void *x;
  void *out;
  double p;
};

__device__ void row_ext(const RowArgs &a, int64_t m, bool is_min, Ext *sh) {
  Ext e = {0, -1};
  const int64_t base = m * a.R;
  for (int64_t i = threadIdx.x; i < a.R; i += blockDim.x) {
    Ext c = {rld(a.dt, a.x, base + i), i};
    if (ext_better(e, c, is_min)) e = c;
    if (e.v != e.v) break; /* the first NaN of this thread wins over its later elements */
  }
  e = block_ext(e, is_min, sh);
  if (threadIdx.x) return;
  int64_t best = e.i < 0 ? 0 : e.i;
  if (a.op == CNN_RED_ARGMAX || a.op == CNN_RED_ARGMIN) {
    ((int64_t *)a.out)[m] = best;
    return;
  }
  size_t es = gpu_dtype_size(a.dt);
  const char *src = (const char *)a.x + (base + best) * es;
  char *dst = (char *)a.out + m * es;
  for (size_t k = 0; k < es; k++) dst[k] = src[k];
}

__device__ void row_float(const RowArgs &a, int64_t m, double *sh) {
  const int64_t base = m * a.R;
  double acc = a.op == CNN_RED_PROD ? 1.0 : a.op == CNN_RED_NORM && a.p == -INFINITY ? INFINITY : 0.0;
  for (int64_t i = threadIdx.x; i < a.R; i += blockDim.x) {
    double v = rld(a.dt, a.x, base + i);
    if (a.op == CNN_RED_PROD) acc *= v;
    else if (a.op == CNN_RED_NORM) acc = norm_acc(acc, fabs(v), a.p);
    else acc += v;
  }
  double r;
  if (a.op == CNN_RED_PROD) { /* product tree in shared memory */
    __syncthreads();
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if ((int)threadIdx.x < s) sh[threadIdx.x] *= sh[threadIdx.x + s];
      __syncthreads();
    }
    r = sh[0];
  } else if (a.op == CNN_RED_NORM && isinf(a.p)) {
    __syncthreads();
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if ((int)threadIdx.x < s) sh[threadIdx.x] = norm_acc(sh[threadIdx.x], sh[threadIdx.x + s], a.p);
      __syncthreads();
    }
    r = sh[0];
  } else {
    r = block_sum(acc, sh);
  }
  if (a.op == CNN_RED_VAR || a.op == CNN_RED_STD) {
    double mean = r / (double)a.R, ss = 0;
    for (int64_t i = threadIdx.x; i < a.R; i += blockDim.x) {
      double d = rld(a.dt, a.x, base + i) - mean;
      ss += d * d;
    }
    ss = block_sum(ss, sh);
    r = ss / ((double)a.R - a.p);
    if (a.op == CNN_RED_STD) r = sqrt(r);
  } else if (a.op == CNN_RED_MEAN) {
    r = r / (double)a.R;
  } else if (a.op == CNN_RED_NORM && !isinf(a.p) && a.p != 0 && a.p != 1) {
    r = a.p == 2 ? sqrt(r) : pow(r, 1.0 / a.p);
  }
  if (!threadIdx.x) rst(a.odt, a.out, m, r);
}

__global__ void k_reduce_rows(RowArgs a) {
  __shared__ double sh[GPU_THREADS];
  __shared__ Ext she[GPU_THREADS];
  __shared__ int64_t shi[GPU_THREADS];
  bool integer = a.dt == CNN_INT64 || a.dt == CNN_UINT8;
  for (int64_t m = blockIdx.x; m < a.M; m += gridDim.x) {
    if (a.op == CNN_RED_MAX || a.op == CNN_RED_MIN || a.op == CNN_RED_ARGMAX || a.op == CNN_RED_ARGMIN) {
      row_ext(a, m, a.op == CNN_RED_MIN || a.op == CNN_RED_ARGMIN, she);
    } else if (integer && (a.op == CNN_RED_SUM || a.op == CNN_RED_PROD)) {
      bool prod = a.op == CNN_RED_PROD;
      uint64_t acc = prod ? 1 : 0;
      for (int64_t i = threadIdx.x; i < a.R; i += blockDim.x) {
        uint64_t v = (uint64_t)rld_int(a.dt, a.x, m * a.R + i);
        acc = prod ? acc * v : acc + v;
      }
      int64_t r = block_int((int64_t)acc, prod, shi);
      if (!threadIdx.x) ((int64_t *)a.out)[m] = r;
    } else {
      row_float(a, m, sh);
    }
  }
}

static int reduce(int dev, cnn_reduce_op op, cnn_dtype dt, cnn_dtype odt, int64_t M, int64_t R,
                  const void *x, void *out, double p) {
  static const char *const names[CNN_NREDUCE] = {"sum", "mean", "max", "min", "prod",
                                                 "var", "std", "norm", "argmax", "argmin"};
  const char *name = (unsigned)op < CNN_NREDUCE ? names[op] : "reduce";
  if (dt != CNN_FLOAT32 && dt != CNN_FLOAT64 && dt != CNN_INT64 && dt != CNN_UINT8) {
    gpu_core.set_error("%s: dtype %s is not supported on cuda", name, gpu_core.dtype_name(dt));
    return -1;
  }
  if (odt != CNN_FLOAT32 && odt != CNN_FLOAT64 && odt != CNN_INT64 && odt != dt) {
    gpu_core.set_error("%s: output dtype %s is not supported on cuda", name, gpu_core.dtype_name(odt));
    return -1;
  }
  if (M <= 0) return 0;
  if (gpu_device(name, dev)) return -1;
  RowArgs a = {(int)op, dt, odt, M, R, x, out, p};
  unsigned blocks = M < 65535 * 8 ? (unsigned)M : 65535 * 8;
  k_reduce_rows<<<blocks, GPU_THREADS>>>(a);
  LAUNCH_CHECK(name);
  return 0;
}

void gpu_reduce_register(cnn_backend *be) { be->reduce = reduce; }
