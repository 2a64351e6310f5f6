/*
 * fuzz_safetensors.c -- libFuzzer harness for cnn_safetensors_parse
 * (core/io/safetensors.c).
 *
 * Any input gives either a tensor file whose tensors' bytes add up to at
 * most the input's size (the data section is tiled exactly; I32 widens to
 * 8 bytes), or NULL with a "safetensors: " message.  The fuzzer never
 * touches the disk.
 */
#include "cnn.h"
#include "io/io.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cnn_tensor_file *f = cnn_safetensors_parse(data, size, "fuzz");
  if (!f) {
    if (strncmp(cnn_error(), "safetensors: ", 13) != 0) abort();
    return 0;
  }
  size_t total = 0;
  for (int i = 0; i < f->ntensors; i++) {
    cnn_tensor *t = f->tensors[i].tensor;
    if (!t || !f->tensors[i].name) abort();
    total += (size_t)cnn_tensor_numel(t) * cnn_dtype_size(t->dtype);
  }
  if (total > 2 * size) abort();
  for (int i = 0; i < f->nmeta; i++)
    if (!f->meta[i].key || !f->meta[i].value) abort();
  cnn_tensor_file_free(f);
  return 0;
}
