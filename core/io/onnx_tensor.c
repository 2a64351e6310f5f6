/*
 * onnx_tensor.c -- ONNX TensorProto <-> cnn_tensor, and the reader of a
 * serialized TensorProto file (the node tests' input_0.pb / output_0.pb).
 *
 * A TensorProto holds its elements either as raw little-endian bytes
 * (raw_data) or in one typed repeated field (float_data, int32_data for
 * every type of 32 bits or less, int64_data, double_data, uint64_data).
 * Reading validates in order: the data type (one cnnsh can hold), no
 * external data or segments, the dims (at most CNN_MAX_DIMS, none
 * negative, a representable size), then that the byte or element count
 * matches the dims exactly; only then is the tensor allocated and each
 * element converted.  Writing always uses raw_data.  Both sides assume a
 * little-endian host, as safetensors.c does.
 */
#include "onnx_internal.h"

#include <stdlib.h>
#include <string.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "onnx_tensor.c assumes a little-endian host (raw_data's byte order)"
#endif

/* element kinds of the file: how an element is decoded */
typedef enum { K_FLOAT, K_SINT, K_UINT, K_HALF } elem_kind;

typedef struct {
  int onnx;         /* TensorProto.DataType */
  const char *name; /* for messages */
  cnn_dtype dtype;  /* what cnnsh holds it as */
  int size;         /* bytes per element in raw_data */
  elem_kind kind;
} onnx_dtype;

static const onnx_dtype onnx_dtypes[] = {
    {1, "FLOAT", CNN_FLOAT32, 4, K_FLOAT},     {2, "UINT8", CNN_UINT8, 1, K_UINT},
    {3, "INT8", CNN_INT64, 1, K_SINT},         {4, "UINT16", CNN_INT64, 2, K_UINT},
    {5, "INT16", CNN_INT64, 2, K_SINT},        {6, "INT32", CNN_INT64, 4, K_SINT},
    {7, "INT64", CNN_INT64, 8, K_SINT},        {9, "BOOL", CNN_UINT8, 1, K_UINT},
    {10, "FLOAT16", CNN_FLOAT16, 2, K_HALF},   {11, "DOUBLE", CNN_FLOAT64, 8, K_FLOAT},
    {12, "UINT32", CNN_INT64, 4, K_UINT},      {13, "UINT64", CNN_INT64, 8, K_UINT},
    {16, "BFLOAT16", CNN_BFLOAT16, 2, K_HALF},
};

static const onnx_dtype *find_dtype(int onnx) {
  for (size_t i = 0; i < sizeof onnx_dtypes / sizeof onnx_dtypes[0]; i++)
    if (onnx_dtypes[i].onnx == onnx) return &onnx_dtypes[i];
  return NULL;
}

int cnn_onnx_elem_type(cnn_dtype dt) {
  switch (dt) {
  case CNN_FLOAT32: return 1;
  case CNN_FLOAT64: return 11;
  case CNN_INT64: return 7;
  case CNN_UINT8: return 2;
  case CNN_FLOAT16: return 10;
  case CNN_BFLOAT16: return 16;
  default: return 0;
  }
}

/* ---- reading ----------------------------------------------------------------- */

/* Where the elements are: raw bytes, or one typed array of `count` entries. */
typedef struct {
  const uint8_t *raw; /* raw_data, or NULL */
  const float *f;
  const int32_t *i32;
  const int64_t *i64;
  const double *d;
  const uint64_t *u64;
  size_t count; /* elements (typed) or bytes (raw) */
} elem_source;

static const char *tensor_label(const Onnx__TensorProto *p) {
  return p->name && *p->name ? p->name : "(unnamed)";
}

