/*
 * elementwise.c -- broadcasting binary ops, unary ops, where(), and the
 * fused derivative of the unary ops (cnn_unary_grad), on tensors.
 *
 * Design.  An op validates (devices, broadcast shapes), picks the result
 * dtype, converts operands whose dtype differs from the compute dtype (rare),
 * allocates the output and calls the strided entry of its device's backend
 * (unary, binary, unary_grad, where: core/backend.h) with one stride per
 * operand and dimension, 0 along broadcast dimensions.  The CPU loops (a
 * strided iterator that merges contiguous dims, vectorised rows) are
 * core/cpu/elementwise.c.
 *
 * Dtypes: uint8 < int64 < float16 < float32 < float64; float16 only on a
 * backend with `half` (CUDA: inference in float16, issue 16; the CPU
 * refuses it).  As in PyTorch a 0-d tensor
 * does not promote a tensor with dimensions unless it is of a higher
 * category (integer < floating), so float32 tensor + float64 scalar stays
 * float32.  Division of integers is true division and gives float32;
 * comparisons give uint8 masks; integer pow with a negative exponent gives
 * 0 (1 or -1 for bases 1 and -1).  uint8 arithmetic wraps.
 *
 * Names, autograd nodes, what they save and how integers are treated come
 * from the op tables of elementwise_table.c.
 *
 * Autograd: cnn_binary/cnn_unary/cnn_where record a node when an input
 * requires grad; the backward rules live in elementwise_grad.c.  In-place
 * versions bump t->version and refuse tensors that take part in autograd
 * while grad mode is on.
 *
 * Devices: operands share one device (a 0-d CPU tensor follows the other
 * operand, as in PyTorch; anything else mixed is an error naming both);
 * outputs are allocated there; strided_args() picks the backend.
 *
 * Invariants: the output of an in-place op has no internal overlap (no
 * stride-0 dim of size > 1); inputs that share the output's storage with a
 * different layout are copied first.
 */
#include <math.h>
#include <string.h>

#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "ops_internal.h"
#include "tensor_internal.h"

#define binary_names(op) (cnn_binary_ops[op].name)
#define unary_names(op)  (cnn_unary_ops[op].name)

static bool is_compare(cnn_binary_op op) { return op >= CNN_OP_EQ && op <= CNN_OP_GE; }

/* ---- dtypes ----------------------------------------------------------------- */

static int dtype_rank(cnn_dtype dt) {
  switch (dt) {
  case CNN_UINT8: return 0;
  case CNN_INT64: return 1;
  case CNN_FLOAT16: return 2;
  case CNN_FLOAT32: return 3;
  case CNN_FLOAT64: return 4;
  default: return -1;
  }
}
static cnn_dtype promote2(cnn_dtype a, cnn_dtype b) {
  return dtype_rank(a) >= dtype_rank(b) ? a : b;
}
/* PyTorch's rule: a 0-d operand only matters if its category is higher. */
static cnn_dtype promote_operands(const cnn_tensor *a, const cnn_tensor *b) {
  bool a0 = a->ndim == 0, b0 = b->ndim == 0;
  if (a0 != b0) {
    const cnn_tensor *dim = a0 ? b : a, *zero = a0 ? a : b;
    if (cnn_dtype_is_float(zero->dtype) && !cnn_dtype_is_float(dim->dtype)) return zero->dtype;
    return dim->dtype;
  }
  return promote2(a->dtype, b->dtype);
}

static bool operand_ok(const cnn_tensor *t) {
  return t && dtype_rank(t->dtype) >= 0 && (t->dtype != CNN_FLOAT16 || cnn_half_ok(t));
}

/* the message when !operand_ok(t): out of line, so that check_operand
 * inlines into every op (called, it was ~19 instructions an operand) */
static __attribute__((cold, noinline)) int operand_error(const char *op, const cnn_tensor *t) {
  if (!t)
    cnn_set_error("%s: missing tensor argument", op);
  else
    cnn_set_error("%s: dtype %s not supported (use :float())", op, cnn_dtype_name(t->dtype));
  return -1;
}

