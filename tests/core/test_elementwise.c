/*
 * test_elementwise.c -- forward values of the binary, unary and where ops
 * against naive loops and known values: broadcasting (2x1x3 + 4x1, scalars,
 * transposed views, the OpenMP path on large tensors), dtype promotion,
 * comparisons, in-place rules, error messages; and the per-element math of
 * elementwise_math.h (activations, BCE pieces, optimizer steps) against
 * hand-computed values.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd.h"
#include "check.h"
#include "cnn.h"
#include "elementwise_math.h"

#define SH(...) ((int64_t[]){__VA_ARGS__})

static cnn_tensor *filled(int nd, const int64_t *shape, cnn_dtype dt, double lo, double step) {
  cnn_tensor *t = cnn_empty(nd, shape, dt, CNN_DEVICE_CPU);
  for (int64_t i = 0; i < cnn_tensor_numel(t); i++) cnn_tensor_set(t, i, lo + step * (double)i);
  return t;
}

static double ref_binary(int op, double a, double b) {
  switch (op) {
  case CNN_OP_ADD: return a + b;
  case CNN_OP_SUB: return a - b;
  case CNN_OP_MUL: return a * b;
  case CNN_OP_DIV: return a / b;
  case CNN_OP_POW: return pow(a, b);
  case CNN_OP_MAXIMUM: return a > b ? a : b;
  case CNN_OP_MINIMUM: return a < b ? a : b;
  case CNN_OP_ADD_RELU: return a + b > 0 ? a + b : 0;
  case CNN_OP_EQ: return a == b;
  case CNN_OP_NE: return a != b;
  case CNN_OP_LT: return a < b;
  case CNN_OP_LE: return a <= b;
  case CNN_OP_GT: return a > b;
  default: return a >= b;
  }
}

/* out[i,j,k] = a[i,0,k] op b[j,0] for a 2x1x3, b 4x1 */
static void test_broadcast_2x1x3_4x1(cnn_dtype dt) {
  cnn_tensor *a = filled(3, SH(2, 1, 3), dt, 0.5, 0.75), *b = filled(2, SH(4, 1), dt, 1.0, 0.5);
  cnn_tensor_set(b, 2, 1.25); /* a tie with a[0,0,1] for the comparisons */
  for (int op = 0; op < CNN_NBINARY; op++) {
    cnn_tensor *y = cnn_binary((cnn_binary_op)op, a, b);
    CHECK(y && y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 4 && y->shape[2] == 3);
    if (!y) continue;
    cnn_dtype want = op >= CNN_OP_EQ                       ? CNN_UINT8
                     : op == CNN_OP_DIV && dt == CNN_INT64 ? CNN_FLOAT32
                                                           : dt;
    CHECK(y->dtype == want);
    double got[24], ref[24];
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 4; j++)
        for (int k = 0; k < 3; k++) {
          int idx = (i * 4 + j) * 3 + k;
          got[idx] = cnn_tensor_get(y, idx);
          ref[idx] = ref_binary(op, cnn_tensor_get(a, i * 3 + k), cnn_tensor_get(b, j));
        }
    char what[64];
    snprintf(what, sizeof what, "%s 2x1x3 . 4x1 (%s)", cnn_binary_name(op), cnn_dtype_name(dt));
    check_arrays(what, got, ref, 24, 1e-6, 1e-6);
    cnn_tensor_release(y);
  }
  cnn_tensor_release(a), cnn_tensor_release(b);
}

static void test_scalar_and_views(void) {
  cnn_tensor *base = filled(2, SH(3, 4), CNN_FLOAT32, -2, 0.5);
  cnn_tensor *t = cnn_transpose(base, 0, 1); /* 4x3, non-contiguous */
  cnn_tensor *s = cnn_scalar(10, CNN_FLOAT64, CNN_DEVICE_CPU);
  cnn_tensor *y = cnn_binary(CNN_OP_SUB, s, t);
  CHECK(y && y->dtype == CNN_FLOAT32 && y->shape[0] == 4 && y->shape[1] == 3);
  double got[12], ref[12];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++)
      got[i * 3 + j] = cnn_tensor_get(y, i * 3 + j), ref[i * 3 + j] = 10 - (-2 + 0.5 * (j * 4 + i));
  check_arrays("10 - transpose(3x4)", got, ref, 12, 0, 0);
  /* a transposed view with itself: t * t */
  cnn_tensor *sq = cnn_binary(CNN_OP_MUL, t, t);
  for (int i = 0; i < 12; i++)
    got[i] = cnn_tensor_get(sq, i), ref[i] = pow(cnn_tensor_get(t, i), 2);
  check_arrays("t * t (transposed)", got, ref, 12, 0, 0);
  cnn_tensor_release(y), cnn_tensor_release(sq), cnn_tensor_release(s);
  cnn_tensor_release(t), cnn_tensor_release(base);
}

