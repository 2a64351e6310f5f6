/*
 * elementwise.cu -- strided elementwise kernels: unary, binary (broadcast),
 * the unary derivatives, where, the strided copy/cast and fill.
 *
 * Design.  Core hands a shape and, per operand, element strides over it
 * (0 on broadcast dims; core/backend.h).  The launcher first coalesces the
 * iteration space exactly as the CPU iterator does (size-1 dims dropped,
 * dims contiguous for every operand merged), so same-shape contiguous
 * operands become one flat dimension and the kernels do no div/mod.  A
 * kernel runs one grid-stride loop; each element computes its operands'
 * offsets (row-major decomposition of the flat index) and applies the op
 * through a switch.  The per-element math is the CPU's: the same formulas
 * as core/ops/elementwise.c, and elementwise_math.h (host-and-device) for
 * sigmoid, gelu, elu, leaky_relu and relu, so the CPU tests cover them.
 *
 * Dtypes: float32/float64 compute in their own precision (the unary
 * derivatives in double, as the CPU); float16 (inference, issue 16) is
 * stored as __half and computed in float (loaded with __half2float, the
 * float formulas of elementwise_ops.h, stored with __float2half_rn); int64/uint8 in wrapping int64
 * arithmetic; comparisons write uint8.  Copies of equal dtypes move bits
 * (exact for int64 and NaN payloads); casts go through double, and
 * float16/bfloat16 use CUDA's round-to-nearest-even conversions (the CPU's
 * rounding).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <string.h>

#include "elementwise_ops.h"
#include "strided.h"
#include "gpu.h"

/* ---- iteration space --------------------------------------------------------------- */

static_assert(CNN_STRIDED_MAX_OPS >= 4 && CNN_STRIDED_MAX_DIMS == CNN_MAX_DIMS,
              "core/strided.h sizes the iteration space");

struct Space {
  int nd;
  int64_t n[CNN_MAX_DIMS];
};
struct Ptr {
  char *p;
  int64_t st[CNN_MAX_DIMS]; /* element strides */
};

/* Drop size-1 dims and merge dims contiguous for every operand: the CPU's
 * coalescing (core/strided.h), then the pointers of each operand. */
static void coalesce(const cnn_be_shape *in, const cnn_be_arg *args, int nops, Space *s,
                     Ptr *ptrs) {
  int64_t st[CNN_STRIDED_MAX_OPS][CNN_STRIDED_MAX_DIMS];
  for (int d = 0; d < in->ndim; d++) {
    s->n[d] = in->shape[d];
    for (int k = 0; k < nops; k++) st[k][d] = args[k].stride[d];
  }
  s->nd = cnn_strided_coalesce(in->ndim, s->n, nops, st);
  for (int k = 0; k < nops; k++) {
    ptrs[k].p = (char *)args[k].ptr;
    for (int d = 0; d < s->nd; d++) ptrs[k].st[d] = st[k][d];
  }
}

static int64_t space_numel(const Space &s) {
  int64_t n = 1;
  for (int d = 0; d < s.nd; d++) n *= s.n[d];
  return n;
}

__device__ __forceinline__ int64_t eoff(const Space &s, const Ptr &p, int64_t i) {
  if (s.nd == 1) return i * p.st[0];
  int64_t off = 0;
  for (int d = s.nd - 1; d >= 0; d--) {
    int64_t k = i % s.n[d];
    i /= s.n[d];
    off += k * p.st[d];
  }
  return off;
}

#define GRID_LOOP(i, n)                                                                            \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                        \
       i += (int64_t)gridDim.x * blockDim.x)

/* ---- loads and stores by dtype ----------------------------------------------------------- */

__device__ __forceinline__ double ld(cnn_dtype dt, const char *base, int64_t i) {
  switch (dt) {
  case CNN_FLOAT32: return ((const float *)base)[i];
  case CNN_FLOAT64: return ((const double *)base)[i];
  case CNN_INT64: return (double)((const int64_t *)base)[i];
  case CNN_UINT8: return ((const uint8_t *)base)[i];
  case CNN_FLOAT16: return __half2float(__ushort_as_half(((const unsigned short *)base)[i]));
  default: return __bfloat162float(__ushort_as_bfloat16(((const unsigned short *)base)[i]));
  }
}

