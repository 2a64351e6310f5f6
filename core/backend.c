/*
 * backend.c -- finds the backend of a device; loads the CUDA module lazily.
 *
 * The CUDA backend (gpu/, libcnn_cuda.so) is dlopen()ed on the first call
 * that needs it, never at start-up: linking cuDNN and cuBLAS into the
 * executable costs ~70 ms per start (DESIGN.md).  The module is looked up
 * in $CNNSH_CUDA_MODULE, next to the executable, in ../lib/cnnsh/ relative
 * to it, and at the build-tree path compiled in.  The module exports
 * `cnn_cuda_backend_init`, which returns its table or NULL with a reason
 * (driver missing, no device).  The outcome is remembered.
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

typedef const cnn_backend *(*backend_init_fn)(char *reason, size_t reason_len);

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static const cnn_backend *cuda_backend;
static char cuda_reason[512] = "not probed";

static void *open_module(const char *path) {
  if (!path || !*path) return NULL;
  return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static void *find_module(char *last_error, size_t n) {
  char exe[PATH_MAX], cand[PATH_MAX + 64];
  void *h = open_module(getenv("CNNSH_CUDA_MODULE"));
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (!h && len > 0) {
    exe[len] = 0;
    char *dir = dirname(exe);
    snprintf(cand, sizeof cand, "%s/libcnn_cuda.so", dir);
    if (!(h = open_module(cand))) {
      snprintf(cand, sizeof cand, "%s/../lib/cnnsh/libcnn_cuda.so", dir);
      h = open_module(cand);
    }
  }
  if (!h) h = open_module(CNNSH_CUDA_MODULE_BUILD_PATH);
  if (!h) {
    const char *e = dlerror();
    snprintf(last_error, n, "%s", e ? e : "module not found");
  }
  return h;
}

static void load_cuda(void) {
  char err[400] = "";
  if (!*CNNSH_CUDA_MODULE_BUILD_PATH && !getenv("CNNSH_CUDA_MODULE")) {
    snprintf(cuda_reason, sizeof cuda_reason, "cnnsh was built without CUDA");
  }
  void *h = find_module(err, sizeof err);
  if (!h) {
    if (*CNNSH_CUDA_MODULE_BUILD_PATH || getenv("CNNSH_CUDA_MODULE"))
      snprintf(cuda_reason, sizeof cuda_reason, "the CUDA module could not be loaded: %s", err);
    return;
  }
  backend_init_fn init = (backend_init_fn)dlsym(h, "cnn_cuda_backend_init");
  if (!init) {
    snprintf(cuda_reason, sizeof cuda_reason, "the CUDA module lacks cnn_cuda_backend_init");
    return;
  }
  cuda_backend = init(cuda_reason, sizeof cuda_reason);
}

const char *cnn_cuda_unavailable_reason(void) {
  pthread_once(&cuda_once, load_cuda);
  return cuda_backend ? NULL : cuda_reason;
}

const cnn_backend *cnn_backend_get(cnn_device_type type) {
  if (type == CNN_CPU) return NULL; /* the CPU paths are called directly */
  const char *why = cnn_cuda_unavailable_reason();
  if (why) {
    cnn_set_error("cuda: %s", why);
    return NULL;
  }
  return cuda_backend;
}
