/*
 * storage.c -- refcounted buffers and the live/peak memory accounting.
 *
 * A storage owns one allocation on one device.  Every allocation and free
 * goes through here so cnn_memory() knows the live bytes per device, and so
 * the embedding's hooks (the Lua bindings) can push the garbage collector in
 * proportion to native memory (DESIGN.md "Memory under a garbage
 * collector").  On failure the OOM hook runs once (a full collection) and
 * the allocation is retried before an error naming the size is raised.
 * Hooks run only on the thread that installed them (the Lua thread); the
 * data loader's thread allocates without them.  Counters are atomic.
 *
 * Pinned storages.  A CPU storage may be page-locked (s->pinned): its block
 * comes from the CUDA backend's alloc_pinned and goes back through
 * free_pinned, never through the host cache, and it is accounted as CPU
 * memory.  The backend keeps a freed pinned block until the asynchronous
 * copies that read it are done (gpu/allocator.cu), so releasing a pinned
 * storage right after cnn_to_device_async is safe.  Pinned blocks are
 * allocated and freed on the caller's (Lua) thread only: the data loader's
 * worker thread never allocates, so it never calls CUDA.
 *
 * Storage knows nothing of tensors or autograd: pinned tensors
 * (cnn_empty_pinned, cnn_pin_memory) are copy.c's.
 */
#include "backend.h"
#include "cnn.h"
#include "host_cache.h"
#include "tensor_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_BYTES ((size_t)1 << 46) /* 64 TiB: anything above is absurd */

static atomic_llong live_bytes[2], peak_bytes[2], live_count[2];
static cnn_alloc_hooks hooks;
static pthread_t hooks_thread;
static bool hooks_set;

void cnn_set_alloc_hooks(const cnn_alloc_hooks *h) {
  if (h) {
    hooks = *h;
    hooks_thread = pthread_self();
    hooks_set = true;
  } else {
    hooks_set = false;
  }
}

static bool on_hooks_thread(void) {
  return hooks_set && pthread_equal(pthread_self(), hooks_thread);
}

static void account(cnn_device_type d, long long delta) {
  long long now = atomic_fetch_add(&live_bytes[d], delta) + delta;
  atomic_fetch_add(&live_count[d], delta > 0 ? 1 : -1);
  long long peak = atomic_load(&peak_bytes[d]);
  while (now > peak && !atomic_compare_exchange_weak(&peak_bytes[d], &peak, now)) {}
}

cnn_memory_stats cnn_memory(cnn_device_type dev) {
  cnn_memory_stats s = {atomic_load(&live_bytes[dev]), atomic_load(&peak_bytes[dev]),
                        atomic_load(&live_count[dev]),
                        dev == CNN_CPU ? (int64_t)cnn_host_cache_bytes() : 0};
  return s;
}

size_t cnn_memory_empty_cache(void) { return cnn_host_cache_clear(); }

void cnn_memory_reset_peak(void) {
  for (int d = 0; d < 2; d++) atomic_store(&peak_bytes[d], atomic_load(&live_bytes[d]));
}

static void *raw_alloc(size_t nbytes, cnn_device dev, bool pinned) {
  if (pinned) {
    const cnn_backend *be = cnn_cuda_backend("pin_memory");
    return be ? be->alloc_pinned(nbytes ? nbytes : 1) : NULL;
  }
  if (dev.type == CNN_CPU) {
    return cnn_host_alloc(cnn_host_block_size(nbytes));
  }
  const cnn_backend *be = cnn_backend_get(dev.type);
  return be ? be->alloc(nbytes ? nbytes : 1, dev.index) : NULL;
}

static void raw_free(void *p, size_t nbytes, cnn_device dev, bool pinned) {
  if (pinned) { /* the backend was loaded when the block was allocated */
    const cnn_backend *be = cnn_backend_get(CNN_CUDA);
    if (be) be->free_pinned(p);
    return;
  }
  if (dev.type == CNN_CPU) {
    cnn_host_free(p, cnn_host_block_size(nbytes));
    return;
  }
  const cnn_backend *be = cnn_backend_get(dev.type);
  if (be) be->free(p, dev.index);
}

