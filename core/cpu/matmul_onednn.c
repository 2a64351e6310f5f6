/*
 * matmul_onednn.c -- bfloat16 matrix products over float32 arrays through
 * oneDNN 2.6's matmul primitive (cnn_cpu_gemm_bf16's fast path; the rule
 * and the dispatch are in bf16_math.c).
 *
 * Design.  As in conv_onednn.c, each call reorders the caller's float32
 * matrices -- strided, possibly transposed, a batch stride of 0 for a
 * broadcast operand -- into the primitive's bfloat16 ones, and the
 * reorder rounds (to nearest even).  The bfloat16 copies are compact and
 * keep the caller's orientation, so the reorder is a plain conversion: at
 * the linear layer of the example network that was ~25% faster than
 * letting oneDNN pick a blocked B (format any), whose reorder transposes
 * and blocks (brgemm blocks B itself).  C (dst) is float32, the
 * accumulator, written in place with the caller's strides, so the output
 * needs no reorder.
 *
 *   operand   user memory (float32)                      primitive's memory
 *   A         batch x M x K, strides (sa, lda, 1) or      bfloat16, compact,
 *             (sa, 1, lda) when trans_a                   same orientation
 *   B         batch x K x N, likewise with ldb, sb         likewise
 *   C         batch x M x N, strides (sc, ldc, 1)          the same memory
 * A broadcast operand (stride 0 over batch > 1) is described with a batch
 * of 1, which oneDNN broadcasts; batch 1 is a plain 2-d product.
 *
 * Cache.  One entry per (flags, sizes, strides): the primitive, the
 * reorders and the memory objects, created once; at most CACHE_SIZE, least
 * recently used evicted; a layout oneDNN rejects is cached as unsupported
 * (-2, the caller emulates).  The bfloat16 copies and the scratchpad live
 * in one arena, grown on demand.  Invariants: `lock` serialises every use
 * of the cache, the arena and the stream; handles are set right before
 * each run.  oneDNN threads with OpenMP (the pool OpenBLAS and our loops
 * share).
 */
#include <dnnl.h>
#include <dnnl_debug.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/onednn_util.h"

#define CACHE_SIZE 32

typedef struct {
  int trans_a, trans_b;
  int64_t M, N, K, lda, sa, ldb, sb, ldc, sc, batch;
} mm_key;

typedef struct {
  dnnl_memory_t user, inner; /* float32 caller's matrix; bfloat16 in the arena */
  dnnl_primitive_t reorder;
  size_t inner_bytes;
} operand;

typedef struct {
  int used, unsupported;
  mm_key key;
  uint64_t last_use;
  dnnl_primitive_t matmul;
  operand a, b;
  dnnl_memory_t c, scratch; /* scratch: NULL when none */
  size_t scratch_bytes;
} entry;

static struct {
  pthread_mutex_t lock;
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  entry entries[CACHE_SIZE];
  uint64_t clock;
  cnn_onednn_arena arena;
} G = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int fail(dnnl_status_t st, const char *what, const mm_key *k) {
  cnn_set_error("matmul: oneDNN bfloat16 %s failed (%s) for %lldx%lld times %lldx%lld, batch %lld",
                what, dnnl_status2str(st), (long long)k->M, (long long)k->K, (long long)k->K,
                (long long)k->N, (long long)k->batch);
  return -1;
}

/* ---- entries ----------------------------------------------------------------- */

static void operand_destroy(operand *o) {
  if (o->reorder) dnnl_primitive_destroy(o->reorder);
  if (o->inner) dnnl_memory_destroy(o->inner);
  if (o->user) dnnl_memory_destroy(o->user);
}

static void entry_destroy(entry *e) {
  operand_destroy(&e->a), operand_destroy(&e->b);
  if (e->c) dnnl_memory_destroy(e->c);
  if (e->scratch) dnnl_memory_destroy(e->scratch);
  if (e->matmul) dnnl_primitive_destroy(e->matmul);
  memset(e, 0, sizeof *e);
}

static entry *cache_find(const mm_key *k) {
  for (int i = 0; i < CACHE_SIZE; i++)
    if (G.entries[i].used && !memcmp(&G.entries[i].key, k, sizeof *k)) return &G.entries[i];
  return NULL;
}

static entry *cache_slot(void) {
  entry *lru = &G.entries[0];
  for (int i = 0; i < CACHE_SIZE; i++) {
    if (!G.entries[i].used) return &G.entries[i];
    if (G.entries[i].last_use < lru->last_use) lru = &G.entries[i];
  }
  entry_destroy(lru);
  return lru;
}