__device__ __forceinline__ void st(cnn_dtype dt, char *base, int64_t i, double v) {
  switch (dt) {
  case CNN_FLOAT32: ((float *)base)[i] = (float)v; break;
  case CNN_FLOAT64: ((double *)base)[i] = v; break;
  case CNN_INT64: ((int64_t *)base)[i] = cnn_saturate_i64(v); break;
  case CNN_UINT8: ((uint8_t *)base)[i] = (uint8_t)cnn_saturate_i64(v); break;
  case CNN_FLOAT16:
    ((unsigned short *)base)[i] = __half_as_ushort(__float2half_rn((float)v));
    break;
  default: ((unsigned short *)base)[i] = __bfloat16_as_ushort(__float2bfloat16_rn((float)v)); break;
  }
}

__device__ __forceinline__ int64_t ld_int(cnn_dtype dt, const char *base, int64_t i) {
  return dt == CNN_UINT8 ? ((const uint8_t *)base)[i] : ((const int64_t *)base)[i];
}
__device__ __forceinline__ void st_int(cnn_dtype dt, char *base, int64_t i, int64_t v) {
  if (dt == CNN_UINT8)
    ((uint8_t *)base)[i] = (uint8_t)v;
  else
    ((int64_t *)base)[i] = v;
}

/* ---- unary math (the CPU's formulas) ------------------------------------------------------- */

/* ---- binary math ------------------------------------------------------------------------------ */

template <typename T> __device__ __forceinline__ T bin_float(int op, T a, T b) {
  if (sizeof(T) == 4) return (T)cnn_ew_binary_f32(op, (float)a, (float)b);
  return (T)cnn_ew_binary_f64(op, (double)a, (double)b);
}
/* float16: the float formula over widened operands, rounded once */
template <> __device__ __forceinline__ __half bin_float<__half>(int op, __half a, __half b) {
  return __float2half_rn(cnn_ew_binary_f32(op, __half2float(a), __half2float(b)));
}

/* ---- kernels ----------------------------------------------------------------------------------- */

template <typename T> __device__ __forceinline__ T un_float(int op, T v, double p0, double p1) {
  if (sizeof(T) == 4) return (T)cnn_ew_unary_f32(op, (float)v, (float)p0, (float)p1);
  return (T)cnn_ew_unary_f64(op, (double)v, p0, p1);
}
template <>
__device__ __forceinline__ __half un_float<__half>(int op, __half v, double p0, double p1) {
  return __float2half_rn(cnn_ew_unary_f32(op, __half2float(v), (float)p0, (float)p1));
}

template <typename T>
__global__ void k_unary_float(int op, Space s, int64_t n, Ptr o, Ptr x, double p0, double p1) {
  GRID_LOOP(i, n) {
    T v = ((const T *)x.p)[eoff(s, x, i)];
    ((T *)o.p)[eoff(s, o, i)] = un_float<T>(op, v, p0, p1);
  }
}

__global__ void k_unary_int(int op, cnn_dtype dt, Space s, int64_t n, Ptr o, Ptr x, double p0,
                            double p1) {
  GRID_LOOP(i, n)
  st_int(dt, o.p, eoff(s, o, i), cnn_ew_unary_i64(op, ld_int(dt, x.p, eoff(s, x, i)), p0, p1));
}

template <typename T>
__global__ void k_binary_float(int op, Space s, int64_t n, Ptr o, Ptr a, Ptr b) {
  GRID_LOOP(i, n) {
    T r = bin_float<T>(op, ((const T *)a.p)[eoff(s, a, i)], ((const T *)b.p)[eoff(s, b, i)]);
    ((T *)o.p)[eoff(s, o, i)] = r;
  }
}

__global__ void k_binary_int(int op, cnn_dtype dt, Space s, int64_t n, Ptr o, Ptr a, Ptr b) {
  GRID_LOOP(i, n) {
    int64_t r =
        cnn_ew_binary_i64(op, ld_int(dt, a.p, eoff(s, a, i)), ld_int(dt, b.p, eoff(s, b, i)));
    st_int(dt, o.p, eoff(s, o, i), r);
  }
}

__global__ void k_compare(int op, cnn_dtype dt, Space s, int64_t n, Ptr o, Ptr a, Ptr b) {
  GRID_LOOP(i, n) {
    int c;
    if (dt == CNN_FLOAT32 || dt == CNN_FLOAT64 || dt == CNN_FLOAT16) {
      double x = ld(dt, a.p, eoff(s, a, i)), y = ld(dt, b.p, eoff(s, b, i));
      c = x < y ? -1 : x > y ? 1 : x == y ? 0 : 2;
    } else {
      int64_t x = ld_int(dt, a.p, eoff(s, a, i)), y = ld_int(dt, b.p, eoff(s, b, i));
      c = x < y ? -1 : x > y ? 1 : 0;
    }
    ((uint8_t *)o.p)[eoff(s, o, i)] = cnn_ew_compare(op, c);
  }
}

