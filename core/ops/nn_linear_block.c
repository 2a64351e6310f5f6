/*
 * nn_linear_block.c -- linear -> relu -> dropout as one op and one
 * autograd node (cnn_linear_relu_dropout, cnn.h): what nn.Sequential runs
 * for a Linear followed by a ReLU, and a Dropout after them
 * (stdlib/nn/linear_block.lua).
 *
 * Forward: the product x w^T as linear computes it (loss.c's
 * cnn_linear_product: float32, or bfloat16 arithmetic under the CPU's
 * autocast), then one pass in place over it: the bias, relu and dropout's
 * mask (backend linear_relu_dropout_forward).  The mask comes from one draw
 * of the core generator by dropout's counter-based formula
 * (elementwise_math.h), the draw cnn_dropout makes, so with one seed the
 * block gives the bits of linear, relu and dropout run one by one.
 *
 * No mask is kept: the output y is the mask.  y > 0 exactly where relu
 * passed and dropout kept, and there d y / d z = 1/(1-p); elsewhere the
 * derivative is 0.  Backward: dz = (y > 0) g / (1-p) in one pass (over g
 * itself when g is private), then linear's own backward with dz.
 *
 * Declining.  Where the block cannot give the layers' values -- a backend
 * without the two entries (CUDA), operands other than all float32 or all
 * float64, an autocast that casts the operands (a GPU), p = 1 -- it
 * returns NULL with *declined set, having drawn nothing and written
 * nothing, and the caller runs the layers.  Bad operands are linear's
 * errors, with linear's messages.
 */
#include "autocast.h"
#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "ops_internal.h"
#include "tensor_internal.h"

static const char OP[] = "linear_relu_dropout";

/* The node's geometry: linear's (the products' arithmetic first), then
 * the gradient's scale where y > 0. */
typedef struct {
  cnn_dtype math;
  double scale;
} block_geometry;

static int block_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *y = cnn_node_saved(n, 2);
  if (!y) return -1;
  const block_geometry *geo = (const block_geometry *)n->geometry;
  cnn_tensor *dz = cnn_grad_is_private(g, y)
                       ? (cnn_tensor_retain(g), g)
                       : cnn_empty(y->ndim, y->shape, y->dtype, cnn_tensor_device(y));
  cnn_tensor *gc = dz ? cnn_contiguous(g) : NULL;
  int rc = gc ? CNN_TENSOR_CALL(y, OP, linear_relu_dropout_backward, cnn_backend_dev(y), y->dtype,
                                cnn_tensor_numel(y), cnn_tensor_data(y), cnn_tensor_data(gc),
                                geo->scale, cnn_tensor_data(dz))
              : -1;
  if (rc == 0) rc = cnn_linear_backward_rule(n, dz, gin);
  cnn_tensor_release(gc), cnn_tensor_release(dz);
  return rc;
}

/* Whether the block gives the layers' values here, and in which
 * arithmetic (*math) its product runs. */
static bool block_applies(const cnn_backend *be, cnn_tensor *x, cnn_tensor *w, cnn_tensor *b,
                          double p, cnn_dtype *math) {
  if (!be->linear_relu_dropout_forward || !be->linear_relu_dropout_backward || p >= 1) return false;
  if ((x->dtype != CNN_FLOAT32 && x->dtype != CNN_FLOAT64) || w->dtype != x->dtype ||
      (b && b->dtype != x->dtype))
    return false;
  *math = cnn_autocast_target((cnn_tensor *[]){x, w, b}, 3);
  return *math == CNN_FLOAT32 || cnn_autocast_backend_math(*math, x);
}

/* The product, then the element pass in place: y, or NULL. */
static cnn_tensor *block_forward(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b, double p,
                                 cnn_dtype math) {
  cnn_tensor *y = cnn_linear_product(x, w, math);
  cnn_tensor *bc = y && b ? cnn_contiguous(b) : NULL;
  if (!y || (b && !bc) || !cnn_tensor_is_contiguous(y)) {
    if (y && !cnn_tensor_is_contiguous(y)) cnn_set_error("%s: the product is not contiguous", OP);
    cnn_tensor_release(y), cnn_tensor_release(bc);
    return NULL;
  }
  int64_t cols = w->shape[0], rows = cols ? cnn_tensor_numel(y) / cols : 0;
  uint64_t seed = p > 0 ? cnn_rng_next() : 0;
  if (CNN_TENSOR_CALL(y, OP, linear_relu_dropout_forward, cnn_backend_dev(y), y->dtype, rows, cols,
                      cnn_tensor_data(y), cnn_data_or_null(bc), p, seed))
    cnn_tensor_release(y), y = NULL;
  cnn_tensor_release(bc);
  return y;
}

cnn_tensor *cnn_linear_relu_dropout(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b, double p,
                                    bool *declined) {
  *declined = false;
  if (cnn_linear_check(x, w, b)) return NULL;
  if (!(p >= 0 && p <= 1))
    return cnn_set_error("%s: dropout probability must be between 0 and 1, got %g", OP, p), NULL;
  const cnn_backend *be = cnn_backend_of(x, OP);
  cnn_dtype math;
  if (!be) return NULL;
  if (!block_applies(be, x, w, b, p, &math)) return *declined = true, NULL;
  cnn_tensor *y = block_forward(x, w, b, p, math);
  cnn_node *n =
      y ? cnn_autograd_record(y, p > 0 ? "LinearReluDropoutBackward" : "LinearReluBackward",
                              block_backward, 3, (cnn_tensor *[]){x, w, b})
        : NULL;
  if (n) {
    block_geometry geo = {math, p > 0 ? 1.0 / (1.0 - p) : 1.0};
    cnn_node_save(n, 0, x), cnn_node_save(n, 1, w), cnn_node_save(n, 2, y);
    cnn_node_set_geometry(n, &geo, sizeof geo);
  }
  return y;
}