static void test_large_parallel(void) {
  int64_t R = 300, C = 257; /* 77100 elements: the OpenMP path */
  cnn_tensor *a = filled(2, SH(R, C), CNN_FLOAT32, 0, 0.001);
  cnn_tensor *bb = filled(2, SH(C, R), CNN_FLOAT32, 1, -0.0005);
  cnn_tensor *b = cnn_transpose(bb, 0, 1);
  cnn_tensor *row = filled(1, SH(C), CNN_FLOAT32, 3, 0.25);
  cnn_tensor *y = cnn_binary(CNN_OP_ADD, a, b), *z = cnn_binary(CNN_OP_MUL, a, row);
  const float *fy = cnn_tensor_data(y), *fz = cnn_tensor_data(z);
  const float *fa = cnn_tensor_data(a), *fb = cnn_tensor_data(bb), *fr = cnn_tensor_data(row);
  int bad = 0;
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < C; j++) {
      if (fy[i * C + j] != fa[i * C + j] + fb[j * R + i]) bad++;
      if (fz[i * C + j] != fa[i * C + j] * fr[j]) bad++;
    }
  CHECK(bad == 0);
  cnn_tensor *r = cnn_unary(CNN_OP_RELU, b, 0, 0);
  bad = 0;
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < C; j++) {
      float v = fb[j * R + i];
      if (((const float *)cnn_tensor_data(r))[i * C + j] != (v > 0 ? v : 0)) bad++;
    }
  CHECK(bad == 0);
  cnn_tensor_release(a), cnn_tensor_release(bb), cnn_tensor_release(b), cnn_tensor_release(row);
  cnn_tensor_release(y), cnn_tensor_release(z), cnn_tensor_release(r);
}

static void test_promotion(void) {
  cnn_tensor *u8 = filled(1, SH(3), CNN_UINT8, 250, 2); /* 250 252 254 */
  cnn_tensor *i64 = filled(1, SH(3), CNN_INT64, 7, 1);  /* 7 8 9 */
  cnn_tensor *f32 = filled(1, SH(3), CNN_FLOAT32, 0.5, 1);
  cnn_tensor *f64s = cnn_scalar(0.25, CNN_FLOAT64, CNN_DEVICE_CPU);
  cnn_tensor *i64s = cnn_scalar(2, CNN_INT64, CNN_DEVICE_CPU);
  cnn_tensor *y;
  y = cnn_binary(CNN_OP_ADD, u8, i64);
  CHECK(y->dtype == CNN_INT64 && cnn_tensor_get(y, 2) == 263);
  cnn_tensor_release(y);
  y = cnn_binary(CNN_OP_ADD, u8, u8); /* wraps */
  CHECK(y->dtype == CNN_UINT8 && cnn_tensor_get(y, 0) == (500 % 256));
  cnn_tensor_release(y);
  y = cnn_binary(CNN_OP_MUL, i64, f32);
  CHECK(y->dtype == CNN_FLOAT32 && cnn_tensor_get(y, 1) == 12);
  cnn_tensor_release(y);
  y = cnn_binary(CNN_OP_ADD, f32, f64s); /* 0-d does not promote */
  CHECK(y->dtype == CNN_FLOAT32 && cnn_tensor_get(y, 0) == 0.75);
  cnn_tensor_release(y);
  y = cnn_binary(CNN_OP_ADD, i64, f64s); /* higher category: takes the scalar's type */
  CHECK(y->dtype == CNN_FLOAT64 && cnn_tensor_get(y, 0) == 7.25);
  cnn_tensor_release(y);
  y = cnn_binary(CNN_OP_MUL, u8, i64s); /* same category: stays uint8 */
  CHECK(y->dtype == CNN_UINT8 && cnn_tensor_get(y, 0) == (500 % 256));
  cnn_tensor_release(y);
  y = cnn_binary(CNN_OP_DIV, i64, i64s); /* true division */
  CHECK(y->dtype == CNN_FLOAT32 && cnn_tensor_get(y, 0) == 3.5);
  cnn_tensor_release(y);
  y = cnn_binary(CNN_OP_POW, i64, i64s);
  CHECK(y->dtype == CNN_INT64 && cnn_tensor_get(y, 2) == 81);
  cnn_tensor_release(y);
  y = cnn_binary(CNN_OP_GE, i64, f32); /* 7>=0.5 ... */
  CHECK(y->dtype == CNN_UINT8 && cnn_tensor_get(y, 0) == 1);
  cnn_tensor_release(y);
  y = cnn_unary(CNN_OP_EXP, i64, 0, 0);
  CHECK(y->dtype == CNN_FLOAT32 && fabs(cnn_tensor_get(y, 0) - exp(7)) < 1e-2);
  cnn_tensor_release(y);
  y = cnn_unary(CNN_OP_NEG, i64, 0, 0);
  CHECK(y->dtype == CNN_INT64 && cnn_tensor_get(y, 1) == -8);
  cnn_tensor_release(y);
  y = cnn_unary(CNN_OP_MUL_SCALAR, i64, 0.5, 0);
  CHECK(y->dtype == CNN_FLOAT32 && cnn_tensor_get(y, 0) == 3.5);
  cnn_tensor_release(y);
  y = cnn_unary(CNN_OP_CLAMP, i64, 7.5, 8.5);
  CHECK(y->dtype == CNN_INT64 && cnn_tensor_get(y, 0) == 8 && cnn_tensor_get(y, 2) == 8);
  cnn_tensor_release(y);
  cnn_tensor_release(u8), cnn_tensor_release(i64), cnn_tensor_release(f32);
  cnn_tensor_release(f64s), cnn_tensor_release(i64s);
}

