/*
 * memory_format.c -- the channels-last layout of 4-d tensors (PyTorch's
 * torch.channels_last): facts, allocation and conversion.
 *
 * A channels-last tensor keeps its N x C x H x W shape and indexing; only
 * its strides change, to (H*W*C, 1, W*C, C): the C values of a pixel lie
 * next to each other.  Every op reads such a tensor correctly through its
 * strides (or a contiguous copy); the ops that run it natively where the
 * backend has the `channels_last` flag (the CPU) -- oneDNN's convolutions
 * (nhwc, no reorders into blocked layouts), batch norm over the rows of an
 * (N*H*W) x C matrix, max pooling, the global average pool -- and the
 * elementwise ops (in memory order, any backend) also write their outputs
 * (and their inputs' gradients) channels-last, so a network fed a
 * channels-last image stays in it, as PyTorch's do.
 *
 * A tensor with C = 1 or H = W = 1 is both contiguous and channels-last;
 * the ops treat it as contiguous (cnn_prefers_channels_last is false).
 * Sizes of 1 do not constrain their strides (PyTorch's rule).
 */
#include "backend.h"
#include "cnn.h"
#include "ops/ops_internal.h"
#include "tensor_internal.h"

#include <string.h>

bool cnn_tensor_is_channels_last(const cnn_tensor *t) {
  if (t->ndim != 4) return false;
  if (cnn_tensor_numel(t) == 0) return true;
  static const int inner_to_outer[4] = {1, 3, 2, 0}; /* C, W, H, N */
  int64_t expected = 1;
  for (int i = 0; i < 4; i++) {
    int d = inner_to_outer[i];
    if (t->shape[d] != 1 && t->stride[d] != expected) return false;
    expected *= t->shape[d];
  }
  return true;
}

bool cnn_prefers_channels_last(const cnn_tensor *t) {
  return t->ndim == 4 && cnn_tensor_is_channels_last(t) && !cnn_tensor_is_contiguous(t);
}

cnn_tensor *cnn_empty_channels_last(const int64_t shape[4], cnn_dtype dt, cnn_device dev) {
  cnn_tensor *t = cnn_empty(4, shape, dt, dev);
  if (!t) return NULL;
  int64_t C = shape[1], W = shape[3], H = shape[2];
  t->stride[0] = H * W * C, t->stride[1] = 1, t->stride[2] = W * C, t->stride[3] = C;
  return t;
}

cnn_tensor *cnn_empty_like_layout(const cnn_tensor *t, cnn_dtype dt) {
  if (cnn_prefers_channels_last(t))
    return cnn_empty_channels_last(t->shape, dt, cnn_tensor_device(t));
  return cnn_empty(t->ndim, t->shape, dt, cnn_tensor_device(t));
}

/* copy(t's NHWC view) viewed back as N x C x H x W: a channels-last copy
 * of t (permutes and copy record autograd).  copy is cnn_contiguous (a
 * transposing copy of an NCHW t) or cnn_clone (a plain copy of a
 * channels-last t, whose NHWC view is contiguous). */
static cnn_tensor *through_nhwc(cnn_tensor *t, cnn_tensor *(*copy)(cnn_tensor *)) {
  cnn_tensor *nhwc = cnn_permute(t, (const int[]){0, 2, 3, 1});
  cnn_tensor *dense = nhwc ? copy(nhwc) : NULL;
  cnn_tensor *r = dense ? cnn_permute(dense, (const int[]){0, 3, 1, 2}) : NULL;
  cnn_tensor_release(nhwc), cnn_tensor_release(dense);
  return r;
}

cnn_tensor *cnn_contiguous_channels_last(cnn_tensor *t) {
  if (t->ndim != 4) {
    char s[CNN_SHAPE_STR];
    cnn_set_error("contiguous: channels_last needs a 4-d tensor (N x C x H x W), got %s",
                  cnn_tensor_shape_str(t, s));
    return NULL;
  }
  if (cnn_tensor_is_channels_last(t)) {
    cnn_tensor_retain(t);
    return t;
  }
  return through_nhwc(t, cnn_contiguous);
}

cnn_tensor *cnn_contiguous_like(cnn_tensor *t, const cnn_tensor *layout) {
  if (t->ndim == 4 && cnn_prefers_channels_last(layout)) return cnn_contiguous_channels_last(t);
  return cnn_contiguous(t);
}

cnn_tensor *cnn_clone_like_layout(cnn_tensor *t) {
  return cnn_prefers_channels_last(t) ? through_nhwc(t, cnn_clone) : cnn_clone(t);
}

bool cnn_runs_channels_last(const cnn_tensor *x, const char *op) {
  if (!cnn_prefers_channels_last(x)) return false;
  const cnn_backend *be = cnn_backend_of(x, op);
  return be && be->channels_last;
}
