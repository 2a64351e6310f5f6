/*
 * test_conv.c -- the CPU convolution kernels (core/cpu/conv*.c).
 *
 * Three layers of evidence, none comparing a path with itself:
 *  1. the naive loop against tiny cases worked out by hand (below);
 *  2. the naive backward (data, weight, bias) against central finite
 *     differences of the naive forward in float64, with the scalar
 *     L = sum(y * dy) for a random dy;
 *  3. im2col (float32 and float64) and oneDNN (float32) against the naive
 *     loop, forward and both backward passes, on odd shapes: stride 2,
 *     asymmetric padding, dilation 2, groups 1/2/3/16, 1x1 kernels, channel
 *     counts that are and are not multiples of oneDNN's 16-wide blocks.
 * The strided 1x1 kernels (conv_1x1_strided.c, AUTO's for those shapes)
 * are checked the same way, with and without their AVX-512 pieces.
 * Plus the dispatcher (AUTO, fallbacks, zero-sized problems, which shapes
 * AUTO gives oneDNN's Winograd kernels), the oneDNN
 * primitive cache and the interrupt flag.  Bad shapes are the op's to
 * report (cnn_conv2d, cnn_conv2d_int8: test_op_errors); the kernels
 * assert() their invariants instead, and test_invariants_asserted shows
 * that those asserts run in this build.
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "check_core.h"
#include "cnn.h"
#include "cpu/kernels.h"
#include "cpu/onednn_conv.h"

/* ---- helpers ------------------------------------------------------------------ */

static cnn_conv_shape mk(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R,
                         int64_t S, int sh, int sw, int pt, int pb, int pl, int pr, int dh, int dw,
                         int groups) {
  cnn_conv_shape s = {N,  C,  H,  W,  K,  R,  S,      0,           0, sh, sw,
                      pt, pb, pl, pr, dh, dw, groups, CNN_FLOAT32, 0, 0};
  s.OH = cnn_conv_out_size(H, pt, pb, (int)R, sh, dh);
  s.OW = cnn_conv_out_size(W, pl, pr, (int)S, sw, dw);
  return s;
}

static int64_t nx(const cnn_conv_shape *s) { return s->N * s->C * s->H * s->W; }
static int64_t nw(const cnn_conv_shape *s) { return s->K * (s->C / s->groups) * s->R * s->S; }
static int64_t ny(const cnn_conv_shape *s) { return s->N * s->K * s->OH * s->OW; }

/* ---- 1. hand-computed cases ----------------------------------------------------- */

/*
 * x = 1 2 3    w = 1 2    b = 0.5
 *     4 5 6        3 4
 *     7 8 9
 * stride 1, no pad: y00 = 1*1+2*2+4*3+5*4 = 37, y01 = 2+6+15+24 = 47,
 *                   y10 = 4+10+21+32 = 67,   y11 = 5+12+24+36 = 77; +0.5 each.
 * stride 2, pad 1:  windows start at (-1,-1), (-1,1), (1,-1), (1,1):
 *   y00 = x00*w11 = 4,  y01 = x01*w10 + x02*w11 = 6+12 = 18,
 *   y10 = x10*w01 + x20*w11 = 8+28 = 36,  y11 = 5+12+24+36 = 77.
 * dilation 2: taps x00, x02, x20, x22: 1*1 + 3*2 + 7*3 + 9*4 = 64.
 * Backward of the stride-1 case with dy = all ones:
 *   dx = count-weighted sums of w over covering windows
 *      = 1 3 2 / 4 10 6 / 3 7 4,
 *   dw[r][s] = sum of the 2x2 block of x at (r, s): 12 16 / 24 28,  db = 4.
 */
static void test_hand(void) {
  double x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 2, 3, 4}, b[1] = {0.5}, y[4];
  cnn_conv_shape s = mk(1, 1, 3, 3, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 1);
  CHECK(s.OH == 2 && s.OW == 2);
  CHECK(cnn_cpu_conv2d_naive_forward(CNN_FLOAT64, &s, x, w, b, y) == 0);
  check_arrays("hand stride 1", y, (double[]){37.5, 47.5, 67.5, 77.5}, 4, 0, 0);

  s = mk(1, 1, 3, 3, 1, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1);
  CHECK(s.OH == 2 && s.OW == 2);
  CHECK(cnn_cpu_conv2d_naive_forward(CNN_FLOAT64, &s, x, w, NULL, y) == 0);
  check_arrays("hand stride 2 pad 1", y, (double[]){4, 18, 36, 77}, 4, 0, 0);

  s = mk(1, 1, 3, 3, 1, 2, 2, 1, 1, 0, 0, 0, 0, 2, 2, 1);
  CHECK(s.OH == 1 && s.OW == 1);
  CHECK(cnn_cpu_conv2d_naive_forward(CNN_FLOAT64, &s, x, w, NULL, y) == 0);
  CHECK_CLOSE(y[0], 64, 0);

  double dy[4] = {1, 1, 1, 1}, dx[9], dw[4], db[1];
  s = mk(1, 1, 3, 3, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 1);
  CHECK(cnn_cpu_conv2d_naive_backward_data(CNN_FLOAT64, &s, dy, w, dx) == 0);
  check_arrays("hand dx", dx, (double[]){1, 3, 2, 4, 10, 6, 3, 7, 4}, 9, 0, 0);
  CHECK(cnn_cpu_conv2d_naive_backward_weight(CNN_FLOAT64, &s, dy, x, dw, db) == 0);
  check_arrays("hand dw", dw, (double[]){12, 16, 24, 28}, 4, 0, 0);
  CHECK_CLOSE(db[0], 4, 0);
}

/* ---- the cases ------------------------------------------------------------------------ */