static double ref_unary(int op, double x, double p0, double p1) {
  switch (op) {
  case CNN_OP_NEG: return -x;
  case CNN_OP_ABS: return fabs(x);
  case CNN_OP_EXP: return exp(x);
  case CNN_OP_LOG: return log(x);
  case CNN_OP_SQRT: return sqrt(x);
  case CNN_OP_RSQRT: return 1 / sqrt(x);
  case CNN_OP_TANH: return tanh(x);
  case CNN_OP_SIGMOID: return 1 / (1 + exp(-x));
  case CNN_OP_RELU: return x > 0 ? x : 0;
  case CNN_OP_SIN: return sin(x);
  case CNN_OP_COS: return cos(x);
  case CNN_OP_SIGN: return (x > 0) - (x < 0);
  case CNN_OP_FLOOR: return floor(x);
  case CNN_OP_CEIL: return ceil(x);
  case CNN_OP_ROUND: {
    double r = round(x);
    return fabs(x - trunc(x)) == 0.5 ? 2 * round(x / 2) : r;
  }
  case CNN_OP_RECIPROCAL: return 1 / x;
  case CNN_OP_SQUARE: return x * x;
  case CNN_OP_GELU: return 0.5 * x * (1 + erf(x / sqrt(2)));
  case CNN_OP_LOG1P: return log(1 + x);
  case CNN_OP_EXPM1: return exp(x) - 1;
  case CNN_OP_LEAKY_RELU: return x > 0 ? x : p0 * x;
  case CNN_OP_ELU: return x > 0 ? x : p0 * (exp(x) - 1);
  case CNN_OP_CLAMP: return x < p0 ? p0 : x > p1 ? p1 : x;
  case CNN_OP_POW_SCALAR: return pow(x, p0);
  case CNN_OP_ADD_SCALAR: return x + p0;
  /* activations of issue 13 (helper "act"): from their definitions */
  case CNN_OP_HARDTANH: return fmin(fmax(x, p0), p1);
  case CNN_OP_SILU: return x / (1 + exp(-x));
  case CNN_OP_HARDSWISH: return x <= -3 ? 0 : x >= 3 ? x : x * (x + 3) / 6;
  case CNN_OP_HARDSIGMOID: return x <= -3 ? 0 : x >= 3 ? 1 : x / 6 + 0.5;
  case CNN_OP_MISH: return x * tanh(log(1 + exp(x)));
  case CNN_OP_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  case CNN_OP_SOFTPLUS: return p0 * x > p1 ? x : log(1 + exp(p0 * x)) / p0;
  default: return x * p0;
  }
}

