/*
 * fake_cuda_async.c -- page-locked host memory and asynchronous host ->
 * device copies of the fake device (pinned batches, cnn_to_device_async),
 * registered through fake_cuda.h's weak hook fake_register_async, which
 * runs after fake_cuda_device.c's own entries (so these replace its plain
 * malloc alloc_pinned/free_pinned).
 *
 * Design.  alloc_pinned takes host memory (malloc, outside the arena) and
 * records the block in a list; free_pinned unlinks and frees it.
 * copy_h2d_async is a memcpy inside fake_enter/fake_leave, like copy_h2d,
 * but it insists that the source lies inside ONE live pinned block: core
 * must send only pinned memory down the asynchronous path, so a pageable
 * source fails the op here (gpu/allocator.cu copies such a source
 * synchronously instead, which would hide the bug).  The copy itself is
 * done at once: on the fake, "in flight" never lasts, so the event logic of
 * gpu/allocator.cu is not exercised here -- only core's use of the entries.
 *
 * Counters for tests, exported so a test can dlsym() them from the module
 * (dlopen(path, RTLD_NOLOAD)): fake_async_copies counts asynchronous
 * copies done; fake_pinned_live_blocks / fake_pinned_live_bytes the
 * pinned blocks handed out and not yet freed (flat memory = back to 0).
 *
 * Invariants (under `mu`): every pointer handed out by alloc_pinned is in
 * `live` exactly once until free_pinned; the counters match the list.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT long fake_async_copies;
EXPORT long fake_pinned_live_blocks;
EXPORT long long fake_pinned_live_bytes;

typedef struct pinned {
  char *ptr;
  size_t size;
  struct pinned *next;
} pinned;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pinned *live;

/* ---- page-locked blocks ---------------------------------------------------------- */

static void *alloc_pinned(size_t nbytes) {
  size_t size = nbytes ? nbytes : 1;
  pinned *b = malloc(sizeof *b);
  char *p = b ? malloc(size) : NULL;
  if (!p) {
    free(b);
    fake_core.set_error("out of memory: cannot allocate %zu bytes of page-locked host memory",
                        nbytes);
    return NULL;
  }
  pthread_mutex_lock(&mu);
  *b = (pinned){p, size, live};
  live = b;
  fake_pinned_live_blocks++;
  fake_pinned_live_bytes += (long long)size;
  pthread_mutex_unlock(&mu);
  return p;
}

static void free_pinned(void *p) {
  if (!p) return;
  pthread_mutex_lock(&mu);
  pinned **pp = &live;
  while (*pp && (*pp)->ptr != p) pp = &(*pp)->next;
  pinned *b = *pp;
  if (b) {
    *pp = b->next;
    fake_pinned_live_blocks--;
    fake_pinned_live_bytes -= (long long)b->size;
  }
  pthread_mutex_unlock(&mu);
  if (!b) return; /* not ours: leave it alone rather than corrupt the heap */
  free(b->ptr);
  free(b);
}

/* 0 if [p, p + n) lies inside one live pinned block, else -1 with an error */
static int check_pinned(const char *op, const void *p, size_t n) {
  const char *c = p;
  pthread_mutex_lock(&mu);
  pinned *b = live;
  while (b && (c < b->ptr || c + n > b->ptr + b->size)) b = b->next;
  pthread_mutex_unlock(&mu);
  if (b) return 0;
  fake_core.set_error("%s: fake cuda: the source of an asynchronous copy (%p, %zu bytes) is not "
                      "page-locked memory from alloc_pinned",
                      op, p, n);
  return -1;
}

/* ---- the copy -------------------------------------------------------------------- */

static int copy_h2d_async(void *dst, const void *src, size_t n, int dev) {
  if (fake_enter("to(cuda)", dev)) return -1;
  int rc = fake_dev("to(cuda)", dst, n) || fake_host("to(cuda)", src, n) ? -1 : 0;
  if (rc == 0 && n) rc = check_pinned("to(cuda)", src, n);
  if (rc == 0 && n) {
    memcpy(dst, src, n);
    __atomic_add_fetch(&fake_async_copies, 1, __ATOMIC_RELAXED);
  }
  fake_leave();
  return rc;
}

void fake_register_async(cnn_backend *be) {
  be->alloc_pinned = alloc_pinned;
  be->free_pinned = free_pinned;
  be->copy_h2d_async = copy_h2d_async;
}
