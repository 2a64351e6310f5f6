/*
 * fake_cuda_device.c -- the entry point of libcnn_fake_cuda.so:
 * cnn_cuda_backend_init() reserves the arena and fills the backend table
 * from the per-file register functions (then the weak hooks of the files
 * other engineers own, see fake_cuda.h); also the device management,
 * copies, events and version lines, all on the host.
 *
 * The module answers like gpu/backend.cu: one device (cuda:0), the same
 * errors for a bad ordinal and for out of memory, copies that refuse a
 * device pointer where a host one is expected (and the reverse).  Events
 * hold a monotonic timestamp; elapsed is in milliseconds.  Pinned memory is
 * plain malloc.
 *
 * Invariants: init runs once (core calls it under pthread_once); the table
 * is static and complete before it is returned.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_cuda.h"

#define EXPORT __attribute__((visibility("default")))

cnn_core_api fake_core;
static cnn_backend table;
static bool benchmark;

/* ---- memory ------------------------------------------------------------------------- */

static void *dev_alloc(size_t nbytes, int dev) {
  if (fake_enter("alloc", dev)) return NULL;
  void *p = fake_arena_alloc(nbytes);
  fake_leave();
  return p;
}

static void dev_free(void *p, int dev) {
  if (fake_enter("free", dev)) return;
  fake_arena_free(p);
  fake_leave();
}

static void *alloc_pinned(size_t nbytes) {
  void *p = malloc(nbytes ? nbytes : 1);
  if (!p)
    fake_core.set_error("out of memory: cannot allocate %zu bytes of page-locked host memory",
                        nbytes);
  return p;
}

static void free_pinned(void *p) { free(p); }

static int memory_info(int dev, int64_t *cached, int64_t *reserved, int64_t *free_b,
                       int64_t *total_b) {
  if (fake_enter("memory", dev)) return -1;
  int64_t tot, res, cach, live;
  fake_arena_stats(&tot, &res, &cach, &live);
  if (cached) *cached = cach;
  if (reserved) *reserved = res;
  if (free_b) *free_b = tot - res;
  if (total_b) *total_b = tot;
  fake_leave();
  return 0;
}

static void empty_cache(void) {
  if (fake_enter("empty_cache", 0)) return;
  fake_arena_trim();
  fake_leave();
}

/* ---- copies ------------------------------------------------------------------------------ */

static int copy_h2d(void *dst, const void *src, size_t n, int dev) {
  if (fake_enter("to(cuda)", dev)) return -1;
  int rc = fake_dev("to(cuda)", dst, n) || fake_host("to(cuda)", src, n) ? -1 : 0;
  if (rc == 0 && n) memcpy(dst, src, n);
  fake_leave();
  return rc;
}

static int copy_d2h(void *dst, const void *src, size_t n, int dev) {
  if (fake_enter("to(cpu)", dev)) return -1;
  int rc = fake_dev("to(cpu)", src, n) || fake_host("to(cpu)", dst, n) ? -1 : 0;
  if (rc == 0 && n) memcpy(dst, src, n);
  fake_leave();
  return rc;
}

static int copy_d2d(void *dst, const void *src, size_t n, int dev) {
  if (fake_enter("copy_", dev)) return -1;
  int rc = fake_dev("copy_", src, n) || fake_dev("copy_", dst, n) ? -1 : 0;
  if (rc == 0 && n) memmove(dst, src, n);
  fake_leave();
  return rc;
}

/* ---- devices ------------------------------------------------------------------------------ */

static int device_count(void) { return 1; }

static int set_device(int dev) {
  if (fake_enter("set_device", dev)) return -1;
  fake_leave();
  return 0;
}

static int synchronize(int dev) {
  if (fake_enter("synchronize", dev)) return -1;
  fake_leave();
  return 0;
}

static void set_benchmark(bool on) { benchmark = on; }

/* ---- events --------------------------------------------------------------------------------- */

static void *event_record(int dev) {
  if (fake_enter("event", dev)) return NULL;
  fake_leave();
  struct timespec *t = malloc(sizeof *t);
  if (!t) {
    fake_core.set_error("timer: out of memory");
    return NULL;
  }
  clock_gettime(CLOCK_MONOTONIC, t);
  return t;
}

static int event_elapsed(void *start, void *end, double *ms) {
  if (!start || !end) {
    fake_core.set_error("timer: missing event");
    return -1;
  }
  const struct timespec *a = start, *b = end;
  *ms = (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
  return 0;
}

static void event_free(void *ev) { free(ev); }

/* ---- versions ------------------------------------------------------------------------------- */

EXPORT const char *cnn_cuda_version_info(void) {
  return "cuda module: fake CUDA device for tests (libcnn_fake_cuda.so): host loops, "
         "no GPU\ncuda:0 fake device (protected host arena)";
}

static const char *version_info(void) { return cnn_cuda_version_info(); }

/* ---- init ----------------------------------------------------------------------------------- */

static void fill_table(void) {
  table.name = "cuda";
  table.half = true;
  table.alloc = dev_alloc, table.free = dev_free;
  table.alloc_pinned = alloc_pinned, table.free_pinned = free_pinned;
  table.copy_h2d = copy_h2d, table.copy_d2h = copy_d2h, table.copy_d2d = copy_d2d;
  table.synchronize = synchronize, table.device_count = device_count;
  table.set_device = set_device, table.memory_info = memory_info;
  table.empty_cache = empty_cache, table.version_info = version_info;
  table.set_benchmark = set_benchmark;
  table.event_record = event_record, table.event_elapsed = event_elapsed;
  table.event_free = event_free;
  fake_elementwise_register(&table);
  fake_reduce_register(&table);
  fake_blas_register(&table);
  fake_conv_register(&table);
  fake_pool_register(&table);
  fake_nn_register(&table);
  fake_loss_register(&table);
  fake_index_register(&table);
  fake_optim_register(&table);
  fake_tensor_ops_register(&table); /* issue 13: sort, scans, scatter */
  fake_norm_register(&table);       /* helper "norm" */
  fake_resize_register(&table);     /* helper "norm" */
  if (fake_register_async) fake_register_async(&table);
  if (fake_register_batched) fake_register_batched(&table);
  if (fake_register_extra) fake_register_extra(&table);
  if (fake_register_faults) fake_register_faults(&table);
}

EXPORT const cnn_backend *cnn_cuda_backend_init(const cnn_core_api *core, char *reason,
                                                size_t len) {
  if (!core || core->version != CNN_CORE_API_VERSION) {
    snprintf(reason, len,
             "the fake CUDA module does not match this cnnsh (core API version %d, "
             "module expects %d)",
             core ? core->version : -1, CNN_CORE_API_VERSION);
    return NULL;
  }
  fake_core = *core;
  if (fake_arena_init(reason, len)) return NULL;
  fill_table();
  return &table;
}
