/*
 * elementwise.c -- the CPU backend's strided entries: unary, binary,
 * unary_grad (g * f'(v)) and where (core/backend.h's signatures; core/ops/
 * elementwise.c validates, promotes, allocates and records autograd).
 *
 * Design.  Every entry runs one strided iterator:
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
 *              float32 exp, log, expm1, tanh, sigmoid, gelu, elu,
 *              softplus and mish call the vectorised kernels of
 *              core/cpu/vector_math.c instead of libm per element (the
 *              GPU keeps libm's formulas).
 *
 * Large iterations (> CNN_EW_PARALLEL elements) split the flat index range
 * among OpenMP threads; small ones stay on the calling thread so a
 * 16-element add costs a few hundred nanoseconds.
 *
 * Invariant: an iterator never writes through an operand other than 0.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "backend.h"
#include "cpu/backend_cpu.h"
#include "cpu/vector_math.h"
#include "elementwise_math.h"
#include "elementwise_ops.h"
#include "strided.h"

#define CNN_EW_PARALLEL 32768
#define AI              static inline __attribute__((always_inline))

static bool is_compare(cnn_binary_op op) { return op >= CNN_OP_EQ && op <= CNN_OP_GE; }

/* ---- the strided iterator ---------------------------------------------------- */

#define ITER_MAX_OPS CNN_STRIDED_MAX_OPS

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
  it->ndim = cnn_strided_coalesce(it->ndim, it->shape, it->nops, it->st);
}

/* operand k: *a[k] over s, elements of es[k] bytes; operand 0 is the output.
 * Pointers to the entries' by-value arguments: no copy of 72 bytes each. */
static void iter_init(iter_t *it, const cnn_be_shape *s, int nops, const cnn_be_arg *const *a,
                      const size_t *es) {
  it->ndim = s->ndim;
  it->nops = nops;
  memcpy(it->shape, s->shape, sizeof(int64_t) * s->ndim);
  for (int k = 0; k < nops; k++) {
    it->ptr[k] = a[k]->ptr;
    for (int d = 0; d < s->ndim; d++) it->st[k][d] = a[k]->stride[d] * (int64_t)es[k];
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
      *(float *)(p[0] + i * s[0]) = cnn_ew_binary_f32(op, *(const float *)(p[1] + i * s[1]),
                                                      *(const float *)(p[2] + i * s[2]));
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
      *(double *)(p[0] + i * s[0]) = cnn_ew_binary_f64(op, *(const double *)(p[1] + i * s[1]),
                                                       *(const double *)(p[2] + i * s[2]));
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
  case CNN_OP_ADD_RELU: bin_row_f32_op(CNN_OP_ADD_RELU, n, p, s); break;
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
  case CNN_OP_ADD_RELU: bin_row_f64_op(CNN_OP_ADD_RELU, n, p, s); break;
  default: bin_row_f64_op(CNN_OP_MINIMUM, n, p, s); break;
  }
}

static int64_t load_int(const char *p, cnn_dtype dt) {
  return dt == CNN_UINT8 ? *(const uint8_t *)p : *(const int64_t *)p;
}
static void store_int(char *p, cnn_dtype dt, int64_t v) {
  if (dt == CNN_UINT8)
    *(uint8_t *)p = (uint8_t)v;
  else
    *(int64_t *)p = v;
}
static void bin_row_int(const void *ctx, int64_t n, char *const *p, const int64_t *s) {
  const ew_ctx *c = ctx;
  for (int64_t i = 0; i < n; i++)
    store_int(p[0] + i * s[0], c->dt,
              cnn_ew_binary_i64(c->op, load_int(p[1] + i * s[1], c->dt),
                                load_int(p[2] + i * s[2], c->dt)));
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
      *(double *)(p[0] + i * s[0]) =
          cnn_ew_unary_f64(op, *(const double *)(p[1] + i * s[1]), c->p0, c->p1);
  }
}

/* exp, log, expm1, tanh, sigmoid, gelu (both forms), elu, softplus and
 * mish of float32 rows go to the vectorised kernels of
 * core/cpu/vector_math.c (within 1 ulp of the exact result, the special
 * values of libm and of elementwise_math.h's formulas): directly on
 * unit-stride rows (in place or not), through a stack buffer on strided
 * ones, so that a value's result does not depend on the layout.  The CUDA
 * kernels keep elementwise_ops.h.  Returns false, having done nothing,
 * when op has no kernel (so n = 0 asks whether it has one). */
