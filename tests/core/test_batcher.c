/*
 * test_batcher.c -- the background batcher of data.DataLoader
 * (core/io/batcher.c), against a naive gather written here.
 *
 * - batches equal images[order[p]] converted by hand (scale, per-channel
 *   normalise), labels + offset; the last partial batch; drop_last;
 * - float64 images and float32 two-column labels pass through unchanged;
 * - transforms on tiny known images: every flipped 2x3 image is the
 *   original or its mirror (both seen); every crop of a 3x3 image with
 *   padding 1 is one of the 9 zero-filled shifts (and several are seen),
 *   padding normalises like a black pixel;
 * - the same seed gives the same batches, another seed other ones;
 * - freeing mid-epoch (and before the first batch) joins the worker;
 * - argument errors name the problem.
 */
#include "check.h"
#include "cnn.h"
#include "io/io.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint8_t pix(int64_t i, int64_t c, int64_t y, int64_t x) {
  return (uint8_t)(i * 13 + c * 7 + y * 5 + x * 3);
}

/* N x 2 x 3 x 4 uint8 images with pix() values, labels 100 + i */
static void make_data(int64_t n, cnn_tensor **img, cnn_tensor **lab) {
  *img = cnn_empty(4, (int64_t[]){n, 2, 3, 4}, CNN_UINT8, CNN_DEVICE_CPU);
  *lab = cnn_empty(1, &n, CNN_INT64, CNN_DEVICE_CPU);
  uint8_t *p = cnn_tensor_data(*img);
  for (int64_t i = 0; i < n; i++) {
    ((int64_t *)cnn_tensor_data(*lab))[i] = 100 + i;
    for (int c = 0; c < 2; c++)
      for (int y = 0; y < 3; y++)
        for (int x = 0; x < 4; x++) *p++ = pix(i, c, y, x);
  }
}

static void test_gather(bool drop_last, int64_t n, int64_t bs, int64_t stride) {
  cnn_tensor *img, *lab;
  make_data(n, &img, &lab);
  int64_t *order = malloc(n * sizeof *order);
  for (int64_t p = 0; p < n; p++) order[p] = p * stride % n; /* stride coprime with n */
  cnn_transform tf = {
      .scale = 1 / 255.0, .normalize = 1, .nchan = 2, .mean = {0.5, 0.25}, .std = {0.5, 2}};
  cnn_batcher *b = cnn_batcher_new(img, lab, order, n, bs, drop_last, &tf, 1, 7);
  CHECK(b != NULL);
  if (!b) return;
  int64_t want_batches = drop_last ? n / bs : (n + bs - 1) / bs, got_batches = 0, pos = 0;
  CHECK(cnn_batcher_len(b) == want_batches);
  cnn_tensor *x, *y;
  int rc;
  float *ref = malloc(bs * 24 * sizeof *ref);
  while ((rc = cnn_batcher_next(b, &x, &y)) == 1) {
    int64_t m = x->shape[0];
    CHECK(x->dtype == CNN_FLOAT32 && x->ndim == 4 && x->shape[1] == 2 && x->shape[2] == 3 &&
          x->shape[3] == 4);
    CHECK(y->dtype == CNN_INT64 && y->ndim == 1 && y->shape[0] == m);
    CHECK(m == (pos + bs <= n ? bs : n - pos));
    for (int64_t j = 0; j < m; j++) {
      int64_t i = order[pos + j];
      CHECK(((int64_t *)cnn_tensor_data(y))[j] == 100 + i + 1);
      for (int c = 0; c < 2; c++)
        for (int yy = 0; yy < 3; yy++)
          for (int xx = 0; xx < 4; xx++)
            ref[((j * 2 + c) * 3 + yy) * 4 + xx] =
                (float)((pix(i, c, yy, xx) / 255.0 - tf.mean[c]) / tf.std[c]);
    }
    check_arrays_f32("batch", cnn_tensor_data(x), ref, m * 24, 1e-6, 1e-6);
    pos += m, got_batches++;
    cnn_tensor_release(x), cnn_tensor_release(y);
  }
  CHECK(rc == 0 && got_batches == want_batches);
  CHECK(pos == (drop_last ? n / bs * bs : n));
  CHECK(cnn_batcher_next(b, &x, &y) == 0); /* stays done */
  cnn_batcher_free(b);
  free(ref), free(order);
  cnn_tensor_release(img), cnn_tensor_release(lab);
}

