/*
 * sort.cu -- the sort entry (sort and topk) of the CUDA backend: a per-row
 * rank kernel.
 *
 * x is outer x D x inner; each of its outer*inner rows is sorted on its
 * own.  One thread per element computes its rank in its row -- how many
 * elements of the row come before it in sort_order.h's total order of
 * (key, position) -- and, when the rank is below k, writes itself to
 * that output position.  The order is a total one, so the ranks of a row
 * are a permutation: no two threads write the same output, and the result
 * is the stable sort, deterministic, with NaN largest, as on the CPU.
 * The work is D comparisons per element (D^2 per row): small for class
 * scores (topk over 1000 classes), slow for rows of millions, where a
 * merge sort would be the next step.
 */
#include "gpu.h"
#include "sort_order.h"

#define GRID_LOOP(i, n)                                                                            \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                        \
       i += (int64_t)gridDim.x * blockDim.x)

static __device__ __forceinline__ uint64_t sort_key(float v) { return cnn_sort_key_f64(v); }
static __device__ __forceinline__ uint64_t sort_key(double v) { return cnn_sort_key_f64(v); }
static __device__ __forceinline__ uint64_t sort_key(int64_t v) { return cnn_sort_key_i64(v); }
static __device__ __forceinline__ uint64_t sort_key(uint8_t v) { return v; }

/* x: outer x D x inner; values, indices: outer x k x inner */
template <typename T>
__global__ void k_sort_rank(int64_t outer, int64_t D, int64_t inner, int64_t k, bool desc,
                            const T *x, T *values, int64_t *indices) {
  int64_t n = outer * D * inner;
  GRID_LOOP(e, n) {
    int64_t in = e % inner, d = e / inner % D, o = e / (inner * D);
    const T *row = x + o * D * inner + in;
    uint64_t key = cnn_sort_directed(sort_key(row[d * inner]), desc);
    int64_t rank = 0;
    for (int64_t j = 0; j < D; j++)
      rank += cnn_sort_before(cnn_sort_directed(sort_key(row[j * inner]), desc), j, key, d);
    if (rank < k) {
      int64_t dst = (o * k + rank) * inner + in;
      values[dst] = row[d * inner];
      indices[dst] = d;
    }
  }
}

template <typename T>
static void launch_sort(int64_t outer, int64_t D, int64_t inner, int64_t k, bool desc,
                        const void *x, void *values, int64_t *indices) {
  k_sort_rank<T><<<gpu_blocks(outer * D * inner), GPU_THREADS>>>(
      outer, D, inner, k, desc, (const T *)x, (T *)values, indices);
}

static int sort_rows(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int64_t k,
                     bool descending, const void *x, void *values, int64_t *indices) {
  if (gpu_device("sort", dev)) return -1;
  if (outer * D * inner == 0 || k == 0) return 0;
  switch (dt) {
  case CNN_FLOAT32: launch_sort<float>(outer, D, inner, k, descending, x, values, indices); break;
  case CNN_FLOAT64: launch_sort<double>(outer, D, inner, k, descending, x, values, indices); break;
  case CNN_INT64: launch_sort<int64_t>(outer, D, inner, k, descending, x, values, indices); break;
  case CNN_UINT8: launch_sort<uint8_t>(outer, D, inner, k, descending, x, values, indices); break;
  default:
    gpu_core.set_error("sort: dtype %s is not supported on cuda", gpu_core.dtype_name(dt));
    return -1;
  }
  LAUNCH_CHECK("sort");
  return 0;
}

void gpu_sort_register(cnn_backend *be) { be->sort = sort_rows; }
