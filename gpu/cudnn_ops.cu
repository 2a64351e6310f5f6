/*
 * cudnn_ops.cu -- softmax / log_softmax and batch norm through cuDNN, and
 * the per-channel sums shared with the convolution's bias gradient.
 *
 * Like cudnn_conv.cu this uses cuDNN's legacy API, deprecated in cuDNN 9;
 * the deprecation warning is silenced for these two files alone.
 *
 * Softmax: x seen as outer x D x inner is the NCHW tensor (outer, D,
 * inner, 1) and CUDNN_SOFTMAX_MODE_CHANNEL normalises over D; ACCURATE
 * subtracts the max (as the CPU), LOG gives log_softmax, and backward takes
 * the forward output, as core saves it.
 *
 * Batch norm: x is (N, C, L, 1) in SPATIAL mode.  Training: cuDNN's
 * running-average factor is PyTorch's momentum and its running variance is
 * unbiased, as the CPU kernel; cuDNN saves mean and 1/sqrt(var + eps),
 * exactly what core keeps for backward.  cuDNN needs a scale and a bias:
 * missing ones are ones/zeros from the allocator; missing gradient outputs
 * go to scratch.  cuDNN takes the two running statistics both or neither
 * ("both of these pointers can be NULL but only at the same time"): when
 * core hands only one (the CPU kernel updates each it is given), the other
 * is a scratch array whose update is dropped.  Eval forward is
 * cudnnBatchNormalizationForwardInference plus a small kernel that fills
 * save_mean/save_invstd; eval backward (fixed statistics) is our own
 * kernels.  eps below CUDNN_BN_MIN_EPSILON (0.0 in cuDNN 9, cudnn_ops.h)
 * is reported, not silently changed; the backward passes
 * CUDNN_BN_MIN_EPSILON, unused since the saved mean and inverse std are
 * given.  The legacy descriptors hold int sizes and strides: more than
 * INT_MAX elements are refused with a message.
 *
 * float16 (inference, issue 16): softmax forward and backward on
 * CUDNN_DATA_HALF descriptors, and batch norm's eval forward
 * (cudnnBatchNormalizationForwardInference) on half x/y.  cuDNN's rules
 * for half data: the scale/bias/mean/variance descriptor derived by
 * cudnnDeriveBNTensorDescriptor is float ("type = (typeOf(x) == double) ?
 * double : float", cudnn_ops.h), so core hands float32 per-channel arrays
 * (core/ops/nn_norm.c) and eval_stats writes float32; alpha/beta are host
 * floats, as for float32 data (the scaling-parameter rule cudnn_conv.cu
 * follows too).  Batch norm training and backward on half are refused.
 *
 * Per-channel sums (batch norm's eval backward, every conv bias gradient)
 * take float32/float64 and, for the conv bias under autocast, float16 /
 * bfloat16; they accumulate in double, one block per channel.
 */
#include <limits.h>
#include <string.h>

#include "gpu.h"

#define GRID_LOOP(i, n)                                                                            \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                        \
       i += (int64_t)gridDim.x * blockDim.x)

static cudnnDataType_t ctype(cnn_dtype dt) {
  return dt == CNN_FLOAT64   ? CUDNN_DATA_DOUBLE
         : dt == CNN_FLOAT16 ? CUDNN_DATA_HALF
                             : CUDNN_DATA_FLOAT;
}

/* the dtype of batch norm's per-channel arrays for data of dtype dt */
static cnn_dtype bn_param_dt(cnn_dtype dt) { return dt == CNN_FLOAT16 ? CNN_FLOAT32 : dt; }

/* the whole tensor (and so every size and stride) fits cuDNN's int */
static int fits_int(const char *op, int64_t a, int64_t b, int64_t c) {
  bool ok = a <= INT_MAX && b <= INT_MAX && c <= INT_MAX; /* then a*b cannot overflow int64 */
  if (ok && a && b && c) ok = a * b <= INT_MAX && a * b * c <= INT_MAX;
  if (ok) return 0;
  gpu_core.set_error("%s: sizes %lldx%lldx%lld too large for cuDNN", op, (long long)a, (long long)b,
                     (long long)c);
  return -1;
}

/* half: float16 is accepted too */
static int float_only(const char *op, cnn_dtype dt, bool half = false) {
  if (dt == CNN_FLOAT32 || dt == CNN_FLOAT64 || (half && dt == CNN_FLOAT16)) return 0;
  gpu_core.set_error("%s: dtype %s is not supported on cuda", op, gpu_core.dtype_name(dt));
  return -1;
}