static int check_operand(const char *op, const cnn_tensor *t) {
  return operand_ok(t) ? 0 : operand_error(op, t);
}

/* ---- devices --------------------------------------------------------------------
 * Operands share a device, except that a 0-d CPU tensor (a Lua number made
 * a tensor) follows the other operand to its device, as in PyTorch.
 * `*t` is an owned reference, replaced by its copy on `dev` if needed. */
static int to_op_device(const char *op, cnn_tensor **t, const cnn_tensor *other) {
  cnn_device d = cnn_tensor_device(*t), od = cnn_tensor_device(other);
  if (cnn_device_equal(d, od)) return 0;
  if ((*t)->ndim != 0 || d.type != CNN_CPU) return cnn_check_same_device(op, *t, other);
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *m = cnn_to_device(*t, od);
  cnn_set_grad_enabled(prev);
  cnn_tensor_release(*t);
  *t = m;
  return m ? 0 : -1;
}

/* both operands on one device (the one that is not a moved 0-d CPU tensor) */
static int same_device(const char *op, cnn_tensor **a, cnn_tensor **b) {
  if (!*a || !*b) return -1;
  if ((*a)->ndim == 0 && cnn_tensor_device(*a).type == CNN_CPU) return to_op_device(op, a, *b);
  return to_op_device(op, b, *a);
}

/* The strided arguments of ops[0..nops) over ops[0]'s shape, and the
 * backend of ops[0]'s device (NULL + error; operands on other devices are
 * refused).  The entries are called by the run_* helpers below. */
static const cnn_backend *strided_args(const char *op, int nops, cnn_tensor *const *ops,
                                       cnn_be_shape *s, cnn_be_arg *a) {
  if (cnn_be_args_of(op, nops, ops, s, a)) return NULL;
  return cnn_backend_of(ops[0], op);
}

/* t in dtype dt (a new reference), converted without recording autograd. */
static cnn_tensor *as_dtype(cnn_tensor *t, cnn_dtype dt) {
  if (t->dtype == dt) {
    cnn_tensor_retain(t);
    return t;
  }
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *r = cnn_to_dtype(t, dt);
  cnn_set_grad_enabled(prev);
  return r;
}

/* ---- broadcasting ------------------------------------------------------------ */

/* An op's output: channels-last when an operand of the output's full
 * 4-d shape prefers that layout (a's first, then b's; either may be NULL),
 * as PyTorch's outputs follow their inputs' layout; else contiguous. */
static cnn_tensor *result_like(int nd, const int64_t *shape, cnn_dtype dt, cnn_device dev,
                               const cnn_tensor *a, const cnn_tensor *b) {
  const cnn_tensor *ops[2] = {a, b};
  for (int i = 0; nd == 4 && i < 2; i++)
    if (ops[i] && ops[i]->ndim == 4 && !memcmp(ops[i]->shape, shape, 4 * sizeof *shape) &&
        cnn_prefers_channels_last(ops[i]))
      return cnn_empty_channels_last(shape, dt, dev);
  return cnn_empty(nd, shape, dt, dev);
}

int cnn_broadcast_shape(const char *op, const cnn_tensor *a, const cnn_tensor *b, int *ndim,
                        int64_t *shape) {
  int n = a->ndim > b->ndim ? a->ndim : b->ndim;
  for (int i = 0; i < n; i++) {
    int ia = a->ndim - n + i, ib = b->ndim - n + i;
    int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
      cnn_set_error("%s: shapes %s and %s cannot be broadcast", op, cnn_tensor_shape_str(a, s1),
                    cnn_tensor_shape_str(b, s2));
      return -1;
    }
    shape[i] = sa == 1 ? sb : sa;
  }
  *ndim = n;
  return 0;
}

/* Integer inputs keep their dtype for these ops (the table's `ints`); the others give float32. */
static bool unary_keeps_int(cnn_unary_op op, double p0) {
  switch (cnn_unary_ops[op].ints) {
  case CNN_INTS_KEEP: return true;
  case CNN_INTS_KEEP_INTEGRAL: return p0 == floor(p0) && fabs(p0) < 9e18;
  case CNN_INTS_KEEP_POWER: return p0 == floor(p0) && p0 >= 0 && p0 < 64;
  default: return false;
  }
}

