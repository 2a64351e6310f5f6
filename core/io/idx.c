/*
 * idx.c -- the IDX format of MNIST and Fashion-MNIST.
 *
 * Layout: bytes 0..1 are zero, byte 2 the element type, byte 3 the number
 * of dimensions d (1..8), then d big-endian u32 sizes, then the elements,
 * big-endian, row-major.  The parser checks the magic, the type, d, the
 * product of the sizes (overflow) and that the data is exactly as long as
 * the header says, all before allocating the tensor; nothing is read past
 * `len`.  Signed integer types widen to int64 (cnn has no int8/16/32).
 */
#include "io_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  uint8_t code;
  int size;        /* bytes per element in the file */
  cnn_dtype dtype; /* tensor dtype */
  const char *name;
} idx_type;

static const idx_type idx_types[] = {
    {0x08, 1, CNN_UINT8, "unsigned byte"}, {0x09, 1, CNN_INT64, "signed byte"},
    {0x0B, 2, CNN_INT64, "short"},         {0x0C, 4, CNN_INT64, "int"},
    {0x0D, 4, CNN_FLOAT32, "float"},       {0x0E, 8, CNN_FLOAT64, "double"},
};

static const idx_type *find_type(uint8_t code) {
  for (size_t i = 0; i < sizeof idx_types / sizeof idx_types[0]; i++)
    if (idx_types[i].code == code) return &idx_types[i];
  return NULL;
}

typedef struct {
  const idx_type *type;
  int ndim;
  int64_t shape[CNN_MAX_DIMS];
  size_t header; /* bytes before the data */
  size_t nbytes; /* bytes of data the header announces */
} idx_header;

static int check_magic(const uint8_t *buf, size_t len, const char *what, idx_header *h) {
  if (len < 4) {
    cnn_set_error("idx: %s is truncated: %zu bytes, too short for the 4-byte magic number", what,
                  len);
    return -1;
  }
  if (buf[0] != 0 || buf[1] != 0) {
    cnn_set_error("idx: %s is not an IDX file (magic number %02x %02x %02x %02x; "
                  "expected 00 00 <type> <ndims>)",
                  what, buf[0], buf[1], buf[2], buf[3]);
    return -1;
  }
  if (!(h->type = find_type(buf[2]))) {
    cnn_set_error("idx: %s has unknown element type 0x%02x (expected 08, 09, 0B, 0C, 0D or 0E)",
                  what, buf[2]);
    return -1;
  }
  h->ndim = buf[3];
  if (h->ndim < 1 || h->ndim > CNN_MAX_DIMS) {
    cnn_set_error("idx: %s has %d dimensions (expected 1..%d)", what, h->ndim, CNN_MAX_DIMS);
    return -1;
  }
  return 0;
}

static int read_header(const uint8_t *buf, size_t len, const char *what, idx_header *h) {
  if (check_magic(buf, len, what, h) < 0) return -1;
  h->header = 4 + 4 * (size_t)h->ndim;
  if (len < h->header) {
    cnn_set_error(
        "idx: %s is truncated: %d dimensions need a %zu-byte header but the file has %zu bytes",
        what, h->ndim, h->header, len);
    return -1;
  }
  uint64_t count = 1;
  bool overflow = false;
  for (int i = 0; i < h->ndim; i++) {
    h->shape[i] = cnn_io_be32(buf + 4 + 4 * i);
    overflow |= __builtin_mul_overflow(count, (uint64_t)h->shape[i], &count);
  }
  uint64_t nbytes;
  overflow |= __builtin_mul_overflow(count, (uint64_t)h->type->size, &nbytes);
  char sh[CNN_SHAPE_STR];
  if (overflow || nbytes > (uint64_t)INT64_MAX || nbytes > SIZE_MAX ||
      !cnn_io_shape_ok(h->ndim, h->shape)) {
    cnn_set_error("idx: %s: header says %s, too many elements", what,
                  cnn_shape_str(h->ndim, h->shape, sh));
    return -1;
  }
  h->nbytes = (size_t)nbytes;
  size_t have = len - h->header;
  if (have < h->nbytes) {
    cnn_set_error("idx: %s is truncated: header says %s (%zu bytes of data) but the file has %zu",
                  what, cnn_shape_str(h->ndim, h->shape, sh), h->nbytes, have);
    return -1;
  }
  if (have > h->nbytes) {
    cnn_set_error("idx: %s has %zu bytes after the data: header says %s (%zu bytes of data)", what,
                  have - h->nbytes, cnn_shape_str(h->ndim, h->shape, sh), h->nbytes);
    return -1;
  }
  return 0;
}

/* big-endian file elements -> native tensor elements */
static void convert(const idx_type *t, const uint8_t *src, void *dst, int64_t n) {
  if (n == 0) return;
  switch (t->code) {
  case 0x08: memcpy(dst, src, (size_t)n); break;
  case 0x09:
    for (int64_t i = 0; i < n; i++) ((int64_t *)dst)[i] = (int8_t)src[i];
    break;
  case 0x0B:
    for (int64_t i = 0; i < n; i++)
      ((int64_t *)dst)[i] = (int16_t)((uint16_t)src[2 * i] << 8 | src[2 * i + 1]);
    break;
  case 0x0C:
    for (int64_t i = 0; i < n; i++) ((int64_t *)dst)[i] = (int32_t)cnn_io_be32(src + 4 * i);
    break;
  case 0x0D:
    for (int64_t i = 0; i < n; i++) {
      uint32_t u = cnn_io_be32(src + 4 * i);
      memcpy((float *)dst + i, &u, 4);
    }
    break;
  case 0x0E:
    for (int64_t i = 0; i < n; i++) {
      uint64_t u = (uint64_t)cnn_io_be32(src + 8 * i) << 32 | cnn_io_be32(src + 8 * i + 4);
      memcpy((double *)dst + i, &u, 8);
    }
    break;
  }
}

cnn_tensor *cnn_idx_parse(const uint8_t *buf, size_t len, const char *what) {
  idx_header h;
  if (!what) what = "buffer";
  if (!buf && len) {
    cnn_set_error("idx: %s: no data", what);
    return NULL;
  }
  if (read_header(buf, len, what, &h) < 0) return NULL;
  cnn_tensor *t = cnn_empty(h.ndim, h.shape, h.type->dtype, CNN_DEVICE_CPU);
  if (!t) return NULL;
  convert(h.type, buf + h.header, cnn_tensor_data(t), cnn_tensor_numel(t));
  return t;
}

cnn_tensor *cnn_idx_load(const char *path) {
  uint8_t *buf;
  size_t len;
  if (!path) {
    cnn_set_error("idx: no file name");
    return NULL;
  }
  if (cnn_io_read_file("idx", path, &buf, &len) < 0) return NULL;
  cnn_tensor *t = cnn_idx_parse(buf, len, path);
  free(buf);
  return t;
}