/* The dims (and strides) of a rows x cols matrix, led by the batch `nb`
 * when nd is 3: a batch of 1 is a plain 2-d product. */
static void dims_of(int nd, int64_t nb, int64_t rows, int64_t cols, dnnl_dims_t d) {
  int i = 0;
  if (nd == 3) d[i++] = nb;
  d[i++] = rows, d[i] = cols;
}

/* batch stride step (a batch of 1: the matrix's span), row stride ld,
 * stored transposed when `trans` */
static void strided_md(dnnl_memory_desc_t *md, int nd, int64_t nb, int64_t rows, int64_t cols,
                       int64_t ld, int64_t step, int trans, dnnl_data_type_t dt) {
  dnnl_dims_t dims, st;
  dims_of(nd, nb, rows, cols, dims);
  dims_of(nd, step ? step : (trans ? cols : rows) * ld, trans ? 1 : ld, trans ? ld : 1, st);
  dnnl_memory_desc_init_by_strides(md, nd, dims, dt, st);
}

/* The primitive's bfloat16 copy: compact, in the caller's orientation. */
static void compact_md(dnnl_memory_desc_t *md, int nd, int64_t nb, int64_t rows, int64_t cols,
                       int trans) {
  strided_md(md, nd, nb, rows, cols, trans ? rows : cols, rows * cols, trans, dnnl_bf16);
}

/* The caller's float32 matrix, the primitive's bfloat16 one and the
 * reorder between them (which rounds). */
static dnnl_status_t operand_build(operand *o, const dnnl_memory_desc_t *user,
                                   const dnnl_memory_desc_t *want) {
  dnnl_primitive_desc_t rpd;
  dnnl_status_t st = dnnl_memory_create(&o->user, user, G.engine, DNNL_MEMORY_NONE);
  if (st == dnnl_success) st = dnnl_memory_create(&o->inner, want, G.engine, DNNL_MEMORY_NONE);
  if (st == dnnl_success)
    st = dnnl_reorder_primitive_desc_create(&rpd, user, G.engine, want, G.engine, NULL);
  if (st != dnnl_success) return st;
  o->inner_bytes = dnnl_memory_desc_get_size(want);
  st = dnnl_primitive_create(&o->reorder, rpd);
  dnnl_primitive_desc_destroy(rpd);
  return st;
}

typedef struct {
  dnnl_memory_desc_t a_user, b_user, a_bf16, b_bf16, c;
} mm_mds;

static void init_mds(const mm_key *k, mm_mds *m) {
  int nd = k->batch > 1 ? 3 : 2;
  int64_t ba = k->sa == 0 ? 1 : k->batch, bb = k->sb == 0 ? 1 : k->batch;
  strided_md(&m->a_user, nd, ba, k->M, k->K, k->lda, k->sa, k->trans_a, dnnl_f32);
  strided_md(&m->b_user, nd, bb, k->K, k->N, k->ldb, k->sb, k->trans_b, dnnl_f32);
  strided_md(&m->c, nd, k->batch, k->M, k->N, k->ldc, k->sc, 0, dnnl_f32);
  compact_md(&m->a_bf16, nd, ba, k->M, k->K, k->trans_a);
  compact_md(&m->b_bf16, nd, bb, k->K, k->N, k->trans_b);
}

static dnnl_status_t make_pd(mm_mds *m, dnnl_primitive_desc_t *pd) {
  dnnl_matmul_desc_t md;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_status_t st = dnnl_matmul_desc_init(&md, &m->a_bf16, &m->b_bf16, NULL, &m->c);
  if (st == dnnl_success) st = dnnl_primitive_attr_create(&attr);
  if (st == dnnl_success)
    st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  if (st == dnnl_success) st = dnnl_primitive_desc_create(pd, &md, attr, G.engine, NULL);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return st == dnnl_success ? cnn_onednn_refuse_reference(*pd) : st; /* the caller emulates */
}

static dnnl_status_t entry_memories(entry *e, dnnl_primitive_desc_t pd, mm_mds *m) {
  const dnnl_memory_desc_t *wa = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  const dnnl_memory_desc_t *wb = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  const dnnl_memory_desc_t *sm = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  dnnl_status_t st = operand_build(&e->a, &m->a_user, wa);
  if (st == dnnl_success) st = operand_build(&e->b, &m->b_user, wb);
  if (st == dnnl_success) st = dnnl_memory_create(&e->c, &m->c, G.engine, DNNL_MEMORY_NONE);
  e->scratch_bytes = sm ? dnnl_memory_desc_get_size(sm) : 0;
  if (st == dnnl_success && e->scratch_bytes)
    st = dnnl_memory_create(&e->scratch, sm, G.engine, DNNL_MEMORY_NONE);
  return st;
}