static void test_passthrough(void) {
  double v[3 * 5];
  float l[3 * 2];
  for (int i = 0; i < 15; i++) v[i] = i * 1.5 - 4;
  for (int i = 0; i < 6; i++) l[i] = i + 0.5f;
  cnn_tensor *img = cnn_from_buffer(2, (int64_t[]){3, 5}, CNN_FLOAT64, v);
  cnn_tensor *lab = cnn_from_buffer(2, (int64_t[]){3, 2}, CNN_FLOAT32, l);
  cnn_batcher *b = cnn_batcher_new(img, lab, (int64_t[]){2, 0, 1}, 3, 2, false, NULL, 1, 0);
  cnn_tensor *x, *y;
  CHECK(b && cnn_batcher_next(b, &x, &y) == 1);
  if (!b) return;
  CHECK(x->dtype == CNN_FLOAT64 && x->shape[0] == 2 && x->shape[1] == 5 && y->dtype == CNN_FLOAT32);
  double *xd = cnn_tensor_data(x);
  float *yd = cnn_tensor_data(y);
  CHECK(xd[0] == v[10] && xd[4] == v[14] && xd[5] == v[0]);
  CHECK(yd[0] == l[4] && yd[1] == l[5] && yd[2] == l[0]); /* no offset on float labels */
  cnn_tensor_release(x), cnn_tensor_release(y);
  CHECK(cnn_batcher_next(b, &x, NULL) == 1 && x->shape[0] == 1 &&
        ((double *)cnn_tensor_data(x))[0] == v[5]);
  cnn_tensor_release(x);
  cnn_batcher_free(b);
  /* no labels: y comes back NULL */
  b = cnn_batcher_new(img, NULL, NULL, 3, 3, false, NULL, 0, 0);
  y = (cnn_tensor *)1;
  CHECK(b && cnn_batcher_next(b, &x, &y) == 1 && y == NULL);
  if (b) cnn_tensor_release(x);
  cnn_batcher_free(b);
  cnn_tensor_release(img), cnn_tensor_release(lab);
}

/* all n samples of the only batch, as floats */
static float *one_batch(cnn_tensor *img, int64_t n, const cnn_transform *tf, uint64_t seed) {
  int64_t *order = calloc(n, sizeof *order); /* the same image n times */
  cnn_batcher *b = cnn_batcher_new(img, NULL, order, n, n, false, tf, 0, seed);
  free(order);
  cnn_tensor *x;
  if (!b || cnn_batcher_next(b, &x, NULL) != 1) return cnn_batcher_free(b), NULL;
  size_t bytes = cnn_tensor_numel(x) * sizeof(float);
  float *out = malloc(bytes);
  memcpy(out, cnn_tensor_data(x), bytes);
  cnn_tensor_release(x);
  cnn_batcher_free(b);
  return out;
}

static void test_flip(void) {
  uint8_t v[6] = {1, 2, 3, 4, 5, 6};
  const float same[6] = {1, 2, 3, 4, 5, 6}, mirror[6] = {3, 2, 1, 6, 5, 4};
  cnn_tensor *img = cnn_from_buffer(4, (int64_t[]){1, 1, 2, 3}, CNN_UINT8, v);
  cnn_transform tf = {.hflip = 1};
  float *out = one_batch(img, 64, &tf, 123);
  CHECK(out != NULL);
  int nsame = 0, nmirror = 0, other = 0;
  for (int s = 0; out && s < 64; s++) {
    if (memcmp(out + 6 * s, same, sizeof same) == 0)
      nsame++;
    else if (memcmp(out + 6 * s, mirror, sizeof mirror) == 0)
      nmirror++;
    else
      other++;
  }
  CHECK(other == 0 && nsame > 10 && nmirror > 10);
  free(out);
  cnn_tensor_release(img);
}

