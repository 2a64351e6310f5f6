/*
 * backend.cu -- the entry point of libcnn_cuda.so: cnn_cuda_backend_init()
 * probes the driver and the devices, and fills the backend table (core's
 * core/backend.h) from the per-file register functions.  Also here: the
 * error formatting used by the CHECK macros, the per-device cuBLAS/cuDNN
 * handles, device management, host<->device copies, events and the
 * version lines of `cnnsh --version` (cnn_cuda_version_info, callable
 * without a device: it reports what the module was built against and what
 * the loaded libraries say).
 *
 * Invariants: init runs once (core calls it under pthread_once); the table
 * is static and complete before it is returned; handles are created lazily
 * per device, under a mutex, and live until the process ends: nothing
 * destroys them (nor the convolution cache's descriptors), since CUDA
 * calls from exit handlers may run after the runtime has been torn down,
 * and the driver reclaims a process's handles and memory when it exits.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"

cnn_core_api gpu_core;
static cnn_backend table;
static int ndevices;
static cublasHandle_t cublas_h[GPU_MAX_DEVICES];
static cudnnHandle_t cudnn_h[GPU_MAX_DEVICES];
static pthread_mutex_t handle_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- errors ----------------------------------------------------------------------- */

int gpu_fail(const char *op, const char *lib, const char *msg, const char *what, const char *file,
             int line) {
  const char *base = strrchr(file, '/');
  if (gpu_core.set_error)
    gpu_core.set_error("%s: %s error: %s (in %s at %s:%d)", op, lib, msg, what,
                       base ? base + 1 : file, line);
  return -1;
}

int gpu_fail_fault(const char *op, const char *lib, const char *msg, gpu_fault f, const char *what,
                   const char *file, int line) {
  const char *base = strrchr(file, '/');
  if (gpu_core.set_error)
    gpu_core.set_error("%s: %s error: %s (in %s at %s:%d)%s", op, lib, msg, what,
                       base ? base + 1 : file, line, gpu_fault_advice(f));
  return -1;
}

gpu_fault gpu_cuda_failed(cudaError_t e) {
  cudaGetLastError();
  return gpu_cuda_fault(e);
}

gpu_fault gpu_cublas_failed(cublasStatus_t s) { return gpu_cublas_fault(s, cudaGetLastError()); }

gpu_fault gpu_cudnn_failed(cudnnStatus_t s) { return gpu_cudnn_fault(s, cudaGetLastError()); }

const char *gpu_cublas_str(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  default: return "unknown cuBLAS status";
  }
}

/* ---- devices and handles ------------------------------------------------------------- */

int gpu_device(const char *op, int dev) {
  if (dev < 0 || dev >= ndevices) {
    gpu_core.set_error("%s: cuda:%d does not exist (%d device%s)", op, dev, ndevices,
                       ndevices == 1 ? "" : "s");
    return -1;
  }
  CUDA_CHECK(op, cudaSetDevice(dev));
  return 0;
}

/* ---- handle creation: our cache released and one more try when it fails ------ */

typedef struct {
  int dev;
  cublasStatus_t blas;
  cudnnStatus_t dnn;
} handle_try;

/* A handle that cannot be created is treated as out of memory (its
 * creation allocates device memory; cublasCreate reports a failed
 * allocation as ALLOC_FAILED or NOT_INITIALIZED), unless the context is
 * broken for good: then there is nothing to retry. */
static gpu_fault creation_fault(gpu_fault f) {
  return f == GPU_FAULT_NONE || f == GPU_FAULT_STICKY ? f : GPU_FAULT_MEMORY;
}
static gpu_fault cublas_attempt(void *ctx) {
  handle_try *t = (handle_try *)ctx;
  t->blas = cublasCreate(&cublas_h[t->dev]);
  return t->blas == CUBLAS_STATUS_SUCCESS ? GPU_FAULT_NONE
                                          : creation_fault(gpu_cublas_failed(t->blas));
}
static gpu_fault cudnn_attempt(void *ctx) {
  handle_try *t = (handle_try *)ctx;
  t->dnn = cudnnCreate(&cudnn_h[t->dev]);
  return t->dnn == CUDNN_STATUS_SUCCESS ? GPU_FAULT_NONE : creation_fault(gpu_cudnn_failed(t->dnn));
}
static void handle_release(void *ctx) { gpu_release_cached(((handle_try *)ctx)->dev); }

