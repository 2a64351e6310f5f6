/*
 * test_idx.c -- the IDX reader (core/io/idx.c) on small files built here
 * byte by byte, one per element type, with the expected values written
 * independently; the error paths (wrong magic, unknown type, bad ndims,
 * truncated header and data, trailing bytes, overflowing sizes); plain and
 * gzipped files; and, when Debian's dataset-fashion-mnist is installed,
 * the real test set (10000 28x28 images, labels 0..9 with 1000 of each).
 */
#include "check.h"
#include "cnn.h"
#include "io/io.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static char tmpdir[256];

static cnn_tensor *parse(const uint8_t *buf, size_t len) { return cnn_idx_parse(buf, len, "t"); }

static void expect_error(const uint8_t *buf, size_t len, const char *fragment) {
  cnn_tensor *t = parse(buf, len);
  CHECK(t == NULL);
  if (t)
    cnn_tensor_release(t);
  else if (!strstr(cnn_error(), fragment)) {
    CHECK(!"error message");
    fprintf(stderr, "  got '%s', expected it to contain '%s'\n", cnn_error(), fragment);
  }
}

static void test_uint8(void) {
  const uint8_t f[] = {0, 0, 0x08, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0,  0,
                       0, 2, 0,    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 255};
  cnn_tensor *t = parse(f, sizeof f);
  CHECK(t != NULL);
  if (!t) return;
  CHECK(t->dtype == CNN_UINT8 && t->ndim == 3);
  CHECK(t->shape[0] == 3 && t->shape[1] == 2 && t->shape[2] == 2);
  const uint8_t *d = cnn_tensor_data(t);
  CHECK(memcmp(d, f + 16, 12) == 0);
  CHECK(d[11] == 255);
  cnn_tensor_release(t);
}

static void test_other_types(void) {
  const uint8_t i8[] = {0, 0, 0x09, 1, 0, 0, 0, 3, 0xFF, 0x7F, 0x80};
  const uint8_t i16[] = {0, 0, 0x0B, 1, 0, 0, 0, 2, 0xFF, 0xFE, 0x01, 0x02};
  const uint8_t i32[] = {0, 0, 0x0C, 1, 0, 0, 0, 2, 0x80, 0, 0, 0, 0, 0, 0x01, 0x00};
  const uint8_t f32[] = {0, 0, 0x0D, 1, 0, 0, 0, 2, 0x3F, 0xC0, 0, 0, 0xC2, 0x28, 0, 0};
  const uint8_t f64[] = {0, 0, 0x0E, 1, 0, 0, 0, 1, 0xC0, 0, 0, 0, 0, 0, 0, 0};
  cnn_tensor *t = parse(i8, sizeof i8);
  CHECK(t && t->dtype == CNN_INT64 && t->shape[0] == 3);
  if (t) {
    int64_t *d = cnn_tensor_data(t);
    CHECK(d[0] == -1 && d[1] == 127 && d[2] == -128);
    cnn_tensor_release(t);
  }
  t = parse(i16, sizeof i16);
  CHECK(t && t->dtype == CNN_INT64);
  if (t) {
    CHECK(((int64_t *)cnn_tensor_data(t))[0] == -2 && ((int64_t *)cnn_tensor_data(t))[1] == 258);
    cnn_tensor_release(t);
  }
  t = parse(i32, sizeof i32);
  CHECK(t && t->dtype == CNN_INT64);
  if (t) {
    CHECK(((int64_t *)cnn_tensor_data(t))[0] == INT32_MIN &&
          ((int64_t *)cnn_tensor_data(t))[1] == 256);
    cnn_tensor_release(t);
  }
  t = parse(f32, sizeof f32); /* 1.5 and -42.0 */
  CHECK(t && t->dtype == CNN_FLOAT32);
  if (t) {
    CHECK(((float *)cnn_tensor_data(t))[0] == 1.5f && ((float *)cnn_tensor_data(t))[1] == -42.0f);
    cnn_tensor_release(t);
  }
  t = parse(f64, sizeof f64); /* -2.0 */
  CHECK(t && t->dtype == CNN_FLOAT64);
  if (t) {
    CHECK(((double *)cnn_tensor_data(t))[0] == -2.0);
    cnn_tensor_release(t);
  }
}

