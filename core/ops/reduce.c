/*
 * reduce.c -- reductions over a set of dimensions (sum, mean, max, min,
 * prod, var, std, norm, argmax, argmin), max/min with indices along one
 * dimension, and sum_to (undo a broadcast).
 *
 * Design.  A reduction over the dimension mask `dims` sees the input as an
 * M x R matrix: M = product of the kept dims (the output's elements), R =
 * product of the reduced dims.  The input is permuted so the kept dims come
 * first, in order, then the reduced ones, in order, and made contiguous
 * (a no-op when they already are, e.g. reducing trailing dims); each output
 * element then reduces one contiguous row of R elements.  Flat positions
 * within a row are row-major over the reduced dims, which is what argmax
 * over all dims returns.  Reducing the leading dims of a contiguous tensor
 * (a bias gradient, sum_to) takes a column-accumulation path instead, with
 * no copy.
 *
 * Accumulation is in double for floating inputs (float32 sums included)
 * and in int64 for integer sum/prod.  NaN propagates through max/min (the
 * first NaN wins, as PyTorch).  Output dtypes: sum/prod of integers give
 * int64, mean/var/std/norm of integers give float32, argmax/argmin give
 * int64 (0-based), everything else keeps the input dtype.
 *
 * float16 (on a backend with `half`: inference on cuda) reduces a float32
 * copy and casts floating results back to float16, all recorded, so
 * autograd composes (argmax/argmin and the indices of max/min along a
 * dimension are the same: the cast is exact); the CPU refuses float16.
 *
 * Devices: the output is allocated on x's device and the rows (permuted
 * and made contiguous there) go to its backend's row reduction
 * (core/cpu/reduce.c on the CPU, which also has the column path).
 *
 * Autograd: nodes are recorded here; the rules are in reduce_grad.c.
 */
#include <string.h>

#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "ops_internal.h"
#include "tensor_internal.h"

/* indexed by the enum (designated), so a reordered cnn_reduce_op cannot mislabel */
static const char *const red_names[CNN_NREDUCE] = {
    [CNN_RED_SUM] = "sum",      [CNN_RED_MEAN] = "mean", [CNN_RED_MAX] = "max",
    [CNN_RED_MIN] = "min",      [CNN_RED_PROD] = "prod", [CNN_RED_VAR] = "var",
    [CNN_RED_STD] = "std",      [CNN_RED_NORM] = "norm", [CNN_RED_ARGMAX] = "argmax",
    [CNN_RED_ARGMIN] = "argmin"};
static const char *const red_grad_names[CNN_NREDUCE] = {
    [CNN_RED_SUM] = "SumBackward",  [CNN_RED_MEAN] = "MeanBackward", [CNN_RED_MAX] = "AmaxBackward",
    [CNN_RED_MIN] = "AminBackward", [CNN_RED_PROD] = "ProdBackward", [CNN_RED_VAR] = "VarBackward",
    [CNN_RED_STD] = "StdBackward",  [CNN_RED_NORM] = "NormBackward"}; /* arg*: none */

/* ---- shapes ------------------------------------------------------------------ */

typedef struct {
  uint32_t dims; /* normalised mask: every reduced dim */
  int64_t M, R;  /* kept elements, reduced elements */
  int out_ndim;
  int64_t out_shape[CNN_MAX_DIMS];
  int64_t keep_shape[CNN_MAX_DIMS]; /* x's shape with reduced dims = 1 */
} red_plan;

static int plan_reduce(const char *op, const cnn_tensor *x, uint32_t dims, bool keepdim,
                       red_plan *pl) {
  char s[CNN_SHAPE_STR];
  if (dims >> x->ndim && x->ndim < 32) {
    int bad = 0;
    while (!((dims >> bad) & 1) || bad < x->ndim) bad++;
    cnn_set_error("%s: dimension %d out of range for input %s", op, bad + 1,
                  cnn_tensor_shape_str(x, s));
    return -1;
  }
  pl->dims = dims ? dims : (x->ndim ? (uint32_t)((1ull << x->ndim) - 1) : 0);
  pl->M = 1, pl->R = 1, pl->out_ndim = 0;
  for (int d = 0; d < x->ndim; d++) {
    bool red = (pl->dims >> d) & 1;
    pl->keep_shape[d] = red ? 1 : x->shape[d];
    if (red)
      pl->R *= x->shape[d];
    else
      pl->M *= x->shape[d];
    if (!red || keepdim) pl->out_shape[pl->out_ndim++] = red ? 1 : x->shape[d];
  }
  return 0;
}