typedef struct {
  const char *name;
  cnn_conv_shape s;
  int small; /* cheap enough for finite differences */
} conv_case;

static conv_case *cases(int *n) {
  static conv_case c[24];
  int i = 0;
  c[i++] =
      (conv_case){"3x3 s2 pad(1,0,2,1) d2", mk(2, 3, 7, 5, 4, 3, 3, 2, 2, 1, 0, 2, 1, 2, 2, 1), 1};
  c[i++] = (conv_case){"3x3 s2 pad(1,0,2,1) d2 g3",
                       mk(2, 3, 7, 5, 6, 3, 3, 2, 2, 1, 0, 2, 1, 2, 2, 3), 1};
  c[i++] = (conv_case){"1x1 pointwise", mk(2, 5, 7, 5, 4, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1), 1};
  c[i++] = (conv_case){"1x1 s2", mk(2, 3, 7, 5, 4, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1), 1};
  c[i++] = (conv_case){"2x3 s(1,2) pad(0,1,1,0) d(1,2) g2",
                       mk(2, 4, 6, 7, 6, 2, 3, 1, 2, 0, 1, 1, 0, 1, 2, 2), 1};
  c[i++] = (conv_case){"1x1 pointwise g2", mk(1, 4, 3, 5, 2, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2), 1};
  c[i++] =
      (conv_case){"3x3 pad1 C32 K48", mk(2, 32, 9, 11, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), 0};
  c[i++] =
      (conv_case){"3x3 s2 C32 K64 g2", mk(3, 32, 10, 9, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2), 0};
  c[i++] = (conv_case){"3x3 depthwise C16 K32 g16",
                       mk(2, 16, 8, 7, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 16), 0};
  c[i++] = (conv_case){"5x5 C20 K10 pad(2,1,0,2) d2",
                       mk(2, 20, 13, 12, 10, 5, 5, 1, 1, 2, 1, 0, 2, 2, 2, 1), 0};
  c[i++] = (conv_case){"1x1 C64 K32", mk(2, 64, 7, 7, 32, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1), 0};
  c[i++] =
      (conv_case){"7x7 s2 pad3 C3 K16", mk(2, 3, 19, 17, 16, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1), 0};
  /* 3x3 stride 1, 32+ channels in 16s, 64+ tiles: Winograd under AUTO (conv_winograd.c) */
  c[i++] = (conv_case){"3x3 pad1 C64 K64 (Winograd)",
                       mk(4, 64, 32, 32, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), 0};
  c[i++] = (conv_case){"3x3 pad0 C96 K48 (Winograd)",
                       mk(12, 96, 18, 17, 48, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1), 0};
  c[i++] = (conv_case){"3x3 pad(2,1,0,2) C32 K64 (Winograd refuses)",
                       mk(32, 32, 15, 14, 64, 3, 3, 1, 1, 2, 1, 0, 2, 1, 1, 1), 0};
  /* strided 1x1 (conv_1x1_strided.c under AUTO): ResNet's shortcut, odd
   * sizes and channel counts (vector tails), unequal strides, a column
   * stride other than 2, several row blocks an image */
  c[i++] = (conv_case){"1x1 s2 C16 K32 (shortcut)",
                       mk(3, 16, 32, 32, 32, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1), 0};
  c[i++] =
      (conv_case){"1x1 s(3,2) C20 K7", mk(2, 20, 13, 35, 7, 1, 1, 3, 2, 0, 0, 0, 0, 1, 1, 1), 0};
  c[i++] = (conv_case){"1x1 s(2,1) C5 K6", mk(2, 5, 9, 7, 6, 1, 1, 2, 1, 0, 0, 0, 0, 1, 1, 1), 1};
  c[i++] = (conv_case){"1x1 s3 C33 K18", mk(2, 33, 10, 14, 18, 1, 1, 3, 3, 0, 0, 0, 0, 1, 1, 1), 0};
  c[i++] = (conv_case){"1x1 s2 C4 K5 3 blocks",
                       mk(2, 4, 40, 131, 5, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1), 0};
  /* dx of 2 MiB and more is written with non-temporal stores; rows of
   * 66 floats put some vectors off the 64-byte boundary */
  c[i++] = (conv_case){"1x1 s2 C16 K32 dx 2.2 MB (streamed)",
                       mk(8, 16, 64, 66, 32, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1), 0};
  *n = i;
  return c;
}

/* ---- 2. finite differences of the naive forward ------------------------------------- */

/* L(x, w, b) = sum(y * dy) with the naive forward in float64. */
static double loss(const cnn_conv_shape *s, const double *x, const double *w, const double *b,
                   const double *dy, double *y) {
  cnn_cpu_conv2d_naive_forward(CNN_FLOAT64, s, x, w, b, y);
  return check_dot(y, dy, ny(s));
}

/* Central differences of L with respect to every element of p (n). */
static void numeric_grad(const cnn_conv_shape *s, double *x, double *w, double *b, const double *dy,
                         double *p, int64_t n, double *g) {
  double *y = malloc(ny(s) * sizeof *y), h = 1e-6;
  for (int64_t i = 0; i < n; i++) {
    double keep = p[i];
    p[i] = keep + h;
    double lp = loss(s, x, w, b, dy, y);
    p[i] = keep - h;
    double lm = loss(s, x, w, b, dy, y);
    p[i] = keep;
    g[i] = (lp - lm) / (2 * h);
  }
  free(y);
}

