/*
 * pool.cu -- max, average and adaptive average 2-D pooling: our own
 * kernels, one thread per output element.
 *
 * Why not cuDNN here: core's API returns max-pool indices (the flat h*W+w
 * of the argmax, which backward scatters through and which the user can
 * ask for), and follows PyTorch's ceil_mode windows and average divisors
 * (window clipped to the padded input), none of which cuDNN's pooling
 * exposes, and cuDNN's pooling has no dilation; PyTorch uses its own
 * kernels for the same reasons.  A dilated max window takes every dh-th
 * row and dw-th column, as on the CPU.  The window
 * rules are core/cpu/pool.c's, line for line: padding is -inf for max
 * (first maximum kept, a NaN wins and every later NaN moves the index, as
 * the CPU's branch-free loop does), average divides by the clipped padded
 * window or by the real elements.
 *
 * Backward passes zero dx and scatter with atomicAdd (float and double
 * atomics: sm_60 and later), so overlapping windows sum as on the CPU, in
 * a nondeterministic order (differences of float rounding only).
 *
 * The forward passes also take float16 (inference, issue 16): elements are
 * widened with gpu_widen, summed in double as for float32, and rounded once
 * by gpu_narrow (gpu.h).  The backward passes take float32/float64 only.
 */
#include <math.h>

#include "gpu.h"

#define GRID_LOOP(i, n)                                                                            \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                        \
       i += (int64_t)gridDim.x * blockDim.x)

__device__ __forceinline__ int64_t mx(int64_t a, int64_t b) { return a > b ? a : b; }
__device__ __forceinline__ int64_t mn(int64_t a, int64_t b) { return a < b ? a : b; }

/* the taps start, start + d, ... (k of them) inside [0, n), as [*lo, *hi) by d */
__device__ __forceinline__ void taps(int64_t start, int k, int d, int64_t n, int64_t *lo,
                                     int64_t *hi) {
  *lo = start < 0 ? start + (-start + d - 1) / d * d : start;
  *hi = mn(start + (int64_t)(k - 1) * d + 1, n);
}

/* one thread per output; dilation dh x dw (1 x 1 for undilated windows) */
template <typename T> __global__ void k_max_fwd(cnn_pool_shape s, const T *x, T *y, int64_t *idx) {
  int64_t n = s.N * s.C * s.OH * s.OW;
  GRID_LOOP(i, n) {
    int64_t ow = i % s.OW, oh = i / s.OW % s.OH, plane = i / (s.OW * s.OH);
    int64_t h0, h1, w0, w1;
    taps(oh * s.sh - s.ph, s.kh, s.dh, s.H, &h0, &h1);
    taps(ow * s.sw - s.pw, s.kw, s.dw, s.W, &w0, &w1);
    const T *xp = x + plane * s.H * s.W;
    int64_t arg = h0 < h1 && w0 < w1 ? h0 * s.W + w0 : -1;
    double best = -INFINITY;
    bool seen_nan = false;
    for (int64_t h = h0; h < h1; h += s.dh)
      for (int64_t w = w0; w < w1; w += s.dw) {
        double v = gpu_widen(xp[h * s.W + w]);
        bool is_nan = v != v;
        if ((v > best && !seen_nan) || is_nan) arg = h * s.W + w;
        if (v > best) best = v;
        seen_nan |= is_nan;
      }
    y[i] = gpu_narrow<T>(seen_nan ? (double)NAN : best);
    if (idx) idx[i] = arg;
  }
}

template <typename T>
__global__ void k_max_bwd(cnn_pool_shape s, const T *dy, const int64_t *idx, T *dx) {
  int64_t n = s.N * s.C * s.OH * s.OW;
  GRID_LOOP(i, n) {
    int64_t plane = i / (s.OW * s.OH), a = idx[i];
    if (a >= 0 && a < s.H * s.W)
      atomicAdd(dx + plane * s.H * s.W + a, dy[i]); /* -1: empty window */
  }
}

/* the clipped window and divisor of core/cpu/pool.c's avg_window */
struct Win {
  int64_t h0, h1, w0, w1;
  double div;
};
__device__ Win avg_win(const cnn_pool_shape &s, int64_t oh, int64_t ow) {
  Win v;
  int64_t h0 = oh * s.sh - s.ph, w0 = ow * s.sw - s.pw;
  int64_t h1 = mn(h0 + s.kh, s.H + s.ph), w1 = mn(w0 + s.kw, s.W + s.pw);
  int64_t padded = (h1 - h0) * (w1 - w0);
  v.h0 = mx(h0, 0), v.w0 = mx(w0, 0), v.h1 = mn(h1, s.H), v.w1 = mn(w1, s.W);
  int64_t real = mx(v.h1 - v.h0, 0) * mx(v.w1 - v.w0, 0);
  v.div = (double)(s.count_include_pad ? padded : real);
  return v;
}

