/*
 * dtype.c -- element types and devices: names, parsing, printing (sizes and
 * device equality are inline in cnn.h).
 */
#include "cnn.h"

#include <stdio.h>
#include <string.h>

/* Sizes are cnn.h's cnn_dtype_size (inline). */
static const struct {
  const char *name;
  bool is_float;
} dtype_info[CNN_NDTYPES] = {
    [CNN_FLOAT32] = {"float32", true}, [CNN_FLOAT64] = {"float64", true},
    [CNN_INT64] = {"int64", false},    [CNN_UINT8] = {"uint8", false},
    [CNN_FLOAT16] = {"float16", true}, [CNN_BFLOAT16] = {"bfloat16", true},
};

/* Short aliases users of Torch7/PyTorch type. */
static const struct {
  const char *alias;
  cnn_dtype dtype;
} dtype_aliases[] = {
    {"float", CNN_FLOAT32}, {"double", CNN_FLOAT64}, {"long", CNN_INT64},
    {"byte", CNN_UINT8},    {"half", CNN_FLOAT16},   {"bf16", CNN_BFLOAT16},
};

const char *cnn_dtype_name(cnn_dtype dt) { return dt < CNN_NDTYPES ? dtype_info[dt].name : "?"; }
bool cnn_dtype_is_float(cnn_dtype dt) { return dt < CNN_NDTYPES && dtype_info[dt].is_float; }

int cnn_dtype_from_name(const char *name, cnn_dtype *out) {
  for (int i = 0; i < CNN_NDTYPES; i++)
    if (strcmp(name, dtype_info[i].name) == 0) return *out = (cnn_dtype)i, 0;
  for (size_t i = 0; i < sizeof dtype_aliases / sizeof dtype_aliases[0]; i++)
    if (strcmp(name, dtype_aliases[i].alias) == 0) return *out = dtype_aliases[i].dtype, 0;
  return -1;
}

const char *cnn_device_str(cnn_device d, char buf[32]) {
  if (d.type == CNN_CPU)
    snprintf(buf, 32, "cpu");
  else
    snprintf(buf, 32, "cuda:%d", d.index);
  return buf;
}
