/*
 * elementwise_grad.c -- backward rules of the elementwise ops (binary,
 * unary, where) recorded by elementwise.c.
 *
 * Each rule runs with grad mode off and is written with the tensor ops
 * themselves (cnn_binary, cnn_where, and the fused unary derivative
 * cnn_unary_grad that evaluates g * f'(x) with elementwise_math.h), so a
 * backend that implements those ops gets the backward passes for free.
 * Gradients of broadcast inputs are reduced with cnn_grad_to_input, which
 * also casts them back to the input's dtype.
 *
 * Saved tensors (slots): binary: 0 = a, 1 = b (not for add/sub/add_relu),
 * 2 = the output (div, pow, add_relu); unary: 0 = x or the output y,
 * nothing for ops whose derivative is a constant (the `saves` of
 * cnn_unary_ops/cnn_binary_ops); where: 0 = the condition.
 */
#include <math.h>

#include "autograd.h"
#include "cnn.h"
#include "ops_internal.h"

/* r, consumed: reduce/cast to input i and store into gin[i] */
static int finish(cnn_node *n, int i, cnn_tensor *r, cnn_tensor **gin) {
  if (!r) return -1;
  gin[i] = cnn_grad_to_input(n, i, r);
  cnn_tensor_release(r);
  return gin[i] ? 0 : -1;
}

/* a op b, consuming neither; NULL propagates */
static cnn_tensor *bin(cnn_binary_op op, cnn_tensor *a, cnn_tensor *b) {
  return a && b ? cnn_binary(op, a, b) : NULL;
}
/* a op b, releasing a (a temporary) */
static cnn_tensor *bin_consume(cnn_binary_op op, cnn_tensor *a, cnn_tensor *b) {
  cnn_tensor *r = bin(op, a, b);
  if (a) cnn_tensor_release(a);
  return r;
}

/* weight of a in maximum/minimum: 1 where a wins, 1/2 on ties, 0 elsewhere */
static cnn_tensor *extremum_weight(cnn_binary_op win, cnn_tensor *a, cnn_tensor *b) {
  cnn_tensor *w = cnn_binary(win, a, b), *eq = cnn_binary(CNN_OP_EQ, a, b);
  cnn_tensor *half = eq ? cnn_unary(CNN_OP_MUL_SCALAR, eq, 0.5, 0) : NULL;
  cnn_tensor *r = bin(CNN_OP_ADD, half, w);
  if (w) cnn_tensor_release(w);
  if (eq) cnn_tensor_release(eq);
  if (half) cnn_tensor_release(half);
  return r;
}

/* d(a^b)/db = a^b * log(a), defined as 0 where a == 0 (as PyTorch) */
static cnn_tensor *pow_grad_exponent(cnn_tensor *g, cnn_tensor *a, cnn_tensor *y) {
  cnn_tensor *la = cnn_unary(CNN_OP_LOG, a, 0, 0);
  cnn_tensor *t = bin_consume(CNN_OP_MUL, la, y);
  cnn_tensor *zero = cnn_scalar(0, y->dtype, CNN_DEVICE_CPU);
  cnn_tensor *is0 = zero ? cnn_binary(CNN_OP_EQ, a, zero) : NULL;
  cnn_tensor *m = t && is0 ? cnn_where(is0, zero, t) : NULL;
  if (t) cnn_tensor_release(t);
  if (is0) cnn_tensor_release(is0);
  if (zero) cnn_tensor_release(zero);
  return bin_consume(CNN_OP_MUL, m, g);
}

/* d(a^b)/da = b * a^(b-1) */
static cnn_tensor *pow_grad_base(cnn_tensor *g, cnn_tensor *a, cnn_tensor *b) {
  cnn_tensor *bm1 = cnn_unary(CNN_OP_ADD_SCALAR, b, -1, 0);
  cnn_tensor *p = bin(CNN_OP_POW, a, bm1);
  cnn_tensor_release(bm1);
  return bin_consume(CNN_OP_MUL, bin_consume(CNN_OP_MUL, p, b), g);
}

