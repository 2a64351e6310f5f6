/*
 * reduce_grad.c -- backward rules of the reductions recorded in reduce.c.
 *
 * Every rule first brings the output gradient to the "keepdim" shape (the
 * input's shape with reduced dims of size 1), then broadcasts it against
 * the input with the elementwise ops:
 *   sum   g                       mean  g / R
 *   prod  g * (the product of the others): g * p / x' where x' is x with
 *         its zeros replaced by 1 and p = prod(x'); kept only where no other
 *         element of the group is 0 (PyTorch's prod_safe_zeros_backward:
 *         one zero -> the product of the others there, 0 elsewhere; two or
 *         more -> 0 everywhere)
 *   amax/amin  g * m / count(m), m = (x == y) | isnan(x)  (ties share the
 *         gradient; a NaN maximum shares it among the NaNs, as PyTorch's
 *         evenly_distribute_backward for max()/min())
 *   var   g * 2 (x - mean) / (R - correction)
 *   std   g * (x - mean) / ((R - correction) * y)
 *   norm  g * sign(x) |x|^(p-1) / y^(p-1)  (0 where y == 0); p = inf as amax of |x|
 * max/min along a dim with indices scatter g to the winning positions.
 * Node layout (reduce.c): ip[0] op, ip[1] dims mask, ip[2] keepdim, p[0]
 * the parameter; saved 0 = x, 1 = y (the output).
 */
#include <math.h>

#include "autograd.h"
#include "cnn.h"
#include "ops_internal.h"

/* temporaries: run op on a and b, release a (and b if owned) */
static cnn_tensor *bin2(cnn_binary_op op, cnn_tensor *a, cnn_tensor *b, bool release_b) {
  cnn_tensor *r = a && b ? cnn_binary(op, a, b) : NULL;
  cnn_tensor_release(a);
  if (release_b) cnn_tensor_release(b);
  return r;
}
static cnn_tensor *un2(cnn_unary_op op, cnn_tensor *a, double p0) {
  cnn_tensor *r = a ? cnn_unary(op, a, p0, 0) : NULL;
  cnn_tensor_release(a);
  return r;
}

/* g (or y) reshaped to the keepdim shape of the node's input */
static cnn_tensor *to_keepdim(cnn_node *n, cnn_tensor *g) {
  uint32_t dims = (uint32_t)n->ip[1];
  int64_t shape[CNN_MAX_DIMS];
  for (int d = 0; d < n->in_ndim[0]; d++) shape[d] = (dims >> d) & 1 ? 1 : n->in_shape[0][d];
  return cnn_reshape(g, n->in_ndim[0], shape);
}

static int64_t reduced_count(cnn_node *n) {
  int64_t R = 1;
  for (int d = 0; d < n->in_ndim[0]; d++)
    if (((uint32_t)n->ip[1] >> d) & 1) R *= n->in_shape[0][d];
  return R;
}

/* expand gk to the input shape, materialised and scaled */
static cnn_tensor *spread(cnn_node *n, cnn_tensor *gk, double scale) {
  cnn_tensor *e = cnn_expand(gk, n->in_ndim[0], n->in_shape[0]);
  cnn_tensor *r = e ? cnn_unary(CNN_OP_MUL_SCALAR, e, scale, 0) : NULL;
  cnn_tensor_release(e);
  return r;
}

/* The winners of max/min (or of |x| for the inf-norm) as 0/1 of gk's dtype:
 * v == yk, or v is NaN (then yk is NaN too: NaN propagates). */
static cnn_tensor *extremum_mask(cnn_tensor *gk, cnn_tensor *v, cnn_tensor *yk) {
  cnn_tensor *eq = cnn_binary(CNN_OP_EQ, v, yk), *nan = cnn_binary(CNN_OP_NE, v, v);
  cnn_tensor *eqf = eq ? cnn_to_dtype(eq, gk->dtype) : NULL,
             *nanf = nan ? cnn_to_dtype(nan, gk->dtype) : NULL;
  cnn_tensor *r = eqf && nanf ? cnn_binary(CNN_OP_ADD, eqf, nanf) : NULL;
  cnn_tensor_release(eq), cnn_tensor_release(nan), cnn_tensor_release(eqf),
      cnn_tensor_release(nanf);
  return r;
}