static void test_errors(void) {
  const uint8_t ok[] = {0, 0, 0x08, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0,  0,
                        0, 2, 0,    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  uint8_t f[64];
  expect_error(ok, 0, "too short");
  expect_error(ok, 3, "too short");
  memcpy(f, ok, sizeof ok), f[1] = 8;
  expect_error(f, sizeof ok, "not an IDX file");
  memcpy(f, ok, sizeof ok), f[2] = 0x0A;
  expect_error(f, sizeof ok, "unknown element type 0x0a");
  memcpy(f, ok, sizeof ok), f[3] = 0;
  expect_error(f, sizeof ok, "has 0 dimensions");
  memcpy(f, ok, sizeof ok), f[3] = 9;
  expect_error(f, sizeof ok, "has 9 dimensions");
  expect_error(ok, 10, "need a 16-byte header but the file has 10 bytes");
  expect_error(ok, 27,
               "idx: t is truncated: header says 3x2x2 (12 bytes of data) but the file has 11");
  memcpy(f, ok, sizeof ok), f[sizeof ok] = 0;
  expect_error(f, sizeof ok + 1, "has 1 bytes after the data");
  /* 4 dims of 0xFFFFFFFF ints: 2^128 elements */
  const uint8_t big[] = {0,    0,    0x0C, 4,    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                         0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  expect_error(big, sizeof big, "too many elements");
  const uint8_t zbig[] = {0,    0,    0x08, 3,    0,    0,    0,    0,
                          0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  expect_error(zbig, sizeof zbig, "header says 0x4294967295x4294967295, too many elements");
  /* a real header over a short buffer: 60000x28x28 with 1234 bytes of data */
  uint8_t *mn = calloc(16 + 1234, 1);
  memcpy(mn, (uint8_t[]){0, 0, 8, 3, 0, 0, 0xEA, 0x60, 0, 0, 0, 28, 0, 0, 0, 28}, 16);
  expect_error(mn, 16 + 1234,
               "header says 60000x28x28 (47040000 bytes of data) but the file has 1234");
  free(mn);
  /* zero-sized dimension: a valid empty tensor */
  const uint8_t empty[] = {0, 0, 0x08, 2, 0, 0, 0, 0, 0, 0, 0, 5};
  cnn_tensor *t = parse(empty, sizeof empty);
  CHECK(t && t->ndim == 2 && t->shape[0] == 0 && t->shape[1] == 5);
  if (t) cnn_tensor_release(t);
}

static void test_files(void) {
  const uint8_t f[] = {0, 0, 0x08, 1, 0, 0, 0, 4, 10, 20, 30, 40};
  char plain[512], gz[512];
  snprintf(plain, sizeof plain, "%s/a-idx1-ubyte", tmpdir);
  snprintf(gz, sizeof gz, "%s/a-idx1-ubyte.gz", tmpdir);
  FILE *fp = fopen(plain, "wb");
  fwrite(f, 1, sizeof f, fp);
  fclose(fp);
  gzFile g = gzopen(gz, "wb");
  gzwrite(g, f, sizeof f);
  gzclose(g);
  for (int i = 0; i < 2; i++) {
    cnn_tensor *t = cnn_idx_load(i ? gz : plain);
    CHECK(t && t->ndim == 1 && t->shape[0] == 4);
    if (t) {
      CHECK(memcmp(cnn_tensor_data(t), f + 8, 4) == 0);
      cnn_tensor_release(t);
    }
  }
  /* a truncated gzip stream is an error, not a short file */
  fp = fopen(gz, "rb");
  uint8_t zbuf[256];
  size_t zn = fread(zbuf, 1, sizeof zbuf, fp);
  fclose(fp);
  fp = fopen(gz, "wb");
  fwrite(zbuf, 1, zn - 10, fp);
  fclose(fp);
  cnn_tensor *t = cnn_idx_load(gz);
  CHECK(t == NULL);
  if (t)
    cnn_tensor_release(t);
  else
    CHECK(strstr(cnn_error(), gz) != NULL);
  char missing[512];
  snprintf(missing, sizeof missing, "%s/missing-idx", tmpdir);
  CHECK(cnn_idx_load(missing) == NULL);
  CHECK(strstr(cnn_error(), "missing-idx") && strstr(cnn_error(), "No such file"));
  CHECK(cnn_idx_load(tmpdir) == NULL);
  CHECK(strstr(cnn_error(), "is a folder") != NULL);
  CHECK(cnn_idx_load("/dev/zero") == NULL && strstr(cnn_error(), "not a regular file"));
  unlink(plain), unlink(gz);
}

static void test_fashion_mnist(void) {
  const char *dir = "/usr/share/datasets/fashion-mnist";
  char p[512];
  snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte.gz", dir);
  if (access(p, R_OK) != 0) {
    printf("test_idx: %s not installed; skipping the real-data check\n", dir);
    return;
  }
  cnn_tensor *y = cnn_idx_load(p);
  snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte.gz", dir);
  cnn_tensor *x = cnn_idx_load(p);
  CHECK(x && y);
  if (!x || !y) return;
  CHECK(x->dtype == CNN_UINT8 && x->ndim == 3 && x->shape[0] == 10000 && x->shape[1] == 28 &&
        x->shape[2] == 28);
  CHECK(y->dtype == CNN_UINT8 && y->ndim == 1 && y->shape[0] == 10000);
  int64_t count[10] = {0};
  const uint8_t *l = cnn_tensor_data(y);
  bool in_range = true;
  for (int i = 0; i < 10000; i++) in_range &= l[i] < 10, count[l[i] % 10]++;
  CHECK(in_range);
  for (int c = 0; c < 10; c++) CHECK(count[c] == 1000);
  cnn_tensor_release(x), cnn_tensor_release(y);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "%s/cnn_idx_XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(tmpdir)) return perror("mkdtemp"), 1;
  test_uint8();
  test_other_types();
  test_errors();
  test_files();
  test_fashion_mnist();
  rmdir(tmpdir);
  return check_report("test_idx");
}
