/*
 * conv_pad.cu -- convolutions with asymmetric padding through cuDNN:
 * the input is copied into scratch memory with the extra zeros, cuDNN runs
 * the symmetric problem over the copy, and the input gradient is cropped
 * back (the plan and its index arithmetic: conv_plan.h, shared with the
 * fake device and the host tests).  Before, these went to the direct
 * kernel, whose weight gradient runs for seconds at real sizes.
 *
 * Elements are moved as raw bits of their size (2, 4 or 8 bytes): the
 * zeros of every float dtype are all-zero bits.  Scratch comes from the
 * caching allocator and is freed at once (one stream, gpu.h).
 */
#include "conv_plan.h"
#include "gpu.h"

/* xp[i] = x[source(i)] or 0 over the padded copy (total elements) */
template <typename U>
__global__ void k_pad(int64_t total, gpu_pad_plan p, int64_t h, int64_t w, const U *x, U *xp) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t src = gpu_pad_source(&p, h, w, i);
    xp[i] = src < 0 ? (U)0 : x[src];
  }
}

/* dx[i] = dxp[crop(i)] over the input's elements (total) */
template <typename U>
__global__ void k_crop(int64_t total, gpu_pad_plan p, int64_t h, int64_t w, const U *dxp, U *dx) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x)
    dx[i] = dxp[gpu_crop_source(&p, h, w, i)];
}

/* pad (crop = false: src = x, dst = the copy) or crop (src = the padded
 * gradient, dst = dx), by element size */
static int move(bool crop, cnn_dtype dt, const gpu_pad_plan *p, const cnn_conv_shape *s,
                const void *src, void *dst) {
  int64_t planes = s->N * s->C, total = planes * (crop ? s->H * s->W : p->H * p->W);
  if (!total) return 0;
  unsigned g = gpu_blocks(total);
  switch (gpu_dtype_size(dt)) {
  case 8:
    if (crop)
      k_crop<uint64_t>
          <<<g, GPU_THREADS>>>(total, *p, s->H, s->W, (const uint64_t *)src, (uint64_t *)dst);
    else
      k_pad<uint64_t>
          <<<g, GPU_THREADS>>>(total, *p, s->H, s->W, (const uint64_t *)src, (uint64_t *)dst);
    break;
  case 4:
    if (crop)
      k_crop<uint32_t>
          <<<g, GPU_THREADS>>>(total, *p, s->H, s->W, (const uint32_t *)src, (uint32_t *)dst);
    else
      k_pad<uint32_t>
          <<<g, GPU_THREADS>>>(total, *p, s->H, s->W, (const uint32_t *)src, (uint32_t *)dst);
    break;
  default:
    if (crop)
      k_crop<uint16_t>
          <<<g, GPU_THREADS>>>(total, *p, s->H, s->W, (const uint16_t *)src, (uint16_t *)dst);
    else
      k_pad<uint16_t>
          <<<g, GPU_THREADS>>>(total, *p, s->H, s->W, (const uint16_t *)src, (uint16_t *)dst);
    break;
  }
  LAUNCH_CHECK("conv2d");
  return 0;
}

int gpu_conv_padded(int dev, cnn_dtype dt, const cnn_conv_shape *s, int dir, const void *a,
                    const void *b, void *out) {
  cnn_conv_shape sym;
  gpu_pad_plan p;
  gpu_conv_pad_plan(s, &sym, &p);
  if (gpu_device("conv2d", dev)) return -1;
  size_t bytes = (size_t)(s->N * s->C * p.H * p.W) * gpu_dtype_size(dt);
  void *scratch = gpu_scratch("conv2d", bytes ? bytes : 1, dev);
  if (!scratch) return -1;
  int rc;
  if (dir == GPU_CONV_BWD_DATA) { /* dx over the padded size, then cropped */
    rc = gpu_cudnn_conv(dev, dt, &sym, dir, a, b, scratch);
    if (rc == 0) rc = move(true, dt, &p, s, scratch, out);
  } else { /* forward: a = x; weight gradient: b = x */
    const void *x = dir == GPU_CONV_FWD ? a : b;
    rc = move(false, dt, &p, s, x, scratch);
    if (rc == 0)
      rc = dir == GPU_CONV_FWD ? gpu_cudnn_conv(dev, dt, &sym, dir, scratch, b, out)
                               : gpu_cudnn_conv(dev, dt, &sym, dir, a, scratch, out);
  }
  gpu_free(scratch, dev);
  return rc;
}
