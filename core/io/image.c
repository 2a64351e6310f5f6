/*
 * image.c -- PNG and JPEG decoding from memory (io.read_image, the image
 * folders of data.ImageFolder and the loader's worker threads).
 *
 * cnn_image_decode() looks at the first bytes: the PNG signature selects
 * libpng (low-level API, errors by longjmp to a setjmp in png_decode_rows),
 * the JPEG start-of-image marker selects libjpeg-turbo's TurboJPEG API (one
 * handle per call, so any thread may decode).  Anything else is "not a PNG
 * or JPEG file".  The result is always 8 bits per sample, interleaved
 * h x w x channels, converted as the mode asks:
 *
 *   file            UNCHANGED   GRAY            RGB               RGBA
 *   gray            1           1               3 (replicated)    4 (alpha 255)
 *   gray + alpha    2           1 (alpha drop)  3 (alpha dropped) 4
 *   RGB / palette   3           1 (ITU-R 601)   3                 4 (alpha 255)
 *   RGBA            4           1 (alpha drop)  3 (alpha dropped) 4
 *
 * Palette images are expanded (a tRNS chunk becomes alpha), 1/2/4-bit gray
 * is scaled to 8 bits, 16-bit samples are scaled to 8 bits with rounding
 * (libpng's png_set_scale_16: v * 255 / 65535).  No gamma or colour-space
 * conversion is applied.  RGB -> gray: libpng's and TurboJPEG's own
 * conversions (0.299 R + 0.587 G + 0.114 B, as PIL's convert('L')).
 * JPEG: grayscale and YCbCr files; CMYK JPEG is refused with a message.
 * Truncated or corrupt data is an error (TJFLAG_STOPONWARNING makes
 * libjpeg's "premature end of data" warning fatal).
 *
 * Invariant: on failure nothing is left allocated and cnn_error() (this
 * thread's) reads "<fmt>: <what>: <reason>".  Images larger than
 * CNN_IMAGE_MAX_BYTES decoded are refused before any pixel buffer exists.
 */
#include "io_internal.h"

#include <ctype.h>
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

cnn_image_format cnn_image_sniff(const uint8_t *buf, size_t len) {
  if (len >= 8 && memcmp(buf, png_signature, 8) == 0) return CNN_IMAGE_PNG;
  if (len >= 3 && buf[0] == 0xFF && buf[1] == 0xD8 && buf[2] == 0xFF) return CNN_IMAGE_JPEG;
  return CNN_IMAGE_UNKNOWN;
}

static int check_size(const char *fmt, const char *what, int64_t h, int64_t w, int c) {
  if (h < 1 || w < 1 || (uint64_t)h * (uint64_t)w * (uint64_t)c > CNN_IMAGE_MAX_BYTES) {
    cnn_set_error(
        "%s: %s: image size %lldx%lld (x%d channels) is out of range (at most %llu bytes decoded)",
        fmt, what, (long long)h, (long long)w, c, (unsigned long long)CNN_IMAGE_MAX_BYTES);
    return -1;
  }
  return 0;
}

/* ---- PNG ------------------------------------------------------------------ */

typedef struct {
  const uint8_t *buf;
  size_t len, pos;
  const char *what;
} png_source;

static void on_read_error(png_structp png, png_const_charp msg) {
  png_source *s = png_get_error_ptr(png);
  cnn_set_error("png: %s: %s", s->what, msg);
  png_longjmp(png, 1);
}

static void on_read_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

static void on_read(png_structp png, png_bytep out, size_t n) {
  png_source *s = png_get_io_ptr(png);
  if (n > s->len - s->pos) png_error(png, "the file is truncated");
  memcpy(out, s->buf + s->pos, n);
  s->pos += n;
}

/* 0 when every chunk's declared length fits in the file, else -1 with an
 * error.  libpng allocates (and zeroes) the length a chunk declares before
 * reading it -- a 76-byte file declaring a 1.9 GB sPLT chunk took 1.9 GB
 * (found by fuzz_png; png_set_chunk_malloc_max did not stop it) -- so the
 * lengths are checked here first, against the bytes the file holds. */
static int png_chunks_fit(const uint8_t *buf, size_t len, const char *what) {
  size_t pos = 8; /* after the signature */
  while (len - pos >= 8) {
    const uint8_t *h = buf + pos;
    uint32_t n = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
    if ((uint64_t)n + 12 > len - pos) {
      cnn_set_error("png: %s: chunk '%c%c%c%c' declares %lu bytes, more than the %llu left in "
                    "the file (truncated or corrupt)",
                    what, isprint(h[4]) ? h[4] : '?', isprint(h[5]) ? h[5] : '?',
                    isprint(h[6]) ? h[6] : '?', isprint(h[7]) ? h[7] : '?', (unsigned long)n,
                    (unsigned long long)(len - pos - 8));
      return -1;
    }
    if (!memcmp(h + 4, "IEND", 4)) break;
    pos += (size_t)n + 12;
  }
  return 0;
}

