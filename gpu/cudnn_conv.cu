/*
 * cudnn_conv.cu -- conv2d forward, backward-data and backward-weight
 * through cuDNN's legacy convolution API, with a per-shape cache.
 *
 * cuDNN 9 marks this API deprecated in favour of the graph (backend) API.
 * We keep the legacy calls, all of them in this one file, and silence the
 * deprecation warning for this file alone (gpu/CMakeLists.txt); the graph
 * API is the way forward (DESIGN.md "Backends", gpu/README.md).
 *
 * Cache.  Key: device, dtype, the benchmark flag and every field of
 * cnn_conv_shape (gpu_conv_key, conv_plan.h: compared field by field, the
 * struct has padding bytes that core does not clear; the flag is in the
 * key since an entry found by the heuristics must not serve benchmark mode
 * nor the reverse).  Entry: the four descriptors and, per direction, the
 * algorithm and math type chosen on first use (cudnnFind*Algorithm in
 * benchmark mode -- it times every algorithm; if it fails, e.g. for
 * memory, the heuristics --, else the heuristics of
 * cudnnGet*Algorithm_v7), most recently used first, at most CACHE_MAX
 * entries.  `mu` is held for a whole convolution, so an entry is never
 * trimmed or re-typed while another host thread uses it.  Entries live
 * until the process ends (backend.cu: no CUDA calls at exit).
 *
 * Candidates are tried in the order cuDNN ranks them; one whose workspace
 * cannot be allocated, which reports a status of the NOT_SUPPORTED
 * category (cuDNN 9 statuses carry a detail: 3000 + n) or
 * BAD_PARAM_MISALIGNED_POINTER is skipped (recover.h,
 * gpu_fault_next_algorithm).  If every candidate refused an operand's
 * alignment, the operands are copied into fresh (512-byte aligned) blocks
 * and the search runs once more.  A run that reports one of cuDNN's
 * allocation failures runs once more after our cache is released.
 *
 * Math mode: float32/float64 always run with CUDNN_FMA_MATH (no TF32: GPU
 * results match the CPU to float32 rounding, like
 * torch.backends.cudnn.allow_tf32 = False -- CUDNN_DEFAULT_MATH would allow
 * TF32 on A100/H100); float16/bfloat16 (autocast) start from tensor-op
 * math and run each algorithm with the math type cuDNN returned with it
 * (cuDNN ranks algorithm + math type pairs; the descriptor must be updated
 * to the pair's math type before the run), with float32 accumulation.
 * Every search first resets the descriptor to the entry's starting math
 * type, so the type the previous direction's run set does not leak into
 * the next direction's ranking.
 *
 * Padding must be symmetric for cuDNN: asymmetric padding runs over a
 * padded copy (conv_pad.cu).  CNN_CONV_NAIVE ('direct') and problems with
 * a zero N, C or K (which cuDNN's descriptors refuse) go to
 * direct_conv.cu.  The bias is added by our own kernel (every dtype,
 * including the half types); its gradient is a per-channel sum
 * (cudnn_ops.cu).  Workspaces come from the caching allocator.  cuDNN's
 * legacy descriptors take int sizes and strides: tensors of more than
 * INT_MAX elements are refused with a message.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv_plan.h"
#include "gpu.h"

#define CACHE_MAX 64
#define NCAND     16

enum { FWD = GPU_CONV_FWD, BWD_DATA = GPU_CONV_BWD_DATA, BWD_FILTER = GPU_CONV_BWD_FILTER };
/* the fused forward (cudnnConvolutionBiasActivationForward, ReLU): a
 * direction of its own in the cache, ranked as the forward */
enum { FWD_ACT = 3, NDIR = 4 };

typedef struct conv_entry {
  gpu_conv_key key; /* device, dtype, benchmark flag, shape (conv_plan.h) */
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  cudnnTensorDescriptor_t bias;    /* 1 x K x 1 x 1 (FWD_ACT) */
  cudnnActivationDescriptor_t act; /* ReLU, NaN propagated (FWD_ACT) */
  const void *bias_data;           /* FWD_ACT's bias during one call (mu held) */
  cudnnMathType_t math0;           /* the math type every algorithm search starts from */
  int algo[NDIR];                  /* -1: not chosen yet */
  cudnnMathType_t math[NDIR];      /* the math type algo[d] runs with */
  struct conv_entry *next;
} conv_entry;

