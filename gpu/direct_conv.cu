/*
 * direct_conv.cu -- a readable direct 2-D convolution, for teaching (issue
 * 7 item 12) and for shapes cuDNN's legacy API cannot take (asymmetric
 * padding).  Selected with cnn.set_conv_algo('naive') -- 'direct' is the
 * name asked of lua/init.c -- on CUDA tensors; the parity tests run it
 * against the CPU like every other path.
 *
 * Forward: one thread per output element y[n, k, oh, ow].  The grid is
 * (pixel tiles, K, N): every thread of a block shares n and k, so the
 * block first stages the filter w[k] (C/groups x R x S) in shared memory,
 * a chunk of input channels at a time, then each thread sums over its
 * window reading x from global memory:
 *   y[n,k,oh,ow] = b[k] + sum_{c,r,s} w[k,c,r,s] * x[n, g*Cg + c, oh*sh - pt + r*dh, ow*sw - pl + s*dw]
 * Backward data: one thread per input element, gathering from the outputs
 * whose window covers it (no atomics).  Backward weight: one thread per
 * filter element summing over N x OH x OW (slow, but the loop is the
 * formula).  Dtypes: float32 and float64 accumulate in double, as the CPU
 * oracle (conv_naive.c) does; float16/bfloat16 (autocast with asymmetric
 * padding, or 'direct' chosen under autocast) accumulate in float
 * (gpu_acc in gpu.h).  Zero-sized problems (N, C or K of 0, which cuDNN
 * refuses) come here too and give zeros (or the bias).
 * Grid limits: the forward grid is (tiles, K, N), so N and K are at most
 * 65535 (gridDim.y/z); the other two are one-dimensional grid-stride loops.
 */
#include "gpu.h"

#define SMEM_BYTES (32 * 1024)

template <typename T>
__global__ void k_direct_fwd(cnn_conv_shape s, const T *x, const T *w, const T *b, T *y) {
  typedef typename gpu_acc<T>::type A;
  extern __shared__ unsigned char smem_raw[];
  T *sw = (T *)smem_raw;
  const int64_t n = blockIdx.z, k = blockIdx.y, Cg = s.C / s.groups, Kg = s.K / s.groups;
  const int64_t g = k / Kg, RS = s.R * s.S;
  const int64_t pix = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  const bool active = pix < s.OH * s.OW;
  const int64_t oh = pix / s.OW, ow = pix % s.OW;
  const int64_t chunk = SMEM_BYTES / (int64_t)sizeof(T) / RS; /* channels per stage (>= 1) */
  A acc = b ? (A)gpu_widen(b[k]) : (A)0;
  for (int64_t c0 = 0; c0 < Cg; c0 += chunk) { /* every thread runs every stage (barriers) */
    int64_t cn = Cg - c0 < chunk ? Cg - c0 : chunk;
    __syncthreads(); /* the previous chunk is no longer read */
    for (int64_t i = threadIdx.x; i < cn * RS; i += blockDim.x) sw[i] = w[(k * Cg + c0) * RS + i];
    __syncthreads();
    if (!active) continue;
    for (int64_t c = 0; c < cn; c++) {
      const T *xp = x + ((n * s.C) + g * Cg + c0 + c) * s.H * s.W;
      for (int64_t r = 0; r < s.R; r++) {
        int64_t ih = oh * s.sh - s.pt + r * s.dh;
        if (ih < 0 || ih >= s.H) continue;
        for (int64_t q = 0; q < s.S; q++) {
          int64_t iw = ow * s.sw - s.pl + q * s.dw;
          if (iw >= 0 && iw < s.W)
            acc += (A)gpu_widen(sw[(c * s.R + r) * s.S + q]) * (A)gpu_widen(xp[ih * s.W + iw]);
        }
      }
    }
  }
  if (active) y[((n * s.K + k) * s.OH + oh) * s.OW + ow] = gpu_narrow<T>((double)acc);
}