/* The channels libpng will hand out for this file under `mode`, after
 * setting up the conversions. */
static int png_setup(png_structp png, png_infop info, cnn_image_mode mode) {
  int color = png_get_color_type(png, info);
  png_set_expand(png); /* palette -> RGB, low-bit gray -> 8, tRNS -> alpha */
  png_set_scale_16(png);
  bool alpha = (color & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS);
  bool rgb = (color & PNG_COLOR_MASK_COLOR) != 0;
  if (mode == CNN_IMAGE_UNCHANGED) return (rgb ? 3 : 1) + alpha;
  if (mode != CNN_IMAGE_RGBA && alpha) png_set_strip_alpha(png);
  if (mode == CNN_IMAGE_GRAY) {
    if (rgb) png_set_rgb_to_gray_fixed(png, 1, 29900, 58700);
    return 1;
  }
  if (!rgb) png_set_gray_to_rgb(png);
  if (mode == CNN_IMAGE_RGBA && !alpha) png_set_add_alpha(png, 0xFF, PNG_FILLER_AFTER);
  return mode == CNN_IMAGE_RGBA ? 4 : 3;
}

/* Reads the whole image into out->px; 0, or -1 after a longjmp (the caller
 * frees whatever *rows and out->px hold). */
static int png_decode_rows(png_structp png, png_infop info, cnn_image_mode mode, cnn_image *out,
                           png_bytep **rows) {
  if (setjmp(png_jmpbuf(png))) return -1;
  png_source *s = png_get_io_ptr(png);
  png_set_user_limits(png, 1u << 20, 1u << 20);
  png_read_info(png, info);
  int c = png_setup(png, info, mode);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  int64_t h = png_get_image_height(png, info), w = png_get_image_width(png, info);
  if (check_size("png", s->what, h, w, c) < 0 || png_get_rowbytes(png, info) != (size_t)(w * c)) {
    if (png_get_rowbytes(png, info) != (size_t)(w * c))
      cnn_set_error("png: %s: unsupported pixel layout", s->what);
    return -1;
  }
  out->px = malloc((size_t)(h * w * c));
  *rows = malloc((size_t)h * sizeof **rows);
  if (!out->px || !*rows) {
    cnn_set_error("png: %s: out of memory (%lldx%lld image)", s->what, (long long)h, (long long)w);
    return -1;
  }
  for (int64_t y = 0; y < h; y++) (*rows)[y] = out->px + (size_t)(y * w * c);
  png_read_image(png, *rows);
  png_read_end(png, NULL);
  out->h = h, out->w = w, out->channels = c;
  return 0;
}

static int png_decode(const uint8_t *buf, size_t len, const char *what, cnn_image_mode mode,
                      cnn_image *out) {
  png_source src = {buf, len, 0, what};
  memset(out, 0, sizeof *out);
  if (png_chunks_fit(buf, len, what)) return -1;
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, on_read_error, on_read_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!info) {
    png_destroy_read_struct(&png, NULL, NULL);
    cnn_set_error("png: %s: out of memory", what);
    return -1;
  }
  png_set_read_fn(png, &src, on_read);
  png_bytep *rows = NULL;
  int rc = png_decode_rows(png, info, mode, out, &rows);
  free(rows);
  png_destroy_read_struct(&png, &info, NULL);
  if (rc < 0) {
    free(out->px);
    memset(out, 0, sizeof *out);
  }
  return rc;
}

/* ---- JPEG ------------------------------------------------------------------ */

static int jpeg_fail(tjhandle tj, const char *what, const char *reason) {
  cnn_set_error("jpeg: %s: %s", what, reason ? reason : tjGetErrorStr2(tj));
  if (tj) tjDestroy(tj);
  return -1;
}

