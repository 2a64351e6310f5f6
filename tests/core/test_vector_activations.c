/*
 * test_vector_activations.c -- the vectorised float32 activations of
 * core/cpu/vector_math.c (gelu in its erf and tanh forms, elu, softplus,
 * mish) and the unary ops that run them.  test_vector_math.c does the same
 * for exp, log, expm1, tanh and sigmoid.
 *
 * Evidence, independent of the code under test:
 *  - ulp sweeps against double-precision libm (erfc, tanh, exp, expm1,
 *    log1p) rounded to float: <= 1 ulp everywhere.  ulp is meaningful for
 *    all of these because the kernels compute in double and never subtract
 *    nearly equal numbers: gelu's x Phi(x) is 0.5 x erfc(-x/sqrt 2), never
 *    1 + erf(..) ~ 0, and the tanh form is x sigmoid(2u); so the error is
 *    relative, down to the denormal results near underflow (counted in
 *    denormal steps, so a flush to zero fails).  One sweep strides through
 *    the 2^32 bit patterns (every 4093rd), one is dense over the working
 *    range, including softplus's denormal tail (x < -87).
 *  - the float path the kernels replace (elementwise_math.h per element):
 *    its worst distance is printed for the record, not bounded (it loses
 *    all digits where 1 + erf(x) or 1 + tanh(u) cancels, about 1e-8
 *    absolute, and flushes gelu(2^-149) to 0).
 *  - special values: NaN exactly where libm's double formula gives NaN
 *    (NaN in, and -inf for gelu, gelu-tanh and mish: -inf * 0, as the float
 *    path and PyTorch), quiet NaNs out, zeros and infinities bit-exact.
 *  - odd lengths 0..41 from unaligned starts, in place: results
 *    bit-identical to the same value computed alone, nothing written
 *    outside [0, n).
 *  - the unary ops (contiguous, transposed, in place on a view, past the
 *    OpenMP threshold) give the kernel's bits.
 *  - the derivatives (out = g f'(x)), the same ways, against derivatives
 *    written from the textbook in double libm (erfc, exp, tanh, cosh,
 *    log1p; not elementwise_math.h's, which the old path ran): within
 *    1 ulp + 2^-40 |g|.  The absolute part is needed only next to a zero
 *    of f' (gelu-tanh' at -0.75, mish' at -1.19) where two terms of about
 *    1 cancel, so the small relative error of a term (the exponential
 *    polynomial's, < 2^-31) is many ulps of the tiny result: a third sweep
 *    runs over the 2^16 consecutive floats around each zero (measured:
 *    15 ulp and 6.9e-15 |g| for gelu-tanh', 803 ulp and 6.4e-14 |g| =
 *    2^-43.8 |g| for mish'; gelu' 0 ulp).  The worst ulp and the worst
 *    absolute part are printed.  Through autograd: x.grad of a
 *    transposed view and of a large tensor has the kernel's bits.
 *  - all of the above for both ISA clones where the CPU has AVX-512, and
 *    the clones bit-identical over every 1021st bit pattern.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "float_ulps.h"
#include "cnn.h"
#include "cpu/vector_math.h"
#include "elementwise_math.h"

/* ---- the cases: kernel, reference in double, the float path it replaces ---- */

typedef struct {
  const char *name;
  int op;          /* cnn_unary_op */
  float p0, p1;    /* the op's parameters */
  float lo, hi;    /* dense sweep */
  float grad_zero; /* where f' changes sign (0: nowhere), to 1e-6 */
} act_case;

static const act_case CASES[] = {
    {"gelu", CNN_OP_GELU, 0, 0, -15.0f, 10.0f, -0.751792f},
    {"gelu_tanh", CNN_OP_GELU_TANH, 0, 0, -15.0f, 10.0f, -0.752461f},
    {"elu", CNN_OP_ELU, 1.0f, 0, -20.0f, 5.0f, 0},
    {"elu a=0.3", CNN_OP_ELU, 0.3f, 0, -20.0f, 5.0f, 0},
    {"softplus", CNN_OP_SOFTPLUS, 1.0f, 20.0f, -110.0f, 25.0f, 0},
    {"softplus b=.5 t=1", CNN_OP_SOFTPLUS, 0.5f, 1.0f, -220.0f, 5.0f, 0},
    {"softplus b=3", CNN_OP_SOFTPLUS, 3.0f, 20.0f, -40.0f, 10.0f, 0},
    {"mish", CNN_OP_MISH, 0, 0, -110.0f, 25.0f, -1.192431f},
};
#define NCASES (int)(sizeof CASES / sizeof CASES[0])