template <typename T>
__global__ void k_unary_grad(int op, Space s, int64_t n, Ptr o, Ptr g, Ptr v, double p0,
                             double p1) {
  GRID_LOOP(i, n) {
    double gv = ((const T *)g.p)[eoff(s, g, i)], vv = ((const T *)v.p)[eoff(s, v, i)];
    ((T *)o.p)[eoff(s, o, i)] = (T)(gv * cnn_ew_unary_deriv(op, vv, p0, p1));
  }
}

template <typename E>
__global__ void k_where(cnn_dtype cdt, Space s, int64_t n, Ptr o, Ptr c, Ptr a, Ptr b) {
  GRID_LOOP(i, n) {
    int64_t co = eoff(s, c, i);
    bool t = cdt == CNN_UINT8   ? ((const uint8_t *)c.p)[co] != 0
             : cdt == CNN_INT64 ? ((const int64_t *)c.p)[co] != 0
                                : ld(cdt, c.p, co) != 0;
    ((E *)o.p)[eoff(s, o, i)] =
        t ? ((const E *)a.p)[eoff(s, a, i)] : ((const E *)b.p)[eoff(s, b, i)];
  }
}

template <typename E> __global__ void k_copy_same(Space s, int64_t n, Ptr d, Ptr x) {
  GRID_LOOP(i, n)((E *)d.p)[eoff(s, d, i)] = ((const E *)x.p)[eoff(s, x, i)];
}

__global__ void k_copy_cast(cnn_dtype ddt, cnn_dtype sdt, Space s, int64_t n, Ptr d, Ptr x) {
  GRID_LOOP(i, n) {
    int64_t so = eoff(s, x, i), dof = eoff(s, d, i);
    if (sdt == CNN_INT64 && ddt == CNN_UINT8) /* exact, wrapping as the CPU's (uint8_t)int64 */
      ((uint8_t *)d.p)[dof] = (uint8_t)((const int64_t *)x.p)[so];
    else if (sdt == CNN_UINT8 && ddt == CNN_INT64)
      ((int64_t *)d.p)[dof] = ((const uint8_t *)x.p)[so];
    else
      st(ddt, d.p, dof, ld(sdt, x.p, so));
  }
}

template <typename E> __global__ void k_fill(Space s, int64_t n, Ptr d, E v) {
  GRID_LOOP(i, n)((E *)d.p)[eoff(s, d, i)] = v;
}

/* ---- launchers ---------------------------------------------------------------------------------- */

static bool is_float(cnn_dtype dt) { return dt == CNN_FLOAT32 || dt == CNN_FLOAT64; }
/* unary and binary ops also run on float16 (computed in float) */
static bool is_float_or_half(cnn_dtype dt) { return is_float(dt) || dt == CNN_FLOAT16; }
static bool is_int(cnn_dtype dt) { return dt == CNN_INT64 || dt == CNN_UINT8; }

static int bad_dtype(const char *op, cnn_dtype dt) {
  gpu_core.set_error("%s: dtype %s is not supported on cuda", op, gpu_core.dtype_name(dt));
  return -1;
}

static int ew_unary(int dev, cnn_unary_op op, cnn_dtype dt, const cnn_be_shape *shape,
                    cnn_be_arg out, cnn_be_arg x, double p0, double p1) {
  const char *name = gpu_core.unary_name(op);
  if (!is_float_or_half(dt) && !is_int(dt)) return bad_dtype(name, dt);
  if (gpu_device(name, dev)) return -1;
  Space s;
  Ptr p[2];
  cnn_be_arg a[2] = {out, x};
  coalesce(shape, a, 2, &s, p);
  int64_t n = space_numel(s);
  if (!n) return 0;
  if (dt == CNN_FLOAT32)
    k_unary_float<float><<<gpu_blocks(n), GPU_THREADS>>>(op, s, n, p[0], p[1], p0, p1);
  else if (dt == CNN_FLOAT64)
    k_unary_float<double><<<gpu_blocks(n), GPU_THREADS>>>(op, s, n, p[0], p[1], p0, p1);
  else if (dt == CNN_FLOAT16)
    k_unary_float<__half><<<gpu_blocks(n), GPU_THREADS>>>(op, s, n, p[0], p[1], p0, p1);
  else
    k_unary_int<<<gpu_blocks(n), GPU_THREADS>>>(op, dt, s, n, p[0], p[1], p0, p1);
  LAUNCH_CHECK(name);
  return 0;
}

