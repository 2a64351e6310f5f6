/*
 * test_conv_transpose.c -- cnn_conv_transpose2d (core/ops/nn_conv_transpose.c).
 *
 * Four layers of evidence, none comparing a path with itself:
 *  1. small cases worked out by hand (below), bias and output_padding;
 *  2. an oracle written here from the definition (a scatter loop over the
 *     input: y[n, o, ih*s - p + r*d, ...] += x[n, i, ih, ...] * w[i, o, r, ...])
 *     against every algorithm (AUTO, oneDNN, im2col, naive) in float32 and
 *     float64, on odd shapes: groups, dilation, output_padding in both
 *     dims, the case output_padding >= stride (dilation 2) whose last rows
 *     no window reaches, and 16/32 channels (oneDNN's blocked layouts);
 *  3. the transposed convolution equals the input-gradient of conv2d with
 *     the same weight and options, through the autograd engine;
 *  4. gradients of x, w and b against central finite differences in
 *     float64, through im2col (AUTO) and the naive loops;
 *  5. gradients of x, w and b against an oracle written here (the scatter
 *     loop of 2, differentiated: each term x * w sends dy * w to dx, dy *
 *     x to dw) through every algorithm in float32, so the fast paths'
 *     backward (oneDNN's deconvolution, its shared dy reorder, the bias
 *     gradient inside the primitive; im2col) are checked too;
 *  6. oneDNN's deconvolution called directly (core/cpu/deconv_onednn.c):
 *     it must create a primitive for every configuration without cropped
 *     rows -- a silent fallback would pass 2 and 5 -- and agree with both
 *     oracles.
 * Plus PyTorch's error cases.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "check_core.h"
#include "cnn.h"
#include "cpu/kernels.h"
#include "gradcheck.h"

static const char *algo_names[] = {"auto", "onednn", "im2col", "naive"};

typedef struct {
  const char *name;
  int64_t N, Cin, H, W, Cout, R, S;
  cnn_conv_transpose_params p;
} config;

static const config configs[] = {
    {"3x3 pad 1", 2, 3, 4, 5, 2, 3, 3, {{1, 1}, {1, 1}, {0, 0}, {1, 1}, 1}},
    {"3x2 stride (2,3) pad (1,0) output_padding (1,2) groups 2",
     2,
     4,
     3,
     4,
     6,
     3,
     2,
     {{2, 3}, {1, 0}, {1, 2}, {1, 1}, 2}},
    {"dilation 2 output_padding 1 > stride 1 (unreached last rows)",
     1,
     2,
     3,
     3,
     3,
     2,
     2,
     {{1, 1}, {0, 0}, {1, 1}, {2, 2}, 1}},
    {"3x3 stride 2 pad 1 output_padding 1 dilation 2 groups 3",
     2,
     6,
     4,
     4,
     6,
     3,
     3,
     {{2, 2}, {1, 1}, {1, 1}, {2, 2}, 3}},
    {"4x4 stride 2 pad 1, 16 -> 32 channels",
     3,
     16,
     5,
     5,
     32,
     4,
     4,
     {{2, 2}, {1, 1}, {0, 0}, {1, 1}, 1}},
    {"20 -> 12 3x3 stride (3,2) pad (1,2) output_padding (2,1) dilation (1,2) groups 4",
     2,
     20,
     5,
     4,
     12,
     3,
     3,
     {{3, 2}, {1, 2}, {2, 1}, {1, 2}, 4}},
    {"2x2 stride 2, 32 -> 16, 6x7 (a U-Net up-step)",
     2,
     32,
     6,
     7,
     16,
     2,
     2,
     {{2, 2}, {0, 0}, {0, 0}, {1, 1}, 1}},
};
#define NCONFIGS (int)(sizeof configs / sizeof configs[0])

static int64_t out_dim(int64_t in, int64_t k, const cnn_conv_transpose_params *p, int i) {
  return (in - 1) * p->stride[i] - 2 * p->pad[i] + p->dilation[i] * (k - 1) + p->output_padding[i] +
         1;
}

/* ---- the oracle: the definition as a scatter loop, in double ------------------ */