/* The typed field that holds this data type's elements (the spec's pairing). */
static void typed_source(const Onnx__TensorProto *p, const onnx_dtype *dt, elem_source *s) {
  switch (dt->onnx) {
  case 1: s->f = p->float_data, s->count = p->n_float_data; break;
  case 7: s->i64 = p->int64_data, s->count = p->n_int64_data; break;
  case 11: s->d = p->double_data, s->count = p->n_double_data; break;
  case 12:
  case 13: s->u64 = p->uint64_data, s->count = p->n_uint64_data; break;
  default: s->i32 = p->int32_data, s->count = p->n_int32_data; break;
  }
}

static int check_layout(const Onnx__TensorProto *p, const char *what) {
  if ((p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) ||
      p->n_external_data) {
    cnn_set_error("onnx: %s: tensor '%s' keeps its data in an external file (not supported)", what,
                  tensor_label(p));
    return -1;
  }
  if (p->segment) {
    cnn_set_error("onnx: %s: tensor '%s' is a segment of a larger tensor (not supported)", what,
                  tensor_label(p));
    return -1;
  }
  if (p->n_dims > CNN_MAX_DIMS) {
    cnn_set_error("onnx: %s: tensor '%s' has %zu dims (cnnsh holds at most %d)", what,
                  tensor_label(p), p->n_dims, CNN_MAX_DIMS);
    return -1;
  }
  if (!cnn_io_shape_ok((int)p->n_dims, p->dims)) {
    cnn_set_error("onnx: %s: tensor '%s' has a negative or absurd size", what, tensor_label(p));
    return -1;
  }
  return 0;
}

/* The data's source, checked against numel. */
static int find_source(const Onnx__TensorProto *p, const onnx_dtype *dt, int64_t numel,
                       const char *what, elem_source *s) {
  memset(s, 0, sizeof *s);
  if (p->has_raw_data) {
    s->raw = p->raw_data.data, s->count = p->raw_data.len;
    if (s->count / dt->size != (size_t)numel || s->count % dt->size) {
      cnn_set_error(
          "onnx: %s: tensor '%s' (%s, %lld elements) has %zu bytes of raw data, expected %lld",
          what, tensor_label(p), dt->name, (long long)numel, s->count, (long long)numel * dt->size);
      return -1;
    }
    return 0;
  }
  typed_source(p, dt, s);
  if (s->count != (size_t)numel) {
    cnn_set_error("onnx: %s: tensor '%s' (%s) holds %zu values for %lld elements", what,
                  tensor_label(p), dt->name, s->count, (long long)numel);
    return -1;
  }
  return 0;
}

/* Element k of a raw buffer, widened. */
static void raw_elem(const uint8_t *src, const onnx_dtype *dt, int64_t k, double *d, int64_t *i) {
  const uint8_t *e = src + k * dt->size;
  uint64_t bits = 0;
  memcpy(&bits, e, dt->size);
  if (dt->kind == K_FLOAT) {
    if (dt->size == 4) {
      float f;
      memcpy(&f, e, 4);
      *d = f;
    } else {
      memcpy(d, e, 8);
    }
    return;
  }
  if (dt->kind == K_SINT && dt->size < 8) {
    int shift = 64 - 8 * dt->size; /* sign-extend */
    *i = (int64_t)(bits << shift) >> shift;
  } else {
    *i = (int64_t)bits;
  }
  *d = (double)*i;
}

/* d as an integer without undefined behaviour: NaN is 0, values beyond
 * int64's range saturate (only float sources reach here, and their integer
 * side is used only if a malformed file pairs float data with an integer
 * data type). */
static int64_t double_to_i64(double d) {
  if (d != d) return 0;
  if (d >= 9223372036854775807.0) return INT64_MAX;
  if (d <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)d;
}

/* Element k as (double, integer) from whichever source holds it. */
static void source_elem(const elem_source *s, const onnx_dtype *dt, int64_t k, double *d,
                        int64_t *i) {
  *d = 0, *i = 0;
  if (s->raw) return raw_elem(s->raw, dt, k, d, i);
  if (s->f)
    *d = s->f[k], *i = double_to_i64(*d);
  else if (s->d)
    *d = s->d[k], *i = double_to_i64(*d);
  else if (s->i64)
    *i = s->i64[k], *d = (double)*i;
  else if (s->u64)
    *i = (int64_t)s->u64[k], *d = (double)*i;
  else
    *i = s->i32[k], *d = (double)*i;
}

