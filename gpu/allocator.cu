/*
 * allocator.cu -- the caching device allocator (and page-locked host memory).
 *
 * cudaMalloc/cudaFree synchronise the device and cost tens of microseconds,
 * so freed blocks are kept per device in size-class free lists and handed
 * out again.  Sizes are rounded up: to 512 bytes below 1 MiB, to 256 KiB
 * above (2 MiB before: a 1.1 MiB tensor held 2 MiB).  A request takes the
 * smallest cached block of at least its rounded size and at most twice it
 * below 1 MiB, at most 1.25 times it above (so a big cached block is not
 * wasted on a smaller tensor).  The bytes lost that way -- rounded block
 * size minus the bytes asked for, over live blocks -- are counted per
 * device and shown as `waste` by cnn.cuda.memory() (memory_waste).  On cudaErrorMemoryAllocation -- and only then
 * (recover.h, status.h) -- the whole cache of the device is released and
 * the allocation retried once; a second failure sets "out of memory: ..."
 * with the size and the device's free memory and returns NULL (core then
 * runs the garbage collector and retries, see core/storage.c, which also
 * keeps the live/peak accounting).  Any other error names itself; a sticky
 * one (illegal address, launch timeout) says the process must restart, and
 * core does not collect and retry for it (no "out of memory" prefix).
 *
 * Reuse without events is safe because every op runs on the device's
 * default stream (gpu.h): work that used a freed block is ordered before
 * any later use of the block.  Page-locked HOST blocks are the exception:
 * the host may write a reused one while an asynchronous copy still reads
 * it, so they are cached with events (the second half of this file).
 *
 * Invariants (under `mu`): every pointer handed out is in `live` with its
 * rounded size; every cached block is in exactly one free list; cached +
 * live-rounded bytes == reserved bytes of the device.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpu.h"

#define SMALL_LIMIT (1u << 20)
#define SMALL_ROUND 512u
#define LARGE_ROUND (256u << 10)
#define NBUCKETS    4096

typedef struct block {
  void *ptr;
  size_t size;      /* rounded */
  size_t requested; /* live: the bytes asked for (size - requested is waste) */
  int dev;
  struct block *next;
} block;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static block *free_list[GPU_MAX_DEVICES]; /* sorted by size, ascending */
static block *live[NBUCKETS];             /* pointer -> block, chained */
static int64_t cached_bytes[GPU_MAX_DEVICES], reserved_bytes[GPU_MAX_DEVICES];
static int64_t waste_bytes[GPU_MAX_DEVICES]; /* over live blocks: size - requested */

static size_t round_size(size_t n) {
  if (n < SMALL_LIMIT) return (n + SMALL_ROUND - 1) / SMALL_ROUND * SMALL_ROUND;
  return (n + LARGE_ROUND - 1) / LARGE_ROUND * LARGE_ROUND;
}

static unsigned bucket_of(const void *p) {
  uintptr_t u = (uintptr_t)p >> 9;
  return (unsigned)((u ^ (u >> 13)) % NBUCKETS);
}

/* the most a cached block may exceed a request of `size` rounded bytes */
static size_t reuse_limit(size_t size) { return size < SMALL_LIMIT ? 2 * size : size + size / 4; }

/* the smallest cached block fitting `size` (and within reuse_limit) */
static block *take_cached(int dev, size_t size) {
  block **pp = &free_list[dev];
  for (; *pp; pp = &(*pp)->next) {
    block *b = *pp;
    if (b->size < size) continue;
    if (b->size > reuse_limit(size)) return NULL; /* sorted: nothing better follows */
    *pp = b->next;
    cached_bytes[dev] -= (int64_t)b->size;
    return b;
  }
  return NULL;
}

static void put_cached(block *b) {
  block **pp = &free_list[b->dev];
  while (*pp && (*pp)->size < b->size) pp = &(*pp)->next;
  b->next = *pp;
  *pp = b;
  cached_bytes[b->dev] += (int64_t)b->size;
}

/* release every cached block of dev (dev < 0: all devices); caller holds mu.
 * A failing cudaFree is reported (the first failure's status is returned,
 * the runtime's last error cleared); the block's bookkeeping goes anyway:
 * after a sticky error the memory is gone with the context. */
