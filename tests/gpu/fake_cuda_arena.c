/*
 * fake_cuda_arena.c -- the fake device's memory: one arena of address space
 * that core cannot touch by accident.
 *
 * Design.  fake_arena_init() reserves `total` bytes (16 GiB by default, or
 * $CNNSH_FAKE_CUDA_MEMORY) with mmap(PROT_NONE, MAP_NORESERVE): address
 * space only, no memory until a page is written.  Blocks are carved first
 * fit from [base, base + top): `blocks` is an array of {off, len, used}
 * sorted by offset that tiles [0, top) exactly; a request that no free
 * block fits extends `top`.  Lengths are multiples of FAKE_ALIGN (64), so
 * every block is 64-byte aligned.  Freed blocks merge with free neighbours
 * and stay below `top` ("cached", as a caching allocator's free lists);
 * fake_arena_trim() lowers `top` past a free tail and gives free pages back
 * (madvise), like empty_cache.
 *
 * Protection.  The pages of [base, base + prot) (prot = top rounded up to a
 * page) are PROT_NONE except between fake_enter() and fake_leave(): a core
 * function that reads or writes a device pointer itself crashes (SIGSEGV)
 * as it would on a real GPU.  Entries run one at a time under one
 * recursive lock; `depth` counts nesting so only the outermost pair
 * changes the protection.
 *
 * Invariants: blocks tile [0, top) in order, no two adjacent free blocks;
 * top <= prot <= total; outside enter/leave the arena is PROT_NONE; the
 * bookkeeping lives in host memory (malloc), never in the arena.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_cuda.h"

typedef struct {
  size_t off, len; /* bytes from base; len a multiple of FAKE_ALIGN */
  bool used;
} block;

static char *base;
static size_t total, top, prot, page;
static block *blocks;
static size_t nblocks, cap;
static int depth;
static pthread_mutex_t mu;

/* ---- init ---------------------------------------------------------------------------- */

static size_t arena_size(void) {
  const char *s = getenv("CNNSH_FAKE_CUDA_MEMORY");
  char *end;
  unsigned long long v = s ? strtoull(s, &end, 10) : 0;
  if (!s || !*s || *end || v < (1u << 20)) return (size_t)16 << 30;
  return (size_t)v;
}

static void init_lock(void) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&mu, &a);
  pthread_mutexattr_destroy(&a);
}

int fake_arena_init(char *reason, size_t len) {
  if (base) return 0;
  page = (size_t)sysconf(_SC_PAGESIZE);
  total = arena_size() / page * page;
  void *p = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    snprintf(reason, len, "fake CUDA device: cannot reserve %zu bytes: %s", total, strerror(errno));
    return -1;
  }
  init_lock();
  base = p;
  return 0;
}

bool fake_in_arena(const void *p) {
  return base && (const char *)p >= base && (const char *)p < base + total;
}

/* ---- protection ------------------------------------------------------------------------ */

static void protect(size_t from, size_t to, int prot_flags) {
  if (to > from && mprotect(base + from, to - from, prot_flags)) {
    fprintf(stderr, "fake cuda: mprotect failed: %s\n", strerror(errno));
    abort(); /* the test device itself is broken: nothing sensible to return */
  }
}

int fake_enter(const char *op, int dev) {
  if (dev != 0) {
    fake_core.set_error("%s: cuda:%d does not exist (1 device)", op, dev);
    return -1;
  }
  pthread_mutex_lock(&mu);
  if (depth++ == 0) protect(0, prot, PROT_READ | PROT_WRITE);
  return 0;
}

void fake_leave(void) {
  if (--depth == 0) protect(0, prot, PROT_NONE);
  pthread_mutex_unlock(&mu);
}

/* ---- block list -------------------------------------------------------------------------- */

static int insert_at(size_t i, block b) {
  if (nblocks == cap) {
    size_t nc = cap ? cap * 2 : 64;
    block *nb = realloc(blocks, nc * sizeof *nb);
    if (!nb) return -1;
    blocks = nb, cap = nc;
  }
  memmove(blocks + i + 1, blocks + i, (nblocks - i) * sizeof *blocks);
  blocks[i] = b;
  nblocks++;
  return 0;
}

static void remove_at(size_t i) {
  memmove(blocks + i, blocks + i + 1, (nblocks - i - 1) * sizeof *blocks);
  nblocks--;
}

/* index of the block holding offset off, or nblocks */
static size_t find_block(size_t off) {
  size_t lo = 0, hi = nblocks;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (blocks[mid].off + blocks[mid].len <= off)
      lo = mid + 1;
    else if (blocks[mid].off > off)
      hi = mid;
    else
      return mid;
  }
  return nblocks;
}

/* ---- alloc / free --------------------------------------------------------------------------- */

/* first fit among the free blocks; splits the rest off */
static char *take_free(size_t need) {
  for (size_t i = 0; i < nblocks; i++) {
    block *b = &blocks[i];
    if (b->used || b->len < need) continue;
    if (b->len > need && insert_at(i + 1, (block){b->off + need, b->len - need, false}))
      return NULL;
    b = &blocks[i]; /* insert_at may have moved the array */
    b->len = need, b->used = true;
    return base + b->off;
  }
  return NULL;
}

static char *extend_top(size_t need) {
  if (need > total - top || insert_at(nblocks, (block){top, need, true})) return NULL;
  char *p = base + top;
  top += need;
  size_t np = (top + page - 1) / page * page;
  if (np > prot) {
    if (depth > 0) protect(prot, np, PROT_READ | PROT_WRITE);
    prot = np;
  }
  return p;
}