static bool vec_apply(int op, int64_t n, const float *x, float *y, float p0, float p1) {
  switch (op) {
  case CNN_OP_EXP: cnn_cpu_exp_f32(n, x, y); return true;
  case CNN_OP_LOG: cnn_cpu_log_f32(n, x, y); return true;
  case CNN_OP_EXPM1: cnn_cpu_expm1_f32(n, x, y); return true;
  case CNN_OP_TANH: cnn_cpu_tanh_f32(n, x, y); return true;
  case CNN_OP_SIGMOID: cnn_cpu_sigmoid_f32(n, x, y); return true;
  case CNN_OP_GELU: cnn_cpu_gelu_f32(n, x, y); return true;
  case CNN_OP_GELU_TANH: cnn_cpu_gelu_tanh_f32(n, x, y); return true;
  case CNN_OP_ELU: cnn_cpu_elu_f32(n, x, y, p0); return true;
  case CNN_OP_SOFTPLUS: cnn_cpu_softplus_f32(n, x, y, p0, p1); return true;
  case CNN_OP_MISH: cnn_cpu_mish_f32(n, x, y); return true;
  default: return false;
  }
}

static bool un_row_f32_vec(const ew_ctx *c, int64_t n, char *const *p, const int64_t *s) {
  float p0 = (float)c->p0, p1 = (float)c->p1;
  if (s[0] == 4 && s[1] == 4) /* the common row: one call, which also says whether op has one */
    return vec_apply(c->op, n, (const float *)p[1], (float *)p[0], p0, p1);
  if (!vec_apply(c->op, 0, NULL, NULL, p0, p1)) return false;
  enum { CHUNK = 256 };
  float buf[CHUNK];
  for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
    int64_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
    for (int64_t i = 0; i < m; i++) buf[i] = *(const float *)(p[1] + (i0 + i) * s[1]);
    vec_apply(c->op, m, buf, buf, p0, p1);
    for (int64_t i = 0; i < m; i++) *(float *)(p[0] + (i0 + i) * s[0]) = buf[i];
  }
  return true;
}

/* The hot ops get a loop of their own (vectorised); the rest share one
 * loop with the switch inside. */
static void un_row_f32(const void *ctx, int64_t n, char *const *p, const int64_t *s) {
  const ew_ctx *c = ctx;
  if (un_row_f32_vec(c, n, p, s)) return;
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
    store_int(p[0] + i * s[0], c->dt,
              cnn_ew_unary_i64(c->op, load_int(p[1] + i * s[1], c->dt), c->p0, c->p1));
}

static row_fn unary_row(cnn_dtype dt) {
  return dt == CNN_FLOAT32 ? un_row_f32 : dt == CNN_FLOAT64 ? un_row_f64 : un_row_int;
}

/* Integer inputs keep their dtype for these ops; the others give float32. */
/* ---- unary derivatives: out = g * f'(v) -------------------------------------------------
 * v = x or y (the op's output) as the op's `saves` says.  Computed
 * in double per element (backward is not the hot path of most of these;
 * relu's has its own branch-free form, and float32 gelu, elu, softplus
 * and mish run vector kernels). */

static double load_f(const char *p, cnn_dtype dt) {
  return dt == CNN_FLOAT32 ? *(const float *)p : *(const double *)p;
}

/* out = g * f'(x) for float32 gelu (both forms), elu, softplus and mish
 * through the kernels of core/cpu/vector_math.c (the same double formulas,
 * within 1 ulp + 2^-40 |g|); false, having done nothing, for other ops (so
 * n = 0 asks whether op has a kernel). */
static bool grad_apply(const ew_ctx *c, int64_t n, const float *g, const float *x, float *out) {
  switch (c->op) {
  case CNN_OP_GELU: cnn_cpu_gelu_grad_f32(n, g, x, out); return true;
  case CNN_OP_GELU_TANH: cnn_cpu_gelu_tanh_grad_f32(n, g, x, out); return true;
  case CNN_OP_ELU: cnn_cpu_elu_grad_f32(n, g, x, out, c->p0); return true;
  case CNN_OP_SOFTPLUS: cnn_cpu_softplus_grad_f32(n, g, x, out, c->p0, c->p1); return true;
  case CNN_OP_MISH: cnn_cpu_mish_grad_f32(n, g, x, out); return true;
  default: return false;
  }
}

/* unit strides directly, others through stack buffers, so that a value's
 * result does not depend on the layout */
static bool deriv_row_vec(const ew_ctx *c, int64_t n, char *const *p, const int64_t *s) {
  if (c->dt != CNN_FLOAT32) return false;
  if (s[0] == 4 && s[1] == 4 && s[2] == 4)
    return grad_apply(c, n, (const float *)p[1], (const float *)p[2], (float *)p[0]);
  if (!grad_apply(c, 0, NULL, NULL, NULL)) return false;
  enum { CHUNK = 256 };
  float g[CHUNK], x[CHUNK];
  for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
    int64_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
    for (int64_t i = 0; i < m; i++) g[i] = *(const float *)(p[1] + (i0 + i) * s[1]);
    for (int64_t i = 0; i < m; i++) x[i] = *(const float *)(p[2] + (i0 + i) * s[2]);
    grad_apply(c, m, g, x, g);
    for (int64_t i = 0; i < m; i++) *(float *)(p[0] + (i0 + i) * s[0]) = g[i];
  }
  return true;
}

