/*
 * fake_cuda_fault.c -- injected failures and the real module's recovery
 * paths on the fake CUDA device (issue 18, points 2, 3, 5, 6 and 8).
 *
 * This file owns no math: it WRAPS entries of the finished table
 * (fake_register_faults, the last weak hook of fake_cuda.h) and calls the
 * original entry for the work, so the per-op files stay as they are.  The
 * wrappers take their decisions from the module's own plain-C headers:
 *  - gpu/recover.h: alloc and gemm run through gpu_retry_once (a MEMORY
 *    fault releases the cache -- fake_arena_trim -- and retries once; a
 *    STICKY one is never retried and its message says to restart); the
 *    convolution tries up to FAKE_NCAND "algorithms" and skips a candidate
 *    on the faults gpu_fault_next_algorithm names; when every candidate
 *    refused an operand's alignment it runs once more "on aligned copies";
 *  - gpu/conv_plan.h: a convolution with asymmetric padding (not forced to
 *    the direct kernel) runs as the real module does -- the input padded
 *    into scratch arena memory, the symmetric problem, the input gradient
 *    cropped -- so gpu_parity_fake checks that arithmetic against the CPU.
 *
 * Batch norm's backward records the eps core passes (fake_cuda_last_bn_eps):
 * the forward's, which the real module hands to cuDNN.
 *
 * Injection (tests/gpu/test_fake_cuda.c): the exported
 * fake_cuda_inject(site, fault, count) makes the next `count` attempts at
 * `site` ("alloc", "gemm", "conv") fail with `fault` (a gpu_fault) before
 * doing anything; fake_cuda_fault_counts(site, ...) reports the attempts,
 * cache releases and aligned-copy runs since the last injection there.
 * Nothing is injected unless a test asks, so every other test sees the
 * plain fake device.  Injection state is guarded by the arena's lock
 * (fake_enter) or by `mu` here.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "conv_plan.h"
#include "fake_cuda.h"
#include "recover.h"

#define EXPORT     __attribute__((visibility("default")))
#define FAKE_NCAND 3

enum { SITE_ALLOC, SITE_GEMM, SITE_CONV, NSITES };
static const char *const site_names[NSITES] = {"alloc", "gemm", "conv"};

typedef struct {
  gpu_fault fault;
  int pending; /* attempts still to fail */
  int attempts, releases, aligned;
} site_state;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static site_state sites[NSITES];
static cnn_backend orig; /* the table before wrapping */

static int site_of(const char *name) {
  for (int i = 0; i < NSITES; i++)
    if (name && strcmp(name, site_names[i]) == 0) return i;
  return -1;
}

EXPORT int fake_cuda_inject(const char *site, int fault, int count) {
  int i = site_of(site);
  if (i < 0) return -1;
  pthread_mutex_lock(&mu);
  sites[i] = (site_state){(gpu_fault)fault, count, 0, 0, 0};
  pthread_mutex_unlock(&mu);
  return 0;
}

EXPORT int fake_cuda_fault_counts(const char *site, int *attempts, int *releases, int *aligned) {
  int i = site_of(site);
  if (i < 0) return -1;
  pthread_mutex_lock(&mu);
  *attempts = sites[i].attempts, *releases = sites[i].releases, *aligned = sites[i].aligned;
  pthread_mutex_unlock(&mu);
  return 0;
}

/* one attempt at site i: the injected fault while any is pending, else NONE */
static gpu_fault take(int i) {
  pthread_mutex_lock(&mu);
  sites[i].attempts++;
  gpu_fault f = GPU_FAULT_NONE;
  if (sites[i].pending > 0) sites[i].pending--, f = sites[i].fault;
  pthread_mutex_unlock(&mu);
  return f;
}

static void count_release(int i) {
  pthread_mutex_lock(&mu);
  sites[i].releases++;
  pthread_mutex_unlock(&mu);
}

/* the message of a fault that survived the policy (the real module's words) */
static void fault_error(const char *op, gpu_fault f, size_t nbytes) {
  if (f == GPU_FAULT_MEMORY)
    fake_core.set_error("out of memory: cannot allocate %zu bytes on cuda:0 (injected)%s", nbytes,
                        gpu_fault_advice(f));
  else
    fake_core.set_error("%s: CUDA error: injected fault %d%s", op, (int)f, gpu_fault_advice(f));
}