static void test_finite_differences(const conv_case *c) {
  const cnn_conv_shape *s = &c->s;
  double *x = check_rand_f64(nx(s)), *w = check_rand_f64(nw(s)), *b = check_rand_f64(s->K),
         *dy = check_rand_f64(ny(s));
  double *dx = malloc(nx(s) * 8), *dw = malloc(nw(s) * 8), *db = malloc(s->K * 8);
  double *gx = malloc(nx(s) * 8), *gw = malloc(nw(s) * 8), *gb = malloc(s->K * 8);
  char what[160];
  CHECK(cnn_cpu_conv2d_naive_backward_data(CNN_FLOAT64, s, dy, w, dx) == 0);
  CHECK(cnn_cpu_conv2d_naive_backward_weight(CNN_FLOAT64, s, dy, x, dw, db) == 0);
  numeric_grad(s, x, w, b, dy, x, nx(s), gx);
  numeric_grad(s, x, w, b, dy, w, nw(s), gw);
  numeric_grad(s, x, w, b, dy, b, s->K, gb);
  snprintf(what, sizeof what, "naive dx vs finite diff [%s]", c->name);
  check_arrays(what, dx, gx, nx(s), 1e-6, 1e-6);
  snprintf(what, sizeof what, "naive dw vs finite diff [%s]", c->name);
  check_arrays(what, dw, gw, nw(s), 1e-6, 1e-6);
  snprintf(what, sizeof what, "naive db vs finite diff [%s]", c->name);
  check_arrays(what, db, gb, s->K, 1e-6, 1e-6);
  free(x), free(w), free(b), free(dy), free(dx), free(dw), free(db), free(gx), free(gw), free(gb);
}

/* ---- 3. paths against the naive loop -------------------------------------------------- */

typedef struct {
  double *x, *w, *b, *dy;   /* random inputs */
  double *y, *dx, *dw, *db; /* naive float64 results */
  float *xf, *wf, *bf, *dyf;
  float *yf, *dxf, *dwf, *dbf; /* naive float32 results */
} refs;

static void refs_make(const cnn_conv_shape *s, refs *r) {
  r->x = check_rand_f64(nx(s)), r->w = check_rand_f64(nw(s)), r->b = check_rand_f64(s->K),
  r->dy = check_rand_f64(ny(s));
  r->xf = check_to_f32(r->x, nx(s)), r->wf = check_to_f32(r->w, nw(s)),
  r->bf = check_to_f32(r->b, s->K);
  r->dyf = check_to_f32(r->dy, ny(s));
  r->y = malloc(ny(s) * 8), r->dx = malloc(nx(s) * 8), r->dw = malloc(nw(s) * 8);
  r->db = malloc(s->K * 8);
  r->yf = malloc(ny(s) * 4), r->dxf = malloc(nx(s) * 4), r->dwf = malloc(nw(s) * 4);
  r->dbf = malloc(s->K * 4);
  CHECK(cnn_cpu_conv2d_naive_forward(CNN_FLOAT64, s, r->x, r->w, r->b, r->y) == 0);
  CHECK(cnn_cpu_conv2d_naive_backward_data(CNN_FLOAT64, s, r->dy, r->w, r->dx) == 0);
  CHECK(cnn_cpu_conv2d_naive_backward_weight(CNN_FLOAT64, s, r->dy, r->x, r->dw, r->db) == 0);
  CHECK(cnn_cpu_conv2d_naive_forward(CNN_FLOAT32, s, r->xf, r->wf, r->bf, r->yf) == 0);
  CHECK(cnn_cpu_conv2d_naive_backward_data(CNN_FLOAT32, s, r->dyf, r->wf, r->dxf) == 0);
  CHECK(cnn_cpu_conv2d_naive_backward_weight(CNN_FLOAT32, s, r->dyf, r->xf, r->dwf, r->dbf) == 0);
}

static void refs_free(refs *r) {
  void *p[] = {r->x,  r->w,  r->b,  r->dy,  r->y,  r->dx,  r->dw,  r->db,
               r->xf, r->wf, r->bf, r->dyf, r->yf, r->dxf, r->dwf, r->dbf};
  for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
}

/* The float32 results of one path, compared with the naive float32 ones.
 * Outputs start as NaN garbage so a path that forgets to write shows. */
static void compare_f32(const char *path, const conv_case *c, const refs *r, int rc_fwd, int rc_bd,
                        int rc_bw, const float *y, const float *dx, const float *dw,
                        const float *db) {
  const cnn_conv_shape *s = &c->s;
  char what[160];
  CHECK(rc_fwd == 0 && rc_bd == 0 && rc_bw == 0);
  if (rc_fwd || rc_bd || rc_bw) fprintf(stderr, "  %s [%s]: %s\n", path, c->name, cnn_error());
  const char *f32 = cnn_dtype_name(CNN_FLOAT32);
  snprintf(what, sizeof what, "%s forward %s [%s]", path, f32, c->name);
  check_arrays_f32(what, y, r->yf, ny(s), 1e-4, 1e-4);
  snprintf(what, sizeof what, "%s backward data %s [%s]", path, f32, c->name);
  check_arrays_f32(what, dx, r->dxf, nx(s), 1e-4, 1e-4);
  snprintf(what, sizeof what, "%s backward weight %s [%s]", path, f32, c->name);
  check_arrays_f32(what, dw, r->dwf, nw(s), 1e-4, 1e-4);
  snprintf(what, sizeof what, "%s backward bias %s [%s]", path, f32, c->name);
  check_arrays_f32(what, db, r->dbf, s->K, 1e-4, 1e-4);
}

static void nan_fill(float *a, int64_t n) {
  for (int64_t i = 0; i < n; i++) a[i] = NAN;
}

/* Runs `algo` through the public dispatcher (or a path function directly
 * when direct = 1) in float32. */
