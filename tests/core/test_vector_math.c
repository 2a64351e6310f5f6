/*
 * test_vector_math.c -- the vectorised float32 exp, log, expm1, tanh and
 * sigmoid (core/cpu/vector_math.c: SLEEF for the first three) and the paths that use them: unary ops on
 * contiguous and strided tensors, in place, and float32 softmax/log_softmax.
 *
 * Evidence, independent of the code under test:
 *  - ulp sweeps against libm in double rounded to float (the exact value to
 *    within double rounding): <= 1 ulp; and against the scalar float path
 *    they replace (expf, logf, tanhf, cnn_sigmoid_f): <= 2 ulp.  One sweep
 *    strides through all 2^32 bit patterns (every sign, exponent, NaN and
 *    denormal class), one is dense over each function's working range.
 *  - special values (NaN, +-inf, +-0, denormals, overflow and underflow
 *    edges): same class as libm, identical bits when libm's result is 0 or
 *    inf (sign of zero included), NaN exactly when libm gives NaN.
 *  - odd lengths 0..41 from unaligned starts: nothing written outside
 *    [0, n), results bit-identical to the same value computed alone and to
 *    the in-place call (position-independence).
 *  - softmax/log_softmax in float32 against the float64 kernel.
 *  - all of the above for both ISA clones (AVX-512 and the baseline) where
 *    the CPU has AVX-512, and the two clones bit-identical over a sweep.
 * The worst ulp figures are printed, for the record.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "float_ulps.h"
#include "cnn.h"
#include "cpu/kernels.h"
#include "cpu/vector_math.h"
#include "elementwise_math.h"

typedef void (*vec_fn)(int64_t n, const float *x, float *y);

static double sigmoid_ref(double x) { return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)); }
static float sigmoid_scalar(float x) { return cnn_sigmoid_f(x); }

typedef struct {
  const char *name;
  vec_fn vec;
  double (*ref)(double);  /* libm in double */
  float (*scalar)(float); /* the float path the kernel replaces */
  float lo, hi;           /* working range of the dense sweep */
  int op;                 /* cnn_unary_op */
} op_case;

static const op_case OPS[] = {
    {"exp", cnn_cpu_exp_f32, exp, expf, -104.5f, 89.5f, CNN_OP_EXP},
    {"log", cnn_cpu_log_f32, log, logf, 0.0f, 16.0f, CNN_OP_LOG},
    {"expm1", cnn_cpu_expm1_f32, expm1, expm1f, -20.0f, 89.5f, CNN_OP_EXPM1},
    {"tanh", cnn_cpu_tanh_f32, tanh, tanhf, -10.0f, 10.0f, CNN_OP_TANH},
    {"sigmoid", cnn_cpu_sigmoid_f32, sigmoid_ref, sigmoid_scalar, -105.0f, 20.0f, CNN_OP_SIGMOID},
};
#define NOPS (int)(sizeof OPS / sizeof OPS[0])

typedef struct {
  int64_t vs_ref, vs_scalar;
  float x_ref, x_scalar;
} worst_t;

static void compare_batch(const op_case *c, int64_t n, const float *x, worst_t *w) {
  float y[4096];
  c->vec(n, x, y);
  for (int64_t i = 0; i < n; i++) {
    int64_t a = ulps(y[i], (float)c->ref(x[i])), b = ulps(y[i], c->scalar(x[i]));
    if (a > w->vs_ref) w->vs_ref = a, w->x_ref = x[i];
    if (b > w->vs_scalar) w->vs_scalar = b, w->x_scalar = x[i];
  }
}

static void report_worst(const op_case *c, const char *sweep, int64_t count, const worst_t *w) {
  printf("%-7s %-6s sweep (%lld values): max %lld ulp vs libm double (x = %a), %lld ulp vs "
         "scalar float (x = %a)\n",
         c->name, sweep, (long long)count, (long long)w->vs_ref, w->x_ref, (long long)w->vs_scalar,
         w->x_scalar);
  CHECK(w->vs_ref <= 1);
  CHECK(w->vs_scalar <= 2);
}

/* compare_batch as float_ulps.h's sweeps call it */
static void batch_of(const void *c, int64_t first, int64_t n, const float *x, void *w) {
  (void)first;
  compare_batch(c, n, x, w);
}

