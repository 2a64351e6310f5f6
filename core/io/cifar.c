/*
 * cifar.c -- CIFAR-10's binary batches (data_batch_1.bin ... test_batch.bin).
 *
 * A batch is a sequence of 3073-byte records: one label byte (0..9), then
 * 1024 red, 1024 green and 1024 blue bytes of a 32x32 image, row-major.
 * So the pixel bytes of record i are already in N x 3 x 32 x 32 order.
 * The parser checks the length (a non-zero multiple of 3073) and every
 * label before it allocates; a CIFAR-100 file (2 label bytes, 3074-byte
 * records) is caught by one or the other.
 */
#include "io_internal.h"

#include <stdlib.h>
#include <string.h>

#define CIFAR_PIXELS (3 * 32 * 32)
#define CIFAR_RECORD (1 + CIFAR_PIXELS)

static int check_batch(const uint8_t *buf, size_t len, const char *what) {
  if (len == 0 || len % CIFAR_RECORD != 0) {
    cnn_set_error("cifar10: %s has %zu bytes, not a positive multiple of the %d-byte record "
                  "(1 label byte + 3x32x32 pixels)%s",
                  what, len, CIFAR_RECORD,
                  len > CIFAR_RECORD * (size_t)1000 ? "; is it truncated?" : "");
    return -1;
  }
  size_t n = len / CIFAR_RECORD;
  for (size_t i = 0; i < n; i++) {
    uint8_t label = buf[i * CIFAR_RECORD];
    if (label > 9) {
      cnn_set_error("cifar10: %s: record %zu has label %d (expected 0..9); not a CIFAR-10 batch?",
                    what, i + 1, label);
      return -1;
    }
  }
  return 0;
}

int cnn_cifar10_parse(const uint8_t *buf, size_t len, const char *what, cnn_tensor **images,
                      cnn_tensor **labels) {
  if (!what) what = "buffer";
  if (!images || !labels || (!buf && len)) {
    cnn_set_error("cifar10: %s: no data or no output", what);
    return -1;
  }
  if (check_batch(buf, len, what) < 0) return -1;
  int64_t n = (int64_t)(len / CIFAR_RECORD);
  cnn_tensor *x = cnn_empty(4, (int64_t[]){n, 3, 32, 32}, CNN_UINT8, CNN_DEVICE_CPU);
  cnn_tensor *y = x ? cnn_empty(1, &n, CNN_INT64, CNN_DEVICE_CPU) : NULL;
  if (!y) {
    if (x) cnn_tensor_release(x);
    return -1;
  }
  uint8_t *px = cnn_tensor_data(x);
  int64_t *py = cnn_tensor_data(y);
  for (int64_t i = 0; i < n; i++) {
    const uint8_t *rec = buf + (size_t)i * CIFAR_RECORD;
    py[i] = rec[0];
    memcpy(px + (size_t)i * CIFAR_PIXELS, rec + 1, CIFAR_PIXELS);
  }
  *images = x, *labels = y;
  return 0;
}

int cnn_cifar10_load(const char *path, cnn_tensor **images, cnn_tensor **labels) {
  uint8_t *buf;
  size_t len;
  if (!path) {
    cnn_set_error("cifar10: no file name");
    return -1;
  }
  if (cnn_io_read_file("cifar10", path, &buf, &len) < 0) return -1;
  int rc = cnn_cifar10_parse(buf, len, path, images, labels);
  free(buf);
  return rc;
}