int gpu_unary_inplace(int dev, cnn_unary_op op, cnn_dtype dt, int64_t n, void *y, double p0,
                      double p1) {
  cnn_be_shape shape = {1, {n}};
  cnn_be_arg a = {y, {1}};
  return ew_unary(dev, op, dt, &shape, a, a, p0, p1);
}

static int ew_binary(int dev, cnn_binary_op op, cnn_dtype dt, const cnn_be_shape *shape,
                     cnn_be_arg out, cnn_be_arg a, cnn_be_arg b) {
  const char *name = gpu_core.binary_name(op);
  if (!is_float_or_half(dt) && !is_int(dt)) return bad_dtype(name, dt);
  if (gpu_device(name, dev)) return -1;
  Space s;
  Ptr p[3];
  cnn_be_arg args[3] = {out, a, b};
  coalesce(shape, args, 3, &s, p);
  int64_t n = space_numel(s);
  if (!n) return 0;
  unsigned g = gpu_blocks(n);
  if (op >= CNN_OP_EQ)
    k_compare<<<g, GPU_THREADS>>>(op, dt, s, n, p[0], p[1], p[2]);
  else if (dt == CNN_FLOAT32)
    k_binary_float<float><<<g, GPU_THREADS>>>(op, s, n, p[0], p[1], p[2]);
  else if (dt == CNN_FLOAT64)
    k_binary_float<double><<<g, GPU_THREADS>>>(op, s, n, p[0], p[1], p[2]);
  else if (dt == CNN_FLOAT16)
    k_binary_float<__half><<<g, GPU_THREADS>>>(op, s, n, p[0], p[1], p[2]);
  else
    k_binary_int<<<g, GPU_THREADS>>>(op, dt, s, n, p[0], p[1], p[2]);
  LAUNCH_CHECK(name);
  return 0;
}

static int ew_unary_grad(int dev, cnn_unary_op op, cnn_dtype dt, const cnn_be_shape *shape,
                         cnn_be_arg out, cnn_be_arg g, cnn_be_arg v, double p0, double p1) {
  const char *name = gpu_core.unary_name(op);
  if (!is_float(dt)) return bad_dtype(name, dt);
  if (gpu_device(name, dev)) return -1;
  Space s;
  Ptr p[3];
  cnn_be_arg args[3] = {out, g, v};
  coalesce(shape, args, 3, &s, p);
  int64_t n = space_numel(s);
  if (!n) return 0;
  if (dt == CNN_FLOAT32)
    k_unary_grad<float><<<gpu_blocks(n), GPU_THREADS>>>(op, s, n, p[0], p[1], p[2], p0, p1);
  else
    k_unary_grad<double><<<gpu_blocks(n), GPU_THREADS>>>(op, s, n, p[0], p[1], p[2], p0, p1);
  LAUNCH_CHECK(name);
  return 0;
}

static int ew_where(int dev, cnn_dtype cdt, cnn_dtype dt, const cnn_be_shape *shape, cnn_be_arg out,
                    cnn_be_arg cond, cnn_be_arg a, cnn_be_arg b) {
  if (gpu_device("where", dev)) return -1;
  Space s;
  Ptr p[4];
  cnn_be_arg args[4] = {out, cond, a, b};
  coalesce(shape, args, 4, &s, p);
  int64_t n = space_numel(s);
  if (!n) return 0;
  unsigned g = gpu_blocks(n);
  switch (gpu_dtype_size(dt)) {
  case 1: k_where<uint8_t><<<g, GPU_THREADS>>>(cdt, s, n, p[0], p[1], p[2], p[3]); break;
  case 2: k_where<uint16_t><<<g, GPU_THREADS>>>(cdt, s, n, p[0], p[1], p[2], p[3]); break;
  case 4: k_where<uint32_t><<<g, GPU_THREADS>>>(cdt, s, n, p[0], p[1], p[2], p[3]); break;
  default: k_where<uint64_t><<<g, GPU_THREADS>>>(cdt, s, n, p[0], p[1], p[2], p[3]); break;
  }
  LAUNCH_CHECK("where");
  return 0;
}