static void sweep_bits(const op_case *c) {
  worst_t w = {0};
  report_worst(c, "bits", sweep_bit_patterns(batch_of, c, &w), &w);
}

static void sweep_range(const op_case *c) {
  worst_t w = {0};
  report_worst(c, "range", sweep_evenly(batch_of, c, c->lo, c->hi, &w), &w);
}

/* ---- special values --------------------------------------------------------------- */

static const float SPECIAL[] = {0.0f,
                                -0.0f,
                                INFINITY,
                                -INFINITY,
                                0x1p-149f,
                                -0x1p-149f,
                                0x1.fffffcp-127f,
                                -0x1.fffffcp-127f,
                                0x1p-126f,
                                -0x1p-126f,
                                FLT_MAX,
                                -FLT_MAX,
                                1.0f,
                                -1.0f,
                                0.5f,
                                2.0f,
                                0x1p-20f,
                                -0x1p-20f,
                                0x1.62e42ep6f,
                                0x1.62e430p6f,
                                89.0f,
                                100.0f,
                                -87.33f,
                                -87.34f,
                                -88.0f,
                                -100.0f,
                                -103.27f,
                                -103.28f,
                                -103.97f,
                                -103.98f,
                                -104.0f,
                                -150.0f,
                                9.0f,
                                9.02f,
                                -9.02f,
                                20.0f,
                                1e10f,
                                -1e10f,
                                0x1.fffffep-1f,
                                0x1.000002p+0f,
                                3.0f,
                                0x1p-130f,
                                -0x1.fffffep-1f,
                                -0x1.fffffcp-1f,
                                -1.5f,
                                -20.0f,
                                0x1p-24f,
                                -0x1p-24f};

static void check_special_one(const op_case *c, float x, float y) {
  float s = c->scalar(x);
  int ok;
  if (isnan(s) || isnan(y))
    ok = isnan(s) && isnan(y);
  else if (isinf(s) || s == 0)
    ok = bits_of(y) == bits_of(s);
  else
    ok = fpclassify(y) == fpclassify(s) && ulps(y, s) <= 2 && ulps(y, (float)c->ref(x)) <= 1;
  check_count++;
  if (!ok) {
    check_failures++;
    fprintf(stderr, "%s(%a) = %a, libm float gives %a, double %a\n", c->name, x, y, s, c->ref(x));
  }
}

static void test_special(const op_case *c) {
  int n = (int)(sizeof SPECIAL / sizeof SPECIAL[0]);
  float x[64], y[64];
  memcpy(x, SPECIAL, sizeof SPECIAL);
  x[n++] = NAN;
  x[n++] = -NAN;
  x[n++] = float_of(0x7fa00000u); /* signalling NaN */
  c->vec(n, x, y);
  for (int i = 0; i < n; i++) check_special_one(c, x[i], y[i]);
  for (int i = n - 3; i < n; i++) CHECK(bits_of(y[i]) & 0x00400000u); /* NaNs come out quiet */
}

/* ---- lengths, alignment, in place -------------------------------------------------- */

static float test_value(int i) { /* a mix of ordinary and special values */
  static const float v[] = {0.3f,  -1.7f,    12.5f,     -90.0f,    0.0f,  -0.0f,
                            NAN,   INFINITY, -INFINITY, 0x1p-140f, 88.9f, -104.5f,
                            5e-3f, 7.25f,    -3.5f,     1e-8f,     60.0f};
  return i % 3 ? v[i % (int)(sizeof v / sizeof v[0])] : (float)(i * 0.37 - 6.0);
}

static int same_bits(float a, float b) { return bits_of(a) == bits_of(b) || (a != a && b != b); }

