/*
 * test_pad_modes.c -- cnn_pad_mode (core/ops/pad_modes.c): F.pad's
 * 'reflect', 'replicate' and 'circular' modes (issue 13).
 *
 * Evidence: 1-d cases worked out by hand; 2- and 3-dim padding of odd
 * shapes against a loop written here from PyTorch's definitions (mirror
 * without the edge, clamp, wrap), negative pads (crops) included; the
 * gradient of every mode against central finite differences in float64
 * (positions read twice add up); PyTorch's error cases.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "check_core.h"
#include "cnn.h"
#include "gradcheck.h"

static const char *names[] = {"reflect", "replicate", "circular"};

static void values(cnn_tensor *t, double *out) {
  for (int64_t i = 0; i < cnn_tensor_numel(t); i++) out[i] = cnn_tensor_get(t, i);
}

/* ---- by hand -------------------------------------------------------------------- */

/* x = 1 2 3 4 padded (2, 1):
 *   reflect    3 2 | 1 2 3 4 | 3
 *   replicate  1 1 | 1 2 3 4 | 4
 *   circular   3 4 | 1 2 3 4 | 1
 * and cropped (-1, 2) circular: 2 3 4 | 1 2 */
static void test_hand(void) {
  cnn_tensor *x = cnn_from_buffer(2, (int64_t[]){1, 4}, CNN_FLOAT64, (double[]){1, 2, 3, 4});
  const double want[3][7] = {{3, 2, 1, 2, 3, 4, 3}, {1, 1, 1, 2, 3, 4, 4}, {3, 4, 1, 2, 3, 4, 1}};
  double got[7];
  for (int m = 0; m < 3; m++) {
    cnn_tensor *y = cnn_pad_mode(x, 2, (int64_t[]){2, 1}, (cnn_padding_mode)m);
    CHECK(y && y->ndim == 2 && y->shape[1] == 7);
    if (y) values(y, got), check_arrays(names[m], got, want[m], 7, 0, 0);
    cnn_tensor_release(y);
  }
  cnn_tensor *c = cnn_pad_mode(x, 2, (int64_t[]){-1, 2}, CNN_PAD_CIRCULAR);
  CHECK(c && c->shape[1] == 5);
  if (c) values(c, got), check_arrays("circular crop", got, (double[]){2, 3, 4, 1, 2}, 5, 0, 0);
  cnn_tensor_release(c), cnn_tensor_release(x);
}

/* ---- against the definition ------------------------------------------------------ */

static int64_t src(int mode, int64_t i, int64_t L) {
  if (mode == 0) {
    if (i < 0) return -i;
    return i >= L ? 2 * L - 2 - i : i;
  }
  if (mode == 1) return i < 0 ? 0 : i >= L ? L - 1 : i;
  int64_t r = i % L;
  return r < 0 ? r + L : r;
}

/* x: 2 x 3 x 4 x 5 padded on its last two dims by (l, r, t, b). */
static void check_2d(int mode, int64_t l, int64_t r, int64_t t, int64_t b) {
  int64_t shape[4] = {2, 3, 4, 5}, H = 4, W = 5, OH = H + t + b, OW = W + l + r;
  cnn_tensor *x = cnn_randn(4, shape, CNN_FLOAT64);
  cnn_tensor *y = cnn_pad_mode(x, 4, (int64_t[]){l, r, t, b}, (cnn_padding_mode)mode);
  char what[96];
  snprintf(what, sizeof what, "%s pad (%lld,%lld,%lld,%lld) of 2x3x4x5", names[mode], (long long)l,
           (long long)r, (long long)t, (long long)b);
  CHECK(y && y->shape[2] == OH && y->shape[3] == OW);
  if (y && y->shape[2] == OH && y->shape[3] == OW) {
    int64_t n = 6 * OH * OW;
    double *got = malloc((size_t)n * sizeof(double)), *ref = malloc((size_t)n * sizeof(double));
    values(y, got);
    for (int64_t p = 0; p < 6; p++)
      for (int64_t i = 0; i < OH; i++)
        for (int64_t j = 0; j < OW; j++)
          ref[(p * OH + i) * OW + j] =
              cnn_tensor_get(x, (p * H + src(mode, i - t, H)) * W + src(mode, j - l, W));
    check_arrays(what, got, ref, n, 0, 0);
    free(got), free(ref);
  }
  cnn_tensor_release(y), cnn_tensor_release(x);
}

