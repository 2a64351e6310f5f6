/*
 * pixel_shuffle.c -- pixel_shuffle and pixel_unshuffle: the sub-pixel
 * rearrangement of ESPCN (PyTorch's nn.PixelShuffle), composed of a
 * reshape to 6 dims, a permute and a reshape back.  The views record their
 * own autograd nodes, and the one copy runs on the input's device, so both
 * ops are differentiable on every backend with no kernel of their own.
 *   shuffle:   (*, C*r*r, H, W) -> (*, C, H*r, W*r)
 *              y[b, c, h*r + i, w*r + j] = x[b, c*r*r + i*r + j, h, w]
 *   unshuffle: the inverse, (*, C, H*r, W*r) -> (*, C*r*r, H, W)
 */
#include "cnn.h"
#include "tensor_internal.h"

/* x viewed as 6 dims, permuted by perm, reshaped to the output's shape */
static cnn_tensor *rearrange(cnn_tensor *x, const int64_t six[6], const int perm[6],
                             const int64_t *out_shape) {
  cnn_tensor *v = cnn_reshape(x, 6, six);
  cnn_tensor *p = v ? cnn_permute(v, perm) : NULL;
  cnn_tensor *y = p ? cnn_reshape(p, x->ndim, out_shape) : NULL;
  cnn_tensor_release(v), cnn_tensor_release(p);
  return y;
}

static int check(const char *op, const cnn_tensor *x, int64_t r, int64_t c_div) {
  char a[CNN_SHAPE_STR];
  if (x->ndim < 3) {
    cnn_set_error("%s: expected an input of at least 3 dims (* x C x H x W), got %s", op,
                  cnn_tensor_shape_str(x, a));
    return -1;
  }
  if (r < 1 || r > (1 << 16)) {
    cnn_set_error("%s: factor must be a positive integer, got %lld", op, (long long)r);
    return -1;
  }
  int64_t C = x->shape[x->ndim - 3], H = x->shape[x->ndim - 2], W = x->shape[x->ndim - 1];
  if (C % c_div) {
    cnn_set_error("%s: input %s has %lld channels, not divisible by the factor squared (%lld)", op,
                  cnn_tensor_shape_str(x, a), (long long)C, (long long)c_div);
    return -1;
  }
  if (c_div == 1 && (H % r || W % r)) {
    cnn_set_error("%s: input %s: height %lld and width %lld must be divisible by the factor %lld",
                  op, cnn_tensor_shape_str(x, a), (long long)H, (long long)W, (long long)r);
    return -1;
  }
  return 0;
}

static int64_t batch_of(const cnn_tensor *x) {
  int64_t B = 1;
  for (int i = 0; i < x->ndim - 3; i++) B *= x->shape[i];
  return B;
}

cnn_tensor *cnn_pixel_shuffle(cnn_tensor *x, int64_t r) {
  if (check("pixel_shuffle", x, r, r * r)) return NULL;
  int d = x->ndim;
  int64_t C = x->shape[d - 3] / (r * r), H = x->shape[d - 2], W = x->shape[d - 1];
  int64_t six[6] = {batch_of(x), C, r, r, H, W}, out[CNN_MAX_DIMS];
  for (int i = 0; i < d - 3; i++) out[i] = x->shape[i];
  out[d - 3] = C, out[d - 2] = H * r, out[d - 1] = W * r;
  static const int perm[6] = {0, 1, 4, 2, 5, 3}; /* B, C, H, i, W, j */
  return rearrange(x, six, perm, out);
}

cnn_tensor *cnn_pixel_unshuffle(cnn_tensor *x, int64_t r) {
  if (check("pixel_unshuffle", x, r, 1)) return NULL;
  int d = x->ndim;
  int64_t C = x->shape[d - 3], H = x->shape[d - 2] / r, W = x->shape[d - 1] / r;
  int64_t six[6] = {batch_of(x), C, H, r, W, r}, out[CNN_MAX_DIMS];
  for (int i = 0; i < d - 3; i++) out[i] = x->shape[i];
  out[d - 3] = C * r * r, out[d - 2] = H, out[d - 1] = W;
  static const int perm[6] = {0, 1, 3, 5, 2, 4}; /* B, C, i, j, H, W */
  return rearrange(x, six, perm, out);
}