/* g * m / count(m), m the winners (extremum_mask) */
static cnn_tensor *extremum_grad(cnn_node *n, cnn_tensor *gk, cnn_tensor *v, cnn_tensor *yk) {
  cnn_tensor *mf = extremum_mask(gk, v, yk);
  cnn_tensor *cnt = mf ? cnn_reduce(CNN_RED_SUM, mf, (uint32_t)n->ip[1], true, 0) : NULL;
  cnn_tensor *share = cnt ? cnn_binary(CNN_OP_DIV, gk, cnt) : NULL;
  cnn_tensor *r = share ? cnn_binary(CNN_OP_MUL, mf, share) : NULL;
  cnn_tensor_release(mf);
  cnn_tensor_release(cnt);
  cnn_tensor_release(share);
  return r;
}

static cnn_tensor *var_grad(cnn_node *n, cnn_tensor *gk, cnn_tensor *x, cnn_tensor *yk, bool std) {
  int64_t R = reduced_count(n);
  double denom = (double)R - n->p[0];
  cnn_tensor *mean = cnn_reduce(CNN_RED_MEAN, x, (uint32_t)n->ip[1], true, 0);
  cnn_tensor *dev = mean ? cnn_binary(CNN_OP_SUB, x, mean) : NULL;
  cnn_tensor_release(mean);
  cnn_tensor *t = bin2(CNN_OP_MUL, dev, gk, false);
  if (!std) return un2(CNN_OP_MUL_SCALAR, t, 2.0 / denom);
  return un2(CNN_OP_MUL_SCALAR, bin2(CNN_OP_DIV, t, yk, false), 1.0 / denom);
}

static cnn_tensor *norm_grad(cnn_node *n, cnn_tensor *gk, cnn_tensor *x, cnn_tensor *yk) {
  double p = n->p[0];
  if (p == 0) return cnn_zeros(x->ndim, x->shape, gk->dtype, cnn_tensor_device(x));
  if (isinf(p)) {
    cnn_tensor *ax = cnn_unary(CNN_OP_ABS, x, 0, 0);
    cnn_tensor *r = ax ? extremum_grad(n, gk, ax, yk) : NULL;
    cnn_tensor_release(ax);
    return bin2(CNN_OP_MUL, r, cnn_unary(CNN_OP_SIGN, x, 0, 0), true);
  }
  /* sign(x)|x|^(p-1) * g / y^(p-1), with 0/0 -> 0 where y == 0 */
  cnn_tensor *ax = cnn_unary(CNN_OP_ABS, x, 0, 0);
  cnn_tensor *num =
      bin2(CNN_OP_MUL, un2(CNN_OP_POW_SCALAR, ax, p - 1), cnn_unary(CNN_OP_SIGN, x, 0, 0), true);
  cnn_tensor *den = cnn_unary(CNN_OP_POW_SCALAR, yk, p - 1, 0);
  cnn_tensor *zero = cnn_scalar(0, gk->dtype, CNN_DEVICE_CPU);
  cnn_tensor *is0 = zero ? cnn_binary(CNN_OP_EQ, yk, zero) : NULL;
  cnn_tensor *q = bin2(CNN_OP_DIV, bin2(CNN_OP_MUL, num, gk, false), den, true);
  cnn_tensor *r = q && is0 ? cnn_where(is0, zero, q) : NULL;
  cnn_tensor_release(q);
  cnn_tensor_release(is0);
  cnn_tensor_release(zero);
  return r;
}

/* The gradient of prod with zeros handled (see the header); the number of
 * zeros among the others is count(group) - (x == 0), and the gradient
 * survives only where it is 0. */