/* a 4-d NCHW descriptor in *d (created here; destroyed by the caller) */
static int desc4(const char *op, cudnnTensorDescriptor_t *d, cnn_dtype dt, int64_t n, int64_t c,
                 int64_t h, int64_t w) {
  CUDNN_CHECK(op, cudnnCreateTensorDescriptor(d));
  CUDNN_CHECK(op, cudnnSetTensor4dDescriptor(*d, CUDNN_TENSOR_NCHW, ctype(dt), (int)n, (int)c,
                                             (int)h, (int)w));
  return 0;
}

/* ---- softmax ---------------------------------------------------------------------------- */

/* the cuDNN call of softmax forward (dy == NULL: y = softmax(a)) or
 * backward (a = y, dy), retried once after releasing our cache when cuDNN
 * could not allocate (gpu.h, CUDNN_CHECK_RETRY) */
static int softmax_call(cudnnHandle_t h, int dev, const char *op, int log, bool f64,
                        cudnnTensorDescriptor_t d, const void *a, const void *dy, void *out) {
  double d1 = 1, d0 = 0;
  float f1 = 1, f0 = 0;
  const void *one = f64 ? (void *)&d1 : (void *)&f1, *zero = f64 ? (void *)&d0 : (void *)&f0;
  cudnnSoftmaxAlgorithm_t algo = log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE;
  if (!dy)
    CUDNN_CHECK_RETRY(
        op, dev, cudnnSoftmaxForward(h, algo, CUDNN_SOFTMAX_MODE_CHANNEL, one, d, a, zero, d, out));
  else
    CUDNN_CHECK_RETRY(
        op, dev,
        cudnnSoftmaxBackward(h, algo, CUDNN_SOFTMAX_MODE_CHANNEL, one, d, a, d, dy, zero, d, out));
  return 0;
}

static int softmax_fwd(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int log,
                       const void *x, void *y) {
  const char *op = log ? "log_softmax" : "softmax";
  if (float_only(op, dt, true) || fits_int(op, outer, D, inner)) return -1;
  if (outer * D * inner == 0) return 0;
  cudnnHandle_t h = gpu_cudnn(op, dev);
  cudnnTensorDescriptor_t d = NULL;
  if (!h || desc4(op, &d, dt, outer, D, inner, 1)) return cudnnDestroyTensorDescriptor(d), -1;
  int rc = softmax_call(h, dev, op, log, dt == CNN_FLOAT64, d, x, NULL, y);
  cudnnDestroyTensorDescriptor(d);
  return rc;
}

static int softmax_bwd(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int log,
                       const void *y, const void *dy, void *dx) {
  const char *op = log ? "log_softmax" : "softmax";
  if (float_only(op, dt, true) || fits_int(op, outer, D, inner)) return -1;
  if (outer * D * inner == 0) return 0;
  cudnnHandle_t h = gpu_cudnn(op, dev);
  cudnnTensorDescriptor_t d = NULL;
  if (!h || desc4(op, &d, dt, outer, D, inner, 1)) return cudnnDestroyTensorDescriptor(d), -1;
  int rc = softmax_call(h, dev, op, log, dt == CNN_FLOAT64, d, y, dy, dx);
  cudnnDestroyTensorDescriptor(d);
  return rc;
}

/* ---- per-channel sums and small kernels ---------------------------------------------------- */

/* block c: s1 = sum dy, s2 = sum dy * (x - mean[c]) * invstd[c] over N x L
 * (T any float type; mean/invstd/out of T; double accumulation) */
template <typename T>
__global__ void k_channel_sums(int64_t N, int64_t C, int64_t L, const T *dy, const T *x,
                               const T *mean, const T *invstd, T *out1, T *out2) {
  __shared__ double sh1[GPU_THREADS], sh2[GPU_THREADS];
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    double s1 = 0, s2 = 0;
    double m = x ? (double)gpu_widen(mean[c]) : 0, is = x ? (double)gpu_widen(invstd[c]) : 0;
    for (int64_t k = threadIdx.x; k < N * L; k += blockDim.x) {
      int64_t i = ((k / L) * C + c) * L + k % L;
      double g = gpu_widen(dy[i]);
      s1 += g;
      if (x) s2 += g * ((double)gpu_widen(x[i]) - m) * is;
    }
    __syncthreads(); /* thread 0 has read the previous channel's sums */
    sh1[threadIdx.x] = s1, sh2[threadIdx.x] = s2;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) { /* blockDim.x is a power of two */
      if ((int)threadIdx.x < s)
        sh1[threadIdx.x] += sh1[threadIdx.x + s], sh2[threadIdx.x] += sh2[threadIdx.x + s];
      __syncthreads();
    }
    if (!threadIdx.x) {
      if (out1) out1[c] = gpu_narrow<T>(sh1[0]);
      if (out2) out2[c] = gpu_narrow<T>(sh2[0]);
    }
  }
}

