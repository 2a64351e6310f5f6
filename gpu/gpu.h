/*
 * gpu.h -- private header of gpu/: what the CUDA files of libcnn_cuda.so
 * share.  Nothing outside gpu/ includes it (core sees only core/backend.h).
 *
 * Errors.  The module is dlopen()ed by an executable that need not export
 * its symbols, so core hands it cnn_core_api at init; gpu_fail() formats
 * "<op>: <library> error <what> (<file>:<line>)" through it.  Every CUDA,
 * cuDNN and cuBLAS status goes through the CHECK macros below, which return
 * -1 from the calling function (so they are used in functions returning
 * int); nothing here exits or aborts.
 *
 * Streams.  Everything runs on the legacy default stream of the current
 * device: kernels, cuBLAS and cuDNN calls are ordered with each other and
 * with the synchronous cudaMemcpy that reads results back, and a block
 * freed into the caching allocator can be reused by the next op without an
 * event (it is ordered after every use of the old tensor).  gpu_device()
 * makes `dev` current before each entry's work.
 *
 * Kernels use grid-stride loops over int64 indices; gpu_blocks() caps the
 * grid.  Per-dtype code is a C++ template per kernel instantiated for
 * float and double (and the integer types where the CPU supports them),
 * chosen by one switch in each launcher -- no macro-generated files.
 */
#ifndef CNN_GPU_H
#define CNN_GPU_H

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdint.h>

#include "backend.h"
#include "recover.h"
#include "status.h"

#define GPU_MAX_DEVICES 16
#define GPU_THREADS     256

/* core's entry points (set by cnn_cuda_backend_init) */
extern cnn_core_api gpu_core;

/* element size of a dtype (core's cnn_dtype_size, which the module cannot call) */
static inline __host__ __device__ size_t gpu_dtype_size(cnn_dtype dt) {
  return dt == CNN_FLOAT64 || dt == CNN_INT64 ? 8 : dt == CNN_FLOAT32 ? 4 : dt == CNN_UINT8 ? 1 : 2;
}

/* "<op>: <lib> error: <msg> (in <what> at <file>:<line>)<advice>"; returns -1.
 * The advice (recover.h) says when the context is broken for good. */
int gpu_fail(const char *op, const char *lib, const char *msg, const char *what, const char *file,
             int line);
int gpu_fail_fault(const char *op, const char *lib, const char *msg, gpu_fault f, const char *what,
                   const char *file, int line);
/* classify a failed call and clear the runtime's last error, so a later,
 * unrelated launch does not report this one (a sticky error stays: the
 * runtime keeps it until the process ends) */
gpu_fault gpu_cuda_failed(cudaError_t e);
gpu_fault gpu_cublas_failed(cublasStatus_t s);
gpu_fault gpu_cudnn_failed(cudnnStatus_t s);
const char *gpu_cublas_str(cublasStatus_t s);

/* one status check: on failure classify it (clearing the runtime's last
 * error), set the message and return -1 from the calling function */
