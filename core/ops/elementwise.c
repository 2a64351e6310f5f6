/*
 * elementwise.c -- broadcasting binary ops, unary ops, where(), and the
 * fused derivative kernel of the unary ops (cnn_unary_grad), on the CPU.
 *
 * Design.  An op validates (devices, broadcast shapes), picks the result
 * dtype, converts operands whose dtype differs from the compute dtype (rare),
 * allocates the output and runs a strided iterator:
 *
 *   iter_t  -- up to 4 operands (output first) over the output shape; each
 *              operand has its own byte strides, 0 along broadcast dims.
 *              Size-1 dims are dropped and adjacent dims that are
 *              contiguous for every operand are merged, so same-shape
 *              contiguous tensors become one flat row (the fast path) and
 *              a transposed view still runs rows as long as its inner dim.
 *   row_fn  -- processes one row of n elements given each operand's start
 *              pointer and inner byte stride.  Row functions test for unit
 *              strides and broadcast scalars and then run plain loops that
 *              the compiler vectorises; the op is a compile-time constant in
 *              those loops (always_inline helpers behind one switch).
 *              float32 exp, log, tanh and sigmoid call the vectorised
 *              kernels of core/cpu/vector_math.c instead of libm per
 *              element (the GPU keeps libm's formulas).
 *
 * Large iterations (> CNN_EW_PARALLEL elements) split the flat index range
 * among OpenMP threads; small ones stay on the calling thread so a
 * 16-element add costs a few hundred nanoseconds.
 *
 * Dtypes: uint8 < int64 < float32 < float64.  As in PyTorch a 0-d tensor
 * does not promote a tensor with dimensions unless it is of a higher
 * category (integer < floating), so float32 tensor + float64 scalar stays
 * float32.  Division of integers is true division and gives float32;
 * comparisons give uint8 masks; integer pow with a negative exponent gives
 * 0 (1 or -1 for bases 1 and -1).  uint8 arithmetic wraps.
 *
 * Autograd: cnn_binary/cnn_unary/cnn_where record a node when an input
 * requires grad; the backward rules live in elementwise_grad.c.  In-place
 * versions bump t->version and refuse tensors that take part in autograd
 * while grad mode is on.
 *
 * Devices: operands share one device (a 0-d CPU tensor follows the other
 * operand, as in PyTorch; anything else mixed is an error naming both);
 * outputs are allocated there, and tensors on a CUDA device go through
 * run_device(), the one dispatch point to the backend's strided entries.
 *
 * Invariants: an iterator never writes through an operand other than 0;
 * the output of an in-place op has no internal overlap (no stride-0 dim
 * of size > 1); inputs that share the output's storage with a different
 * layout are copied first.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "cpu/vector_math.h"
#include "elementwise_math.h"
#include "tensor_internal.h"
#include "elementwise_ops.h"

#define CNN_EW_PARALLEL 32768
#define AI static inline __attribute__((always_inline))

/* backward rules, defined in elementwise_grad.c */
int cnn_binary_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin);
int cnn_unary_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin);
int cnn_where_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin);
bool cnn_unary_saves_output(cnn_unary_op op);
bool cnn_unary_grad_is_constant(cnn_unary_op op);
/* defined here, used by elementwise_grad.c */
cnn_tensor *cnn_unary_grad(cnn_unary_op op, cnn_tensor *g, cnn_tensor *x, cnn_tensor *y,
                           double p0, double p1);

/* ---- names ---------------------------------------------------------------- */

static const char *const binary_names[CNN_NBINARY] = {
    "add", "sub", "mul", "div", "pow", "maximum", "minimum",
    "eq",  "ne",  "lt",  "le",  "gt",  "ge"};
static const char *const unary_names[CNN_NUNARY] = {
    "neg",  "abs",  "exp",   "log",   "sqrt",       "rsqrt",      "tanh",       "sigmoid",
    "relu", "sin",  "cos",   "sign",  "floor",      "ceil",       "round",      "reciprocal",
    "square", "gelu", "log1p", "expm1", "leaky_relu", "elu",      "clamp",      "pow",
    "add",  "mul"};

const char *cnn_binary_name(cnn_binary_op op) {
  return (unsigned)op < CNN_NBINARY ? binary_names[op] : "?";
}
const char *cnn_unary_name(cnn_unary_op op) {
  return (unsigned)op < CNN_NUNARY ? unary_names[op] : "?";
}

static bool is_compare(cnn_binary_op op) { return op >= CNN_OP_EQ && op <= CNN_OP_GE; }

/* ---- dtypes ----------------------------------------------------------------- */