static void deriv_row(const void *ctx, int64_t n, char *const *p, const int64_t *s) {
  const ew_ctx *c = ctx;
  if (deriv_row_vec(c, n, p, s)) return;
  if (c->op == CNN_OP_RELU && c->dt == CNN_FLOAT32 && s[0] == 4 && s[1] == 4 && s[2] == 4) {
    float *o = (float *)p[0];
    const float *g = (const float *)p[1], *x = (const float *)p[2];
    for (int64_t i = 0; i < n; i++) o[i] = x[i] <= 0 ? 0.0f : g[i]; /* NaN passes, as below */
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    double g = load_f(p[1] + i * s[1], c->dt), v = load_f(p[2] + i * s[2], c->dt);
    double r = g * cnn_ew_unary_deriv(c->op, v, c->p0, c->p1);
    if (c->dt == CNN_FLOAT32)
      *(float *)(p[0] + i * s[0]) = (float)r;
    else
      *(double *)(p[0] + i * s[0]) = r;
  }
}

/* ---- where: c->op holds the dtype of the condition ------------------------------------- */

static void where_row(const void *ctx, int64_t n, char *const *p, const int64_t *s) {
  const ew_ctx *c = ctx;
  size_t es = cnn_dtype_size(c->dt);
  cnn_dtype cdt = (cnn_dtype)c->op; /* dtype of the condition */
  for (int64_t i = 0; i < n; i++) {
    const char *cp = p[1] + i * s[1];
    bool t = cdt == CNN_UINT8   ? *(const uint8_t *)cp != 0
             : cdt == CNN_INT64 ? *(const int64_t *)cp != 0
                                : load_f(cp, cdt) != 0;
    memcpy(p[0] + i * s[0], t ? p[2] + i * s[2] : p[3] + i * s[3], es);
  }
}

/* ---- the entries ------------------------------------------------------------------------ */

static void run(const cnn_be_shape *s, int nops, const cnn_be_arg *const *a, const size_t *es,
                row_fn fn, const ew_ctx *c) {
  iter_t it;
  iter_init(&it, s, nops, a, es);
  iter_run(&it, fn, c);
}

int cnn_cpu_unary(int dev, cnn_unary_op op, cnn_dtype dt, const cnn_be_shape *s, cnn_be_arg out,
                  cnn_be_arg x, double p0, double p1) {
  (void)dev;
  ew_ctx c = {.op = op, .p0 = p0, .p1 = p1, .dt = dt};
  size_t es = cnn_dtype_size(dt);
  run(s, 2, (const cnn_be_arg *[]){&out, &x}, (size_t[]){es, es}, unary_row(dt), &c);
  return 0;
}

int cnn_cpu_binary(int dev, cnn_binary_op op, cnn_dtype dt, const cnn_be_shape *s, cnn_be_arg out,
                   cnn_be_arg a, cnn_be_arg b) {
  (void)dev;
  ew_ctx c = {.op = op, .dt = dt};
  size_t es = cnn_dtype_size(dt), eo = is_compare(op) ? 1 : es;
  run(s, 3, (const cnn_be_arg *[]){&out, &a, &b}, (size_t[]){eo, es, es}, binary_row(op, dt), &c);
  return 0;
}

int cnn_cpu_unary_grad(int dev, cnn_unary_op op, cnn_dtype dt, const cnn_be_shape *s,
                       cnn_be_arg out, cnn_be_arg g, cnn_be_arg v, double p0, double p1) {
  (void)dev;
  ew_ctx c = {.op = op, .p0 = p0, .p1 = p1, .dt = dt};
  size_t es = cnn_dtype_size(dt);
  run(s, 3, (const cnn_be_arg *[]){&out, &g, &v}, (size_t[]){es, es, es}, deriv_row, &c);
  return 0;
}

int cnn_cpu_where(int dev, cnn_dtype cond_dt, cnn_dtype dt, const cnn_be_shape *s, cnn_be_arg out,
                  cnn_be_arg cond, cnn_be_arg a, cnn_be_arg b) {
  (void)dev;
  ew_ctx c = {.op = (int)cond_dt, .dt = dt};
  size_t es = cnn_dtype_size(dt);
  run(s, 4, (const cnn_be_arg *[]){&out, &cond, &a, &b},
      (size_t[]){es, cnn_dtype_size(cond_dt), es, es}, where_row, &c);
  return 0;
}
