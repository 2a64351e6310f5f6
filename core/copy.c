/*
 * copy.c -- moving elements: fill, broadcast+cast copy, contiguous, clone,
 * dtype and device conversion, and single-element access.
 *
 * All loops walk the destination in row-major order with an odometer over
 * the shape, reading the source through broadcast strides (0 on broadcast
 * dimensions).  Fast paths: same dtype and both contiguous (a memcpy); the
 * common float32 <-> float64 and uint8 -> float32 contiguous casts; the
 * memcpy is the CPU backend's copy_d2d (threads from 1 MB, core/cpu/copy_bytes.c).
 * Autograd: copies made by contiguous/clone/to_dtype record a node whose
 * backward passes the gradient through (cast back to the input's dtype).
 * Devices: copies that touch a CUDA tensor go through the backend (one
 * dispatch point, copy_across_devices: host<->device transfers and the
 * device's strided copy/cast); fill_ on a device is the backend's fill.
 * A pinned CPU source may go to the device asynchronously
 * (cnn_to_device_async -> the backend's copy_h2d_async); pinned tensors
 * are made here too (cnn_empty_pinned, cnn_pin_memory: a copy whose
 * backward is copy_backward), over storage.c's pinned storages.
 */
#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "strided.h"
#include "tensor_internal.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- strides and offsets --------------------------------------------------- */

void cnn_broadcast_strides(const cnn_tensor *t, int ndim, const int64_t *shape, int64_t *strides) {
  (void)shape;
  cnn_strided_broadcast(ndim, t->ndim, t->shape, t->stride, strides);
}

int64_t cnn_offset_of(const cnn_tensor *t, int64_t i) {
  int64_t off = t->offset;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t n = t->shape[d];
    off += (i % n) * t->stride[d];
    i /= n;
  }
  return off;
}

/* ---- half precision conversion (round to nearest even) ---------------------- */

uint16_t cnn_float_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

float cnn_bf16_to_float(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t cnn_float_to_half(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000, absu = u & 0x7fffffff;
  if (absu > 0x7f800000) return (uint16_t)(sign | 0x7e00);  /* NaN */
  if (absu >= 0x477ff000) return (uint16_t)(sign | 0x7c00); /* overflow: inf */
  if (absu < 0x38800000) {                                  /* subnormal or 0 */
    float a;
    memcpy(&a, &absu, 4);
    return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f)); /* a / 2^-24 */
  }
  uint32_t mant = absu + 0xc8000fff + ((absu >> 13) & 1); /* rebias, round even */
  return (uint16_t)(sign | (mant >> 13));
}

float cnn_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
  if (e == 0) {
    float f = ldexpf((float)m, -24);
    return sign ? -f : f;
  }
  u = e == 31 ? (sign | 0x7f800000 | (m << 13)) : (sign | ((e + 112) << 23) | (m << 13));
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* ---- single elements --------------------------------------------------------- */

static int check_index(const char *op, const cnn_tensor *t, int64_t i) {
  int64_t n = cnn_tensor_numel(t);
  if (i >= 0 && i < n) return 0;
  char s[CNN_SHAPE_STR];
  cnn_set_error("%s: index %lld out of range for a tensor of %lld elements (%s)", op, (long long)i,
                (long long)n, cnn_tensor_shape_str(t, s));
  return -1;
}

double cnn_tensor_get(const cnn_tensor *t, int64_t i) {
  if (check_index("item", t, i)) return NAN;
  int64_t off = cnn_offset_of(t, i);
  if (t->storage->device.type == CNN_CPU) return cnn_load_double(t->dtype, t->storage->data, off);
  const cnn_backend *be = cnn_backend_get(t->storage->device.type);
  unsigned char tmp[8];
  size_t es = cnn_dtype_size(t->dtype);
  if (!be || be->copy_d2h(tmp, (char *)t->storage->data + off * es, es, t->storage->device.index))
    return NAN;
  return cnn_load_double(t->dtype, tmp, 0);
}