/* `mu` is held for a whole convolution (lookup, search, run): an entry in
 * use is never trimmed nor its descriptor's math type changed by another
 * host thread, and cuDNN's handle is used by one thread at a time. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static conv_entry *cache;
static bool benchmark;

void gpu_conv_set_benchmark(bool on) {
  pthread_mutex_lock(&mu);
  benchmark = on;
  pthread_mutex_unlock(&mu);
}

static cudnnDataType_t cudnn_type(cnn_dtype dt) {
  switch (dt) {
  case CNN_FLOAT64: return CUDNN_DATA_DOUBLE;
  case CNN_FLOAT16: return CUDNN_DATA_HALF;
  case CNN_BFLOAT16: return CUDNN_DATA_BFLOAT16;
  default: return CUDNN_DATA_FLOAT;
  }
}

static void entry_free(conv_entry *e) {
  if (!e) return;
  if (e->x) cudnnDestroyTensorDescriptor(e->x);
  if (e->y) cudnnDestroyTensorDescriptor(e->y);
  if (e->w) cudnnDestroyFilterDescriptor(e->w);
  if (e->conv) cudnnDestroyConvolutionDescriptor(e->conv);
  if (e->bias) cudnnDestroyTensorDescriptor(e->bias);
  if (e->act) cudnnDestroyActivationDescriptor(e->act);
  free(e);
}

static bool is_half(cnn_dtype dt) { return dt == CNN_FLOAT16 || dt == CNN_BFLOAT16; }

/* the math type to run an algorithm that cuDNN ranked with `ranked` */
static cudnnMathType_t math_for(cnn_dtype dt, cudnnMathType_t ranked) {
  return is_half(dt) ? ranked : CUDNN_FMA_MATH;
}

/* cuDNN's legacy descriptors hold int sizes and strides */
static int fits_cudnn(const cnn_conv_shape *s) {
  int64_t x = s->N * s->C * s->H * s->W, y = s->N * s->K * s->OH * s->OW;
  int64_t w = s->K * (s->C / s->groups) * s->R * s->S;
  if (x <= INT_MAX && y <= INT_MAX && w <= INT_MAX) return 0;
  gpu_core.set_error("conv2d: input %lldx%lldx%lldx%lld or output %lldx%lldx%lldx%lld has more "
                     "than %d elements, the most cuDNN's convolution takes",
                     (long long)s->N, (long long)s->C, (long long)s->H, (long long)s->W,
                     (long long)s->N, (long long)s->K, (long long)s->OH, (long long)s->OW, INT_MAX);
  return -1;
}

/* The fused forward's bias (1 x K x 1 x 1, the data type: cuDNN's
 * supported configurations give the bias the type of y for the float,
 * double and half configurations) and its ReLU (cuDNN's relu keeps NaN
 * with CUDNN_PROPAGATE_NAN, as cnnsh's relu does; coef unused for ReLU). */
static int describe_fused(conv_entry *e) {
  CUDNN_CHECK("conv2d", cudnnCreateTensorDescriptor(&e->bias));
  CUDNN_CHECK("conv2d",
              cudnnSetTensor4dDescriptor(e->bias, CUDNN_TENSOR_NCHW, cudnn_type(e->key.dt), 1,
                                         (int)e->key.s.K, 1, 1));
  CUDNN_CHECK("conv2d", cudnnCreateActivationDescriptor(&e->act));
  CUDNN_CHECK("conv2d", cudnnSetActivationDescriptor(e->act, CUDNN_ACTIVATION_RELU,
                                                     CUDNN_PROPAGATE_NAN, 0.0));
  return 0;
}