/* ---- alloc ------------------------------------------------------------------------- */

typedef struct {
  size_t nbytes;
  int dev;
  void *p;
  bool injected; /* the last attempt's fault was injected (else the arena's own) */
} alloc_try;

static gpu_fault alloc_attempt(void *ctx) {
  alloc_try *t = ctx;
  gpu_fault f = take(SITE_ALLOC);
  t->injected = f != GPU_FAULT_NONE;
  if (t->injected) return f;
  t->p = orig.alloc(t->nbytes, t->dev);
  return t->p ? GPU_FAULT_NONE : GPU_FAULT_MEMORY;
}

static void alloc_release(void *ctx) {
  (void)ctx;
  count_release(SITE_ALLOC);
  orig.empty_cache();
}

/* the real module's fresh_block: retry once after releasing, for memory only */
static void *alloc(size_t nbytes, int dev) {
  alloc_try t = {nbytes, dev, NULL, false};
  gpu_fault f = gpu_retry_once(alloc_attempt, alloc_release, &t);
  if (f == GPU_FAULT_NONE) return t.p;
  if (t.injected) fault_error("alloc", f, nbytes); /* else the arena's message stays */
  return NULL;
}

/* ---- gemm (cuBLAS's CUBLAS_CHECK_RETRY) ------------------------------------------------ */

typedef struct {
  int dev;
  cnn_dtype dt;
  bool ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  const void *A, *B;
  void *C;
  int rc;
} gemm_try;

static gpu_fault gemm_attempt(void *ctx) {
  gemm_try *g = ctx;
  gpu_fault f = take(SITE_GEMM);
  if (f != GPU_FAULT_NONE) return f;
  g->rc = orig.gemm(g->dev, g->dt, g->ta, g->tb, g->M, g->N, g->K, g->A, g->lda, g->B, g->ldb, g->C,
                    g->ldc);
  return GPU_FAULT_NONE; /* a failure of the op itself (bad pointer...) is its own rc */
}

static void gemm_release(void *ctx) {
  (void)ctx;
  count_release(SITE_GEMM);
  orig.empty_cache();
}

static int gemm(int dev, cnn_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                const void *A, int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc) {
  gemm_try g = {dev, dt, ta, tb, M, N, K, lda, ldb, ldc, A, B, C, 0};
  gpu_fault f = gpu_retry_once(gemm_attempt, gemm_release, &g);
  if (f == GPU_FAULT_NONE) return g.rc;
  fault_error("matmul", f, 0);
  return -1;
}

/* ---- convolution: candidates, aligned copies, asymmetric padding ------------------------- */

static int call_orig(int dir, int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                     const void *a, const void *b, const void *bias, void *out, void *db) {
  if (dir == 0) return orig.conv2d_forward(dev, algo, dt, s, a, b, bias, out);
  if (dir == 1) return orig.conv2d_backward_data(dev, algo, dt, s, a, b, out);
  return orig.conv2d_backward_weight(dev, algo, dt, s, a, b, out, db);
}

/* gpu_cudnn_conv's search: candidates in order, skipping on the faults
 * recover.h names; all refused for alignment -> once more on "aligned copies" */
static int search(int dir, int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                  const void *a, const void *b, const void *bias, void *out, void *db) {
  for (int round = 0; round < 2; round++) {
    bool misaligned = false;
    for (int c = 0; c < FAKE_NCAND; c++) {
      gpu_fault f = take(SITE_CONV);
      if (f == GPU_FAULT_NONE) return call_orig(dir, dev, algo, dt, s, a, b, bias, out, db);
      if (f == GPU_FAULT_MISALIGNED) misaligned = true;
      if (!gpu_fault_next_algorithm(f)) {
        fault_error("conv2d", f, 0);
        return -1;
      }
    }
    if (!misaligned || round) break;
    pthread_mutex_lock(&mu);
    sites[SITE_CONV].aligned++;
    pthread_mutex_unlock(&mu);
  }
  fake_core.set_error("conv2d: cuDNN has no usable algorithm (injected faults)");
  return -1;
}

