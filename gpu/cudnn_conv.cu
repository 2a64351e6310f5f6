/*
 * cudnn_conv.cu -- conv2d forward, backward-data and backward-weight
 * through cuDNN's legacy convolution API, with a per-shape cache.
 *
 * cuDNN 9 marks this API deprecated in favour of the graph (backend) API.
 * We keep the legacy calls, all of them in this one file, and silence the
 * deprecation warning for this file alone (gpu/CMakeLists.txt); the graph
 * API is the way forward (DESIGN.md "Backends", gpu/README.md).
 *
 * Cache.  Key: device, dtype and every field of cnn_conv_shape (compared
 * field by field: the struct has padding bytes that core does not clear).
 * Entry: the four descriptors and, per direction, the algorithm and math
 * type chosen on first use (cudnnFind*Algorithm in benchmark mode -- it
 * times every algorithm; if it fails, e.g. for memory, the heuristics --,
 * else the heuristics of cudnnGet*Algorithm_v7), most recently used first,
 * at most CACHE_MAX entries.  Candidates are tried in the order cuDNN
 * ranks them; one whose workspace cannot be allocated or which reports a
 * status of the CUDNN_STATUS_NOT_SUPPORTED category (cuDNN 9 statuses carry
 * a detail: 3000 + n) is skipped.
 *
 * Math mode: float32/float64 always run with CUDNN_FMA_MATH (no TF32: GPU
 * results match the CPU to float32 rounding, like
 * torch.backends.cudnn.allow_tf32 = False -- CUDNN_DEFAULT_MATH would allow
 * TF32 on A100/H100); float16/bfloat16 (autocast) start from tensor-op
 * math and run each algorithm with the math type cuDNN returned with it
 * (cuDNN ranks algorithm + math type pairs; the descriptor must be updated
 * to the pair's math type before the run), with float32 accumulation.
 * Padding must be symmetric for cuDNN; asymmetric padding,
 * CNN_CONV_NAIVE ('direct') and problems with a zero N, C or K (which
 * cuDNN's descriptors refuse) go to direct_conv.cu.  The bias is added by
 * our own kernel (every dtype, including the half types); its gradient is
 * a per-channel sum (cudnn_ops.cu).  Workspaces come from the caching
 * allocator.  cuDNN's legacy descriptors take int sizes and strides:
 * tensors of more than INT_MAX elements are refused with a message.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpu.h"

#define CACHE_MAX 64
#define NCAND 16

enum { FWD = 0, BWD_DATA = 1, BWD_FILTER = 2 };

typedef struct conv_entry {
  int dev;
  cnn_dtype dt;
  cnn_conv_shape s;
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  int algo[3]; /* -1: not chosen yet */
  cudnnMathType_t math[3]; /* the math type algo[d] runs with */
  size_t ws[3];
  struct conv_entry *next;
} conv_entry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static conv_entry *cache;
static bool benchmark;

void gpu_conv_set_benchmark(bool on) { benchmark = on; }

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
  free(e);
}

void gpu_conv_cache_clear(void) {
  pthread_mutex_lock(&mu);
  while (cache) {
    conv_entry *n = cache->next;
    entry_free(cache);
    cache = n;
  }
  pthread_mutex_unlock(&mu);
}

static bool is_half(cnn_dtype dt) { return dt == CNN_FLOAT16 || dt == CNN_BFLOAT16; }

/* the math type to run an algorithm that cuDNN ranked with `ranked` */
static cudnnMathType_t math_for(cnn_dtype dt, cudnnMathType_t ranked) {
  return is_half(dt) ? ranked : CUDNN_FMA_MATH;
}