static int describe(conv_entry *e) {
  const cnn_conv_shape *s = &e->key.s;
  cudnnDataType_t t = cudnn_type(e->key.dt);
  cudnnDataType_t compute = e->key.dt == CNN_FLOAT64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  CUDNN_CHECK("conv2d", cudnnCreateTensorDescriptor(&e->x));
  CUDNN_CHECK("conv2d", cudnnCreateTensorDescriptor(&e->y));
  CUDNN_CHECK("conv2d", cudnnCreateFilterDescriptor(&e->w));
  CUDNN_CHECK("conv2d", cudnnCreateConvolutionDescriptor(&e->conv));
  CUDNN_CHECK("conv2d", cudnnSetTensor4dDescriptor(e->x, CUDNN_TENSOR_NCHW, t, (int)s->N, (int)s->C,
                                                   (int)s->H, (int)s->W));
  CUDNN_CHECK("conv2d", cudnnSetTensor4dDescriptor(e->y, CUDNN_TENSOR_NCHW, t, (int)s->N, (int)s->K,
                                                   (int)s->OH, (int)s->OW));
  CUDNN_CHECK("conv2d", cudnnSetFilter4dDescriptor(e->w, t, CUDNN_TENSOR_NCHW, (int)s->K,
                                                   (int)(s->C / s->groups), (int)s->R, (int)s->S));
  CUDNN_CHECK("conv2d", cudnnSetConvolution2dDescriptor(e->conv, s->pt, s->pl, s->sh, s->sw, s->dh,
                                                        s->dw, CUDNN_CROSS_CORRELATION, compute));
  CUDNN_CHECK("conv2d", cudnnSetConvolutionGroupCount(e->conv, s->groups));
  cudnnMathType_t m = is_half(e->key.dt) ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  CUDNN_CHECK("conv2d", cudnnSetConvolutionMathType(e->conv, m));
  e->math0 = m;
  for (int d = 0; d < NDIR; d++) e->algo[d] = -1, e->math[d] = m;
  return describe_fused(e);
}

/* The cached entry for key, moved to the front, or a new one; caller holds mu. */
static conv_entry *lookup(const gpu_conv_key *key) {
  conv_entry **pp = &cache, *e = NULL;
  for (; *pp; pp = &(*pp)->next) {
    if (gpu_conv_key_equal(&(*pp)->key, key)) {
      e = *pp;
      *pp = e->next;
      break;
    }
  }
  if (!e) {
    e = (conv_entry *)calloc(1, sizeof *e);
    if (!e || (e->key = *key, describe(e))) {
      if (!e) gpu_core.set_error("conv2d: out of memory (descriptor cache)");
      entry_free(e);
      return NULL;
    }
  }
  e->next = cache;
  cache = e;
  /* trim to CACHE_MAX entries */
  conv_entry *t = cache;
  for (int i = 1; t && i < CACHE_MAX; i++) t = t->next;
  if (t) {
    conv_entry *rest = t->next;
    t->next = NULL;
    while (rest) {
      conv_entry *nx = rest->next;
      entry_free(rest);
      rest = nx;
    }
  }
  return e;
}

/* ---- algorithm candidates, best first ------------------------------------------------- */

/* one ranked candidate: the algorithm (-1: cuDNN says it cannot run) and
 * the math type cuDNN ranked it with */
typedef struct {
  int algo;
  cudnnMathType_t math;
} cand;

/* perf results (any of the three perf structs) into cands */
template <typename Perf> static void take_perf(const Perf *p, int n, cand *c) {
  for (int i = 0; i < n && i < NCAND; i++) {
    c[i].algo = p[i].status == CUDNN_STATUS_SUCCESS ? (int)p[i].algo : -1;
    c[i].math = p[i].mathType;
  }
}

/* Find (benchmark: runs every algorithm, allocating its own buffers) or
 * Get_v7 (heuristics); one direction per function */
