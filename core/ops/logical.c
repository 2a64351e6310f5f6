/*
 * logical.c -- any and all: whether any / every entry is non-zero, over
 * some dimensions or all of them.
 *
 * cnnsh's booleans are uint8 masks (0 or 1), as the comparisons give, so
 * both return uint8 (PyTorch returns bool).  NaN is non-zero, as in
 * PyTorch.  Built from existing ops: count the non-zero (any) or zero
 * (all) entries with a sum (int64), then compare with 0; over no
 * entries any is 0 and all is 1, as PyTorch's.  Not differentiable.
 */
#include "cnn.h"

static cnn_tensor *count_then_test(const char *op, cnn_tensor *x, uint32_t dims, bool keepdim,
                                   bool all) {
  if (!x) return cnn_set_error("%s: missing tensor argument", op), NULL;
  if (x->dtype >= CNN_FLOAT16)
    return cnn_set_error("%s: dtype %s is not supported", op, cnn_dtype_name(x->dtype)), NULL;
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *zero = cnn_scalar(0, x->dtype, cnn_tensor_device(x));
  cnn_tensor *mask = zero ? cnn_binary(all ? CNN_OP_EQ : CNN_OP_NE, x, zero) : NULL;
  cnn_tensor *count = mask ? cnn_reduce(CNN_RED_SUM, mask, dims, keepdim, 0) : NULL;
  cnn_tensor *zc = count ? cnn_scalar(0, CNN_INT64, cnn_tensor_device(x)) : NULL;
  cnn_tensor *out = zc ? cnn_binary(all ? CNN_OP_EQ : CNN_OP_GT, count, zc) : NULL;
  cnn_set_grad_enabled(prev);
  cnn_tensor_release(zero), cnn_tensor_release(mask);
  cnn_tensor_release(count), cnn_tensor_release(zc);
  return out;
}

cnn_tensor *cnn_any(cnn_tensor *x, uint32_t dims, bool keepdim) {
  return count_then_test("any", x, dims, keepdim, false);
}

cnn_tensor *cnn_all(cnn_tensor *x, uint32_t dims, bool keepdim) {
  return count_then_test("all", x, dims, keepdim, true);
}
