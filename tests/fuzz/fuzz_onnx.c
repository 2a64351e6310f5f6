/*
 * fuzz_onnx.c -- libFuzzer harness for the ONNX readers (core/io/onnx_*.c):
 * cnn_onnx_parse (a ModelProto) and cnn_onnx_tensor_parse (a TensorProto)
 * on the same bytes.
 *
 * Any input gives either a model whose every node has an op_type, every
 * initializer a name and a tensor no larger than twice the input (raw data
 * is copied; packed values widen at most 8x... so the bound is 8x), or NULL
 * with an "onnx: " message.  The fuzzer never touches the disk.
 */
#include "cnn.h"
#include "io/io.h"

#include <stdlib.h>
#include <string.h>

static void check_model(const cnn_onnx_model *m, size_t size) {
  size_t total = 0;
  for (int i = 0; i < m->nnodes; i++)
    if (!m->nodes[i].op_type || !*m->nodes[i].op_type) abort();
  for (int i = 0; i < m->ninits; i++) {
    const cnn_tensor *t = m->inits[i].tensor;
    if (!t || !m->inits[i].name) abort();
    total += (size_t)cnn_tensor_numel(t) * cnn_dtype_size(t->dtype);
  }
  if (total > 8 * size + 64) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cnn_onnx_model *m = cnn_onnx_parse(data, size, "fuzz");
  if (m)
    check_model(m, size);
  else if (strncmp(cnn_error(), "onnx: ", 6) != 0)
    abort();
  cnn_onnx_model_free(m);
  cnn_tensor *t = cnn_onnx_tensor_parse(data, size, "fuzz");
  if (t) {
    if ((size_t)cnn_tensor_numel(t) * cnn_dtype_size(t->dtype) > 8 * size + 64) abort();
    cnn_tensor_release(t);
  } else if (strncmp(cnn_error(), "onnx: ", 6) != 0) {
    abort();
  }
  return 0;
}