/* -1 with "cuda:N does not exist (M devices)" for an ordinal the backend lacks:
 * not an out-of-memory condition (no collection, no retry) */
static int check_cuda_ordinal(cnn_device dev) {
  const cnn_backend *be = cnn_backend_get(CNN_CUDA);
  if (!be) return -1; /* error set */
  int n = be->device_count();
  if (dev.index >= 0 && dev.index < n) return 0;
  cnn_set_error("cuda:%d does not exist (%d device%s)", dev.index, n, n == 1 ? "" : "s");
  return -1;
}

static void *alloc_with_retry(size_t nbytes, cnn_device dev, bool pinned) {
  if (dev.type == CNN_CUDA && check_cuda_ordinal(dev)) return NULL; /* error set */
  if (pinned && !cnn_cuda_backend("pin_memory")) return NULL;       /* error set */
  void *p = raw_alloc(nbytes, dev, pinned);
  if (!p && dev.type == CNN_CPU && !pinned && cnn_host_cache_clear() > 0)
    p = raw_alloc(nbytes, dev, pinned);
  /* a device error other than out of memory (a sticky CUDA error: the
   * context is gone) is not helped by a collection: no retry */
  bool oom = dev.type == CNN_CPU || strncmp(cnn_error(), "out of memory", 13) == 0;
  if (!p && oom && on_hooks_thread() && hooks.on_oom && hooks.on_oom(nbytes, hooks.ud))
    p = raw_alloc(nbytes, dev, pinned);
  /* the backend's own message (free/total memory, the library's error) stays */
  if (!p && dev.type == CNN_CPU && !pinned) {
    char dbuf[32];
    cnn_set_error("out of memory: cannot allocate %zu bytes (%.1f MiB) on %s", nbytes,
                  nbytes / 1048576.0, cnn_device_str(dev, dbuf));
  }
  return p;
}

/* A CPU request above the machine's physical memory fails up front, with
 * the size in the message, rather than through the allocator (which under
 * AddressSanitizer would abort). */
static bool larger_than_machine(size_t nbytes, cnn_device dev) {
  if (nbytes > MAX_BYTES) return true;
  if (dev.type != CNN_CPU) return false;
  static size_t machine_bytes; /* read once: sysconf() is a system call */
  if (!machine_bytes) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    machine_bytes = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : SIZE_MAX;
  }
  return nbytes > machine_bytes;
}

static cnn_storage *storage_new(size_t nbytes, cnn_device dev, bool pinned) {
  if (larger_than_machine(nbytes, dev)) {
    cnn_set_error(
        "out of memory: cannot allocate %zu bytes (%.1f GiB), more than this machine's memory",
        nbytes, nbytes / 1073741824.0);
    return NULL;
  }
  cnn_storage *s = calloc(1, sizeof *s);
  if (!s) return cnn_set_error("out of memory: storage header"), NULL;
  s->data = alloc_with_retry(nbytes, dev, pinned);
  if (!s->data) return free(s), NULL;
  s->refcount = 1;
  s->nbytes = nbytes;
  s->device = dev;
  s->pinned = pinned;
  account(dev.type, (long long)nbytes);
  if (on_hooks_thread() && hooks.on_alloc) hooks.on_alloc(nbytes, hooks.ud);
  return s;
}

cnn_storage *cnn_storage_new(size_t nbytes, cnn_device dev) {
  return storage_new(nbytes, dev, false);
}

cnn_storage *cnn_storage_new_pinned(size_t nbytes) {
  return storage_new(nbytes, CNN_DEVICE_CPU, true);
}

void cnn_storage_retain(cnn_storage *s) { __atomic_add_fetch(&s->refcount, 1, __ATOMIC_RELAXED); }

void cnn_storage_release(cnn_storage *s) {
  if (!s || __atomic_sub_fetch(&s->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
  if (!s->borrowed) {
    raw_free(s->data, s->nbytes, s->device, s->pinned);
    account(s->device.type, -(long long)s->nbytes);
  }
  free(s);
}