static cudnnStatus_t rank_fwd(cudnnHandle_t h, conv_entry *e, bool find, cand *c, int *n) {
  cudnnConvolutionFwdAlgoPerf_t p[NCAND];
  cudnnStatus_t st =
      find ? cudnnFindConvolutionForwardAlgorithm(h, e->x, e->w, e->conv, e->y, NCAND, n, p)
           : cudnnGetConvolutionForwardAlgorithm_v7(h, e->x, e->w, e->conv, e->y, NCAND, n, p);
  if (st == CUDNN_STATUS_SUCCESS) take_perf(p, *n, c);
  return st;
}
static cudnnStatus_t rank_bwd_data(cudnnHandle_t h, conv_entry *e, bool find, cand *c, int *n) {
  cudnnConvolutionBwdDataAlgoPerf_t p[NCAND];
  cudnnStatus_t st =
      find ? cudnnFindConvolutionBackwardDataAlgorithm(h, e->w, e->y, e->conv, e->x, NCAND, n, p)
           : cudnnGetConvolutionBackwardDataAlgorithm_v7(h, e->w, e->y, e->conv, e->x, NCAND, n, p);
  if (st == CUDNN_STATUS_SUCCESS) take_perf(p, *n, c);
  return st;
}
static cudnnStatus_t rank_bwd_filter(cudnnHandle_t h, conv_entry *e, bool find, cand *c, int *n) {
  cudnnConvolutionBwdFilterAlgoPerf_t p[NCAND];
  cudnnStatus_t st =
      find ? cudnnFindConvolutionBackwardFilterAlgorithm(h, e->x, e->y, e->conv, e->w, NCAND, n, p)
           : cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, e->x, e->y, e->conv, e->w, NCAND, n,
                                                           p);
  if (st == CUDNN_STATUS_SUCCESS) take_perf(p, *n, c);
  return st;
}

static int candidates(cudnnHandle_t h, conv_entry *e, int dir, cand *c, int *n) {
  cudnnStatus_t (*rank)(cudnnHandle_t, conv_entry *, bool, cand *, int *) =
      dir == FWD || dir == FWD_ACT ? rank_fwd
      : dir == BWD_DATA            ? rank_bwd_data
                                   : rank_bwd_filter;
  *n = 0;
  /* every search starts from the entry's own math type: the descriptor
   * still holds the one the last run (maybe of another direction) set */
  CUDNN_CHECK("conv2d", cudnnSetConvolutionMathType(e->conv, e->math0));
  /* Find allocates its buffers with cudaMalloc next to our cache: when it
   * fails (memory, or an algorithm it cannot time) the heuristics still rank */
  cudnnStatus_t st = e->key.benchmark ? rank(h, e, true, c, n) : CUDNN_STATUS_NOT_SUPPORTED;
  if (st != CUDNN_STATUS_SUCCESS) st = rank(h, e, false, c, n);
  CUDNN_CHECK("conv2d", st);
  if (*n > NCAND) *n = NCAND;
  return 0;
}

static cudnnStatus_t workspace_size(cudnnHandle_t h, conv_entry *e, int dir, int algo, size_t *ws) {
  if (dir == FWD || dir == FWD_ACT)
    return cudnnGetConvolutionForwardWorkspaceSize(h, e->x, e->w, e->conv, e->y,
                                                   (cudnnConvolutionFwdAlgo_t)algo, ws);
  if (dir == BWD_DATA)
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, e->w, e->y, e->conv, e->x,
                                                        (cudnnConvolutionBwdDataAlgo_t)algo, ws);
  return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, e->x, e->y, e->conv, e->w,
                                                        (cudnnConvolutionBwdFilterAlgo_t)algo, ws);
}

/* one run of direction dir with algo; a = input-ish, b = second operand, out.
 * alpha/beta are host values of the compute type: double for float64 data,
 * float for float32 and the half types (cuDNN's scaling-parameter rule). */
static cudnnStatus_t run(cudnnHandle_t h, conv_entry *e, int dir, int algo, void *ws, size_t wsz,
                         const void *a, const void *b, void *out) {
  double d1 = 1.0, d0 = 0.0;
  float f1 = 1.0f, f0 = 0.0f;
  const void *one = e->key.dt == CNN_FLOAT64 ? (const void *)&d1 : (const void *)&f1;
  const void *zero = e->key.dt == CNN_FLOAT64 ? (const void *)&d0 : (const void *)&f0;
  if (dir == FWD) /* a = x, b = w, out = y */
    return cudnnConvolutionForward(h, one, e->x, a, e->w, b, e->conv,
                                   (cudnnConvolutionFwdAlgo_t)algo, ws, wsz, zero, e->y, out);
  if (dir == FWD_ACT) /* y = relu(1 * conv(x, w) + 0 * z + bias), z = y (its alpha2 is 0) */
    return cudnnConvolutionBiasActivationForward(
        h, one, e->x, a, e->w, b, e->conv, (cudnnConvolutionFwdAlgo_t)algo, ws, wsz, zero, e->y,
        out, e->bias, e->bias_data, e->act, e->y, out);
  if (dir == BWD_DATA) /* a = dy, b = w, out = dx */
    return cudnnConvolutionBackwardData(h, one, e->w, b, e->y, a, e->conv,
                                        (cudnnConvolutionBwdDataAlgo_t)algo, ws, wsz, zero, e->x,
                                        out);
  /* a = dy, b = x, out = dw */
  return cudnnConvolutionBackwardFilter(h, one, e->x, b, e->y, a, e->conv,
                                        (cudnnConvolutionBwdFilterAlgo_t)algo, ws, wsz, zero, e->w,
                                        out);
}