/* y = the transposed convolution of (x, w, b); with dy (else NULL), also
 * the gradients of sum(y * dy): each term x * w sends dy * w to dx and
 * dy * x to dw. */
static void oracle_grad(const config *c, const double *x, const double *w, const double *b,
                        const double *dy, double *y, double *dx, double *dw, double *db, int64_t OH,
                        int64_t OW) {
  const cnn_conv_transpose_params *p = &c->p;
  int64_t Cin_g = c->Cin / p->groups, Cout_g = c->Cout / p->groups, ny = c->N * c->Cout * OH * OW;
  for (int64_t i = 0; i < ny; i++) y[i] = b ? b[(i / (OH * OW)) % c->Cout] : 0;
  if (dy) {
    memset(dx, 0, (size_t)(c->N * c->Cin * c->H * c->W) * sizeof(double));
    memset(dw, 0, (size_t)(c->Cin * Cout_g * c->R * c->S) * sizeof(double));
    memset(db, 0, (size_t)c->Cout * sizeof(double));
    for (int64_t i = 0; i < ny; i++) db[(i / (OH * OW)) % c->Cout] += dy[i];
  }
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t ci = 0; ci < c->Cin; ci++)
      for (int64_t ih = 0; ih < c->H; ih++)
        for (int64_t iw = 0; iw < c->W; iw++) {
          int64_t xi = ((n * c->Cin + ci) * c->H + ih) * c->W + iw, g = ci / Cin_g;
          for (int64_t o = 0; o < Cout_g; o++)
            for (int64_t r = 0; r < c->R; r++)
              for (int64_t q = 0; q < c->S; q++) {
                int64_t oh = ih * p->stride[0] - p->pad[0] + r * p->dilation[0];
                int64_t ow = iw * p->stride[1] - p->pad[1] + q * p->dilation[1];
                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                int64_t wi = ((ci * Cout_g + o) * c->R + r) * c->S + q;
                int64_t yi = ((n * c->Cout + g * Cout_g + o) * OH + oh) * OW + ow;
                y[yi] += x[xi] * w[wi];
                if (!dy) continue;
                dx[xi] += dy[yi] * w[wi];
                dw[wi] += dy[yi] * x[xi];
              }
        }
}

static void oracle(const config *c, const double *x, const double *w, const double *b, double *y,
                   int64_t OH, int64_t OW) {
  oracle_grad(c, x, w, b, NULL, y, NULL, NULL, NULL, OH, OW);
}

static cnn_tensor *tensor_of(int nd, const int64_t *shape, const double *v, cnn_dtype dt) {
  cnn_tensor *t = cnn_empty(nd, shape, dt, CNN_DEVICE_CPU);
  for (int64_t i = 0; i < cnn_tensor_numel(t); i++) cnn_tensor_set(t, i, v[i]);
  return t;
}

static void values(cnn_tensor *t, double *out) {
  for (int64_t i = 0; i < cnn_tensor_numel(t); i++) out[i] = cnn_tensor_get(t, i);
}

/* ---- 1. by hand -------------------------------------------------------------------- */

/*
 * x = 1 2    w = 1    10     each x[i][j] stamps x[i][j] * w at (i*s, j*s):
 *     3 4        100  1000
 * stride 1: y = 1 12 20 / 103 1234 2040 / 300 3400 4000 (3x3);
 * stride 2: the four stamps side by side (4x4):
 *     1 10 2 20 / 100 1000 200 2000 / 3 30 4 40 / 300 3000 400 4000;
 * stride 2, padding 1, output_padding 1: rows/columns 1..3 of that 4x4
 * (padding drops one at each end, output_padding adds the last back),
 * plus the bias 0.5.
 */
