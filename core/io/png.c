/*
 * png.c -- 8-bit PNG images out (feature maps, filters) and back in (tests).
 *
 * Writing goes through libpng's low-level API with a write callback that
 * feeds the atomic writer (io_util.c), so an interrupted write never
 * leaves a partial image.  libpng reports errors by longjmp to the setjmp
 * in write_rows(); the error callback first records libpng's message in
 * our error buffer.  cnn_png_read (tests and tools, H x W x C) goes through
 * image.c's decoder and keeps the file's channel count (gray, RGB, RGBA;
 * gray+alpha is widened to RGBA).
 */
#include "io_internal.h"

#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

static void on_png_error(png_structp png, png_const_charp msg) {
  cnn_io_atomic *a = png_get_error_ptr(png);
  if (a->fd >= 0) cnn_set_error("png: cannot write %s: %s", a->path, msg);
  png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

static void on_png_write(png_structp png, png_bytep data, size_t n) {
  cnn_io_atomic *a = png_get_io_ptr(png);
  /* cnn_io_atomic_write sets the message and closes the temporary */
  if (cnn_io_atomic_write(a, data, n) < 0) png_longjmp(png, 1);
}

static void on_png_flush(png_structp png) { (void)png; }

static int write_rows(png_structp png, png_infop info, cnn_io_atomic *a, int64_t h, int64_t w,
                      int channels, const uint8_t *pixels) {
  static const int color[5] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                               PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGBA};
  if (setjmp(png_jmpbuf(png))) return -1;
  png_set_write_fn(png, a, on_png_write, on_png_flush);
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, color[channels], PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int64_t y = 0; y < h; y++)
    png_write_row(png, (png_const_bytep)(pixels + (size_t)y * (size_t)w * (size_t)channels));
  png_write_end(png, info);
  return 0;
}

static int check_png_args(const char *path, int64_t h, int64_t w, int channels, const uint8_t *px) {
  if (!path || !px) {
    cnn_set_error("png: no %s", path ? "pixels" : "file name");
    return -1;
  }
  if (channels != 1 && channels != 3 && channels != 4) {
    cnn_set_error("png: %d channels (expected 1 gray, 3 RGB or 4 RGBA)", channels);
    return -1;
  }
  if (h < 1 || w < 1 || h > 0x7fffffff || w > 0x7fffffff / channels) {
    cnn_set_error("png: image size %lldx%lld is out of range (1..2^31-1)", (long long)h,
                  (long long)w);
    return -1;
  }
  return 0;
}

int cnn_png_write(const char *path, int64_t h, int64_t w, int channels, const uint8_t *pixels) {
  if (check_png_args(path, h, w, channels, pixels) < 0) return -1;
  cnn_io_atomic a;
  if (cnn_io_atomic_open(&a, "png", path) < 0) return -1;
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, &a, on_png_error, on_png_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  int rc = -1;
  if (!info)
    cnn_set_error("png: out of memory");
  else
    rc = write_rows(png, info, &a, h, w, channels, pixels);
  png_destroy_write_struct(&png, &info);
  if (rc == 0) return cnn_io_atomic_commit(&a);
  cnn_io_atomic_abort(&a);
  return -1;
}

uint8_t *cnn_png_read(const char *path, int64_t *h, int64_t *w, int *channels) {
  cnn_image img;
  if (cnn_image_load(path, CNN_IMAGE_UNCHANGED, &img) < 0) return NULL;
  if (img.channels == 2) { /* gray + alpha is widened to RGBA */
    cnn_image_free(&img);
    if (cnn_image_load(path, CNN_IMAGE_RGBA, &img) < 0) return NULL;
  }
  *h = img.h, *w = img.w, *channels = img.channels;
  return img.px;
}
