/*
 * scan.c -- cumsum and cumprod along one dimension, with their backward.
 *
 * Design.  The backend's `cumulate` entry runs over the input seen as
 * outer x D x inner (contiguous).  Integer inputs (uint8, int64) give
 * int64, floats keep their dtype, as PyTorch's.  A 0-d tensor is one
 * element (dim 1 or -1).
 *
 * Autograd (floats only):
 *  - cumsum: dx = the reversed running sum of the output gradient (the
 *    same entry with `reverse`); nothing saved.
 *  - cumprod: the backend's cumprod_backward, from the saved input: a
 *    recurrence without division, so zeros in x (even several) give the
 *    exact gradient, where y / x would divide by zero.
 */
#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "ops_internal.h"

/* y = cumulate(x) along dim: x contiguous float/int64, y new of x's shape */
static cnn_tensor *run_cumulate(const char *op, cnn_tensor *x, int dim, bool prod, bool reverse) {
  int64_t outer, inner, D = x->ndim ? x->shape[dim] : 1;
  cnn_outer_inner(x->ndim, x->shape, dim, &outer, &inner);
  cnn_tensor *y = cnn_empty(x->ndim, x->shape, x->dtype, cnn_tensor_device(x));
  if (y && CNN_TENSOR_CALL(x, op, cumulate, cnn_backend_dev(x), x->dtype, prod, reverse, outer, D,
                           inner, cnn_tensor_data(x), cnn_tensor_data(y)))
    cnn_tensor_release(y), y = NULL;
  return y;
}

static int cumsum_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *gc = cnn_contiguous(g);
  gin[0] = gc ? run_cumulate("cumsum", gc, (int)n->ip[0], false, true) : NULL;
  cnn_tensor_release(gc);
  return gin[0] ? 0 : -1;
}

static int cumprod_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *x = cnn_node_saved(n, 0);
  if (!x) return -1;
  int dim = (int)n->ip[0];
  int64_t outer, inner, D = x->ndim ? x->shape[dim] : 1;
  cnn_outer_inner(x->ndim, x->shape, dim, &outer, &inner);
  cnn_tensor *gc = cnn_contiguous(g);
  cnn_tensor *dx = gc ? cnn_empty(x->ndim, x->shape, x->dtype, cnn_tensor_device(x)) : NULL;
  if (dx && CNN_TENSOR_CALL(x, "cumprod", cumprod_backward, cnn_backend_dev(x), x->dtype, outer, D,
                            inner, cnn_tensor_data(x), cnn_tensor_data(gc), cnn_tensor_data(dx)))
    cnn_tensor_release(dx), dx = NULL;
  cnn_tensor_release(gc);
  gin[0] = dx;
  return dx ? 0 : -1;
}

static cnn_tensor *cumulate(const char *op, cnn_tensor *x, int dim, bool prod) {
  if (!x) return cnn_set_error("%s: missing tensor argument", op), NULL;
  if (x->dtype != CNN_FLOAT32 && x->dtype != CNN_FLOAT64 && x->dtype != CNN_INT64 &&
      x->dtype != CNN_UINT8)
    return cnn_set_error("%s: dtype %s is not supported (float32, float64, int64, uint8)", op,
                         cnn_dtype_name(x->dtype)),
           NULL;
  if (cnn_check_op_dim(op, x, dim)) return NULL;
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *xt = cnn_to_dtype(x, x->dtype == CNN_UINT8 ? CNN_INT64 : x->dtype);
  cnn_tensor *xc = xt ? cnn_contiguous(xt) : NULL;
  cnn_set_grad_enabled(prev);
  cnn_tensor_release(xt);
  cnn_tensor *y = xc ? run_cumulate(op, xc, dim, prod, false) : NULL;
  cnn_node *n = y && cnn_dtype_is_float(x->dtype)
                    ? cnn_autograd_record(y, prod ? "CumprodBackward" : "CumsumBackward",
                                          prod ? cumprod_backward : cumsum_backward, 1, &x)
                    : NULL;
  if (n) {
    n->ip[0] = dim;
    if (prod) cnn_node_save(n, 0, xc);
  }
  cnn_tensor_release(xc);
  return y;
}

cnn_tensor *cnn_cumsum(cnn_tensor *x, int dim) { return cumulate("cumsum", x, dim, false); }
cnn_tensor *cnn_cumprod(cnn_tensor *x, int dim) { return cumulate("cumprod", x, dim, true); }
