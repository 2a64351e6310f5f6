/*
 * test_pool.c -- max, average and adaptive average pooling kernels
 * (core/cpu/pool.c).
 *
 * Evidence: small cases worked out by hand; forward results against a
 * reference written here another way (a loop over kernel taps that tests
 * each tap against the image and the padded image, and floating-point
 * floor/ceil for adaptive bins); backward passes against central finite
 * differences of the forward in float64; float32 against float64.
 * Shapes are odd (N=2, C=3, 7x5, 3x2 kernels, stride 2x1, padding,
 * ceil_mode-sized outputs, max pooling with dilation).  Bad arguments are
 * the ops' to report (cnn_max_pool2d, ...: test_errors); the kernels
 * assert() their invariants.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "check_core.h"
#include "cnn.h"
#include "cpu/kernels.h"

/* Output size as PyTorch computes it (with ceil_mode and dilation d). */
static int64_t pool_out(int64_t in, int k, int s, int p, int d, int ceil_mode) {
  int64_t num = in + 2 * p - d * (k - 1) - 1, o = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
  if (ceil_mode && (o - 1) * s >= in + p) o--; /* last window must start inside */
  return o;
}

static cnn_pool_shape mk_dilated(int64_t N, int64_t C, int64_t H, int64_t W, int kh, int kw, int sh,
                                 int sw, int ph, int pw, int ceil_mode, int include_pad, int dh,
                                 int dw) {
  cnn_pool_shape s = {N,
                      C,
                      H,
                      W,
                      pool_out(H, kh, sh, ph, dh, ceil_mode),
                      pool_out(W, kw, sw, pw, dw, ceil_mode),
                      kh,
                      kw,
                      sh,
                      sw,
                      ph,
                      pw,
                      include_pad,
                      dh,
                      dw,
                      0};
  return s;
}

static cnn_pool_shape mk(int64_t N, int64_t C, int64_t H, int64_t W, int kh, int kw, int sh, int sw,
                         int ph, int pw, int ceil_mode, int include_pad) {
  return mk_dilated(N, C, H, W, kh, kw, sh, sw, ph, pw, ceil_mode, include_pad, 1, 1);
}

/* ---- hand-computed ------------------------------------------------------------ */

/*
 * x (4x4) =  1  5  2  0    max 2x2 stride 2, windows (rows, cols):
 *            3  6  1  4      (0-1, 0-1) 1 5 3 6 -> 6 at (1,1) = 5
 *            9  8  7  2      (0-1, 2-3) 2 0 1 4 -> 4 at (1,3) = 7
 *            0  3  9  9      (2-3, 0-1) 9 8 0 3 -> 9 at (2,0) = 8
 *                            (2-3, 2-3) 7 2 9 9 -> 9, the first at (3,2) = 14
 * so y = 6 4 / 9 9, indices = 5 7 / 8 14, and dy = 1 2 3 4 scatters to
 * dx[5] = 1, dx[7] = 2, dx[8] = 3, dx[14] = 4, zeros elsewhere.
 *
 * avg 3x3 stride 2 pad 1 on the 3x3 block x[0:3, 0:3] = 1 5 2 / 3 6 1 / 9 8 7
 * (output 2x2; windows start at -1 and 1):
 *   y00 covers real (0..1, 0..1): 1+5+3+6 = 15;  include_pad: 15/9, else 15/4
 *   y01 covers (0..1, 1..2): 5+2+6+1 = 14;       14/9 or 14/4
 *   y10 covers (1..2, 0..1): 3+6+9+8 = 26;       26/9 or 26/4
 *   y11 covers (1..2, 1..2): 6+1+8+7 = 22;       22/9 or 22/4
 * adaptive 1-D bins of 5 into 3: [0,2) [1,4) [3,5).
 */