static void test_unary_values(cnn_dtype dt) {
  /* values in (0.1, 2.6] plus halves for round; negatives for the sign-sensitive ops */
  cnn_tensor *base = filled(2, SH(4, 5), dt, -2.5, 0.25);
  cnn_tensor *pos = filled(2, SH(4, 5), dt, 0.1, 0.125);
  cnn_tensor *tb = cnn_transpose(base, 0, 1);
  for (int op = 0; op < CNN_NUNARY; op++) {
    bool positive = op == CNN_OP_LOG || op == CNN_OP_SQRT || op == CNN_OP_RSQRT ||
                    op == CNN_OP_POW_SCALAR || op == CNN_OP_RECIPROCAL || op == CNN_OP_LOG1P;
    cnn_tensor *x = positive ? pos : tb;
    double p0 = op == CNN_OP_CLAMP ? -1 : op == CNN_OP_POW_SCALAR ? 1.5 : 0.3, p1 = 0.75;
    cnn_tensor *y = cnn_unary((cnn_unary_op)op, x, p0, p1);
    CHECK(y && y->dtype == dt && cnn_same_shape(x, y));
    double got[20], ref[20];
    for (int i = 0; i < 20; i++)
      got[i] = cnn_tensor_get(y, i), ref[i] = ref_unary(op, cnn_tensor_get(x, i), p0, p1);
    char what[64];
    snprintf(what, sizeof what, "%s 5x4(T) %s", cnn_unary_name(op), cnn_dtype_name(dt));
    check_arrays(what, got, ref, 20, dt == CNN_FLOAT32 ? 1e-6 : 1e-14,
                 dt == CNN_FLOAT32 ? 1e-6 : 1e-14);
    cnn_tensor_release(y);
  }
  /* known values */
  cnn_tensor *k = cnn_from_buffer(1, SH(3), CNN_FLOAT64, (double[]){-1, 0, 1});
  cnn_tensor *g = cnn_unary(CNN_OP_GELU, k, 0, 0);
  CHECK_CLOSE(cnn_tensor_get(g, 0), -0.15865525393145705, 1e-15);
  CHECK_CLOSE(cnn_tensor_get(g, 2), 0.8413447460685429, 1e-15);
  cnn_tensor *nan_clamp = cnn_unary(CNN_OP_CLAMP, k, NAN, 0.5); /* open lower bound */
  CHECK(cnn_tensor_get(nan_clamp, 0) == -1 && cnn_tensor_get(nan_clamp, 2) == 0.5);
  cnn_tensor_release(g), cnn_tensor_release(nan_clamp), cnn_tensor_release(k);
  cnn_tensor_release(tb), cnn_tensor_release(base), cnn_tensor_release(pos);
}

/* ---- activations of issue 13 (helper "act") ----------------------------------------------
 * Values and derivatives at chosen points (the kinks included), worked out
 * by hand from the definitions, through the autograd engine in float64. */

/* y = op(x) and dy/dx at the n points xs, x float64 */
static void act_at(cnn_unary_op op, const double *xs, int n, double p0, double p1, double *y,
                   double *dy) {
  cnn_tensor *x = cnn_from_buffer(1, SH(n), CNN_FLOAT64, xs);
  cnn_set_requires_grad(x, true);
  cnn_tensor *out = cnn_unary(op, x, p0, p1),
             *sum = out ? cnn_reduce(CNN_RED_SUM, out, 0, false, 0) : NULL;
  CHECK(sum && cnn_backward(sum, NULL, false) == 0 && x->grad);
  for (int i = 0; i < n; i++) {
    y[i] = out ? cnn_tensor_get(out, i) : NAN;
    dy[i] = x->grad ? cnn_tensor_get(x->grad, i) : NAN;
  }
  cnn_tensor_release(sum), cnn_tensor_release(out), cnn_tensor_release(x);
}

static void check_act(const char *what, cnn_unary_op op, double p0, double p1, int n,
                      const double *xs, const double *y_ref, const double *dy_ref) {
  double y[16], dy[16];
  act_at(op, xs, n, p0, p1, y, dy);
  char w[80];
  snprintf(w, sizeof w, "%s values", what);
  check_arrays(w, y, y_ref, n, 1e-15, 1e-14);
  snprintf(w, sizeof w, "%s derivatives", what);
  check_arrays(w, dy, dy_ref, n, 1e-15, 1e-14);
}