int cnn_tensor_set(cnn_tensor *t, int64_t i, double v) {
  if (check_index("set", t, i)) return -1;
  if (t->storage->device.type != CNN_CPU) {
    const cnn_backend *be = cnn_cuda_backend("set");
    unsigned char tmp[8];
    size_t es = cnn_dtype_size(t->dtype);
    cnn_store_double(t->dtype, tmp, 0, v);
    if (!be || be->copy_h2d((char *)t->storage->data + cnn_offset_of(t, i) * (int64_t)es, tmp, es,
                            t->storage->device.index))
      return -1;
    cnn_tensor_bump_version(t);
    return 0;
  }
  cnn_store_double(t->dtype, t->storage->data, cnn_offset_of(t, i), v);
  cnn_tensor_bump_version(t);
  return 0;
}

/* ---- the strided copy kernel (CPU) ----------------------------------------------- */

/* dst[i] = cast(src[bcast(i)]) over dst's shape, odometer style. */
static void copy_strided(cnn_tensor *dst, const cnn_tensor *src) {
  int nd = dst->ndim;
  int64_t sstride[CNN_MAX_DIMS], idx[CNN_MAX_DIMS] = {0};
  cnn_broadcast_strides(src, nd, dst->shape, sstride);
  int64_t n = cnn_tensor_numel(dst), doff = dst->offset, soff = src->offset;
  size_t es = cnn_dtype_size(dst->dtype);
  bool same = dst->dtype == src->dtype;
  for (int64_t k = 0; k < n; k++) {
    if (same)
      memcpy((char *)dst->storage->data + doff * es, (char *)src->storage->data + soff * es, es);
    else
      cnn_store_double(dst->dtype, dst->storage->data, doff,
                       cnn_load_double(src->dtype, src->storage->data, soff));
    for (int d = nd - 1; d >= 0; d--) {
      if (++idx[d] < dst->shape[d]) {
        doff += dst->stride[d], soff += sstride[d];
        break;
      }
      doff -= dst->stride[d] * (dst->shape[d] - 1);
      soff -= sstride[d] * (dst->shape[d] - 1);
      idx[d] = 0;
    }
  }
}

static bool fast_cast(cnn_tensor *dst, const cnn_tensor *src, int64_t n) {
  void *d = cnn_tensor_data(dst);
  const void *s = cnn_tensor_data(src);
  if (dst->dtype == src->dtype) { /* the CPU backend's copy (threads from 1 MB) */
    cnn_cpu_backend.copy_d2d(d, s, (size_t)n * cnn_dtype_size(dst->dtype), 0);
  } else if (dst->dtype == CNN_FLOAT64 && src->dtype == CNN_FLOAT32) {
    for (int64_t i = 0; i < n; i++) ((double *)d)[i] = ((const float *)s)[i];
  } else if (dst->dtype == CNN_FLOAT32 && src->dtype == CNN_FLOAT64) {
    for (int64_t i = 0; i < n; i++) ((float *)d)[i] = (float)((const double *)s)[i];
  } else if (dst->dtype == CNN_FLOAT32 && src->dtype == CNN_UINT8) {
    for (int64_t i = 0; i < n; i++) ((float *)d)[i] = ((const uint8_t *)s)[i];
  } else if (dst->dtype == CNN_FLOAT32 && src->dtype == CNN_INT64) {
    for (int64_t i = 0; i < n; i++) ((float *)d)[i] = (float)((const int64_t *)s)[i];
  } else {
    return false;
  }
  return true;
}

static int copy_across_devices(cnn_tensor *dst, cnn_tensor *src);

static int check_broadcast_to(const char *op, const cnn_tensor *dst, const cnn_tensor *src) {
  bool ok = src->ndim <= dst->ndim;
  for (int i = 0; ok && i < src->ndim; i++) {
    int64_t s = src->shape[src->ndim - 1 - i], d = dst->shape[dst->ndim - 1 - i];
    ok = s == d || s == 1;
  }
  if (ok) return 0;
  char a[CNN_SHAPE_STR], b[CNN_SHAPE_STR];
  cnn_set_error("%s: source of shape %s cannot be broadcast to %s", op,
                cnn_tensor_shape_str(src, a), cnn_tensor_shape_str(dst, b));
  return -1;
}

