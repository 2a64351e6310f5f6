/*
 * fuzz_image.c -- libFuzzer harness for cnn_image_decode (core/io/image.c),
 * in every channel mode.  Built twice, as fuzz_png and fuzz_jpeg: the same
 * harness, started from the PNG or the JPEG seed corpus (mutations may
 * turn one format into the other; both paths are checked either way).
 *
 * Any input must give either an image whose size and channel count agree
 * with the mode and whose pixel buffer is fully readable, or -1 with a
 * "png: ", "jpeg: " or "image: " message and a zeroed result; never a
 * crash, an out-of-bounds read (ASan), a leak or undefined behaviour.
 */
#include "cnn.h"
#include "io/io.h"

#include <stdlib.h>
#include <string.h>

static const int want_channels[4] = {0, 1, 3, 4}; /* per mode; 0: the file's */

static int known_prefix(const char *e) {
  return strncmp(e, "png: ", 5) == 0 || strncmp(e, "jpeg: ", 6) == 0 ||
         strncmp(e, "image: ", 7) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  unsigned sum = 0;
  for (int mode = CNN_IMAGE_UNCHANGED; mode <= CNN_IMAGE_RGBA; mode++) {
    cnn_image img;
    if (cnn_image_decode(data, size, "fuzz", (cnn_image_mode)mode, &img) < 0) {
      if (!known_prefix(cnn_error()) || img.px || img.h || img.w) abort();
      continue;
    }
    if (cnn_image_sniff(data, size) == CNN_IMAGE_UNKNOWN) abort();
    if (img.h < 1 || img.w < 1 || img.channels < 1 || img.channels > 4 || !img.px) abort();
    if (want_channels[mode] && img.channels != want_channels[mode]) abort();
    size_t n = (size_t)(img.h * img.w * img.channels);
    for (size_t i = 0; i < n; i++) sum += img.px[i]; /* every byte is readable */
    cnn_image_free(&img);
  }
  return (int)(sum & 0);
}