static void store_elem(cnn_tensor *t, int64_t k, const onnx_dtype *dt, double d, int64_t i) {
  void *base = cnn_tensor_data(t);
  switch (t->dtype) {
  case CNN_FLOAT32: ((float *)base)[k] = (float)d; break;
  case CNN_FLOAT64: ((double *)base)[k] = d; break;
  case CNN_INT64: ((int64_t *)base)[k] = i; break;
  case CNN_UINT8: ((uint8_t *)base)[k] = dt->onnx == 9 ? (i != 0) : (uint8_t)i; break;
  case CNN_FLOAT16:
  case CNN_BFLOAT16: ((uint16_t *)base)[k] = (uint16_t)i; break; /* the bits */
  default: break;
  }
}

cnn_tensor *cnn_onnx_tensor_from_proto(const Onnx__TensorProto *p, const char *what) {
  const onnx_dtype *dt = p->has_data_type ? find_dtype(p->data_type) : NULL;
  if (!dt) {
    cnn_set_error("onnx: %s: tensor '%s' has data type %d, which cnnsh cannot hold (float, double, "
                  "float16, bfloat16, integers and bool can)",
                  what, tensor_label(p), p->has_data_type ? (int)p->data_type : 0);
    return NULL;
  }
  if (check_layout(p, what) < 0) return NULL;
  int64_t numel = 1;
  for (size_t d = 0; d < p->n_dims; d++) numel *= p->dims[d];
  elem_source src;
  if (find_source(p, dt, numel, what, &src) < 0) return NULL;
  cnn_tensor *t = cnn_empty((int)p->n_dims, p->dims, dt->dtype, CNN_DEVICE_CPU);
  if (!t) return NULL;
  for (int64_t k = 0; k < numel; k++) {
    double d;
    int64_t i;
    source_elem(&src, dt, k, &d, &i);
    store_elem(t, k, dt, d, i);
  }
  return t;
}

cnn_tensor *cnn_onnx_tensor_parse(const uint8_t *buf, size_t len, const char *what) {
  Onnx__TensorProto *p = cnn_onnx_nesting_ok(buf, len, &onnx__tensor_proto__descriptor)
                             ? onnx__tensor_proto__unpack(NULL, len, buf)
                             : NULL;
  if (!p) {
    cnn_set_error("onnx: %s: not a valid TensorProto (protobuf decoding failed)", what);
    return NULL;
  }
  cnn_tensor *t = cnn_onnx_tensor_from_proto(p, what);
  onnx__tensor_proto__free_unpacked(p, NULL);
  return t;
}

cnn_tensor *cnn_onnx_tensor_load(const char *path) {
  uint8_t *buf;
  size_t len;
  if (cnn_io_read_file("onnx", path, &buf, &len) < 0) return NULL;
  cnn_tensor *t = cnn_onnx_tensor_parse(buf, len, path);
  free(buf);
  return t;
}

/* ---- writing ------------------------------------------------------------------- */

int cnn_onnx_tensor_to_proto(cnn_tensor *t, const char *name, Onnx__TensorProto *p,
                             cnn_tensor **keep) {
  *keep = NULL;
  cnn_tensor *host = cnn_to_device(t, CNN_DEVICE_CPU);
  if (!host) return -1;
  cnn_tensor *c = cnn_contiguous(host);
  cnn_tensor_release(host);
  if (!c) return -1;
  *keep = c;
  p->name = (char *)name;
  p->n_dims = (size_t)c->ndim;
  p->dims = c->shape;
  p->has_data_type = 1;
  p->data_type = cnn_onnx_elem_type(c->dtype);
  p->has_raw_data = 1;
  p->raw_data.data = cnn_tensor_data(c);
  p->raw_data.len = cnn_tensor_nbytes(c);
  return 0;
}