static cudaError_t release_cache(int dev) {
  cudaError_t first = cudaSuccess;
  for (int d = 0; d < GPU_MAX_DEVICES; d++) {
    if (dev >= 0 && d != dev) continue;
    block *b = free_list[d];
    free_list[d] = NULL;
    if (b && cudaSetDevice(d) != cudaSuccess) cudaGetLastError();
    while (b) {
      block *next = b->next;
      cudaError_t e = cudaFree(b->ptr);
      if (e != cudaSuccess) {
        gpu_cuda_failed(e);
        if (first == cudaSuccess) first = e;
      }
      reserved_bytes[d] -= (int64_t)b->size;
      free(b);
      b = next;
    }
    cached_bytes[d] = 0;
  }
  return first;
}

/* one cudaMalloc for fresh_block, through recover.h's retry policy */
typedef struct {
  int dev;
  size_t size;
  void *p;
  cudaError_t err;
} malloc_try;

static gpu_fault malloc_attempt(void *ctx) {
  malloc_try *t = (malloc_try *)ctx;
  t->err = cudaMalloc(&t->p, t->size);
  return gpu_cuda_failed(t->err); /* clears the last error on failure */
}

static void malloc_release(void *ctx) {
  malloc_try *t = (malloc_try *)ctx;
  release_cache(t->dev);
  if (cudaSetDevice(t->dev) != cudaSuccess) cudaGetLastError();
}

/* a new block from the driver: on cudaErrorMemoryAllocation (only) the
 * device's cache is released and the call tried once more; a sticky or
 * other error is returned at once (*err), never retried */
static void *fresh_block(int dev, size_t size, cudaError_t *err) {
  malloc_try t = {dev, size, NULL, cudaSuccess};
  gpu_fault f = gpu_retry_once(malloc_attempt, malloc_release, &t);
  *err = t.err;
  if (f != GPU_FAULT_NONE) return NULL;
  reserved_bytes[dev] += (int64_t)size;
  return t.p;
}

/* "out of memory: ..." only for cudaErrorMemoryAllocation (core runs the
 * collector and retries on that prefix); any other error names itself and,
 * when sticky, says the process must restart */
static void report_alloc_failure(int dev, size_t n, cudaError_t err) {
  gpu_fault f = gpu_cuda_fault(err);
  if (f != GPU_FAULT_MEMORY) {
    gpu_core.set_error("alloc: CUDA error: %s (%s) allocating %zu bytes on cuda:%d%s",
                       cudaGetErrorString(err), cudaGetErrorName(err), n, dev, gpu_fault_advice(f));
    return;
  }
  size_t fr = 0, tot = 0;
  if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) cudaGetLastError();
  gpu_core.set_error("out of memory: cannot allocate %zu bytes (%.1f MiB) on cuda:%d: %s "
                     "(%.1f MiB free of %.1f MiB; %.1f MiB held by live tensors)",
                     n, n / 1048576.0, dev, cudaGetErrorString(err), fr / 1048576.0,
                     tot / 1048576.0, (reserved_bytes[dev] - cached_bytes[dev]) / 1048576.0);
}

void *gpu_alloc(size_t nbytes, int dev) {
  if (gpu_device("alloc", dev)) return NULL;
  size_t size = round_size(nbytes ? nbytes : 1);
  pthread_mutex_lock(&mu);
  block *b = take_cached(dev, size);
  if (!b) {
    cudaError_t err;
    void *p = fresh_block(dev, size, &err);
    b = p ? (block *)malloc(sizeof *b) : NULL;
    if (!b) {
      if (p && cudaFree(p) != cudaSuccess) cudaGetLastError();
      if (p) reserved_bytes[dev] -= (int64_t)size;
      report_alloc_failure(dev, nbytes, p ? cudaErrorMemoryAllocation : err);
      pthread_mutex_unlock(&mu);
      return NULL;
    }
    b->ptr = p, b->size = size, b->dev = dev;
  }
  b->requested = nbytes;
  waste_bytes[dev] += (int64_t)(b->size - nbytes);
  unsigned h = bucket_of(b->ptr);
  b->next = live[h];
  live[h] = b;
  pthread_mutex_unlock(&mu);
  return b->ptr;
}