static void test_hand(void) {
  double x[16] = {1, 5, 2, 0, 3, 6, 1, 4, 9, 8, 7, 2, 0, 3, 9, 9}, y[4];
  int64_t idx[4];
  cnn_pool_shape s = mk(1, 1, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0);
  CHECK(s.OH == 2 && s.OW == 2);
  CHECK(cnn_cpu_max_pool2d_forward(CNN_FLOAT64, &s, x, y, idx) == 0);
  check_arrays("hand max", y, (double[]){6, 4, 9, 9}, 4, 0, 0);
  CHECK(idx[0] == 5 && idx[1] == 7 && idx[2] == 8 && idx[3] == 14);

  double dy[4] = {1, 2, 3, 4}, dx[16];
  CHECK(cnn_cpu_max_pool2d_backward(CNN_FLOAT64, &s, dy, idx, dx) == 0);
  double want_dx[16] = {0, 0, 0, 0, 0, 1, 0, 2, 3, 0, 0, 0, 0, 0, 4, 0};
  check_arrays("hand max backward", dx, want_dx, 16, 0, 0);

  double x3[9] = {1, 5, 2, 3, 6, 1, 9, 8, 7};
  s = mk(1, 1, 3, 3, 3, 3, 2, 2, 1, 1, 0, 1);
  CHECK(s.OH == 2 && s.OW == 2);
  CHECK(cnn_cpu_avg_pool2d_forward(CNN_FLOAT64, &s, x3, y) == 0);
  check_arrays("hand avg include_pad", y, (double[]){15 / 9., 14 / 9., 26 / 9., 22 / 9.}, 4, 1e-15,
               0);
  s.count_include_pad = 0;
  CHECK(cnn_cpu_avg_pool2d_forward(CNN_FLOAT64, &s, x3, y) == 0);
  check_arrays("hand avg exclude_pad", y, (double[]){15 / 4., 14 / 4., 26 / 4., 22 / 4.}, 4, 1e-15,
               0);

  /* max 2x2 dilation 2 stride 1 on the 4x4 x: output 2x2, window (oh, ow)
   * takes x[oh][ow], x[oh][ow+2], x[oh+2][ow], x[oh+2][ow+2]:
   *   (0,0): 1 2 9 7 -> 9 at 8;  (0,1): 5 0 8 2 -> 8 at 9
   *   (1,0): 3 1 0 9 -> 9 at 14; (1,1): 6 4 3 9 -> 9 at 15 */
  s = mk_dilated(1, 1, 4, 4, 2, 2, 1, 1, 0, 0, 0, 0, 2, 2);
  CHECK(s.OH == 2 && s.OW == 2);
  CHECK(cnn_cpu_max_pool2d_forward(CNN_FLOAT64, &s, x, y, idx) == 0);
  check_arrays("hand max dilated", y, (double[]){9, 8, 9, 9}, 4, 0, 0);
  CHECK(idx[0] == 8 && idx[1] == 9 && idx[2] == 14 && idx[3] == 15);

  double row[5] = {1, 2, 3, 4, 5}, out[3];
  CHECK(cnn_cpu_adaptive_avg_pool2d_forward(CNN_FLOAT64, 1, 1, 1, 5, 1, 3, row, out) == 0);
  check_arrays("hand adaptive 5->3", out, (double[]){1.5, 3, 4.5}, 3, 1e-15, 0);
}

/* ---- references written another way --------------------------------------------- */

/* Max over kernel taps (r, q), spaced by the dilation, that land inside the
 * image; first max wins. */
static void ref_max(const cnn_pool_shape *s, const double *x, double *y, int64_t *idx) {
  for (int64_t p = 0; p < s->N * s->C; p++)
    for (int64_t oh = 0; oh < s->OH; oh++)
      for (int64_t ow = 0; ow < s->OW; ow++) {
        double best = -INFINITY;
        int64_t arg = -1;
        for (int r = 0; r < s->kh; r++)
          for (int q = 0; q < s->kw; q++) {
            int64_t h = oh * s->sh - s->ph + r * s->dh, w = ow * s->sw - s->pw + q * s->dw;
            if (h < 0 || h >= s->H || w < 0 || w >= s->W) continue;
            double v = x[(p * s->H + h) * s->W + w];
            if (arg < 0 || v > best) best = v, arg = h * s->W + w;
          }
        y[(p * s->OH + oh) * s->OW + ow] = best;
        idx[(p * s->OH + oh) * s->OW + ow] = arg;
      }
}

/* Sum over taps inside the image; divisor counts taps inside the image, or
 * inside the padded image [-p, in+p) when count_include_pad. */
