/*
 * index.cu -- index_select, gather and their scatter-add backward passes.
 *
 * Indices are int64, 0-based and validated by core (core/ops/join.c)
 * before any of these run.  index_select sees x as outer x size x inner
 * and copies element by element (one thread per output element; any
 * dtype, moved as bytes of its size).  gather reads x through its strides.
 * scatter (issue 13) assigns, one thread per index entry.
 * The backward passes add with atomicAdd (float32/float64), so repeated
 * indices sum as on the CPU, in a nondeterministic order.  scatter_add
 * also takes int64 (atomicAdd on unsigned long long: two's complement
 * wrap-around, exact) and uint8 (a compare-and-swap loop on the aligned
 * 32-bit word holding the byte, modulo 256) -- the atomicAdd/atomicCAS
 * overloads of the CUDA C++ Programming Guide, "Atomic Functions"; the
 * double one needs sm_60, and the module targets sm_75 and later.
 */
#include "gpu.h"

#define GRID_LOOP(i, n)                                                                            \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                        \
       i += (int64_t)gridDim.x * blockDim.x)

struct Dims {
  int nd;
  int64_t a[CNN_MAX_DIMS], b[CNN_MAX_DIMS], c[CNN_MAX_DIMS];
};

template <typename E>
__global__ void k_index_select(int64_t outer, int64_t size, int64_t k, int64_t inner, const E *x,
                               const int64_t *ix, E *out) {
  int64_t n = outer * k * inner;
  GRID_LOOP(i, n) {
    int64_t in = i % inner, j = i / inner % k, o = i / (inner * k);
    out[i] = x[(o * size + ix[j]) * inner + in];
  }
}

template <typename T>
__global__ void k_index_add(int64_t outer, int64_t size, int64_t k, int64_t inner, const T *g,
                            const int64_t *ix, T *out) {
  int64_t n = outer * k * inner;
  GRID_LOOP(i, n) {
    int64_t in = i % inner, j = i / inner % k, o = i / (inner * k);
    atomicAdd(out + (o * size + ix[j]) * inner + in, g[i]);
  }
}

/* d.a = index shape, d.b = x strides; out contiguous over d.a */
template <typename E>
__global__ void k_gather(Dims d, int64_t n, int dim, const E *x, const int64_t *ix, E *out) {
  GRID_LOOP(i, n) {
    int64_t off = 0, r = i;
    for (int k = d.nd - 1; k >= 0; k--) {
      int64_t pos = r % d.a[k];
      r /= d.a[k];
      off += (k == dim ? ix[i] : pos) * d.b[k];
    }
    out[i] = x[off];
  }
}

/* the output offset of index entry i: its position over d.a (the index
 * shape) with coordinate `dim` replaced by ix[i], in the contiguous d.c */
static __device__ __forceinline__ int64_t scatter_offset(const Dims &d, int64_t i, int dim,
                                                         const int64_t *ix) {
  int64_t off = 0, r = i, stride = 1;
  for (int k = d.nd - 1; k >= 0; k--) {
    int64_t pos = r % d.a[k];
    r /= d.a[k];
    off += (k == dim ? ix[i] : pos) * stride;
    stride *= d.c[k];
  }
  return off;
}

/* *p += v, atomically, for each dtype scatter_add takes */
static __device__ __forceinline__ void atomic_add(float *p, float v) { atomicAdd(p, v); }
static __device__ __forceinline__ void atomic_add(double *p, double v) { atomicAdd(p, v); }
static __device__ __forceinline__ void atomic_add(int64_t *p, int64_t v) {
  atomicAdd((unsigned long long *)p, (unsigned long long)v);
}
static __device__ __forceinline__ void atomic_add(uint8_t *p, uint8_t v) {
  unsigned *word = (unsigned *)((uintptr_t)p & ~(uintptr_t)3);
  unsigned shift = (unsigned)((uintptr_t)p & 3) * 8, old = *word, seen;
  do {
    seen = old;
    unsigned sum = ((seen >> shift) + v) & 0xffu;
    old = atomicCAS(word, seen, (seen & ~(0xffu << shift)) | (sum << shift));
  } while (old != seen);
}

template <typename T>
__global__ void k_scatter_add(Dims d, int64_t n, int dim, const int64_t *ix, const T *src, T *out) {
  GRID_LOOP(i, n) atomic_add(out + scatter_offset(d, i, dim, ix), src[i]);
}

/* scatter (issue 13): out[..] = src[i] */
template <typename E>
__global__ void k_scatter(Dims d, int64_t n, int dim, const int64_t *ix, const E *src, E *out) {
  GRID_LOOP(i, n) out[scatter_offset(d, i, dim, ix)] = src[i];
}

static int float_only(const char *op, cnn_dtype dt) {
  if (dt == CNN_FLOAT32 || dt == CNN_FLOAT64) return 0;
  gpu_core.set_error("%s: dtype %s is not supported on cuda", op, gpu_core.dtype_name(dt));
  return -1;
}

static int index_select(int dev, cnn_dtype dt, int64_t outer, int64_t size, int64_t k,
                        int64_t inner, const void *x, const int64_t *ix, void *out) {
  int64_t n = outer * k * inner;
  if (gpu_device("index_select", dev)) return -1;
  if (!n) return 0;
  unsigned g = gpu_blocks(n);
  switch (gpu_dtype_size(dt)) {
  case 1:
    k_index_select<uint8_t>
        <<<g, GPU_THREADS>>>(outer, size, k, inner, (const uint8_t *)x, ix, (uint8_t *)out);
    break;
  case 2:
    k_index_select<uint16_t>
        <<<g, GPU_THREADS>>>(outer, size, k, inner, (const uint16_t *)x, ix, (uint16_t *)out);
    break;
  case 4:
    k_index_select<uint32_t>
        <<<g, GPU_THREADS>>>(outer, size, k, inner, (const uint32_t *)x, ix, (uint32_t *)out);
    break;
  default:
    k_index_select<uint64_t>
        <<<g, GPU_THREADS>>>(outer, size, k, inner, (const uint64_t *)x, ix, (uint64_t *)out);
    break;
  }
  LAUNCH_CHECK("index_select");
  return 0;
}

