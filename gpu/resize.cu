/*
 * resize.cu -- 2-d resizing (F.interpolate: nearest, bilinear) and adaptive
 * max pooling: our own kernels, one thread per output element, with the
 * coordinate and bin rules of core/resize_math.h (the CPU's, so the CPU
 * tests cover them).
 *
 * Backward passes zero dx and scatter with atomicAdd (float and double
 * atomics: sm_60 and later): several outputs read one input element when
 * upsampling, so the sums land in a nondeterministic order (float rounding
 * differences only).  Adaptive max pooling keeps the first maximum and lets
 * a NaN win, as the CPU.
 */
#include "gpu.h"
#include "resize_math.h"

#define GRID_LOOP(i, n)                                                                            \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                        \
       i += (int64_t)gridDim.x * blockDim.x)

template <typename T> __global__ void k_resize(cnn_resize_shape s, bool bwd, const T *in, T *out) {
  GRID_LOOP(i, s.N * s.C * s.OH * s.OW) {
    int64_t ow = i % s.OW, oh = i / s.OW % s.OH, p = i / (s.OW * s.OH), ib = p * s.H * s.W;
    if (s.mode == CNN_RESIZE_NEAREST) {
      int64_t at = ib + cnn_resize_nearest(oh, s.H, s.OH, s.scale_h) * s.W +
                   cnn_resize_nearest(ow, s.W, s.OW, s.scale_w);
      if (bwd)
        atomicAdd(out + at, in[i]);
      else
        out[i] = in[at];
      continue;
    }
    cnn_resize_taps th = cnn_resize_linear(oh, s.H, s.OH, s.align_corners, s.scale_h);
    cnn_resize_taps tw = cnn_resize_linear(ow, s.W, s.OW, s.align_corners, s.scale_w);
    int64_t at[4] = {ib + th.i0 * s.W + tw.i0, ib + th.i0 * s.W + tw.i1, ib + th.i1 * s.W + tw.i0,
                     ib + th.i1 * s.W + tw.i1};
    double wt[4] = {th.w0 * tw.w0, th.w0 * tw.w1, th.w1 * tw.w0, th.w1 * tw.w1};
    if (bwd) {
      for (int k = 0; k < 4; k++) atomicAdd(out + at[k], (T)((double)in[i] * wt[k]));
    } else {
      double top = tw.w0 * (double)in[at[0]] + tw.w1 * (double)in[at[1]];
      double bot = tw.w0 * (double)in[at[2]] + tw.w1 * (double)in[at[3]];
      out[i] = (T)(th.w0 * top + th.w1 * bot);
    }
  }
}

template <typename T>
__global__ void k_adaptive_max(int64_t NC, int64_t H, int64_t W, int64_t OH, int64_t OW, const T *x,
                               T *y, int64_t *idx) {
  GRID_LOOP(i, NC * OH * OW) {
    int64_t ow = i % OW, oh = i / OW % OH, p = i / (OW * OH);
    int64_t h0 = cnn_adaptive_start(oh, H, OH), h1 = cnn_adaptive_end(oh, H, OH);
    int64_t w0 = cnn_adaptive_start(ow, W, OW), w1 = cnn_adaptive_end(ow, W, OW);
    const T *xp = x + p * H * W;
    double best = -INFINITY;
    int64_t arg = h0 * W + w0;
    bool nan = false;
    for (int64_t h = h0; h < h1 && !nan; h++)
      for (int64_t w = w0; w < w1 && !nan; w++) {
        double v = (double)xp[h * W + w];
        if (v > best || v != v) best = v, arg = h * W + w, nan = v != v;
      }
    y[i] = (T)best;
    if (idx) idx[i] = arg;
  }
}

template <typename T>
__global__ void k_adaptive_max_bwd(int64_t NC, int64_t HW, int64_t OHW, const T *dy,
                                   const int64_t *idx, T *dx) {
  GRID_LOOP(i, NC * OHW) atomicAdd(dx + i / OHW * HW + idx[i], dy[i]);
}