static void run_kernel(const act_case *c, int64_t n, const float *x, float *y) {
  switch (c->op) {
  case CNN_OP_GELU: cnn_cpu_gelu_f32(n, x, y); break;
  case CNN_OP_GELU_TANH: cnn_cpu_gelu_tanh_f32(n, x, y); break;
  case CNN_OP_ELU: cnn_cpu_elu_f32(n, x, y, c->p0); break;
  case CNN_OP_SOFTPLUS: cnn_cpu_softplus_f32(n, x, y, c->p0, c->p1); break;
  default: cnn_cpu_mish_f32(n, x, y); break;
  }
}

static double gelu_tanh_ref(double x) {
  double u = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
  if (u > -1) return 0.5 * x * (1 + tanh(u)); /* the textbook form, well conditioned here */
  return x * exp(2 * u) / (1 + exp(2 * u));   /* the same, without 1 + tanh(u) ~ 0 */
}
static double softplus_ref(float x, float beta, float threshold) {
  float z = x * beta; /* rounded to float by the definition (PyTorch's) */
  if (z > threshold) return x;
  return (fmax(z, 0) + log1p(exp(-fabs((double)z)))) / beta;
}
static double reference(const act_case *c, float x) {
  double d = x;
  switch (c->op) {
  case CNN_OP_GELU: return 0.5 * d * erfc(-d * 0.70710678118654752440);
  case CNN_OP_GELU_TANH: return gelu_tanh_ref(d);
  case CNN_OP_ELU: return d > 0 ? d : c->p0 * expm1(d);
  case CNN_OP_SOFTPLUS: return softplus_ref(x, c->p0, c->p1);
  default: return d * tanh(log1p(exp(d)));
  }
}
/* the float path the kernels replace: elementwise_math.h per element */
static float old_path(const act_case *c, float x) {
  switch (c->op) {
  case CNN_OP_GELU: return cnn_gelu_f(x);
  case CNN_OP_GELU_TANH: return cnn_gelu_tanh_f(x);
  case CNN_OP_ELU: return cnn_elu_f(x, c->p0);
  case CNN_OP_SOFTPLUS: return cnn_softplus_beta_f(x, c->p0, c->p1);
  default: return cnn_mish_f(x);
  }
}

/* ---- derivatives: kernel, reference ------------------------------------------------ */

static void run_grad(const act_case *c, int64_t n, const float *g, const float *x, float *out) {
  switch (c->op) {
  case CNN_OP_GELU: cnn_cpu_gelu_grad_f32(n, g, x, out); break;
  case CNN_OP_GELU_TANH: cnn_cpu_gelu_tanh_grad_f32(n, g, x, out); break;
  case CNN_OP_ELU: cnn_cpu_elu_grad_f32(n, g, x, out, c->p0); break;
  case CNN_OP_SOFTPLUS: cnn_cpu_softplus_grad_f32(n, g, x, out, c->p0, c->p1); break;
  default: cnn_cpu_mish_grad_f32(n, g, x, out); break;
  }
}

static double sigmoid_ref(double z) { return z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z)); }
static double sech2(double u) { return 1 / (cosh(u) * cosh(u)); }

static double gelu_tanh_grad_ref(double x) {
  double k = 0.79788456080286535588, u = k * (x + 0.044715 * x * x * x);
  return sigmoid_ref(2 * u) + 0.5 * x * sech2(u) * k * (1 + 3 * 0.044715 * x * x);
}
static double mish_grad_ref(double x) {
  double sp = log1p(exp(x));
  return tanh(sp) + x * sigmoid_ref(x) * sech2(sp);
}
static double grad_reference(const act_case *c, float x) {
  double d = x;
  switch (c->op) {
  case CNN_OP_GELU:
    return 0.5 * erfc(-d * 0.70710678118654752440) + d * exp(-0.5 * d * d) / sqrt(2 * M_PI);
  case CNN_OP_GELU_TANH: return gelu_tanh_grad_ref(d);
  case CNN_OP_ELU: return d > 0 ? 1 : c->p0 * exp(d);
  case CNN_OP_SOFTPLUS: return d * c->p0 > c->p1 ? 1 : sigmoid_ref(d * c->p0);
  default: return mish_grad_ref(d);
  }
}