static int dtype_rank(cnn_dtype dt) {
  switch (dt) {
  case CNN_UINT8: return 0;
  case CNN_INT64: return 1;
  case CNN_FLOAT32: return 2;
  case CNN_FLOAT64: return 3;
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
    if (cnn_dtype_is_float(zero->dtype) && !cnn_dtype_is_float(dim->dtype))
      return zero->dtype;
    return dim->dtype;
  }
  return promote2(a->dtype, b->dtype);
}

static int check_operand(const char *op, const cnn_tensor *t) {
  if (!t) {
    cnn_set_error("%s: missing tensor argument", op);
    return -1;
  }
  if (dtype_rank(t->dtype) < 0) {
    cnn_set_error("%s: dtype %s not supported (use :float())", op, cnn_dtype_name(t->dtype));
    return -1;
  }
  return 0;
}

/* ---- devices: the one dispatch point of this file ------------------------------
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

/* out = op over operands ops[1..] on the device of out (strided entries) */
static int run_device(const char *op, int kind, int code, cnn_dtype dt, cnn_dtype aux,
                      double p0, double p1, int nops, cnn_tensor *const *ops) {
  const cnn_backend *be = cnn_cuda_backend(op);
  if (!be) return -1;
  for (int k = 1; k < nops; k++)
    if (cnn_check_same_device(op, ops[0], ops[k])) return -1;
  cnn_be_shape s = cnn_be_shape_of(ops[0]->ndim, ops[0]->shape);
  cnn_be_arg a[4];
  for (int k = 0; k < nops; k++) a[k] = cnn_be_arg_of(ops[k], &s);
  int dev = cnn_tensor_device(ops[0]).index;
  switch (kind) {
  case 0: return be->unary ? be->unary(dev, code, dt, &s, a[0], a[1], p0, p1) : cnn_backend_unsupported(op);
  case 1: return be->binary ? be->binary(dev, code, dt, &s, a[0], a[1], a[2]) : cnn_backend_unsupported(op);
  case 2: return be->unary_grad ? be->unary_grad(dev, code, dt, &s, a[0], a[1], a[2], p0, p1)
                                : cnn_backend_unsupported(op);
  default: return be->where ? be->where(dev, aux, dt, &s, a[0], a[1], a[2], a[3]) : cnn_backend_unsupported(op);
  }
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

int cnn_broadcast_shape(const char *op, const cnn_tensor *a, const cnn_tensor *b, int *ndim,
                        int64_t *shape) {
  int n = a->ndim > b->ndim ? a->ndim : b->ndim;
  for (int i = 0; i < n; i++) {
    int ia = a->ndim - n + i, ib = b->ndim - n + i;
    int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
      cnn_set_error("%s: shapes %s and %s cannot be broadcast", op,
                    cnn_tensor_shape_str(a, s1), cnn_tensor_shape_str(b, s2));
      return -1;
    }
    shape[i] = sa == 1 ? sb : sa;
  }
  *ndim = n;
  return 0;
}

/* ---- the strided iterator ---------------------------------------------------- */

#define ITER_MAX_OPS 4

typedef struct {
  int ndim; /* >= 1 after iter_init */
  int nops;
  int64_t shape[CNN_MAX_DIMS];
  char *ptr[ITER_MAX_OPS];
  int64_t st[ITER_MAX_OPS][CNN_MAX_DIMS]; /* byte strides; 0 = broadcast */
} iter_t;

/* One row: n elements, p[k] start of operand k, s[k] its byte stride. */
typedef void (*row_fn)(const void *ctx, int64_t n, char *const *p, const int64_t *s);

static void iter_coalesce(iter_t *it) {
  int nd = 0;
  for (int d = 0; d < it->ndim; d++) { /* drop size-1 dims */
    if (it->shape[d] == 1) continue;
    it->shape[nd] = it->shape[d];
    for (int k = 0; k < it->nops; k++) it->st[k][nd] = it->st[k][d];
    nd++;
  }
  int out = 0;
  for (int d = 1; d < nd; d++) { /* merge d into `out` when contiguous for all */
    bool ok = true;
    for (int k = 0; k < it->nops; k++)
      if (it->st[k][out] != it->st[k][d] * it->shape[d]) ok = false;
    if (ok) {
      it->shape[out] *= it->shape[d];
      for (int k = 0; k < it->nops; k++) it->st[k][out] = it->st[k][d];
    } else {
      out++;
      it->shape[out] = it->shape[d];
      for (int k = 0; k < it->nops; k++) it->st[k][out] = it->st[k][d];
    }
  }
  it->ndim = nd ? out + 1 : 1;
  if (!nd) {
    it->shape[0] = 1;
    for (int k = 0; k < it->nops; k++) it->st[k][0] = 0;
  }
}

