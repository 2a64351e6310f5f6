/*
 * ops_internal.h -- what the files of core/ops share with each other: the
 * backward rules recorded by one file and defined in its *_grad.c, and the
 * tensor-level helpers those rules call.  Not part of core's interface.
 */
#ifndef CNN_OPS_INTERNAL_H
#define CNN_OPS_INTERNAL_H

#include "autograd.h"
#include "backend.h"
#include "cnn.h"

/* elementwise_grad.c: the rules recorded by elementwise.c */
int cnn_binary_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin);
int cnn_unary_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin);
int cnn_where_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin);
/* elementwise.c: g * f'(v) for unary op `op` in one pass, v = x or y (the
 * output) as the op's `saves` in cnn_unary_ops says */
cnn_tensor *cnn_unary_grad(cnn_unary_op op, cnn_tensor *g, cnn_tensor *x, cnn_tensor *y, double p0,
                           double p1);

/* reduce_grad.c: the rules recorded by reduce.c */
int cnn_reduce_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin);
int cnn_max_dim_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin);

/* join.c: zeros(shape) with out[.., index[i..], ..] += src[i..] along dim
 * (index validated, same shape as src): the backward of gather, max(dim) */
cnn_tensor *cnn_scatter_add_new(int ndim, const int64_t *shape, int dim, cnn_tensor *index,
                                cnn_tensor *src);

/* nn_conv.c: dtypes and devices of a convolution's x, w, b (b may be
 * NULL); -1 with an error naming `op` */
int cnn_conv_check_dtypes(const char *op, const cnn_tensor *x, const cnn_tensor *w,
                          const cnn_tensor *b);
/* nn_conv.c: conv2d's rank, parameter and channel checks and its geometry
 * (math CNN_FLOAT32); -1 with an error naming `op` */
int cnn_conv2d_shape(const char *op, const cnn_tensor *x, const cnn_tensor *w, const cnn_tensor *b,
                     const cnn_conv_params *p, cnn_conv_shape *s);
/* nn_conv.c: the gradients a convolution-like node (inputs x, w [, b])
 * needs: gin[0] = dx, *dw (also when only db is wanted: the weight pass
 * computes both), gin[2] = db of nbias elements; -1 when out of memory */
int cnn_conv_grad_buffers(cnn_node *n, cnn_tensor *x, cnn_tensor *w, int64_t nbias,
                          cnn_tensor **gin, cnn_tensor **dw);
/* ... and after the passes: dw becomes gin[1] if the node wants it, else
 * it is released */
void cnn_conv_grad_keep_dw(cnn_node *n, cnn_tensor **gin, cnn_tensor *dw);
/* t's data, or NULL for no tensor */
static inline void *cnn_data_or_null(cnn_tensor *t) { return t ? cnn_tensor_data(t) : NULL; }

/* elementwise.c: the checks of every in-place op on target t (other: the
 * operand, or NULL): no leaf that requires grad, no tensor in autograd
 * while grad mode is on, no expanded target; errors name "<op>_" */
int cnn_check_inplace(const char *op, cnn_tensor *t, cnn_tensor *other);

/* join.c: 0 when every entry of the contiguous int64 index ic lies in
 * 0..size-1 of x's dimension `dim` (checked on a host copy), else -1 with
 * "<op>: index N out of range for dimension d of size S (input ...)" */
int cnn_check_indices(const char *op, const cnn_tensor *x, int dim, cnn_tensor *ic);

/* sort.c: outer = product of shape[0..dim), inner = of shape(dim..ndim);
 * 0, or -1 with "<op>: dimension d out of range for input ..." (a 0-d x
 * has one dimension of size 1, as PyTorch's sort and cumsum see it) */
void cnn_outer_inner(int ndim, const int64_t *shape, int dim, int64_t *outer, int64_t *inner);
int cnn_check_op_dim(const char *op, const cnn_tensor *x, int dim);

/* matmul.c: a . b (matmul's rules, MatmulBackward recorded when grad is
 * on) in arithmetic `math`, without autocast's dispatch: CNN_FLOAT32, or
 * CNN_BFLOAT16 on a backend with bf16_math (linear's node under autocast,
 * loss.c). */
cnn_tensor *cnn_matmul_math(cnn_tensor *a, cnn_tensor *b, cnn_dtype math);

/* loss.c: linear's pieces, shared with the block linear -> ReLU -> dropout
 * (nn_linear_block.c).  cnn_linear_check validates x (... x in), w (out x
 * in) and b (out, or NULL) with linear's messages; cnn_linear_product is
 * x w^T in arithmetic `math`, recording nothing; cnn_linear_backward_rule
 * is LinearBackward: gradients of x, w, b from g and the node's saved x
 * (slot 0) and w (slot 1), in the arithmetic its geometry starts with. */
int cnn_linear_check(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b);
cnn_tensor *cnn_linear_product(cnn_tensor *x, cnn_tensor *w, cnn_dtype math);
int cnn_linear_backward_rule(cnn_node *n, cnn_tensor *g, cnn_tensor **gin);

/* Float16 inference (issue 16): whether t is a float16 tensor on a backend
 * with `half` (CUDA).  The ops that admit it there (elementwise, linear,
 * dropout, batch norm in eval mode, the pools, softmax, reductions by a
 * float32 pass) keep refusing float16 on the CPU with their usual
 * "dtype float16 not supported" message. */
static inline bool cnn_half_ok(const cnn_tensor *t) {
  return t->dtype == CNN_FLOAT16 && cnn_backend_half(t);
}

/* nn_pool.c: 0 when x is a 4-d (N x C x H x W) float32/float64 tensor (or
 * float16 where `half` is true and cnn_half_ok(x)), else -1 with "<op>:
 * expected a 4-d input ..." or the dtype (pools, resizing) */
int cnn_check_image_input(const char *op, const cnn_tensor *x, bool half);

/* memory_format.c: x prefers channels-last and its backend runs that
 * layout natively (the `channels_last` flag): the op keeps it */
bool cnn_runs_channels_last(const cnn_tensor *x, const char *op);

#endif