static void check_path_f32(const char *path, cnn_conv_algo algo, int direct, const conv_case *c,
                           const refs *r) {
  const cnn_conv_shape *s = &c->s;
  float *y = malloc(ny(s) * 4), *dx = malloc(nx(s) * 4), *dw = malloc(nw(s) * 4);
  float *db = malloc(s->K * 4);
  nan_fill(y, ny(s)), nan_fill(dx, nx(s)), nan_fill(dw, nw(s)), nan_fill(db, s->K);
  int a, bd, bw;
  if (direct && algo == CNN_CONV_ONEDNN) {
    a = cnn_cpu_conv2d_onednn_forward(s, r->xf, r->wf, r->bf, y);
    bd = cnn_cpu_conv2d_onednn_backward_data(s, r->dyf, r->wf, dx);
    bw = cnn_cpu_conv2d_onednn_backward_weight(s, r->dyf, r->xf, dw, db);
  } else if (direct) {
    a = cnn_cpu_conv2d_im2col_forward(CNN_FLOAT32, s, r->xf, r->wf, r->bf, y);
    bd = cnn_cpu_conv2d_im2col_backward_data(CNN_FLOAT32, s, r->dyf, r->wf, dx);
    bw = cnn_cpu_conv2d_im2col_backward_weight(CNN_FLOAT32, s, r->dyf, r->xf, dw, db);
  } else {
    a = cnn_cpu_conv2d_forward(algo, CNN_FLOAT32, s, r->xf, r->wf, r->bf, y);
    bd = cnn_cpu_conv2d_backward_data(algo, CNN_FLOAT32, s, r->dyf, r->wf, dx);
    bw = cnn_cpu_conv2d_backward_weight(algo, CNN_FLOAT32, s, r->dyf, r->xf, dw, db);
  }
  compare_f32(path, c, r, a, bd, bw, y, dx, dw, db);
  free(y), free(dx), free(dw), free(db);
}

/* im2col in float64 (direct) and the dispatcher on float64 with every algo. */
static void check_f64(const char *path, cnn_conv_algo algo, int direct, const conv_case *c,
                      const refs *r) {
  const cnn_conv_shape *s = &c->s;
  double *y = malloc(ny(s) * 8), *dx = malloc(nx(s) * 8), *dw = malloc(nw(s) * 8);
  double *db = malloc(s->K * 8);
  char what[160];
  if (direct) {
    CHECK(cnn_cpu_conv2d_im2col_forward(CNN_FLOAT64, s, r->x, r->w, r->b, y) == 0);
    CHECK(cnn_cpu_conv2d_im2col_backward_data(CNN_FLOAT64, s, r->dy, r->w, dx) == 0);
    CHECK(cnn_cpu_conv2d_im2col_backward_weight(CNN_FLOAT64, s, r->dy, r->x, dw, db) == 0);
  } else {
    CHECK(cnn_cpu_conv2d_forward(algo, CNN_FLOAT64, s, r->x, r->w, r->b, y) == 0);
    CHECK(cnn_cpu_conv2d_backward_data(algo, CNN_FLOAT64, s, r->dy, r->w, dx) == 0);
    CHECK(cnn_cpu_conv2d_backward_weight(algo, CNN_FLOAT64, s, r->dy, r->x, dw, db) == 0);
  }
  snprintf(what, sizeof what, "%s forward f64 [%s]", path, c->name);
  check_arrays(what, y, r->y, ny(s), 1e-12, 1e-12);
  snprintf(what, sizeof what, "%s backward data f64 [%s]", path, c->name);
  check_arrays(what, dx, r->dx, nx(s), 1e-12, 1e-12);
  snprintf(what, sizeof what, "%s backward weight f64 [%s]", path, c->name);
  check_arrays(what, dw, r->dw, nw(s), 1e-12, 1e-12);
  snprintf(what, sizeof what, "%s backward bias f64 [%s]", path, c->name);
  check_arrays(what, db, r->db, s->K, 1e-12, 1e-12);
  free(y), free(dx), free(dw), free(db);
}

/* Forward without bias and backward weight without db, oneDNN and im2col. */
static void check_no_bias(const conv_case *c, const refs *r) {
  const cnn_conv_shape *s = &c->s;
  float *y = malloc(ny(s) * 4), *dw = malloc(nw(s) * 4), *y0 = malloc(ny(s) * 4);
  char what[160];
  CHECK(cnn_cpu_conv2d_naive_forward(CNN_FLOAT32, s, r->xf, r->wf, NULL, y0) == 0);
  for (int algo = CNN_CONV_AUTO; algo <= CNN_CONV_IM2COL; algo++) {
    nan_fill(y, ny(s)), nan_fill(dw, nw(s));
    CHECK(cnn_cpu_conv2d_forward(algo, CNN_FLOAT32, s, r->xf, r->wf, NULL, y) == 0);
    CHECK(cnn_cpu_conv2d_backward_weight(algo, CNN_FLOAT32, s, r->dyf, r->xf, dw, NULL) == 0);
    snprintf(what, sizeof what, "algo %d forward no bias [%s]", algo, c->name);
    check_arrays_f32(what, y, y0, ny(s), 1e-4, 1e-4);
    snprintf(what, sizeof what, "algo %d backward weight no db [%s]", algo, c->name);
    check_arrays_f32(what, dw, r->dwf, nw(s), 1e-4, 1e-4);
  }
  free(y), free(dw), free(y0);
}

/* conv_1x1_strided.c called directly, with and without its AVX-512
 * pieces: forward, both backward passes in one call, each alone. */