static cnn_dtype reduce_dtype(cnn_reduce_op op, cnn_dtype in) {
  switch (op) {
  case CNN_RED_SUM:
  case CNN_RED_PROD: return cnn_dtype_is_float(in) ? in : CNN_INT64;
  case CNN_RED_MEAN:
  case CNN_RED_VAR:
  case CNN_RED_STD:
  case CNN_RED_NORM: return cnn_dtype_is_float(in) ? in : CNN_FLOAT32;
  case CNN_RED_ARGMAX:
  case CNN_RED_ARGMIN: return CNN_INT64;
  default: return in;
  }
}

/* x permuted (kept dims first) and contiguous: M rows of R elements */
static cnn_tensor *as_rows(cnn_tensor *x, uint32_t dims) {
  int perm[CNN_MAX_DIMS], k = 0;
  for (int d = 0; d < x->ndim; d++)
    if (!((dims >> d) & 1)) perm[k++] = d;
  for (int d = 0; d < x->ndim; d++)
    if ((dims >> d) & 1) perm[k++] = d;
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *p = cnn_permute(x, perm);
  cnn_tensor *c = p ? cnn_contiguous(p) : NULL;
  cnn_set_grad_enabled(prev);
  cnn_tensor_release(p);
  return c;
}

/* ---- the backend's entries ---------------------------------------------------------------- */

static int reduce_rows(cnn_reduce_op op, const cnn_tensor *rows, int64_t M, int64_t R, double p,
                       cnn_tensor *out) {
  const cnn_backend *be = cnn_backend_of(rows, red_names[op]);
  if (!be) return -1;
  return CNN_BE_CALL(be, red_names[op], reduce, cnn_backend_dev(rows), op, rows->dtype, out->dtype,
                     M, R, cnn_tensor_data(rows), cnn_tensor_data(out), p);
}

/* sum/mean over leading dims without a permuted copy, where the backend
 * has the entry; 1 when done, 0 when the caller takes the row path, -1 */
static int reduce_leading(cnn_reduce_op op, const cnn_tensor *x, int64_t M, int64_t R,
                          cnn_tensor *out) {
  const cnn_backend *be = cnn_backend_of(x, red_names[op]);
  if (!be) return -1;
  if (!be->reduce_leading) return 0;
  return be->reduce_leading(cnn_backend_dev(x), x->dtype, out->dtype, R, M, cnn_tensor_data(x),
                            cnn_tensor_data(out), op == CNN_RED_MEAN)
             ? -1
             : 1;
}

static bool leading_dims_only(const cnn_tensor *x, uint32_t dims) {
  int k = 0;
  while (k < x->ndim && ((dims >> k) & 1)) k++;
  return k > 0 && k < x->ndim && (dims >> k) == 0;
}

/* ---- validation ------------------------------------------------------------------------ */

static int check_reduce(cnn_reduce_op op, const cnn_tensor *x, uint32_t dims, double p,
                        const red_plan *pl) {
  const char *name = red_names[op];
  char s[CNN_SHAPE_STR];
  if (x->dtype != CNN_FLOAT32 && x->dtype != CNN_FLOAT64 && x->dtype != CNN_INT64 &&
      x->dtype != CNN_UINT8 && !cnn_half_ok(x)) {
    cnn_set_error("%s: dtype %s not supported", name, cnn_dtype_name(x->dtype));
    return -1;
  }
  bool one_dim = dims && !(dims & (dims - 1));
  if ((op == CNN_RED_ARGMAX || op == CNN_RED_ARGMIN) && dims && !one_dim) {
    cnn_set_error("%s: reduces one dimension or all of them (input %s)", name,
                  cnn_tensor_shape_str(x, s));
    return -1;
  }
  bool needs_elems =
      op == CNN_RED_MAX || op == CNN_RED_MIN || op == CNN_RED_ARGMAX || op == CNN_RED_ARGMIN;
  if (needs_elems && pl->R == 0 && pl->M > 0) {
    cnn_set_error("%s: cannot reduce over an empty dimension (input %s)", name,
                  cnn_tensor_shape_str(x, s));
    return -1;
  }
  if (p != p && (op == CNN_RED_NORM || op == CNN_RED_VAR || op == CNN_RED_STD)) {
    cnn_set_error("%s: parameter is NaN", name);
    return -1;
  }
  return 0;
}