static void ref_avg(const cnn_pool_shape *s, const double *x, double *y) {
  for (int64_t p = 0; p < s->N * s->C; p++)
    for (int64_t oh = 0; oh < s->OH; oh++)
      for (int64_t ow = 0; ow < s->OW; ow++) {
        double sum = 0;
        int real = 0, padded = 0;
        for (int r = 0; r < s->kh; r++)
          for (int q = 0; q < s->kw; q++) {
            int64_t h = oh * s->sh - s->ph + r, w = ow * s->sw - s->pw + q;
            padded += h < s->H + s->ph && w < s->W + s->pw;
            if (h < 0 || h >= s->H || w < 0 || w >= s->W) continue;
            sum += x[(p * s->H + h) * s->W + w], real++;
          }
        y[(p * s->OH + oh) * s->OW + ow] = sum / (s->count_include_pad ? padded : real);
      }
}

static void ref_adaptive(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW, const double *x,
                         double *y) {
  for (int64_t p = 0; p < P; p++)
    for (int64_t i = 0; i < OH; i++)
      for (int64_t j = 0; j < OW; j++) {
        int64_t h0 = (int64_t)floor((double)i * H / OH),
                h1 = (int64_t)ceil((double)(i + 1) * H / OH);
        int64_t w0 = (int64_t)floor((double)j * W / OW),
                w1 = (int64_t)ceil((double)(j + 1) * W / OW);
        double sum = 0;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) sum += x[(p * H + h) * W + w];
        y[(p * OH + i) * OW + j] = sum / (double)((h1 - h0) * (w1 - w0));
      }
}

/* ---- forward against the references, float64 and float32 -------------------------- */

static void test_max(const char *name, const cnn_pool_shape *s) {
  int64_t nx = s->N * s->C * s->H * s->W, ny = s->N * s->C * s->OH * s->OW;
  double *x = check_rand_f64(nx), *y = malloc(ny * 8), *yr = malloc(ny * 8), *yf64 = malloc(ny * 8);
  int64_t *idx = malloc(ny * 8), *idxr = malloc(ny * 8), *idxf = malloc(ny * 8);
  float *xf = check_to_f32(x, nx), *yf = malloc(ny * 4);
  char what[128];
  ref_max(s, x, yr, idxr);
  CHECK(cnn_cpu_max_pool2d_forward(CNN_FLOAT64, s, x, y, idx) == 0);
  snprintf(what, sizeof what, "max_pool2d float64 [%s]", name);
  check_arrays(what, y, yr, ny, 0, 0);
  CHECK(memcmp(idx, idxr, ny * 8) == 0);
  CHECK(cnn_cpu_max_pool2d_forward(CNN_FLOAT32, s, xf, yf, idxf) == 0);
  for (int64_t i = 0; i < ny; i++) yf64[i] = yf[i];
  snprintf(what, sizeof what, "max_pool2d float32 [%s]", name);
  check_arrays(what, yf64, yr, ny, 1e-7, 1e-7);
  CHECK(memcmp(idxf, idxr, ny * 8) == 0);
  CHECK(cnn_cpu_max_pool2d_forward(CNN_FLOAT32, s, xf, yf, NULL) == 0); /* no indices */
  free(x), free(y), free(yr), free(yf64), free(idx), free(idxr), free(idxf), free(xf), free(yf);
}

static void test_avg(const char *name, const cnn_pool_shape *s) {
  int64_t nx = s->N * s->C * s->H * s->W, ny = s->N * s->C * s->OH * s->OW;
  double *x = check_rand_f64(nx), *y = malloc(ny * 8), *yr = malloc(ny * 8), *yf64 = malloc(ny * 8);
  float *xf = check_to_f32(x, nx), *yf = malloc(ny * 4);
  char what[128];
  ref_avg(s, x, yr);
  CHECK(cnn_cpu_avg_pool2d_forward(CNN_FLOAT64, s, x, y) == 0);
  snprintf(what, sizeof what, "avg_pool2d float64 [%s]", name);
  check_arrays(what, y, yr, ny, 1e-14, 1e-14);
  CHECK(cnn_cpu_avg_pool2d_forward(CNN_FLOAT32, s, xf, yf) == 0);
  for (int64_t i = 0; i < ny; i++) yf64[i] = yf[i];
  snprintf(what, sizeof what, "avg_pool2d float32 [%s]", name);
  check_arrays(what, yf64, yr, ny, 1e-6, 1e-6);
  free(x), free(y), free(yr), free(yf64), free(xf), free(yf);
}

