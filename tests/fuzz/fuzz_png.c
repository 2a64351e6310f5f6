/*
 * fuzz_png.c -- libFuzzer harness for the PNG path of cnn_image_decode
 * (core/io/image.c), in every channel mode.
 *
 * Any input must give either an image whose size and channel count agree
 * with the mode and whose pixel buffer is fully readable, or -1 with an
 * "png: " or "image: " message and a zeroed result; never a crash, an
 * out-of-bounds read (ASan), a leak or undefined behaviour (UBSan).
 */
#include "cnn.h"
#include "io/io.h"

#include <stdlib.h>
#include <string.h>

static const int want_channels[4] = {0, 1, 3, 4}; /* per mode; 0: the file's */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  unsigned sum = 0;
  for (int mode = CNN_IMAGE_UNCHANGED; mode <= CNN_IMAGE_RGBA; mode++) {
    cnn_image img;
    if (cnn_image_decode(data, size, "fuzz", (cnn_image_mode)mode, &img) < 0) {
      const char *e = cnn_error();
      if (strncmp(e, "png: ", 3 + 2) != 0 && strncmp(e, "image: ", 7) != 0) abort();
      if (img.px || img.h || img.w) abort();
      continue;
    }
    if (cnn_image_sniff(data, size) != CNN_IMAGE_PNG) abort();
    if (img.h < 1 || img.w < 1 || img.channels < 1 || img.channels > 4 || !img.px) abort();
    if (want_channels[mode] && img.channels != want_channels[mode]) abort();
    size_t n = (size_t)(img.h * img.w * img.channels);
    for (size_t i = 0; i < n; i++) sum += img.px[i]; /* every byte is readable */
    cnn_image_free(&img);
  }
  return (int)(sum & 0);
}