/* 0; -2 (error set) where oneDNN has no primitive (the entry is kept,
 * marked unsupported); -1 on other failures (the entry is emptied). */
static int entry_build(entry *e, const mm_key *k) {
  mm_mds m;
  dnnl_primitive_desc_t pd;
  e->used = 1, e->key = *k;
  init_mds(k, &m);
  dnnl_status_t st = make_pd(&m, &pd);
  if (st != dnnl_success) {
    e->unsupported = 1;
    fail(st, "primitive creation", k);
    return -2;
  }
  st = entry_memories(e, pd, &m);
  if (st == dnnl_success) st = dnnl_primitive_create(&e->matmul, pd);
  dnnl_primitive_desc_destroy(pd);
  if (st == dnnl_success) return 0;
  fail(st, "setup", k);
  entry_destroy(e);
  return -1;
}

static entry *cache_get(const mm_key *k, int *rc) {
  entry *e = cache_find(k);
  *rc = 0;
  if (!e) {
    e = cache_slot();
    if ((*rc = entry_build(e, k)) == -1) return NULL;
  }
  e->last_use = ++G.clock;
  if (!e->unsupported) return e;
  cnn_set_error("matmul: oneDNN has no bfloat16 matmul for %lldx%lld times %lldx%lld, batch %lld",
                (long long)k->M, (long long)k->K, (long long)k->K, (long long)k->N,
                (long long)k->batch);
  *rc = -2;
  return NULL;
}

/* ---- running ------------------------------------------------------------------ */

static dnnl_status_t reorder_in(operand *o, const float *p, char *at) {
  dnnl_status_t st = dnnl_memory_set_data_handle(o->user, (void *)p);
  if (st == dnnl_success) st = dnnl_memory_set_data_handle(o->inner, at);
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, o->user}, {DNNL_ARG_TO, o->inner}};
  return st == dnnl_success ? dnnl_primitive_execute(o->reorder, G.stream, 2, args) : st;
}

/* A and B rounded into the arena, the product into C, waited for. */
static int entry_run(entry *e, const float *A, const float *B, float *C) {
  size_t ab = cnn_onednn_round_up(e->a.inner_bytes), bb = cnn_onednn_round_up(e->b.inner_bytes);
  if (cnn_onednn_arena_reserve(&G.arena, ab + bb + e->scratch_bytes, "matmul", "bfloat16 copies"))
    return -1;
  char *base = G.arena.base;
  dnnl_status_t st = reorder_in(&e->a, A, base);
  if (st == dnnl_success) st = reorder_in(&e->b, B, base + ab);
  if (st == dnnl_success) st = dnnl_memory_set_data_handle(e->c, C);
  if (st == dnnl_success && e->scratch)
    st = dnnl_memory_set_data_handle(e->scratch, base + ab + bb);
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, e->a.inner},
                             {DNNL_ARG_WEIGHTS, e->b.inner},
                             {DNNL_ARG_DST, e->c},
                             {DNNL_ARG_SCRATCHPAD, e->scratch}};
  if (st == dnnl_success)
    st = dnnl_primitive_execute(e->matmul, G.stream, e->scratch ? 4 : 3, args);
  if (st == dnnl_success) st = dnnl_stream_wait(G.stream);
  return st == dnnl_success ? 0 : fail(st, "execution", &e->key);
}

int cnn_cpu_gemm_bf16_onednn(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A,
                             int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb,
                             float *C, int64_t ldc, int64_t sc, int64_t batch) {
  if (cnn_interrupt_pending()) return cnn_set_error("matmul: interrupted"), -1;
  mm_key k = {
      ta,   tb, M, N, K, lda, batch > 1 ? sa : 0, ldb, batch > 1 ? sb : 0, ldc, batch > 1 ? sc : 0,
      batch};
  pthread_mutex_lock(&G.lock);
  dnnl_status_t st = cnn_onednn_stream_open(&G.engine, &G.stream);
  int rc = st == dnnl_success ? 0 : fail(st, "engine creation", &k);
  entry *e = rc ? NULL : cache_get(&k, &rc);
  if (e) rc = entry_run(e, A, B, C);
  pthread_mutex_unlock(&G.lock);
  return rc;
}

void cnn_cpu_matmul_onednn_cache_clear(void) {
  pthread_mutex_lock(&G.lock);
  for (int i = 0; i < CACHE_SIZE; i++)
    if (G.entries[i].used) entry_destroy(&G.entries[i]);
  cnn_onednn_arena_free(&G.arena);
  cnn_onednn_stream_close(&G.engine, &G.stream);
  pthread_mutex_unlock(&G.lock);
}
