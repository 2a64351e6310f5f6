/*
 * sort.cu -- the sort entry (sort and topk) of the CUDA backend: bitonic
 * sort in shared memory for rows of up to GPU_SORT_TILE entries, sorted
 * tiles merged pass by pass for longer rows (sort_plan.h has the layouts
 * and the per-thread work, replayed on the host by
 * tests/gpu/test_gpu_sort_plan.c).
 *
 * x is outer x D x inner; each of its outer*inner rows (row r: o = r /
 * inner, in = r % inner) is sorted on its own, over entries (key,
 * position) in sort_order.h's total order: the result is the stable
 * sort, deterministic, NaN largest, the CPU's permutation.  The values
 * written are read back from x at the sorted positions (so -0, +0 and
 * NaN payloads are the input's own).  Long rows use two scratch arrays of
 * outer*D*inner entries (16 bytes each) from the caching allocator.
 *
 * Shared memory: GPU_SORT_TILE entries = 32 KiB, static, under the 48 KiB
 * every architecture allows without opting in.  Every thread of a block
 * runs every step of the network (the row-group loop depends on blockIdx
 * only), so the barriers are reached by all.
 */
#include "gpu.h"
#include "sort_plan.h"

#define GRID_LOOP(i, n)                                                                            \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                        \
       i += (int64_t)gridDim.x * blockDim.x)

static __device__ __forceinline__ uint64_t sort_key(float v) { return cnn_sort_key_f64(v); }
static __device__ __forceinline__ uint64_t sort_key(double v) { return cnn_sort_key_f64(v); }
static __device__ __forceinline__ uint64_t sort_key(int64_t v) { return cnn_sort_key_i64(v); }
static __device__ __forceinline__ uint64_t sort_key(uint8_t v) { return v; }

/* element d of row r of x (outer x D x inner) */
static __device__ __forceinline__ int64_t row_elem(int64_t r, int64_t d, int64_t D, int64_t inner) {
  return (r / inner * D + d) * inner + r % inner;
}

/* the bitonic network over the tile (rows of P entries), all threads */
static __device__ void bitonic_tile(gpu_sort_entry *tile, int64_t P) {
  for (int64_t s = 2; s <= P; s <<= 1)
    for (int64_t j = s >> 1; j > 0; j >>= 1) {
      __syncthreads();
      for (int64_t q = threadIdx.x; q < GPU_SORT_TILE / 2; q += blockDim.x)
        gpu_bitonic_step(tile, P, s, j, q);
    }
  __syncthreads();
}

/* TILE layout: rows of D <= GPU_SORT_TILE, GPU_SORT_TILE / P rows per
 * block; the first k entries of each row to values/indices (outer x k x inner) */
template <typename T>
__global__ void k_sort_tile(int64_t rows, int64_t D, int64_t inner, int64_t k, bool desc,
                            const T *x, T *values, int64_t *indices) {
  __shared__ gpu_sort_entry tile[GPU_SORT_TILE];
  int64_t P = gpu_sort_pow2(D), per = GPU_SORT_TILE / P;
  for (int64_t r0 = blockIdx.x * per; r0 < rows; r0 += (int64_t)gridDim.x * per) {
    __syncthreads(); /* the previous group's writes have read the tile */
    for (int64_t t = threadIdx.x; t < GPU_SORT_TILE; t += blockDim.x) {
      int64_t r = r0 + t / P, d = t % P;
      if (r < rows && d < D) {
        tile[t].key = cnn_sort_directed(sort_key(x[row_elem(r, d, D, inner)]), desc);
        tile[t].pos = d;
      } else {
        tile[t] = gpu_sort_pad();
      }
    }
    bitonic_tile(tile, P);
    for (int64_t t = threadIdx.x; t < GPU_SORT_TILE; t += blockDim.x) {
      int64_t r = r0 + t / P, d = t % P;
      if (r >= rows || d >= k) continue;
      int64_t dst = (r / inner * k + d) * inner + r % inner;
      values[dst] = x[row_elem(r, tile[t].pos, D, inner)];
      indices[dst] = tile[t].pos;
    }
  }
}

/* RUNS: tile `t` of each row (positions t*TILE ..) sorted into out (rows x D) */
template <typename T>
__global__ void k_sort_runs(int64_t rows, int64_t D, int64_t inner, bool desc, const T *x,
                            gpu_sort_entry *out) {
  __shared__ gpu_sort_entry tile[GPU_SORT_TILE];
  int64_t tiles = (D + GPU_SORT_TILE - 1) / GPU_SORT_TILE;
  for (int64_t b = blockIdx.x; b < rows * tiles; b += gridDim.x) {
    int64_t r = b / tiles, first = b % tiles * GPU_SORT_TILE;
    int64_t len = D - first < GPU_SORT_TILE ? D - first : GPU_SORT_TILE;
    __syncthreads();
    for (int64_t t = threadIdx.x; t < GPU_SORT_TILE; t += blockDim.x) {
      if (t < len) {
        tile[t].key = cnn_sort_directed(sort_key(x[row_elem(r, first + t, D, inner)]), desc);
        tile[t].pos = first + t;
      } else {
        tile[t] = gpu_sort_pad();
      }
    }
    bitonic_tile(tile, GPU_SORT_TILE);
    for (int64_t t = threadIdx.x; t < len; t += blockDim.x) out[r * D + first + t] = tile[t];
  }
}