/* ---- binary ops ------------------------------------------------------------------ */

static int run_binary(cnn_binary_op op, cnn_dtype dt, cnn_tensor *out, cnn_tensor *a,
                      cnn_tensor *b) {
  cnn_be_shape s;
  cnn_be_arg g[3];
  const char *name = binary_names(op);
  const cnn_backend *be = strided_args(name, 3, (cnn_tensor *[]){out, a, b}, &s, g);
  if (!be) return -1;
  return CNN_BE_CALL(be, name, binary, cnn_backend_dev(out), op, dt, &s, g[0], g[1], g[2]);
}

static cnn_dtype binary_compute_dtype(cnn_binary_op op, cnn_dtype promoted) {
  if (op == CNN_OP_DIV && !cnn_dtype_is_float(promoted)) return CNN_FLOAT32;
  return promoted;
}

static void record_binary(cnn_binary_op op, cnn_tensor *out, cnn_tensor *a, cnn_tensor *b) {
  const cnn_binary_info *info = &cnn_binary_ops[op];
  if (!info->grad_name || !cnn_dtype_is_float(out->dtype)) return;
  cnn_node *n =
      cnn_autograd_record(out, info->grad_name, cnn_binary_backward, 2, (cnn_tensor *[]){a, b});
  if (!n) return;
  n->ip[0] = op;
  if (info->saves == CNN_SAVES_INPUT || info->saves == CNN_SAVES_ALL)
    cnn_node_save(n, 0, a), cnn_node_save(n, 1, b);
  if (info->saves == CNN_SAVES_OUTPUT || info->saves == CNN_SAVES_ALL) cnn_node_save(n, 2, out);
}

cnn_tensor *cnn_binary(cnn_binary_op op, cnn_tensor *a, cnn_tensor *b) {
  if ((unsigned)op >= CNN_NBINARY) {
    cnn_set_error("binary: unknown op %d", (int)op);
    return NULL;
  }
  const char *name = binary_names(op);
  if (check_operand(name, a) || check_operand(name, b)) return NULL;
  int nd;
  int64_t shape[CNN_MAX_DIMS];
  if (cnn_broadcast_shape(name, a, b, &nd, shape)) return NULL;
  cnn_dtype dt = binary_compute_dtype(op, promote_operands(a, b));
  cnn_tensor *ca = as_dtype(a, dt), *cb = ca ? as_dtype(b, dt) : NULL;
  if (cb && same_device(name, &ca, &cb)) cnn_tensor_release(cb), cb = NULL;
  cnn_tensor *out =
      cb ? result_like(nd, shape, is_compare(op) ? CNN_UINT8 : dt, cnn_tensor_device(ca), ca, cb)
         : NULL;
  if (out && run_binary(op, dt, out, ca, cb)) cnn_tensor_release(out), out = NULL;
  if (ca) cnn_tensor_release(ca);
  if (cb) cnn_tensor_release(cb);
  if (out) record_binary(op, out, a, b);
  return out;
}

/* Shared checks of the in-place ops: autograd and output overlap. */
int cnn_check_inplace(const char *op, cnn_tensor *t, cnn_tensor *other) {
  char s[CNN_SHAPE_STR];
  if (cnn_grad_enabled() && t->requires_grad && !t->grad_fn) {
    cnn_set_error("%s_: a leaf tensor that requires grad (%s) cannot be modified in place "
                  "while grad mode is on (use no_grad)",
                  op, cnn_tensor_shape_str(t, s));
    return -1;
  }
  if (cnn_grad_enabled() && (t->requires_grad || (other && other->requires_grad))) {
    cnn_set_error("%s_: in-place operations on tensors that take part in autograd are not "
                  "supported (%s); use the out-of-place %s",
                  op, cnn_tensor_shape_str(t, s), op);
    return -1;
  }
  for (int d = 0; d < t->ndim; d++)
    if (t->stride[d] == 0 && t->shape[d] > 1) {
      cnn_set_error("%s_: the tensor (%s) is an expanded view; write to a contiguous copy", op,
                    cnn_tensor_shape_str(t, s));
      return -1;
    }
  return 0;
}