/* cuBLAS's workspace from our allocator (cublasSetWorkspace): the size
 * the cuBLAS documentation recommends, 32 MiB on Hopper and later, 4 MiB
 * before; our blocks are 512-byte aligned (cuBLAS asks for 256).  Without
 * it cuBLAS allocates its own pool, which our cache cannot give back when
 * memory runs short.  If ours cannot be had, cuBLAS keeps its default.
 * The block stays live as long as the handle: until the process ends. */

static void give_cublas_workspace(int dev) {
  cudaDeviceProp p;
  size_t size = (size_t)4 << 20;
  if (cudaGetDeviceProperties(&p, dev) == cudaSuccess && p.major >= 9)
    size = (size_t)32 << 20;
  else
    cudaGetLastError();
  void *ws = gpu_alloc(size, dev);
  if (!ws) return; /* the allocation's message is dropped: cuBLAS still works */
  if (cublasSetWorkspace(cublas_h[dev], ws, size) != CUBLAS_STATUS_SUCCESS) {
    cudaGetLastError();
    gpu_free(ws, dev);
  }
}

static int make_cublas(const char *op, int dev) {
  handle_try t = {dev, CUBLAS_STATUS_SUCCESS, CUDNN_STATUS_SUCCESS};
  gpu_fault f = gpu_retry_once(cublas_attempt, handle_release, &t);
  if (f != GPU_FAULT_NONE)
    return gpu_fail_fault(op, "cuBLAS", gpu_cublas_str(t.blas), f, "cublasCreate", __FILE__,
                          __LINE__);
  give_cublas_workspace(dev);
  return 0;
}

static int make_cudnn(const char *op, int dev) {
  handle_try t = {dev, CUBLAS_STATUS_SUCCESS, CUDNN_STATUS_SUCCESS};
  gpu_fault f = gpu_retry_once(cudnn_attempt, handle_release, &t);
  if (f != GPU_FAULT_NONE)
    return gpu_fail_fault(op, "cuDNN", cudnnGetErrorString(t.dnn), f, "cudnnCreate", __FILE__,
                          __LINE__);
  return 0;
}

cublasHandle_t gpu_cublas(const char *op, int dev) {
  if (gpu_device(op, dev)) return NULL;
  pthread_mutex_lock(&handle_mu);
  if (!cublas_h[dev]) make_cublas(op, dev);
  cublasHandle_t h = cublas_h[dev];
  pthread_mutex_unlock(&handle_mu);
  return h;
}

cudnnHandle_t gpu_cudnn(const char *op, int dev) {
  if (gpu_device(op, dev)) return NULL;
  pthread_mutex_lock(&handle_mu);
  if (!cudnn_h[dev]) make_cudnn(op, dev);
  cudnnHandle_t h = cudnn_h[dev];
  pthread_mutex_unlock(&handle_mu);
  return h;
}

static int device_count(void) { return ndevices; }

static int set_device(int dev) { return gpu_device("set_device", dev); }

static int synchronize(int dev) {
  if (gpu_device("synchronize", dev)) return -1;
  CUDA_CHECK("synchronize", cudaDeviceSynchronize());
  return 0;
}

/* ---- copies (synchronous; the default stream orders them after kernels) ---------------- */

static int copy_kind(const char *op, void *dst, const void *src, size_t n, int dev,
                     cudaMemcpyKind kind) {
  if (!n) return 0;
  if (gpu_device(op, dev)) return -1;
  CUDA_CHECK(op, cudaMemcpy(dst, src, n, kind));
  return 0;
}

static int copy_h2d(void *dst, const void *src, size_t n, int dev) {
  return copy_kind("to(cuda)", dst, src, n, dev, cudaMemcpyHostToDevice);
}
static int copy_d2h(void *dst, const void *src, size_t n, int dev) {
  return copy_kind("to(cpu)", dst, src, n, dev, cudaMemcpyDeviceToHost);
}
static int copy_d2d(void *dst, const void *src, size_t n, int dev) {
  return copy_kind("copy_", dst, src, n, dev, cudaMemcpyDeviceToDevice);
}

/* asynchronous host -> device copies live in allocator.cu, next to the
 * pinned blocks they read (declaration to move into gpu.h) */

/* ---- events (timers) -------------------------------------------------------------------- */