/* Whether t's dims taken in the order perm are laid out contiguously. */
static bool dense_in_order(const cnn_tensor *t, const int perm[4]) {
  int64_t expected = 1;
  for (int i = 3; i >= 0; i--) {
    int d = perm[i];
    if (t->shape[d] != 1 && t->stride[d] != expected) return false;
    expected *= t->shape[d];
  }
  return true;
}

/* A same-shape float copy between the NCHW and the channels-last layout,
 * seen as N images of C x L (L = H*W): the CPU backend's tiled transposes
 * on the threads, where the element loop above took 10 % of a ResNet-18
 * step.  Three ways to meet it: a contiguous N x C x H x W dst from a
 * channels-last src (x:contiguous() of a channels-last x), a
 * channels-last dst from a contiguous src, and a contiguous N x H x W x C
 * dst from the permuted view of an NCHW array (cnn_contiguous_channels_last's
 * copy).  Two contiguous tensors never get here (fast_cast took them). */
static bool copy_between_layouts(cnn_tensor *dst, const cnn_tensor *src) {
  static const int nchw[4] = {0, 1, 2, 3}, nhwc_of_nchw[4] = {0, 2, 3, 1},
                   nchw_of_nhwc[4] = {0, 3, 1, 2};
  if (dst->ndim != 4 || !cnn_same_shape(dst, src) || dst->dtype != src->dtype ||
      (dst->dtype != CNN_FLOAT32 && dst->dtype != CNN_FLOAT64) || !cnn_cpu_backend.copy_layout ||
      cnn_tensor_numel(dst) == 0)
    return false;
  const int64_t *sh = dst->shape;
  int64_t N = sh[0], C, L;
  int to_cl;
  if (dense_in_order(dst, nchw) && dense_in_order(src, nhwc_of_nchw))
    C = sh[1], L = sh[2] * sh[3], to_cl = 0; /* N x C x H x W from channels-last */
  else if (dense_in_order(dst, nhwc_of_nchw) && dense_in_order(src, nchw))
    C = sh[1], L = sh[2] * sh[3], to_cl = 1; /* channels-last from NCHW */
  else if (dense_in_order(dst, nchw) && dense_in_order(src, nchw_of_nhwc))
    C = sh[3], L = sh[1] * sh[2], to_cl = 1; /* N x H x W x C from NCHW's view */
  else
    return false;
  cnn_cpu_backend.copy_layout(dst->dtype, N, C, L, to_cl, cnn_tensor_data(src),
                              cnn_tensor_data(dst));
  return true;
}

/* Raw copy without autograd (dst must not overlap src in a harmful way). */
int cnn_copy_raw(cnn_tensor *dst, cnn_tensor *src) {
  if (check_broadcast_to("copy_", dst, src)) return -1;
  if (!cnn_device_equal(dst->storage->device, src->storage->device) ||
      dst->storage->device.type != CNN_CPU)
    return copy_across_devices(dst, src);
  int64_t n = cnn_tensor_numel(dst);
  if (cnn_same_shape(dst, src) && cnn_tensor_is_contiguous(dst) && cnn_tensor_is_contiguous(src) &&
      fast_cast(dst, src, n))
    return 0;
  /* two channels-last tensors of one shape: the same dense layout, so
   * their arrays correspond element for element */
  if (cnn_same_shape(dst, src) && cnn_prefers_channels_last(dst) &&
      cnn_prefers_channels_last(src) && fast_cast(dst, src, n))
    return 0;
  if (copy_between_layouts(dst, src)) return 0;
  copy_strided(dst, src);
  return 0;
}

