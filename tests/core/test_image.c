/*
 * test_image.c -- PNG and JPEG decoding (core/io/image.c).
 *
 * Evidence, none of it from the decoder's own path: the PNG seeds of the
 * fuzzer (tests/fuzz/corpus/png, written byte by byte by a Python script
 * with zlib) hold pixels given by a formula, px(x, y, c) = (50x + 20y +
 * 70c) mod 256, and each is decoded in every mode and compared with the
 * formula and the documented conversions (gray replication, alpha 255,
 * 16-bit rounding, palette + tRNS, 1-bit gray, Adam7 interlacing).  JPEG:
 * an image encoded by TurboJPEG at quality 100 without subsampling decodes
 * within 3 levels of the original.  Bad input: empty, junk, truncated and
 * corrupt PNG/JPEG, absurd sizes, a chunk longer than the file, a missing
 * file -- each an error naming the file, with nothing allocated.
 */
#include "check.h"
#include "cnn.h"
#include "io/io.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <turbojpeg.h>

static char corpus[1024];

static int px(int x, int y, int c) { return (x * 50 + y * 20 + c * 70) % 256; }

static uint8_t *slurp(const char *name, size_t *len) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", corpus, name);
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL);
  if (!f) return NULL;
  uint8_t *b = malloc(1 << 16);
  *len = fread(b, 1, 1 << 16, f);
  fclose(f);
  return b;
}

static int decode(const char *name, cnn_image_mode mode, cnn_image *img) {
  size_t len;
  uint8_t *b = slurp(name, &len);
  int rc = b ? cnn_image_decode(b, len, name, mode, img) : -1;
  if (rc < 0) fprintf(stderr, "%s: %s\n", name, cnn_error());
  free(b);
  return rc;
}

static uint8_t at(const cnn_image *img, int x, int y, int c) {
  return img->px[((int64_t)y * img->w + x) * img->channels + c];
}

static int gray_of(int r, int g, int b) {
  return (int)((r * 29900 + g * 58700 + b * 11400 + 50000) / 100000);
}

/* rgb8.png: every mode against the formula */
static void test_rgb_modes(void) {
  cnn_image img;
  static const int want[4] = {3, 1, 3, 4};
  for (int mode = 0; mode < 4; mode++) {
    CHECK(decode("rgb8.png", (cnn_image_mode)mode, &img) == 0);
    CHECK(img.h == 3 && img.w == 5 && img.channels == want[mode]);
    for (int y = 0; y < 3; y++)
      for (int x = 0; x < 5; x++) {
        if (mode == CNN_IMAGE_GRAY) {
          CHECK(abs(at(&img, x, y, 0) - gray_of(px(x, y, 0), px(x, y, 1), px(x, y, 2))) <= 1);
          continue;
        }
        for (int c = 0; c < 3; c++) CHECK(at(&img, x, y, c) == px(x, y, c));
        if (mode == CNN_IMAGE_RGBA) CHECK(at(&img, x, y, 3) == 255);
      }
    cnn_image_free(&img);
  }
}

/* gray8 -> rgb replicates; rgba8 -> rgb drops alpha; ga8 unchanged keeps 2 */
static void test_gray_alpha(void) {
  cnn_image img;
  CHECK(decode("gray8.png", CNN_IMAGE_RGB, &img) == 0 && img.channels == 3);
  for (int c = 0; c < 3; c++) CHECK(at(&img, 4, 2, c) == px(4, 2, 0));
  cnn_image_free(&img);
  CHECK(decode("rgba8.png", CNN_IMAGE_UNCHANGED, &img) == 0 && img.channels == 4);
  CHECK(at(&img, 3, 1, 3) == px(3, 1, 3));
  cnn_image_free(&img);
  CHECK(decode("rgba8.png", CNN_IMAGE_RGB, &img) == 0 && img.channels == 3);
  CHECK(at(&img, 3, 1, 2) == px(3, 1, 2));
  cnn_image_free(&img);
  CHECK(decode("ga8.png", CNN_IMAGE_UNCHANGED, &img) == 0 && img.channels == 2);
  CHECK(at(&img, 2, 2, 0) == px(2, 2, 0) && at(&img, 2, 2, 1) == px(2, 2, 1));
  cnn_image_free(&img);
  CHECK(decode("ga8.png", CNN_IMAGE_GRAY, &img) == 0 && img.channels == 1 &&
        at(&img, 1, 0, 0) == px(1, 0, 0));
  cnn_image_free(&img);
}