static void check_strided_1x1(const conv_case *c, const refs *r) {
  const cnn_conv_shape *s = &c->s;
  if (!cnn_cpu_conv2d_1x1_strided_takes(CNN_FLOAT32, s)) return;
  float *y = malloc(ny(s) * 4), *dx = malloc(nx(s) * 4), *dw = malloc(nw(s) * 4);
  float *db = malloc(s->K * 4), *dx1 = malloc(nx(s) * 4), *dw1 = malloc(nw(s) * 4);
  for (int isa = 0; isa < 2; isa++) {
    cnn_cpu_allow_avx512(isa);
    char path[64];
    snprintf(path, sizeof path, "strided 1x1 (avx512 %d)", cnn_cpu_use_avx512());
    nan_fill(y, ny(s)), nan_fill(dx, nx(s)), nan_fill(dw, nw(s)), nan_fill(db, s->K);
    nan_fill(dx1, nx(s)), nan_fill(dw1, nw(s));
    int a = cnn_cpu_conv2d_1x1_strided_forward(s, r->xf, r->wf, r->bf, y);
    int bd = cnn_cpu_conv2d_1x1_strided_backward(s, r->dyf, NULL, r->wf, dx, NULL, NULL);
    int bw = cnn_cpu_conv2d_1x1_strided_backward(s, r->dyf, r->xf, NULL, NULL, dw, db);
    compare_f32(path, c, r, a, bd, bw, y, dx, dw, db);
    CHECK(cnn_cpu_conv2d_1x1_strided_backward(s, r->dyf, r->xf, r->wf, dx1, dw1, NULL) == 0);
    char what[160];
    snprintf(what, sizeof what, "%s both passes, data [%s]", path, c->name);
    check_arrays_f32(what, dx1, r->dxf, nx(s), 1e-4, 1e-4);
    snprintf(what, sizeof what, "%s both passes, weight [%s]", path, c->name);
    check_arrays_f32(what, dw1, r->dwf, nw(s), 1e-4, 1e-4);
  }
  cnn_cpu_allow_avx512(1);
  free(y), free(dx), free(dw), free(db), free(dx1), free(dw1);
}

static void test_paths(const conv_case *c) {
  refs r;
  int64_t xs[4] = {c->s.N, c->s.C, c->s.H, c->s.W};
  char buf[CNN_SHAPE_STR];
  printf("  conv case %-36s input %s\n", c->name, cnn_shape_str(4, xs, buf));
  refs_make(&c->s, &r);
  check_path_f32("im2col", CNN_CONV_IM2COL, 1, c, &r);
  check_path_f32("onednn", CNN_CONV_ONEDNN, 1, c, &r);
  check_path_f32("onednn again (cached)", CNN_CONV_ONEDNN, 1, c, &r);
  check_path_f32("auto", CNN_CONV_AUTO, 0, c, &r);
  check_path_f32("dispatch im2col", CNN_CONV_IM2COL, 0, c, &r);
  check_f64("im2col", CNN_CONV_IM2COL, 1, c, &r);
  check_f64("auto", CNN_CONV_AUTO, 0, c, &r);
  check_f64("onednn->im2col", CNN_CONV_ONEDNN, 0, c, &r);
  check_no_bias(c, &r);
  check_strided_1x1(c, &r);
  refs_free(&r);
}

/* ---- dispatcher details ------------------------------------------------------------- */

/* Which shapes conv.c gives the strided 1x1 kernels under AUTO. */
static void test_strided_1x1_rule(void) {
  cnn_conv_shape r20 = mk(64, 16, 32, 32, 32, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1);
  cnn_conv_shape bf16 = r20, nhwc = r20;
  bf16.math = CNN_BFLOAT16, nhwc.channels_last = 1;
  struct {
    const char *name;
    cnn_dtype dt;
    cnn_conv_shape s;
    bool takes;
  } rule[] = {
      {"ResNet-20 16 -> 32", CNN_FLOAT32, r20, true},
      {"64 x 128 weights, the limit", CNN_FLOAT32,
       mk(16, 64, 56, 56, 128, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1), true},
      {"128 x 256 weights (oneDNN's)", CNN_FLOAT32,
       mk(16, 128, 28, 28, 256, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1), false},
      {"float64", CNN_FLOAT64, r20, false},
      {"bfloat16 arithmetic", CNN_FLOAT32, bf16, false},
      {"channels-last", CNN_FLOAT32, nhwc, false},
      {"stride 1", CNN_FLOAT32, mk(2, 16, 8, 8, 32, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1), false},
      {"padding", CNN_FLOAT32, mk(2, 16, 8, 8, 32, 1, 1, 2, 2, 1, 0, 0, 0, 1, 1, 1), false},
      {"2 groups", CNN_FLOAT32, mk(2, 16, 8, 8, 32, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 2), false},
      {"3x3", CNN_FLOAT32, mk(2, 16, 8, 8, 32, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1), false},
      /* planes over 2^31 / 16 floats: the gather's 32-bit offsets (shapes only) */
      {"12000x12000 plane", CNN_FLOAT32, mk(1, 1, 12000, 12000, 2, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1),
       false},
      {"11000x11000 plane", CNN_FLOAT32, mk(1, 1, 11000, 11000, 2, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1),
       true},
  };
  for (size_t i = 0; i < sizeof rule / sizeof rule[0]; i++) {
    bool takes = cnn_cpu_conv2d_1x1_strided_takes(rule[i].dt, &rule[i].s);
    CHECK(takes == rule[i].takes);
    if (takes != rule[i].takes)
      fprintf(stderr, "strided 1x1 rule [%s]: takes %d, expected %d\n", rule[i].name, takes,
              rule[i].takes);
  }
}

/* Which float32 shapes the rule gives oneDNN's Winograd kernels, and that
 * AUTO really runs them: its results are those of the naive loop (the
 * cases above) but not bit for bit the direct kernels' ('onednn'). */
