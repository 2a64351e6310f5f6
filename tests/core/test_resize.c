/*
 * test_resize.c -- interpolate (nearest, bilinear), adaptive_max_pool2d,
 * pixel_shuffle and pixel_unshuffle (core/ops/nn_resize.c,
 * core/ops/pixel_shuffle.c, core/cpu/resize.c, core/cpu/adaptive_max_pool.c).
 *
 * Evidence, none comparing a path with itself:
 *  - hand values from PyTorch's documented formulas (2x2 -> 4x4 bilinear
 *    without align_corners, 2x2 -> 3x3 with it, nearest 2 -> 4 and 2 -> 3,
 *    a scale_factor of 1.5 and 1.7 against recompute_scale_factor);
 *  - forward against an oracle written here another way: source coordinates
 *    with floor() and exact integer ratios, clamping with fmin; adaptive
 *    bins with floating-point floor/ceil; pixel shuffle by its index formula;
 *  - backward by central finite differences in float64 (gradcheck.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cnn.h"
#include "gradcheck.h"

static cnn_tensor *from(int64_t h, int64_t w, const double *v) {
  cnn_tensor *t = cnn_empty(4, (int64_t[]){1, 1, h, w}, CNN_FLOAT64, CNN_DEVICE_CPU);
  for (int64_t i = 0; i < h * w; i++) cnn_tensor_set(t, i, v[i]);
  return t;
}

static void expect(const char *what, cnn_tensor *y, const double *want, int64_t n) {
  CHECK(y && cnn_tensor_numel(y) == n);
  if (!y || cnn_tensor_numel(y) != n) {
    fprintf(stderr, "%s: %s\n", what, y ? "wrong size" : cnn_error());
    cnn_tensor_release(y);
    return;
  }
  double got[64];
  for (int64_t i = 0; i < n; i++) got[i] = cnn_tensor_get(y, i);
  check_arrays(what, got, want, n, 1e-6, 1e-6);
  cnn_tensor_release(y);
}

/* ---- hand values ------------------------------------------------------------------------------ */