template <typename T> __global__ void k_avg_fwd(cnn_pool_shape s, const T *x, T *y) {
  int64_t n = s.N * s.C * s.OH * s.OW;
  GRID_LOOP(i, n) {
    int64_t ow = i % s.OW, oh = i / s.OW % s.OH, plane = i / (s.OW * s.OH);
    Win v = avg_win(s, oh, ow);
    const T *xp = x + plane * s.H * s.W;
    double acc = 0;
    for (int64_t h = v.h0; h < v.h1; h++)
      for (int64_t w = v.w0; w < v.w1; w++) acc += gpu_widen(xp[h * s.W + w]);
    y[i] = gpu_narrow<T>(v.div > 0 ? acc / v.div : 0);
  }
}

template <typename T> __global__ void k_avg_bwd(cnn_pool_shape s, const T *dy, T *dx) {
  int64_t n = s.N * s.C * s.OH * s.OW;
  GRID_LOOP(i, n) {
    int64_t ow = i % s.OW, oh = i / s.OW % s.OH, plane = i / (s.OW * s.OH);
    Win v = avg_win(s, oh, ow);
    if (!(v.div > 0)) continue;
    T g = (T)((double)dy[i] / v.div);
    T *dp = dx + plane * s.H * s.W;
    for (int64_t h = v.h0; h < v.h1; h++)
      for (int64_t w = v.w0; w < v.w1; w++) atomicAdd(dp + h * s.W + w, g);
  }
}