/* ---- ulp arithmetic ----------------------------------------------------------- */

static int same_bits(float a, float b) { return bits_of(a) == bits_of(b) || (a != a && b != b); }

/* ---- sweeps ---------------------------------------------------------------------- */

typedef struct {
  int64_t vs_ref, vs_old;
  float x_ref, x_old;
} worst_t;

static void compare_batch(const act_case *c, int64_t n, const float *x, worst_t *w) {
  float y[4096];
  run_kernel(c, n, x, y);
  for (int64_t i = 0; i < n; i++) {
    int64_t a = ulps(y[i], (float)reference(c, x[i])), b = ulps(y[i], old_path(c, x[i]));
    if (a > w->vs_ref) w->vs_ref = a, w->x_ref = x[i];
    if (b > w->vs_old) w->vs_old = b, w->x_old = x[i];
  }
}

static void report_worst(const act_case *c, const char *sweep, int64_t count, const worst_t *w) {
  printf("%-17s %-5s sweep (%lld values): max %lld ulp vs libm double (x = %a); the float path "
         "it replaces differs by up to %lld ulp (x = %a)\n",
         c->name, sweep, (long long)count, (long long)w->vs_ref, w->x_ref, (long long)w->vs_old,
         w->x_old);
  CHECK(w->vs_ref <= 1);
}

/* compare_batch as float_ulps.h's sweeps call it */
static void batch_of(const void *c, int64_t first, int64_t n, const float *x, void *w) {
  (void)first;
  compare_batch(c, n, x, w);
}

static void sweep_bits(const act_case *c) {
  worst_t w = {0};
  report_worst(c, "bits", sweep_bit_patterns(batch_of, c, &w), &w);
}

static void sweep_range(const act_case *c) {
  worst_t w = {0};
  report_worst(c, "range", sweep_evenly(batch_of, c, c->lo, c->hi, &w), &w);
}

/* ---- derivative sweeps: out within 1 ulp + 2^-40 |g| of g f'(x) ------------------- */

typedef struct {
  int64_t ulp;        /* worst ulp distance */
  double abs_over;    /* worst |out - ref| / |g| among the values more than 1 ulp off */
  float x_ulp, x_abs; /* where */
  int64_t bad;        /* values outside the bound */
} gworst_t;

static float g_value(int64_t i) { return (float)((i % 7 - 3) * 0.37 + (i % 2 ? 1.0 : -1.0)); }

static void grad_compare_one(const act_case *c, float g, float x, float out, gworst_t *w) {
  double ref = (double)g * grad_reference(c, x);
  int64_t u = ulps(out, (float)ref);
  if (u > w->ulp) w->ulp = u, w->x_ulp = x;
  if (u <= 1) return;
  double over = fabs(out - ref) / fabs(g);
  if (!(over <= 0x1p-40)) w->bad++; /* NaN against a number counts */
  if (over > w->abs_over || over != over) w->abs_over = over, w->x_abs = x;
}

static void grad_batch(const act_case *c, int64_t n, const float *x, int64_t base, gworst_t *w) {
  float g[4096], out[4096];
  for (int64_t i = 0; i < n; i++) g[i] = g_value(base + i);
  run_grad(c, n, g, x, out);
  for (int64_t i = 0; i < n; i++) grad_compare_one(c, g[i], x[i], out[i], w);
}

static void grad_report(const act_case *c, const char *sweep, const gworst_t *w) {
  printf("%-17s grad %-5s sweep: max %lld ulp (x = %a); beyond 1 ulp, |err| <= %.3g |g| (x = "
         "%a); %lld outside 1 ulp + 2^-40 |g|\n",
         c->name, sweep, (long long)w->ulp, w->x_ulp, w->abs_over, w->x_abs, (long long)w->bad);
  CHECK(w->bad == 0);
}

/* grad_batch as float_ulps.h's sweeps call it */
static void grad_batch_of(const void *c, int64_t first, int64_t n, const float *x, void *w) {
  grad_batch(c, n, x, first, w);
}

static void grad_sweeps(const act_case *c) {
  enum { B = SWEEP_BATCH };
  float x[B];
  gworst_t bits = {0}, range = {0};
  sweep_bit_patterns(grad_batch_of, c, &bits);
  grad_report(c, "bits", &bits);
  sweep_evenly(grad_batch_of, c, c->lo, c->hi, &range);
  grad_report(c, "range", &range);
  if (c->grad_zero == 0) return;
  gworst_t zero = {0}; /* the 2^16 floats around f''s zero, consecutive */
  for (int64_t i0 = 0; i0 < 16; i0++) {
    for (int64_t i = 0; i < B; i++)
      x[i] = float_of(bits_of(c->grad_zero) + (uint32_t)(i0 * B + i) - (1u << 15));
    grad_batch(c, B, x, i0 * B, &zero);
  }
  grad_report(c, "zero", &zero);
}