static void record_reduce(cnn_reduce_op op, cnn_tensor *out, cnn_tensor *x, const red_plan *pl,
                          bool keepdim, double p) {
  if (!red_grad_names[op] || !cnn_dtype_is_float(out->dtype)) return;
  cnn_node *n = cnn_autograd_record(out, red_grad_names[op], cnn_reduce_backward, 1, &x);
  if (!n) return;
  n->ip[0] = op, n->ip[1] = pl->dims, n->ip[2] = keepdim;
  n->p[0] = p;
  if (op != CNN_RED_SUM && op != CNN_RED_MEAN) cnn_node_save(n, 0, x);
  if (op != CNN_RED_SUM && op != CNN_RED_MEAN && op != CNN_RED_VAR && op != CNN_RED_PROD)
    cnn_node_save(n, 1, out);
}

/* ---- float16: a float32 pass ------------------------------------------------------------ */

/* t (a new reference) in dtype dt when t is floating, recorded; t released */
static cnn_tensor *float_result_as(cnn_tensor *t, cnn_dtype dt) {
  if (!t || !cnn_dtype_is_float(t->dtype)) return t;
  cnn_tensor *r = cnn_to_dtype(t, dt);
  cnn_tensor_release(t);
  return r;
}

static cnn_tensor *reduce_half(cnn_reduce_op op, cnn_tensor *x, uint32_t dims, bool keepdim,
                               double p) {
  cnn_tensor *xf = cnn_to_dtype(x, CNN_FLOAT32);
  cnn_tensor *r = xf ? cnn_reduce(op, xf, dims, keepdim, p) : NULL;
  cnn_tensor_release(xf);
  return float_result_as(r, x->dtype);
}

/* ---- public ------------------------------------------------------------------------------ */

cnn_tensor *cnn_reduce(cnn_reduce_op op, cnn_tensor *x, uint32_t dims, bool keepdim, double p) {
  if ((unsigned)op >= CNN_NREDUCE) return cnn_set_error("reduce: unknown op %d", (int)op), NULL;
  if (!x) return cnn_set_error("%s: missing tensor", red_names[op]), NULL;
  red_plan pl;
  if (plan_reduce(red_names[op], x, dims, keepdim, &pl) || check_reduce(op, x, dims, p, &pl))
    return NULL;
  if (x->dtype == CNN_FLOAT16) return reduce_half(op, x, dims, keepdim, p);
  cnn_tensor *out =
      cnn_empty(pl.out_ndim, pl.out_shape, reduce_dtype(op, x->dtype), cnn_tensor_device(x));
  if (!out) return NULL;
  bool fast = (op == CNN_RED_SUM || op == CNN_RED_MEAN) && cnn_dtype_is_float(x->dtype) &&
              cnn_tensor_is_contiguous(x) && leading_dims_only(x, pl.dims);
  int done = fast ? reduce_leading(op, x, pl.M, pl.R, out) : 0;
  if (done < 0) return cnn_tensor_release(out), NULL;
  if (!done && pl.M > 0) {
    cnn_tensor *rows = as_rows(x, pl.dims);
    if (!rows) return cnn_tensor_release(out), NULL;
    int rc = reduce_rows(op, rows, pl.M, pl.R, p, out);
    cnn_tensor_release(rows);
    if (rc) return cnn_tensor_release(out), NULL;
  }
  record_reduce(op, out, x, &pl, keepdim, p);
  return out;
}

