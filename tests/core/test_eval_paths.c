/*
 * test_eval_paths.c -- the paths added for evaluation throughput: the
 * float32 2x2 stride-2 max-pool path (core/cpu/pool.c), max_pool2d without
 * indices under no_grad (core/ops/nn_pool.c), and batch norm's eval pass in
 * memory order (core/cpu/batch_norm.c).
 *
 * Evidence: a reference written here as a naive loop over the four taps in
 * PyTorch's order (take v when v > best or v is NaN, starting from the
 * first tap), run on data full of the cases a vectorised select can get
 * wrong: ties (the first maximum wins), NaN (propagates; the index is the
 * last NaN's), -inf, -0.0 against +0.0.  Shapes: 28x28 (the example
 * network), odd 7x5 with and without ceil_mode (the clipped last row and
 * column go through the generic loops), 1xW and Hx1 planes, and the
 * row lengths around the AVX-512 path's 16-output step, each shape through
 * the AVX-512 path and the portable loops.  Values are
 * compared bit for bit (NaN as NaN), indices exactly, with and without an
 * index array; backward against the scatter dx[idx] += dy into zeros,
 * every cell checked written.  At the tensor level: under no_grad the output equals the
 * grad-mode output, and with requires_grad the gradient still scatters to
 * the argmax (checked against the reference's indices).  Batch norm in eval:
 * y = (x - running_mean)/sqrt(running_var + eps)*gamma + beta computed
 * here element by element in double for N=3, C=5, L=7 (every plane maps
 * to its channel), float64 and float32, with and without gamma/beta, and
 * the saved mean/invstd equal to the running statistics used.  Sliced
 * convolution: N=230 images of 3x32x32 (78 KB each with the 16-channel
 * output: past the 16 MiB split, slices of 53 and a remainder of 18)
 * against the naive direct loop, and exactly two oneDNN cache entries.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cnn.h"
#include "cpu/kernels.h"

static int64_t out_size(int64_t in, int ceil_mode) {
  int64_t o = (ceil_mode ? (in - 2 + 1) / 2 : (in - 2) / 2) + 1;
  if (ceil_mode && (o - 1) * 2 >= in) o--;
  return o;
}

/* One plane's reference: taps in row-major order, clipped to the plane. */
static void ref_plane(const float *x, int64_t H, int64_t W, int64_t OH, int64_t OW, float *y,
                      int64_t *idx) {
  for (int64_t oh = 0; oh < OH; oh++)
    for (int64_t ow = 0; ow < OW; ow++) {
      float best = 0;
      int64_t arg = -1;
      for (int r = 0; r < 2; r++)
        for (int q = 0; q < 2; q++) {
          int64_t h = 2 * oh + r, w = 2 * ow + q;
          if (h >= H || w >= W) continue;
          float v = x[h * W + w];
          if (arg < 0 || v > best || isnan(v)) best = v, arg = h * W + w;
        }
      y[oh * OW + ow] = best;
      idx[oh * OW + ow] = arg;
    }
}

/* Mostly a few small integers (many ties, -0.0 and +0.0), some NaN and -inf. */
static float tricky(void) {
  double u = check_urand();
  if (u > 0.93) return NAN;
  if (u < -0.95) return -INFINITY;
  if (u > 0.5) return -0.0f;
  return (float)floor(u * 3);
}

static int same_bits(float a, float b) {
  if (isnan(a) && isnan(b)) return 1;
  return memcmp(&a, &b, sizeof a) == 0;
}

/* Backward of the same shape: dx from the kernel against the reference
 * scatter dx = 0, dx[idx] += dy (windows do not overlap: one term a cell). */