/* ---- launchers ------------------------------------------------------------------------ */

static int begin(const char *op, int dev, cnn_dtype dt) {
  if (dt != CNN_FLOAT32 && dt != CNN_FLOAT64) {
    gpu_core.set_error("%s: dtype %s is not supported on cuda", op, gpu_core.dtype_name(dt));
    return -1;
  }
  return gpu_device(op, dev);
}

static int zero(const char *op, void *p, int64_t n, cnn_dtype dt) {
  CUDA_CHECK(op, cudaMemsetAsync(p, 0, (size_t)n * gpu_dtype_size(dt), 0));
  return 0;
}

static int resize(bool bwd, int dev, cnn_dtype dt, const cnn_resize_shape *s, const void *in,
                  void *out) {
  const char *op = "interpolate";
  if (begin(op, dev, dt) || (bwd && zero(op, out, s->N * s->C * s->H * s->W, dt))) return -1;
  if (s->mode != CNN_RESIZE_NEAREST && s->mode != CNN_RESIZE_BILINEAR) {
    gpu_core.set_error("interpolate: unknown mode %d", s->mode);
    return -1;
  }
  int64_t n = s->N * s->C * s->OH * s->OW;
  if (!n || s->H < 1 || s->W < 1) return 0;
  if (dt == CNN_FLOAT32)
    k_resize<float><<<gpu_blocks(n), GPU_THREADS>>>(*s, bwd, (const float *)in, (float *)out);
  else
    k_resize<double><<<gpu_blocks(n), GPU_THREADS>>>(*s, bwd, (const double *)in, (double *)out);
  LAUNCH_CHECK(op);
  return 0;
}

static int resize_fwd(int dev, cnn_dtype dt, const cnn_resize_shape *s, const void *x, void *y) {
  return resize(false, dev, dt, s, x, y);
}
static int resize_bwd(int dev, cnn_dtype dt, const cnn_resize_shape *s, const void *dy, void *dx) {
  return resize(true, dev, dt, s, dy, dx);
}

static int adaptive_max_fwd(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                            int64_t OH, int64_t OW, const void *x, void *y, int64_t *idx) {
  const char *op = "adaptive_max_pool2d";
  if (begin(op, dev, dt)) return -1;
  int64_t n = N * C * OH * OW;
  if (!n || H < 1 || W < 1) return 0;
  if (dt == CNN_FLOAT32)
    k_adaptive_max<float>
        <<<gpu_blocks(n), GPU_THREADS>>>(N * C, H, W, OH, OW, (const float *)x, (float *)y, idx);
  else
    k_adaptive_max<double>
        <<<gpu_blocks(n), GPU_THREADS>>>(N * C, H, W, OH, OW, (const double *)x, (double *)y, idx);
  LAUNCH_CHECK(op);
  return 0;
}

static int adaptive_max_bwd(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                            int64_t OH, int64_t OW, const void *dy, const int64_t *idx, void *dx) {
  const char *op = "adaptive_max_pool2d";
  if (begin(op, dev, dt) || zero(op, dx, N * C * H * W, dt)) return -1;
  int64_t n = N * C * OH * OW;
  if (!n) return 0;
  if (dt == CNN_FLOAT32)
    k_adaptive_max_bwd<float><<<gpu_blocks(n), GPU_THREADS>>>(N * C, H * W, OH * OW,
                                                              (const float *)dy, idx, (float *)dx);
  else
    k_adaptive_max_bwd<double><<<gpu_blocks(n), GPU_THREADS>>>(
        N * C, H * W, OH * OW, (const double *)dy, idx, (double *)dx);
  LAUNCH_CHECK(op);
  return 0;
}

void gpu_resize_register(cnn_backend *be) {
  be->resize2d_forward = resize_fwd;
  be->resize2d_backward = resize_bwd;
  be->adaptive_max_pool2d_forward = adaptive_max_fwd;
  be->adaptive_max_pool2d_backward = adaptive_max_bwd;
}