/* ops[0] is the output (shape == shape); the others broadcast to it. */
static void iter_init(iter_t *it, int ndim, const int64_t *shape, int nops, cnn_tensor *const *ops) {
  it->ndim = ndim;
  it->nops = nops;
  memcpy(it->shape, shape, sizeof(int64_t) * ndim);
  for (int k = 0; k < nops; k++) {
    const cnn_tensor *t = ops[k];
    int64_t es = (int64_t)cnn_dtype_size(t->dtype);
    it->ptr[k] = (char *)cnn_tensor_data(t);
    for (int d = 0; d < ndim; d++) {
      int td = d - (ndim - t->ndim);
      bool bc = td < 0 || (t->shape[td] == 1 && shape[d] != 1);
      it->st[k][d] = bc ? 0 : t->stride[td] * es;
    }
  }
  iter_coalesce(it);
}

static int64_t iter_numel(const iter_t *it) {
  int64_t n = 1;
  for (int d = 0; d < it->ndim; d++) n *= it->shape[d];
  return n;
}

/* Run fn over flat elements [lo, hi) in row-major order. */
static void iter_range(const iter_t *it, row_fn fn, const void *ctx, int64_t lo, int64_t hi) {
  int nd = it->ndim, nops = it->nops;
  int64_t len = it->shape[nd - 1], idx[CNN_MAX_DIMS] = {0};
  int64_t row = lo / len, col = lo % len, s[ITER_MAX_OPS];
  for (int d = nd - 2; d >= 0; d--) {
    idx[d] = row % it->shape[d];
    row /= it->shape[d];
  }
  for (int k = 0; k < nops; k++) s[k] = it->st[k][nd - 1];
  while (lo < hi) {
    int64_t n = len - col < hi - lo ? len - col : hi - lo;
    char *p[ITER_MAX_OPS];
    for (int k = 0; k < nops; k++) {
      int64_t off = col * s[k];
      for (int d = 0; d < nd - 1; d++) off += idx[d] * it->st[k][d];
      p[k] = it->ptr[k] + off;
    }
    fn(ctx, n, p, s);
    lo += n;
    col = 0;
    for (int d = nd - 2; d >= 0; d--) {
      if (++idx[d] < it->shape[d]) break;
      idx[d] = 0;
    }
  }
}

static void iter_run(const iter_t *it, row_fn fn, const void *ctx) {
  int64_t n = iter_numel(it);
  if (n <= CNN_EW_PARALLEL || omp_get_max_threads() < 2) {
    if (n > 0) iter_range(it, fn, ctx, 0, n);
    return;
  }
#pragma omp parallel
  {
    int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
    if (hi > lo) iter_range(it, fn, ctx, lo, hi);
  }
}

/* ---- binary kernels ------------------------------------------------------------ */

typedef struct {
  int op;
  double p0, p1;
  cnn_dtype dt; /* compute dtype of the operands */
} ew_ctx;

AI void bin_row_f32_op(int op, int64_t n, char *const *p, const int64_t *s) {
  float *o = (float *)p[0];
  const float *a = (const float *)p[1], *b = (const float *)p[2];
  if (s[0] == 4 && s[1] == 4 && s[2] == 4) {
    for (int64_t i = 0; i < n; i++) o[i] = cnn_ew_binary_f32(op, a[i], b[i]);
  } else if (s[0] == 4 && s[1] == 4 && s[2] == 0) {
    float bv = *b;
    for (int64_t i = 0; i < n; i++) o[i] = cnn_ew_binary_f32(op, a[i], bv);
  } else if (s[0] == 4 && s[1] == 0 && s[2] == 4) {
    float av = *a;
    for (int64_t i = 0; i < n; i++) o[i] = cnn_ew_binary_f32(op, av, b[i]);
  } else {
    for (int64_t i = 0; i < n; i++)
      *(float *)(p[0] + i * s[0]) =
          cnn_ew_binary_f32(op, *(const float *)(p[1] + i * s[1]), *(const float *)(p[2] + i * s[2]));
  }
}
AI void bin_row_f64_op(int op, int64_t n, char *const *p, const int64_t *s) {
  double *o = (double *)p[0];
  const double *a = (const double *)p[1], *b = (const double *)p[2];
  if (s[0] == 8 && s[1] == 8 && s[2] == 8) {
    for (int64_t i = 0; i < n; i++) o[i] = cnn_ew_binary_f64(op, a[i], b[i]);
  } else if (s[0] == 8 && s[1] == 8 && s[2] == 0) {
    double bv = *b;
    for (int64_t i = 0; i < n; i++) o[i] = cnn_ew_binary_f64(op, a[i], bv);
  } else if (s[0] == 8 && s[1] == 0 && s[2] == 8) {
    double av = *a;
    for (int64_t i = 0; i < n; i++) o[i] = cnn_ew_binary_f64(op, av, b[i]);
  } else {
    for (int64_t i = 0; i < n; i++)
      *(double *)(p[0] + i * s[0]) =
          cnn_ew_binary_f64(op, *(const double *)(p[1] + i * s[1]), *(const double *)(p[2] + i * s[2]));
  }
}