/* Host <-> device transfers.  The device side of a transfer is contiguous
 * with the host side's shape and dtype; the host side absorbs casts and
 * broadcasts through a temporary, and a strided device source is first
 * made contiguous on the device.  Copies within one device (views, casts,
 * broadcasts) are the backend's strided copy. */
static int copy_on_device(const cnn_backend *be, cnn_tensor *dst, cnn_tensor *src) {
  cnn_device dd = dst->storage->device, sd = src->storage->device;
  if (!cnn_device_equal(dd, sd)) {
    char a[32], b[32];
    cnn_set_error("copy_: tensors on %s and %s (copy through the cpu)", cnn_device_str(dd, a),
                  cnn_device_str(sd, b));
    return -1;
  }
  if (!be->copy) return cnn_backend_unsupported("copy_");
  cnn_be_shape s = cnn_be_shape_of(dst->ndim, dst->shape);
  return be->copy(dd.index, &s, dst->dtype, cnn_be_arg_of(dst, &s), src->dtype,
                  cnn_be_arg_of(src, &s));
}

static int device_to_host(const cnn_backend *be, cnn_tensor *dst, cnn_tensor *src) {
  cnn_tensor *c = src, *tmp = NULL;
  int rc = 0;
  if (!cnn_tensor_is_contiguous(src)) { /* contiguous on the device first */
    c = cnn_empty(src->ndim, src->shape, src->dtype, src->storage->device);
    if (!c || copy_on_device(be, c, src)) return cnn_tensor_release(c), -1;
  }
  tmp = cnn_empty(c->ndim, c->shape, c->dtype, CNN_DEVICE_CPU);
  rc = tmp ? be->copy_d2h(tmp->storage->data, cnn_tensor_data(c), cnn_tensor_nbytes(c),
                          c->storage->device.index)
           : -1;
  if (rc == 0) rc = cnn_copy_raw(dst, tmp);
  cnn_tensor_release(tmp);
  if (c != src) cnn_tensor_release(c);
  return rc;
}

/* A contiguous source of dst's shape and dtype is sent from its own memory
 * (any other is staged in a contiguous host temporary first); with
 * non_blocking, a pinned one goes through the backend's asynchronous copy
 * (cnn_to_device_async), which the device orders before later ops. */
static int host_to_device(const cnn_backend *be, cnn_tensor *dst, cnn_tensor *src,
                          bool non_blocking) {
  cnn_device dd = dst->storage->device;
  if (cnn_tensor_numel(dst) == 0)
    return 0;                           /* (an empty tensor may look strided: no staging loop) */
  if (!cnn_tensor_is_contiguous(dst)) { /* stage on the device, then a strided copy */
    cnn_tensor *c = cnn_empty(dst->ndim, dst->shape, dst->dtype, dd);
    int rc = c ? host_to_device(be, c, src, non_blocking) : -1;
    if (rc == 0) rc = copy_on_device(be, dst, c);
    cnn_tensor_release(c);
    return rc;
  }
  if (src->dtype == dst->dtype && cnn_same_shape(dst, src) && cnn_tensor_is_contiguous(src)) {
    size_t n = cnn_tensor_nbytes(dst);
    if (non_blocking && src->storage->pinned && be->copy_h2d_async)
      return be->copy_h2d_async(cnn_tensor_data(dst), cnn_tensor_data(src), n, dd.index);
    return be->copy_h2d(cnn_tensor_data(dst), cnn_tensor_data(src), n, dd.index);
  }
  cnn_tensor *tmp = cnn_empty(dst->ndim, dst->shape, dst->dtype, CNN_DEVICE_CPU);
  if (!tmp) return -1;
  int rc = cnn_copy_raw(tmp, src);
  if (rc == 0)
    rc = be->copy_h2d(cnn_tensor_data(dst), tmp->storage->data, cnn_tensor_nbytes(tmp), dd.index);
  cnn_tensor_release(tmp);
  return rc;
}

