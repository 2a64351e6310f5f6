/*
 * backend.c -- finds the backend of a device; loads the CUDA module lazily.
 *
 * The CUDA backend (gpu/, libcnn_cuda.so) is dlopen()ed on the first call
 * that needs it, never at start-up: linking cuDNN and cuBLAS into the
 * executable costs ~70 ms per start (DESIGN.md).  The module is looked up
 * in $CNNSH_CUDA_MODULE, next to the executable, in ../lib/cnnsh/ relative
 * to it, and at the build-tree path compiled in.  The module exports
 * `cnn_cuda_backend_init`, which receives core's error entry points
 * (cnn_core_api: the executable need not export its symbols) and returns
 * its table or NULL with a reason (driver missing, no device).  The
 * outcome is remembered; a module that loads but finds no device stays
 * loaded (its libraries are mapped once) and is never asked again.
 * cnn_module_open() is that search for any module (core/dist.c loads the
 * MPI and NCCL collectives with it).
 * Also here: cnn_cuda_backend(), the CUDA half of cnn_backend_of() (inline
 * in backend.h: the one place where an op picks the table of its tensor's
 * device), and "not supported on cuda yet".  This file calls nothing of
 * tensors (storage.c allocates through it); how ops hand tensors to a
 * backend is backend_args.c.
 */
#include "backend.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef CNNSH_CUDA_MODULE_BUILD_PATH
#define CNNSH_CUDA_MODULE_BUILD_PATH ""
#endif

static const cnn_core_api core_api = {CNN_CORE_API_VERSION, cnn_set_error,  cnn_interrupt_pending,
                                      cnn_dtype_name,       cnn_unary_name, cnn_binary_name};

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static const cnn_backend *cuda_backend;
static const char *(*module_version)(void); /* the module's cnn_cuda_version_info */
static char cuda_reason[512] = "not probed";

static void *open_module(const char *path) {
  if (!path || !*path) return NULL;
  return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

void *cnn_module_open(const char *env, const char *file, const char *build_path, char *last_error,
                      size_t n) {
  char exe[PATH_MAX], cand[PATH_MAX + 64];
  void *h = open_module(getenv(env));
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (!h && len > 0) {
    exe[len] = 0;
    char *dir = dirname(exe);
    snprintf(cand, sizeof cand, "%s/%s", dir, file);
    if (!(h = open_module(cand))) {
      snprintf(cand, sizeof cand, "%s/../lib/cnnsh/%s", dir, file);
      h = open_module(cand);
    }
  }
  if (!h) h = open_module(build_path);
  if (!h) {
    const char *e = dlerror();
    snprintf(last_error, n, "%s", e ? e : "module not found");
  }
  return h;
}

const cnn_core_api *cnn_core_api_get(void) { return &core_api; }

static void load_cuda(void) {
  char err[400] = "";
  if (!*CNNSH_CUDA_MODULE_BUILD_PATH && !getenv("CNNSH_CUDA_MODULE")) {
    snprintf(cuda_reason, sizeof cuda_reason, "cnnsh was built without CUDA");
  }
  void *h = cnn_module_open("CNNSH_CUDA_MODULE", "libcnn_cuda.so", CNNSH_CUDA_MODULE_BUILD_PATH,
                            err, sizeof err);
  if (!h) {
    if (*CNNSH_CUDA_MODULE_BUILD_PATH || getenv("CNNSH_CUDA_MODULE"))
      snprintf(cuda_reason, sizeof cuda_reason, "the CUDA module could not be loaded: %s", err);
    return;
  }
  module_version = (const char *(*)(void))dlsym(h, "cnn_cuda_version_info");
  cnn_cuda_backend_init_fn init = (cnn_cuda_backend_init_fn)dlsym(h, "cnn_cuda_backend_init");
  if (!init) {
    snprintf(cuda_reason, sizeof cuda_reason, "the CUDA module lacks cnn_cuda_backend_init");
    return;
  }
  cuda_backend = init(&core_api, cuda_reason, sizeof cuda_reason);
}

const char *cnn_cuda_unavailable_reason(void) {
  pthread_once(&cuda_once, load_cuda);
  return cuda_backend ? NULL : cuda_reason;
}

const char *cnn_cuda_module_info(void) {
  pthread_once(&cuda_once, load_cuda);
  return module_version ? module_version() : NULL;
}

const cnn_backend *cnn_backend_get(cnn_device_type type) {
  if (type == CNN_CPU) return &cnn_cpu_backend;
  const char *why = cnn_cuda_unavailable_reason();
  if (why) {
    cnn_set_error("cuda: %s", why);
    return NULL;
  }
  return cuda_backend;
}

/* ---- the dispatch point of core/ops ------------------------------------------- */

const cnn_backend *cnn_cuda_backend(const char *op) {
  const char *why = cnn_cuda_unavailable_reason();
  if (!why) return cuda_backend;
  cnn_set_error("%s: cuda is not available: %s", op, why);
  return NULL;
}

int cnn_cuda_check(const char *op) { return cnn_cuda_backend(op) ? 0 : -1; }

int cnn_cuda_device_count(void) {
  return cnn_cuda_unavailable_reason() ? 0 : cuda_backend->device_count();
}

/* the CUDA backend if it is usable and `device` exists, else NULL (error set) */
static const cnn_backend *cuda_device_backend(const char *op, int device) {
  const cnn_backend *be = cnn_cuda_backend(op);
  if (!be) return NULL;
  int n = be->device_count();
  if (device >= 0 && device < n) return be;
  cnn_set_error("%s: device %d does not exist (%d device%s)", op, device, n, n == 1 ? "" : "s");
  return NULL;
}

int cnn_cuda_set_device(int device) {
  const cnn_backend *be = cuda_device_backend("set_device", device);
  return be ? be->set_device(device) : -1;
}

int cnn_cuda_synchronize(int device) {
  const cnn_backend *be = cuda_device_backend("synchronize", device);
  return be ? be->synchronize(device) : -1;
}

int cnn_cuda_memory(int device, cnn_cuda_memory_info *out) {
  const cnn_backend *be = cuda_device_backend("memory", device);
  *out = (cnn_cuda_memory_info){0};
  if (!be || be->memory_info(device, &out->cached, &out->reserved, &out->free, &out->total))
    return -1;
  out->has_waste = be->memory_waste && be->memory_waste(device, &out->waste) == 0;
  return 0;
}

void cnn_cuda_empty_cache(void) {
  if (!cnn_cuda_unavailable_reason()) cuda_backend->empty_cache();
}

int cnn_cuda_set_benchmark(bool on) {
  const cnn_backend *be = cnn_cuda_backend("benchmark");
  if (!be) return -1;
  be->set_benchmark(on);
  return 0;
}

int cnn_backend_unsupported(const char *op) {
  cnn_set_error("%s: not supported on cuda yet", op);
  return -1;
}