/* what happened to one candidate (try_algo) */
typedef struct {
  bool no_ws;      /* a workspace could not be had */
  bool misaligned; /* cuDNN refused an operand's alignment */
} try_notes;

/* one run with its workspace; on a MEMORY fault (cuDNN's own buffers) our
 * cache is released and the run repeated once (recover.h) */
static cudnnStatus_t run_with_workspace(cudnnHandle_t h, conv_entry *e, int dir, int algo,
                                        size_t wsz, const void *a, const void *b, void *out,
                                        bool *no_ws) {
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  for (int attempt = 0; attempt < 2; attempt++) {
    void *ws = wsz ? gpu_scratch("conv2d", wsz, e->key.dev) : NULL;
    if (wsz && !ws) { /* too big now: the next candidate may need less */
      *no_ws = true;
      return CUDNN_STATUS_NOT_SUPPORTED;
    }
    st = run(h, e, dir, algo, ws, wsz, a, b, out);
    gpu_free(ws, e->key.dev); /* one stream: the run is ordered before any reuse */
    if (st == CUDNN_STATUS_SUCCESS || attempt || !gpu_fault_retry(gpu_cudnn_failed(st))) break;
    gpu_release_cached(e->key.dev);
  }
  return st;
}

/* try candidate c: math type, workspace, run; 1 = not usable (skip), 0 =
 * done, -1 = error.  Skipping follows gpu_fault_next_algorithm. */
static int try_algo(cudnnHandle_t h, conv_entry *e, int dir, cand c, const void *a, const void *b,
                    void *out, try_notes *notes) {
  cudnnMathType_t m = math_for(e->key.dt, c.math);
  CUDNN_CHECK("conv2d", cudnnSetConvolutionMathType(e->conv, m));
  size_t wsz = 0;
  cudnnStatus_t st = workspace_size(h, e, dir, c.algo, &wsz);
  if (gpu_cudnn_is(st, CUDNN_STATUS_NOT_SUPPORTED) || gpu_cudnn_is(st, CUDNN_STATUS_BAD_PARAM))
    return 1;
  CUDNN_CHECK("conv2d", st);
  st = run_with_workspace(h, e, dir, c.algo, wsz, a, b, out, &notes->no_ws);
  if (st != CUDNN_STATUS_SUCCESS) {
    /* a fused configuration cuDNN does not take: the next candidate, and
     * when none takes it core runs the convolution and ReLU apart */
    gpu_fault f = gpu_cudnn_failed(st);
    if (dir == FWD_ACT && gpu_cudnn_is(st, CUDNN_STATUS_BAD_PARAM)) return 1;
    if (f == GPU_FAULT_MISALIGNED) notes->misaligned = true;
    if (gpu_fault_next_algorithm(f)) return 1;
    return gpu_fail_fault("conv2d", "cuDNN", cudnnGetErrorString(st), f, "the convolution",
                          __FILE__, __LINE__);
  }
  e->algo[dir] = c.algo;
  e->math[dir] = m;
  return 0;
}

static int no_algorithm(const cnn_conv_shape *s, cnn_dtype dt, bool no_ws) {
  gpu_core.set_error(
      "conv2d: cuDNN has no usable algorithm for input %lldx%lldx%lldx%lld, weight "
      "%lldx%lldx%lldx%lld, stride %dx%d, dilation %dx%d, groups %d (dtype %s)%s",
      (long long)s->N, (long long)s->C, (long long)s->H, (long long)s->W, (long long)s->K,
      (long long)(s->C / s->groups), (long long)s->R, (long long)s->S, s->sh, s->sw, s->dh, s->dw,
      s->groups, gpu_core.dtype_name(dt),
      no_ws ? ": out of memory for the workspaces of the algorithms that apply" : "");
  return -1;
}