static void bin_row_f32(const void *ctx, int64_t n, char *const *p, const int64_t *s) {
  switch (((const ew_ctx *)ctx)->op) {
  case CNN_OP_ADD: bin_row_f32_op(CNN_OP_ADD, n, p, s); break;
  case CNN_OP_SUB: bin_row_f32_op(CNN_OP_SUB, n, p, s); break;
  case CNN_OP_MUL: bin_row_f32_op(CNN_OP_MUL, n, p, s); break;
  case CNN_OP_DIV: bin_row_f32_op(CNN_OP_DIV, n, p, s); break;
  case CNN_OP_POW: bin_row_f32_op(CNN_OP_POW, n, p, s); break;
  case CNN_OP_MAXIMUM: bin_row_f32_op(CNN_OP_MAXIMUM, n, p, s); break;
  default: bin_row_f32_op(CNN_OP_MINIMUM, n, p, s); break;
  }
}
static void bin_row_f64(const void *ctx, int64_t n, char *const *p, const int64_t *s) {
  switch (((const ew_ctx *)ctx)->op) {
  case CNN_OP_ADD: bin_row_f64_op(CNN_OP_ADD, n, p, s); break;
  case CNN_OP_SUB: bin_row_f64_op(CNN_OP_SUB, n, p, s); break;
  case CNN_OP_MUL: bin_row_f64_op(CNN_OP_MUL, n, p, s); break;
  case CNN_OP_DIV: bin_row_f64_op(CNN_OP_DIV, n, p, s); break;
  case CNN_OP_POW: bin_row_f64_op(CNN_OP_POW, n, p, s); break;
  case CNN_OP_MAXIMUM: bin_row_f64_op(CNN_OP_MAXIMUM, n, p, s); break;
  default: bin_row_f64_op(CNN_OP_MINIMUM, n, p, s); break;
  }
}

static int64_t load_int(const char *p, cnn_dtype dt) {
  return dt == CNN_UINT8 ? *(const uint8_t *)p : *(const int64_t *)p;
}
static void store_int(char *p, cnn_dtype dt, int64_t v) {
  if (dt == CNN_UINT8) *(uint8_t *)p = (uint8_t)v;
  else *(int64_t *)p = v;
}
static void bin_row_int(const void *ctx, int64_t n, char *const *p, const int64_t *s) {
  const ew_ctx *c = ctx;
  for (int64_t i = 0; i < n; i++)
    store_int(p[0] + i * s[0], c->dt,
              cnn_ew_binary_i64(c->op, load_int(p[1] + i * s[1], c->dt), load_int(p[2] + i * s[2], c->dt)));
}

static int cmp_sign(const char *a, const char *b, cnn_dtype dt) {
  if (dt == CNN_FLOAT32 || dt == CNN_FLOAT64) {
    double x = dt == CNN_FLOAT32 ? *(const float *)a : *(const double *)a;
    double y = dt == CNN_FLOAT32 ? *(const float *)b : *(const double *)b;
    return x < y ? -1 : x > y ? 1 : x == y ? 0 : 2;
  }
  int64_t x = load_int(a, dt), y = load_int(b, dt);
  return x < y ? -1 : x > y ? 1 : 0;
}
static void cmp_row(const void *ctx, int64_t n, char *const *p, const int64_t *s) {
  const ew_ctx *c = ctx;
  for (int64_t i = 0; i < n; i++)
    *(uint8_t *)(p[0] + i * s[0]) =
        cnn_ew_compare(c->op, cmp_sign(p[1] + i * s[1], p[2] + i * s[2], c->dt));
}

static row_fn binary_row(cnn_binary_op op, cnn_dtype dt) {
  if (is_compare(op)) return cmp_row;
  if (dt == CNN_FLOAT32) return bin_row_f32;
  if (dt == CNN_FLOAT64) return bin_row_f64;
  return bin_row_int;
}

/* ---- unary kernels -------------------------------------------------------------- */