void gpu_free(void *p, int dev) {
  if (!p) return;
  pthread_mutex_lock(&mu);
  block **pp = &live[bucket_of(p)];
  while (*pp && (*pp)->ptr != p) pp = &(*pp)->next;
  block *b = *pp;
  if (b) {
    *pp = b->next;
    waste_bytes[b->dev] -= (int64_t)(b->size - b->requested);
    put_cached(b);
  }
  pthread_mutex_unlock(&mu);
  (void)dev;
}

void *gpu_scratch(const char *op, size_t nbytes, int dev) {
  (void)op; /* the allocator's message names the size and the device */
  return gpu_alloc(nbytes, dev);
}

static void pinned_release_cached(void);

/* empty_cache has no status to return (backend.h): a failing cudaFree is
 * left in core's error buffer for whoever looks */
void gpu_empty_cache(void) {
  pthread_mutex_lock(&mu);
  cudaError_t e = release_cache(-1);
  pthread_mutex_unlock(&mu);
  if (e != cudaSuccess)
    gpu_fail_fault("empty_cache", "CUDA", cudaGetErrorString(e), gpu_cuda_fault(e), "cudaFree",
                   __FILE__, __LINE__);
  pinned_release_cached();
}

/* release dev's cached blocks so that a library (cuBLAS, cuDNN) that
 * failed to allocate may try again (recover.h) */
void gpu_release_cached(int dev) {
  pthread_mutex_lock(&mu);
  release_cache(dev);
  pthread_mutex_unlock(&mu);
  if (cudaSetDevice(dev) != cudaSuccess) cudaGetLastError();
}

int gpu_memory_info(int dev, int64_t *cached, int64_t *reserved, int64_t *free_b,
                    int64_t *total_b) {
  if (gpu_device("memory", dev)) return -1;
  size_t fr = 0, tot = 0;
  CUDA_CHECK("memory", cudaMemGetInfo(&fr, &tot));
  pthread_mutex_lock(&mu);
  *cached = cached_bytes[dev];
  *reserved = reserved_bytes[dev];
  pthread_mutex_unlock(&mu);
  *free_b = (int64_t)fr;
  *total_b = (int64_t)tot;
  return 0;
}

int gpu_memory_waste(int dev, int64_t *waste) {
  if (gpu_device("memory", dev)) return -1;
  pthread_mutex_lock(&mu);
  *waste = waste_bytes[dev];
  pthread_mutex_unlock(&mu);
  return 0;
}

/* ---- page-locked host memory ----------------------------------------------------------
 *
 * Pinned blocks (the data loader's batches, cnn_pin_memory) are cached as
 * well: cudaHostAlloc is slow and cudaFreeHost synchronises.  The hazard
 * is copy_h2d_async: a batch may be released while the copy that reads it
 * is still queued, and handing its block to the next batch at once would
 * let the host overwrite data in flight.  So:
 *  - gpu_copy_h2d_async marks, in the live block that holds `src`, the
 *    device copied to (`used`, a bit per device);
 *  - free records one event per such device on that device's legacy
 *    default stream -- the stream of every copy and op (gpu.h), so the
 *    event completes after the copy -- and moves the block to the cache
 *    with those devices `pending`; a block never copied asynchronously is
 *    ready at once;
 *  - alloc reuses a cached block of a fitting size (at least the rounded
 *    request, at most twice it) only when cudaEventQuery reports each
 *    pending event done; otherwise it allocates a fresh block;
 *  - empty_cache (and an allocation failure) waits for the events
 *    (cudaEventSynchronize) and gives every cached block back.
 * All of this runs on the caller's (Lua) thread: the data loader's worker
 * never allocates or frees, so it never calls CUDA.
 *
 * Invariants (under pmu): every block handed out is in pinned_live, every
 * cached one in pinned_cached (oldest first), never both; a cached block's
 * `pending` bits name devices whose ev[] has a recorded event;
 * pinned_cached_bytes is the sum of the cached sizes <= PINNED_CACHE_LIMIT
 * after each free (older ready blocks are released to stay under it).
 */