/* every field: memcmp would also compare the struct's padding bytes */
static bool same_shape(const cnn_conv_shape *a, const cnn_conv_shape *b) {
  return a->N == b->N && a->C == b->C && a->H == b->H && a->W == b->W && a->K == b->K &&
         a->R == b->R && a->S == b->S && a->OH == b->OH && a->OW == b->OW && a->sh == b->sh &&
         a->sw == b->sw && a->pt == b->pt && a->pb == b->pb && a->pl == b->pl && a->pr == b->pr &&
         a->dh == b->dh && a->dw == b->dw && a->groups == b->groups;
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

static int describe(conv_entry *e) {
  const cnn_conv_shape *s = &e->s;
  cudnnDataType_t t = cudnn_type(e->dt);
  cudnnDataType_t compute = e->dt == CNN_FLOAT64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
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
  cudnnMathType_t m = is_half(e->dt) ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  CUDNN_CHECK("conv2d", cudnnSetConvolutionMathType(e->conv, m));
  for (int d = 0; d < 3; d++) e->algo[d] = -1, e->math[d] = m;
  return 0;
}

/* The cached entry for (dev, dt, s), moved to the front, or a new one. */
static conv_entry *lookup(int dev, cnn_dtype dt, const cnn_conv_shape *s) {
  pthread_mutex_lock(&mu);
  conv_entry **pp = &cache, *e = NULL;
  int n = 0;
  for (; *pp; pp = &(*pp)->next, n++) {
    if ((*pp)->dev == dev && (*pp)->dt == dt && same_shape(&(*pp)->s, s)) {
      e = *pp;
      *pp = e->next;
      break;
    }
  }
  if (!e) {
    e = (conv_entry *)calloc(1, sizeof *e);
    if (!e || (e->dev = dev, e->dt = dt, e->s = *s, describe(e))) {
      if (!e) gpu_core.set_error("conv2d: out of memory (descriptor cache)");
      entry_free(e);
      pthread_mutex_unlock(&mu);
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
  pthread_mutex_unlock(&mu);
  (void)n;
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
           : cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, e->x, e->y, e->conv, e->w, NCAND, n, p);
  if (st == CUDNN_STATUS_SUCCESS) take_perf(p, *n, c);
  return st;
}

static int candidates(cudnnHandle_t h, conv_entry *e, int dir, cand *c, int *n) {
  cudnnStatus_t (*rank)(cudnnHandle_t, conv_entry *, bool, cand *, int *) =
      dir == FWD ? rank_fwd : dir == BWD_DATA ? rank_bwd_data : rank_bwd_filter;
  *n = 0;
  /* Find allocates its buffers with cudaMalloc next to our cache: when it
   * fails (memory, or an algorithm it cannot time) the heuristics still rank */
  cudnnStatus_t st = benchmark ? rank(h, e, true, c, n) : CUDNN_STATUS_NOT_SUPPORTED;
  if (st != CUDNN_STATUS_SUCCESS) st = rank(h, e, false, c, n);
  CUDNN_CHECK("conv2d", st);
  if (*n > NCAND) *n = NCAND;
  return 0;
}

static cudnnStatus_t workspace_size(cudnnHandle_t h, conv_entry *e, int dir, int algo, size_t *ws) {
  if (dir == FWD)
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
  const void *one = e->dt == CNN_FLOAT64 ? (const void *)&d1 : (const void *)&f1;
  const void *zero = e->dt == CNN_FLOAT64 ? (const void *)&d0 : (const void *)&f0;
  if (dir == FWD) /* a = x, b = w, out = y */
    return cudnnConvolutionForward(h, one, e->x, a, e->w, b, e->conv, (cudnnConvolutionFwdAlgo_t)algo,
                                   ws, wsz, zero, e->y, out);
  if (dir == BWD_DATA) /* a = dy, b = w, out = dx */
    return cudnnConvolutionBackwardData(h, one, e->w, b, e->y, a, e->conv,
                                        (cudnnConvolutionBwdDataAlgo_t)algo, ws, wsz, zero, e->x, out);
  /* a = dy, b = x, out = dw */
  return cudnnConvolutionBackwardFilter(h, one, e->x, b, e->y, a, e->conv,
                                        (cudnnConvolutionBwdFilterAlgo_t)algo, ws, wsz, zero, e->w, out);
}

/* try candidate c: math type, workspace, run; 1 = not usable (skip), 0 =
 * done, -1 = error.  *no_ws is set when a workspace could not be had. */
static int try_algo(cudnnHandle_t h, conv_entry *e, int dir, cand c, const void *a, const void *b,
                    void *out, bool *no_ws) {
  cudnnMathType_t m = math_for(e->dt, c.math);
  CUDNN_CHECK("conv2d", cudnnSetConvolutionMathType(e->conv, m));
  size_t wsz = 0;
  cudnnStatus_t st = workspace_size(h, e, dir, c.algo, &wsz);
  if (gpu_cudnn_is(st, CUDNN_STATUS_NOT_SUPPORTED) || gpu_cudnn_is(st, CUDNN_STATUS_BAD_PARAM)) return 1;
  CUDNN_CHECK("conv2d", st);
  void *ws = wsz ? gpu_scratch("conv2d", wsz, e->dev) : NULL;
  if (wsz && !ws) { /* too big now: the next candidate may need less */
    *no_ws = true;
    return 1;
  }
  st = run(h, e, dir, c.algo, ws, wsz, a, b, out);
  gpu_free(ws, e->dev); /* one stream: the run is ordered before any reuse */
  if (gpu_cudnn_is(st, CUDNN_STATUS_NOT_SUPPORTED)) return 1;
  CUDNN_CHECK("conv2d", st);
  e->algo[dir] = c.algo;
  e->math[dir] = m;
  e->ws[dir] = wsz;
  return 0;
}

static int no_algorithm(const cnn_conv_shape *s, cnn_dtype dt, bool no_ws) {
  gpu_core.set_error("conv2d: cuDNN has no usable algorithm for input %lldx%lldx%lldx%lld, weight "
                     "%lldx%lldx%lldx%lld, stride %dx%d, dilation %dx%d, groups %d (dtype %s)%s",
                     (long long)s->N, (long long)s->C, (long long)s->H, (long long)s->W,
                     (long long)s->K, (long long)(s->C / s->groups), (long long)s->R,
                     (long long)s->S, s->sh, s->sw, s->dh, s->dw, s->groups,
                     gpu_core.dtype_name(dt),
                     no_ws ? ": out of memory for the workspaces of the algorithms that apply" : "");
  return -1;
}

static int conv_run(int dev, cnn_dtype dt, const cnn_conv_shape *s, int dir, const void *a,
                    const void *b, void *out) {
  if (fits_cudnn(s)) return -1;
  cudnnHandle_t h = gpu_cudnn("conv2d", dev); /* makes dev current */
  conv_entry *e = h ? lookup(dev, dt, s) : NULL;
  if (!e) return -1;
  bool no_ws = false;
  if (e->algo[dir] >= 0) {
    int rc = try_algo(h, e, dir, (cand){e->algo[dir], e->math[dir]}, a, b, out, &no_ws);
    if (rc <= 0) return rc;
  }
  cand c[NCAND];
  int n = 0;
  if (candidates(h, e, dir, c, &n)) return -1;
  for (int i = 0; i < n; i++) {
    if (c[i].algo < 0) continue;
    int rc = try_algo(h, e, dir, c[i], a, b, out, &no_ws);
    if (rc <= 0) return rc;
  }
  return no_algorithm(s, dt, no_ws);
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
  case CNN_FLOAT64: k_add_bias<double><<<g, GPU_THREADS>>>(total, s->K, P, (const double *)b, (double *)y); break;
  case CNN_FLOAT16: k_add_bias<__half><<<g, GPU_THREADS>>>(total, s->K, P, (const __half *)b, (__half *)y); break;
  case CNN_BFLOAT16:
    k_add_bias<__nv_bfloat16><<<g, GPU_THREADS>>>(total, s->K, P, (const __nv_bfloat16 *)b, (__nv_bfloat16 *)y);
    break;
  default: k_add_bias<float><<<g, GPU_THREADS>>>(total, s->K, P, (const float *)b, (float *)y); break;
  }
  LAUNCH_CHECK("conv2d");
  return 0;
}

/* ---- the entries ------------------------------------------------------------------------ */

/* the direct kernel: asked for, asymmetric padding, or a zero N, C or K
 * (cuDNN refuses descriptors with a zero dimension) */
static bool use_direct(cnn_conv_algo algo, const cnn_conv_shape *s) {
  return algo == CNN_CONV_NAIVE || s->pt != s->pb || s->pl != s->pr || !s->N || !s->C || !s->K;
}

static int fwd(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s, const void *x,
               const void *w, const void *b, void *y) {
  if (use_direct(algo, s)) return gpu_direct_conv2d_forward(dev, dt, s, x, w, b, y);
  if (conv_run(dev, dt, s, FWD, x, w, y)) return -1;
  return b ? add_bias(dev, dt, s, b, y) : 0;
}

static int bwd_data(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                    const void *dy, const void *w, void *dx) {
  if (use_direct(algo, s)) return gpu_direct_conv2d_backward_data(dev, dt, s, dy, w, dx);
  return conv_run(dev, dt, s, BWD_DATA, dy, w, dx);
}

static int bwd_weight(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                      const void *dy, const void *x, void *dw, void *db) {
  if (use_direct(algo, s)) return gpu_direct_conv2d_backward_weight(dev, dt, s, dy, x, dw, db);
  if (conv_run(dev, dt, s, BWD_FILTER, dy, x, dw)) return -1;
  if (!db) return 0;
  if (gpu_device("conv2d", dev)) return -1;
  return gpu_channel_sums("conv2d", dt, s->N, s->K, s->OH * s->OW, dy, NULL, NULL, NULL, db, NULL);
}

void gpu_conv_register(cnn_backend *be) {
  be->conv2d_forward = fwd;
  be->conv2d_backward_data = bwd_data;
  be->conv2d_backward_weight = bwd_weight;
}