static void test_definition(void) {
  for (int m = 0; m < 3; m++) {
    check_2d(m, 2, 1, 3, 0);
    check_2d(m, 0, 4, 1, 3);
    check_2d(m, -1, 2, 2, -2);
  }
  /* three padded dims of a 4-d input: the output size of each */
  cnn_tensor *x = cnn_randn(4, (int64_t[]){2, 3, 4, 5}, CNN_FLOAT32);
  cnn_tensor *y = cnn_pad_mode(x, 6, (int64_t[]){1, 1, 2, 0, 2, 1}, CNN_PAD_REFLECT);
  CHECK(y && y->shape[0] == 2 && y->shape[1] == 6 && y->shape[2] == 6 && y->shape[3] == 7);
  cnn_tensor_release(y), cnn_tensor_release(x);
}

/* ---- finite differences ---------------------------------------------------------------- */

typedef struct {
  int mode;
  int64_t pads[4];
} pad_case;

static cnn_tensor *pad_op(cnn_tensor **in, void *ctx) {
  pad_case *c = ctx;
  return cnn_pad_mode(in[0], 4, c->pads, (cnn_padding_mode)c->mode);
}

static void test_gradcheck(void) {
  for (int m = 0; m < 3; m++) {
    pad_case c = {m, {2, 1, 1, 2}};
    cnn_tensor *in[1] = {gc_leaf(4, (int64_t[]){1, 2, 3, 4}, -1, 1, m + 1)};
    char what[64];
    snprintf(what, sizeof what, "pad %s (2,1,1,2) of 1x2x3x4", names[m]);
    gradcheck(what, pad_op, &c, 1, in);
    gc_release(1, in);
  }
}

/* ---- errors ---------------------------------------------------------------------------- */

static void expect_error(cnn_tensor *x, int npads, const int64_t *pads, cnn_padding_mode m,
                         const char *msg) {
  cnn_tensor *y = cnn_pad_mode(x, npads, pads, m);
  check_error(y == NULL, msg);
  cnn_tensor_release(y);
}

static void test_errors(void) {
  cnn_tensor *x = cnn_zeros(3, (int64_t[]){2, 3, 4}, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *v = cnn_zeros(1, (int64_t[]){4}, CNN_FLOAT32, CNN_DEVICE_CPU);
  expect_error(x, 2, (int64_t[]){4, 0}, CNN_PAD_REFLECT,
               "pad: mode 'reflect': padding (4, 0) of dim 3");
  expect_error(x, 2, (int64_t[]){0, 5}, CNN_PAD_CIRCULAR, "mode 'circular'");
  expect_error(x, 2, (int64_t[]){-2, -2}, CNN_PAD_REPLICATE, "the result must not be empty");
  expect_error(x, 6, (int64_t[]){1, 1, 1, 1, 1, 1}, CNN_PAD_REPLICATE, "at least one more dim");
  expect_error(v, 2, (int64_t[]){1, 1}, CNN_PAD_REFLECT, "input 4");
  cnn_tensor *ok = cnn_pad_mode(x, 2, (int64_t[]){3, 3}, CNN_PAD_REFLECT); /* pad < size is fine */
  CHECK(ok && ok->shape[2] == 10);
  cnn_tensor_release(ok), cnn_tensor_release(x), cnn_tensor_release(v);
}

int main(void) {
  cnn_manual_seed(11);
  test_hand();
  test_definition();
  test_gradcheck();
  test_errors();
  return check_report("test_pad_modes");
}