template <typename T>
__global__ void k_direct_bwd_data(cnn_conv_shape s, const T *dy, const T *w, T *dx) {
  typedef typename gpu_acc<T>::type A;
  const int64_t total = s.N * s.C * s.H * s.W, Cg = s.C / s.groups, Kg = s.K / s.groups;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t iw = i % s.W, ih = i / s.W % s.H, c = i / (s.W * s.H) % s.C, n = i / (s.W * s.H * s.C);
    int64_t g = c / Cg, cl = c % Cg;
    A acc = 0;
    for (int64_t k = g * Kg; k < (g + 1) * Kg; k++)
      for (int64_t r = 0; r < s.R; r++) {
        int64_t th = ih + s.pt - r * s.dh; /* = oh * sh */
        if (th < 0 || th % s.sh) continue;
        int64_t oh = th / s.sh;
        if (oh >= s.OH) continue;
        for (int64_t q = 0; q < s.S; q++) {
          int64_t tw = iw + s.pl - q * s.dw;
          if (tw < 0 || tw % s.sw) continue;
          int64_t ow = tw / s.sw;
          if (ow >= s.OW) continue;
          acc += (A)gpu_widen(dy[((n * s.K + k) * s.OH + oh) * s.OW + ow]) *
                 (A)gpu_widen(w[((k * Cg + cl) * s.R + r) * s.S + q]);
        }
      }
    dx[i] = gpu_narrow<T>((double)acc);
  }
}

template <typename T>
__global__ void k_direct_bwd_weight(cnn_conv_shape s, const T *dy, const T *x, T *dw) {
  typedef typename gpu_acc<T>::type A;
  const int64_t Cg = s.C / s.groups, Kg = s.K / s.groups, total = s.K * Cg * s.R * s.S;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t q = i % s.S, r = i / s.S % s.R, c = i / (s.S * s.R) % Cg, k = i / (s.S * s.R * Cg);
    int64_t cin = (k / Kg) * Cg + c;
    A acc = 0;
    for (int64_t n = 0; n < s.N; n++)
      for (int64_t oh = 0; oh < s.OH; oh++) {
        int64_t ih = oh * s.sh - s.pt + r * s.dh;
        if (ih < 0 || ih >= s.H) continue;
        for (int64_t ow = 0; ow < s.OW; ow++) {
          int64_t iw = ow * s.sw - s.pl + q * s.dw;
          if (iw < 0 || iw >= s.W) continue;
          acc += (A)gpu_widen(dy[((n * s.K + k) * s.OH + oh) * s.OW + ow]) *
                 (A)gpu_widen(x[((n * s.C + cin) * s.H + ih) * s.W + iw]);
        }
      }
    dw[i] = gpu_narrow<T>((double)acc);
  }
}

/* ---- launchers ---------------------------------------------------------------------------- */

static bool float_type(cnn_dtype dt) {
  return dt == CNN_FLOAT32 || dt == CNN_FLOAT64 || dt == CNN_FLOAT16 || dt == CNN_BFLOAT16;
}

static int begin(int dev, cnn_dtype dt, const cnn_conv_shape *s) {
  if (!float_type(dt)) {
    gpu_core.set_error("conv2d: the direct kernel takes float32, float64, float16 or bfloat16, "
                       "not %s",
                       gpu_core.dtype_name(dt));
    return -1;
  }
  if (s->R < 1 || s->S < 1 || s->sh < 1 || s->sw < 1 || s->groups < 1) {
    gpu_core.set_error("conv2d: kernel %lldx%lld, stride %dx%d, groups %d must be >= 1",
                       (long long)s->R, (long long)s->S, s->sh, s->sw, s->groups);
    return -1;
  }
  return gpu_device("conv2d", dev);
}