template <typename T>
static void launch_channel_sums(unsigned blocks, int64_t N, int64_t C, int64_t L, const void *dy,
                                const void *x, const void *mean, const void *invstd, void *out1,
                                void *out2) {
  k_channel_sums<T><<<blocks, GPU_THREADS>>>(N, C, L, (const T *)dy, (const T *)x, (const T *)mean,
                                             (const T *)invstd, (T *)out1, (T *)out2);
}

int gpu_channel_sums(const char *op, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                     const void *x, const void *mean, const void *invstd, void *out1, void *out2) {
  if (dt != CNN_FLOAT32 && dt != CNN_FLOAT64 && dt != CNN_FLOAT16 && dt != CNN_BFLOAT16)
    return float_only(op, dt);
  if (C <= 0) return 0;
  unsigned blocks = C < 65535 ? (unsigned)C : 65535;
  switch (dt) {
  case CNN_FLOAT32:
    launch_channel_sums<float>(blocks, N, C, L, dy, x, mean, invstd, out1, out2);
    break;
  case CNN_FLOAT64:
    launch_channel_sums<double>(blocks, N, C, L, dy, x, mean, invstd, out1, out2);
    break;
  case CNN_FLOAT16:
    launch_channel_sums<__half>(blocks, N, C, L, dy, x, mean, invstd, out1, out2);
    break;
  default:
    launch_channel_sums<__nv_bfloat16>(blocks, N, C, L, dy, x, mean, invstd, out1, out2);
    break;
  }
  LAUNCH_CHECK(op);
  return 0;
}

/* fill[i] = v (i < n) */
template <typename T> __global__ void k_set(int64_t n, T *p, T v) { GRID_LOOP(i, n) p[i] = v; }

/* save_mean = rm, save_invstd = 1/sqrt(rv + eps) */
template <typename T>
__global__ void k_eval_stats(int64_t C, const T *rm, const T *rv, double eps, T *sm, T *si) {
  GRID_LOOP(c, C) {
    if (sm) sm[c] = rm[c];
    if (si) si[c] = (T)(1.0 / sqrt((double)rv[c] + eps));
  }
}

/* dx = dy * gamma[c] * invstd[c] (gamma NULL: 1) */
template <typename T>
__global__ void k_bn_eval_dx(int64_t n, int64_t C, int64_t L, const T *dy, const T *gamma,
                             const T *invstd, T *dx) {
  GRID_LOOP(i, n) {
    int64_t c = (i / L) % C;
    dx[i] = (T)((double)dy[i] * (gamma ? (double)gamma[c] : 1.0) * (double)invstd[c]);
  }
}

static int set_const(const char *op, cnn_dtype dt, int64_t n, void *p, double v) {
  if (dt == CNN_FLOAT32)
    k_set<float><<<gpu_blocks(n), GPU_THREADS>>>(n, (float *)p, (float)v);
  else
    k_set<double><<<gpu_blocks(n), GPU_THREADS>>>(n, (double *)p, v);
  LAUNCH_CHECK(op);
  return 0;
}

/* ---- batch norm ------------------------------------------------------------------------------ */

typedef struct {
  cudnnHandle_t h;
  cudnnTensorDescriptor_t x, p; /* data (N, C, L, 1) and per-channel (1, C, 1, 1) */
  void *ones, *zeros;           /* scratch scale/bias when gamma/beta are NULL */
  void *stat;                   /* scratch for the running statistic core did not pass */
  int dev;
} bn_ctx;

static void bn_done(bn_ctx *b) {
  if (b->x) cudnnDestroyTensorDescriptor(b->x);
  if (b->p) cudnnDestroyTensorDescriptor(b->p);
  gpu_free(b->ones, b->dev);
  gpu_free(b->zeros, b->dev);
  gpu_free(b->stat, b->dev);
}

/* cuDNN updates both running statistics or neither: when exactly one is
 * given, the other becomes a zeroed scratch array (its update is dropped) */
static int bn_running(bn_ctx *b, cnn_dtype dt, int64_t C, void **rm, void **rv) {
  if (!*rm == !*rv) return 0;
  size_t bytes = (size_t)C * gpu_dtype_size(dt);
  if (!(b->stat = gpu_scratch("batch_norm", bytes, b->dev))) return -1;
  CUDA_CHECK("batch_norm", cudaMemsetAsync(b->stat, 0, bytes, 0));
  if (!*rm)
    *rm = b->stat;
  else
    *rv = b->stat;
  return 0;
}