static void test_activations(void) {
  /* hardtanh on [-1, 2]: 1 strictly inside, 0 at the limits (PyTorch's hardtanh_backward) */
  check_act("hardtanh[-1, 2]", CNN_OP_HARDTANH, -1, 2, 6, (double[]){-3, -1, -0.5, 1.5, 2, 7},
            (double[]){-1, -1, -0.5, 1.5, 2, 2}, (double[]){0, 0, 1, 1, 0, 0});
  /* relu6 = hardtanh[0, 6] */
  check_act("relu6", CNN_OP_HARDTANH, 0, 6, 6, (double[]){-2, 0, 0.25, 5.5, 6, 6.5},
            (double[]){0, 0, 0.25, 5.5, 6, 6}, (double[]){0, 0, 1, 1, 0, 0});
  /* silu, mish, gelu (tanh): values and PyTorch's derivative formulas, evaluated in Python */
  check_act("silu", CNN_OP_SILU, 0, 0, 3, (double[]){-2, 0, 1},
            (double[]){-0.2384058440442351, 0, 0.7310585786300049},
            (double[]){-0.09078424878489547, 0.5, 0.9276705118714869});
  check_act("mish", CNN_OP_MISH, 0, 0, 3, (double[]){-1, 0, 1.5},
            (double[]){-0.30340146137410895, 0, 1.4033782663958028},
            (double[]){0.059216755877395, 0.6, 1.0884879850078475});
  check_act("gelu(tanh)", CNN_OP_GELU_TANH, 0, 0, 3, (double[]){-1, 0, 2},
            (double[]){-0.15880800939172324, 0, 1.954597694087775},
            (double[]){-0.08296408384578255, 0.5, 1.0860992566236183});
  /* hardswish: derivative -1/2 at -3 and 3/2 at 3 (PyTorch's hardswish_backward) */
  check_act("hardswish", CNN_OP_HARDSWISH, 0, 0, 7, (double[]){-4, -3, -1, 0, 1.5, 3, 4},
            (double[]){0, 0, -1.0 / 3, 0, 1.125, 3, 4},
            (double[]){0, -0.5, 1.0 / 6, 0.5, 1, 1.5, 1});
  /* hardsigmoid: derivative 1/6 strictly inside (-3, 3) */
  check_act("hardsigmoid", CNN_OP_HARDSIGMOID, 0, 0, 6, (double[]){-4, -3, 0, 1.5, 3, 4},
            (double[]){0, 0, 0.5, 0.75, 1, 1}, (double[]){0, 0, 1.0 / 6, 1.0 / 6, 0, 0});
  /* softplus beta 2, threshold 3: x itself (derivative 1) where 2x > 3 */
  check_act("softplus(2, 3)", CNN_OP_SOFTPLUS, 2, 3, 4, (double[]){-0.5, 1, 1.5, 2},
            (double[]){0.15663084375911143, 1.0634640055214863, 1.524293675786871, 2},
            (double[]){0.2689414213699951, 0.8807970779778823, 0.9525741268224334, 1});
  /* NaN passes; integer inputs keep their dtype with the limits truncated */
  cnn_tensor *k = cnn_from_buffer(1, SH(1), CNN_FLOAT32, (float[]){NAN});
  cnn_tensor *y = cnn_unary(CNN_OP_HARDTANH, k, 0, 6);
  CHECK(y && isnan(cnn_tensor_get(y, 0)));
  cnn_tensor_release(y), cnn_tensor_release(k);
  k = cnn_from_buffer(1, SH(4), CNN_INT64, (int64_t[]){-5, 3, 7, 9});
  y = cnn_unary(CNN_OP_HARDTANH, k, -1.5, 7.9);
  CHECK(y && y->dtype == CNN_INT64 && cnn_tensor_get(y, 0) == -1 && cnn_tensor_get(y, 1) == 3 &&
        cnn_tensor_get(y, 3) == 7);
  cnn_tensor_release(y), cnn_tensor_release(k);
  k = cnn_from_buffer(1, SH(2), CNN_UINT8, (uint8_t[]){0, 200});
  y = cnn_unary(CNN_OP_HARDTANH, k, 0, 6);
  CHECK(y && y->dtype == CNN_UINT8 && cnn_tensor_get(y, 1) == 6);
  cnn_tensor_release(y);
  CHECK(cnn_unary(CNN_OP_HARDTANH, k, -1, 1) == NULL && strstr(cnn_error(), "hardtanh") &&
        strstr(cnn_error(), "uint8"));
  cnn_tensor_release(k);
}