/* b converted to dt, and copied if it overlaps a's storage with another layout */
static cnn_tensor *inplace_operand(cnn_tensor *a, cnn_tensor *b, cnn_dtype dt) {
  cnn_tensor *cb = as_dtype(b, dt);
  if (!cb || cb->storage != a->storage) return cb;
  bool same = cb->offset == a->offset && cb->ndim == a->ndim &&
              !memcmp(cb->stride, a->stride, sizeof(int64_t) * a->ndim);
  if (same) return cb;
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *copy = cnn_clone(cb);
  cnn_set_grad_enabled(prev);
  cnn_tensor_release(cb);
  return copy;
}

static int check_binary_inplace(cnn_binary_op op, cnn_tensor *a, cnn_tensor *b) {
  const char *name = binary_names(op);
  if (check_operand(name, a) || check_operand(name, b)) return -1;
  int nd;
  int64_t shape[CNN_MAX_DIMS];
  if (cnn_broadcast_shape(name, a, b, &nd, shape)) return -1;
  if (nd != a->ndim || memcmp(shape, a->shape, sizeof(int64_t) * nd)) {
    char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
    cnn_set_error("%s_: shape %s cannot be broadcast to the in-place target %s", name,
                  cnn_tensor_shape_str(b, s2), cnn_tensor_shape_str(a, s1));
    return -1;
  }
  return cnn_check_inplace(name, a, b);
}

int cnn_binary_(cnn_binary_op op, cnn_tensor *a, cnn_tensor *b) {
  if ((unsigned)op >= CNN_NBINARY) {
    cnn_set_error("binary_: unknown op %d", (int)op);
    return -1;
  }
  if (check_binary_inplace(op, a, b)) return -1;
  cnn_dtype dt = binary_compute_dtype(op, promote2(a->dtype, b->dtype));
  cnn_dtype out_dt = is_compare(op) ? CNN_UINT8 : dt;
  cnn_tensor *cb = inplace_operand(a, b, dt);
  if (!cb || to_op_device(binary_names(op), &cb, a)) return cnn_tensor_release(cb), -1;
  int rc = 0;
  if (a->dtype == dt && out_dt == dt) {
    rc = run_binary(op, dt, a, a, cb);
  } else { /* compute in dt, then cast into a */
    cnn_tensor *ca = as_dtype(a, dt);
    cnn_tensor *tmp = ca ? cnn_empty(a->ndim, a->shape, out_dt, cnn_tensor_device(a)) : NULL;
    rc = tmp ? run_binary(op, dt, tmp, ca, cb) : -1;
    if (rc == 0) rc = cnn_copy_raw(a, tmp);
    if (ca) cnn_tensor_release(ca);
    if (tmp) cnn_tensor_release(tmp);
  }
  cnn_tensor_release(cb);
  cnn_tensor_bump_version(a);
  return rc;
}

/* ---- unary ops ---------------------------------------------------------------------- */

static int run_unary(cnn_unary_op op, cnn_dtype dt, cnn_tensor *out, cnn_tensor *x, double p0,
                     double p1) {
  cnn_be_shape s;
  cnn_be_arg g[2];
  const char *name = unary_names(op);
  const cnn_backend *be = strided_args(name, 2, (cnn_tensor *[]){out, x}, &s, g);
  if (!be) return -1;
  return CNN_BE_CALL(be, name, unary, cnn_backend_dev(out), op, dt, &s, g[0], g[1], p0, p1);
}

static void record_unary(cnn_unary_op op, cnn_tensor *out, cnn_tensor *x, double p0, double p1) {
  if (!cnn_dtype_is_float(out->dtype)) return;
  cnn_node *n = cnn_autograd_record(out, cnn_unary_ops[op].grad_name, cnn_unary_backward, 1,
                                    (cnn_tensor *[]){x});
  if (!n) return;
  n->ip[0] = op;
  n->p[0] = p0, n->p[1] = p1;
  if (cnn_unary_ops[op].saves != CNN_SAVES_NOTHING)
    cnn_node_save(n, 0, cnn_unary_ops[op].saves == CNN_SAVES_OUTPUT ? out : x);
}