static void test_adaptive(int64_t N, int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW) {
  int64_t nx = N * C * H * W, ny = N * C * OH * OW;
  double *x = check_rand_f64(nx), *y = malloc(ny * 8), *yr = malloc(ny * 8), *yf64 = malloc(ny * 8);
  float *xf = check_to_f32(x, nx), *yf = malloc(ny * 4);
  char what[128];
  ref_adaptive(N * C, H, W, OH, OW, x, yr);
  CHECK(cnn_cpu_adaptive_avg_pool2d_forward(CNN_FLOAT64, N, C, H, W, OH, OW, x, y) == 0);
  snprintf(what, sizeof what, "adaptive %lldx%lld -> %lldx%lld float64", (long long)H, (long long)W,
           (long long)OH, (long long)OW);
  check_arrays(what, y, yr, ny, 1e-14, 1e-14);
  CHECK(cnn_cpu_adaptive_avg_pool2d_forward(CNN_FLOAT32, N, C, H, W, OH, OW, xf, yf) == 0);
  for (int64_t i = 0; i < ny; i++) yf64[i] = yf[i];
  check_arrays("adaptive float32", yf64, yr, ny, 1e-6, 1e-6);
  free(x), free(y), free(yr), free(yf64), free(xf), free(yf);
}

/* Global float32 pooling (OH = OW = 1: global_pool_avx512.c on AVX-512
 * CPUs, pool.c's loops otherwise), both paths: forward against the double
 * reference; backward bit for bit against (float)(dy / H*W), the value
 * pool.c's zero-and-add stores.  4x130 planes of 8x8 run the parallel
 * chunks (64 planes) with a remainder, 40x40 planes sum in two blocks
 * (1,024 floats each at most), 33x17 ends in a masked tail. */
static void test_global_f32(int64_t N, int64_t C, int64_t H, int64_t W) {
  int64_t len = H * W, nx = N * C * len, np = N * C;
  double *x = check_rand_f64(nx), *yr = malloc(np * 8), *yf64 = malloc(np * 8);
  double *dy = check_rand_f64(np);
  float *xf = check_to_f32(x, nx), *yf = malloc(np * 4), *dyf = check_to_f32(dy, np);
  float *dxf = malloc(nx * 4);
  for (int64_t i = 0; i < nx; i++) x[i] = xf[i]; /* the reference of the float inputs */
  ref_adaptive(np, H, W, 1, 1, x, yr);
  for (int isa = 0; isa < 2; isa++) {
    cnn_cpu_allow_avx512(isa);
    char what[128];
    snprintf(what, sizeof what, "global %lldx%lldx%lldx%lld float32 forward (avx512 %d)",
             (long long)N, (long long)C, (long long)H, (long long)W, cnn_cpu_use_avx512());
    CHECK(cnn_cpu_adaptive_avg_pool2d_forward(CNN_FLOAT32, N, C, H, W, 1, 1, xf, yf) == 0);
    for (int64_t i = 0; i < np; i++) yf64[i] = yf[i];
    check_arrays(what, yf64, yr, np, 1e-6, 1e-6);
    for (int64_t i = 0; i < nx; i++) dxf[i] = NAN; /* must be overwritten */
    CHECK(cnn_cpu_adaptive_avg_pool2d_backward(CNN_FLOAT32, N, C, H, W, 1, 1, dyf, dxf) == 0);
    int64_t wrong = 0;
    for (int64_t i = 0; i < nx; i++) {
      float want = (float)((double)dyf[i / len] / (double)len);
      wrong += memcmp(&dxf[i], &want, sizeof want) != 0;
    }
    if (wrong)
      fprintf(stderr,
              "global %lldx%lldx%lldx%lld float32 backward (avx512 %d): %lld values wrong\n",
              (long long)N, (long long)C, (long long)H, (long long)W, cnn_cpu_use_avx512(),
              (long long)wrong);
    CHECK(wrong == 0);
  }
  cnn_cpu_allow_avx512(1);
  free(x), free(yr), free(yf64), free(dy), free(xf), free(yf), free(dyf), free(dxf);
}

/* ---- backward by finite differences ------------------------------------------------- */

typedef enum { MAX, AVG, ADAPTIVE } pool_kind;

typedef struct {
  pool_kind kind;
  cnn_pool_shape s; /* ADAPTIVE uses N, C, H, W, OH, OW only */
} pool_op;

