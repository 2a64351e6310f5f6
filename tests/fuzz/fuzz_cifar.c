/*
 * fuzz_cifar.c -- libFuzzer harness for cnn_cifar10_parse (core/io/cifar.c).
 *
 * Any input gives either N x 3 x 32 x 32 images and N labels in 0..9 with
 * N = size / 3073, or -1 with a "cifar10: " message and untouched outputs.
 */
#include "cnn.h"
#include "io/io.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cnn_tensor *x = NULL, *y = NULL;
  if (cnn_cifar10_parse(data, size, "fuzz", &x, &y) != 0) {
    if (x || y || strncmp(cnn_error(), "cifar10: ", 9) != 0) abort();
    return 0;
  }
  int64_t n = (int64_t)(size / 3073);
  if (x->shape[0] != n || y->shape[0] != n || size % 3073) abort();
  const int64_t *l = cnn_tensor_data(y);
  for (int64_t i = 0; i < n; i++)
    if (l[i] < 0 || l[i] > 9 || l[i] != data[i * 3073]) abort();
  cnn_tensor_release(x);
  cnn_tensor_release(y);
  return 0;
}