static void test_lengths(const op_case *c) {
  enum { PAD = 8, MAXN = 41 };
  float x[MAXN + 2 * PAD], y[MAXN + 2 * PAD], z[MAXN + 2 * PAD], alone[MAXN + 2 * PAD];
  for (int i = 0; i < MAXN + 2 * PAD; i++) x[i] = test_value(i);
  for (int i = 0; i < MAXN + 2 * PAD; i++) c->vec(1, &x[i], &alone[i]);
  int bad = 0;
  for (int off = 0; off < PAD; off++)
    for (int n = 0; n <= MAXN; n++) {
      int yoff = (off * 3 + 1) % PAD;
      for (int i = 0; i < MAXN + 2 * PAD; i++) y[i] = -12345.0f, z[i] = x[i];
      c->vec(n, x + off, y + yoff);
      c->vec(n, z + off, z + off); /* in place */
      for (int i = 0; i < MAXN + 2 * PAD; i++) {
        int inside = i >= yoff && i < yoff + n;
        if (inside ? !same_bits(y[i], alone[i - yoff + off]) : y[i] != -12345.0f) bad++;
        int zin = i >= off && i < off + n;
        if (!same_bits(z[i], zin ? alone[i] : x[i])) bad++;
      }
    }
  if (bad)
    fprintf(stderr, "%s: %d wrong elements over lengths 0..%d, offsets 0..%d\n", c->name, bad, MAXN,
            PAD - 1);
  CHECK(bad == 0);
}

/* ---- through the tensor ops ------------------------------------------------------------ */

/* out[i] == the kernel's value for x[i], bit for bit */
static int tensor_matches_kernel(const op_case *c, cnn_tensor *out, cnn_tensor *x) {
  int64_t n = cnn_tensor_numel(x);
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    float xi = (float)cnn_tensor_get(x, i), want;
    c->vec(1, &xi, &want);
    if (!same_bits((float)cnn_tensor_get(out, i), want)) bad++;
  }
  return bad;
}

static void test_tensor_op(const op_case *c) {
  int64_t shape[2] = {7, 5}, big[1] = {100003};
  cnn_manual_seed(7);
  cnn_tensor *x = cnn_randn(2, shape, CNN_FLOAT32), *xt = cnn_transpose(x, 0, 1);
  cnn_tensor *y = cnn_unary(c->op, x, 0, 0), *yt = cnn_unary(c->op, xt, 0, 0);
  CHECK(y && yt && tensor_matches_kernel(c, y, x) == 0 && tensor_matches_kernel(c, yt, xt) == 0);
  cnn_tensor *copy = cnn_clone(xt); /* in place on a strided view */
  CHECK(cnn_unary_(c->op, xt, 0, 0) == 0 && tensor_matches_kernel(c, xt, copy) == 0);
  cnn_tensor *l = cnn_randn(1, big, CNN_FLOAT32); /* the OpenMP path */
  cnn_tensor *ly = cnn_unary(c->op, l, 0, 0);
  CHECK(ly && tensor_matches_kernel(c, ly, l) == 0);
  cnn_tensor *lc = cnn_clone(l);
  CHECK(cnn_unary_(c->op, l, 0, 0) == 0 && tensor_matches_kernel(c, l, lc) == 0);
  cnn_tensor *all[] = {x, xt, y, yt, copy, l, ly, lc};
  for (int i = 0; i < 8; i++) cnn_tensor_release(all[i]);
}

/* ---- softmax ------------------------------------------------------------------------------ */

static void fill_softmax_input(float *xf, double *xd, int64_t outer, int64_t D) {
  for (int64_t i = 0; i < outer * D; i++) xd[i] = 8 * check_urand();
  xd[3] = -INFINITY;                                                   /* a masked entry */
  for (int64_t d = 0; d < D; d++) xd[(outer - 1) * D + d] = -INFINITY; /* a fully masked row */
  for (int64_t i = 0; i < outer * D; i++) xf[i] = (float)xd[i];
  for (int64_t i = 0; i < outer * D; i++) xd[i] = xf[i];
}

/* got (float) against ref (double): infinities must match exactly (a masked
 * log_softmax entry is -inf), the rest within atol + rtol*|ref| */
static void compare_f32(const char *what, const float *got, const double *ref, int64_t n,
                        double tol) {
  double *g = malloc(n * 8), *r = malloc(n * 8);
  for (int64_t i = 0; i < n; i++) {
    int inf = isinf(ref[i]) && got[i] == ref[i];
    g[i] = inf ? 0 : got[i], r[i] = inf ? 0 : ref[i];
  }
  check_arrays(what, g, r, n, tol, tol);
  free(g), free(r);
}

