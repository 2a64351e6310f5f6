/*
 * test_cifar.c -- the CIFAR-10 batch reader (core/io/cifar.c) on a small
 * batch written here: 3 records whose pixel at (channel c, row y, column x)
 * of image i is (i*7 + c*5 + y*3 + x) mod 256, checked element by element
 * through the N x 3 x 32 x 32 indexing; labels as stored (0-based); then
 * the errors: empty, a partial record, a label over 9 (a CIFAR-100 file),
 * a missing file.
 */
#include "check.h"
#include "cnn.h"
#include "io/io.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REC 3073

static uint8_t pixel(int i, int c, int y, int x) {
  return (uint8_t)((i * 7 + c * 5 + y * 3 + x) % 256);
}

static uint8_t *make_batch(int n, const uint8_t *labels) {
  uint8_t *b = malloc((size_t)n * REC);
  for (int i = 0; i < n; i++) {
    uint8_t *r = b + (size_t)i * REC;
    r[0] = labels[i];
    for (int c = 0; c < 3; c++)
      for (int y = 0; y < 32; y++)
        for (int x = 0; x < 32; x++) r[1 + c * 1024 + y * 32 + x] = pixel(i, c, y, x);
  }
  return b;
}

static void check_batch(cnn_tensor *x, cnn_tensor *y, int n, const uint8_t *labels) {
  CHECK(x->dtype == CNN_UINT8 && x->ndim == 4 && x->shape[0] == n && x->shape[1] == 3 &&
        x->shape[2] == 32 && x->shape[3] == 32);
  CHECK(y->dtype == CNN_INT64 && y->ndim == 1 && y->shape[0] == n);
  int bad = 0;
  for (int i = 0; i < n; i++)
    for (int c = 0; c < 3; c++)
      for (int r = 0; r < 32; r++)
        for (int col = 0; col < 32; col++)
          bad += cnn_tensor_get(x, ((i * 3 + c) * 32 + r) * 32 + col) != pixel(i, c, r, col);
  CHECK(bad == 0);
  for (int i = 0; i < n; i++) CHECK(((int64_t *)cnn_tensor_data(y))[i] == labels[i]);
}

static void expect_error(const uint8_t *buf, size_t len, const char *fragment) {
  cnn_tensor *x = (cnn_tensor *)1, *y = (cnn_tensor *)1;
  CHECK(cnn_cifar10_parse(buf, len, "b.bin", &x, &y) == -1);
  CHECK(x == (cnn_tensor *)1 && y == (cnn_tensor *)1); /* outputs untouched */
  if (!strstr(cnn_error(), fragment)) {
    CHECK(!"error message");
    fprintf(stderr, "  got '%s', expected '%s'\n", cnn_error(), fragment);
  }
}

int main(void) {
  const uint8_t labels[3] = {6, 0, 9};
  uint8_t *b = make_batch(3, labels);
  cnn_tensor *x = NULL, *y = NULL;
  CHECK(cnn_cifar10_parse(b, 3 * REC, "b.bin", &x, &y) == 0);
  if (x && y) {
    check_batch(x, y, 3, labels);
    cnn_tensor_release(x), cnn_tensor_release(y);
  }

  char path[256];
  snprintf(path, sizeof path, "%s/cnn_cifar_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  int fd = mkstemp(path);
  CHECK(fd >= 0 && write(fd, b, 3 * REC) == 3 * REC);
  close(fd);
  x = y = NULL;
  CHECK(cnn_cifar10_load(path, &x, &y) == 0);
  if (x && y) {
    check_batch(x, y, 3, labels);
    cnn_tensor_release(x), cnn_tensor_release(y);
  }
  unlink(path);
  CHECK(cnn_cifar10_load(path, &x, &y) == -1 && strstr(cnn_error(), path));

  expect_error(b, 0, "has 0 bytes, not a positive multiple of the 3073-byte record");
  expect_error(b, 3 * REC - 1, "has 9218 bytes, not a positive multiple");
  expect_error(b, REC + 1, "not a positive multiple");
  b[2 * REC] = 10;
  expect_error(b, 3 * REC, "b.bin: record 3 has label 10 (expected 0..9)");
  uint8_t *c100 = calloc(2, 3074); /* two CIFAR-100 records: 6148 = 2*3073 + 2 */
  expect_error(c100, 2 * 3074, "not a positive multiple");
  free(c100);
  free(b);
  return check_report("test_cifar");
}