/* which of the 9 shifts (dy, dx in -1..1) of the 3x3 image 1..9 is `o`? -1 if none */
static int which_shift(const float *o, float pad) {
  for (int k = 0; k < 9; k++) {
    int dy = k / 3 - 1, dx = k % 3 - 1, ok = 1;
    for (int y = 0; y < 3; y++)
      for (int x = 0; x < 3; x++) {
        int sy = y + dy, sx = x + dx;
        float want = sy >= 0 && sy < 3 && sx >= 0 && sx < 3 ? (float)(1 + sy * 3 + sx) : pad;
        ok &= o[y * 3 + x] == want;
      }
    if (ok) return k;
  }
  return -1;
}

static void test_crop(void) {
  uint8_t v[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  cnn_tensor *img = cnn_from_buffer(3, (int64_t[]){1, 3, 3}, CNN_UINT8, v); /* N x H x W */
  cnn_transform tf = {.crop_pad = 1};
  float *out = one_batch(img, 200, &tf, 99);
  CHECK(out != NULL);
  int seen[9] = {0}, none = 0, kinds = 0;
  for (int s = 0; out && s < 200; s++) {
    int k = which_shift(out + 9 * s, 0);
    if (k < 0)
      none++;
    else
      seen[k]++;
  }
  for (int k = 0; k < 9; k++) kinds += seen[k] > 0;
  CHECK(none == 0 && kinds >= 7);
  free(out);
  /* with normalisation the padding is a normalised black pixel: (0 - 2) / 4 */
  tf = (cnn_transform){.crop_pad = 1, .normalize = 1, .nchan = 1, .mean = {2}, .std = {4}};
  out = one_batch(img, 50, &tf, 5);
  int bad = 0;
  for (int s = 0; out && s < 50; s++) {
    float o[9];
    for (int i = 0; i < 9; i++) o[i] = out[9 * s + i] * 4 + 2; /* undo the normalisation */
    bad += which_shift(o, 0) < 0;
  }
  CHECK(out && bad == 0);
  free(out);
  cnn_tensor_release(img);
}

static void test_reproducible(void) {
  cnn_tensor *img, *lab;
  make_data(40, &img, &lab);
  cnn_transform tf = {.crop_pad = 1, .hflip = 1, .scale = 1};
  float *a = one_batch(img, 40, &tf, 2024), *b = one_batch(img, 40, &tf, 2024),
        *c = one_batch(img, 40, &tf, 2025);
  CHECK(a && b && c);
  if (a && b && c) {
    CHECK(memcmp(a, b, 40 * 24 * sizeof(float)) == 0);
    CHECK(memcmp(a, c, 40 * 24 * sizeof(float)) != 0);
  }
  free(a), free(b), free(c);
  /* batch size does not change the randomness either: positions decide */
  int64_t order[40] = {0};
  cnn_batcher *bt = cnn_batcher_new(img, NULL, order, 40, 3, false, &tf, 0, 2024);
  cnn_tensor *x;
  int64_t pos = 0, bad = 0;
  a = one_batch(img, 40, &tf, 2024);
  while (bt && cnn_batcher_next(bt, &x, NULL) == 1) {
    bad += memcmp(cnn_tensor_data(x), a + pos * 24, cnn_tensor_numel(x) * sizeof(float)) != 0;
    pos += x->shape[0];
    cnn_tensor_release(x);
  }
  CHECK(bt && pos == 40 && bad == 0);
  cnn_batcher_free(bt);
  free(a);
  cnn_tensor_release(img), cnn_tensor_release(lab);
}

static void test_free_mid_epoch(void) {
  cnn_tensor *img = cnn_zeros(4, (int64_t[]){2000, 3, 32, 32}, CNN_UINT8, CNN_DEVICE_CPU);
  cnn_transform tf = {.crop_pad = 4, .hflip = 1, .scale = 1 / 255.0};
  for (int round = 0; round < 20; round++) {
    cnn_batcher *b = cnn_batcher_new(img, NULL, NULL, 2000, 500, false, &tf, 0, round);
    CHECK(b != NULL);
    cnn_tensor *x;
    for (int k = 0; b && k < round % 3; k++) {
      CHECK(cnn_batcher_next(b, &x, NULL) == 1);
      cnn_tensor_release(x);
    }
    cnn_batcher_free(b); /* joins a worker that may be mid-batch */
  }
  cnn_tensor_release(img);
}

static void expect_error(cnn_batcher *b, const char *fragment) {
  CHECK(b == NULL);
  cnn_batcher_free(b);
  if (!b && !strstr(cnn_error(), fragment)) {
    CHECK(!"error message");
    fprintf(stderr, "  got '%s', expected '%s'\n", cnn_error(), fragment);
  }
}

static void test_errors(void) {
  cnn_tensor *img, *lab;
  make_data(5, &img, &lab);
  cnn_tensor *lab4 = cnn_zeros(1, (int64_t[]){4}, CNN_INT64, CNN_DEVICE_CPU);
  cnn_tensor *flat = cnn_zeros(2, (int64_t[]){5, 6}, CNN_UINT8, CNN_DEVICE_CPU);
  cnn_transform crop = {.crop_pad = 2}, n3 = {.normalize = 1, .nchan = 3, .std = {1, 1, 1}};
  cnn_transform std0 = {.normalize = 1, .nchan = 1}, negpad = {.crop_pad = -1};
  expect_error(cnn_batcher_new(img, lab4, NULL, 5, 2, false, NULL, 0, 0),
               "images 5x2x3x4 and labels 4");
  expect_error(cnn_batcher_new(img, lab, (int64_t[]){0, 5}, 2, 2, false, NULL, 0, 0),
               "sample index 5 at position 2");
  expect_error(cnn_batcher_new(img, lab, (int64_t[]){-1}, 1, 2, false, NULL, 0, 0),
               "sample index -1");
  expect_error(cnn_batcher_new(img, lab, NULL, 5, 0, false, NULL, 0, 0), "batch size 0");
  expect_error(cnn_batcher_new(flat, NULL, NULL, 5, 2, false, &crop, 0, 0),
               "need images N x [C x] H x W, got 5x6");
  expect_error(cnn_batcher_new(img, NULL, NULL, 5, 2, false, &n3, 0, 0),
               "normalize has 3 channel(s) but the images have 2");
  expect_error(cnn_batcher_new(img, NULL, NULL, 5, 2, false, &std0, 0, 0), "std 0");
  expect_error(cnn_batcher_new(img, NULL, NULL, 5, 2, false, &negpad, 0, 0), "crop padding -1");
  expect_error(cnn_batcher_new(NULL, NULL, NULL, 5, 2, false, NULL, 0, 0),
               "images must be a tensor");
  /* an empty epoch is not an error */
  cnn_batcher *b = cnn_batcher_new(img, lab, NULL, 0, 2, false, NULL, 0, 0);
  cnn_tensor *x, *y;
  CHECK(b && cnn_batcher_len(b) == 0 && cnn_batcher_next(b, &x, &y) == 0);
  cnn_batcher_free(b);
  b = cnn_batcher_new(img, lab, NULL, 5, 8, true, NULL, 0, 0); /* drop_last, fewer than a batch */
  CHECK(b && cnn_batcher_len(b) == 0 && cnn_batcher_next(b, &x, &y) == 0);
  cnn_batcher_free(b);
  cnn_tensor_release(img), cnn_tensor_release(lab), cnn_tensor_release(lab4),
      cnn_tensor_release(flat);
}

int main(void) {
  test_gather(false, 10, 4, 3);
  test_gather(true, 10, 4, 3);
  test_gather(false, 1000, 7, 13); /* many small batches: the worker handshake */
  test_gather(false, 9, 3, 2);
  test_passthrough();
  test_flip();
  test_crop();
  test_reproducible();
  test_free_mid_epoch();
  test_errors();
  return check_report("test_batcher");
}