/* Timers (core/timer.c): an event with timing enabled, recorded on the legacy
 * default stream that every op uses; never waited for here.  Destroying an
 * event still in flight is allowed (its resources go when it completes). */
static void *event_record(int dev) {
  cudaEvent_t ev = NULL;
  if (gpu_device("timer", dev)) return NULL;
  cudaError_t e = cudaEventCreate(&ev);
  if (e != cudaSuccess) {
    gpu_fail("timer", "CUDA", cudaGetErrorString(e), "cudaEventCreate", __FILE__, __LINE__);
    return NULL;
  }
  e = cudaEventRecord(ev, 0);
  if (e != cudaSuccess) {
    cudaEventDestroy(ev);
    gpu_fail("timer", "CUDA", cudaGetErrorString(e), "cudaEventRecord", __FILE__, __LINE__);
    return NULL;
  }
  return (void *)ev;
}

/* waits for `end` only (start precedes it on the same stream) */
static int event_elapsed(void *start, void *end, double *ms) {
  float f = 0;
  CUDA_CHECK("timer", cudaEventSynchronize((cudaEvent_t)end));
  CUDA_CHECK("timer", cudaEventElapsedTime(&f, (cudaEvent_t)start, (cudaEvent_t)end));
  *ms = f;
  return 0;
}

static void event_free(void *ev) {
  if (ev) cudaEventDestroy((cudaEvent_t)ev);
}

/* ---- versions ------------------------------------------------------------------------------ */

static char version_buf[768];

static void device_line(char *buf, size_t n) {
  cudaDeviceProp p;
  if (ndevices > 0 && cudaGetDeviceProperties(&p, 0) == cudaSuccess)
    snprintf(buf, n, "\ncuda:0 %.200s, compute capability %d.%d, %.1f GiB (%d device%s)", p.name,
             p.major, p.minor, p.totalGlobalMem / 1073741824.0, ndevices, ndevices == 1 ? "" : "s");
  else
    buf[0] = 0;
}

/* Exported: lines about the module, callable without a GPU. */
extern "C" __attribute__((visibility("default"))) const char *cnn_cuda_version_info(void) {
  int rt = 0, drv = 0, cublas_major = 0, cublas_minor = 0, cublas_patch = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  cublasGetProperty(MAJOR_VERSION, &cublas_major);
  cublasGetProperty(MINOR_VERSION, &cublas_minor);
  cublasGetProperty(PATCH_LEVEL, &cublas_patch);
  size_t cudnn_rt = cudnnGetVersion();
  char dev[320];
  device_line(dev, sizeof dev);
  snprintf(version_buf, sizeof version_buf,
           "cuda module: libcnn_cuda.so built with CUDA %d.%d, cuDNN %d.%d.%d, cuBLAS %d.%d.%d\n"
           "cuda libraries loaded: CUDA runtime %d.%d, cuDNN %zu.%zu.%zu, cuBLAS %d.%d.%d, "
           "driver %s%d.%d%s",
           CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, CUDNN_MAJOR, CUDNN_MINOR,
           CUDNN_PATCHLEVEL, CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH, rt / 1000,
           rt % 1000 / 10, cudnn_rt / 10000, cudnn_rt % 10000 / 100, cudnn_rt % 100, cublas_major,
           cublas_minor, cublas_patch, drv ? "" : "none (", drv / 1000, drv % 1000 / 10,
           drv ? "" : ")");
  strncat(version_buf, dev, sizeof version_buf - strlen(version_buf) - 1);
  return version_buf;
}

static const char *version_info(void) { return cnn_cuda_version_info(); }

/* ---- init ------------------------------------------------------------------------------------ */