static void test_winograd_rule(void) {
  cnn_conv_shape s = mk(4, 64, 32, 32, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), t;
  CHECK(!cnn_onednn_conv_winograd(&s)); /* allow_winograd 0: oneDNN called directly */
  s.allow_winograd = 1;
  CHECK(cnn_onednn_conv_winograd(&s)); /* 256 tiles x 64 channels = 2^14 */
  struct {
    const char *why;
    int64_t C, K, N, OH, OW;
    int sh, dw, R, groups;
    cnn_dtype math;
    int expect;
  } v[] = {
      {"16 input channels", 16, 64, 4, 32, 32, 1, 1, 3, 1, CNN_FLOAT32, 0},
      {"16 output channels", 64, 16, 4, 32, 32, 1, 1, 3, 1, CNN_FLOAT32, 0},
      {"40 channels: not whole blocks", 40, 64, 4, 32, 32, 1, 1, 3, 1, CNN_FLOAT32, 0},
      {"stride 2", 64, 64, 4, 32, 32, 2, 1, 3, 1, CNN_FLOAT32, 0},
      {"dilation 2", 64, 64, 4, 32, 32, 1, 2, 3, 1, CNN_FLOAT32, 0},
      {"5x5", 64, 64, 4, 32, 32, 1, 1, 5, 1, CNN_FLOAT32, 0},
      {"2 groups", 64, 64, 4, 32, 32, 1, 1, 3, 2, CNN_FLOAT32, 0},
      {"bfloat16 arithmetic", 64, 64, 4, 32, 32, 1, 1, 3, 1, CNN_BFLOAT16, 0},
      {"16 tiles (x 2048 channels)", 2048, 2048, 1, 16, 16, 1, 1, 3, 1, CNN_FLOAT32, 0},
      {"256 tiles x 32 channels = 2^13", 32, 64, 64, 8, 8, 1, 1, 3, 1, CNN_FLOAT32, 0},
      {"1024 tiles x 32 channels", 32, 64, 64, 16, 16, 1, 1, 3, 1, CNN_FLOAT32, 1},
      {"6x6: 36 of 64 tile pixels", 64, 64, 64, 6, 6, 1, 1, 3, 1, CNN_FLOAT32, 0},
      {"7x7: 49 of 64 tile pixels", 512, 512, 16, 7, 7, 1, 1, 3, 1, CNN_FLOAT32, 1},
  };
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    t = s;
    t.C = v[i].C, t.K = v[i].K, t.N = v[i].N, t.OH = v[i].OH, t.OW = v[i].OW;
    t.sh = v[i].sh, t.dw = v[i].dw, t.R = t.S = v[i].R, t.groups = v[i].groups, t.math = v[i].math;
    if (cnn_onednn_conv_winograd(&t) != v[i].expect) {
      fprintf(stderr, "  winograd rule: %s: expected %d\n", v[i].why, v[i].expect);
      CHECK(0);
    }
  }
  s.allow_winograd = 0;
  refs r;
  refs_make(&s, &r);
  float *ya = malloc(ny(&s) * 4), *yd = malloc(ny(&s) * 4);
  CHECK(cnn_cpu_conv2d_forward(CNN_CONV_AUTO, CNN_FLOAT32, &s, r.xf, r.wf, r.bf, ya) == 0);
  CHECK(cnn_cpu_conv2d_forward(CNN_CONV_ONEDNN, CNN_FLOAT32, &s, r.xf, r.wf, r.bf, yd) == 0);
  check_arrays_f32("winograd (auto) forward", ya, r.yf, ny(&s), 1e-4, 1e-4);
  check_arrays_f32("direct (onednn) forward", yd, r.yf, ny(&s), 1e-4, 1e-4);
  if (cnn_cpu_use_avx512()) /* oneDNN 2.6's Winograd kernels are AVX-512 only */
    CHECK(memcmp(ya, yd, (size_t)ny(&s) * 4) != 0);
  free(ya), free(yd);
  refs_free(&r);
}