/* elements of size es: the padded copy of x (pad) or dx from the padded gradient (crop) */
static void pad_move(bool crop, size_t es, const gpu_pad_plan *p, const cnn_conv_shape *s,
                     const char *src, char *dst) {
  int64_t total = s->N * s->C * (crop ? s->H * s->W : p->H * p->W);
  for (int64_t i = 0; i < total; i++) {
    int64_t j = crop ? gpu_crop_source(p, s->H, s->W, i) : gpu_pad_source(p, s->H, s->W, i);
    if (j < 0)
      memset(dst + i * es, 0, es);
    else
      memcpy(dst + i * es, src + j * es, es);
  }
}

/* gpu_conv_padded: scratch copy, symmetric problem, crop */
static int padded(int dir, int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                  const void *a, const void *b, const void *bias, void *out, void *db) {
  cnn_conv_shape sym;
  gpu_pad_plan p;
  gpu_conv_pad_plan(s, &sym, &p);
  size_t es = cnn_dtype_size(dt), bytes = (size_t)(s->N * s->C * p.H * p.W) * es;
  if (fake_enter("conv2d", dev)) return -1;
  char *scratch = fake_arena_alloc(bytes ? bytes : 1);
  int rc = -1;
  const void *x = dir == 0 ? a : b;
  if (scratch &&
      (dir == 1 || fake_dev("conv2d", x, (size_t)(s->N * s->C * s->H * s->W) * es) == 0)) {
    if (dir != 1) pad_move(false, es, &p, s, x, scratch);
    rc = dir == 0   ? search(dir, dev, algo, dt, &sym, scratch, b, bias, out, db)
         : dir == 1 ? search(dir, dev, algo, dt, &sym, a, b, bias, scratch, db)
                    : search(dir, dev, algo, dt, &sym, a, scratch, bias, out, db);
    if (rc == 0 && dir == 1) rc = fake_dev("conv2d", out, (size_t)(s->N * s->C * s->H * s->W) * es);
    if (rc == 0 && dir == 1) pad_move(true, es, &p, s, scratch, out);
  }
  fake_arena_free(scratch);
  fake_leave();
  return rc;
}

static int conv(int dir, int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                const void *a, const void *b, const void *bias, void *out, void *db) {
  bool cudnn = algo != CNN_CONV_NAIVE && s->N && s->C && s->K; /* cudnn_conv.cu's use_direct */
  if (!cudnn) return call_orig(dir, dev, algo, dt, s, a, b, bias, out, db);
  if (gpu_conv_asymmetric(s)) return padded(dir, dev, algo, dt, s, a, b, bias, out, db);
  return search(dir, dev, algo, dt, s, a, b, bias, out, db);
}

static int conv_fwd(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                    const void *x, const void *w, const void *b, void *y) {
  return conv(0, dev, algo, dt, s, x, w, b, y, NULL);
}
static int conv_data(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                     const void *dy, const void *w, void *dx) {
  return conv(1, dev, algo, dt, s, dy, w, NULL, dx, NULL);
}
static int conv_weight(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                       const void *dy, const void *x, void *dw, void *db) {
  return conv(2, dev, algo, dt, s, dy, x, NULL, dw, db);
}

/* ---- batch norm: the eps core hands to the backward (cudnn_ops.cu passes it on) ---------- */

static double last_bn_eps = -1;

EXPORT double fake_cuda_last_bn_eps(void) {
  pthread_mutex_lock(&mu);
  double e = last_bn_eps;
  pthread_mutex_unlock(&mu);
  return e;
}

static int bn_backward(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                       const void *x, const void *gamma, const void *sm, const void *si, void *dx,
                       void *dg, void *db, double eps) {
  pthread_mutex_lock(&mu);
  last_bn_eps = eps;
  pthread_mutex_unlock(&mu);
  return orig.batch_norm_backward(dev, dt, N, C, L, dy, x, gamma, sm, si, dx, dg, db, eps);
}

void fake_register_faults(cnn_backend *be) {
  orig = *be;
  be->alloc = alloc;
  be->gemm = gemm;
  be->conv2d_forward = conv_fwd;
  be->conv2d_backward_data = conv_data;
  be->conv2d_backward_weight = conv_weight;
  be->batch_norm_backward = bn_backward;
}