static void test_shape_backward(const cnn_pool_shape *s, const int64_t *idxr) {
  int64_t P = s->N * s->C, nx = P * s->H * s->W, ny = P * s->OH * s->OW;
  float *dy = malloc(ny * 4), *dx = malloc(nx * 4), *want = calloc(nx, 4);
  for (int64_t i = 0; i < ny; i++) dy[i] = (float)check_urand();
  for (int64_t i = 0; i < nx; i++) dx[i] = NAN; /* every cell must be written */
  for (int64_t p = 0; p < P; p++)
    for (int64_t o = 0; o < s->OH * s->OW; o++) {
      int64_t i = idxr[p * s->OH * s->OW + o];
      if (i >= 0 && i < s->H * s->W) want[p * s->H * s->W + i] += dy[p * s->OH * s->OW + o];
    }
  CHECK(cnn_cpu_max_pool2d_backward(CNN_FLOAT32, s, dy, idxr, dx) == 0);
  int64_t bad = -1;
  for (int64_t i = nx - 1; i >= 0; i--)
    if (!same_bits(dx[i], want[i])) bad = i;
  if (bad >= 0)
    fprintf(stderr,
            "max_pool2d 2x2 backward %lldx%lldx%lldx%lld: first mismatch at %lld: %g vs %g\n",
            (long long)s->N, (long long)s->C, (long long)s->H, (long long)s->W, (long long)bad,
            dx[bad], want[bad]);
  CHECK(bad < 0);
  free(dy), free(dx), free(want);
}

static void test_shape(int64_t N, int64_t C, int64_t H, int64_t W, int ceil_mode) {
  cnn_pool_shape s = {N, C, H, W, out_size(H, ceil_mode), out_size(W, ceil_mode), 2, 2, 2, 2, 0,
                      0, 0, 1, 1, 0};
  int64_t P = N * C, nx = P * H * W, ny = P * s.OH * s.OW;
  float *x = malloc(nx * 4), *y = malloc(ny * 4), *y2 = malloc(ny * 4), *yr = malloc(ny * 4);
  int64_t *idx = malloc(ny * 8), *idxr = malloc(ny * 8);
  for (int64_t i = 0; i < nx; i++) x[i] = tricky();
  for (int64_t p = 0; p < P; p++)
    ref_plane(x + p * H * W, H, W, s.OH, s.OW, yr + p * s.OH * s.OW, idxr + p * s.OH * s.OW);
  CHECK(cnn_cpu_max_pool2d_forward(CNN_FLOAT32, &s, x, y, idx) == 0);
  CHECK(cnn_cpu_max_pool2d_forward(CNN_FLOAT32, &s, x, y2, NULL) == 0);
  int64_t bad_y = -1, bad_y2 = -1, bad_i = -1;
  for (int64_t i = ny - 1; i >= 0; i--) {
    if (!same_bits(y[i], yr[i])) bad_y = i;
    if (!same_bits(y2[i], yr[i])) bad_y2 = i;
    if (idx[i] != idxr[i]) bad_i = i;
  }
  if (bad_y >= 0 || bad_y2 >= 0 || bad_i >= 0) {
    int64_t i = bad_y >= 0 ? bad_y : bad_y2 >= 0 ? bad_y2 : bad_i;
    fprintf(stderr,
            "max_pool2d 2x2 %lldx%lldx%lldx%lld ceil=%d: first mismatch at %lld: "
            "y %g / %g (no idx) vs %g, idx %lld vs %lld\n",
            (long long)N, (long long)C, (long long)H, (long long)W, ceil_mode, (long long)i, y[i],
            y2[i], yr[i], (long long)idx[i], (long long)idxr[i]);
  }
  CHECK(bad_y < 0);
  CHECK(bad_y2 < 0);
  CHECK(bad_i < 0);
  test_shape_backward(&s, idxr);
  /* indices a forward would not give (backward takes any in the plane):
   * one in a neighbour's window, one in the rows below the full windows,
   * one out of the plane (skipped), for any future fast path to get right
   * (a one-pass AVX-512 backward was tried: 1.02-1.11x at 28x28, 0.57x
   * at 14x14, not kept) */
  int64_t OP = s.OH * s.OW, HW = H * W;
  for (int64_t p = 0; p < P; p++) {
    int64_t *ip = idxr + p * OP;
    if (p % 3 == 0) ip[OP / 2] = ip[0];
    if (p % 3 == 1) ip[OP - 1] = HW - 1;
    if (p % 3 == 2) ip[OP / 3] = HW + 5;
  }
  test_shape_backward(&s, idxr);
  free(x), free(y), free(y2), free(yr), free(idx), free(idxr);
}

/* Every shape through the AVX-512 path (where this CPU has it) and through
 * the portable loops. */