AI void un_row_f32_op(int op, const ew_ctx *c, int64_t n, char *const *p, const int64_t *s) {
  float p0 = (float)c->p0, p1 = (float)c->p1;
  if (s[0] == 4 && s[1] == 4) {
    float *o = (float *)p[0];
    const float *x = (const float *)p[1];
    for (int64_t i = 0; i < n; i++) o[i] = cnn_ew_unary_f32(op, x[i], p0, p1);
  } else {
    for (int64_t i = 0; i < n; i++)
      *(float *)(p[0] + i * s[0]) = cnn_ew_unary_f32(op, *(const float *)(p[1] + i * s[1]), p0, p1);
  }
}
AI void un_row_f64_op(int op, const ew_ctx *c, int64_t n, char *const *p, const int64_t *s) {
  if (s[0] == 8 && s[1] == 8) {
    double *o = (double *)p[0];
    const double *x = (const double *)p[1];
    for (int64_t i = 0; i < n; i++) o[i] = cnn_ew_unary_f64(op, x[i], c->p0, c->p1);
  } else {
    for (int64_t i = 0; i < n; i++)
      *(double *)(p[0] + i * s[0]) = cnn_ew_unary_f64(op, *(const double *)(p[1] + i * s[1]), c->p0, c->p1);
  }
}

/* exp, log, tanh and sigmoid of float32 rows go to the vectorised kernels
 * of core/cpu/vector_math.c (within 1 ulp of the correctly rounded result,
 * libm's special values): directly on unit-stride rows (in place or not),
 * through a stack buffer on strided ones, so that a value's result does
 * not depend on the layout.  The CUDA kernels keep elementwise_ops.h. */
typedef void (*vec_fn)(int64_t n, const float *x, float *y);

static vec_fn vec_kernel(int op) {
  switch (op) {
  case CNN_OP_EXP: return cnn_cpu_exp_f32;
  case CNN_OP_LOG: return cnn_cpu_log_f32;
  case CNN_OP_TANH: return cnn_cpu_tanh_f32;
  case CNN_OP_SIGMOID: return cnn_cpu_sigmoid_f32;
  default: return NULL;
  }
}

static bool un_row_f32_vec(int op, int64_t n, char *const *p, const int64_t *s) {
  vec_fn f = vec_kernel(op);
  if (!f) return false;
  if (s[0] == 4 && s[1] == 4) {
    f(n, (const float *)p[1], (float *)p[0]);
    return true;
  }
  enum { CHUNK = 256 };
  float buf[CHUNK];
  for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
    int64_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
    for (int64_t i = 0; i < m; i++) buf[i] = *(const float *)(p[1] + (i0 + i) * s[1]);
    f(m, buf, buf);
    for (int64_t i = 0; i < m; i++) *(float *)(p[0] + (i0 + i) * s[0]) = buf[i];
  }
  return true;
}

/* The hot ops get a loop of their own (vectorised); the rest share one
 * loop with the switch inside. */
static void un_row_f32(const void *ctx, int64_t n, char *const *p, const int64_t *s) {
  const ew_ctx *c = ctx;
  if (un_row_f32_vec(c->op, n, p, s)) return;
  switch (c->op) {
  case CNN_OP_NEG: un_row_f32_op(CNN_OP_NEG, c, n, p, s); break;
  case CNN_OP_RELU: un_row_f32_op(CNN_OP_RELU, c, n, p, s); break;
  case CNN_OP_ADD_SCALAR: un_row_f32_op(CNN_OP_ADD_SCALAR, c, n, p, s); break;
  case CNN_OP_MUL_SCALAR: un_row_f32_op(CNN_OP_MUL_SCALAR, c, n, p, s); break;
  case CNN_OP_SQUARE: un_row_f32_op(CNN_OP_SQUARE, c, n, p, s); break;
  case CNN_OP_ABS: un_row_f32_op(CNN_OP_ABS, c, n, p, s); break;
  case CNN_OP_SQRT: un_row_f32_op(CNN_OP_SQRT, c, n, p, s); break;
  case CNN_OP_CLAMP: un_row_f32_op(CNN_OP_CLAMP, c, n, p, s); break;
  default: un_row_f32_op(c->op, c, n, p, s); break;
  }
}
static void un_row_f64(const void *ctx, int64_t n, char *const *p, const int64_t *s) {
  const ew_ctx *c = ctx;
  switch (c->op) {
  case CNN_OP_NEG: un_row_f64_op(CNN_OP_NEG, c, n, p, s); break;
  case CNN_OP_RELU: un_row_f64_op(CNN_OP_RELU, c, n, p, s); break;
  case CNN_OP_ADD_SCALAR: un_row_f64_op(CNN_OP_ADD_SCALAR, c, n, p, s); break;
  case CNN_OP_MUL_SCALAR: un_row_f64_op(CNN_OP_MUL_SCALAR, c, n, p, s); break;
  default: un_row_f64_op(c->op, c, n, p, s); break;
  }
}

static void un_row_int(const void *ctx, int64_t n, char *const *p, const int64_t *s) {
  const ew_ctx *c = ctx;
  for (int64_t i = 0; i < n; i++)
    store_int(p[0] + i * s[0], c->dt, cnn_ew_unary_i64(c->op, load_int(p[1] + i * s[1], c->dt), c->p0, c->p1));
}

