/*
 * nn_resize.c -- interpolate (nearest, bilinear) and adaptive_max_pool2d on
 * N x C x H x W tensors: validation, output allocation, the backend call
 * and the autograd node.
 *
 * interpolate's geometry (cnn_resize_shape, core/resize_math.h) carries the
 * user's scale factors: PyTorch computes source coordinates with
 * 1/scale_factor when one was given (and recompute_scale_factor is not
 * set), with in/out otherwise; the binding decides which and passes 0 for
 * "from the sizes".  The node saves only the geometry (backward scatters dy
 * through the same taps).  adaptive_max_pool2d saves the argmax indices
 * (computed only when backward will need them or the caller asks).
 */
#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "ops_internal.h"
#include "tensor_internal.h"

#define MAX_SIDE ((int64_t)1 << 24)

static int check_out_size(const char *op, const cnn_tensor *x, int64_t oh, int64_t ow) {
  char a[CNN_SHAPE_STR];
  if (oh >= 1 && ow >= 1 && oh <= MAX_SIDE && ow <= MAX_SIDE && x->shape[2] >= 1 &&
      x->shape[3] >= 1)
    return 0;
  cnn_set_error("%s: input %s and output size %lldx%lld must be positive (at most %lld per side)",
                op, cnn_tensor_shape_str(x, a), (long long)oh, (long long)ow, (long long)MAX_SIDE);
  return -1;
}

/* ---- interpolate -------------------------------------------------------------------------- */

static int resize_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *dy = cnn_contiguous(g);
  if (!dy) return -1;
  gin[0] = cnn_empty(n->in_ndim[0], n->in_shape[0], g->dtype, cnn_tensor_device(g));
  int rc = gin[0] ? CNN_TENSOR_CALL(dy, "interpolate", resize2d_backward, cnn_backend_dev(dy),
                                    dy->dtype, (const cnn_resize_shape *)n->geometry,
                                    cnn_tensor_data(dy), cnn_tensor_data(gin[0]))
                  : -1;
  cnn_tensor_release(dy);
  return rc;
}

cnn_tensor *cnn_interpolate(cnn_tensor *x, int64_t oh, int64_t ow, int mode, bool align_corners,
                            double scale_h, double scale_w) {
  if (cnn_check_image_input("interpolate", x, false) || check_out_size("interpolate", x, oh, ow))
    return NULL;
  if (mode != CNN_RESIZE_NEAREST && mode != CNN_RESIZE_BILINEAR) {
    cnn_set_error("interpolate: unknown mode %d (0 nearest, 1 bilinear)", mode);
    return NULL;
  }
  if (!(scale_h >= 0 && scale_w >= 0 && scale_h < 1e300 && scale_w < 1e300)) {
    cnn_set_error("interpolate: scale factors must be positive, got %g and %g", scale_h, scale_w);
    return NULL;
  }
  cnn_resize_shape s = {
      x->shape[0], x->shape[1], x->shape[2], x->shape[3],
      oh,          ow,          mode,        align_corners && mode == CNN_RESIZE_BILINEAR,
      scale_h,     scale_w};
  int64_t shape[4] = {s.N, s.C, oh, ow};
  cnn_tensor *xc = cnn_contiguous(x);
  cnn_tensor *y = xc ? cnn_empty(4, shape, x->dtype, cnn_tensor_device(x)) : NULL;
  if (y && CNN_TENSOR_CALL(x, "interpolate", resize2d_forward, cnn_backend_dev(x), x->dtype, &s,
                           cnn_tensor_data(xc), cnn_tensor_data(y)))
    cnn_tensor_release(y), y = NULL;
  cnn_node *n =
      y ? cnn_autograd_record(y, mode ? "UpsampleBilinear2DBackward" : "UpsampleNearest2DBackward",
                              resize_backward, 1, &x)
        : NULL;
  if (n) cnn_node_set_geometry(n, &s, sizeof s);
  cnn_tensor_release(xc);
  return y;
}

/* ---- adaptive max pooling ------------------------------------------------------------------- */

static int adaptive_max_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *idx = cnn_node_saved(n, 0), *dy = cnn_contiguous(g);
  if (!idx || !dy) return cnn_tensor_release(dy), -1;
  const int64_t *in = n->in_shape[0];
  gin[0] = cnn_empty(n->in_ndim[0], in, g->dtype, cnn_tensor_device(g));
  int rc = gin[0] ? CNN_TENSOR_CALL(dy, "adaptive_max_pool2d", adaptive_max_pool2d_backward,
                                    cnn_backend_dev(dy), dy->dtype, in[0], in[1], in[2], in[3],
                                    g->shape[2], g->shape[3], cnn_tensor_data(dy),
                                    cnn_tensor_data(idx), cnn_tensor_data(gin[0]))
                  : -1;
  cnn_tensor_release(dy);
  return rc;
}

cnn_tensor *cnn_adaptive_max_pool2d(cnn_tensor *x, int64_t oh, int64_t ow, cnn_tensor **indices) {
  if (cnn_check_image_input("adaptive_max_pool2d", x, false) ||
      check_out_size("adaptive_max_pool2d", x, oh, ow))
    return NULL;
  int64_t shape[4] = {x->shape[0], x->shape[1], oh, ow};
  bool want_idx = indices || cnn_any_requires_grad(1, &x);
  cnn_device dev = cnn_tensor_device(x);
  cnn_tensor *xc = cnn_contiguous(x);
  cnn_tensor *y = xc ? cnn_empty(4, shape, x->dtype, dev) : NULL;
  cnn_tensor *idx = y && want_idx ? cnn_empty(4, shape, CNN_INT64, dev) : NULL;
  if (y && want_idx && !idx) cnn_tensor_release(y), y = NULL;
  if (y &&
      CNN_TENSOR_CALL(x, "adaptive_max_pool2d", adaptive_max_pool2d_forward, cnn_backend_dev(x),
                      x->dtype, x->shape[0], x->shape[1], x->shape[2], x->shape[3], oh, ow,
                      cnn_tensor_data(xc), cnn_tensor_data(y), idx ? cnn_tensor_data(idx) : NULL))
    cnn_tensor_release(y), y = NULL;
  cnn_node *n =
      y ? cnn_autograd_record(y, "AdaptiveMaxPool2DBackward", adaptive_max_backward, 1, &x) : NULL;
  if (n) cnn_node_save(n, 0, idx);
  if (indices && y)
    *indices = idx;
  else
    cnn_tensor_release(idx);
  cnn_tensor_release(xc);
  return y;
}