static cnn_tensor *prod_grad(cnn_node *n, cnn_tensor *gk, cnn_tensor *x) {
  uint32_t dims = (uint32_t)n->ip[1];
  cnn_tensor *zero = cnn_scalar(0, x->dtype, CNN_DEVICE_CPU),
             *one = cnn_scalar(1, x->dtype, CNN_DEVICE_CPU);
  cnn_tensor *is0 = zero ? cnn_binary(CNN_OP_EQ, x, zero) : NULL;
  cnn_tensor *zf = is0 ? cnn_to_dtype(is0, x->dtype) : NULL;
  cnn_tensor *count = zf ? cnn_reduce(CNN_RED_SUM, zf, dims, true, 0) : NULL;
  cnn_tensor *others0 = count ? bin2(CNN_OP_SUB, count, zf, false) : NULL;
  cnn_tensor *keep = others0 ? cnn_binary(CNN_OP_EQ, others0, zero) : NULL;
  cnn_tensor *x1 = one && is0 ? cnn_where(is0, one, x) : NULL;
  cnn_tensor *p = x1 ? cnn_reduce(CNN_RED_PROD, x1, dims, true, 0) : NULL;
  cnn_tensor *base = p ? bin2(CNN_OP_DIV, bin2(CNN_OP_MUL, p, gk, false), x1, false) : NULL;
  cnn_tensor *r = base && keep ? cnn_where(keep, base, zero) : NULL;
  cnn_tensor *tmp[] = {zero, one, is0, zf, others0, keep, x1, base};
  for (size_t i = 0; i < sizeof tmp / sizeof tmp[0]; i++) cnn_tensor_release(tmp[i]);
  return r;
}

static cnn_tensor *reduce_input_grad(cnn_node *n, cnn_reduce_op op, cnn_tensor *gk) {
  if (op == CNN_RED_SUM) return spread(n, gk, 1.0);
  if (op == CNN_RED_MEAN) return spread(n, gk, 1.0 / (double)reduced_count(n));
  cnn_tensor *x = cnn_node_saved(n, 0);
  if (!x) return NULL;
  if (op == CNN_RED_PROD) return prod_grad(n, gk, x);
  cnn_tensor *y = op == CNN_RED_VAR ? NULL : cnn_node_saved(n, 1);
  if (op != CNN_RED_VAR && !y) return NULL;
  cnn_tensor *yk = y ? to_keepdim(n, y) : NULL, *r = NULL;
  if (y && !yk) return NULL;
  switch (op) {
  case CNN_RED_MAX:
  case CNN_RED_MIN: r = extremum_grad(n, gk, x, yk); break;
  case CNN_RED_VAR: r = var_grad(n, gk, x, NULL, false); break;
  case CNN_RED_STD: r = var_grad(n, gk, x, yk, true); break;
  case CNN_RED_NORM: r = norm_grad(n, gk, x, yk); break;
  default: cnn_set_error("reduce backward: op %d is not differentiable", (int)op); break;
  }
  cnn_tensor_release(yk);
  return r;
}

int cnn_reduce_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  if (!n->needs[0]) return 0;
  cnn_tensor *gk = to_keepdim(n, g);
  if (!gk) return -1;
  cnn_tensor *r = reduce_input_grad(n, (cnn_reduce_op)n->ip[0], gk);
  cnn_tensor_release(gk);
  if (!r) return -1;
  gin[0] = cnn_grad_to_input(n, 0, r);
  cnn_tensor_release(r);
  return gin[0] ? 0 : -1;
}

/* max/min along ip[0] with saved indices: scatter g to the winners */
int cnn_max_dim_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  if (!n->needs[0]) return 0;
  cnn_tensor *idx = cnn_node_saved(n, 0);
  if (!idx) return -1;
  int dim = (int)n->ip[0], nd = n->in_ndim[0];
  cnn_tensor *gk = g, *ik = idx;
  if (nd == 0) return (gin[0] = cnn_grad_to_input(n, 0, g)) ? 0 : -1;
  if (!n->ip[1]) { /* restore the reduced dim */
    gk = cnn_unsqueeze(g, dim);
    ik = cnn_unsqueeze(idx, dim);
  } else {
    cnn_tensor_retain(gk);
    cnn_tensor_retain(ik);
  }
  cnn_tensor *r = gk && ik ? cnn_scatter_add_new(nd, n->in_shape[0], dim, ik, gk) : NULL;
  cnn_tensor_release(gk);
  cnn_tensor_release(ik);
  if (!r) return -1;
  gin[0] = cnn_grad_to_input(n, 0, r);
  cnn_tensor_release(r);
  return gin[0] ? 0 : -1;
}