static void test_cache(void) {
  cnn_conv_shape s = mk(2, 16, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  refs r;
  refs_make(&s, &r);
  float *y = malloc(ny(&s) * 4);
  cnn_cpu_onednn_cache_clear();
  CHECK(cnn_cpu_onednn_cache_size() == 0);
  CHECK(cnn_cpu_conv2d_onednn_forward(&s, r.xf, r.wf, r.bf, y) == 0);
  int n1 = cnn_cpu_onednn_cache_size();
  for (int i = 0; i < 5; i++) CHECK(cnn_cpu_conv2d_onednn_forward(&s, r.xf, r.wf, r.bf, y) == 0);
  CHECK(n1 == 1 && cnn_cpu_onednn_cache_size() == 1);
  check_arrays_f32("onednn after 6 cached calls", y, r.yf, ny(&s), 1e-4, 1e-4);
  CHECK(cnn_cpu_conv2d_onednn_forward(&s, r.xf, r.wf, NULL, y) == 0); /* no bias: new entry */
  CHECK(cnn_cpu_onednn_cache_size() == 2);
  /* more shapes than the cache holds: evictions keep results right */
  for (int h = 3; h < 75; h++) {
    cnn_conv_shape t = mk(1, 2, h, 3, 2, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1);
    float xs[2 * 75 * 3] = {0}, ws[4] = {1, 0, 0, 1}, ys[2 * 75 * 3];
    xs[0] = 3, xs[h * 3] = 5; /* identity weight: y == x */
    CHECK(cnn_cpu_conv2d_onednn_forward(&t, xs, ws, NULL, ys) == 0);
    CHECK(ys[0] == 3 && ys[h * 3] == 5 && ys[1] == 0);
  }
  CHECK(cnn_cpu_onednn_cache_size() <= 64);
  CHECK(cnn_cpu_conv2d_onednn_forward(&s, r.xf, r.wf, r.bf, y) == 0);
  check_arrays_f32("onednn after evictions", y, r.yf, ny(&s), 1e-4, 1e-4);
  cnn_cpu_onednn_cache_clear();
  CHECK(cnn_cpu_conv2d_onednn_forward(&s, r.xf, r.wf, r.bf, y) == 0);
  check_arrays_f32("onednn after clear", y, r.yf, ny(&s), 1e-4, 1e-4);
  free(y);
  refs_free(&r);
}

/* The blocked tensors of all entries share one arena.  A shape whose
 * channels do not fill oneDNN's 16-blocks (C=20, K=10) has padding there
 * that must read as zeros even right after another shape left NaNs in the
 * same bytes; repeated calls (cached entries) included. */
static void test_arena_padding(void) {
  cnn_conv_shape p = mk(2, 32, 9, 9, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  cnn_conv_shape q = mk(2, 20, 9, 9, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  float *px = malloc(nx(&p) * 4), *pw = malloc(nw(&p) * 4), *py = malloc(ny(&p) * 4);
  float *out = malloc(nx(&p) * 4), *ow = malloc(nw(&p) * 4), db[32];
  refs r;
  refs_make(&q, &r);
  nan_fill(px, nx(&p)), nan_fill(pw, nw(&p)), nan_fill(py, ny(&p));
  for (int round = 0; round < 2; round++) {
    CHECK(cnn_cpu_conv2d_onednn_forward(&p, px, pw, NULL, out) == 0);
    CHECK(cnn_cpu_conv2d_onednn_forward(&q, r.xf, r.wf, r.bf, out) == 0);
    check_arrays_f32("onednn forward after NaNs in the arena", out, r.yf, ny(&q), 1e-4, 1e-4);
    CHECK(cnn_cpu_conv2d_onednn_backward_data(&p, py, pw, out) == 0);
    CHECK(cnn_cpu_conv2d_onednn_backward_data(&q, r.dyf, r.wf, out) == 0);
    check_arrays_f32("onednn backward data after NaNs", out, r.dxf, nx(&q), 1e-4, 1e-4);
    CHECK(cnn_cpu_conv2d_onednn_backward_weight(&p, py, px, ow, db) == 0);
    CHECK(cnn_cpu_conv2d_onednn_backward_weight(&q, r.dyf, r.xf, ow, db) == 0);
    check_arrays_f32("onednn backward weight after NaNs", ow, r.dwf, nw(&q), 1e-4, 1e-4);
  }
  free(px), free(pw), free(py), free(out), free(ow);
  refs_free(&r);
}

/* Zero-sized problems reach the kernels (an empty batch; no output pixels
 * from a transposed conv's shape) and take the naive loops. */
static void test_degenerate(void) {
  float x[128] = {0}, w[128] = {0}, y[128];
  /* kernel larger than the input: no output pixels; the backward passes
   * write zeros, the forward writes nothing */
  cnn_conv_shape s = mk(1, 1, 2, 2, 1, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1);
  CHECK(s.OH == 0 && s.OW == 0);
  float dx[4] = {1, 1, 1, 1}, dw[9], db[1] = {7};
  CHECK(cnn_cpu_conv2d_forward(CNN_CONV_AUTO, CNN_FLOAT32, &s, x, w, NULL, y) == 0);
  CHECK(cnn_cpu_conv2d_backward_data(CNN_CONV_AUTO, CNN_FLOAT32, &s, y, w, dx) == 0);
  CHECK(dx[0] == 0 && dx[3] == 0);
  CHECK(cnn_cpu_conv2d_backward_weight(CNN_CONV_AUTO, CNN_FLOAT32, &s, y, x, dw, db) == 0);
  CHECK(dw[0] == 0 && dw[8] == 0 && db[0] == 0);
  /* an empty batch */
  float db4[4] = {7, 7, 7, 7};
  w[107] = 7;
  s = mk(0, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  CHECK(cnn_cpu_conv2d_backward_weight(CNN_CONV_AUTO, CNN_FLOAT32, &s, y, x, w, db4) == 0);
  CHECK(w[107] == 0 && db4[3] == 0);
}

/* ---- the op's validation ---------------------------------------------------------- */

static cnn_tensor *zeros4(int64_t a, int64_t b, int64_t c, int64_t d, cnn_dtype dt) {
  return cnn_zeros(4, (int64_t[]){a, b, c, d}, dt, CNN_DEVICE_CPU);
}

static void expect_conv_error(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b, cnn_conv_params p,
                              const char *msg) {
  cnn_tensor *y = cnn_conv2d(x, w, b, &p);
  check_error(y == NULL, msg);
  cnn_tensor_release(y);
}

/* The shape rules checked once, in core/ops/nn_conv.c: each case is one the
 * kernels would assert on (the ones test_conv used to send them directly). */
static void test_op_errors(void) {
  cnn_conv_params ok = {{1, 1}, {0, 0, 0, 0}, {1, 1}, 1}, p = ok;
  cnn_tensor *x = zeros4(1, 3, 4, 4, CNN_FLOAT32), *w = zeros4(4, 1, 3, 3, CNN_FLOAT32);
  cnn_tensor *w3 = zeros4(4, 3, 3, 3, CNN_FLOAT32), *wk0 = zeros4(4, 3, 0, 3, CNN_FLOAT32);
  cnn_tensor *xi = zeros4(1, 3, 4, 4, CNN_INT64), *wi = zeros4(4, 3, 3, 3, CNN_INT64);
  cnn_tensor *b5 = cnn_zeros(1, (int64_t[]){5}, CNN_FLOAT32, CNN_DEVICE_CPU);
  p.groups = 2; /* 3 input channels, 3 % 2 != 0 */
  expect_conv_error(x, w, NULL, p,
                    "conv2d: input 1x3x4x4 has 3 channels, weight 4x1x3x3 expects 2 (groups 2)");
  p = ok, p.groups = 3; /* 4 output channels, 4 % 3 != 0 */
  expect_conv_error(x, w, NULL, p, "conv2d: input 1x3x4x4 has 3 channels, weight 4x1x3x3");
  p = ok, p.stride[0] = 0;
  expect_conv_error(x, w3, NULL, p, "conv2d: stride, dilation and groups must be positive");
  p = ok, p.dilation[1] = 0;
  expect_conv_error(x, w3, NULL, p, "conv2d: stride, dilation and groups must be positive");
  p = ok, p.pad[3] = -1;
  expect_conv_error(x, w3, NULL, p, "padding non-negative");
  expect_conv_error(xi, wi, NULL, ok, "conv2d: input dtype int64 is not supported");
  expect_conv_error(x, wk0, NULL, ok,
                    "conv2d: expected a 4-d input (N x C x H x W) and a 4-d "
                    "weight with a kernel of at least 1x1, got input 1x3x4x4 "
                    "and weight 4x3x0x3");
  expect_conv_error(x, w3, b5, ok, "conv2d: bias 5 does not match weight 4x3x3x3");
  p = ok, p.dilation[0] = 2; /* a 5x3 window on a 4x4 input */
  expect_conv_error(x, w3, NULL, p, "conv2d: input 1x3x4x4 is too small for kernel 4x3x3x3");
  /* conv2d_int8 shares the rules and names itself */
  cnn_tensor *scales = cnn_full(1, (int64_t[]){4}, 1, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *y = cnn_conv2d_int8(x, wk0, scales, NULL, 0.1, false, &ok);
  check_error(y == NULL, "conv2d_int8: expected a 4-d input (N x C x H x W) and a 4-d weight "
                         "with a kernel of at least 1x1");
  p = ok, p.stride[1] = 0;
  CHECK(cnn_conv2d_int8(x, w3, scales, NULL, 0.1, false, &p) == NULL);
  check_error(1, "conv2d_int8: stride, dilation and groups must be positive");
  y = cnn_conv2d(x, w3, NULL, &ok); /* and a good call still works */
  CHECK(y && y->shape[1] == 4 && y->shape[2] == 2 && y->shape[3] == 2);
  cnn_tensor_release(y);
  cnn_tensor *all[] = {x, w, w3, wk0, xi, wi, b5, scales};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) cnn_tensor_release(all[i]);
}

/* 1 when fn() ends its (forked) process with SIGABRT: an assert() fired. */
static int aborts(void (*fn)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stderr)) _exit(3); /* no "Assertion failed" in the log */
    alarm(20); /* a kernel run without its assert may hang in OpenMP: SIGALRM, not SIGABRT */
    fn();
    _exit(0);
  }
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) &&
         WTERMSIG(status) == SIGABRT;
}