static void forward(const pool_op *op, const double *x, double *y, int64_t *idx) {
  const cnn_pool_shape *s = &op->s;
  if (op->kind == MAX) cnn_cpu_max_pool2d_forward(CNN_FLOAT64, s, x, y, idx);
  if (op->kind == AVG) cnn_cpu_avg_pool2d_forward(CNN_FLOAT64, s, x, y);
  if (op->kind == ADAPTIVE)
    cnn_cpu_adaptive_avg_pool2d_forward(CNN_FLOAT64, s->N, s->C, s->H, s->W, s->OH, s->OW, x, y);
}

static int backward(const pool_op *op, cnn_dtype dt, const void *dy, const int64_t *idx, void *dx) {
  const cnn_pool_shape *s = &op->s;
  if (op->kind == MAX) return cnn_cpu_max_pool2d_backward(dt, s, dy, idx, dx);
  if (op->kind == AVG) return cnn_cpu_avg_pool2d_backward(dt, s, dy, dx);
  return cnn_cpu_adaptive_avg_pool2d_backward(dt, s->N, s->C, s->H, s->W, s->OH, s->OW, dy, dx);
}

static void test_backward(const char *name, const pool_op *op) {
  const cnn_pool_shape *s = &op->s;
  int64_t nx = s->N * s->C * s->H * s->W, ny = s->N * s->C * s->OH * s->OW;
  double *x = check_rand_f64(nx), *dy = check_rand_f64(ny), *y = malloc(ny * 8),
         *dx = malloc(nx * 8);
  double *g = malloc(nx * 8), *dx32 = malloc(nx * 8), h = 1e-6;
  int64_t *idx = malloc(ny * 8), *tmp = malloc(ny * 8);
  float *dyf = check_to_f32(dy, ny), *dxf = malloc(nx * 4);
  char what[128];
  forward(op, x, y, idx);
  for (int64_t i = 0; i < nx; i++) dx[i] = NAN; /* must be overwritten */
  CHECK(backward(op, CNN_FLOAT64, dy, idx, dx) == 0);
  for (int64_t i = 0; i < nx; i++) {
    double keep = x[i];
    x[i] = keep + h, forward(op, x, y, tmp);
    double lp = check_dot(y, dy, ny);
    x[i] = keep - h, forward(op, x, y, tmp);
    double lm = check_dot(y, dy, ny);
    x[i] = keep, g[i] = (lp - lm) / (2 * h);
  }
  snprintf(what, sizeof what, "%s backward vs finite diff", name);
  check_arrays(what, dx, g, nx, 1e-7, 1e-6);
  CHECK(backward(op, CNN_FLOAT32, dyf, idx, dxf) == 0);
  for (int64_t i = 0; i < nx; i++) dx32[i] = dxf[i];
  snprintf(what, sizeof what, "%s backward float32", name);
  check_arrays(what, dx32, dx, nx, 1e-6, 1e-6);
  free(x), free(dy), free(y), free(dx), free(g), free(dx32), free(idx), free(tmp), free(dyf);
  free(dxf);
}

/* The ops' validation (core/ops/nn_pool.c), for the arguments the kernels
 * would assert on. */