/* ---- special values ----------------------------------------------------------------- */

static const float SPECIAL[] = {
    0.0f,      -0.0f,      INFINITY, -INFINITY, 0x1p-149f, -0x1p-149f, 0x1.fffffcp-127f,
    0x1p-126f, -0x1p-126f, FLT_MAX,  -FLT_MAX,  1.0f,      -1.0f,      0x1p-20f,
    -0x1p-20f, -0.75f,     -5.0f,    -9.0f,     -13.0f,    -13.5f,     -14.0f,
    -87.0f,    -87.5f,     -88.0f,   -103.0f,   -103.9f,   -104.0f,    -105.0f,
    -200.0f,   19.9f,      20.0f,    20.1f,     40.0f,     1e10f,      -1e10f,
    1e30f,     -1e30f};

static void check_special_one(const act_case *c, float x, float y) {
  float r = (float)reference(c, x), old = old_path(c, x);
  int ok;
  if (isnan(r) || isnan(y))
    ok = isnan(r) && isnan(y) && isnan(old) && (bits_of(y) & 0x00400000u); /* quiet */
  else if (isinf(r) || r == 0)
    ok = bits_of(y) == bits_of(r);
  else
    ok = ulps(y, r) <= 1;
  check_count++;
  if (!ok) {
    check_failures++;
    fprintf(stderr, "%s(%a) = %a, libm double gives %a, the float path %a\n", c->name, x, y, r,
            old);
  }
}

/* NaN exactly where the reference is NaN (+-inf for gelu, gelu-tanh and
 * mish: inf * 0), infinities bit-exact, zeros where the reference is 0.
 * Not the sign of zero: where g f'(x) underflows, the reference's sign
 * comes from 0 * x in its formula, not from the exact tiny value's. */
static void test_grad_special(const act_case *c) {
  int n = (int)(sizeof SPECIAL / sizeof SPECIAL[0]);
  float x[64], g[64], out[64];
  memcpy(x, SPECIAL, sizeof SPECIAL);
  x[n++] = NAN;
  for (int i = 0; i < n; i++) g[i] = g_value(i);
  run_grad(c, n, g, x, out);
  for (int i = 0; i < n; i++) {
    float r = (float)((double)g[i] * grad_reference(c, x[i]));
    int ok = isnan(r) || isnan(out[i]) ? isnan(r) && isnan(out[i])
             : isinf(r)                ? bits_of(out[i]) == bits_of(r)
                                       : ulps(out[i], r) <= 1; /* 0 is 0 ulp from -0 */
    check_count++;
    if (!ok) {
      check_failures++;
      fprintf(stderr, "%s'(%a) * %a = %a, libm double gives %a\n", c->name, x[i], g[i], out[i], r);
    }
  }
}

static void test_special(const act_case *c) {
  int n = (int)(sizeof SPECIAL / sizeof SPECIAL[0]);
  float x[64], y[64];
  memcpy(x, SPECIAL, sizeof SPECIAL);
  x[n++] = NAN;
  x[n++] = -NAN;
  x[n++] = float_of(0x7fa00000u); /* signalling NaN */
  run_kernel(c, n, x, y);
  for (int i = 0; i < n; i++) check_special_one(c, x[i], y[i]);
}

/* ---- lengths, alignment, in place ------------------------------------------------------ */

static float test_value(int i) { /* a mix of ordinary and special values */
  static const float v[] = {0.3f,  -1.7f,    12.5f,     -90.0f,    0.0f,  -0.0f,
                            NAN,   INFINITY, -INFINITY, 0x1p-140f, 88.9f, -104.5f,
                            5e-3f, 7.25f,    -3.5f,     1e-8f,     60.0f};
  return i % 3 ? v[i % (int)(sizeof v / sizeof v[0])] : (float)(i * 0.37 - 6.0);
}

