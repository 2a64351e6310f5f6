/*
 * backend.h -- core-internal: the device backend table.
 *
 * The CPU backend is built in; the CUDA backend lives in gpu/ as a shared
 * module that core loads with dlopen() the first time a CUDA tensor is
 * needed (cnn_backend_get(CNN_CUDA)), so CPU-only users never load cuDNN.
 * A backend is a small table: memory entry points plus op entries; ops that
 * a backend leaves NULL are reported as unsupported on that device.
 */
#ifndef CNN_BACKEND_H
#define CNN_BACKEND_H

#include "cnn.h"

typedef struct cnn_backend {
  const char *name;
  /* memory: alloc returns NULL with cnn_set_error() on failure */
  void *(*alloc)(size_t nbytes, int device);
  void (*free)(void *ptr, int device);
  /* copy between host and this device, or within the device */
  int (*copy_h2d)(void *dst, const void *src, size_t nbytes, int device);
  int (*copy_d2h)(void *dst, const void *src, size_t nbytes, int device);
  int (*copy_d2d)(void *dst, const void *src, size_t nbytes, int device);
  int (*synchronize)(int device);
  int (*device_count)(void);
  int (*memory_info)(int device, int64_t *cached, int64_t *reserved);
  void (*empty_cache)(void);
  const char *(*version_info)(void);
  /* ops: see gpu/ for the CUDA entries (added as the op set settles) */
  void *ops[64];
} cnn_backend;

/* The backend of a device type; for CUDA, loads the module on first use
 * (NULL with an error saying why: built without CUDA, no driver, no device). */
const cnn_backend *cnn_backend_get(cnn_device_type type);
/* Why CUDA is unavailable, or NULL when it is available. */
const char *cnn_cuda_unavailable_reason(void);
#endif