/* the cached algorithm, else cuDNN's candidates in rank order; 0 = done,
 * -1 = error, 1 = none could run (notes say why); caller holds mu */
static int search_and_run(cudnnHandle_t h, conv_entry *e, int dir, const void *a, const void *b,
                          void *out, try_notes *notes) {
  if (e->algo[dir] >= 0) {
    int rc = try_algo(h, e, dir, (cand){e->algo[dir], e->math[dir]}, a, b, out, notes);
    if (rc <= 0) return rc;
  }
  cand c[NCAND];
  int n = 0;
  if (candidates(h, e, dir, c, &n)) return -1;
  for (int i = 0; i < n; i++) {
    if (c[i].algo < 0) continue;
    int rc = try_algo(h, e, dir, c[i], a, b, out, notes);
    if (rc <= 0) return rc;
  }
  return 1;
}

/* bytes of the operands a, b and out of direction dir */
static void operand_bytes(const cnn_conv_shape *s, cnn_dtype dt, int dir, size_t sz[3]) {
  size_t es = gpu_dtype_size(dt);
  size_t x = (size_t)(s->N * s->C * s->H * s->W) * es,
         y = (size_t)(s->N * s->K * s->OH * s->OW) * es;
  size_t w = (size_t)(s->K * (s->C / s->groups) * s->R * s->S) * es;
  sz[0] = dir == FWD ? x : y;        /* x, or dy */
  sz[1] = dir == BWD_FILTER ? x : w; /* w, or x */
  sz[2] = dir == FWD ? y : dir == BWD_DATA ? x : w;
}

/* Every algorithm refused an operand's alignment (a batch slice of a half
 * tensor can be 2-byte aligned): run again on copies in fresh blocks (512-
 * byte aligned).  The output is written with beta = 0, so it is not copied
 * in, only out. */
static int run_aligned(cudnnHandle_t h, conv_entry *e, int dir, const void *a, const void *b,
                       void *out, try_notes *notes) {
  size_t sz[3];
  operand_bytes(&e->key.s, e->key.dt, dir, sz);
  int dev = e->key.dev, rc = -1;
  void *ca = gpu_scratch("conv2d", sz[0], dev), *cb = gpu_scratch("conv2d", sz[1], dev);
  void *co = gpu_scratch("conv2d", sz[2], dev);
  if (ca && cb && co && cudaMemcpy(ca, a, sz[0], cudaMemcpyDeviceToDevice) == cudaSuccess &&
      cudaMemcpy(cb, b, sz[1], cudaMemcpyDeviceToDevice) == cudaSuccess) {
    rc = search_and_run(h, e, dir, ca, cb, co, notes);
    if (rc == 0 && cudaMemcpy(out, co, sz[2], cudaMemcpyDeviceToDevice) != cudaSuccess) rc = -2;
  } else if (ca && cb && co) {
    rc = -2;
  }
  if (rc == -2) { /* a copy failed: name it */
    cudaError_t err = cudaGetLastError();
    rc = gpu_fail_fault("conv2d", "CUDA", cudaGetErrorString(err), gpu_cuda_fault(err),
                        "cudaMemcpy (aligned copies)", __FILE__, __LINE__);
  }
  gpu_free(ca, dev), gpu_free(cb, dev), gpu_free(co, dev);
  return rc;
}

/* the cache entry of (dev, dt, the benchmark flag, s); caller holds mu */
static conv_entry *entry_for(int dev, cnn_dtype dt, const cnn_conv_shape *s) {
  gpu_conv_key key;
  memset(&key, 0, sizeof key);
  key.dev = dev, key.dt = dt, key.benchmark = benchmark, key.s = *s;
  return lookup(&key);
}