static int count_bad(const act_case *c, const float *x, const float *alone, int off, int n) {
  enum { PAD = 8, MAXN = 41, ALL = MAXN + 2 * PAD };
  float y[ALL], z[ALL];
  int yoff = (off * 3 + 1) % PAD, bad = 0;
  for (int i = 0; i < ALL; i++) y[i] = -12345.0f, z[i] = x[i];
  run_kernel(c, n, x + off, y + yoff);
  run_kernel(c, n, z + off, z + off); /* in place */
  for (int i = 0; i < ALL; i++) {
    int inside = i >= yoff && i < yoff + n;
    if (inside ? !same_bits(y[i], alone[i - yoff + off]) : y[i] != -12345.0f) bad++;
    int zin = i >= off && i < off + n;
    if (!same_bits(z[i], zin ? alone[i] : x[i])) bad++;
  }
  return bad;
}

static void test_lengths(const act_case *c) {
  enum { PAD = 8, MAXN = 41, ALL = MAXN + 2 * PAD };
  float x[ALL], alone[ALL];
  for (int i = 0; i < ALL; i++) x[i] = test_value(i);
  for (int i = 0; i < ALL; i++) run_kernel(c, 1, &x[i], &alone[i]);
  int bad = 0;
  for (int off = 0; off < PAD; off++)
    for (int n = 0; n <= MAXN; n++) bad += count_bad(c, x, alone, off, n);
  if (bad) fprintf(stderr, "%s: %d wrong elements over lengths 0..%d\n", c->name, bad, MAXN);
  CHECK(bad == 0);
}

/* odd lengths and offsets, out == g and out == x: the bits of each value alone */
static void test_grad_lengths(const act_case *c) {
  enum { PAD = 8, MAXN = 41, ALL = MAXN + 2 * PAD };
  float x[ALL], g[ALL], alone[ALL], a[ALL], b[ALL];
  for (int i = 0; i < ALL; i++) x[i] = test_value(i), g[i] = g_value(i);
  for (int i = 0; i < ALL; i++) run_grad(c, 1, &g[i], &x[i], &alone[i]);
  int bad = 0;
  for (int off = 0; off < PAD; off++)
    for (int n = 0; n <= MAXN; n++) {
      memcpy(a, g, sizeof g), memcpy(b, x, sizeof x);
      run_grad(c, n, a + off, x + off, a + off); /* out == g */
      run_grad(c, n, g + off, b + off, b + off); /* out == x */
      for (int i = 0; i < ALL; i++) {
        int in = i >= off && i < off + n;
        bad += !same_bits(a[i], in ? alone[i] : g[i]) + !same_bits(b[i], in ? alone[i] : x[i]);
      }
    }
  if (bad) fprintf(stderr, "%s grad: %d wrong elements over lengths 0..%d\n", c->name, bad, MAXN);
  CHECK(bad == 0);
}

/* ---- through the tensor ops ------------------------------------------------------------- */

/* out[i] == the kernel's value for x[i], bit for bit */
static int tensor_matches_kernel(const act_case *c, cnn_tensor *out, cnn_tensor *x) {
  int64_t n = cnn_tensor_numel(x);
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    float xi = (float)cnn_tensor_get(x, i), want;
    run_kernel(c, 1, &xi, &want);
    if (!same_bits((float)cnn_tensor_get(out, i), want)) bad++;
  }
  return bad;
}

static void test_tensor_op(const act_case *c) {
  int64_t shape[2] = {7, 5}, big[1] = {100003};
  cnn_manual_seed(7);
  cnn_tensor *r = cnn_randn(2, shape, CNN_FLOAT32), *x = cnn_unary(CNN_OP_MUL_SCALAR, r, 8, 0);
  cnn_tensor *xt = cnn_transpose(x, 0, 1);
  cnn_tensor *y = cnn_unary(c->op, x, c->p0, c->p1), *yt = cnn_unary(c->op, xt, c->p0, c->p1);
  CHECK(y && yt && tensor_matches_kernel(c, y, x) == 0 && tensor_matches_kernel(c, yt, xt) == 0);
  cnn_tensor *copy = cnn_clone(xt); /* in place on a strided view */
  CHECK(cnn_unary_(c->op, xt, c->p0, c->p1) == 0 && tensor_matches_kernel(c, xt, copy) == 0);
  cnn_tensor *l = cnn_randn(1, big, CNN_FLOAT32); /* the OpenMP path */
  cnn_tensor *ly = cnn_unary(c->op, l, c->p0, c->p1);
  CHECK(ly && tensor_matches_kernel(c, ly, l) == 0);
  cnn_tensor *all[] = {r, x, xt, y, yt, copy, l, ly};
  for (int i = 0; i < 8; i++) cnn_tensor_release(all[i]);
}