static void test_hand(void) {
  double xv[4] = {1, 2, 3, 4}, wv[4] = {1, 10, 100, 1000}, bv[1] = {0.5};
  cnn_tensor *x = tensor_of(4, (int64_t[]){1, 1, 2, 2}, xv, CNN_FLOAT64);
  cnn_tensor *w = tensor_of(4, (int64_t[]){1, 1, 2, 2}, wv, CNN_FLOAT64);
  cnn_tensor *b = tensor_of(1, (int64_t[]){1}, bv, CNN_FLOAT64);
  double got[16];
  cnn_conv_transpose_params p = {{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1};
  cnn_tensor *y = cnn_conv_transpose2d(x, w, NULL, &p);
  CHECK(y && y->shape[2] == 3 && y->shape[3] == 3);
  if (y)
    values(y, got), check_arrays("hand stride 1", got,
                                 (double[]){1, 12, 20, 103, 1234, 2040, 300, 3400, 4000}, 9, 0, 0);
  cnn_tensor_release(y);

  p.stride[0] = p.stride[1] = 2;
  y = cnn_conv_transpose2d(x, w, NULL, &p);
  CHECK(y && y->shape[2] == 4 && y->shape[3] == 4);
  if (y)
    values(y, got), check_arrays("hand stride 2", got,
                                 (double[]){1, 10, 2, 20, 100, 1000, 200, 2000, 3, 30, 4, 40, 300,
                                            3000, 400, 4000},
                                 16, 0, 0);
  cnn_tensor_release(y);

  p.pad[0] = p.pad[1] = 1, p.output_padding[0] = p.output_padding[1] = 1;
  y = cnn_conv_transpose2d(x, w, b, &p);
  CHECK(y && y->shape[2] == 3 && y->shape[3] == 3);
  if (y)
    values(y, got),
        check_arrays("hand stride 2 pad 1 output_padding 1 bias", got,
                     (double[]){1000.5, 200.5, 2000.5, 30.5, 4.5, 40.5, 3000.5, 400.5, 4000.5}, 9,
                     0, 0);
  cnn_tensor_release(y);
  cnn_tensor_release(x), cnn_tensor_release(w), cnn_tensor_release(b);
}

/* ---- 2. every algorithm against the oracle ----------------------------------------- */

static void check_against_oracle(const config *c, cnn_conv_algo algo, cnn_dtype dt) {
  int64_t OH = out_dim(c->H, c->R, &c->p, 0), OW = out_dim(c->W, c->S, &c->p, 1);
  int64_t xs[4] = {c->N, c->Cin, c->H, c->W}, ws[4] = {c->Cin, c->Cout / c->p.groups, c->R, c->S};
  int64_t nx = c->N * c->Cin * c->H * c->W, nw = ws[0] * ws[1] * c->R * c->S,
          ny = c->N * c->Cout * OH * OW;
  double *x = check_rand_f64(nx), *w = check_rand_f64(nw), *b = check_rand_f64(c->Cout);
  double *ref = malloc((size_t)ny * sizeof(double)), *got = malloc((size_t)ny * sizeof(double));
  oracle(c, x, w, b, ref, OH, OW);
  cnn_tensor *tx = tensor_of(4, xs, x, dt), *tw = tensor_of(4, ws, w, dt),
             *tb = tensor_of(1, &c->Cout, b, dt);
  cnn_set_conv_algo(algo);
  cnn_tensor *y = cnn_conv_transpose2d(tx, tw, tb, &c->p);
  cnn_set_conv_algo(CNN_CONV_AUTO);
  char what[200];
  snprintf(what, sizeof what, "conv_transpose2d %s (%s, %s) vs oracle", c->name, algo_names[algo],
           cnn_dtype_name(dt));
  if (!y) {
    fprintf(stderr, "%s: failed: %s\n", what, cnn_error());
    check_failures++;
  } else {
    CHECK(y->shape[0] == c->N && y->shape[1] == c->Cout && y->shape[2] == OH && y->shape[3] == OW);
    values(y, got);
    double tol = dt == CNN_FLOAT64 ? 1e-12 : 1e-5;
    check_arrays(what, got, ref, ny, tol, tol);
  }
  cnn_tensor_release(y), cnn_tensor_release(tx), cnn_tensor_release(tw), cnn_tensor_release(tb);
  free(x), free(w), free(b), free(ref), free(got);
}

/* float64 runs im2col under AUTO, ONEDNN and IM2COL alike (oneDNN is
 * float32 only), so float64 checks AUTO and NAIVE. */
static void test_oracle(void) {
  for (int i = 0; i < NCONFIGS; i++)
    for (int algo = CNN_CONV_AUTO; algo <= CNN_CONV_NAIVE; algo++) {
      check_against_oracle(&configs[i], (cnn_conv_algo)algo, CNN_FLOAT32);
      if (algo == CNN_CONV_AUTO || algo == CNN_CONV_NAIVE)
        check_against_oracle(&configs[i], (cnn_conv_algo)algo, CNN_FLOAT64);
    }
}

/* ---- 5. the backward of every algorithm against the oracle ---------------------------- */

typedef struct {
  int64_t OH, OW, nx, nw, ny;
  double *x, *w, *b, *dy;   /* inputs */
  double *dx, *dw, *db, *y; /* the oracle's outputs */
} problem;

static void problem_init(const config *c, problem *q) {
  q->OH = out_dim(c->H, c->R, &c->p, 0), q->OW = out_dim(c->W, c->S, &c->p, 1);
  q->nx = c->N * c->Cin * c->H * c->W, q->nw = c->Cin * (c->Cout / c->p.groups) * c->R * c->S;
  q->ny = c->N * c->Cout * q->OH * q->OW;
  q->x = check_rand_f64(q->nx), q->w = check_rand_f64(q->nw), q->b = check_rand_f64(c->Cout);
  q->dy = check_rand_f64(q->ny);
  q->dx = malloc((size_t)q->nx * sizeof(double)), q->dw = malloc((size_t)q->nw * sizeof(double));
  q->db = malloc((size_t)c->Cout * sizeof(double)), q->y = malloc((size_t)q->ny * sizeof(double));
  oracle_grad(c, q->x, q->w, q->b, q->dy, q->y, q->dx, q->dw, q->db, q->OH, q->OW);
}

static void problem_free(problem *q) {
  free(q->x), free(q->w), free(q->b), free(q->dy);
  free(q->dx), free(q->dw), free(q->db), free(q->y);
}

/* got (a tensor) against want, with a label */
static void check_tensor(const char *what, const char *which, cnn_tensor *got, const double *want,
                         int64_t n, double tol) {
  char label[260];
  snprintf(label, sizeof label, "%s: %s", what, which);
  if (!got || cnn_tensor_numel(got) != n) {
    fprintf(stderr, "%s: missing or wrong size\n", label);
    check_failures++;
    return;
  }
  double *v = malloc((size_t)n * sizeof(double));
  values(got, v);
  check_arrays(label, v, want, n, tol, tol);
  free(v);
}

static void check_backward(const config *c, cnn_conv_algo algo, cnn_dtype dt) {
  problem q;
  problem_init(c, &q);
  int64_t xs[4] = {c->N, c->Cin, c->H, c->W}, ws[4] = {c->Cin, c->Cout / c->p.groups, c->R, c->S};
  int64_t ys[4] = {c->N, c->Cout, q.OH, q.OW};
  cnn_tensor *tx = tensor_of(4, xs, q.x, dt), *tw = tensor_of(4, ws, q.w, dt),
             *tb = tensor_of(1, &c->Cout, q.b, dt), *tdy = tensor_of(4, ys, q.dy, dt);
  cnn_set_requires_grad(tx, true), cnn_set_requires_grad(tw, true), cnn_set_requires_grad(tb, true);
  cnn_set_conv_algo(algo);
  cnn_tensor *y = cnn_conv_transpose2d(tx, tw, tb, &c->p);
  int rc = y ? cnn_backward(y, tdy, false) : -1;
  cnn_set_conv_algo(CNN_CONV_AUTO);
  char what[200];
  snprintf(what, sizeof what, "conv_transpose2d backward %s (%s, %s) vs oracle", c->name,
           algo_names[algo], cnn_dtype_name(dt));
  if (rc) {
    fprintf(stderr, "%s: failed: %s\n", what, cnn_error());
    check_failures++;
  } else {
    double tol = dt == CNN_FLOAT64 ? 1e-12 : 1e-4;
    check_tensor(what, "dx", tx->grad, q.dx, q.nx, tol);
    check_tensor(what, "dw", tw->grad, q.dw, q.nw, tol);
    check_tensor(what, "db", tb->grad, q.db, c->Cout, tol);
  }
  cnn_tensor_release(y), cnn_tensor_release(tx), cnn_tensor_release(tw);
  cnn_tensor_release(tb), cnn_tensor_release(tdy);
  problem_free(&q);
}

static void test_backward_oracle(void) {
  for (int i = 0; i < NCONFIGS; i++) {
    for (int algo = CNN_CONV_AUTO; algo <= CNN_CONV_NAIVE; algo++)
      check_backward(&configs[i], (cnn_conv_algo)algo, CNN_FLOAT32);
    check_backward(&configs[i], CNN_CONV_AUTO, CNN_FLOAT64);
  }
}

/* ---- 6. oneDNN's deconvolution, directly ------------------------------------------------ */

/* The convolution whose input-gradient config c is (nn_conv_transpose.c's
 * geometry); 0 when c crops rows (output_padding >= stride), which the op
 * never sends to the deconvolution. */
static int deconv_shape(const config *c, int64_t OH, int64_t OW, cnn_conv_shape *s) {
  const cnn_conv_transpose_params *p = &c->p;
  int pb = p->pad[0] - p->stride[0] * (p->output_padding[0] / p->stride[0]);
  int pr = p->pad[1] - p->stride[1] * (p->output_padding[1] / p->stride[1]);
  if (pb < 0 || pr < 0) return 0;
  *s = (cnn_conv_shape){c->N,           c->Cout,        OH,        OW,          c->Cin,
                        c->R,           c->S,           c->H,      c->W,        p->stride[0],
                        p->stride[1],   p->pad[0],      pb,        p->pad[1],   pr,
                        p->dilation[0], p->dilation[1], p->groups, CNN_FLOAT32, 0, 0};
  return 1;
}

static float *floats_of(const double *v, int64_t n) {
  float *f = malloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
  return f;
}

static void check_floats(const char *what, const float *got, const double *want, int64_t n) {
  double *g = malloc((size_t)n * sizeof(double));
  for (int64_t i = 0; i < n; i++) g[i] = got[i];
  check_arrays(what, g, want, n, 1e-4, 1e-4);
  free(g);
}

static void check_deconv_direct(const config *c) {
  problem q;
  problem_init(c, &q);
  cnn_conv_shape s;
  if (!deconv_shape(c, q.OH, q.OW, &s)) {
    problem_free(&q);
    return;
  }
  float *x = floats_of(q.x, q.nx), *w = floats_of(q.w, q.nw), *b = floats_of(q.b, c->Cout);
  float *dy = floats_of(q.dy, q.ny), *y = malloc((size_t)q.ny * sizeof(float));
  float *dx = malloc((size_t)q.nx * sizeof(float)), *dw = malloc((size_t)q.nw * sizeof(float));
  float *db = malloc((size_t)c->Cout * sizeof(float));
  char what[240];
  int f = cnn_cpu_conv_transpose2d_onednn_forward(&s, x, w, b, y);
  int g = cnn_cpu_conv_transpose2d_onednn_backward(&s, dy, x, w, dx, dw, db);
  snprintf(what, sizeof what, "oneDNN deconvolution %s", c->name);
  if (f || g) {
    fprintf(stderr, "%s: forward %d, backward %d: %s\n", what, f, g, cnn_error());
    check_failures++;
  } else {
    check_floats(what, y, q.y, q.ny);
    check_floats(what, dx, q.dx, q.nx);
    check_floats(what, dw, q.dw, q.nw);
    check_floats(what, db, q.db, c->Cout);
  }
  free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
  problem_free(&q);
}

static void test_deconv_direct(void) {
  for (int i = 0; i < NCONFIGS; i++) check_deconv_direct(&configs[i]);
}

/* ---- 3. the input-gradient of conv2d ------------------------------------------------- */

/* z (the transposed output's shape) -> conv2d(z, w) has x's shape, or
 * more rows/columns when output_padding >= stride (the windows there
 * start in the rows the transposed convolution's kernel never reaches);
 * then d(sum(conv2d(z, w) * dy))/dz, with dy = x padded by zeros to that
 * shape, must be conv_transpose2d(x, w). */
static void check_is_conv_gradient(const config *c) {
  const cnn_conv_transpose_params *p = &c->p;
  int64_t xs[4] = {c->N, c->Cin, c->H, c->W}, ws[4] = {c->Cin, c->Cout / p->groups, c->R, c->S};
  cnn_tensor *x = cnn_randn(4, xs, CNN_FLOAT64), *w = cnn_randn(4, ws, CNN_FLOAT64);
  cnn_tensor *yt = cnn_conv_transpose2d(x, w, NULL, p);
  cnn_tensor *z = yt ? cnn_zeros(4, yt->shape, CNN_FLOAT64, CNN_DEVICE_CPU) : NULL;
  cnn_conv_params cp = {{p->stride[0], p->stride[1]},
                        {p->pad[0], p->pad[0], p->pad[1], p->pad[1]},
                        {p->dilation[0], p->dilation[1]},
                        p->groups};
  if (z) cnn_set_requires_grad(z, true);
  cnn_tensor *y = z ? cnn_conv2d(z, w, NULL, &cp) : NULL;
  CHECK(y && y->shape[2] >= c->H && y->shape[3] >= c->W);
  cnn_tensor *dy =
      y ? cnn_pad(x, 4, (int64_t[]){0, y->shape[3] - c->W, 0, y->shape[2] - c->H}, 0) : NULL;
  if (dy && cnn_backward(y, dy, false) == 0 && z->grad) {
    int64_t n = cnn_tensor_numel(yt);
    double *a = malloc((size_t)n * sizeof(double)), *g = malloc((size_t)n * sizeof(double));
    values(yt, a), values(z->grad, g);
    char what[200];
    snprintf(what, sizeof what, "conv_transpose2d %s vs conv2d input-gradient", c->name);
    check_arrays(what, a, g, n, 1e-12, 1e-12);
    free(a), free(g);
  } else {
    fprintf(stderr, "%s: conv2d input-gradient failed: %s\n", c->name, cnn_error());
    check_failures++;
  }
  cnn_tensor_release(dy), cnn_tensor_release(y), cnn_tensor_release(z), cnn_tensor_release(yt);
  cnn_tensor_release(x), cnn_tensor_release(w);
}

static void test_conv_gradient(void) {
  for (int i = 0; i < NCONFIGS; i++) check_is_conv_gradient(&configs[i]);
}

/* ---- 4. finite differences ------------------------------------------------------------ */

static cnn_tensor *transpose_op(cnn_tensor **in, void *ctx) {
  return cnn_conv_transpose2d(in[0], in[1], in[2], ctx);
}

static void test_gradcheck(void) {
  for (int i = 0; i < 4; i++) { /* the small configurations */
    const config *c = &configs[i];
    for (int algo = CNN_CONV_AUTO; algo <= CNN_CONV_NAIVE;
         algo += CNN_CONV_NAIVE) { /* float64: see test_oracle */
      cnn_set_conv_algo((cnn_conv_algo)algo);
      cnn_tensor *in[3] = {
          gc_leaf(4, (int64_t[]){c->N, c->Cin, c->H, c->W}, -1, 1, 1),
          gc_leaf(4, (int64_t[]){c->Cin, c->Cout / c->p.groups, c->R, c->S}, -1, 1, 2),
          gc_leaf(1, &c->Cout, -1, 1, 3)};
      char what[200];
      snprintf(what, sizeof what, "conv_transpose2d %s (%s)", c->name, algo_names[algo]);
      gradcheck(what, transpose_op, (void *)&c->p, 3, in);
      gc_release(3, in);
    }
  }
  cnn_set_conv_algo(CNN_CONV_AUTO);
}

/* ---- errors -------------------------------------------------------------------------------- */

static void expect_error(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b, cnn_conv_transpose_params p,
                         const char *msg) {
  cnn_tensor *y = cnn_conv_transpose2d(x, w, b, &p);
  check_error(y == NULL, msg);
  cnn_tensor_release(y);
}

static void test_errors(void) {
  cnn_tensor *x = cnn_zeros(4, (int64_t[]){2, 4, 5, 5}, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *w = cnn_zeros(4, (int64_t[]){4, 3, 3, 3}, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *w5 = cnn_zeros(4, (int64_t[]){5, 3, 3, 3}, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *b = cnn_zeros(1, (int64_t[]){4}, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *x3 = cnn_zeros(3, (int64_t[]){4, 5, 5}, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *x64 = cnn_zeros(4, (int64_t[]){2, 4, 5, 5}, CNN_FLOAT64, CNN_DEVICE_CPU);
  cnn_conv_transpose_params ok = {{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1}, p = ok;
  p.output_padding[1] = 1;
  expect_error(x, w, NULL, p, "output padding must be smaller than either stride or dilation");
  expect_error(x, w5, NULL, ok,
               "conv_transpose2d: input 2x4x5x5 has 4 channels, weight 5x3x3x3 expects 5");
  expect_error(x, w, b, ok, "conv_transpose2d: bias 4 does not match weight 4x3x3x3");
  p = ok, p.groups = 3;
  expect_error(x, w, NULL, p, "not divisible by groups 3");
  p = ok, p.pad[0] = 4;
  expect_error(x, w, NULL, p, "too small");
  expect_error(x3, w, NULL, ok, "4-d input");
  expect_error(x64, w, NULL, ok, "conv_transpose2d: input is float64 but weight is float32");
  p = ok, p.stride[0] = 0;
  expect_error(x, w, NULL, p, "must be positive");
  cnn_tensor *wk0 = cnn_zeros(4, (int64_t[]){4, 3, 3, 0}, CNN_FLOAT32, CNN_DEVICE_CPU);
  expect_error(x, wk0, NULL, ok,
               "conv_transpose2d: expected a 4-d input (N x C x H x W) and a "
               "4-d weight (in x out/groups x kH x kW, kH and kW at least 1), "
               "got input 2x4x5x5 and weight 4x3x3x0");
  cnn_tensor_release(wk0);
  cnn_tensor *y = cnn_conv_transpose2d(x, w, NULL, &ok); /* and a good call still works */
  CHECK(y && y->shape[1] == 3 && y->shape[2] == 7 && y->shape[3] == 7);
  cnn_tensor_release(y);
  cnn_tensor_release(x), cnn_tensor_release(w), cnn_tensor_release(w5), cnn_tensor_release(b);
  cnn_tensor_release(x3), cnn_tensor_release(x64);
}

/* An error inside the backends' conv entries (here the interrupt flag,
 * which every path polls) names this op, not the conv2d entry it runs on;
 * forward and both backward passes, every CPU path. */
static void test_errors_name_the_op(void) {
  cnn_conv_transpose_params p = {{2, 2}, {1, 1}, {1, 1}, {1, 1}, 1};
  cnn_tensor *x = cnn_randn(4, (int64_t[]){2, 4, 5, 5}, CNN_FLOAT32);
  cnn_tensor *w = cnn_randn(4, (int64_t[]){4, 3, 3, 3}, CNN_FLOAT32);
  cnn_set_requires_grad(x, true), cnn_set_requires_grad(w, true);
  for (int algo = CNN_CONV_AUTO; algo <= CNN_CONV_NAIVE; algo++) {
    cnn_set_conv_algo((cnn_conv_algo)algo);
    cnn_request_interrupt();
    cnn_tensor *y = cnn_conv_transpose2d(x, w, NULL, &p);
    check_error(y == NULL, "conv_transpose2d: interrupted");
    cnn_clear_interrupt();
    y = cnn_conv_transpose2d(x, w, NULL, &p);
    cnn_tensor *g = y ? cnn_full(y->ndim, y->shape, 1, CNN_FLOAT32, CNN_DEVICE_CPU) : NULL;
    CHECK(g != NULL);
    cnn_request_interrupt();
    check_error(g && cnn_backward(y, g, false) != 0, "conv_transpose2d: interrupted");
    cnn_clear_interrupt();
    cnn_tensor_release(y), cnn_tensor_release(g);
  }
  cnn_set_conv_algo(CNN_CONV_AUTO);
  cnn_tensor_release(x), cnn_tensor_release(w);
}

int main(void) {
  cnn_manual_seed(13);
  test_hand();
  test_oracle();
  test_conv_gradient();
  test_gradcheck();
  test_backward_oracle();
  test_deconv_direct();
  test_errors();
  test_errors_name_the_op();
  return check_report("test_conv_transpose");
}