static void test_errors(void) {
  cnn_tensor *x = cnn_zeros(4, (int64_t[]){1, 1, 4, 4}, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *xi = cnn_zeros(4, (int64_t[]){1, 1, 4, 4}, CNN_INT64, CNN_DEVICE_CPU);
  cnn_pool_params ok = {{2, 2}, {1, 1}, {0, 0}, false, true, {1, 1}}, p = ok;
  p.kernel[0] = 0;
  check_error(cnn_max_pool2d(x, &p, NULL) == NULL,
              "max_pool2d: kernel, stride and dilation must be positive");
  p = ok, p.dilation[0] = 0;
  check_error(cnn_max_pool2d(x, &p, NULL) == NULL,
              "max_pool2d: kernel, stride and dilation must be positive");
  p = ok, p.stride[1] = 0;
  check_error(cnn_avg_pool2d(x, &p) == NULL, "avg_pool2d: kernel, stride and dilation");
  check_error(cnn_avg_pool2d(xi, &ok) == NULL, "avg_pool2d: input dtype int64 is not supported");
  check_error(cnn_max_pool2d(xi, &ok, NULL) == NULL, "max_pool2d: input dtype int64");
  check_error(cnn_adaptive_avg_pool2d(xi, 2, 2) == NULL, "adaptive_avg_pool2d: input dtype int64");
  check_error(cnn_adaptive_avg_pool2d(x, 2, -1) == NULL,
              "adaptive_avg_pool2d: output size 2x-1 must be positive");
  cnn_tensor *y = cnn_max_pool2d(x, &ok, NULL); /* and a good call still works */
  CHECK(y && y->shape[2] == 3 && y->shape[3] == 3);
  cnn_tensor_release(y), cnn_tensor_release(x), cnn_tensor_release(xi);
}

int main(void) {
  test_hand();
  struct {
    const char *name;
    cnn_pool_shape s;
  } c[] = {
      {"2x2 s2", mk(2, 3, 7, 5, 2, 2, 2, 2, 0, 0, 0, 1)},
      {"3x2 s(2,1) p(1,1)", mk(2, 3, 7, 5, 3, 2, 2, 1, 1, 1, 0, 1)},
      {"3x3 s2 p1 ceil", mk(2, 3, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1)},
      {"3x3 s2 p1 ceil exclude_pad", mk(2, 3, 7, 5, 3, 3, 2, 2, 1, 1, 1, 0)},
      {"2x2 s2 ceil odd", mk(2, 3, 7, 5, 2, 2, 2, 2, 0, 0, 1, 1)},
      {"5x3 s3 p(2,1) exclude_pad", mk(1, 2, 9, 8, 5, 3, 3, 3, 2, 1, 0, 0)},
      {"1x1", mk(2, 3, 7, 5, 1, 1, 1, 1, 0, 0, 0, 1)},
  };
  struct {
    const char *name;
    cnn_pool_shape s;
  } d[] = {
      {"2x2 s2 d2 (float32 2x2 path must not apply)",
       mk_dilated(2, 3, 8, 6, 2, 2, 2, 2, 0, 0, 0, 1, 2, 2)},
      {"3x2 s(2,1) p(1,1) d(2,3)", mk_dilated(2, 3, 9, 8, 3, 2, 2, 1, 1, 1, 0, 1, 2, 3)},
      {"3x3 s2 p1 d2 ceil", mk_dilated(2, 3, 8, 7, 3, 3, 2, 2, 1, 1, 1, 1, 2, 2)},
      {"2x3 s3 p(1,1) d(3,1) ceil", mk_dilated(1, 2, 9, 8, 2, 3, 3, 3, 1, 1, 1, 1, 3, 1)},
  };
  char name[128];
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    test_max(c[i].name, &c[i].s);
    test_avg(c[i].name, &c[i].s);
    snprintf(name, sizeof name, "max_pool2d [%s]", c[i].name);
    test_backward(name, &(pool_op){MAX, c[i].s});
    snprintf(name, sizeof name, "avg_pool2d [%s]", c[i].name);
    test_backward(name, &(pool_op){AVG, c[i].s});
  }
  for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) { /* dilation: max pooling only */
    test_max(d[i].name, &d[i].s);
    snprintf(name, sizeof name, "max_pool2d [%s]", d[i].name);
    test_backward(name, &(pool_op){MAX, d[i].s});
  }
  /* OW == 1 runs its own path (whole rows summed with partial sums): global
   * pooling at ResNet's 8x8, a long plane with a tail, overlapping row bins */
  int64_t a[][4] = {{7, 5, 3, 4}, {7, 5, 1, 1},   {3, 2, 5, 4}, {7, 5, 7, 5}, {6, 6, 4, 4},
                    {8, 8, 1, 1}, {33, 17, 1, 1}, {7, 5, 3, 1}, {5, 3, 2, 1}};
  for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
    test_adaptive(2, 3, a[i][0], a[i][1], a[i][2], a[i][3]);
    cnn_pool_shape s = {.N = 2, .C = 3, .H = a[i][0], .W = a[i][1], .OH = a[i][2], .OW = a[i][3]};
    snprintf(name, sizeof name, "adaptive %lldx%lld -> %lldx%lld", (long long)a[i][0],
             (long long)a[i][1], (long long)a[i][2], (long long)a[i][3]);
    test_backward(name, &(pool_op){ADAPTIVE, s});
  }
  test_global_f32(4, 130, 8, 8);
  test_global_f32(2, 3, 40, 40);
  test_global_f32(3, 5, 33, 17);
  test_errors();
  return check_report("test_pool");
}
