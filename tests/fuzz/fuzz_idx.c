/*
 * fuzz_idx.c -- libFuzzer harness for cnn_idx_parse (core/io/idx.c).
 *
 * Any input must give either a tensor whose bytes match what the input
 * holds after its header, or NULL with an "idx: " message; never a crash,
 * an out-of-bounds read (ASan) or undefined behaviour (UBSan).
 */
#include "cnn.h"
#include "io/io.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cnn_tensor *t = cnn_idx_parse(data, size, "fuzz");
  if (!t) {
    if (strncmp(cnn_error(), "idx: ", 5) != 0) abort();
    return 0;
  }
  size_t header = 4 + 4 * (size_t)t->ndim;
  int64_t n = cnn_tensor_numel(t);
  if (header > size || n < 0 || (size_t)n > size - header) abort();
  if (t->dtype == CNN_UINT8 && n && memcmp(cnn_tensor_data(t), data + header, (size_t)n) != 0)
    abort();
  cnn_tensor_release(t);
  return 0;
}