int gpu_cudnn_conv(int dev, cnn_dtype dt, const cnn_conv_shape *s, int dir, const void *a,
                   const void *b, void *out) {
  if (fits_cudnn(s)) return -1;
  cudnnHandle_t h = gpu_cudnn("conv2d", dev); /* makes dev current */
  if (!h) return -1;
  pthread_mutex_lock(&mu);
  conv_entry *e = entry_for(dev, dt, s);
  try_notes notes = {false, false};
  int rc = e ? search_and_run(h, e, dir, a, b, out, &notes) : -1;
  if (rc == 1 && notes.misaligned) rc = run_aligned(h, e, dir, a, b, out, &notes);
  if (rc == 1) rc = no_algorithm(s, dt, notes.no_ws);
  pthread_mutex_unlock(&mu);
  return rc;
}

/* y = relu(conv(x, w) + b) in one cuDNN call (b: K elements on the
 * device); 1 when no candidate algorithm takes the fused call (cuDNN
 * refuses some configurations: core then runs the convolution and ReLU
 * apart), with misaligned operands included (no aligned copies here).
 * y is zeroed first: it is also z, scaled by alpha2 = 0, and cuDNN's
 * documentation promises not to read an output only for beta = 0 (the
 * "Scaling Parameters" rule), so a NaN left in a reused block must not
 * meet 0 * z. */
static int cudnn_conv_relu(int dev, cnn_dtype dt, const cnn_conv_shape *s, const void *x,
                           const void *w, const void *b, void *y) {
  cudnnHandle_t h = gpu_cudnn("conv2d", dev); /* makes dev current */
  if (!h) return -1;
  CUDA_CHECK("conv2d",
             cudaMemset(y, 0, (size_t)(s->N * s->K * s->OH * s->OW) * gpu_dtype_size(dt)));
  pthread_mutex_lock(&mu);
  conv_entry *e = entry_for(dev, dt, s);
  try_notes notes = {false, false};
  int rc = -1;
  if (e) {
    e->bias_data = b;
    rc = search_and_run(h, e, FWD_ACT, x, w, y, &notes);
    e->bias_data = NULL;
  }
  pthread_mutex_unlock(&mu);
  return rc;
}

/* ---- bias ------------------------------------------------------------------------------- */

/* y[n, k, p] += b[k] over N x K x P (P = OH*OW), in the accumulator type */
template <typename T>
__global__ void k_add_bias(int64_t total, int64_t K, int64_t P, const T *b, T *y) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    typename gpu_acc<T>::type v = gpu_widen(y[i]);
    v += gpu_widen(b[(i / P) % K]);
    y[i] = gpu_narrow<T>((double)v);
  }
}

static int add_bias(int dev, cnn_dtype dt, const cnn_conv_shape *s, const void *b, void *y) {
  int64_t P = s->OH * s->OW, total = s->N * s->K * P;
  if (!total) return 0;
  if (gpu_device("conv2d", dev)) return -1;
  unsigned g = gpu_blocks(total);
  switch (dt) {
  case CNN_FLOAT64:
    k_add_bias<double><<<g, GPU_THREADS>>>(total, s->K, P, (const double *)b, (double *)y);
    break;
  case CNN_FLOAT16:
    k_add_bias<__half><<<g, GPU_THREADS>>>(total, s->K, P, (const __half *)b, (__half *)y);
    break;
  case CNN_BFLOAT16:
    k_add_bias<__nv_bfloat16>
        <<<g, GPU_THREADS>>>(total, s->K, P, (const __nv_bfloat16 *)b, (__nv_bfloat16 *)y);
    break;
  default:
    k_add_bias<float><<<g, GPU_THREADS>>>(total, s->K, P, (const float *)b, (float *)y);
    break;
  }
  LAUNCH_CHECK("conv2d");
  return 0;
}

/* ---- the entries ------------------------------------------------------------------------ */

/* the direct kernel: asked for, or a zero N, C or K (cuDNN refuses
 * descriptors with a zero dimension).  Asymmetric padding runs cuDNN over
 * a padded copy (conv_pad.cu). */
static bool use_direct(cnn_conv_algo algo, const cnn_conv_shape *s) {
  return algo == CNN_CONV_NAIVE || !s->N || !s->C || !s->K;
}

static int fwd(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s, const void *x,
               const void *w, const void *b, void *y) {
  if (use_direct(algo, s)) return gpu_direct_conv2d_forward(dev, dt, s, x, w, b, y);
  int rc = gpu_conv_asymmetric(s) ? gpu_conv_padded(dev, dt, s, FWD, x, w, y)
                                  : gpu_cudnn_conv(dev, dt, s, FWD, x, w, y);
  if (rc) return -1;
  return b ? add_bias(dev, dt, s, b, y) : 0;
}