static int copy_across_devices(cnn_tensor *dst, cnn_tensor *src) {
  cnn_device dd = dst->storage->device, sd = src->storage->device;
  const cnn_backend *be = cnn_cuda_backend("copy_");
  if (!be) return -1;
  if (dd.type != CNN_CPU && sd.type != CNN_CPU) return copy_on_device(be, dst, src);
  if (dd.type == CNN_CPU) return device_to_host(be, dst, src);
  return host_to_device(be, dst, src, false);
}

/* ---- in-place fill and copy ----------------------------------------------------- */

static int check_inplace(const char *op, cnn_tensor *t) {
  if (t->requires_grad && !t->grad_fn && cnn_grad_enabled()) {
    cnn_set_error("%s: a leaf tensor that requires grad cannot be modified in place "
                  "(use cnn.no_grad or detach())",
                  op);
    return -1;
  }
  return 0;
}

int cnn_fill_(cnn_tensor *t, double v) {
  if (check_inplace("fill_", t)) return -1;
  int64_t n = cnn_tensor_numel(t);
  cnn_tensor_bump_version(t);
  if (t->storage->device.type != CNN_CPU) { /* the backend's strided fill */
    const cnn_backend *be = cnn_cuda_backend("fill_");
    if (!be) return -1;
    if (!be->fill) return cnn_backend_unsupported("fill_");
    cnn_be_shape s = cnn_be_shape_of(t->ndim, t->shape);
    return be->fill(t->storage->device.index, &s, t->dtype, cnn_be_arg_of(t, &s), v);
  }
  if (cnn_tensor_is_contiguous(t)) {
    void *d = cnn_tensor_data(t);
    if (t->dtype == CNN_FLOAT32) {
      float f = (float)v;
      for (int64_t i = 0; i < n; i++) ((float *)d)[i] = f;
    } else if (v == 0) {
      memset(d, 0, cnn_tensor_nbytes(t));
    } else {
      for (int64_t i = 0; i < n; i++) cnn_store_double(t->dtype, d, i, v);
    }
    return 0;
  }
  for (int64_t i = 0; i < n; i++)
    cnn_store_double(t->dtype, t->storage->data, cnn_offset_of(t, i), v);
  return 0;
}

int cnn_copy_(cnn_tensor *dst, cnn_tensor *src) {
  if (check_inplace("copy_", dst)) return -1;
  cnn_tensor_bump_version(dst);
  return cnn_copy_raw(dst, src);
}

/* ---- copies that keep the graph ----------------------------------------------------- */

static int copy_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  gin[0] = cnn_grad_to_input(n, 0, g);
  return gin[0] ? 0 : -1;
}

/* A copy of t as dtype dt on dev, recorded as `op`: contiguous, or in t's
 * channels-last layout when keep_layout and t prefers it (PyTorch's
 * preserve_format for x:to(dtype)). */
static cnn_tensor *copy_as(const char *op, cnn_tensor *t, cnn_dtype dt, cnn_device dev,
                           bool keep_layout) {
  cnn_tensor *out = keep_layout && cnn_prefers_channels_last(t)
                        ? cnn_empty_channels_last(t->shape, dt, dev)
                        : cnn_empty(t->ndim, t->shape, dt, dev);
  if (!out) return NULL;
  if (cnn_copy_raw(out, t)) return cnn_tensor_release(out), NULL;
  if (cnn_dtype_is_float(dt)) cnn_autograd_record(out, op, copy_backward, 1, &t);
  return out;
}

cnn_tensor *cnn_contiguous(cnn_tensor *t) {
  if (cnn_tensor_is_contiguous(t)) return cnn_tensor_retain(t), t;
  return copy_as("ContiguousBackward", t, t->dtype, t->storage->device, false);
}

cnn_tensor *cnn_clone(cnn_tensor *t) {
  return copy_as("CloneBackward", t, t->dtype, t->storage->device, false);
}

