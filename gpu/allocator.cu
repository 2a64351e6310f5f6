/*
 * allocator.cu -- the caching device allocator (and page-locked host memory).
 *
 * cudaMalloc/cudaFree synchronise the device and cost tens of microseconds,
 * so freed blocks are kept per device in size-class free lists and handed
 * out again.  Sizes are rounded up: to 512 bytes below 1 MiB, to 2 MiB
 * above.  A request takes the smallest cached block of at least its
 * rounded size and at most twice it (so a huge cached block is not wasted
 * on a small tensor).  On cudaErrorMemoryAllocation the whole cache of the
 * device is released and the allocation retried once; a second failure
 * sets "out of memory: ..." with the size and the device's free memory and
 * returns NULL (core then runs the garbage collector and retries, see
 * core/storage.c, which also keeps the live/peak accounting).
 *
 * Reuse without events is safe because every op runs on the device's
 * default stream (gpu.h): work that used a freed block is ordered before
 * any later use of the block.
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
#define LARGE_ROUND (2u << 20)
#define NBUCKETS 4096

typedef struct block {
  void *ptr;
  size_t size;  /* rounded */
  int dev;
  struct block *next;
} block;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static block *free_list[GPU_MAX_DEVICES]; /* sorted by size, ascending */
static block *live[NBUCKETS];             /* pointer -> block, chained */
static int64_t cached_bytes[GPU_MAX_DEVICES], reserved_bytes[GPU_MAX_DEVICES];

static size_t round_size(size_t n) {
  if (n < SMALL_LIMIT) return (n + SMALL_ROUND - 1) / SMALL_ROUND * SMALL_ROUND;
  return (n + LARGE_ROUND - 1) / LARGE_ROUND * LARGE_ROUND;
}

static unsigned bucket_of(const void *p) {
  uintptr_t u = (uintptr_t)p >> 9;
  return (unsigned)((u ^ (u >> 13)) % NBUCKETS);
}

/* the smallest cached block fitting `size` (and not more than twice it) */
static block *take_cached(int dev, size_t size) {
  block **pp = &free_list[dev];
  for (; *pp; pp = &(*pp)->next) {
    block *b = *pp;
    if (b->size < size) continue;
    if (b->size > 2 * size) return NULL; /* sorted: nothing better follows */
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

/* release every cached block of dev (dev < 0: all devices); caller holds mu */
static void release_cache(int dev) {
  for (int d = 0; d < GPU_MAX_DEVICES; d++) {
    if (dev >= 0 && d != dev) continue;
    block *b = free_list[d];
    free_list[d] = NULL;
    if (b) cudaSetDevice(d);
    while (b) {
      block *next = b->next;
      cudaFree(b->ptr);
      reserved_bytes[d] -= (int64_t)b->size;
      free(b);
      b = next;
    }
    cached_bytes[d] = 0;
  }
}

static void *fresh_block(int dev, size_t size, cudaError_t *err) {
  void *p = NULL;
  *err = cudaMalloc(&p, size);
  if (*err == cudaErrorMemoryAllocation) {
    cudaGetLastError(); /* clear it, free the cache, try once more */
    release_cache(dev);
    cudaSetDevice(dev);
    *err = cudaMalloc(&p, size);
  }
  if (*err != cudaSuccess) {
    cudaGetLastError();
    return NULL;
  }
  reserved_bytes[dev] += (int64_t)size;
  return p;
}

static void report_oom(int dev, size_t n, cudaError_t err) {
  size_t fr = 0, tot = 0;
  cudaMemGetInfo(&fr, &tot);
  cudaGetLastError();
  gpu_core.set_error("out of memory: cannot allocate %zu bytes (%.1f MiB) on cuda:%d: %s "
                     "(%.1f MiB free of %.1f MiB; %.1f MiB held by live tensors)", n,
                     n / 1048576.0, dev, cudaGetErrorString(err), fr / 1048576.0,
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
      if (p) cudaFree(p), reserved_bytes[dev] -= (int64_t)size;
      report_oom(dev, nbytes, p ? cudaErrorMemoryAllocation : err);
      pthread_mutex_unlock(&mu);
      return NULL;
    }
    b->ptr = p, b->size = size, b->dev = dev;
  }
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
    put_cached(b);
  }
  pthread_mutex_unlock(&mu);
  (void)dev;
}

void *gpu_scratch(const char *op, size_t nbytes, int dev) {
  (void)op; /* the allocator's message names the size and the device */
  return gpu_alloc(nbytes, dev);
}

void gpu_empty_cache(void) {
  pthread_mutex_lock(&mu);
  release_cache(-1);
  pthread_mutex_unlock(&mu);
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

/* ---- page-locked host memory ------------------------------------------------------- */

void *gpu_alloc_pinned(size_t nbytes) {
  void *p = NULL;
  cudaError_t e = cudaHostAlloc(&p, nbytes ? nbytes : 1, cudaHostAllocDefault);
  if (e != cudaSuccess) {
    cudaGetLastError();
    gpu_core.set_error("out of memory: cannot allocate %zu bytes of page-locked host memory: %s",
                       nbytes, cudaGetErrorString(e));
    return NULL;
  }
  return p;
}

void gpu_free_pinned(void *p) {
  if (p) cudaFreeHost(p);
}