static int check_unary(cnn_unary_op op, cnn_tensor *x) {
  if ((unsigned)op >= CNN_NUNARY) {
    cnn_set_error("unary: unknown op %d", (int)op);
    return -1;
  }
  return check_operand(unary_names(op), x);
}

/* Options an op's dtype cannot take (the activations with options):
 * hardtanh keeps integer dtypes, and a uint8 tensor has no negative limits. */
static int check_unary_params(cnn_unary_op op, const cnn_tensor *x, double p0, double p1) {
  if (op == CNN_OP_HARDTANH && x->dtype == CNN_UINT8 && (trunc(p0) < 0 || trunc(p1) < 0)) {
    cnn_set_error("hardtanh: cannot clamp a uint8 tensor to negative limits [%g, %g]", p0, p1);
    return -1;
  }
  return 0;
}

static cnn_dtype unary_dtype(cnn_unary_op op, cnn_dtype in, double p0) {
  if (cnn_dtype_is_float(in) || unary_keeps_int(op, p0)) return in;
  return CNN_FLOAT32;
}

cnn_tensor *cnn_unary(cnn_unary_op op, cnn_tensor *x, double p0, double p1) {
  if (check_unary(op, x) || check_unary_params(op, x, p0, p1)) return NULL;
  if (op == CNN_OP_CLAMP) { /* NaN bound = open */
    if (p0 != p0) p0 = -INFINITY;
    if (p1 != p1) p1 = INFINITY;
  }
  cnn_dtype dt = unary_dtype(op, x->dtype, p0);
  cnn_tensor *cx = as_dtype(x, dt);
  cnn_tensor *out = cx ? result_like(x->ndim, x->shape, dt, cnn_tensor_device(x), x, NULL) : NULL;
  if (out && run_unary(op, dt, out, cx, p0, p1)) cnn_tensor_release(out), out = NULL;
  if (cx) cnn_tensor_release(cx);
  if (out) record_unary(op, out, x, p0, p1);
  return out;
}

int cnn_unary_(cnn_unary_op op, cnn_tensor *x, double p0, double p1) {
  if (check_unary(op, x) || check_unary_params(op, x, p0, p1) ||
      cnn_check_inplace(unary_names(op), x, NULL))
    return -1;
  if (op == CNN_OP_CLAMP) {
    if (p0 != p0) p0 = -INFINITY;
    if (p1 != p1) p1 = INFINITY;
  }
  cnn_dtype dt = unary_dtype(op, x->dtype, p0);
  int rc = 0;
  if (dt == x->dtype) {
    rc = run_unary(op, dt, x, x, p0, p1);
  } else { /* e.g. exp_ of an int64 tensor: compute in float32, cast back */
    cnn_tensor *cx = as_dtype(x, dt);
    cnn_tensor *tmp = cx ? cnn_empty(x->ndim, x->shape, dt, cnn_tensor_device(x)) : NULL;
    rc = tmp ? run_unary(op, dt, tmp, cx, p0, p1) : -1;
    if (rc == 0) rc = cnn_copy_raw(x, tmp);
    if (cx) cnn_tensor_release(cx);
    if (tmp) cnn_tensor_release(tmp);
  }
  cnn_tensor_bump_version(x);
  return rc;
}

/* ---- unary derivatives: grad_in = g * f'(x) in one pass ---------------------------- */

static int run_unary_grad(cnn_unary_op op, cnn_dtype dt, cnn_tensor *out, cnn_tensor *g,
                          cnn_tensor *v, double p0, double p1) {
  cnn_be_shape s;
  cnn_be_arg a[3];
  const char *name = unary_names(op);
  const cnn_backend *be = strided_args(name, 3, (cnn_tensor *[]){out, g, v}, &s, a);
  if (!be) return -1;
  return CNN_BE_CALL(be, name, unary_grad, cnn_backend_dev(out), op, dt, &s, a[0], a[1], a[2], p0,
                     p1);
}