static int check_max_dim(const char *op, const cnn_tensor *x, int dim) {
  char s[CNN_SHAPE_STR];
  if (x->ndim == 0 && (dim == 0 || dim == -1)) return 0;
  if (dim < 0 || dim >= x->ndim) {
    cnn_set_error("%s: dimension %d out of range for input %s", op, dim + 1,
                  cnn_tensor_shape_str(x, s));
    return -1;
  }
  return 0;
}

/* values (x's dtype) and int64 0-based indices of the max/min along dim */
int cnn_max_dim(cnn_tensor *x, int dim, bool keepdim, bool is_min, cnn_tensor **values,
                cnn_tensor **indices) {
  const char *op = is_min ? "min" : "max";
  *values = NULL;
  if (indices) *indices = NULL;
  if (!x) return cnn_set_error("%s: missing tensor", op), -1;
  if (check_max_dim(op, x, dim)) return -1;
  if (cnn_half_ok(x)) { /* a float32 pass, as cnn_reduce */
    cnn_tensor *xf = cnn_to_dtype(x, CNN_FLOAT32);
    int rc = xf ? cnn_max_dim(xf, dim, keepdim, is_min, values, indices) : -1;
    cnn_tensor_release(xf);
    if (rc == 0 && !(*values = float_result_as(*values, x->dtype)) && indices)
      cnn_tensor_release(*indices), *indices = NULL, rc = -1;
    return rc;
  }
  uint32_t mask = x->ndim ? 1u << dim : 0;
  cnn_tensor *idx = cnn_reduce(is_min ? CNN_RED_ARGMIN : CNN_RED_ARGMAX, x, mask, keepdim, 0);
  if (!idx) return -1;
  red_plan pl;
  plan_reduce(op, x, mask, keepdim, &pl);
  cnn_tensor *val = cnn_empty(pl.out_ndim, pl.out_shape, x->dtype, cnn_tensor_device(x));
  if (!val) return cnn_tensor_release(idx), -1;
  cnn_tensor *rows = pl.M ? as_rows(x, pl.dims) : NULL;
  if (pl.M && !rows) return cnn_tensor_release(idx), cnn_tensor_release(val), -1;
  /* the values are the row maxima themselves (the same first-max rule) */
  if (pl.M && reduce_rows(is_min ? CNN_RED_MIN : CNN_RED_MAX, rows, pl.M, pl.R, 0, val))
    return cnn_tensor_release(rows), cnn_tensor_release(idx), cnn_tensor_release(val), -1;
  cnn_tensor_release(rows);
  cnn_node *n = cnn_dtype_is_float(x->dtype)
                    ? cnn_autograd_record(val, is_min ? "MinBackward" : "MaxBackward",
                                          cnn_max_dim_backward, 1, &x)
                    : NULL;
  if (n) cnn_node_save(n, 0, idx), n->ip[0] = dim, n->ip[1] = keepdim;
  *values = val;
  if (indices)
    *indices = idx;
  else
    cnn_tensor_release(idx);
  return 0;
}

cnn_tensor *cnn_sum_to(cnn_tensor *x, int ndim, const int64_t *shape) {
  char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
  int lead = x->ndim - ndim;
  uint32_t mask = 0;
  bool ok = lead >= 0;
  for (int d = 0; ok && d < ndim; d++) {
    int64_t have = x->shape[lead + d];
    if (shape[d] == have) continue;
    if (shape[d] == 1)
      mask |= 1u << (lead + d);
    else
      ok = false;
  }
  if (!ok) {
    cnn_set_error("sum_to: cannot reduce %s to %s", cnn_tensor_shape_str(x, s1),
                  cnn_shape_str(ndim, shape, s2));
    return NULL;
  }
  for (int d = 0; d < lead; d++) mask |= 1u << d;
  if (!mask) {
    cnn_tensor_retain(x);
    return x;
  }
  cnn_tensor *r = cnn_reduce(CNN_RED_SUM, x, mask, true, 0);
  if (!r) return NULL;
  cnn_tensor *v = cnn_view(r, ndim, shape);
  cnn_tensor_release(r);
  return v;
}