static void test_hand(void) {
  cnn_tensor *x = from(2, 2, (double[]){1, 2, 3, 4});
  /* bilinear, align_corners false: src = (dst + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25 -> clamp */
  expect("bilinear 2x2->4x4", cnn_interpolate(x, 4, 4, CNN_RESIZE_BILINEAR, false, 0, 0),
         (double[]){1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4},
         16);
  /* align_corners true: src = dst * (2 - 1) / (3 - 1) = 0, 0.5, 1 */
  expect("bilinear 2x2->3x3 align_corners",
         cnn_interpolate(x, 3, 3, CNN_RESIZE_BILINEAR, true, 0, 0),
         (double[]){1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4}, 9);
  expect("nearest 2x2->4x4", cnn_interpolate(x, 4, 4, CNN_RESIZE_NEAREST, false, 0, 0),
         (double[]){1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, 16);
  expect("nearest 2x2->3x3", cnn_interpolate(x, 3, 3, CNN_RESIZE_NEAREST, false, 0, 0),
         (double[]){1, 1, 2, 1, 1, 2, 3, 3, 4}, 9);
  cnn_tensor_release(x);
  /* a row 0..4 (values = coordinates) resized to 7 by scale 1.5: with the
   * factor src = max((d + 0.5) / 1.5 - 0.5, 0); recomputed: (d + 0.5) * 5/7 - 0.5,
   * the last clamped to index 4 */
  x = from(1, 5, (double[]){0, 1, 2, 3, 4});
  expect("bilinear scale_factor 1.5", cnn_interpolate(x, 1, 7, CNN_RESIZE_BILINEAR, false, 1, 1.5),
         (double[]){0, 0.5, 7.0 / 6, 11.0 / 6, 2.5, 19.0 / 6, 23.0 / 6}, 7);
  expect("bilinear recomputed 5->7", cnn_interpolate(x, 1, 7, CNN_RESIZE_BILINEAR, false, 0, 0),
         (double[]){0, 4.0 / 7, 9.0 / 7, 2, 19.0 / 7, 24.0 / 7, 4}, 7);
  cnn_tensor_release(x);
  /* nearest 4 -> 6 (floor(4 * 1.7)): floor(d / 1.7) = 0 0 1 1 2 2; from sizes floor(d * 4/6) = 0 0 1 2 2 3 */
  x = from(1, 4, (double[]){10, 11, 12, 13});
  expect("nearest scale_factor 1.7", cnn_interpolate(x, 1, 6, CNN_RESIZE_NEAREST, false, 1, 1.7),
         (double[]){10, 10, 11, 11, 12, 12}, 6);
  expect("nearest 4->6", cnn_interpolate(x, 1, 6, CNN_RESIZE_NEAREST, false, 0, 0),
         (double[]){10, 10, 11, 12, 12, 13}, 6);
  cnn_tensor_release(x);
}

/* ---- the oracle ------------------------------------------------------------------------------- */

/* the source coordinate of dst along an axis (PyTorch's formula, written
 * with the scale as a ratio) */
static double src_linear(int64_t dst, int64_t in, int64_t out, bool ac, double sf) {
  if (ac) return out > 1 ? dst * (double)(in - 1) / (double)(out - 1) : 0;
  double s = sf > 0 ? 1 / sf : (double)in / (double)out;
  return fmax((dst + 0.5) * s - 0.5, 0);
}

static double sample_bilinear(const cnn_tensor *x, int64_t p, double hy, double wx) {
  int64_t H = x->shape[2], W = x->shape[3];
  int64_t h0 = (int64_t)floor(hy), w0 = (int64_t)floor(wx);
  int64_t h1 = (int64_t)fmin(h0 + 1, H - 1), w1 = (int64_t)fmin(w0 + 1, W - 1);
  double a = hy - h0, b = wx - w0;
  const int64_t o = p * H * W;
  return (1 - a) * ((1 - b) * cnn_tensor_get(x, o + h0 * W + w0) +
                    b * cnn_tensor_get(x, o + h0 * W + w1)) +
         a * ((1 - b) * cnn_tensor_get(x, o + h1 * W + w0) +
              b * cnn_tensor_get(x, o + h1 * W + w1));
}

static void test_oracle(int64_t OH, int64_t OW, bool bilinear, bool ac, double sh, double sw,
                        cnn_dtype dt) {
  int64_t N = 2, C = 3, H = 5, W = 7;
  cnn_tensor *x64 = gc_leaf(4, (int64_t[]){N, C, H, W}, -1, 1, 3), *x = cnn_to_dtype(x64, dt);
  cnn_tensor *y = cnn_interpolate(x, OH, OW, bilinear, ac, sh, sw);
  char what[128];
  snprintf(what, sizeof what, "interpolate %s%s 5x7->%lldx%lld scale %g,%g %s",
           bilinear ? "bilinear" : "nearest", ac ? " align_corners" : "", (long long)OH,
           (long long)OW, sh, sw, cnn_dtype_name(dt));
  double *ref = malloc(sizeof *ref * (size_t)(N * C * OH * OW)),
         *got = malloc(sizeof *got * (size_t)(N * C * OH * OW));
  for (int64_t p = 0; p < N * C; p++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t i = (p * OH + oh) * OW + ow;
        if (bilinear) {
          ref[i] =
              sample_bilinear(x64, p, src_linear(oh, H, OH, ac, sh), src_linear(ow, W, OW, ac, sw));
        } else { /* sizes given: exact integer ratio (shapes chosen where float rounding agrees) */
          int64_t h = sh > 0 ? (int64_t)floorf((float)oh * (float)(1 / sh)) : oh * H / OH;
          int64_t w = sw > 0 ? (int64_t)floorf((float)ow * (float)(1 / sw)) : ow * W / OW;
          ref[i] = cnn_tensor_get(x64, (p * H + (h < H ? h : H - 1)) * W + (w < W ? w : W - 1));
        }
        got[i] = y ? cnn_tensor_get(y, i) : NAN;
      }
  check_arrays(what, got, ref, N * C * OH * OW, dt == CNN_FLOAT64 ? 1e-12 : 1e-6, 1e-6);
  free(ref), free(got);
  cnn_tensor_release(y), cnn_tensor_release(x), cnn_tensor_release(x64);
}

/* ---- adaptive max pooling and pixel shuffle ------------------------------------------------------ */

static void test_adaptive_max(int64_t OH, int64_t OW) {
  int64_t N = 2, C = 3, H = 7, W = 5;
  cnn_tensor *x = gc_leaf(4, (int64_t[]){N, C, H, W}, -1, 1, 5), *idx = NULL;
  cnn_tensor *y = cnn_adaptive_max_pool2d(x, OH, OW, &idx);
  CHECK(y && idx);
  for (int64_t p = 0; y && idx && p < N * C; p++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t h0 = (int64_t)floor((double)oh * H / OH),
                h1 = (int64_t)ceil((double)(oh + 1) * H / OH);
        int64_t w0 = (int64_t)floor((double)ow * W / OW),
                w1 = (int64_t)ceil((double)(ow + 1) * W / OW);
        double best = -INFINITY;
        int64_t arg = -1, o = (p * OH + oh) * OW + ow;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++)
            if (cnn_tensor_get(x, p * H * W + h * W + w) > best)
              best = cnn_tensor_get(x, p * H * W + h * W + w), arg = h * W + w;
        CHECK_CLOSE(cnn_tensor_get(y, o), best, 0);
        CHECK(cnn_tensor_get(idx, o) == (double)arg);
      }
  cnn_tensor_release(y), cnn_tensor_release(idx), cnn_tensor_release(x);
}