/* float32 rows (inner == 1, the vectorised path) against the float64 kernel */
static void test_softmax(int64_t D, int is_log) {
  enum { OUTER = 4 };
  int64_t n = OUTER * D;
  float *xf = malloc(n * 4), *yf = malloc(n * 4), *dyf = malloc(n * 4), *dxf = malloc(n * 4);
  double *xd = malloc(n * 8), *yd = malloc(n * 8), *dyd = malloc(n * 8), *dxd = malloc(n * 8);
  fill_softmax_input(xf, xd, OUTER, D);
  CHECK(cnn_cpu_softmax_forward(CNN_FLOAT32, OUTER, D, 1, is_log, xf, yf) == 0);
  CHECK(cnn_cpu_softmax_forward(CNN_FLOAT64, OUTER, D, 1, is_log, xd, yd) == 0);
  char what[64];
  snprintf(what, sizeof what, "%s f32 %dx%lld", is_log ? "log_softmax" : "softmax", OUTER,
           (long long)D);
  compare_f32(what, yf, yd, n - D, 1e-6);
  for (int64_t i = n - D; i < n; i++) CHECK(isnan(yf[i]) == isnan(yd[i]));
  memcpy(dxf, xf, n * 4); /* in place: y == x */
  CHECK(cnn_cpu_softmax_forward(CNN_FLOAT32, OUTER, D, 1, is_log, dxf, dxf) == 0);
  int same = 1;
  for (int64_t i = 0; i < n; i++) same &= same_bits(dxf[i], yf[i]);
  CHECK(same);
  /* backward from the forward output of the live rows */
  for (int64_t i = 0; i < n - D; i++)
    dyd[i] = check_urand(), dyf[i] = (float)dyd[i], dyd[i] = dyf[i];
  for (int64_t i = 0; i < n - D; i++) yd[i] = yf[i];
  CHECK(cnn_cpu_softmax_backward(CNN_FLOAT32, OUTER - 1, D, 1, is_log, yf, dyf, dxf) == 0);
  CHECK(cnn_cpu_softmax_backward(CNN_FLOAT64, OUTER - 1, D, 1, is_log, yd, dyd, dxd) == 0);
  snprintf(what, sizeof what, "%s backward f32 %dx%lld", is_log ? "log_softmax" : "softmax",
           OUTER - 1, (long long)D);
  compare_f32(what, dxf, dxd, n - D, 1e-5);
  free(xf), free(yf), free(dyf), free(dxf), free(xd), free(yd), free(dyd), free(dxd);
}

/* ---- the two ISA clones give the same bits ---------------------------------------------- */

static void test_clones_agree(const op_case *c) {
  enum { STEP = 1021, B = 4096 };
  float x[B], a[B], b[B];
  int64_t differ = 0;
  for (uint64_t u = 0; u < (1ull << 32);) {
    int64_t n = 0;
    for (; n < B && u < (1ull << 32); n++, u += STEP) x[n] = float_of((uint32_t)u);
    cnn_cpu_vector_math_allow_avx512(1);
    c->vec(n, x, a);
    cnn_cpu_vector_math_allow_avx512(0);
    c->vec(n, x, b);
    for (int64_t i = 0; i < n; i++) differ += !same_bits(a[i], b[i]);
  }
  if (differ)
    fprintf(stderr, "%s: %lld values differ between the AVX-512 and baseline code\n", c->name,
            (long long)differ);
  CHECK(differ == 0);
}

static void run_all(void) {
  for (int k = 0; k < NOPS; k++) {
    sweep_bits(&OPS[k]);
    sweep_range(&OPS[k]);
    test_special(&OPS[k]);
    test_lengths(&OPS[k]);
    test_tensor_op(&OPS[k]);
  }
  int64_t lengths[] = {1, 7, 10, 256, 1000};
  for (int i = 0; i < 5; i++) test_softmax(lengths[i], 0), test_softmax(lengths[i], 1);
}

int main(void) {
  int avx512 = cnn_cpu_vector_math_allow_avx512(1);
  printf("-- %s code\n", avx512 ? "AVX-512" : "baseline");
  run_all();
  if (avx512) {
    cnn_cpu_vector_math_allow_avx512(0);
    printf("-- baseline code\n");
    run_all();
    for (int k = 0; k < NOPS; k++) test_clones_agree(&OPS[k]);
    cnn_cpu_vector_math_allow_avx512(1);
  }
  return check_report("vector_math");
}
