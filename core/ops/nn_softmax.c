/*
 * nn_softmax.c -- softmax and log_softmax along one dimension.
 *
 * The input is viewed as outer x D x inner around the chosen dimension; the
 * stable kernels (subtract the max) are the backend's (core/cpu/softmax.c
 * on the CPU).  The node
 * saves the output: both backward formulas need only y and dy.  float16
 * runs where the backend has `half` (cuDNN on cuda), forward and backward.
 */
#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "ops_internal.h"
#include "tensor_internal.h"

static void split_at(const cnn_tensor *x, int dim, int64_t *outer, int64_t *D, int64_t *inner) {
  *outer = 1, *inner = 1, *D = x->ndim ? x->shape[dim] : 1;
  for (int i = 0; i < dim; i++) *outer *= x->shape[i];
  for (int i = dim + 1; i < x->ndim; i++) *inner *= x->shape[i];
}

static const char *op_name(int log) { return log ? "log_softmax" : "softmax"; }

static int softmax_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *y = cnn_node_saved(n, 0), *dy = cnn_contiguous(g);
  if (!y || !dy) return cnn_tensor_release(dy), -1;
  int64_t outer, D, inner;
  split_at(y, (int)n->ip[0], &outer, &D, &inner);
  gin[0] = cnn_empty(y->ndim, y->shape, y->dtype, cnn_tensor_device(y));
  int log = (int)n->ip[1];
  int rc = gin[0] ? CNN_TENSOR_CALL(y, op_name(log), softmax_backward, cnn_backend_dev(y), y->dtype,
                                    outer, D, inner, log, cnn_tensor_data(y), cnn_tensor_data(dy),
                                    cnn_tensor_data(gin[0]))
                  : -1;
  cnn_tensor_release(dy);
  return rc;
}

static cnn_tensor *softmax_common(const char *op, cnn_tensor *x, int dim, int log) {
  char a[CNN_SHAPE_STR];
  if (x->ndim == 0 && dim == 0)
    dim = 0;
  else if (dim < 0 || dim >= x->ndim) {
    cnn_set_error("%s: dimension %d out of range for input %s", op, dim + 1,
                  cnn_tensor_shape_str(x, a));
    return NULL;
  }
  if (x->dtype != CNN_FLOAT32 && x->dtype != CNN_FLOAT64 && !cnn_half_ok(x)) {
    cnn_set_error("%s: input dtype %s is not supported (use float32 or float64)", op,
                  cnn_dtype_name(x->dtype));
    return NULL;
  }
  int64_t outer, D, inner;
  split_at(x, dim, &outer, &D, &inner);
  cnn_tensor *xc = cnn_contiguous(x);
  cnn_tensor *y = xc ? cnn_empty(x->ndim, x->shape, x->dtype, cnn_tensor_device(x)) : NULL;
  if (y && CNN_TENSOR_CALL(x, op, softmax_forward, cnn_backend_dev(x), x->dtype, outer, D, inner,
                           log, cnn_tensor_data(xc), cnn_tensor_data(y)))
    cnn_tensor_release(y), y = NULL;
  cnn_node *n = y ? cnn_autograd_record(y, log ? "LogSoftmaxBackward" : "SoftmaxBackward",
                                        softmax_backward, 1, &x)
                  : NULL;
  if (n) cnn_node_save(n, 0, y), n->ip[0] = dim, n->ip[1] = log;
  cnn_tensor_release(xc);
  return y;
}

cnn_tensor *cnn_softmax(cnn_tensor *x, int dim) { return softmax_common("softmax", x, dim, 0); }
cnn_tensor *cnn_log_softmax(cnn_tensor *x, int dim) {
  return softmax_common("log_softmax", x, dim, 1);
}