cnn_tensor *cnn_to_dtype(cnn_tensor *t, cnn_dtype dt) {
  if (dt >= CNN_NDTYPES) return cnn_set_error("to: unknown dtype"), NULL;
  if (dt == t->dtype) return cnn_tensor_retain(t), t;
  return copy_as("ToCopyBackward", t, dt, t->storage->device, true);
}

cnn_tensor *cnn_to_device(cnn_tensor *t, cnn_device dev) {
  if (cnn_device_equal(dev, t->storage->device)) return cnn_tensor_retain(t), t;
  cnn_tensor *c = cnn_contiguous(t);
  if (!c) return NULL;
  cnn_tensor *out = copy_as("ToCopyBackward", c, t->dtype, dev, false);
  cnn_tensor_release(c);
  return out;
}

/* non_blocking (PyTorch's to(non_blocking=True)): only a pinned, contiguous
 * CPU tensor going to a CUDA device is copied asynchronously. */
cnn_tensor *cnn_to_device_async(cnn_tensor *t, cnn_device dev) {
  if (dev.type != CNN_CUDA || t->storage->device.type != CNN_CPU || !t->storage->pinned ||
      !cnn_tensor_is_contiguous(t))
    return cnn_to_device(t, dev);
  const cnn_backend *be = cnn_cuda_backend("to(cuda)");
  if (!be) return NULL;
  cnn_tensor *out = cnn_empty(t->ndim, t->shape, t->dtype, dev);
  if (!out) return NULL;
  if (host_to_device(be, out, t, true)) return cnn_tensor_release(out), NULL;
  if (cnn_dtype_is_float(t->dtype))
    cnn_autograd_record(out, "ToCopyBackward", copy_backward, 1, &t);
  return out;
}

int cnn_tensor_copy_to_host(const cnn_tensor *t, void *dst) {
  /* dst as a contiguous cpu tensor on a borrowed storage, both on the stack */
  cnn_storage host = {.refcount = 1,
                      .data = dst,
                      .nbytes = cnn_tensor_nbytes(t),
                      .device = CNN_DEVICE_CPU,
                      .borrowed = true};
  cnn_tensor out = {.refcount = 1, .storage = &host, .ndim = t->ndim, .dtype = t->dtype};
  memcpy(out.shape, t->shape, sizeof out.shape);
  cnn_set_contiguous_strides(&out);
  assert(cnn_tensor_valid(&out));
  return cnn_copy_raw(&out, (cnn_tensor *)t);
}

/* ---- pinned tensors --------------------------------------------------------------------- */

cnn_tensor *cnn_empty_pinned(int ndim, const int64_t *shape, cnn_dtype dt) {
  int64_t n = cnn_check_shape("pin_memory", ndim, shape);
  if (n < 0) return NULL;
  if (dt >= CNN_NDTYPES) return cnn_set_error("pin_memory: unknown dtype %d", (int)dt), NULL;
  cnn_storage *s = cnn_storage_new_pinned((size_t)n * cnn_dtype_size(dt));
  return s ? cnn_tensor_wrap(s, ndim, shape, dt) : NULL;
}

bool cnn_is_pinned(const cnn_tensor *t) { return t && t->storage && t->storage->pinned; }

/* a pinned copy; its gradient is the gradient itself (copy_backward) */
cnn_tensor *cnn_pin_memory(cnn_tensor *t) {
  if (cnn_is_pinned(t) && cnn_tensor_is_contiguous(t)) return cnn_tensor_retain(t), t;
  if (t->storage->device.type != CNN_CPU) {
    char d[32];
    cnn_set_error("pin_memory: the tensor is on %s; only cpu tensors can be pinned",
                  cnn_device_str(t->storage->device, d));
    return NULL;
  }
  cnn_tensor *out = cnn_empty_pinned(t->ndim, t->shape, t->dtype);
  if (!out) return NULL;
  if (cnn_copy_raw(out, t)) return cnn_tensor_release(out), NULL;
  if (cnn_dtype_is_float(t->dtype))
    cnn_autograd_record(out, "PinMemoryBackward", copy_backward, 1, &t);
  return out;
}