#define GPU_LIB_CHECK(op, lib, status_t, ok, failed, str, call)                                    \
  do {                                                                                             \
    status_t e_ = (call);                                                                          \
    if (e_ != ok) return gpu_fail_fault(op, lib, str(e_), failed(e_), #call, __FILE__, __LINE__);  \
  } while (0)
#define CUDA_CHECK(op, call)                                                                       \
  GPU_LIB_CHECK(op, "CUDA", cudaError_t, cudaSuccess, gpu_cuda_failed, cudaGetErrorString, call)
#define CUDNN_CHECK(op, call)                                                                      \
  GPU_LIB_CHECK(op, "cuDNN", cudnnStatus_t, CUDNN_STATUS_SUCCESS, gpu_cudnn_failed,                \
                cudnnGetErrorString, call)
#define CUBLAS_CHECK(op, call)                                                                     \
  GPU_LIB_CHECK(op, "cuBLAS", cublasStatus_t, CUBLAS_STATUS_SUCCESS, gpu_cublas_failed,            \
                gpu_cublas_str, call)
/* The same checks for library calls that may allocate device memory of
 * their own (cuBLAS's workspace, cuDNN's internal buffers): on a MEMORY
 * fault our cache on `dev` is released and `call` runs ONCE more
 * (recover.h); `call` is evaluated at most twice. */
#define GPU_LIB_CHECK_RETRY(op, dev, lib, status_t, ok, failed, str, call)                         \
  do {                                                                                             \
    status_t e_ = (call);                                                                          \
    if (e_ != ok && gpu_fault_retry(failed(e_))) {                                                 \
      gpu_release_cached(dev);                                                                     \
      e_ = (call);                                                                                 \
    }                                                                                              \
    if (e_ != ok) return gpu_fail_fault(op, lib, str(e_), failed(e_), #call, __FILE__, __LINE__);  \
  } while (0)
#define CUBLAS_CHECK_RETRY(op, dev, call)                                                          \
  GPU_LIB_CHECK_RETRY(op, dev, "cuBLAS", cublasStatus_t, CUBLAS_STATUS_SUCCESS, gpu_cublas_failed, \
                      gpu_cublas_str, call)
#define CUDNN_CHECK_RETRY(op, dev, call)                                                           \
  GPU_LIB_CHECK_RETRY(op, dev, "cuDNN", cudnnStatus_t, CUDNN_STATUS_SUCCESS, gpu_cudnn_failed,     \
                      cudnnGetErrorString, call)
/* after a <<<...>>> launch: configuration errors surface here */
#define LAUNCH_CHECK(op) CUDA_CHECK(op, cudaGetLastError())

/* make `dev` current; -1 with an error naming op */
int gpu_device(const char *op, int dev);
/* per-device library handles, created on first use (NULL + error) */
cublasHandle_t gpu_cublas(const char *op, int dev);
cudnnHandle_t gpu_cudnn(const char *op, int dev);

/* cuDNN 9 statuses are a category (multiple of 1000) plus a detail
 * (CUDNN_STATUS_NOT_SUPPORTED_SHAPE = 3002, ...; cudnn_graph.h): compare
 * categories, never the bare enum, when a status selects a fallback. */
static inline bool gpu_cudnn_is(cudnnStatus_t st, cudnnStatus_t category) {
  return CUDNN_STATUS_CATEGORY((int)st) == (int)category;
}

/* Element conversions of the kernels that also take float16/bfloat16:
 * gpu_widen loads one element as float (half types) or itself; gpu_narrow
 * stores a double accumulator, rounding to nearest even (half types go
 * through float, as the CPU's cnn_store_double).  gpu_acc<T>::type is the
 * accumulator: double for float/double (as the CPU oracles), float for the
 * half types (the precision their tensor-core paths use). */
static __device__ __forceinline__ float gpu_widen(__half v) { return __half2float(v); }
static __device__ __forceinline__ float gpu_widen(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ float gpu_widen(float v) { return v; }
static __device__ __forceinline__ double gpu_widen(double v) { return v; }
template <typename T> struct gpu_acc { typedef double type; };
template <> struct gpu_acc<__half> { typedef float type; };
template <> struct gpu_acc<__nv_bfloat16> { typedef float type; };
template <typename T> static __device__ __forceinline__ T gpu_narrow(double v) { return (T)v; }
template <> __device__ __forceinline__ __half gpu_narrow<__half>(double v) {
  return __float2half_rn((float)v);
}
template <> __device__ __forceinline__ __nv_bfloat16 gpu_narrow<__nv_bfloat16>(double v) {
  return __float2bfloat16_rn((float)v);
}

/* Block-wide sum / maximum of one double per thread over sh[blockDim.x]
 * (a power of two, at most GPU_THREADS); every thread of the block must
 * call, and every thread gets the result.  The maximum ignores NaN (a > m
 * is false for it), as the CPU's row loops do. */
static __device__ __forceinline__ double gpu_block_sum(double v, double *sh) {
  __syncthreads();
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  return sh[0];
}
static __device__ __forceinline__ double gpu_block_max(double v, double *sh) {
  __syncthreads();
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s && sh[threadIdx.x + s] > sh[threadIdx.x])
      sh[threadIdx.x] = sh[threadIdx.x + s];
    __syncthreads();
  }
  return sh[0];
}

/* blocks for n elements at GPU_THREADS per block (grid-stride loops) */
static inline unsigned gpu_blocks(int64_t n) {
  int64_t b = (n + GPU_THREADS - 1) / GPU_THREADS;
  if (b < 1) b = 1;
  if (b > 65535 * 8) b = 65535 * 8;
  return (unsigned)b;
}

/* ---- allocator.cu ---- */
void *gpu_alloc(size_t nbytes, int dev);
void gpu_free(void *p, int dev);
/* scratch (workspace) from the caching allocator, released with gpu_free */
void *gpu_scratch(const char *op, size_t nbytes, int dev);
void gpu_empty_cache(void);
/* bytes lost to rounding and reuse in dev's live blocks */
int gpu_memory_waste(int dev, int64_t *waste);
/* give dev's cached blocks back to the driver (a library's allocation failed) */
void gpu_release_cached(int dev);
int gpu_memory_info(int dev, int64_t *cached, int64_t *reserved, int64_t *free_b, int64_t *total_b);
void *gpu_alloc_pinned(size_t nbytes);
void gpu_free_pinned(void *p);
int gpu_copy_h2d_async(void *dst, const void *src, size_t n, int dev);

/* ---- the op entries, one group per file (signatures as in backend.h) ---- */
void gpu_elementwise_register(cnn_backend *be); /* elementwise.cu */
void gpu_reduce_register(cnn_backend *be);      /* reduce.cu */
void gpu_blas_register(cnn_backend *be);        /* blas.cu */
void gpu_conv_register(cnn_backend *be);        /* cudnn_conv.cu */
void gpu_ops_register(cnn_backend *be);         /* cudnn_ops.cu */
void gpu_pool_register(cnn_backend *be);        /* pool.cu */
void gpu_loss_register(cnn_backend *be);        /* loss.cu */
void gpu_index_register(cnn_backend *be);       /* index.cu */
void gpu_optim_register(cnn_backend *be);       /* optim.cu */
void gpu_sort_register(cnn_backend *be);        /* sort.cu (issue 13) */
void gpu_scan_register(cnn_backend *be);        /* scan.cu (issue 13) */
void gpu_norm_register(cnn_backend *be);        /* norm.cu (helper "norm") */
void gpu_resize_register(cnn_backend *be);      /* resize.cu (helper "norm") */
void gpu_conv_set_benchmark(bool on);           /* cudnn_conv.cu */
/* elementwise.cu: y[0..n) = op(y) in place, contiguous (the fused
 * convolution's activation where cuDNN does not fuse it) */
int gpu_unary_inplace(int dev, cnn_unary_op op, cnn_dtype dt, int64_t n, void *y, double p0,
                      double p1);

/* cudnn_conv.cu: one direction of a convolution with symmetric padding
 * through cuDNN and the algorithm cache: a = x or dy, b = w or x, out =
 * y, dx or dw (as in run()); conv_pad.cu: the same for asymmetric padding,
 * over a padded copy of the input */
enum { GPU_CONV_FWD = 0, GPU_CONV_BWD_DATA = 1, GPU_CONV_BWD_FILTER = 2 };
int gpu_cudnn_conv(int dev, cnn_dtype dt, const cnn_conv_shape *s, int dir, const void *a,
                   const void *b, void *out);
int gpu_conv_padded(int dev, cnn_dtype dt, const cnn_conv_shape *s, int dir, const void *a,
                    const void *b, void *out);

/* direct_conv.cu: the teaching kernel (float32/float64, groups, dilation) */
int gpu_direct_conv2d_forward(int dev, cnn_dtype dt, const cnn_conv_shape *s, const void *x,
                              const void *w, const void *b, void *y);
int gpu_direct_conv2d_backward_data(int dev, cnn_dtype dt, const cnn_conv_shape *s, const void *dy,
                                    const void *w, void *dx);
int gpu_direct_conv2d_backward_weight(int dev, cnn_dtype dt, const cnn_conv_shape *s,
                                      const void *dy, const void *x, void *dw, void *db);

/* cudnn_ops.cu: per-channel sums over N x C x L (used by batch norm and
 * conv bias gradients): out1[c] = sum dy, out2[c] = sum dy * (x - mean[c]) * invstd[c]
 * (out2 skipped when x is NULL) */
int gpu_channel_sums(const char *op, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                     const void *x, const void *mean, const void *invstd, void *out1, void *out2);

#endif