/* half: float16 data accepted (the eval forward) */
static int bn_begin(bn_ctx *b, int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L, double eps,
                    bool half) {
  memset(b, 0, sizeof *b);
  b->dev = dev;
  if (float_only("batch_norm", dt, half) || fits_int("batch_norm", N, C, L)) return -1;
  if (!(eps >= CUDNN_BN_MIN_EPSILON)) { /* NaN too */
    gpu_core.set_error("batch_norm: eps %g is below cuDNN's minimum %g on cuda", eps,
                       (double)CUDNN_BN_MIN_EPSILON);
    return -1;
  }
  if (!(b->h = gpu_cudnn("batch_norm", dev))) return -1;
  if (desc4("batch_norm", &b->x, dt, N, C, L, 1)) return -1;
  CUDNN_CHECK("batch_norm", cudnnCreateTensorDescriptor(&b->p));
  CUDNN_CHECK("batch_norm", cudnnDeriveBNTensorDescriptor(b->p, b->x, CUDNN_BATCHNORM_SPATIAL));
  return 0;
}

/* scale/bias pointers for cuDNN (ones/zeros when absent) */
static int bn_params(bn_ctx *b, cnn_dtype dt, int64_t C, const void **gamma, const void **beta) {
  size_t bytes = (size_t)C * gpu_dtype_size(dt);
  if (!*gamma) {
    if (!(b->ones = gpu_scratch("batch_norm", bytes, b->dev)) ||
        set_const("batch_norm", dt, C, b->ones, 1))
      return -1;
    *gamma = b->ones;
  }
  if (beta && !*beta) {
    if (!(b->zeros = gpu_scratch("batch_norm", bytes, b->dev)) ||
        set_const("batch_norm", dt, C, b->zeros, 0))
      return -1;
    *beta = b->zeros;
  }
  return 0;
}

/* eval: save_mean = running_mean, save_invstd = 1/sqrt(running_var + eps)
 * (either may be NULL); current device set by the caller */
static int eval_stats(cnn_dtype dt, int64_t C, const void *rm, const void *rv, double eps, void *sm,
                      void *si) {
  if ((!sm && !si) || C <= 0) return 0;
  if (dt == CNN_FLOAT64)
    k_eval_stats<double><<<gpu_blocks(C), GPU_THREADS>>>(C, (const double *)rm, (const double *)rv,
                                                         eps, (double *)sm, (double *)si);
  else
    k_eval_stats<float><<<gpu_blocks(C), GPU_THREADS>>>(C, (const float *)rm, (const float *)rv,
                                                        eps, (float *)sm, (float *)si);
  LAUNCH_CHECK("batch_norm");
  return 0;
}

static int bn_forward_body(bn_ctx *b, cnn_dtype dt, int64_t C, const void *x, const void *gamma,
                           const void *beta, void *rm, void *rv, int training, double momentum,
                           double eps, void *y, void *sm, void *si) {
  double d1 = 1, d0 = 0;
  float f1 = 1, f0 = 0;
  bool f64 = dt == CNN_FLOAT64;
  const void *one = f64 ? (void *)&d1 : (void *)&f1, *zero = f64 ? (void *)&d0 : (void *)&f0;
  cnn_dtype pdt = bn_param_dt(dt); /* gamma, beta, rm, rv, sm, si */
  if (bn_params(b, pdt, C, &gamma, &beta)) return -1;
  if (training) { /* save_mean/save_invstd: both given by core, as cuDNN wants */
    if (bn_running(b, pdt, C, &rm, &rv)) return -1;
    CUDNN_CHECK_RETRY("batch_norm", b->dev,
                      cudnnBatchNormalizationForwardTraining(b->h, CUDNN_BATCHNORM_SPATIAL, one,
                                                             zero, b->x, x, b->x, y, b->p, gamma,
                                                             beta, momentum, rm, rv, eps, sm, si));
    return 0;
  }
  CUDNN_CHECK_RETRY("batch_norm", b->dev,
                    cudnnBatchNormalizationForwardInference(b->h, CUDNN_BATCHNORM_SPATIAL, one,
                                                            zero, b->x, x, b->x, y, b->p, gamma,
                                                            beta, rm, rv, eps));
  return eval_stats(pdt, C, rm, rv, eps, sm, si);
}