static float scratch[256];

static void forward_wrong_output_size(void) {
  cnn_conv_shape s = mk(1, 1, 4, 4, 1, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1);
  s.OH = 3; /* 2 is right */
  cnn_cpu_conv2d_forward(CNN_CONV_NAIVE, CNN_FLOAT32, &s, scratch, scratch, NULL, scratch + 128);
}

static void backward_groups_not_dividing(void) {
  cnn_conv_shape s = mk(1, 3, 4, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2);
  cnn_cpu_conv2d_backward_data(CNN_CONV_AUTO, CNN_FLOAT32, &s, scratch, scratch, scratch + 128);
}

static void forward_int64(void) {
  cnn_conv_shape s = mk(1, 1, 4, 4, 1, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1);
  cnn_cpu_conv2d_forward(CNN_CONV_AUTO, CNN_INT64, &s, scratch, scratch, NULL, scratch + 128);
}

/* The control: a child that returns.  (It runs no kernel: the child of a
 * process whose OpenMP pool has started would hang in its first parallel
 * region; the asserts above fire before any.) */
static void control_returns(void) {}

static void test_invariants_asserted(void) {
#ifdef NDEBUG
  printf("  NDEBUG build: the kernels' asserts are compiled out, not tested\n");
#else
  CHECK(aborts(forward_wrong_output_size));
  CHECK(aborts(backward_groups_not_dividing));
  CHECK(aborts(forward_int64));
  CHECK(!aborts(control_returns)); /* the harness itself reports no abort */
#endif
}

static void test_interrupt(void) {
  cnn_conv_shape s = mk(2, 3, 5, 5, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  float x[150] = {0}, w[54] = {0}, y[100], dx[150], dw[54];
  for (int algo = CNN_CONV_AUTO; algo <= CNN_CONV_NAIVE; algo++) {
    cnn_request_interrupt();
    CHECK(cnn_cpu_conv2d_forward(algo, CNN_FLOAT32, &s, x, w, NULL, y) == -1);
    CHECK(strcmp(cnn_error(), "conv2d: interrupted") == 0);
    CHECK(cnn_cpu_conv2d_backward_data(algo, CNN_FLOAT32, &s, y, w, dx) == -1);
    CHECK(cnn_cpu_conv2d_backward_weight(algo, CNN_FLOAT32, &s, y, x, dw, NULL) == -1);
    cnn_clear_interrupt();
  }
  CHECK(cnn_cpu_conv2d_forward(CNN_CONV_AUTO, CNN_FLOAT32, &s, x, w, NULL, y) == 0);
}

int main(void) {
  int n;
  conv_case *c = cases(&n);
  test_hand();
  for (int i = 0; i < n; i++) {
    if (c[i].small) test_finite_differences(&c[i]);
    test_paths(&c[i]);
  }
  test_winograd_rule();
  test_strided_1x1_rule();
  test_cache();
  test_arena_padding();
  test_degenerate();
  test_op_errors();
  test_invariants_asserted();
  test_interrupt();
  cnn_cpu_onednn_cache_clear();
  return check_report("test_conv");
}