static row_fn unary_row(cnn_dtype dt) {
  return dt == CNN_FLOAT32 ? un_row_f32 : dt == CNN_FLOAT64 ? un_row_f64 : un_row_int;
}

/* Integer inputs keep their dtype for these ops; the others give float32. */
static bool unary_keeps_int(cnn_unary_op op, double p0) {
  switch (op) {
  case CNN_OP_NEG: case CNN_OP_ABS: case CNN_OP_SIGN: case CNN_OP_RELU: case CNN_OP_SQUARE:
  case CNN_OP_CLAMP: case CNN_OP_FLOOR: case CNN_OP_CEIL: case CNN_OP_ROUND:
    return true;
  case CNN_OP_ADD_SCALAR: case CNN_OP_MUL_SCALAR:
    return p0 == floor(p0) && fabs(p0) < 9e18;
  case CNN_OP_POW_SCALAR:
    return p0 == floor(p0) && p0 >= 0 && p0 < 64;
  default:
    return false;
  }
}

/* ---- binary ops ------------------------------------------------------------------ */

static int run_binary(cnn_binary_op op, cnn_dtype dt, cnn_tensor *out, cnn_tensor *a,
                      cnn_tensor *b) {
  if (cnn_on_cuda(out))
    return run_device(binary_names[op], 1, op, dt, dt, 0, 0, 3, (cnn_tensor *[]){out, a, b});
  iter_t it;
  ew_ctx c = {.op = op, .dt = dt};
  cnn_tensor *ops[3] = {out, a, b};
  iter_init(&it, out->ndim, out->shape, 3, ops);
  iter_run(&it, binary_row(op, dt), &c);
  return 0;
}

static cnn_dtype binary_compute_dtype(cnn_binary_op op, cnn_dtype promoted) {
  if (op == CNN_OP_DIV && !cnn_dtype_is_float(promoted)) return CNN_FLOAT32;
  return promoted;
}

static void record_binary(cnn_binary_op op, cnn_tensor *out, cnn_tensor *a, cnn_tensor *b) {
  static const char *const names[] = {"AddBackward", "SubBackward", "MulBackward", "DivBackward",
                                      "PowBackward", "MaximumBackward", "MinimumBackward"};
  if (is_compare(op) || !cnn_dtype_is_float(out->dtype)) return;
  cnn_node *n = cnn_autograd_record(out, names[op], cnn_binary_backward, 2,
                                    (cnn_tensor *[]){a, b});
  if (!n) return;
  n->ip[0] = op;
  bool need_a = op != CNN_OP_ADD && op != CNN_OP_SUB;
  if (need_a) cnn_node_save(n, 0, a), cnn_node_save(n, 1, b);
  if (op == CNN_OP_DIV || op == CNN_OP_POW) cnn_node_save(n, 2, out);
}

cnn_tensor *cnn_binary(cnn_binary_op op, cnn_tensor *a, cnn_tensor *b) {
  if ((unsigned)op >= CNN_NBINARY) {
    cnn_set_error("binary: unknown op %d", (int)op);
    return NULL;
  }
  const char *name = binary_names[op];
  if (check_operand(name, a) || check_operand(name, b)) return NULL;
  int nd;
  int64_t shape[CNN_MAX_DIMS];
  if (cnn_broadcast_shape(name, a, b, &nd, shape)) return NULL;
  cnn_dtype dt = binary_compute_dtype(op, promote_operands(a, b));
  cnn_tensor *ca = as_dtype(a, dt), *cb = ca ? as_dtype(b, dt) : NULL;
  if (cb && same_device(name, &ca, &cb)) cnn_tensor_release(cb), cb = NULL;
  cnn_tensor *out = cb ? cnn_empty(nd, shape, is_compare(op) ? CNN_UINT8 : dt, cnn_tensor_device(ca))
                       : NULL;
  if (out && run_binary(op, dt, out, ca, cb)) cnn_tensor_release(out), out = NULL;
  if (ca) cnn_tensor_release(ca);
  if (cb) cnn_tensor_release(cb);
  if (out) record_binary(op, out, a, b);
  return out;
}

