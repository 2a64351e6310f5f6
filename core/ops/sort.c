/*
 * sort.c -- sort and topk along one dimension, with their backward.
 *
 * Design.  Both are the backend's `sort` entry over the input seen as
 * outer x D x inner (no permuted copy): sort asks for all D entries of
 * each row, topk for the first k.  The order is sort_order.h's: ascending
 * or descending, NaN larger than every number, equal values in their
 * original order.  That order is stable, so `stable = false` (PyTorch's
 * default, which promises no particular order of ties) gets the stable
 * answer too; and topk returns its k entries sorted whether or not
 * `sorted` is asked for (PyTorch leaves the order of an unsorted topk
 * unspecified).  Indices are int64, 0-based here (the bindings add 1).
 *
 * Autograd: values are x's entries at the indices, so the gradient of x is
 * the output gradient scatter-added back along dim at the saved indices
 * (SortBackward, TopkBackward), as PyTorch's.  Indices get no gradient.
 *
 * Dtypes: float32, float64, int64, uint8 (the last two are not recorded).
 * A 0-d tensor is one row of one element (dim 1 or -1), as in PyTorch.
 */
#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "ops_internal.h"

void cnn_outer_inner(int ndim, const int64_t *shape, int dim, int64_t *outer, int64_t *inner) {
  *outer = 1, *inner = 1;
  for (int d = 0; d < dim; d++) *outer *= shape[d];
  for (int d = dim + 1; d < ndim; d++) *inner *= shape[d];
}

int cnn_check_op_dim(const char *op, const cnn_tensor *x, int dim) {
  char s[CNN_SHAPE_STR];
  int nd = x->ndim ? x->ndim : 1;
  if (dim >= 0 && dim < nd) return 0;
  cnn_set_error("%s: dimension %d out of range for input %s", op, dim + 1,
                cnn_tensor_shape_str(x, s));
  return -1;
}

static int check_sort_input(const char *op, const cnn_tensor *x, int dim) {
  if (!x) return cnn_set_error("%s: missing tensor argument", op), -1;
  if (x->dtype != CNN_FLOAT32 && x->dtype != CNN_FLOAT64 && x->dtype != CNN_INT64 &&
      x->dtype != CNN_UINT8)
    return cnn_set_error("%s: dtype %s is not supported (float32, float64, int64, uint8)", op,
                         cnn_dtype_name(x->dtype)),
           -1;
  return cnn_check_op_dim(op, x, dim);
}

static int sort_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *idx = cnn_node_saved(n, 0);
  if (!idx) return -1;
  gin[0] = cnn_scatter_add_new(n->in_ndim[0], n->in_shape[0], (int)n->ip[0], idx, g);
  return gin[0] ? 0 : -1;
}

/* the first k of every row along dim, in order; records `node` */
static int sort_first(const char *op, const char *node, cnn_tensor *x, int dim, int64_t k,
                      bool descending, cnn_tensor **values, cnn_tensor **indices) {
  int64_t shape[CNN_MAX_DIMS], outer, inner, D = x->ndim ? x->shape[dim] : 1;
  for (int d = 0; d < x->ndim; d++) shape[d] = d == dim ? k : x->shape[d];
  cnn_outer_inner(x->ndim, x->shape, dim, &outer, &inner);
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *xc = cnn_contiguous(x);
  cnn_set_grad_enabled(prev);
  cnn_tensor *v = xc ? cnn_empty(x->ndim, shape, x->dtype, cnn_tensor_device(x)) : NULL;
  cnn_tensor *ix = v ? cnn_empty(x->ndim, shape, CNN_INT64, cnn_tensor_device(x)) : NULL;
  int rc =
      ix ? CNN_TENSOR_CALL(x, op, sort, cnn_backend_dev(x), x->dtype, outer, D, inner, k,
                           descending, cnn_tensor_data(xc), cnn_tensor_data(v), cnn_tensor_data(ix))
         : -1;
  cnn_tensor_release(xc);
  if (rc) return cnn_tensor_release(v), cnn_tensor_release(ix), -1;
  cnn_node *n =
      cnn_dtype_is_float(x->dtype) ? cnn_autograd_record(v, node, sort_backward, 1, &x) : NULL;
  if (n) cnn_node_save(n, 0, ix), n->ip[0] = dim;
  *values = v, *indices = ix;
  return 0;
}

int cnn_sort(cnn_tensor *x, int dim, bool descending, cnn_tensor **values, cnn_tensor **indices) {
  if (check_sort_input("sort", x, dim)) return -1;
  return sort_first("sort", "SortBackward", x, dim, x->ndim ? x->shape[dim] : 1, descending, values,
                    indices);
}

int cnn_topk(cnn_tensor *x, int64_t k, int dim, bool largest, cnn_tensor **values,
             cnn_tensor **indices) {
  char s[CNN_SHAPE_STR];
  if (check_sort_input("topk", x, dim)) return -1;
  int64_t size = x->ndim ? x->shape[dim] : 1;
  if (k < 0 || k > size)
    return cnn_set_error("topk: k = %lld is out of range for dimension %d of size %lld (input %s)",
                         (long long)k, dim + 1, (long long)size, cnn_tensor_shape_str(x, s)),
           -1;
  return sort_first("topk", "TopkBackward", x, dim, k, largest, values, indices);
}