static void test_shape_both_paths(int64_t N, int64_t C, int64_t H, int64_t W, int ceil_mode) {
  int had = cnn_cpu_use_avx512();
  test_shape(N, C, H, W, ceil_mode);
  CHECK(cnn_cpu_allow_avx512(0) == 0);
  test_shape(N, C, H, W, ceil_mode);
  cnn_cpu_allow_avx512(1);
  CHECK(cnn_cpu_use_avx512() == had);
}

/* no_grad output == grad-mode output; the gradient lands on the argmax. */
static void test_tensor_level(void) {
  int64_t shape[4] = {3, 4, 9, 10}, n = 3 * 4 * 9 * 10, ny = 3 * 4 * 4 * 5;
  cnn_tensor *x = cnn_randn(4, shape, CNN_FLOAT32);
  cnn_pool_params p = {{2, 2}, {2, 2}, {0, 0}, false, false, {1, 1}};
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *y0 = cnn_max_pool2d(x, &p, NULL);
  cnn_set_grad_enabled(prev);
  CHECK(cnn_set_requires_grad(x, true) == 0);
  cnn_tensor *y1 = cnn_max_pool2d(x, &p, NULL);
  CHECK(y0 && y1 && cnn_same_shape(y0, y1));
  if (!y0 || !y1) return;
  CHECK(memcmp(cnn_tensor_data(y0), cnn_tensor_data(y1), ny * 4) == 0);
  cnn_tensor *s = cnn_reduce(CNN_RED_SUM, y1, 0, false, 0);
  CHECK(s && cnn_backward(s, NULL, false) == 0);
  const float *xd = cnn_tensor_data(x);
  float *yr = malloc(ny * 4), want_g[3 * 4 * 9 * 10] = {0};
  int64_t *idxr = malloc(ny * 8);
  for (int64_t q = 0; q < 12; q++) {
    ref_plane(xd + q * 90, 9, 10, 4, 5, yr + q * 20, idxr + q * 20);
    for (int64_t o = 0; o < 20; o++) want_g[q * 90 + idxr[q * 20 + o]] += 1;
  }
  CHECK(x->grad != NULL);
  if (x->grad) {
    double *got = malloc(n * 8), *want = malloc(n * 8);
    for (int64_t i = 0; i < n; i++)
      got[i] = ((float *)cnn_tensor_data(x->grad))[i], want[i] = want_g[i];
    check_arrays("max_pool2d 3x4x9x10 gradient", got, want, n, 0, 0);
    free(got), free(want);
  }
  free(yr), free(idxr);
  cnn_tensor_release(s), cnn_tensor_release(y0), cnn_tensor_release(y1), cnn_tensor_release(x);
}

static void test_bn_eval(int f64, int affine) {
  enum { N = 3, C = 5, L = 7, n = N * C * L };
  double xd[n], ref[n], rm[C], rv[C], g[C], b[C], sm[C], si[C];
  for (int i = 0; i < n; i++) xd[i] = 3 * check_urand();
  for (int c = 0; c < C; c++)
    rm[c] = check_urand(), rv[c] = 1.5 + check_urand(), g[c] = 2 * check_urand(),
    b[c] = check_urand();
  double eps = 1e-3;
  for (int nn = 0; nn < N; nn++)
    for (int c = 0; c < C; c++)
      for (int l = 0; l < L; l++) {
        int i = (nn * C + c) * L + l;
        ref[i] = (xd[i] - rm[c]) / sqrt(rv[c] + eps) * (affine ? g[c] : 1) + (affine ? b[c] : 0);
      }
  double got[n];
  if (f64) {
    CHECK(cnn_cpu_batch_norm_forward(CNN_FLOAT64, N, C, L, xd, affine ? g : NULL, affine ? b : NULL,
                                     rm, rv, 0, 0.1, eps, got, sm, si) == 0);
    for (int c = 0; c < C; c++) {
      CHECK_CLOSE(sm[c], rm[c], 0);
      CHECK_CLOSE(si[c], 1 / sqrt(rv[c] + eps), 1e-15);
    }
  } else {
    float xf[n], yf[n], rmf[C], rvf[C], gf[C], bf[C];
    for (int i = 0; i < n; i++) xf[i] = (float)xd[i];
    for (int c = 0; c < C; c++)
      rmf[c] = (float)rm[c], rvf[c] = (float)rv[c], gf[c] = (float)g[c], bf[c] = (float)b[c];
    CHECK(cnn_cpu_batch_norm_forward(CNN_FLOAT32, N, C, L, xf, affine ? gf : NULL,
                                     affine ? bf : NULL, rmf, rvf, 0, 0.1, eps, yf, NULL,
                                     NULL) == 0);
    for (int i = 0; i < n; i++) got[i] = yf[i];
  }
  char what[64];
  snprintf(what, sizeof what, "batch_norm eval 3x5x7 %s%s", f64 ? "float64" : "float32",
           affine ? " affine" : "");
  check_arrays(what, got, ref, n, f64 ? 1e-13 : 1e-5, f64 ? 1e-13 : 1e-5);
}