void *fake_arena_alloc(size_t nbytes) {
  size_t need = (nbytes + FAKE_ALIGN - 1) / FAKE_ALIGN * FAKE_ALIGN;
  if (!need) need = FAKE_ALIGN;
  pthread_mutex_lock(&mu);
  char *p = nbytes > total ? NULL : take_free(need);
  if (!p && nbytes <= total) p = extend_top(need);
  int64_t live = 0;
  for (size_t i = 0; !p && i < nblocks; i++) live += blocks[i].used ? (int64_t)blocks[i].len : 0;
  pthread_mutex_unlock(&mu);
  if (!p)
    fake_core.set_error("out of memory: cannot allocate %zu bytes (%.1f MiB) on cuda:0: fake "
                        "device arena of %.1f MiB full (%.1f MiB held by live tensors)",
                        nbytes, nbytes / 1048576.0, total / 1048576.0, live / 1048576.0);
  return p;
}

static void merge_free(size_t i) {
  if (i + 1 < nblocks && !blocks[i + 1].used) blocks[i].len += blocks[i + 1].len, remove_at(i + 1);
  if (i > 0 && !blocks[i - 1].used) blocks[i - 1].len += blocks[i].len, remove_at(i);
}

void fake_arena_free(void *p) {
  if (!p) return;
  pthread_mutex_lock(&mu);
  size_t i = fake_in_arena(p) ? find_block((size_t)((char *)p - base)) : nblocks;
  if (i == nblocks || !blocks[i].used || base + blocks[i].off != (char *)p) {
    pthread_mutex_unlock(&mu);
    fprintf(stderr, "fake cuda: free(%p): not a live device block (double free or host pointer)\n",
            p);
    abort(); /* a broken invariant in core, as cudaFree of a bad pointer */
  }
  blocks[i].used = false;
  merge_free(i);
  pthread_mutex_unlock(&mu);
}

void fake_arena_stats(int64_t *tot, int64_t *reserved, int64_t *cached, int64_t *live) {
  pthread_mutex_lock(&mu);
  int64_t c = 0, l = 0;
  for (size_t i = 0; i < nblocks; i++) {
    if (blocks[i].used)
      l += (int64_t)blocks[i].len;
    else
      c += (int64_t)blocks[i].len;
  }
  if (tot) *tot = (int64_t)total;
  if (reserved) *reserved = (int64_t)top;
  if (cached) *cached = c;
  if (live) *live = l;
  pthread_mutex_unlock(&mu);
}

/* drop a free tail block, give the pages of free blocks back to the kernel */
void fake_arena_trim(void) {
  pthread_mutex_lock(&mu);
  if (nblocks && !blocks[nblocks - 1].used) top = blocks[nblocks - 1].off, remove_at(nblocks - 1);
  for (size_t i = 0; i < nblocks; i++) {
    if (blocks[i].used) continue;
    size_t lo = (blocks[i].off + page - 1) / page * page,
           hi = (blocks[i].off + blocks[i].len) / page * page;
    if (hi > lo) madvise(base + lo, hi - lo, MADV_DONTNEED);
  }
  size_t np = (top + page - 1) / page * page;
  if (np < prot) {
    madvise(base + np, prot - np, MADV_DONTNEED);
    protect(np, prot, PROT_NONE);
    prot = np;
  }
  pthread_mutex_unlock(&mu);
}

/* ---- pointer checks ------------------------------------------------------------------------------ */

int fake_dev(const char *op, const void *p, size_t n) {
  if (n == 0 && (!p || fake_in_arena(p))) return 0;
  pthread_mutex_lock(&mu);
  size_t off = fake_in_arena(p) ? (size_t)((const char *)p - base) : 0;
  size_t i = fake_in_arena(p) ? find_block(off) : nblocks;
  bool ok = i < nblocks && blocks[i].used && off + n <= blocks[i].off + blocks[i].len;
  pthread_mutex_unlock(&mu);
  if (ok) return 0;
  if (!fake_in_arena(p))
    fake_core.set_error("%s: fake cuda: %p is not device memory (a host pointer passed to a "
                        "kernel: an illegal address on a real GPU)",
                        op, p);
  else
    fake_core.set_error("%s: fake cuda: %zu bytes at %p run outside their device block (or the "
                        "block is freed)",
                        op, n, p);
  return -1;
}

int fake_host(const char *op, const void *p, size_t n) {
  if (n == 0) return 0;
  const char *c = p;
  if (p && !fake_in_arena(c) && !fake_in_arena(c + n - 1)) return 0;
  fake_core.set_error("%s: fake cuda: %p is %s where host memory is expected", op, p,
                      p ? "device memory" : "NULL");
  return -1;
}

int fake_dev_n(const char *op, const void *p, int64_t n, cnn_dtype dt) {
  return fake_dev(op, p, n > 0 ? (size_t)n * cnn_dtype_size(dt) : 0);
}

/* the lowest and highest element a strided operand reaches */
int fake_dev_arg(const char *op, const cnn_be_shape *s, cnn_dtype dt, cnn_be_arg a) {
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < s->ndim; d++) {
    if (s->shape[d] == 0) return 0; /* no element is touched */
    int64_t span = (s->shape[d] - 1) * a.stride[d];
    if (span < 0)
      lo += span;
    else
      hi += span;
  }
  size_t es = cnn_dtype_size(dt);
  return fake_dev(op, (const char *)a.ptr + lo * (int64_t)es, (size_t)(hi - lo + 1) * es);
}