static void test_where(void) {
  cnn_tensor *c = cnn_from_buffer(2, SH(2, 1), CNN_UINT8, (uint8_t[]){1, 0});
  cnn_tensor *a = filled(1, SH(3), CNN_FLOAT32, 1, 1);
  cnn_tensor *b = cnn_scalar(-5, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *y = cnn_where(c, a, b);
  CHECK(y && y->ndim == 2 && y->shape[0] == 2 && y->shape[1] == 3);
  double got[6], ref[6] = {1, 2, 3, -5, -5, -5};
  for (int i = 0; i < 6; i++) got[i] = cnn_tensor_get(y, i);
  check_arrays("where 2x1 ? 3 : scalar", got, ref, 6, 0, 0);
  cnn_tensor_release(y), cnn_tensor_release(c), cnn_tensor_release(a), cnn_tensor_release(b);
}

static void test_inplace(void) {
  cnn_tensor *a = filled(2, SH(2, 3), CNN_FLOAT32, 1, 1);
  cnn_tensor *row = filled(1, SH(3), CNN_FLOAT64, 0.5, 0);
  int64_t v0 = a->version;
  CHECK(cnn_binary_(CNN_OP_ADD, a, row) == 0);
  CHECK(a->version == v0 + 1 && a->dtype == CNN_FLOAT32);
  CHECK(cnn_tensor_get(a, 5) == 6.5);
  CHECK(cnn_unary_(CNN_OP_MUL_SCALAR, a, 2, 0) == 0 && cnn_tensor_get(a, 0) == 3);
  /* broadcasting the target itself is an error */
  CHECK(cnn_binary_(CNN_OP_ADD, row, a) == -1 && strstr(cnn_error(), "add_") &&
        strstr(cnn_error(), "2x3"));
  /* int target, float operand: computed in float, cast back */
  cnn_tensor *i = filled(1, SH(3), CNN_INT64, 1, 1);
  cnn_tensor *half = cnn_scalar(2.5, CNN_FLOAT32, CNN_DEVICE_CPU);
  CHECK(cnn_binary_(CNN_OP_MUL, i, half) == 0 && i->dtype == CNN_INT64 &&
        cnn_tensor_get(i, 1) == 5);
  /* a transposed view of itself: a_ += a^T is done against a copy */
  cnn_tensor *sq = filled(2, SH(2, 2), CNN_FLOAT64, 1, 1), *sqt = cnn_transpose(sq, 0, 1);
  CHECK(cnn_binary_(CNN_OP_ADD, sq, sqt) == 0);
  CHECK(cnn_tensor_get(sq, 1) == 5 && cnn_tensor_get(sq, 2) == 5 && cnn_tensor_get(sq, 3) == 8);
  /* autograd rules */
  cnn_tensor *leaf = filled(1, SH(3), CNN_FLOAT32, 1, 1);
  cnn_set_requires_grad(leaf, true);
  CHECK(cnn_unary_(CNN_OP_NEG, leaf, 0, 0) == -1 && strstr(cnn_error(), "neg_") &&
        strstr(cnn_error(), "leaf"));
  bool prev = cnn_set_grad_enabled(false);
  CHECK(cnn_binary_(CNN_OP_SUB, leaf, half) == 0 && cnn_tensor_get(leaf, 0) == -1.5);
  cnn_set_grad_enabled(prev);
  /* an expanded target refuses */
  cnn_tensor *e = cnn_expand(row, 2, SH(4, 3));
  CHECK(cnn_unary_(CNN_OP_RELU, e, 0, 0) == -1 && strstr(cnn_error(), "expanded"));
  cnn_tensor_release(e), cnn_tensor_release(leaf), cnn_tensor_release(sqt), cnn_tensor_release(sq);
  cnn_tensor_release(i), cnn_tensor_release(half), cnn_tensor_release(a), cnn_tensor_release(row);
}

static void test_errors(void) {
  cnn_tensor *a = cnn_zeros(2, SH(2, 3), CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *b = cnn_zeros(2, SH(4, 3), CNN_FLOAT32, CNN_DEVICE_CPU);
  CHECK(cnn_binary(CNN_OP_ADD, a, b) == NULL);
  CHECK(strcmp(cnn_error(), "add: shapes 2x3 and 4x3 cannot be broadcast") == 0);
  CHECK(cnn_binary(CNN_OP_LE, a, b) == NULL && strstr(cnn_error(), "le: shapes 2x3 and 4x3"));
  cnn_tensor *c = cnn_zeros(1, SH(5), CNN_UINT8, CNN_DEVICE_CPU);
  CHECK(cnn_where(c, a, a) == NULL && strstr(cnn_error(), "where") && strstr(cnn_error(), "5"));
  cnn_tensor_release(a), cnn_tensor_release(b), cnn_tensor_release(c);
}

/* ---- elementwise_math.h ------------------------------------------------------------ */

static void test_math_header(void) {
  CHECK_CLOSE(cnn_sigmoid(-800), 0, 1e-300);
  CHECK_CLOSE(cnn_sigmoid(2), 0.8807970779778823, 1e-15);
  CHECK_CLOSE(cnn_sigmoid_f(-2.0f), 0.11920292202211755, 1e-7);
  CHECK_CLOSE(cnn_gelu_grad(0.7),
              0.5 * (1 + erf(0.7 / sqrt(2))) + 0.7 * exp(-0.245) / sqrt(2 * M_PI), 1e-15);
  CHECK_CLOSE(cnn_elu(-1, 2), 2 * (exp(-1) - 1), 1e-15);
  CHECK_CLOSE(cnn_softplus(1000), 1000, 1e-12);
  CHECK_CLOSE(cnn_softplus(-1000), 0, 1e-300);
  CHECK_CLOSE(cnn_softplus(0.5), log(1 + exp(0.5)), 1e-15);
  /* bce: y=1, x=2, pw=3: 3*log(1+e^-2); naive formula otherwise */
  CHECK_CLOSE(cnn_bce_logits(2, 1, 3), 3 * log(1 + exp(-2)), 1e-15);
  double x = -0.7, y = 0.3, s = 1 / (1 + exp(-x));
  CHECK_CLOSE(cnn_bce_logits(x, y, 1), -(y * log(s) + (1 - y) * log(1 - s)), 1e-15);
  CHECK_CLOSE(cnn_bce_logits_dx(x, y, 1), s - y, 1e-15);
  CHECK_CLOSE(cnn_bce_logits_f(-0.7f, 0.3f, 1.0f), -(y * log(s) + (1 - y) * log(1 - s)), 1e-6);
}

static void test_sgd(void) {
  /* momentum 0.9, dampening 0.1, wd 0.01, lr 0.1, constant gradient 0.5, p0 = 1 */
  double p = 1, buf = 0, g = 0.5, rp = 1, rbuf = 0;
  for (int step = 0; step < 3; step++) {
    cnn_sgd_hp h = {.lr = 0.1,
                    .momentum = 0.9,
                    .dampening = 0.1,
                    .weight_decay = 0.01,
                    .nesterov = 0,
                    .first_step = step == 0};
    cnn_sgd_step(&p, g, &buf, h);
    double gg = g + 0.01 * rp;
    rbuf = step == 0 ? gg : 0.9 * rbuf + 0.9 * gg;
    rp -= 0.1 * rbuf;
  }
  CHECK_CLOSE(p, rp, 1e-15);
  /* step 1 by hand: g = 0.51, buf = 0.51, p = 0.949 */
  double q = 1, qb = 0;
  cnn_sgd_step(&q, 0.5, &qb,
               (cnn_sgd_hp){.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .first_step = 1});
  CHECK_CLOSE(q, 0.949, 1e-15);
  /* nesterov, float: g = 0.5, buf = 0.5, g' = 0.5 + 0.9*0.5 = 0.95 */
  float f = 1, fb = 0;
  cnn_sgd_step_f(&f, 0.5f, &fb,
                 (cnn_sgd_hp){.lr = 0.1, .momentum = 0.9, .nesterov = 1, .first_step = 1});
  CHECK_CLOSE(f, 0.905, 1e-7);
}

static void test_adam_rmsprop(void) {
  /* Adam step 1 with g = 0.5: m = 0.05, v = 0.00025, mhat = 0.5, vhat = 0.25,
   * p -= lr * 0.5 / (0.5 + eps) = 1e-3 * (1 - 2e-8) */
  double p = 1, m = 0, v = 0, vmax = 0;
  cnn_adam_step(&p, 0.5, &m, &v, &vmax, cnn_adam_hp_make(1e-3, 0.9, 0.999, 1e-8, 0, 0, 0, 1));
  CHECK_CLOSE(p, 1 - 1e-3 * 0.5 / (0.5 + 1e-8), 1e-15);
  /* three steps, AdamW wd 0.1, gradients 0.5, -0.2, 0.1, against the formulas */
  double ps = 2, ms = 0, vs = 0, rp = 2, rm = 0, rv = 0, gs[3] = {0.5, -0.2, 0.1};
  for (int t = 1; t <= 3; t++) {
    cnn_adam_step(&ps, gs[t - 1], &ms, &vs, NULL,
                  cnn_adam_hp_make(0.01, 0.9, 0.99, 1e-8, 0.1, 1, 0, t));
    rp *= 1 - 0.01 * 0.1;
    rm = 0.9 * rm + 0.1 * gs[t - 1];
    rv = 0.99 * rv + 0.01 * gs[t - 1] * gs[t - 1];
    double mh = rm / (1 - pow(0.9, t)), vh = rv / (1 - pow(0.99, t));
    rp -= 0.01 * mh / (sqrt(vh) + 1e-8);
  }
  CHECK_CLOSE(ps, rp, 1e-12);
  /* RMSprop centered with momentum, two steps by formula */
  double q = 1, sq = 0, ga = 0, buf = 0, rq = 1, rsq = 0, rga = 0, rbuf = 0;
  cnn_rmsprop_hp h = {
      .lr = 0.01, .alpha = 0.99, .eps = 1e-8, .weight_decay = 0, .momentum = 0.9, .centered = 1};
  for (int t = 0; t < 2; t++) {
    double g = t ? -0.3 : 0.4;
    cnn_rmsprop_step(&q, g, &sq, &ga, &buf, h);
    rsq = 0.99 * rsq + 0.01 * g * g;
    rga = 0.99 * rga + 0.01 * g;
    rbuf = 0.9 * rbuf + g / (sqrt(rsq - rga * rga) + 1e-8);
    rq -= 0.01 * rbuf;
  }
  CHECK_CLOSE(q, rq, 1e-12);
  float fq = 1, fsq = 0;
  cnn_rmsprop_step_f(&fq, 0.4f, &fsq, NULL, NULL,
                     (cnn_rmsprop_hp){.lr = 0.01, .alpha = 0.99, .eps = 1e-8});
  CHECK_CLOSE(fq, 1 - 0.01 * 0.4 / (sqrt(0.01 * 0.16) + 1e-8), 1e-6);
}

/* The op tables (core/ops/elementwise_table.c): every row filled, the node
 * name made from the op name (so a reordered enum would show), names unique,
 * comparisons the only binary ops without a gradient, and the recorded node
 * of a tensor op the row's. */
static void test_op_tables(void) {
  for (int op = 0; op < CNN_NUNARY; op++) {
    const cnn_unary_info *u = &cnn_unary_ops[op];
    CHECK(u->name && u->grad_name && strcmp(cnn_unary_name(op), u->name) == 0);
    for (int k = 0; k < op; k++)
      if (cnn_unary_ops[k].lua && u->lua && strcmp(cnn_unary_ops[k].name, u->name) == 0) {
        fprintf(stderr, "unary ops %d and %d are both bound as %s\n", k, op, u->name);
        CHECK(0);
      }
  }
  for (int op = 0; op < CNN_NBINARY; op++) {
    const cnn_binary_info *b = &cnn_binary_ops[op];
    bool compare = op >= CNN_OP_EQ;
    CHECK(b->name && (b->grad_name == NULL) == compare);
  }
  /* spot checks against hand-written expectations */
  CHECK(strcmp(cnn_unary_ops[CNN_OP_SIGMOID].grad_name, "SigmoidBackward") == 0);
  CHECK(cnn_unary_ops[CNN_OP_EXP].saves == CNN_SAVES_OUTPUT);
  CHECK(cnn_unary_ops[CNN_OP_NEG].saves == CNN_SAVES_NOTHING);
  CHECK(strcmp(cnn_binary_ops[CNN_OP_DIV].grad_name, "DivBackward") == 0);
  CHECK(cnn_binary_ops[CNN_OP_POW].saves == CNN_SAVES_ALL);
  cnn_tensor *x = cnn_full(1, (int64_t[]){3}, 0.5, CNN_FLOAT32, CNN_DEVICE_CPU);
  CHECK(x && cnn_set_requires_grad(x, true) == 0);
  cnn_tensor *y = cnn_unary(CNN_OP_TANH, x, 0, 0);
  CHECK(y && y->grad_fn && strcmp(y->grad_fn->name, "TanhBackward") == 0);
  cnn_tensor_release(y), cnn_tensor_release(x);
}

/* add_relu over both signs, through each row kernel: contiguous rows
 * (1,000 elements: the vector loop and its tail), a broadcast scalar on
 * either side, and a strided operand; a NaN passes as relu's does. */
static void test_add_relu(cnn_dtype dt) {
  enum { N = 1000 };
  cnn_tensor *a = filled(1, SH(N), dt, -5, 0.01), *b = filled(1, SH(N), dt, 2.5, -0.003);
  cnn_tensor *s = filled(0, NULL, dt, -0.75, 0);
  cnn_tensor *wide = filled(2, SH(N, 2), dt, 8, -0.009), *col = cnn_select(wide, 1, 0);
  if (dt != CNN_INT64) cnn_tensor_set(a, 7, NAN);
  struct {
    const char *what;
    cnn_tensor *x, *y;
  } cases[] = {
      {"rows", a, b}, {"row . scalar", a, s}, {"scalar . row", s, b}, {"row . strided", a, col}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    cnn_tensor *y = cnn_binary(CNN_OP_ADD_RELU, cases[k].x, cases[k].y);
    CHECK(y && y->dtype == dt && cnn_tensor_numel(y) == N);
    if (!y) continue;
    static double got[N], ref[N];
    int zeros = 0;
    for (int i = 0; i < N; i++) {
      double u = cnn_tensor_get(cases[k].x, cases[k].x->ndim ? i : 0);
      double v = cnn_tensor_get(cases[k].y, cases[k].y->ndim ? i : 0);
      got[i] = cnn_tensor_get(y, i);
      ref[i] = ref_binary(CNN_OP_ADD_RELU, u, v);
      if (u != u) { /* NaN in, NaN out */
        CHECK(got[i] != got[i]);
        ref[i] = got[i] = 0;
      }
      zeros += ref[i] == 0;
    }
    CHECK(zeros > 100 && zeros < N - 100); /* both sides of the kink were met */
    char what[64];
    snprintf(what, sizeof what, "add_relu %s (%s)", cases[k].what, cnn_dtype_name(dt));
    check_arrays(what, got, ref, N, 1e-6, 1e-6);
    cnn_tensor_release(y);
  }
  cnn_tensor_release(a), cnn_tensor_release(b), cnn_tensor_release(s);
  cnn_tensor_release(col), cnn_tensor_release(wide);
}

int main(void) {
  test_op_tables();
  test_add_relu(CNN_FLOAT32);
  test_add_relu(CNN_FLOAT64);
  test_add_relu(CNN_INT64);
  test_broadcast_2x1x3_4x1(CNN_FLOAT32);
  test_broadcast_2x1x3_4x1(CNN_FLOAT64);
  test_broadcast_2x1x3_4x1(CNN_INT64);
  test_scalar_and_views();
  test_large_parallel();
  test_promotion();
  test_unary_values(CNN_FLOAT32);
  test_unary_values(CNN_FLOAT64);
  test_activations();
  test_where();
  test_inplace();
  test_errors();
  test_math_header();
  test_sgd();
  test_adam_rmsprop();
  return check_report("test_elementwise");
}