static void test_conv_slices(void) {
  cnn_conv_shape s = {230, 3, 32, 32, 16, 3, 3, 32, 32, 1, 1, 1, 1, 1, 1, 1, 1, 1, CNN_FLOAT32, 0, 0};
  int64_t nx = s.N * s.C * s.H * s.W, nw = s.K * s.C * s.R * s.S, ny = s.N * s.K * s.OH * s.OW;
  float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc(s.K * 4);
  float *y = malloc(ny * 4), *yr = malloc(ny * 4);
  for (int64_t i = 0; i < nx; i++) x[i] = (float)check_urand();
  for (int64_t i = 0; i < nw; i++) w[i] = (float)check_urand();
  for (int64_t i = 0; i < s.K; i++) b[i] = (float)check_urand();
  CHECK(cnn_cpu_conv2d_naive_forward(CNN_FLOAT32, &s, x, w, b, yr) == 0);
  cnn_cpu_onednn_cache_clear();
  for (int64_t i = 0; i < ny; i++) y[i] = NAN; /* every slice must write its part */
  CHECK(cnn_cpu_conv2d_onednn_forward(&s, x, w, b, y) == 0);
  CHECK(cnn_cpu_onednn_cache_size() == 2);
  check_arrays_f32("conv2d onednn 230x3x32x32 -> 16 in slices", y, yr, ny, 1e-4, 1e-4);
  cnn_cpu_onednn_cache_clear();
  free(x), free(w), free(b), free(y), free(yr);
}

int main(void) {
  /* forward and backward, AVX-512 and portable: the example network's
   * planes; odd widths and ceil_mode (generic loops for the clipped last
   * row and column); 1xW and Hx1; row lengths around the AVX-512 step of
   * 16 outputs (OW = 1, 7, 15, 16, 17, 33) and long rows; H odd without
   * and with ceil_mode (the last input row dropped or pooled alone) */
  test_shape_both_paths(2, 3, 28, 28, 0);
  test_shape_both_paths(2, 3, 7, 5, 0);
  test_shape_both_paths(2, 3, 7, 5, 1);
  test_shape_both_paths(1, 2, 2, 9, 1);
  test_shape_both_paths(1, 2, 9, 2, 1);
  test_shape_both_paths(4, 16, 14, 14, 0);
  test_shape_both_paths(3, 5, 10, 12, 0);
  test_shape_both_paths(1, 3, 4, 30, 0);
  test_shape_both_paths(1, 3, 4, 32, 0);
  test_shape_both_paths(1, 3, 5, 34, 1);
  test_shape_both_paths(2, 2, 6, 66, 0);
  test_shape_both_paths(1, 1, 2, 2048, 0);
  test_shape_both_paths(1, 1, 4, 2050, 0);
  test_shape_both_paths(2, 3, 9, 8, 0);
  test_shape_both_paths(2, 3, 9, 8, 1);
  /* narrow planes two output rows a step (OW <= 8): OW 8 and 2, one row */
  test_shape_both_paths(2, 3, 16, 16, 0);
  test_shape_both_paths(2, 2, 7, 16, 1);
  test_shape_both_paths(1, 2, 3, 4, 1);
  test_tensor_level();
  for (int f64 = 0; f64 <= 1; f64++)
    for (int affine = 0; affine <= 1; affine++) test_bn_eval(f64, affine);
  test_conv_slices();
  return check_report("test_eval_paths");
}
