/*
 * host_cache.c -- a small cache of large freed CPU blocks.
 *
 * glibc serves blocks above 32 MiB (and often above 128 KiB) with fresh
 * mmap()s, so every large temporary of a training step -- activations,
 * gradients -- would pay for zeroed pages and page faults again; measured
 * here, an op making a new 64 MB tensor ran at a third of its in-place
 * speed.  Blocks of 1 MiB and more are therefore kept after free, up to
 * a limit, and handed out again for a request of exactly the same rounded
 * size (training loops repeat their shapes).
 *
 * The limit is 1/8 of the machine's memory, clamped to [256 MiB, 1 GiB].
 * It was a flat 256 MiB, less than the working set of an evaluation pass
 * at batch 1000 of the example network (its activations come in distinct
 * sizes, 3 x 100 MB, 25 MB, 3 x 50 MB, 12.5 MB: ~490 MB).  Evicting the
 * oldest block first, the cache then missed on every one of them: each
 * pass faulted in ~260 MB of fresh pages (67,000 minor faults, a third of
 * its time in the kernel) and eval ran at 0.5x its batch-64 speed.  With
 * the whole working set cached a pass faults nothing.  Out-of-memory empties
 * the cache before anything else (storage.c).  A mutex guards it: storages
 * may be released on the data loader's thread.  Under AddressSanitizer the
 * cache is off, so use-after-free stays detectable.
 * It holds up to 512 blocks.  It held 64, fewer than the large tensors
 * a ResNet-20 step frees (~75 activations and as many gradients of 1-4
 * MB at batch 64): with a few more tensors alive -- bench/step_profile's
 * hooked step -- the oldest blocks went back to glibc, whose trim gave
 * their pages to the kernel, and that step faulted in ~11,000 pages (45
 * MB) a step and ran 35 % slower than the step without hooks; with 512
 * slots, 5 %.  The search is a scan of at most 512 entries, once per
 * block of 1 MiB or more.
 * Invariant: cached_bytes == sum of entries' sizes <= the limit.
 *
 * Blocks are 64-byte aligned by hand over malloc(): glibc 2.36 never
 * reuses freed aligned_alloc() chunks (glibc bug 14581, fixed in 2.38), so
 * with aligned_alloc the resident size of a training loop grew ~140 KB per
 * step while the bytes in use stayed flat.
 */
#include "host_cache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define CACHE_ENABLED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CACHE_ENABLED 0
#endif
#endif
#ifndef CACHE_ENABLED
#define CACHE_ENABLED 1
#endif

#define ALIGNMENT       64
#define CACHE_MIN       (1u << 20) /* blocks below this go straight to free() */
#define CACHE_ROUND     ((size_t)64 << 10)
#define CACHE_LIMIT_MIN ((size_t)256 << 20)  /* the limit: 1/8 of the machine's memory, */
#define CACHE_LIMIT_MAX ((size_t)1024 << 20) /* clamped to [256 MiB, 1 GiB] */
#define CACHE_SLOTS     512

typedef struct {
  void *ptr;
  size_t size;
} block;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static block blocks[CACHE_SLOTS]; /* most recently freed last */
static int nblocks;
static size_t cached_bytes;
static size_t cache_limit; /* set on first use (cache_limit_bytes), under `lock` */

/* 1/8 of physical memory within [CACHE_LIMIT_MIN, CACHE_LIMIT_MAX]; read once. */
static size_t cache_limit_bytes(void) {
  if (!cache_limit) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    size_t eighth = pages > 0 && page > 0 ? (size_t)pages * (size_t)page / 8 : CACHE_LIMIT_MIN;
    cache_limit = eighth < CACHE_LIMIT_MIN   ? CACHE_LIMIT_MIN
                  : eighth > CACHE_LIMIT_MAX ? CACHE_LIMIT_MAX
                                             : eighth;
  }
  return cache_limit;
}

/* malloc() with the start moved up to a multiple of ALIGNMENT; the base
 * pointer is kept in the word just before the block. */
static void *aligned_malloc(size_t size) {
  char *base = malloc(size + ALIGNMENT + sizeof(void *));
  if (!base) return NULL;
  uintptr_t p = ((uintptr_t)base + sizeof(void *) + ALIGNMENT - 1) & ~(uintptr_t)(ALIGNMENT - 1);
  ((void **)p)[-1] = base;
  return (void *)p;
}

static void aligned_free(void *p) {
  if (p) free(((void **)p)[-1]);
}

size_t cnn_host_block_size(size_t nbytes) {
  size_t align = nbytes >= CACHE_MIN ? CACHE_ROUND : 64;
  size_t rounded = (nbytes + align - 1) / align * align;
  return rounded ? rounded : 64;
}

static void *cache_take(size_t size) {
  if (!CACHE_ENABLED || size < CACHE_MIN) return NULL;
  void *p = NULL;
  pthread_mutex_lock(&lock);
  for (int i = nblocks - 1; i >= 0; i--) {
    if (blocks[i].size != size) continue;
    p = blocks[i].ptr;
    cached_bytes -= size;
    blocks[i] = blocks[--nblocks];
    break;
  }
  pthread_mutex_unlock(&lock);
  return p;
}

static bool cache_put(void *p, size_t size) {
  if (!CACHE_ENABLED || size < CACHE_MIN) return false;
  pthread_mutex_lock(&lock);
  size_t limit = cache_limit_bytes();
  if (size > limit) return pthread_mutex_unlock(&lock), false;
  while (nblocks > 0 && (nblocks == CACHE_SLOTS || cached_bytes + size > limit)) {
    aligned_free(blocks[0].ptr); /* evict the oldest */
    cached_bytes -= blocks[0].size;
    for (int i = 1; i < nblocks; i++) blocks[i - 1] = blocks[i];
    nblocks--;
  }
  blocks[nblocks++] = (block){p, size};
  cached_bytes += size;
  pthread_mutex_unlock(&lock);
  return true;
}

size_t cnn_host_cache_clear(void) {
  pthread_mutex_lock(&lock);
  size_t freed = cached_bytes;
  for (int i = 0; i < nblocks; i++) aligned_free(blocks[i].ptr);
  nblocks = 0;
  cached_bytes = 0;
  pthread_mutex_unlock(&lock);
  return freed;
}

size_t cnn_host_cache_bytes(void) {
  pthread_mutex_lock(&lock);
  size_t n = cached_bytes;
  pthread_mutex_unlock(&lock);
  return n;
}

void *cnn_host_alloc(size_t size) {
  void *p = cache_take(size);
  return p ? p : aligned_malloc(size);
}

void cnn_host_free(void *p, size_t size) {
  if (p && !cache_put(p, size)) aligned_free(p);
}
