/*
 * test_png.c -- PNG output (core/io/png.c): gray, RGB and RGBA images with
 * known pixels written, then read back through libpng and compared pixel
 * for pixel; the PNG signature and IHDR fields checked in the raw bytes
 * (width, height, bit depth 8, colour type 0/2/6); argument errors; a
 * failed write leaves the previous file intact and no temporary behind.
 */
#include "check.h"
#include "cnn.h"
#include "io/io.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3];
}

static void check_ihdr(const char *path, uint32_t w, uint32_t h, int color) {
  uint8_t b[33];
  FILE *f = fopen(path, "rb");
  CHECK(f && fread(b, 1, 33, f) == 33);
  if (f) fclose(f);
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  CHECK(memcmp(b, sig, 8) == 0);
  CHECK(memcmp(b + 12, "IHDR", 4) == 0);
  CHECK(be32(b + 16) == w && be32(b + 20) == h);
  CHECK(b[24] == 8 && b[25] == color);
}

static void round_trip(int channels, int color, int64_t h, int64_t w) {
  char path[512];
  snprintf(path, sizeof path, "%s/img%d.png", tmpdir, channels);
  size_t n = (size_t)(h * w * channels);
  uint8_t *px = malloc(n);
  for (size_t i = 0; i < n; i++) px[i] = (uint8_t)(i * 37 + 11);
  CHECK(cnn_png_write(path, h, w, channels, px) == 0);
  check_ihdr(path, (uint32_t)w, (uint32_t)h, color);
  int64_t rh = 0, rw = 0;
  int rc = 0;
  uint8_t *back = cnn_png_read(path, &rh, &rw, &rc);
  CHECK(back && rh == h && rw == w && rc == channels);
  if (back && rh == h && rw == w && rc == channels) CHECK(memcmp(back, px, n) == 0);
  free(back);
  free(px);
  unlink(path);
}

static int count_temporaries(void) {
  DIR *d = opendir(tmpdir);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
  closedir(d);
  return n;
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "%s/cnn_png_XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(tmpdir)) return perror("mkdtemp"), 1;
  round_trip(1, 0, 5, 7);
  round_trip(3, 2, 3, 4);
  round_trip(4, 6, 2, 9);
  round_trip(1, 0, 1, 1);

  char path[512], bad[512];
  snprintf(path, sizeof path, "%s/keep.png", tmpdir);
  snprintf(bad, sizeof bad, "%s/missing/x.png", tmpdir);
  uint8_t px[12] = {0};
  CHECK(cnn_png_write(path, 2, 2, 2, px) == -1 && strstr(cnn_error(), "2 channels"));
  CHECK(cnn_png_write(path, 0, 2, 1, px) == -1 && strstr(cnn_error(), "0x2"));
  CHECK(cnn_png_write(path, 2, -1, 1, px) == -1);
  CHECK(cnn_png_write(path, 2, 2, 1, NULL) == -1);
  CHECK(access(path, F_OK) != 0); /* nothing created by a refused write */
  CHECK(cnn_png_write(bad, 2, 2, 1, px) == -1 && strstr(cnn_error(), "missing"));
  CHECK(cnn_png_write(path, 1, 3, 4, px) == 0);
  CHECK(cnn_png_write(tmpdir, 1, 3, 4, px) == -1); /* rename over a folder fails */
  CHECK(count_temporaries() == 0);
  int64_t h, w;
  int c;
  CHECK(cnn_png_read(bad, &h, &w, &c) == NULL && strstr(cnn_error(), "cannot open") &&
        strstr(cnn_error(), bad));
  /* a file that is not a PNG */
  char junk[512];
  snprintf(junk, sizeof junk, "%s/junk.png", tmpdir);
  FILE *f = fopen(junk, "wb");
  fputs("not a png at all", f);
  fclose(f);
  CHECK(cnn_png_read(junk, &h, &w, &c) == NULL);
  unlink(junk);
  unlink(path);
  rmdir(tmpdir);
  return check_report("test_png");
}
