/*
 * cudnn_conv.cu -- conv2d forward, backward-data and backward-weight
 * through cuDNN's legacy convolution API, with a per-shape cache.
 *
 * cuDNN 9 marks this API deprecated in favour of the graph (backend) API.
 * We keep the legacy calls, all of them in this one file, and silence the
 * deprecation warning for this file alone (gpu/CMakeLists.txt); the graph
 * API is the way forward (DESIGN.md "Backends", gpu/README.md).
 *
 * Cache.  Key: device, dtype and the whole cnn_conv_shape.  Entry: the four
 * descriptors and, per direction, the algorithm chosen on first use
 * (cudnnFind*Algorithm in benchmark mode -- it times every algorithm --,
 * else the heuristics of cudnnGet*Algorithm_v7), most recently used first,
 * at most CACHE_MAX entries.  Candidates are tried in the order cuDNN
 * ranks them; one whose workspace cannot be allocated or which reports
 * CUDNN_STATUS_NOT_SUPPORTED under our math mode is skipped.
 *
 * Math mode: float32/float64 use CUDNN_FMA_MATH (no TF32: GPU results match
 * the CPU to float32 rounding, like torch.backends.cudnn.allow_tf32 =
 * False); float16/bfloat16 (autocast) use tensor cores with float32
 * accumulation.  Padding must be symmetric for cuDNN; asymmetric padding
 * and CNN_CONV_NAIVE ('direct') go to direct_conv.cu.  The bias is added
 * with cudnnAddTensor; its gradient is a per-channel sum (cudnn_ops.cu).
 * Workspaces come from the caching allocator.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  bool half = e->dt == CNN_FLOAT16 || e->dt == CNN_BFLOAT16;
  CUDNN_CHECK("conv2d", cudnnSetConvolutionMathType(e->conv, half ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  return 0;
}

/* The cached entry for (dev, dt, s), moved to the front, or a new one. */
static conv_entry *lookup(int dev, cnn_dtype dt, const cnn_conv_shape *s) {
  pthread_mutex_lock(&mu);
  conv_entry **pp = &cache, *e = NULL;
  int n = 0;
  for (; *pp; pp = &(*pp)->next, n++) {
    if ((*pp)->dev == dev && (*pp)->dt == dt && !memcmp(&(*pp)->s, s, sizeof *s)) {
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
    e->algo[0] = e->algo[1] = e->algo[2] = -1;
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

static int candidates(cudnnHandle_t h, conv_entry *e, int dir, const void *x, const void *w,
                      const void *y, int *algos, int *n) {
  int got = 0;
  if (dir == FWD) {
    cudnnConvolutionFwdAlgoPerf_t p[NCAND];
    if (benchmark)
      CUDNN_CHECK("conv2d", cudnnFindConvolutionForwardAlgorithm(h, e->x, e->w, e->conv, e->y, NCAND, &got, p));
    else
      CUDNN_CHECK("conv2d", cudnnGetConvolutionForwardAlgorithm_v7(h, e->x, e->w, e->conv, e->y, NCAND, &got, p));
    for (int i = 0; i < got; i++) algos[i] = p[i].status == CUDNN_STATUS_SUCCESS ? (int)p[i].algo : -1;
  } else if (dir == BWD_DATA) {
    cudnnConvolutionBwdDataAlgoPerf_t p[NCAND];
    if (benchmark)
      CUDNN_CHECK("conv2d", cudnnFindConvolutionBackwardDataAlgorithm(h, e->w, e->y, e->conv, e->x, NCAND, &got, p));
    else
      CUDNN_CHECK("conv2d", cudnnGetConvolutionBackwardDataAlgorithm_v7(h, e->w, e->y, e->conv, e->x, NCAND, &got, p));
    for (int i = 0; i < got; i++) algos[i] = p[i].status == CUDNN_STATUS_SUCCESS ? (int)p[i].algo : -1;
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t p[NCAND];
    if (benchmark)
      CUDNN_CHECK("conv2d", cudnnFindConvolutionBackwardFilterAlgorithm(h, e->x, e->y, e->conv, e->w, NCAND, &got, p));
    else
      CUDNN_CHECK("conv2d", cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, e->x, e->y, e->conv, e->w, NCAND, &got, p));
    for (int i = 0; i < got; i++) algos[i] = p[i].status == CUDNN_STATUS_SUCCESS ? (int)p[i].algo : -1;
  }
  (void)x, (void)w, (void)y;
  *n = got;
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

/* one run of direction dir with algo; a = input-ish, b = second operand, out */
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

/* try algo: workspace, run; 1 = not usable (skip), 0 = done, -1 = error */
static int try_algo(cudnnHandle_t h, conv_entry *e, int dir, int algo, const void *a,
                    const void *b, void *out) {
  size_t wsz = 0;
  cudnnStatus_t st = workspace_size(h, e, dir, algo, &wsz);
  if (st == CUDNN_STATUS_NOT_SUPPORTED || st == CUDNN_STATUS_BAD_PARAM) return 1;
  CUDNN_CHECK("conv2d", st);
  void *ws = wsz ? gpu_scratch("conv2d", wsz, e->dev) : NULL;
  if (wsz && !ws) return 1; /* too big now: the next candidate may need less */
  st = run(h, e, dir, algo, ws, wsz, a, b, out);
  gpu_free(ws, e->dev);
  if (st == CUDNN_STATUS_NOT_SUPPORTED) return 1;
  CUDNN_CHECK("conv2d", st);
  e->algo[dir] = algo;
  e->ws[dir] = wsz;
  return 0;
}

static int conv_run(int dev, cnn_dtype dt, const cnn_conv_shape *s, int dir, const void *a,
                    const void *b, void *out) {
  cudnnHandle_t h = gpu_cudnn("conv2d", dev);
  conv_entry *e = h ? lookup(dev, dt, s) : NULL;
  if (!e) return -1;
  if (e->algo[dir] >= 0) {
    int rc = try_algo(h, e, dir, e->algo[dir], a, b, out);
    if (rc <= 0) return rc;
  }
  int algos[NCAND], n = 0;
  if (candidates(h, e, dir, a, b, out, algos, &n)) return -1;
  for (int i = 0; i < n; i++) {
    if (algos[i] < 0) continue;
    int rc = try_algo(h, e, dir, algos[i], a, b, out);
    if (rc <= 0) return rc;
  }
  gpu_core.set_error("conv2d: cuDNN has no usable algorithm for input %lldx%lldx%lldx%lld, weight "
                     "%lldx%lldx%lldx%lld, stride %dx%d, dilation %dx%d, groups %d (dtype %s)",
                     (long long)s->N, (long long)s->C, (long long)s->H, (long long)s->W,
                     (long long)s->K, (long long)(s->C / s->groups), (long long)s->R,
                     (long long)s->S, s->sh, s->sw, s->dh, s->dw, s->groups,
                     gpu_core.dtype_name(dt));
  return -1;
}

/* ---- the entries ------------------------------------------------------------------------ */

static bool use_direct(cnn_conv_algo algo, const cnn_conv_shape *s) {
  return algo == CNN_CONV_NAIVE || s->pt != s->pb || s->pl != s->pr;
}

static int add_bias(int dev, cnn_dtype dt, const cnn_conv_shape *s, const void *b, void *y) {
  cudnnHandle_t h = gpu_cudnn("conv2d", dev);
  conv_entry *e = h ? lookup(dev, dt, s) : NULL;
  if (!e) return -1;
  cudnnTensorDescriptor_t bd;
  CUDNN_CHECK("conv2d", cudnnCreateTensorDescriptor(&bd));
  cudnnStatus_t st = cudnnSetTensor4dDescriptor(bd, CUDNN_TENSOR_NCHW, cudnn_type(dt), 1, (int)s->K, 1, 1);
  double d1 = 1.0;
  float f1 = 1.0f;
  const void *one = dt == CNN_FLOAT64 ? (const void *)&d1 : (const void *)&f1;
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnAddTensor(h, one, bd, b, one, e->y, y);
  cudnnDestroyTensorDescriptor(bd);
  CUDNN_CHECK("conv2d", st);
  return 0;
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