__device__ __forceinline__ int64_t bin_start(int64_t i, int64_t in, int64_t out) {
  return i * in / out;
}
__device__ __forceinline__ int64_t bin_end(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

template <typename T>
__global__ void k_adaptive_fwd(int64_t NC, int64_t H, int64_t W, int64_t OH, int64_t OW, const T *x,
                               T *y) {
  int64_t n = NC * OH * OW;
  GRID_LOOP(i, n) {
    int64_t ow = i % OW, oh = i / OW % OH, plane = i / (OW * OH);
    int64_t h0 = bin_start(oh, H, OH), h1 = bin_end(oh, H, OH);
    int64_t w0 = bin_start(ow, W, OW), w1 = bin_end(ow, W, OW);
    double acc = 0;
    for (int64_t h = h0; h < h1; h++)
      for (int64_t w = w0; w < w1; w++) acc += gpu_widen(x[plane * H * W + h * W + w]);
    y[i] = gpu_narrow<T>(acc / (double)((h1 - h0) * (w1 - w0)));
  }
}

/* dy OH x OW scattered into dx H x W (zeroed) */
template <typename T>
__global__ void k_adaptive_bwd(int64_t NC, int64_t H, int64_t W, int64_t OH, int64_t OW,
                               const T *dy, T *dx) {
  int64_t n = NC * OH * OW;
  GRID_LOOP(i, n) {
    int64_t ow = i % OW, oh = i / OW % OH, plane = i / (OW * OH);
    int64_t h0 = bin_start(oh, H, OH), h1 = bin_end(oh, H, OH);
    int64_t w0 = bin_start(ow, W, OW), w1 = bin_end(ow, W, OW);
    T g = (T)((double)dy[i] / (double)((h1 - h0) * (w1 - w0)));
    for (int64_t h = h0; h < h1; h++)
      for (int64_t w = w0; w < w1; w++) atomicAdd(dx + plane * H * W + h * W + w, g);
  }
}

/* ---- launchers ------------------------------------------------------------------------ */

/* half: the pass takes float16 (the forward passes) */
static int begin(const char *op, int dev, cnn_dtype dt, bool half = false) {
  if (dt != CNN_FLOAT32 && dt != CNN_FLOAT64 && !(half && dt == CNN_FLOAT16)) {
    gpu_core.set_error("%s: dtype %s is not supported on cuda", op, gpu_core.dtype_name(dt));
    return -1;
  }
  return gpu_device(op, dev);
}

static int zero(const char *op, void *p, size_t bytes) {
  CUDA_CHECK(op, cudaMemsetAsync(p, 0, bytes, 0));
  return 0;
}

static int max_fwd(int dev, cnn_dtype dt, const cnn_pool_shape *s, const void *x, void *y,
                   int64_t *idx) {
  int64_t n = s->N * s->C * s->OH * s->OW;
  if (begin("max_pool2d", dev, dt, true)) return -1;
  if (s->dh < 1 || s->dw < 1) {
    gpu_core.set_error("max_pool2d: dilation %dx%d must be >= 1", s->dh, s->dw);
    return -1;
  }
  if (!n) return 0;
  if (dt == CNN_FLOAT32)
    k_max_fwd<float><<<gpu_blocks(n), GPU_THREADS>>>(*s, (const float *)x, (float *)y, idx);
  else if (dt == CNN_FLOAT16)
    k_max_fwd<__half><<<gpu_blocks(n), GPU_THREADS>>>(*s, (const __half *)x, (__half *)y, idx);
  else
    k_max_fwd<double><<<gpu_blocks(n), GPU_THREADS>>>(*s, (const double *)x, (double *)y, idx);
  LAUNCH_CHECK("max_pool2d");
  return 0;
}

static int max_bwd(int dev, cnn_dtype dt, const cnn_pool_shape *s, const void *dy,
                   const int64_t *idx, void *dx) {
  int64_t n = s->N * s->C * s->OH * s->OW;
  if (begin("max_pool2d", dev, dt) ||
      zero("max_pool2d", dx, (size_t)(s->N * s->C * s->H * s->W) * gpu_dtype_size(dt)))
    return -1;
  if (!n) return 0;
  if (dt == CNN_FLOAT32)
    k_max_bwd<float><<<gpu_blocks(n), GPU_THREADS>>>(*s, (const float *)dy, idx, (float *)dx);
  else
    k_max_bwd<double><<<gpu_blocks(n), GPU_THREADS>>>(*s, (const double *)dy, idx, (double *)dx);
  LAUNCH_CHECK("max_pool2d");
  return 0;
}

static int avg_fwd(int dev, cnn_dtype dt, const cnn_pool_shape *s, const void *x, void *y) {
  int64_t n = s->N * s->C * s->OH * s->OW;
  if (begin("avg_pool2d", dev, dt, true)) return -1;
  if (!n) return 0;
  if (dt == CNN_FLOAT32)
    k_avg_fwd<float><<<gpu_blocks(n), GPU_THREADS>>>(*s, (const float *)x, (float *)y);
  else if (dt == CNN_FLOAT16)
    k_avg_fwd<__half><<<gpu_blocks(n), GPU_THREADS>>>(*s, (const __half *)x, (__half *)y);
  else
    k_avg_fwd<double><<<gpu_blocks(n), GPU_THREADS>>>(*s, (const double *)x, (double *)y);
  LAUNCH_CHECK("avg_pool2d");
  return 0;
}

static int avg_bwd(int dev, cnn_dtype dt, const cnn_pool_shape *s, const void *dy, void *dx) {
  int64_t n = s->N * s->C * s->OH * s->OW;
  if (begin("avg_pool2d", dev, dt) ||
      zero("avg_pool2d", dx, (size_t)(s->N * s->C * s->H * s->W) * gpu_dtype_size(dt)))
    return -1;
  if (!n) return 0;
  if (dt == CNN_FLOAT32)
    k_avg_bwd<float><<<gpu_blocks(n), GPU_THREADS>>>(*s, (const float *)dy, (float *)dx);
  else
    k_avg_bwd<double><<<gpu_blocks(n), GPU_THREADS>>>(*s, (const double *)dy, (double *)dx);
  LAUNCH_CHECK("avg_pool2d");
  return 0;
}

static int adaptive_fwd(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                        int64_t OH, int64_t OW, const void *x, void *y) {
  const char *op = "adaptive_avg_pool2d";
  if (begin(op, dev, dt, true)) return -1;
  int64_t n = N * C * OH * OW;
  if (!n || !H || !W) return 0;
  unsigned g = gpu_blocks(n);
  if (dt == CNN_FLOAT32)
    k_adaptive_fwd<float><<<g, GPU_THREADS>>>(N * C, H, W, OH, OW, (const float *)x, (float *)y);
  else if (dt == CNN_FLOAT16)
    k_adaptive_fwd<__half><<<g, GPU_THREADS>>>(N * C, H, W, OH, OW, (const __half *)x, (__half *)y);
  else
    k_adaptive_fwd<double><<<g, GPU_THREADS>>>(N * C, H, W, OH, OW, (const double *)x, (double *)y);
  LAUNCH_CHECK(op);
  return 0;
}

static int adaptive_bwd(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                        int64_t OH, int64_t OW, const void *dy, void *dx) {
  const char *op = "adaptive_avg_pool2d";
  if (begin(op, dev, dt) || zero(op, dx, (size_t)(N * C * H * W) * gpu_dtype_size(dt))) return -1;
  int64_t n = N * C * OH * OW;
  if (!n || !H || !W) return 0;
  unsigned g = gpu_blocks(n);
  if (dt == CNN_FLOAT32)
    k_adaptive_bwd<float><<<g, GPU_THREADS>>>(N * C, H, W, OH, OW, (const float *)dy, (float *)dx);
  else
    k_adaptive_bwd<double>
        <<<g, GPU_THREADS>>>(N * C, H, W, OH, OW, (const double *)dy, (double *)dx);
  LAUNCH_CHECK(op);
  return 0;
}

void gpu_pool_register(cnn_backend *be) {
  be->max_pool2d_forward = max_fwd;
  be->max_pool2d_backward = max_bwd;
  be->avg_pool2d_forward = avg_fwd;
  be->avg_pool2d_backward = avg_bwd;
  be->adaptive_avg_pool2d_forward = adaptive_fwd;
  be->adaptive_avg_pool2d_backward = adaptive_bwd;
}