static int ew_copy(int dev, const cnn_be_shape *shape, cnn_dtype ddt, cnn_be_arg dst, cnn_dtype sdt,
                   cnn_be_arg src) {
  if (gpu_device("copy_", dev)) return -1;
  Space s;
  Ptr p[2];
  cnn_be_arg args[2] = {dst, src};
  coalesce(shape, args, 2, &s, p);
  int64_t n = space_numel(s);
  if (!n) return 0;
  unsigned g = gpu_blocks(n);
  if (ddt != sdt) {
    k_copy_cast<<<g, GPU_THREADS>>>(ddt, sdt, s, n, p[0], p[1]);
  } else if (s.nd == 1 && p[0].st[0] == 1 && p[1].st[0] == 1) {
    CUDA_CHECK("copy_", cudaMemcpyAsync(p[0].p, p[1].p, (size_t)n * gpu_dtype_size(ddt),
                                        cudaMemcpyDeviceToDevice, 0));
    return 0;
  } else {
    switch (gpu_dtype_size(ddt)) {
    case 1: k_copy_same<uint8_t><<<g, GPU_THREADS>>>(s, n, p[0], p[1]); break;
    case 2: k_copy_same<uint16_t><<<g, GPU_THREADS>>>(s, n, p[0], p[1]); break;
    case 4: k_copy_same<uint32_t><<<g, GPU_THREADS>>>(s, n, p[0], p[1]); break;
    default: k_copy_same<uint64_t><<<g, GPU_THREADS>>>(s, n, p[0], p[1]); break;
    }
  }
  LAUNCH_CHECK("copy_");
  return 0;
}

/* the bits of v in dtype dt, as the CPU's cnn_store_double writes them */
static uint64_t fill_bits(cnn_dtype dt, double v, size_t *es) {
  *es = gpu_dtype_size(dt);
  uint64_t bits = 0;
  if (dt == CNN_FLOAT32) {
    float f = (float)v;
    memcpy(&bits, &f, 4);
  } else if (dt == CNN_FLOAT64) {
    memcpy(&bits, &v, 8);
  } else if (dt == CNN_INT64 || dt == CNN_UINT8) {
    int64_t i = v != v                        ? 0
                : v >= 9.2233720368547758e18  ? INT64_MAX
                : v <= -9.2233720368547758e18 ? INT64_MIN
                                              : (int64_t)v;
    if (dt == CNN_UINT8)
      bits = (uint8_t)i;
    else
      memcpy(&bits, &i, 8);
  } else if (dt == CNN_FLOAT16) {
    bits = __half_as_ushort(__float2half_rn((float)v));
  } else {
    bits = __bfloat16_as_ushort(__float2bfloat16_rn((float)v));
  }
  return bits;
}

static int ew_fill(int dev, const cnn_be_shape *shape, cnn_dtype dt, cnn_be_arg dst, double v) {
  if (gpu_device("fill_", dev)) return -1;
  Space s;
  Ptr p[1];
  coalesce(shape, &dst, 1, &s, p);
  int64_t n = space_numel(s);
  if (!n) return 0;
  size_t es;
  uint64_t bits = fill_bits(dt, v, &es);
  unsigned g = gpu_blocks(n);
  if (bits == 0 && s.nd == 1 && p[0].st[0] == 1) {
    CUDA_CHECK("fill_", cudaMemsetAsync(p[0].p, 0, (size_t)n * es, 0));
    return 0;
  }
  switch (es) {
  case 1: k_fill<uint8_t><<<g, GPU_THREADS>>>(s, n, p[0], (uint8_t)bits); break;
  case 2: k_fill<uint16_t><<<g, GPU_THREADS>>>(s, n, p[0], (uint16_t)bits); break;
  case 4: k_fill<uint32_t><<<g, GPU_THREADS>>>(s, n, p[0], (uint32_t)bits); break;
  default: k_fill<uint64_t><<<g, GPU_THREADS>>>(s, n, p[0], bits); break;
  }
  LAUNCH_CHECK("fill_");
  return 0;
}

void gpu_elementwise_register(cnn_backend *be) {
  be->unary = ew_unary;
  be->binary = ew_binary;
  be->unary_grad = ew_unary_grad;
  be->where = ew_where;
  be->copy = ew_copy;
  be->fill = ew_fill;
}