/* MERGE: one pass, runs of w in src to runs of 2w in dst (rows x D) */
__global__ void k_merge_pass(int64_t rows, int64_t D, int64_t w, const gpu_sort_entry *src,
                             gpu_sort_entry *dst) {
  int64_t per_row = (D + GPU_SORT_ITEMS - 1) / GPU_SORT_ITEMS;
  GRID_LOOP(c, rows * per_row) {
    int64_t r = c / per_row;
    gpu_merge_items(src + r * D, dst + r * D, D, w, c % per_row * GPU_SORT_ITEMS);
  }
}

/* the first k sorted entries of each row (rows x D) to values/indices */
template <typename T>
__global__ void k_sort_write(int64_t rows, int64_t D, int64_t inner, int64_t k,
                             const gpu_sort_entry *sorted, const T *x, T *values,
                             int64_t *indices) {
  GRID_LOOP(e, rows * k) {
    int64_t r = e / k, d = e % k, pos = sorted[r * D + d].pos;
    int64_t dst = (r / inner * k + d) * inner + r % inner;
    values[dst] = x[row_elem(r, pos, D, inner)];
    indices[dst] = pos;
  }
}

static unsigned capped_blocks(int64_t n) {
  return (unsigned)(n < 1 ? 1 : n > 65535 * 8 ? 65535 * 8 : n);
}

/* rows longer than a tile: sorted tiles, merge passes, the first k out */
template <typename T>
static int sort_long(int dev, int64_t rows, int64_t D, int64_t inner, int64_t k, bool desc,
                     const T *x, T *values, int64_t *indices) {
  size_t bytes = (size_t)(rows * D) * sizeof(gpu_sort_entry);
  gpu_sort_entry *a = (gpu_sort_entry *)gpu_scratch("sort", bytes, dev);
  gpu_sort_entry *b = a ? (gpu_sort_entry *)gpu_scratch("sort", bytes, dev) : NULL;
  if (!b) {
    gpu_free(a, dev);
    return -1;
  }
  int64_t tiles = (D + GPU_SORT_TILE - 1) / GPU_SORT_TILE;
  k_sort_runs<T><<<capped_blocks(rows * tiles), GPU_SORT_THREADS>>>(rows, D, inner, desc, x, a);
  for (int64_t w = GPU_SORT_TILE; w < D; w *= 2) {
    int64_t chunks = rows * ((D + GPU_SORT_ITEMS - 1) / GPU_SORT_ITEMS);
    k_merge_pass<<<gpu_blocks(chunks), GPU_THREADS>>>(rows, D, w, a, b);
    gpu_sort_entry *t = a;
    a = b, b = t;
  }
  k_sort_write<T><<<gpu_blocks(rows * k), GPU_THREADS>>>(rows, D, inner, k, a, x, values, indices);
  cudaError_t e = cudaGetLastError();
  gpu_free(a, dev), gpu_free(b, dev); /* one stream: the kernels run before any reuse */
  if (e != cudaSuccess)
    return gpu_fail_fault("sort", "CUDA", cudaGetErrorString(e), gpu_cuda_failed(e),
                          "the merge sort kernels", __FILE__, __LINE__);
  return 0;
}

template <typename T>
static int launch_sort(int dev, int64_t outer, int64_t D, int64_t inner, int64_t k, bool desc,
                       const void *x, void *values, int64_t *indices) {
  int64_t rows = outer * inner;
  if (D > GPU_SORT_TILE)
    return sort_long<T>(dev, rows, D, inner, k, desc, (const T *)x, (T *)values, indices);
  int64_t per = GPU_SORT_TILE / gpu_sort_pow2(D);
  k_sort_tile<T><<<capped_blocks((rows + per - 1) / per), GPU_SORT_THREADS>>>(
      rows, D, inner, k, desc, (const T *)x, (T *)values, indices);
  LAUNCH_CHECK("sort");
  return 0;
}

static int sort_rows(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int64_t k,
                     bool descending, const void *x, void *values, int64_t *indices) {
  if (gpu_device("sort", dev)) return -1;
  if (outer * D * inner == 0 || k == 0) return 0;
  switch (dt) {
  case CNN_FLOAT32:
    return launch_sort<float>(dev, outer, D, inner, k, descending, x, values, indices);
  case CNN_FLOAT64:
    return launch_sort<double>(dev, outer, D, inner, k, descending, x, values, indices);
  case CNN_INT64:
    return launch_sort<int64_t>(dev, outer, D, inner, k, descending, x, values, indices);
  case CNN_UINT8:
    return launch_sort<uint8_t>(dev, outer, D, inner, k, descending, x, values, indices);
  default:
    gpu_core.set_error("sort: dtype %s is not supported on cuda", gpu_core.dtype_name(dt));
    return -1;
  }
}

void gpu_sort_register(cnn_backend *be) { be->sort = sort_rows; }
