/*
 * scan.cu -- the cumulative entries of the CUDA backend: running sums and
 * products along one dimension (cumsum, cumprod, the reversed sum of
 * cumsum's backward) and cumprod's backward.
 *
 * x is outer x D x inner, contiguous.  One thread per row (outer*inner
 * rows) walks its D elements with stride inner, accumulating in double
 * for float32/float64 (as the CPU) and in 64-bit unsigned arithmetic for
 * int64 (wrapping, as the CPU).  Simple and exact; a row of millions runs
 * on one thread, where a block-wide scan would be the next step.
 * cumprod's backward is the CPU's division-free recurrence (backend.h).
 */
#include "gpu.h"

#define GRID_LOOP(i, n)                                                                            \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                        \
       i += (int64_t)gridDim.x * blockDim.x)

template <typename T> struct scan_acc { typedef double type; };
template <> struct scan_acc<int64_t> { typedef unsigned long long type; };

template <typename T>
__global__ void k_cumulate(int64_t rows, int64_t D, int64_t inner, bool prod, bool rev, const T *x,
                           T *y) {
  typedef typename scan_acc<T>::type A;
  GRID_LOOP(r, rows) {
    int64_t base = (r / inner) * D * inner + r % inner;
    A acc = prod ? 1 : 0;
    for (int64_t s = 0; s < D; s++) {
      int64_t i = base + (rev ? D - 1 - s : s) * inner;
      acc = prod ? acc * (A)x[i] : acc + (A)x[i];
      y[i] = (T)acc;
    }
  }
}

/* dx[d] = prod_{i<d} x[i] * S[d]; S[D-1] = g[D-1], S[d] = g[d] + x[d+1] S[d+1] */
template <typename T>
__global__ void k_cumprod_backward(int64_t rows, int64_t D, int64_t inner, const T *x, const T *g,
                                   T *dx) {
  GRID_LOOP(r, rows) {
    int64_t base = (r / inner) * D * inner + r % inner;
    double s = 0, before = 1;
    for (int64_t d = D - 1; d >= 0; d--) { /* dx holds S for now */
      int64_t i = base + d * inner;
      s = (double)g[i] + (d + 1 < D ? (double)x[i + inner] * s : 0.0);
      dx[i] = (T)s;
    }
    for (int64_t d = 0; d < D; d++) {
      int64_t i = base + d * inner;
      dx[i] = (T)(before * (double)dx[i]);
      before *= (double)x[i];
    }
  }
}

static int cumulate(int dev, cnn_dtype dt, bool prod, bool reverse, int64_t outer, int64_t D,
                    int64_t inner, const void *x, void *y) {
  const char *op = prod ? "cumprod" : "cumsum";
  int64_t rows = outer * inner;
  if (gpu_device(op, dev)) return -1;
  if (rows * D == 0) return 0;
  unsigned g = gpu_blocks(rows);
  switch (dt) {
  case CNN_FLOAT32:
    k_cumulate<float>
        <<<g, GPU_THREADS>>>(rows, D, inner, prod, reverse, (const float *)x, (float *)y);
    break;
  case CNN_FLOAT64:
    k_cumulate<double>
        <<<g, GPU_THREADS>>>(rows, D, inner, prod, reverse, (const double *)x, (double *)y);
    break;
  case CNN_INT64:
    k_cumulate<int64_t>
        <<<g, GPU_THREADS>>>(rows, D, inner, prod, reverse, (const int64_t *)x, (int64_t *)y);
    break;
  default:
    gpu_core.set_error("%s: dtype %s is not supported on cuda", op, gpu_core.dtype_name(dt));
    return -1;
  }
  LAUNCH_CHECK(op);
  return 0;
}

static int cumprod_backward(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner,
                            const void *x, const void *g, void *dx) {
  int64_t rows = outer * inner;
  if (dt != CNN_FLOAT32 && dt != CNN_FLOAT64) {
    gpu_core.set_error("cumprod: dtype %s has no gradient", gpu_core.dtype_name(dt));
    return -1;
  }
  if (gpu_device("cumprod", dev)) return -1;
  if (rows * D == 0) return 0;
  if (dt == CNN_FLOAT32)
    k_cumprod_backward<float><<<gpu_blocks(rows), GPU_THREADS>>>(rows, D, inner, (const float *)x,
                                                                 (const float *)g, (float *)dx);
  else
    k_cumprod_backward<double><<<gpu_blocks(rows), GPU_THREADS>>>(rows, D, inner, (const double *)x,
                                                                  (const double *)g, (double *)dx);
  LAUNCH_CHECK("cumprod");
  return 0;
}

void gpu_scan_register(cnn_backend *be) {
  be->cumulate = cumulate;
  be->cumprod_backward = cumprod_backward;
}