static void fill_table(void) {
  table.name = "cuda";
  table.half = true;
  table.alloc = gpu_alloc;
  table.free = gpu_free;
  table.alloc_pinned = gpu_alloc_pinned;
  table.free_pinned = gpu_free_pinned;
  table.copy_h2d = copy_h2d;
  table.copy_d2h = copy_d2h;
  table.copy_d2d = copy_d2d;
  table.copy_h2d_async = gpu_copy_h2d_async;
  table.synchronize = synchronize;
  table.device_count = device_count;
  table.set_device = set_device;
  table.memory_info = gpu_memory_info;
  table.empty_cache = gpu_empty_cache;
  table.memory_waste = gpu_memory_waste;
  table.version_info = version_info;
  table.set_benchmark = gpu_conv_set_benchmark;
  table.event_record = event_record;
  table.event_elapsed = event_elapsed;
  table.event_free = event_free;
  gpu_elementwise_register(&table);
  gpu_reduce_register(&table);
  gpu_blas_register(&table);
  gpu_conv_register(&table);
  gpu_ops_register(&table);
  gpu_pool_register(&table);
  gpu_loss_register(&table);
  gpu_index_register(&table);
  gpu_optim_register(&table);
  gpu_sort_register(&table);   /* issue 13: sort/topk */
  gpu_scan_register(&table);   /* issue 13: cumsum/cumprod */
  gpu_norm_register(&table);   /* helper "norm" */
  gpu_resize_register(&table); /* helper "norm" */
}

/* Why no device can be used, from cudaGetDeviceCount's status. */
static void probe_reason(cudaError_t e, char *reason, size_t len) {
  if (e == cudaErrorInsufficientDriver)
    snprintf(reason, len, "no CUDA driver (libcuda.so.1 missing or older than CUDA %d.%d): %s",
             CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, cudaGetErrorString(e));
  else if (e == cudaErrorNoDevice || e == cudaSuccess)
    snprintf(reason, len, "no CUDA device");
  else
    snprintf(reason, len, "CUDA initialisation failed: %s (%s)", cudaGetErrorString(e),
             cudaGetErrorName(e));
}

/* The kernel the start-up probe asks about: any of ours would do, since
 * every .cu file is built for the same architectures (CMakeLists.txt). */
__global__ void k_probe(int *p) {
  if (p) *p = 1;
}

/* 0 when device d can run our kernels; else -1 with the reason: a GPU
 * whose architecture the module has no code for reports
 * cudaErrorNoKernelImageForDevice (cudaErrorInvalidDeviceFunction from
 * older runtimes), and the PTX statuses mean the driver could not JIT the
 * compute_120 PTX (a driver older than the toolkit). */
static int probe_kernel_image(int d, char *reason, size_t len) {
  cudaFuncAttributes attr;
  cudaDeviceProp p;
  cudaError_t e = cudaSetDevice(d);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&attr, (const void *)k_probe);
  if (e == cudaSuccess) return 0;
  cudaGetLastError();
  int major = 0, minor = 0;
  if (cudaGetDeviceProperties(&p, d) == cudaSuccess) major = p.major, minor = p.minor;
  cudaGetLastError();
  bool no_image = e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction ||
                  e == cudaErrorUnsupportedPtxVersion || e == cudaErrorInvalidPtx ||
                  e == cudaErrorJitCompilerNotFound || e == cudaErrorJitCompilationDisabled;
  if (no_image)
    snprintf(reason, len,
             "no kernel image for sm_%d%d (cuda:%d): libcnn_cuda.so was built for %s "
             "(%s: %s); rebuild with -DCNNSH_CUDA_ARCHITECTURES including %d%d-real",
             major, minor, d, CNNSH_CUDA_ARCH_TEXT, cudaGetErrorName(e), cudaGetErrorString(e),
             major, minor);
  else
    snprintf(reason, len, "CUDA initialisation failed on cuda:%d: %s (%s)", d,
             cudaGetErrorString(e), cudaGetErrorName(e));
  return -1;
}

extern "C" __attribute__((visibility("default"))) const cnn_backend *
cnn_cuda_backend_init(const cnn_core_api *core, char *reason, size_t len) {
  if (!core || core->version != CNN_CORE_API_VERSION) {
    snprintf(reason, len,
             "the CUDA module does not match this cnnsh (core API version %d, "
             "module expects %d)",
             core ? core->version : -1, CNN_CORE_API_VERSION);
    return NULL;
  }
  gpu_core = *core;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n <= 0) {
    probe_reason(e, reason, len);
    cudaGetLastError(); /* clear the sticky-free error state */
    return NULL;
  }
  ndevices = n > GPU_MAX_DEVICES ? GPU_MAX_DEVICES : n;
  for (int d = 0; d < ndevices; d++)
    if (probe_kernel_image(d, reason, len)) return NULL;
  if (cudaSetDevice(0) != cudaSuccess) cudaGetLastError();
  fill_table();
  return &table;
}