static cnn_tensor *div_grad_divisor(cnn_tensor *g, cnn_tensor *b, cnn_tensor *y) {
  cnn_tensor *t = bin_consume(CNN_OP_DIV, bin(CNN_OP_MUL, g, y), b);
  cnn_tensor *r = t ? cnn_unary(CNN_OP_NEG, t, 0, 0) : NULL;
  if (t) cnn_tensor_release(t);
  return r;
}

static cnn_tensor *binary_input_grad(int op, int i, cnn_tensor *g, cnn_tensor *a, cnn_tensor *b,
                                     cnn_tensor *y) {
  switch (op) {
  case CNN_OP_ADD: cnn_tensor_retain(g); return g;
  case CNN_OP_SUB:
    if (i == 0) cnn_tensor_retain(g);
    return i == 0 ? g : cnn_unary(CNN_OP_NEG, g, 0, 0);
  case CNN_OP_MUL: return bin(CNN_OP_MUL, g, i == 0 ? b : a);
  case CNN_OP_DIV: /* d/da = 1/b, d/db = -y/b */
    return i == 0 ? bin(CNN_OP_DIV, g, b) : div_grad_divisor(g, b, y);
  case CNN_OP_POW: return i == 0 ? pow_grad_base(g, a, b) : pow_grad_exponent(g, a, y);
  case CNN_OP_MAXIMUM:
  case CNN_OP_MINIMUM: {
    cnn_binary_op win = op == CNN_OP_MAXIMUM ? CNN_OP_GT : CNN_OP_LT;
    cnn_tensor *w = i == 0 ? extremum_weight(win, a, b) : extremum_weight(win, b, a);
    return bin_consume(CNN_OP_MUL, w, g);
  }
  default: cnn_set_error("binary backward: op %d is not differentiable", op); return NULL;
  }
}

/* add_relu: relu's derivative at its output y (0 where y is 0, 1 above
 * and at NaN: the same mask as at relu's input) times g, made once and
 * handed to both inputs. */
static int add_relu_backward(cnn_node *n, cnn_tensor *g, cnn_tensor *y, cnn_tensor **gin) {
  cnn_tensor *m = cnn_unary_grad(CNN_OP_RELU, g, y, y, 0, 0);
  if (!m) return -1;
  int rc = 0;
  for (int i = 0; i < 2 && rc == 0; i++)
    if (n->needs[i]) cnn_tensor_retain(m), rc = finish(n, i, m, gin);
  cnn_tensor_release(m);
  return rc;
}

int cnn_binary_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  int op = (int)n->ip[0];
  cnn_ew_saves saves = cnn_binary_ops[op].saves;
  cnn_tensor *a = NULL, *b = NULL, *y = NULL;
  if (saves == CNN_SAVES_INPUT || saves == CNN_SAVES_ALL) {
    a = cnn_node_saved(n, 0);
    b = a ? cnn_node_saved(n, 1) : NULL;
    if (!b) return -1;
  }
  if (saves == CNN_SAVES_OUTPUT || saves == CNN_SAVES_ALL) {
    y = cnn_node_saved(n, 2);
    if (!y) return -1;
  }
  if (op == CNN_OP_ADD_RELU) return add_relu_backward(n, g, y, gin);
  for (int i = 0; i < 2; i++) {
    if (!n->needs[i]) continue;
    if (finish(n, i, binary_input_grad(op, i, g, a, b, y), gin)) return -1;
  }
  return 0;
}

int cnn_unary_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_unary_op op = (cnn_unary_op)n->ip[0];
  cnn_tensor *v = g;
  if (cnn_unary_ops[op].saves != CNN_SAVES_NOTHING) {
    v = cnn_node_saved(n, 0);
    if (!v) return -1;
  }
  if (!n->needs[0]) return 0;
  return finish(n, 0, cnn_unary_grad(op, g, v, v, n->p[0], n->p[1]), gin);
}

int cnn_where_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *cond = cnn_node_saved(n, 0);
  if (!cond) return -1;
  cnn_tensor *zero = cnn_scalar(0, g->dtype, CNN_DEVICE_CPU);
  if (!zero) return -1;
  int rc = 0;
  for (int i = 0; i < 2 && rc == 0; i++) {
    if (!n->needs[i]) continue;
    rc = finish(n, i, i == 0 ? cnn_where(cond, g, zero) : cnn_where(cond, zero, g), gin);
  }
  cnn_tensor_release(zero);
  return rc;
}
