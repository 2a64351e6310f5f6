/*
 * reduce.cu -- reductions of M contiguous rows of R elements (core's
 * cnn_reduce permutes the reduced dims last and makes the input contiguous,
 * on the device, before calling this; see core/ops/reduce.c).
 *
 * Design.  gpu_reduce_plan (reduce_plan.h) picks one of three layouts:
 * one block per row (grid-stride over rows; the block's threads stride
 * over the row and combine through shared memory: k_reduce_rows), one warp
 * per short row (k_reduce_warp_rows), or, for few long rows, each row split
 * over several blocks that write partial results merged by a second pass
 * (k_reduce_split + k_reduce_merge).  The two newer kernels keep their
 * state in reduce_plan.h's gpu_red_part and combine it with its merge
 * rule, which the host test replays grid by grid.  Semantics are
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
#include "reduce_plan.h"

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

/* b better than a?  NaN first, then value, then the lower index (reduce_plan.h) */
__device__ __forceinline__ bool ext_better(Ext a, Ext b, bool is_min) {
  return gpu_ext_better(a.v, a.i, b.v, b.i, is_min);
}

/* block-wide sum of one double per thread (gpu.h) */
__device__ __forceinline__ double block_sum(double v, double *sh) { return gpu_block_sum(v, sh); }

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