/* 16-bit: v16 = 257 * v8 + c (rgb16) and 256 * v8 + 128 (gray16), both
 * round to v8 or v8 + 1 by v * 255 / 65535 */
static void test_16bit(void) {
  cnn_image img;
  CHECK(decode("rgb16.png", CNN_IMAGE_UNCHANGED, &img) == 0 && img.channels == 3);
  for (int x = 0; x < 5; x++)
    for (int c = 0; c < 3; c++) {
      int v16 = px(x, 1, c) * 257 + c;
      CHECK(at(&img, x, 1, c) == (v16 * 255 + 32767) / 65535);
    }
  cnn_image_free(&img);
  CHECK(decode("gray16.png", CNN_IMAGE_UNCHANGED, &img) == 0 && img.channels == 1);
  int v16 = px(3, 2, 0) * 256 + 128;
  CHECK(at(&img, 3, 2, 0) == (v16 * 255 + 32767) / 65535);
  cnn_image_free(&img);
}

/* palette {black, red, green, blue} with tRNS {255, 128}; index (x+y)%4 */
static void test_palette_and_bits(void) {
  static const uint8_t pal[4][4] = {
      {0, 0, 0, 255}, {255, 0, 0, 128}, {0, 255, 0, 255}, {0, 0, 255, 255}};
  cnn_image img;
  CHECK(decode("pal.png", CNN_IMAGE_UNCHANGED, &img) == 0 && img.channels == 4);
  for (int y = 0; y < 3; y++)
    for (int x = 0; x < 5; x++)
      for (int c = 0; c < 4; c++) CHECK(at(&img, x, y, c) == pal[(x + y) % 4][c]);
  cnn_image_free(&img);
  CHECK(decode("gray1.png", CNN_IMAGE_UNCHANGED, &img) == 0 && img.w == 8 && img.h == 2);
  static const uint8_t rows[2] = {0xB1, 0x4E};
  for (int y = 0; y < 2; y++)
    for (int x = 0; x < 8; x++) CHECK(at(&img, x, y, 0) == ((rows[y] >> (7 - x)) & 1 ? 255 : 0));
  cnn_image_free(&img);
  CHECK(decode("interlaced.png", CNN_IMAGE_UNCHANGED, &img) == 0 && img.w == 9 && img.h == 9);
  for (int y = 0; y < 9; y++)
    for (int x = 0; x < 9; x++) CHECK(at(&img, x, y, 0) == (x * 25 + y * 3) % 256);
  cnn_image_free(&img);
}

static uint8_t *encode_jpeg(const uint8_t *rgb, int w, int h, int pf, unsigned long *len) {
  tjhandle tj = tjInitCompress();
  uint8_t *out = NULL;
  int sub = pf == TJPF_GRAY ? TJSAMP_GRAY : TJSAMP_444;
  CHECK(tj && tjCompress2(tj, rgb, w, 0, h, pf, &out, len, sub, 100, 0) == 0);
  tjDestroy(tj);
  return out;
}

static void test_jpeg(void) {
  enum { W = 24, H = 16 };
  uint8_t rgb[W * H * 3];
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++)
      for (int c = 0; c < 3; c++) rgb[(y * W + x) * 3 + c] = (uint8_t)(40 + x * 6 + y * 4 + c * 20);
  unsigned long len;
  uint8_t *jpg = encode_jpeg(rgb, W, H, TJPF_RGB, &len);
  cnn_image img;
  CHECK(cnn_image_decode(jpg, len, "a.jpg", CNN_IMAGE_UNCHANGED, &img) == 0);
  CHECK(img.w == W && img.h == H && img.channels == 3);
  int worst = 0;
  for (int i = 0; i < W * H * 3 && img.px; i++)
    worst = abs(img.px[i] - rgb[i]) > worst ? abs(img.px[i] - rgb[i]) : worst;
  CHECK(worst <= 3);
  cnn_image_free(&img);
  CHECK(cnn_image_decode(jpg, len, "a.jpg", CNN_IMAGE_GRAY, &img) == 0 && img.channels == 1);
  CHECK(abs(at(&img, 5, 7, 0) - gray_of(rgb[(7 * W + 5) * 3], rgb[(7 * W + 5) * 3 + 1],
                                        rgb[(7 * W + 5) * 3 + 2])) <= 3);
  cnn_image_free(&img);
  /* truncated: an error naming the file, never a gray-filled image */
  CHECK(cnn_image_decode(jpg, len * 2 / 3, "cut.jpg", CNN_IMAGE_RGB, &img) < 0);
  CHECK(strstr(cnn_error(), "jpeg: cut.jpg") != NULL && img.px == NULL);
  memset(jpg + 20, 0x55, 40); /* corrupt tables */
  CHECK(cnn_image_decode(jpg, len, "bad.jpg", CNN_IMAGE_RGB, &img) < 0 &&
        strstr(cnn_error(), "bad.jpg"));
  tjFree(jpg);
  uint8_t gray[W * H];
  for (int i = 0; i < W * H; i++) gray[i] = (uint8_t)(i * 7);
  jpg = encode_jpeg(gray, W, H, TJPF_GRAY, &len);
  CHECK(cnn_image_decode(jpg, len, "g.jpg", CNN_IMAGE_UNCHANGED, &img) == 0 && img.channels == 1);
  cnn_image_free(&img);
  CHECK(cnn_image_decode(jpg, len, "g.jpg", CNN_IMAGE_RGB, &img) == 0 && img.channels == 3);
  CHECK(img.px && img.px[30] == img.px[31] && img.px[31] == img.px[32]);
  cnn_image_free(&img);
  tjFree(jpg);
}