#define PINNED_ROUND       ((size_t)4096)
#define PINNED_CACHE_LIMIT ((size_t)512 << 20)

typedef struct pinned {
  char *ptr;
  size_t size;                     /* rounded */
  uint32_t used;                   /* live: devices it was copied to asynchronously */
  uint32_t pending;                /* cached: devices with an event recorded */
  cudaEvent_t ev[GPU_MAX_DEVICES]; /* created on first need, on that device */
  struct pinned *next;
} pinned;

static pthread_mutex_t pmu = PTHREAD_MUTEX_INITIALIZER;
static pinned *pinned_live, *pinned_cached;
static size_t pinned_cached_bytes;

static size_t pinned_round(size_t n) {
  return ((n ? n : 1) + PINNED_ROUND - 1) / PINNED_ROUND * PINNED_ROUND;
}

/* the live block holding [p, p + n) (n == 0: the block starting at p),
 * unlinked when `unlink` */
static pinned *pinned_find(const void *p, size_t n, bool unlink) {
  const char *c = (const char *)p;
  for (pinned **pp = &pinned_live; *pp; pp = &(*pp)->next) {
    pinned *b = *pp;
    if (n ? (c < b->ptr || c + n > b->ptr + b->size) : c != b->ptr) continue;
    if (unlink) *pp = b->next;
    return b;
  }
  return NULL;
}

/* 1 when every pending event of b is done (clearing their bits), else 0 */
static int pinned_ready(pinned *b) {
  for (int d = 0; d < GPU_MAX_DEVICES && b->pending; d++) {
    if (!(b->pending & (1u << d))) continue;
    cudaError_t e = cudaEventQuery(b->ev[d]);
    if (e == cudaSuccess) {
      b->pending &= ~(1u << d);
      continue;
    }
    /* cudaErrorNotReady is a state, not a failure: clear it as PyTorch does;
     * another error leaves the block pending until empty_cache syncs it */
    cudaGetLastError();
    return 0;
  }
  return 1;
}

/* wait for b's events; 0, or -1 with an error set */
static int pinned_wait(pinned *b) {
  for (int d = 0; d < GPU_MAX_DEVICES && b->pending; d++) {
    if (!(b->pending & (1u << d))) continue;
    CUDA_CHECK("empty_cache", cudaEventSynchronize(b->ev[d]));
    b->pending &= ~(1u << d);
  }
  return 0;
}

/* destroy b's events and give its memory back; -1 (error set) if a call failed */
static int pinned_destroy(pinned *b) {
  int rc = 0;
  for (int d = 0; d < GPU_MAX_DEVICES; d++) {
    if (!b->ev[d]) continue;
    cudaError_t e = cudaEventDestroy(b->ev[d]);
    if (e != cudaSuccess)
      rc = gpu_fail("empty_cache", "CUDA", cudaGetErrorString(e), "cudaEventDestroy", __FILE__,
                    __LINE__);
  }
  cudaError_t e = cudaFreeHost(b->ptr);
  if (e != cudaSuccess)
    rc = gpu_fail("empty_cache", "CUDA", cudaGetErrorString(e), "cudaFreeHost", __FILE__, __LINE__);
  free(b);
  return rc;
}

/* unlink and free cached blocks: all of them (waiting for their copies)
 * when `all`, else the oldest ready ones until the cache fits its limit */
static void pinned_trim(bool all) {
  pinned **pp = &pinned_cached;
  while (*pp && (all || pinned_cached_bytes > PINNED_CACHE_LIMIT)) {
    pinned *b = *pp;
    if (all ? pinned_wait(b) != 0 : !pinned_ready(b)) { /* still in flight (or broken): keep */
      pp = &b->next;
      continue;
    }
    *pp = b->next;
    pinned_cached_bytes -= b->size;
    pinned_destroy(b);
  }
}

static void pinned_release_cached(void) {
  pthread_mutex_lock(&pmu);
  pinned_trim(true);
  pthread_mutex_unlock(&pmu);
}