int gpu_direct_conv2d_forward(int dev, cnn_dtype dt, const cnn_conv_shape *s, const void *x,
                              const void *w, const void *b, void *y) {
  if (begin(dev, dt, s)) return -1;
  if ((int64_t)gpu_dtype_size(dt) * s->R * s->S > SMEM_BYTES) {
    gpu_core.set_error("conv2d: the direct kernel needs a filter plane of at most %d bytes "
                       "(kernel %lldx%lld)",
                       SMEM_BYTES, (long long)s->R, (long long)s->S);
    return -1;
  }
  if (s->N > 65535 || s->K > 65535) {
    gpu_core.set_error("conv2d: the direct kernel takes at most 65535 images and filters "
                       "(input has %lld, weight %lld)",
                       (long long)s->N, (long long)s->K);
    return -1;
  }
  if (!s->N || !s->K || !s->OH || !s->OW) return 0;
  dim3 grid((unsigned)((s->OH * s->OW + GPU_THREADS - 1) / GPU_THREADS), (unsigned)s->K,
            (unsigned)s->N);
  int64_t Cg = s->C / s->groups, RS = s->R * s->S, es = (int64_t)gpu_dtype_size(dt);
  int64_t chunk = SMEM_BYTES / es / RS;
  size_t smem = (size_t)((Cg < chunk ? Cg : chunk) * RS * es);
  switch (dt) {
  case CNN_FLOAT32:
    k_direct_fwd<float><<<grid, GPU_THREADS, smem>>>(*s, (const float *)x, (const float *)w,
                                                     (const float *)b, (float *)y);
    break;
  case CNN_FLOAT64:
    k_direct_fwd<double><<<grid, GPU_THREADS, smem>>>(*s, (const double *)x, (const double *)w,
                                                      (const double *)b, (double *)y);
    break;
  case CNN_FLOAT16:
    k_direct_fwd<__half><<<grid, GPU_THREADS, smem>>>(*s, (const __half *)x, (const __half *)w,
                                                      (const __half *)b, (__half *)y);
    break;
  default:
    k_direct_fwd<__nv_bfloat16>
        <<<grid, GPU_THREADS, smem>>>(*s, (const __nv_bfloat16 *)x, (const __nv_bfloat16 *)w,
                                      (const __nv_bfloat16 *)b, (__nv_bfloat16 *)y);
    break;
  }
  LAUNCH_CHECK("conv2d");
  return 0;
}

int gpu_direct_conv2d_backward_data(int dev, cnn_dtype dt, const cnn_conv_shape *s, const void *dy,
                                    const void *w, void *dx) {
  if (begin(dev, dt, s)) return -1;
  int64_t n = s->N * s->C * s->H * s->W;
  if (!n) return 0;
  unsigned g = gpu_blocks(n);
  switch (dt) {
  case CNN_FLOAT32:
    k_direct_bwd_data<float>
        <<<g, GPU_THREADS>>>(*s, (const float *)dy, (const float *)w, (float *)dx);
    break;
  case CNN_FLOAT64:
    k_direct_bwd_data<double>
        <<<g, GPU_THREADS>>>(*s, (const double *)dy, (const double *)w, (double *)dx);
    break;
  case CNN_FLOAT16:
    k_direct_bwd_data<__half>
        <<<g, GPU_THREADS>>>(*s, (const __half *)dy, (const __half *)w, (__half *)dx);
    break;
  default:
    k_direct_bwd_data<__nv_bfloat16><<<g, GPU_THREADS>>>(
        *s, (const __nv_bfloat16 *)dy, (const __nv_bfloat16 *)w, (__nv_bfloat16 *)dx);
    break;
  }
  LAUNCH_CHECK("conv2d");
  return 0;
}

int gpu_direct_conv2d_backward_weight(int dev, cnn_dtype dt, const cnn_conv_shape *s,
                                      const void *dy, const void *x, void *dw, void *db) {
  if (begin(dev, dt, s)) return -1;
  int64_t n = s->K * (s->C / s->groups) * s->R * s->S;
  if (n) {
    unsigned g = gpu_blocks(n);
    switch (dt) {
    case CNN_FLOAT32:
      k_direct_bwd_weight<float>
          <<<g, GPU_THREADS>>>(*s, (const float *)dy, (const float *)x, (float *)dw);
      break;
    case CNN_FLOAT64:
      k_direct_bwd_weight<double>
          <<<g, GPU_THREADS>>>(*s, (const double *)dy, (const double *)x, (double *)dw);
      break;
    case CNN_FLOAT16:
      k_direct_bwd_weight<__half>
          <<<g, GPU_THREADS>>>(*s, (const __half *)dy, (const __half *)x, (__half *)dw);
      break;
    default:
      k_direct_bwd_weight<__nv_bfloat16><<<g, GPU_THREADS>>>(
          *s, (const __nv_bfloat16 *)dy, (const __nv_bfloat16 *)x, (__nv_bfloat16 *)dw);
      break;
    }
    LAUNCH_CHECK("conv2d");
  }
  if (!db) return 0;
  return gpu_channel_sums("conv2d", dt, s->N, s->K, s->OH * s->OW, dy, NULL, NULL, NULL, db, NULL);
}