static int index_add(int dev, cnn_dtype dt, int64_t outer, int64_t size, int64_t k, int64_t inner,
                     const void *g, const int64_t *ix, void *out) {
  int64_t n = outer * k * inner;
  if (float_only("index_select", dt) || gpu_device("index_select", dev)) return -1;
  if (!n) return 0;
  if (dt == CNN_FLOAT32)
    k_index_add<float>
        <<<gpu_blocks(n), GPU_THREADS>>>(outer, size, k, inner, (const float *)g, ix, (float *)out);
  else
    k_index_add<double><<<gpu_blocks(n), GPU_THREADS>>>(outer, size, k, inner, (const double *)g,
                                                        ix, (double *)out);
  LAUNCH_CHECK("index_select");
  return 0;
}

static int gather(int dev, cnn_dtype dt, int ndim, const int64_t *ishape, int dim, const void *x,
                  const int64_t *xstride, const int64_t *ix, void *out) {
  Dims d = {};
  d.nd = ndim;
  int64_t n = 1;
  for (int k = 0; k < ndim; k++) d.a[k] = ishape[k], d.b[k] = xstride[k], n *= ishape[k];
  if (gpu_device("gather", dev)) return -1;
  if (!n) return 0;
  unsigned g = gpu_blocks(n);
  switch (gpu_dtype_size(dt)) {
  case 1:
    k_gather<uint8_t><<<g, GPU_THREADS>>>(d, n, dim, (const uint8_t *)x, ix, (uint8_t *)out);
    break;
  case 2:
    k_gather<uint16_t><<<g, GPU_THREADS>>>(d, n, dim, (const uint16_t *)x, ix, (uint16_t *)out);
    break;
  case 4:
    k_gather<uint32_t><<<g, GPU_THREADS>>>(d, n, dim, (const uint32_t *)x, ix, (uint32_t *)out);
    break;
  default:
    k_gather<uint64_t><<<g, GPU_THREADS>>>(d, n, dim, (const uint64_t *)x, ix, (uint64_t *)out);
    break;
  }
  LAUNCH_CHECK("gather");
  return 0;
}

template <typename T>
static void launch_scatter_add(const Dims &d, int64_t n, int dim, const int64_t *ix,
                               const void *src, void *out) {
  k_scatter_add<T><<<gpu_blocks(n), GPU_THREADS>>>(d, n, dim, ix, (const T *)src, (T *)out);
}

/* float32, float64, int64 and uint8, as the CPU */
static int scatter_add(int dev, cnn_dtype dt, int ndim, const int64_t *oshape,
                       const int64_t *ishape, int dim, const int64_t *ix, const void *src,
                       void *out) {
  Dims d = {};
  d.nd = ndim;
  int64_t n = 1;
  for (int k = 0; k < ndim; k++) d.a[k] = ishape[k], d.c[k] = oshape[k], n *= ishape[k];
  if (gpu_device("scatter_add", dev)) return -1;
  if (!n) return 0;
  switch (dt) {
  case CNN_FLOAT32: launch_scatter_add<float>(d, n, dim, ix, src, out); break;
  case CNN_FLOAT64: launch_scatter_add<double>(d, n, dim, ix, src, out); break;
  case CNN_INT64: launch_scatter_add<int64_t>(d, n, dim, ix, src, out); break;
  case CNN_UINT8: launch_scatter_add<uint8_t>(d, n, dim, ix, src, out); break;
  default:
    gpu_core.set_error("scatter_add: dtype %s is not supported on cuda", gpu_core.dtype_name(dt));
    return -1;
  }
  LAUNCH_CHECK("scatter_add");
  return 0;
}

/* scatter (issue 13): of repeated indices one write wins, in no set order */
static int scatter(int dev, cnn_dtype dt, int ndim, const int64_t *oshape, const int64_t *ishape,
                   int dim, const int64_t *ix, const void *src, void *out) {
  Dims d = {};
  d.nd = ndim;
  int64_t n = 1;
  for (int k = 0; k < ndim; k++) d.a[k] = ishape[k], d.c[k] = oshape[k], n *= ishape[k];
  if (gpu_device("scatter", dev)) return -1;
  if (!n) return 0;
  unsigned g = gpu_blocks(n);
  switch (gpu_dtype_size(dt)) {
  case 1:
    k_scatter<uint8_t><<<g, GPU_THREADS>>>(d, n, dim, ix, (const uint8_t *)src, (uint8_t *)out);
    break;
  case 2:
    k_scatter<uint16_t><<<g, GPU_THREADS>>>(d, n, dim, ix, (const uint16_t *)src, (uint16_t *)out);
    break;
  case 4:
    k_scatter<uint32_t><<<g, GPU_THREADS>>>(d, n, dim, ix, (const uint32_t *)src, (uint32_t *)out);
    break;
  default:
    k_scatter<uint64_t><<<g, GPU_THREADS>>>(d, n, dim, ix, (const uint64_t *)src, (uint64_t *)out);
    break;
  }
  LAUNCH_CHECK("scatter");
  return 0;
}

void gpu_index_register(cnn_backend *be) {
  be->scatter = scatter;
  be->index_select = index_select;
  be->index_add = index_add;
  be->gather = gather;
  be->scatter_add = scatter_add;
}