static int bn_forward(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *x,
                      const void *gamma, const void *beta, void *rm, void *rv, int training,
                      double momentum, double eps, void *y, void *sm, void *si) {
  if (training && dt == CNN_FLOAT16) /* core refuses it first */
    return float_only("batch_norm (training)", dt);
  if (N * C * L == 0) {     /* no data: eval still reports the statistics it uses */
    if (training) return 0; /* core refuses training with one value per channel */
    if (float_only("batch_norm", dt, true) || gpu_device("batch_norm", dev)) return -1;
    return eval_stats(bn_param_dt(dt), C, rm, rv, eps, sm, si);
  }
  bn_ctx b;
  int rc = bn_begin(&b, dev, dt, N, C, L, eps, true);
  if (rc == 0)
    rc = bn_forward_body(&b, dt, C, x, gamma, beta, rm, rv, training, momentum, eps, y, sm, si);
  bn_done(&b);
  return rc;
}

/* cudnnBatchNormalizationBackward with the saved statistics and the
 * forward's epsilon ("Same epsilon as forward pass", cudnn_ops.h), retried
 * once after releasing our cache when cuDNN could not allocate */
static int bn_backward_call(bn_ctx *b, cnn_dtype dt, const void *dy, const void *x,
                            const void *gamma, const void *sm, const void *si, void *dx, void *dg,
                            void *db, double eps) {
  double d1 = 1, d0 = 0;
  float f1 = 1, f0 = 0;
  bool f64 = dt == CNN_FLOAT64;
  const void *one = f64 ? (void *)&d1 : (void *)&f1, *zero = f64 ? (void *)&d0 : (void *)&f0;
  CUDNN_CHECK_RETRY("batch_norm", b->dev,
                    cudnnBatchNormalizationBackward(b->h, CUDNN_BATCHNORM_SPATIAL, one, zero, one,
                                                    zero, b->x, x, b->x, dy, b->x, dx, b->p, gamma,
                                                    dg, db, eps, sm, si));
  return 0;
}

static int bn_backward(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                       const void *x, const void *gamma, const void *sm, const void *si, void *dx,
                       void *dg, void *db, double eps) {
  if (N * C * L == 0) return 0;
  bn_ctx b;
  int rc = bn_begin(&b, dev, dt, N, C, L, eps, false);
  size_t cb = (size_t)C * gpu_dtype_size(dt);
  void *tdx = NULL, *tdg = NULL, *tdb = NULL;
  if (rc == 0) rc = bn_params(&b, dt, C, &gamma, NULL);
  if (rc == 0 && !dx)
    rc = (dx = tdx = gpu_scratch("batch_norm", (size_t)(N * C * L) * gpu_dtype_size(dt), dev)) ? 0
                                                                                               : -1;
  if (rc == 0 && !dg) rc = (dg = tdg = gpu_scratch("batch_norm", cb, dev)) ? 0 : -1;
  if (rc == 0 && !db) rc = (db = tdb = gpu_scratch("batch_norm", cb, dev)) ? 0 : -1;
  if (rc == 0) rc = bn_backward_call(&b, dt, dy, x, gamma, sm, si, dx, dg, db, eps);
  gpu_free(tdx, dev), gpu_free(tdg, dev), gpu_free(tdb, dev);
  bn_done(&b);
  return rc;
}

static int bn_backward_eval(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                            const void *x, const void *gamma, const void *sm, const void *si,
                            void *dx, void *dg, void *db, double eps) {
  (void)eps; /* the saved inverse std holds it; no cuDNN call here */
  if (float_only("batch_norm", dt) || gpu_device("batch_norm", dev)) return -1;
  int64_t n = N * C * L;
  if (C <= 0) return 0;
  if (dx && n > 0) {
    if (dt == CNN_FLOAT32)
      k_bn_eval_dx<float><<<gpu_blocks(n), GPU_THREADS>>>(
          n, C, L, (const float *)dy, (const float *)gamma, (const float *)si, (float *)dx);
    else
      k_bn_eval_dx<double><<<gpu_blocks(n), GPU_THREADS>>>(
          n, C, L, (const double *)dy, (const double *)gamma, (const double *)si, (double *)dx);
    LAUNCH_CHECK("batch_norm");
  }
  if (!dg && !db) return 0;
  /* with N*L == 0 these are sums of nothing: zeros, never left unwritten */
  return gpu_channel_sums("batch_norm", dt, N, C, L, dy, dg ? x : NULL, sm, si, db, dg);
}

void gpu_ops_register(cnn_backend *be) {
  be->softmax_forward = softmax_fwd;
  be->softmax_backward = softmax_bwd;
  be->batch_norm_forward = bn_forward;
  be->batch_norm_backward = bn_backward;
  be->batch_norm_backward_eval = bn_backward_eval;
}