static int jpeg_decode(const uint8_t *buf, size_t len, const char *what, cnn_image_mode mode,
                       cnn_image *out) {
  memset(out, 0, sizeof *out);
  if (len > 0xFFFFFFFFul) return jpeg_fail(NULL, what, "the file is larger than 4 GiB");
  tjhandle tj = tjInitDecompress();
  if (!tj) return jpeg_fail(NULL, what, "cannot start the decoder");
  int w, h, sub, space;
  if (tjDecompressHeader3(tj, buf, (unsigned long)len, &w, &h, &sub, &space) != 0)
    return jpeg_fail(tj, what, NULL);
  if (space == TJCS_CMYK || space == TJCS_YCCK)
    return jpeg_fail(tj, what, "CMYK JPEG is not supported");
  bool gray = mode == CNN_IMAGE_GRAY || (mode == CNN_IMAGE_UNCHANGED && space == TJCS_GRAY);
  int c = gray ? 1 : mode == CNN_IMAGE_RGBA ? 4 : 3;
  int pf = gray ? TJPF_GRAY : c == 4 ? TJPF_RGBA : TJPF_RGB;
  if (check_size("jpeg", what, h, w, c) < 0) return tjDestroy(tj), -1;
  out->px = malloc((size_t)h * (size_t)w * (size_t)c);
  if (!out->px) return jpeg_fail(tj, what, "out of memory");
  if (tjDecompress2(tj, buf, (unsigned long)len, out->px, w, 0, h, pf, TJFLAG_STOPONWARNING) != 0) {
    free(out->px);
    out->px = NULL;
    return jpeg_fail(tj, what, NULL);
  }
  tjDestroy(tj);
  out->h = h, out->w = w, out->channels = c;
  return 0;
}

/* ---- entry points ------------------------------------------------------------- */

int cnn_image_decode(const uint8_t *buf, size_t len, const char *what, cnn_image_mode mode,
                     cnn_image *out) {
  what = what ? what : "(memory)";
  if (!out || (!buf && len)) return cnn_set_error("image: %s: no data", what), -1;
  if (mode < CNN_IMAGE_UNCHANGED || mode > CNN_IMAGE_RGBA)
    return cnn_set_error("image: bad mode %d", (int)mode), -1;
  switch (cnn_image_sniff(buf, len)) {
  case CNN_IMAGE_PNG: return png_decode(buf, len, what, mode, out);
  case CNN_IMAGE_JPEG: return jpeg_decode(buf, len, what, mode, out);
  default:
    memset(out, 0, sizeof *out);
    cnn_set_error("image: %s: not a PNG or JPEG file%s", what, len ? "" : " (empty)");
    return -1;
  }
}

int cnn_image_load(const char *path, cnn_image_mode mode, cnn_image *out) {
  uint8_t *buf = NULL;
  size_t len = 0;
  if (cnn_io_read_raw("image", path, &buf, &len) < 0) return -1;
  int rc = cnn_image_decode(buf, len, path, mode, out);
  free(buf);
  return rc;
}

void cnn_image_free(cnn_image *img) {
  if (!img) return;
  free(img->px);
  img->px = NULL;
}

cnn_tensor *cnn_image_to_tensor(const cnn_image *img) {
  int64_t c = img->channels, hw = img->h * img->w;
  cnn_tensor *t = cnn_empty(3, (int64_t[]){c, img->h, img->w}, CNN_UINT8, CNN_DEVICE_CPU);
  if (!t) return NULL;
  uint8_t *dst = cnn_tensor_data(t);
  for (int64_t ch = 0; ch < c; ch++)
    for (int64_t i = 0; i < hw; i++) dst[ch * hw + i] = img->px[i * c + ch];
  return t;
}

/* ---- JPEG out (data.export_images) ---------------------------------------------- */

int cnn_jpeg_write(const char *path, int64_t h, int64_t w, int channels, const uint8_t *pixels,
                   int quality) {
  if (!path || !pixels) return cnn_set_error("jpeg: no %s", path ? "pixels" : "file name"), -1;
  if (channels != 1 && channels != 3)
    return cnn_set_error("jpeg: %d channels (expected 1 gray or 3 RGB)", channels), -1;
  if (h < 1 || w < 1 || h > 65535 || w > 65535)
    return cnn_set_error("jpeg: image size %lldx%lld is out of range (1..65535)", (long long)h,
                         (long long)w),
           -1;
  if (quality < 1 || quality > 100)
    return cnn_set_error("jpeg: quality %d is out of range (1..100)", quality), -1;
  tjhandle tj = tjInitCompress();
  unsigned char *out = NULL;
  unsigned long len = 0;
  int pf = channels == 1 ? TJPF_GRAY : TJPF_RGB, sub = channels == 1 ? TJSAMP_GRAY : TJSAMP_420;
  if (!tj || tjCompress2(tj, pixels, (int)w, 0, (int)h, pf, &out, &len, sub, quality, 0) != 0) {
    cnn_set_error("jpeg: cannot encode %s: %s", path, tj ? tjGetErrorStr2(tj) : "no encoder");
    if (tj) tjDestroy(tj);
    tjFree(out);
    return -1;
  }
  tjDestroy(tj);
  cnn_io_atomic a;
  int rc = cnn_io_atomic_open(&a, "jpeg", path);
  if (rc == 0 && cnn_io_atomic_write(&a, out, len) < 0)
    rc = -1;
  else if (rc == 0)
    rc = cnn_io_atomic_commit(&a);
  tjFree(out);
  return rc;
}