/* g * f'(x) for unary op `op`; pass x, or y for ops whose derivative uses the
 * output (saves CNN_SAVES_OUTPUT in cnn_unary_ops).  Shapes of g and x/y must match. */
cnn_tensor *cnn_unary_grad(cnn_unary_op op, cnn_tensor *g, cnn_tensor *x, cnn_tensor *y, double p0,
                           double p1) {
  cnn_tensor *v = cnn_unary_ops[op].saves == CNN_SAVES_OUTPUT ? y : x;
  if (check_unary(op, g) || !v || check_operand(unary_names(op), v)) return NULL;
  if (!cnn_same_shape(g, v)) {
    char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
    cnn_set_error("%s backward: gradient %s does not match input %s", unary_names(op),
                  cnn_tensor_shape_str(g, s1), cnn_tensor_shape_str(v, s2));
    return NULL;
  }
  cnn_dtype dt = promote2(promote2(g->dtype, v->dtype), CNN_FLOAT32);
  cnn_tensor *cg = as_dtype(g, dt), *cv = cg ? as_dtype(v, dt) : NULL;
  if (cv && same_device(unary_names(op), &cg, &cv)) cnn_tensor_release(cv), cv = NULL;
  cnn_tensor *out = cv ? result_like(g->ndim, g->shape, dt, cnn_tensor_device(cg), cg, cv) : NULL;
  if (out && run_unary_grad(op, dt, out, cg, cv, p0, p1)) cnn_tensor_release(out), out = NULL;
  if (cg) cnn_tensor_release(cg);
  if (cv) cnn_tensor_release(cv);
  return out;
}

/* ---- where --------------------------------------------------------------------------- */

static int where_shape(cnn_tensor *cond, cnn_tensor *a, cnn_tensor *b, int *nd, int64_t *shape) {
  int nab;
  int64_t sab[CNN_MAX_DIMS];
  if (cnn_broadcast_shape("where", a, b, &nab, sab)) return -1;
  cnn_tensor tmp = {.ndim = nab};
  memcpy(tmp.shape, sab, sizeof(int64_t) * nab);
  return cnn_broadcast_shape("where", cond, &tmp, nd, shape);
}

static int run_where(cnn_dtype dt, cnn_tensor *out, cnn_tensor *cond, cnn_tensor *a,
                     cnn_tensor *b) {
  cnn_be_shape s;
  cnn_be_arg g[4];
  const cnn_backend *be = strided_args("where", 4, (cnn_tensor *[]){out, cond, a, b}, &s, g);
  if (!be) return -1;
  return CNN_BE_CALL(be, "where", where, cnn_backend_dev(out), cond->dtype, dt, &s, g[0], g[1],
                     g[2], g[3]);
}

cnn_tensor *cnn_where(cnn_tensor *cond, cnn_tensor *a, cnn_tensor *b) {
  if (check_operand("where", cond) || check_operand("where", a) || check_operand("where", b))
    return NULL;
  int nd;
  int64_t shape[CNN_MAX_DIMS];
  if (where_shape(cond, a, b, &nd, shape)) return NULL;
  cnn_dtype dt = promote_operands(a, b);
  cnn_tensor *ca = as_dtype(a, dt), *cb = ca ? as_dtype(b, dt) : NULL, *cc = cond;
  cnn_tensor_retain(cc);
  if (cb && (same_device("where", &ca, &cb) || to_op_device("where", &cc, ca)))
    cnn_tensor_release(cb), cb = NULL;
  cnn_tensor *out = cb ? result_like(nd, shape, dt, cnn_tensor_device(ca), ca, cb) : NULL;
  if (out && run_where(dt, out, cc, ca, cb)) cnn_tensor_release(out), out = NULL;
  cnn_tensor_release(cc);
  if (ca) cnn_tensor_release(ca);
  if (cb) cnn_tensor_release(cb);
  if (out && cnn_dtype_is_float(dt)) {
    cnn_node *n =
        cnn_autograd_record(out, "WhereBackward", cnn_where_backward, 2, (cnn_tensor *[]){a, b});
    if (n) cnn_node_save(n, 0, cond);
  }
  return out;
}