/* Shared checks of the in-place ops: autograd and output overlap. */
static int check_inplace(const char *op, cnn_tensor *t, cnn_tensor *other) {
  char s[CNN_SHAPE_STR];
  if (cnn_grad_enabled() && t->requires_grad && !t->grad_fn) {
    cnn_set_error("%s_: a leaf tensor that requires grad (%s) cannot be modified in place "
                  "while grad mode is on (use no_grad)", op, cnn_tensor_shape_str(t, s));
    return -1;
  }
  if (cnn_grad_enabled() && (t->requires_grad || (other && other->requires_grad))) {
    cnn_set_error("%s_: in-place operations on tensors that take part in autograd are not "
                  "supported (%s); use the out-of-place %s", op, cnn_tensor_shape_str(t, s), op);
    return -1;
  }
  for (int d = 0; d < t->ndim; d++)
    if (t->stride[d] == 0 && t->shape[d] > 1) {
      cnn_set_error("%s_: the tensor (%s) is an expanded view; write to a contiguous copy",
                    op, cnn_tensor_shape_str(t, s));
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
  const char *name = binary_names[op];
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
  return check_inplace(name, a, b);
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
  if (!cb || to_op_device(binary_names[op], &cb, a)) return cnn_tensor_release(cb), -1;
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
  if (cnn_on_cuda(out))
    return run_device(unary_names[op], 0, op, dt, dt, p0, p1, 2, (cnn_tensor *[]){out, x});
  iter_t it;
  ew_ctx c = {.op = op, .p0 = p0, .p1 = p1, .dt = dt};
  cnn_tensor *ops[2] = {out, x};
  iter_init(&it, out->ndim, out->shape, 2, ops);
  iter_run(&it, unary_row(dt), &c);
  return 0;
}

static const char *const unary_grad_names[CNN_NUNARY] = {
    "NegBackward", "AbsBackward", "ExpBackward", "LogBackward", "SqrtBackward",
    "RsqrtBackward", "TanhBackward", "SigmoidBackward", "ReluBackward", "SinBackward",
    "CosBackward", "SignBackward", "FloorBackward", "CeilBackward", "RoundBackward",
    "ReciprocalBackward", "SquareBackward", "GeluBackward", "Log1pBackward", "Expm1Backward",
    "LeakyReluBackward", "EluBackward", "ClampBackward", "PowBackward", "AddBackward",
    "MulBackward"};

static void record_unary(cnn_unary_op op, cnn_tensor *out, cnn_tensor *x, double p0, double p1) {
  if (!cnn_dtype_is_float(out->dtype)) return;
  cnn_node *n = cnn_autograd_record(out, unary_grad_names[op], cnn_unary_backward, 1,
                                    (cnn_tensor *[]){x});
  if (!n) return;
  n->ip[0] = op;
  n->p[0] = p0, n->p[1] = p1;
  if (!cnn_unary_grad_is_constant(op)) cnn_node_save(n, 0, cnn_unary_saves_output(op) ? out : x);
}

static int check_unary(cnn_unary_op op, cnn_tensor *x) {
  if ((unsigned)op >= CNN_NUNARY) {
    cnn_set_error("unary: unknown op %d", (int)op);
    return -1;
  }
  return check_operand(unary_names[op], x);
}

static cnn_dtype unary_dtype(cnn_unary_op op, cnn_dtype in, double p0) {
  if (cnn_dtype_is_float(in) || unary_keeps_int(op, p0)) return in;
  return CNN_FLOAT32;
}

cnn_tensor *cnn_unary(cnn_unary_op op, cnn_tensor *x, double p0, double p1) {
  if (check_unary(op, x)) return NULL;
  if (op == CNN_OP_CLAMP) { /* NaN bound = open */
    if (p0 != p0) p0 = -INFINITY;
    if (p1 != p1) p1 = INFINITY;
  }
  cnn_dtype dt = unary_dtype(op, x->dtype, p0);
  cnn_tensor *cx = as_dtype(x, dt);
  cnn_tensor *out = cx ? cnn_empty(x->ndim, x->shape, dt, cnn_tensor_device(x)) : NULL;
  if (out && run_unary(op, dt, out, cx, p0, p1)) cnn_tensor_release(out), out = NULL;
  if (cx) cnn_tensor_release(cx);
  if (out) record_unary(op, out, x, p0, p1);
  return out;
}

int cnn_unary_(cnn_unary_op op, cnn_tensor *x, double p0, double p1) {
  if (check_unary(op, x) || check_inplace(unary_names[op], x, NULL)) return -1;
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

/* ---- unary derivatives: grad_in = g * f'(x) in one pass ----------------------------
 * Operands: out, g, and v = x or y (the op's output) as cnn_unary_saves_output()
 * says.  Computed in double per element (backward is not the hot path of
 * most of these; relu's has its own branch-free form). */

static double load_f(const char *p, cnn_dtype dt) {
  return dt == CNN_FLOAT32 ? *(const float *)p : *(const double *)p;
}

static void deriv_row(const void *ctx, int64_t n, char *const *p, const int64_t *s) {
  const ew_ctx *c = ctx;
  if (c->op == CNN_OP_RELU && c->dt == CNN_FLOAT32 && s[0] == 4 && s[1] == 4 && s[2] == 4) {
    float *o = (float *)p[0];
    const float *g = (const float *)p[1], *x = (const float *)p[2];
    for (int64_t i = 0; i < n; i++) o[i] = x[i] > 0 ? g[i] : 0.0f;
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    double g = load_f(p[1] + i * s[1], c->dt), v = load_f(p[2] + i * s[2], c->dt);
    double r = g * cnn_ew_unary_deriv(c->op, v, c->p0, c->p1);
    if (c->dt == CNN_FLOAT32) *(float *)(p[0] + i * s[0]) = (float)r;
    else *(double *)(p[0] + i * s[0]) = r;
  }
}

/* g * f'(x) for unary op `op`; pass x, or y for ops whose derivative uses the
 * output (cnn_unary_saves_output).  Shapes of g and x/y must match. */
cnn_tensor *cnn_unary_grad(cnn_unary_op op, cnn_tensor *g, cnn_tensor *x, cnn_tensor *y,
                           double p0, double p1) {
  cnn_tensor *v = cnn_unary_saves_output(op) ? y : x;
  if (check_unary(op, g) || !v || check_operand(unary_names[op], v)) return NULL;
  if (!cnn_same_shape(g, v)) {
    char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
    cnn_set_error("%s backward: gradient %s does not match input %s", unary_names[op],
                  cnn_tensor_shape_str(g, s1), cnn_tensor_shape_str(v, s2));
    return NULL;
  }
  cnn_dtype dt = promote2(promote2(g->dtype, v->dtype), CNN_FLOAT32);
  cnn_tensor *cg = as_dtype(g, dt), *cv = cg ? as_dtype(v, dt) : NULL;
  if (cv && same_device(unary_names[op], &cg, &cv)) cnn_tensor_release(cv), cv = NULL;
  cnn_tensor *out = cv ? cnn_empty(g->ndim, g->shape, dt, cnn_tensor_device(cg)) : NULL;
  if (out && cnn_on_cuda(out)) {
    if (run_device(unary_names[op], 2, op, dt, dt, p0, p1, 3, (cnn_tensor *[]){out, cg, cv}))
      cnn_tensor_release(out), out = NULL;
  } else if (out) {
    iter_t it;
    ew_ctx c = {.op = op, .p0 = p0, .p1 = p1, .dt = dt};
    iter_init(&it, out->ndim, out->shape, 3, (cnn_tensor *[]){out, cg, cv});
    iter_run(&it, deriv_row, &c);
  }
  if (cg) cnn_tensor_release(cg);
  if (cv) cnn_tensor_release(cv);
  return out;
}

/* ---- where --------------------------------------------------------------------------- */

static void where_row(const void *ctx, int64_t n, char *const *p, const int64_t *s) {
  const ew_ctx *c = ctx;
  size_t es = cnn_dtype_size(c->dt);
  cnn_dtype cdt = (cnn_dtype)c->op; /* dtype of the condition */
  for (int64_t i = 0; i < n; i++) {
    const char *cp = p[1] + i * s[1];
    bool t = cdt == CNN_UINT8 ? *(const uint8_t *)cp != 0
             : cdt == CNN_INT64 ? *(const int64_t *)cp != 0
                                : load_f(cp, cdt) != 0;
    memcpy(p[0] + i * s[0], t ? p[2] + i * s[2] : p[3] + i * s[3], es);
  }
}

static int where_shape(cnn_tensor *cond, cnn_tensor *a, cnn_tensor *b, int *nd, int64_t *shape) {
  int nab;
  int64_t sab[CNN_MAX_DIMS];
  if (cnn_broadcast_shape("where", a, b, &nab, sab)) return -1;
  cnn_tensor tmp = {.ndim = nab};
  memcpy(tmp.shape, sab, sizeof(int64_t) * nab);
  return cnn_broadcast_shape("where", cond, &tmp, nd, shape);
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
  cnn_tensor *out = cb ? cnn_empty(nd, shape, dt, cnn_tensor_device(ca)) : NULL;
  if (out && cnn_on_cuda(out)) {
    if (run_device("where", 3, 0, dt, cc->dtype, 0, 0, 4, (cnn_tensor *[]){out, cc, ca, cb}))
      cnn_tensor_release(out), out = NULL;
  } else if (out) {
    iter_t it;
    ew_ctx c = {.op = (int)cond->dtype, .dt = dt};
    iter_init(&it, nd, shape, 4, (cnn_tensor *[]){out, cc, ca, cb});
    iter_run(&it, where_row, &c);
  }
  cnn_tensor_release(cc);
  if (ca) cnn_tensor_release(ca);
  if (cb) cnn_tensor_release(cb);
  if (out && cnn_dtype_is_float(dt)) {
    cnn_node *n = cnn_autograd_record(out, "WhereBackward", cnn_where_backward, 2,
                                      (cnn_tensor *[]){a, b});
    if (n) cnn_node_save(n, 0, cond);
  }
  return out;
}