/* the smallest ready cached block of size..2*size, unlinked; caller holds pmu */
static pinned *pinned_take(size_t size) {
  pinned **best = NULL;
  for (pinned **pp = &pinned_cached; *pp; pp = &(*pp)->next) {
    pinned *b = *pp;
    if (b->size < size || b->size > 2 * size || (best && (*best)->size <= b->size)) continue;
    if (pinned_ready(b)) best = pp;
  }
  if (!best) return NULL;
  pinned *b = *best;
  *best = b->next;
  pinned_cached_bytes -= b->size;
  return b;
}

/* a new block from the driver (after emptying the cache once on failure) */
static pinned *pinned_fresh(size_t size, size_t nbytes) {
  void *p = NULL;
  cudaError_t e = cudaHostAlloc(&p, size, cudaHostAllocPortable);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    pinned_trim(true);
    e = cudaHostAlloc(&p, size, cudaHostAllocPortable);
  }
  pinned *b = e == cudaSuccess ? (pinned *)calloc(1, sizeof *b) : NULL;
  if (!b) {
    if (e == cudaSuccess) cudaFreeHost(p);
    cudaGetLastError();
    gpu_core.set_error("out of memory: cannot allocate %zu bytes of page-locked host memory: %s",
                       nbytes,
                       e == cudaSuccess ? "no memory for its record" : cudaGetErrorString(e));
    return NULL;
  }
  b->ptr = (char *)p, b->size = size;
  return b;
}

void *gpu_alloc_pinned(size_t nbytes) {
  size_t size = pinned_round(nbytes);
  pthread_mutex_lock(&pmu);
  pinned *b = pinned_take(size);
  if (!b) b = pinned_fresh(size, nbytes);
  if (b) {
    b->used = 0;
    b->next = pinned_live;
    pinned_live = b;
  }
  pthread_mutex_unlock(&pmu);
  return b ? b->ptr : NULL;
}

/* record b's event on device d's legacy default stream; on failure wait
 * for the device instead, so the block is never reused too early */
static int pinned_record(pinned *b, int d) {
  CUDA_CHECK("free_pinned", cudaSetDevice(d));
  if (!b->ev[d])
    CUDA_CHECK("free_pinned", cudaEventCreateWithFlags(&b->ev[d], cudaEventDisableTiming));
  CUDA_CHECK("free_pinned", cudaEventRecord(b->ev[d], 0));
  b->pending |= 1u << d;
  return 0;
}

static void pinned_record_uses(pinned *b) {
  int prev = 0;
  if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
  for (int d = 0; d < GPU_MAX_DEVICES; d++) {
    if (!(b->used & (1u << d)) || pinned_record(b, d) == 0) continue;
    cudaGetLastError();
    if (cudaSetDevice(d) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
      cudaGetLastError();
  }
  if (prev >= 0 && cudaSetDevice(prev) != cudaSuccess) cudaGetLastError();
  b->used = 0;
}

void gpu_free_pinned(void *p) {
  if (!p) return;
  pthread_mutex_lock(&pmu);
  pinned *b = pinned_find(p, 0, true);
  if (b) {
    if (b->used) pinned_record_uses(b);
    b->next = NULL;
    pinned **pp = &pinned_cached; /* append: the list runs oldest first */
    while (*pp) pp = &(*pp)->next;
    *pp = b;
    pinned_cached_bytes += b->size;
    pinned_trim(false);
  }
  pthread_mutex_unlock(&pmu);
}

/* host -> device on the legacy default stream without waiting when src
 * lies in a live pinned block (marked so free waits for the copy); any
 * other source is copied synchronously. */
int gpu_copy_h2d_async(void *dst, const void *src, size_t n, int dev) {
  if (!n) return 0;
  if (gpu_device("to(cuda)", dev)) return -1;
  pthread_mutex_lock(&pmu);
  pinned *b = pinned_find(src, n, false);
  if (b) b->used |= 1u << dev;
  pthread_mutex_unlock(&pmu);
  if (!b) {
    CUDA_CHECK("to(cuda)", cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
    return 0;
  }
  CUDA_CHECK("to(cuda)", cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, 0));
  return 0;
}