static void test_pixel_shuffle(void) {
  int64_t r = 2, C = 3, H = 2, W = 3;
  cnn_tensor *x = gc_leaf(4, (int64_t[]){2, C * r * r, H, W}, -1, 1, 6);
  cnn_tensor *y = cnn_pixel_shuffle(x, r), *back = y ? cnn_pixel_unshuffle(y, r) : NULL;
  CHECK(y && y->shape[1] == C && y->shape[2] == H * r && y->shape[3] == W * r);
  for (int64_t n = 0; y && n < 2; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t i = 0; i < H * r; i++)
        for (int64_t j = 0; j < W * r; j++) {
          int64_t src = ((n * C * r * r + c * r * r + (i % r) * r + j % r) * H + i / r) * W + j / r;
          if (cnn_tensor_get(y, ((n * C + c) * H * r + i) * W * r + j) != cnn_tensor_get(x, src)) {
            CHECK(!"pixel_shuffle element");
            n = 2, c = C, i = H * r, j = W * r;
          }
        }
  CHECK(back && cnn_same_shape(back, x));
  for (int64_t i = 0; back && i < cnn_tensor_numel(x); i++)
    if (cnn_tensor_get(back, i) != cnn_tensor_get(x, i)) {
      CHECK(!"pixel_unshuffle(pixel_shuffle(x)) == x");
      break;
    }
  cnn_tensor_release(y), cnn_tensor_release(back), cnn_tensor_release(x);
}

/* ---- backward by finite differences -------------------------------------------------------------- */

typedef struct {
  int op; /* 0 interpolate, 1 adaptive max, 2 pixel shuffle, 3 unshuffle */
  int64_t oh, ow;
  int mode;
  bool ac;
  double sh, sw;
} rs_ctx;

static cnn_tensor *run(cnn_tensor **in, void *p) {
  rs_ctx *c = p;
  if (c->op == 0) return cnn_interpolate(in[0], c->oh, c->ow, c->mode, c->ac, c->sh, c->sw);
  if (c->op == 1) return cnn_adaptive_max_pool2d(in[0], c->oh, c->ow, NULL);
  return c->op == 2 ? cnn_pixel_shuffle(in[0], c->oh) : cnn_pixel_unshuffle(in[0], c->oh);
}