/* x.grad of y = op(view) with upstream gradient gy == the kernel's bits */
static int grad_matches_kernel(const act_case *c, cnn_tensor *xg, cnn_tensor *v, cnn_tensor *gy) {
  int64_t n = cnn_tensor_numel(v);
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    float xi = (float)cnn_tensor_get(v, i), gi = (float)cnn_tensor_get(gy, i), want;
    run_grad(c, 1, &gi, &xi, &want);
    if (!same_bits((float)cnn_tensor_get(xg, i), want)) bad++;
  }
  return bad;
}

/* through autograd: a transposed view (strided saved input) and a large
 * contiguous tensor (the OpenMP path) */
static void test_autograd(const act_case *c, int64_t rows, int64_t cols, int transpose) {
  int64_t shape[2] = {rows, cols};
  cnn_tensor *r = cnn_randn(2, shape, CNN_FLOAT32), *x = cnn_unary(CNN_OP_MUL_SCALAR, r, 6, 0);
  CHECK(cnn_set_requires_grad(x, true) == 0);
  cnn_tensor *v = transpose ? cnn_transpose(x, 0, 1) : cnn_contiguous(x);
  cnn_tensor *y = cnn_unary(c->op, v, c->p0, c->p1);
  cnn_tensor *gy =
      cnn_randn(2, (int64_t[]){transpose ? cols : rows, transpose ? rows : cols}, CNN_FLOAT32);
  CHECK(y && cnn_backward(y, gy, false) == 0 && x->grad);
  cnn_tensor *xg = !x->grad    ? NULL
                   : transpose ? cnn_transpose(x->grad, 0, 1)
                               : cnn_contiguous(x->grad);
  CHECK(xg && grad_matches_kernel(c, xg, v, gy) == 0);
  cnn_tensor *all[] = {r, x, v, y, gy, xg};
  for (int i = 0; i < 6; i++) cnn_tensor_release(all[i]);
}

/* ---- the two ISA clones give the same bits ------------------------------------------------ */

static void test_clones_agree(const act_case *c) {
  enum { STEP = 1021, B = 4096 };
  float x[B], a[B], b[B], g[B];
  int64_t differ = 0;
  for (uint64_t u = 0; u < (1ull << 32);) {
    int64_t n = 0;
    for (; n < B && u < (1ull << 32); n++, u += STEP) x[n] = float_of((uint32_t)u);
    cnn_cpu_vector_math_allow_avx512(1);
    run_kernel(c, n, x, a);
    cnn_cpu_vector_math_allow_avx512(0);
    run_kernel(c, n, x, b);
    for (int64_t i = 0; i < n; i++) differ += !same_bits(a[i], b[i]);
    for (int64_t i = 0; i < n; i++) g[i] = g_value(i);
    cnn_cpu_vector_math_allow_avx512(1);
    run_grad(c, n, g, x, a);
    cnn_cpu_vector_math_allow_avx512(0);
    run_grad(c, n, g, x, b);
    for (int64_t i = 0; i < n; i++) differ += !same_bits(a[i], b[i]);
  }
  if (differ)
    fprintf(stderr, "%s: %lld values differ between the AVX-512 and baseline code\n", c->name,
            (long long)differ);
  CHECK(differ == 0);
}

static void run_all(void) {
  for (int k = 0; k < NCASES; k++) {
    sweep_bits(&CASES[k]);
    sweep_range(&CASES[k]);
    test_special(&CASES[k]);
    test_lengths(&CASES[k]);
    test_tensor_op(&CASES[k]);
    grad_sweeps(&CASES[k]);
    test_grad_special(&CASES[k]);
    test_grad_lengths(&CASES[k]);
    test_autograd(&CASES[k], 7, 5, 1);
    test_autograd(&CASES[k], 1, 100003, 0);
  }
}

int main(void) {
  int avx512 = cnn_cpu_vector_math_allow_avx512(1);
  printf("-- %s code\n", avx512 ? "AVX-512" : "baseline");
  run_all();
  if (avx512) {
    cnn_cpu_vector_math_allow_avx512(0);
    printf("-- baseline code\n");
    run_all();
    for (int k = 0; k < NCASES; k++) test_clones_agree(&CASES[k]);
    cnn_cpu_vector_math_allow_avx512(1);
  }
  return check_report("vector_activations");
}