/* ReLU through cudnnConvolutionBiasActivationForward (without a bias, a
 * zeroed one of K elements); 1 where that call does not apply or no
 * algorithm takes it */
static int try_cudnn_relu(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                          const void *x, const void *w, const void *b, void *y) {
  int64_t x_n = s->N * s->C * s->H * s->W, y_n = s->N * s->K * s->OH * s->OW;
  if (use_direct(algo, s) || gpu_conv_asymmetric(s) || x_n > INT_MAX || y_n > INT_MAX) return 1;
  void *zero_bias = NULL;
  if (!b) {
    size_t bytes = (size_t)s->K * gpu_dtype_size(dt);
    if (gpu_device("conv2d", dev) || !(zero_bias = gpu_scratch("conv2d", bytes, dev))) return -1;
    cudaError_t e = cudaMemset(zero_bias, 0, bytes);
    if (e != cudaSuccess) {
      gpu_free(zero_bias, dev);
      return gpu_fail_fault("conv2d", "CUDA", cudaGetErrorString(e), gpu_cuda_failed(e),
                            "cudaMemset (zero bias)", __FILE__, __LINE__);
    }
  }
  int rc = cudnn_conv_relu(dev, dt, s, x, w, b ? b : zero_bias, y);
  gpu_free(zero_bias, dev); /* one stream: the call is ordered before any reuse */
  return rc;
}

/* The fused entry (backend.h conv2d_act_forward, cnn_conv2d_act): ReLU
 * through cudnnConvolutionBiasActivationForward (cuDNN 9, cudnn_cnn.h: y =
 * act(alpha1 conv(x) + alpha2 z + bias); we pass alpha2 = 0 with z = y, so
 * z adds nothing).  The call takes RELU (IDENTITY only with
 * IMPLICIT_PRECOMP_GEMM, and it buys nothing over the plain forward), so
 * every other activation -- and ReLU where the call does not apply: the
 * direct kernel, zero sizes, asymmetric padding, more elements than
 * cuDNN's int descriptors, no algorithm taking it -- is the plain forward,
 * then the activation in place on y (elementwise.cu's kernel). */
static int fwd_act(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                   const void *x, const void *w, const void *b, cnn_unary_op act, double p0,
                   double p1, void *y) {
  int rc = act == CNN_OP_RELU ? try_cudnn_relu(dev, algo, dt, s, x, w, b, y) : 1;
  if (rc != 1) return rc;
  if (fwd(dev, algo, dt, s, x, w, b, y)) return -1;
  return gpu_unary_inplace(dev, act, dt, s->N * s->K * s->OH * s->OW, y, p0, p1);
}

static int bwd_data(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                    const void *dy, const void *w, void *dx) {
  if (use_direct(algo, s)) return gpu_direct_conv2d_backward_data(dev, dt, s, dy, w, dx);
  return gpu_conv_asymmetric(s) ? gpu_conv_padded(dev, dt, s, BWD_DATA, dy, w, dx)
                                : gpu_cudnn_conv(dev, dt, s, BWD_DATA, dy, w, dx);
}

static int bwd_weight(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                      const void *dy, const void *x, void *dw, void *db) {
  if (use_direct(algo, s)) return gpu_direct_conv2d_backward_weight(dev, dt, s, dy, x, dw, db);
  int rc = gpu_conv_asymmetric(s) ? gpu_conv_padded(dev, dt, s, BWD_FILTER, dy, x, dw)
                                  : gpu_cudnn_conv(dev, dt, s, BWD_FILTER, dy, x, dw);
  if (rc) return -1;
  if (!db) return 0;
  if (gpu_device("conv2d", dev)) return -1;
  return gpu_channel_sums("conv2d", dt, s->N, s->K, s->OH * s->OW, dy, NULL, NULL, NULL, db, NULL);
}

void gpu_conv_register(cnn_backend *be) {
  be->conv2d_forward = fwd;
  be->conv2d_act_forward = fwd_act;
  be->conv2d_backward_data = bwd_data;
  be->conv2d_backward_weight = bwd_weight;
}