/* the p-norm accumulation of the CPU's row_norm (reduce_plan.h) */
__device__ __forceinline__ double norm_acc(double acc, double a, double p) {
  return gpu_norm_acc(acc, a, p);
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
  double acc = a.op == CNN_RED_PROD                       ? 1.0
               : a.op == CNN_RED_NORM && a.p == -INFINITY ? INFINITY
                                                          : 0.0;
  for (int64_t i = threadIdx.x; i < a.R; i += blockDim.x) {
    double v = rld(a.dt, a.x, base + i);
    if (a.op == CNN_RED_PROD)
      acc *= v;
    else if (a.op == CNN_RED_NORM)
      acc = norm_acc(acc, fabs(v), a.p);
    else
      acc += v;
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
      if ((int)threadIdx.x < s)
        sh[threadIdx.x] = norm_acc(sh[threadIdx.x], sh[threadIdx.x + s], a.p);
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
    if (a.op == CNN_RED_MAX || a.op == CNN_RED_MIN || a.op == CNN_RED_ARGMAX ||
        a.op == CNN_RED_ARGMIN) {
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

/* ---- short rows and split rows: gpu_red_part states (reduce_plan.h) ---------------------- */

__device__ __forceinline__ bool red_integer(const RowArgs &a) {
  return a.dt == CNN_INT64 || a.dt == CNN_UINT8;
}

/* element `col` of row m into r */
__device__ __forceinline__ void part_add(const RowArgs &a, gpu_red_part *r, int64_t m,
                                         int64_t col) {
  int64_t at = m * a.R + col;
  bool integer = red_integer(a);
  uint64_t iv = integer ? (uint64_t)rld_int(a.dt, a.x, at) : 0;
  gpu_red_add(r, a.op, integer, a.p, rld(a.dt, a.x, at), iv, col);
}

/* row m's result from its merged state (as k_reduce_rows stores it) */
__device__ void part_store(const RowArgs &a, int64_t m, const gpu_red_part &r) {
  if (gpu_red_is_ext(a.op)) {
    int64_t best = r.ei < 0 ? 0 : r.ei;
    if (a.op == CNN_RED_ARGMAX || a.op == CNN_RED_ARGMIN) {
      ((int64_t *)a.out)[m] = best;
      return;
    }
    size_t es = gpu_dtype_size(a.dt); /* the winning element, bit for bit */
    const char *src = (const char *)a.x + (m * a.R + best) * es;
    char *dst = (char *)a.out + m * es;
    for (size_t k = 0; k < es; k++) dst[k] = src[k];
  } else if (red_integer(a) && (a.op == CNN_RED_SUM || a.op == CNN_RED_PROD)) {
    ((int64_t *)a.out)[m] = (int64_t)r.iacc;
  } else {
    rst(a.odt, a.out, m, gpu_red_final(&r, a.op, a.R, a.p));
  }
}

/* one warp per row (R <= GPU_RED_WARP_MAX), 8 rows per block; lane 0
 * merges its warp's 32 states in lane order */
__global__ void k_reduce_warp_rows(RowArgs a) {
  __shared__ gpu_red_part sh[GPU_RED_THREADS];
  const int64_t w = threadIdx.x / GPU_RED_WARP, lane = threadIdx.x % GPU_RED_WARP;
  for (int64_t pass = 0;; pass++) {
    int64_t m = gpu_red_warp_row(blockIdx.x, w, pass, gridDim.x);
    if (m >= a.M) break; /* whole warps leave together */
    gpu_red_part r = gpu_red_init(a.op, a.p);
    for (int64_t col = lane; col < a.R; col += GPU_RED_WARP) part_add(a, &r, m, col);
    sh[threadIdx.x] = r;
    __syncwarp();
    if (lane == 0) {
      for (int l = 1; l < GPU_RED_WARP; l++)
        gpu_red_merge(&sh[threadIdx.x], &sh[threadIdx.x + l], a.op, red_integer(a), a.p);
      part_store(a, m, sh[threadIdx.x]);
    }
    __syncwarp();
  }
}

/* pass 1 of a split row: block b = (row b / chunks, chunk b % chunks)
 * reduces its chunk into parts[b] (a tree over the block's threads) */
__global__ void k_reduce_split(RowArgs a, gpu_red_plan pl, gpu_red_part *parts) {
  __shared__ gpu_red_part sh[GPU_RED_THREADS];
  const int64_t total = a.M * pl.chunks;
  for (int64_t b = blockIdx.x; b < total; b += gridDim.x) {
    int64_t m = b / pl.chunks, lo, hi;
    gpu_red_chunk(&pl, a.R, b % pl.chunks, &lo, &hi);
    gpu_red_part r = gpu_red_init(a.op, a.p);
    for (int64_t col = lo + threadIdx.x; col < hi; col += blockDim.x) part_add(a, &r, m, col);
    __syncthreads();
    sh[threadIdx.x] = r;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if ((int)threadIdx.x < s)
        gpu_red_merge(&sh[threadIdx.x], &sh[threadIdx.x + s], a.op, red_integer(a), a.p);
      __syncthreads();
    }
    if (!threadIdx.x) parts[b] = sh[0];
  }
}

/* pass 2: one thread per row merges its chunks in order and stores */
__global__ void k_reduce_merge(RowArgs a, int64_t chunks, const gpu_red_part *parts) {
  for (int64_t m = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; m < a.M;
       m += (int64_t)gridDim.x * blockDim.x) {
    gpu_red_part r = parts[m * chunks];
    for (int64_t c = 1; c < chunks; c++)
      gpu_red_merge(&r, &parts[m * chunks + c], a.op, red_integer(a), a.p);
    part_store(a, m, r);
  }
}

/* the device's SM count, asked once per device */
static int sm_count(int dev) {
  static int sms[GPU_MAX_DEVICES];
  if (!sms[dev] &&
      cudaDeviceGetAttribute(&sms[dev], cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    cudaGetLastError();
    sms[dev] = 0;
  }
  return sms[dev] > 0 ? sms[dev] : 1;
}

static int launch_split(const char *name, int dev, const RowArgs &a, const gpu_red_plan &pl) {
  size_t bytes = (size_t)(a.M * pl.chunks) * sizeof(gpu_red_part);
  gpu_red_part *parts = (gpu_red_part *)gpu_scratch(name, bytes, dev);
  if (!parts) return -1;
  k_reduce_split<<<pl.blocks, GPU_RED_THREADS>>>(a, pl, parts);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) {
    k_reduce_merge<<<gpu_blocks(a.M), GPU_THREADS>>>(a, pl.chunks, parts);
    e = cudaGetLastError();
  }
  gpu_free(parts, dev); /* one stream: both passes are ordered before any reuse */
  if (e != cudaSuccess)
    return gpu_fail_fault(name, "CUDA", cudaGetErrorString(e), gpu_cuda_failed(e), "k_reduce_split",
                          __FILE__, __LINE__);
  return 0;
}

static int reduce(int dev, cnn_reduce_op op, cnn_dtype dt, cnn_dtype odt, int64_t M, int64_t R,
                  const void *x, void *out, double p) {
  static const char *const names[CNN_NREDUCE] = {"sum", "mean", "max",  "min",    "prod",
                                                 "var", "std",  "norm", "argmax", "argmin"};
  const char *name = (unsigned)op < CNN_NREDUCE ? names[op] : "reduce";
  if (dt != CNN_FLOAT32 && dt != CNN_FLOAT64 && dt != CNN_INT64 && dt != CNN_UINT8) {
    gpu_core.set_error("%s: dtype %s is not supported on cuda", name, gpu_core.dtype_name(dt));
    return -1;
  }
  if (odt != CNN_FLOAT32 && odt != CNN_FLOAT64 && odt != CNN_INT64 && odt != dt) {
    gpu_core.set_error("%s: output dtype %s is not supported on cuda", name,
                       gpu_core.dtype_name(odt));
    return -1;
  }
  if (M <= 0) return 0;
  if (gpu_device(name, dev)) return -1;
  RowArgs a = {(int)op, dt, odt, M, R, x, out, p};
  gpu_red_plan pl = gpu_reduce_plan(M, R, sm_count(dev));
  if (pl.mode == GPU_RED_SPLIT) return launch_split(name, dev, a, pl);
  if (pl.mode == GPU_RED_WARP_ROWS)
    k_reduce_warp_rows<<<pl.blocks, GPU_RED_THREADS>>>(a);
  else
    k_reduce_rows<<<pl.blocks, GPU_THREADS>>>(a);
  LAUNCH_CHECK(name);
  return 0;
}

void gpu_reduce_register(cnn_backend *be) { be->reduce = reduce; }