static long peak_rss_kb(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

/* A chunk declaring more bytes than the file holds is refused before
 * libpng allocates the declared length.  chunk_past_end.png is fuzz_png's
 * find: a 5x3 palette IHDR, an unknown chunk, then an sPLT chunk declaring
 * 0x73737373 bytes with one in the file -- libpng allocated and zeroed
 * 1.9 GB for it. */
static void test_chunk_past_end(void) {
  size_t len;
  uint8_t *b = slurp("chunk_past_end.png", &len);
  long before = peak_rss_kb();
  for (int mode = CNN_IMAGE_UNCHANGED; b && mode <= CNN_IMAGE_RGBA; mode++) {
    cnn_image img;
    CHECK(cnn_image_decode(b, len, "long.png", (cnn_image_mode)mode, &img) < 0 && !img.px);
    CHECK(strstr(cnn_error(), "png: long.png: chunk 'sPLT' declares 1936946035 bytes") != NULL);
  }
  CHECK(peak_rss_kb() - before < 64 << 10); /* under 64 MB more at the peak */
  free(b);
}

static void test_bad_input(void) {
  cnn_image img;
  CHECK(cnn_image_decode((const uint8_t *)"", 0, "empty.png", CNN_IMAGE_RGB, &img) < 0);
  CHECK(strstr(cnn_error(), "empty.png: not a PNG or JPEG file") != NULL);
  CHECK(cnn_image_decode((const uint8_t *)"hello world", 11, "t.txt", CNN_IMAGE_RGB, &img) < 0 &&
        strstr(cnn_error(), "t.txt"));
  size_t len;
  uint8_t *b = slurp("rgb8.png", &len);
  for (size_t cut = 8; b && cut < len; cut += 7) {
    CHECK(cnn_image_decode(b, cut, "cut.png", CNN_IMAGE_RGB, &img) < 0);
    CHECK(strncmp(cnn_error(), "png: cut.png: ", 14) == 0 && img.px == NULL);
  }
  if (b) {
    b[len - 20] ^= 0xFF; /* inside IDAT: CRC or zlib error */
    CHECK(cnn_image_decode(b, len, "crc.png", CNN_IMAGE_RGB, &img) < 0 &&
          strstr(cnn_error(), "crc.png"));
    b[len - 20] ^= 0xFF;
    b[16] = 0x7F, b[17] = 0xFF; /* width 2^31-ish: refused before allocation */
    CHECK(cnn_image_decode(b, len, "huge.png", CNN_IMAGE_RGB, &img) < 0 &&
          strstr(cnn_error(), "huge.png"));
  }
  free(b);
  CHECK(cnn_image_load("/no/such/dir/x.png", CNN_IMAGE_RGB, &img) < 0 &&
        strstr(cnn_error(), "/no/such/dir/x.png"));
  CHECK(cnn_image_load("/", CNN_IMAGE_RGB, &img) < 0 && strstr(cnn_error(), "folder"));
}

int main(void) {
  snprintf(corpus, sizeof corpus, "%s", __FILE__);
  char *slash = strrchr(corpus, '/');
  snprintf(slash ? slash + 1 : corpus, sizeof corpus - (size_t)(slash ? slash + 1 - corpus : 0),
           "../fuzz/corpus/png");
  test_rgb_modes();
  test_gray_alpha();
  test_16bit();
  test_palette_and_bits();
  test_jpeg();
  test_bad_input();
  test_chunk_past_end();
  return check_report("test_image");
}