static void test_grads(void) {
  rs_ctx cases[] = {
      {0, 9, 11, CNN_RESIZE_BILINEAR, false, 0, 0},
      {0, 9, 11, CNN_RESIZE_BILINEAR, true, 0, 0},
      {0, 3, 4, CNN_RESIZE_BILINEAR, false, 0, 0},
      {0, 7, 10, CNN_RESIZE_BILINEAR, false, 1.5, 1.5},
      {0, 9, 11, CNN_RESIZE_NEAREST, false, 0, 0},
      {0, 3, 2, CNN_RESIZE_NEAREST, false, 0, 0},
      {1, 3, 2, 0, false, 0, 0},
      {1, 4, 4, 0, false, 0, 0},
  };
  const char *names[] = {"bilinear up",
                         "bilinear up align_corners",
                         "bilinear down",
                         "bilinear scale 1.5",
                         "nearest up",
                         "nearest down",
                         "adaptive_max_pool2d 3x2",
                         "adaptive_max_pool2d 4x4"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cnn_tensor *in[1] = {gc_leaf(4, (int64_t[]){2, 3, 5, 7}, -1, 1, (int)i + 20)};
    gradcheck(names[i], run, &cases[i], 1, in);
    cnn_tensor_release(in[0]);
  }
  rs_ctx ps = {2, 2, 0, 0, false, 0, 0}, pu = {3, 2, 0, 0, false, 0, 0};
  cnn_tensor *a[1] = {gc_leaf(4, (int64_t[]){2, 8, 2, 3}, -1, 1, 40)},
             *b[1] = {gc_leaf(3, (int64_t[]){3, 4, 6}, -1, 1, 41)};
  gradcheck("pixel_shuffle", run, &ps, 1, a);
  gradcheck("pixel_unshuffle (3-d)", run, &pu, 1, b);
  cnn_tensor_release(a[0]), cnn_tensor_release(b[0]);
}

static void test_errors(void) {
  cnn_tensor *x3 = cnn_zeros(3, (int64_t[]){1, 2, 3}, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *x4 = cnn_zeros(4, (int64_t[]){1, 3, 2, 3}, CNN_FLOAT32, CNN_DEVICE_CPU);
  CHECK(cnn_interpolate(x3, 2, 2, 0, false, 0, 0) == NULL &&
        strstr(cnn_error(), "interpolate: expected a 4-d"));
  CHECK(cnn_interpolate(x4, 0, 2, 0, false, 0, 0) == NULL && strstr(cnn_error(), "1x3x2x3"));
  CHECK(cnn_adaptive_max_pool2d(x4, 2, 0, NULL) == NULL &&
        strstr(cnn_error(), "adaptive_max_pool2d"));
  CHECK(cnn_pixel_shuffle(x4, 2) == NULL && strstr(cnn_error(), "not divisible"));
  CHECK(cnn_pixel_unshuffle(x4, 2) == NULL && strstr(cnn_error(), "divisible by the factor"));
  cnn_tensor_release(x3), cnn_tensor_release(x4);
}

int main(void) {
  test_hand();
  for (int d = 0; d < 2; d++) {
    cnn_dtype dt = d ? CNN_FLOAT32 : CNN_FLOAT64;
    test_oracle(9, 11, true, false, 0, 0, dt);
    test_oracle(9, 11, true, true, 0, 0, dt);
    test_oracle(3, 4, true, false, 0, 0, dt);
    test_oracle(3, 4, true, true, 0, 0, dt);
    test_oracle(1, 1, true, true, 0, 0, dt);
    test_oracle(7, 10, true, false, 1.5, 1.5, dt);
    test_oracle(10, 14, false, false, 0, 0, dt);
    test_oracle(15, 21, false, false, 0, 0, dt);
    test_oracle(3, 4, false, false, 0, 0, dt);
    test_oracle(8, 11, false, false, 1.7, 1.7, dt);
  }
  test_adaptive_max(3, 2);
  test_adaptive_max(4, 4);
  test_adaptive_max(7, 5);
  test_pixel_shuffle();
  test_grads();
  test_errors();
  return check_report("test_resize");
}
