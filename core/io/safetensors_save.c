/*
 * safetensors_save.c -- writing safetensors files, atomically.
 *
 * The header is written by hand (not through cJSON) so that integers are
 * always plain decimal u64s, whatever their size, and the layout is fixed:
 * {"__metadata__":{...},"name":{"dtype":"F32","shape":[2,3],
 * "data_offsets":[0,24]},...} padded with spaces to a multiple of 8 bytes,
 * so the data section starts 8-aligned.  Tensors are laid out back to back
 * in argument order.  Strings are escaped per JSON (quote, backslash,
 * control characters); other bytes pass through, so names should be UTF-8.
 *
 * Everything is validated first (names, devices, dtypes); then the file is
 * written through the atomic writer of io_util.c: a failure at any point
 * removes the temporary and leaves the target as it was.
 */
#include "io_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- a growing string --------------------------------------------------------- */

typedef struct {
  char *p;
  size_t n, cap;
  bool failed;
} sbuf;

static void sb_put(sbuf *s, const char *data, size_t n) {
  if (s->failed) return;
  if (s->n + n + 1 > s->cap) {
    size_t cap = s->cap ? s->cap : 256;
    while (cap < s->n + n + 1) cap *= 2;
    char *p = realloc(s->p, cap);
    if (!p) {
      s->failed = true;
      return;
    }
    s->p = p, s->cap = cap;
  }
  memcpy(s->p + s->n, data, n);
  s->n += n;
  s->p[s->n] = '\0';
}

static void sb_printf(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *s, const char *fmt, ...) {
  char tmp[64];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  sb_put(s, tmp, n < 0 ? 0 : (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void sb_json_string(sbuf *s, const char *str) {
  sb_put(s, "\"", 1);
  for (const unsigned char *c = (const unsigned char *)str; *c; c++) {
    if (*c == '"' || *c == '\\') {
      char esc[2] = {'\\', (char)*c};
      sb_put(s, esc, 2);
    } else if (*c < 0x20) {
      sb_printf(s, "\\u%04x", *c);
    } else {
      sb_put(s, (const char *)c, 1);
    }
  }
  sb_put(s, "\"", 1);
}

/* ---- validation ------------------------------------------------------------------- */

static const char *dtype_code(cnn_dtype dt) {
  switch (dt) {
  case CNN_FLOAT32: return "F32";
  case CNN_FLOAT64: return "F64";
  case CNN_INT64: return "I64";
  case CNN_UINT8: return "U8";
  case CNN_FLOAT16: return "F16";
  case CNN_BFLOAT16: return "BF16";
  default: return NULL;
  }
}

/* strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF): JSON readers
 * such as PyTorch's refuse anything else */
static bool valid_utf8(const char *str) {
  const unsigned char *s = (const unsigned char *)str;
  while (*s) {
    unsigned c = *s++, n = c < 0x80                 ? 0
                           : c >= 0xC2 && c <= 0xDF ? 1
                           : c >= 0xE0 && c <= 0xEF ? 2
                           : c >= 0xF0 && c <= 0xF4 ? 3
                                                    : 4;
    if (n == 4) return false;
    unsigned cp = n == 0 ? c : n == 1 ? c & 0x1F : n == 2 ? c & 0x0F : c & 0x07;
    for (unsigned k = 0; k < n; k++, s++) {
      if ((*s & 0xC0) != 0x80) return false;
      cp = cp << 6 | (*s & 0x3F);
    }
    if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
      return false;
  }
  return true;
}

static int check_names(const char *op, int n, const char *const *names, const char *kind) {
  for (int i = 0; i < n; i++) {
    if (!names[i] || !names[i][0]) {
      cnn_set_error("%s: %s %d has no name", op, kind, i + 1);
      return -1;
    }
    if (!valid_utf8(names[i])) {
      cnn_set_error("%s: %s name %d is not valid UTF-8", op, kind, i + 1);
      return -1;
    }
    if (strcmp(names[i], "__metadata__") == 0 && strcmp(kind, "tensor") == 0) {
      cnn_set_error("%s: a tensor cannot be called '__metadata__' (reserved by safetensors)", op);
      return -1;
    }
    for (int j = 0; j < i; j++)
      if (strcmp(names[i], names[j]) == 0) {
        cnn_set_error("%s: %s name '%s' appears twice", op, kind, names[i]);
        return -1;
      }
  }
  return 0;
}

static int check_args(int n, const char *const *names, cnn_tensor *const *tensors, int nmeta,
                      const char *const *keys, const char *const *values) {
  if (n < 0 || nmeta < 0 || (n > 0 && (!names || !tensors)) || (nmeta > 0 && (!keys || !values))) {
    cnn_set_error("save: bad arguments (%d tensors, %d metadata entries)", n, nmeta);
    return -1;
  }
  if (check_names("save", n, names, "tensor") < 0) return -1;
  if (check_names("save", nmeta, keys, "metadata key") < 0) return -1;
  for (int i = 0; i < nmeta; i++)
    if (!values[i] || !valid_utf8(values[i])) {
      cnn_set_error("save: metadata '%s' %s", keys[i],
                    values[i] ? "is not valid UTF-8" : "has no value");
      return -1;
    }
  for (int i = 0; i < n; i++) {
    if (!tensors[i]) {
      cnn_set_error("save: tensor '%s' is missing (NULL)", names[i]);
      return -1;
    }
    if (!dtype_code(tensors[i]->dtype)) {
      cnn_set_error("save: tensor '%s' has dtype %s, which safetensors cannot store", names[i],
                    cnn_dtype_name(tensors[i]->dtype));
      return -1;
    }
  }
  return 0;
}

/* bytes of t's elements (not of its storage) */
static size_t tensor_bytes(const cnn_tensor *t) {
  return (size_t)cnn_tensor_numel(t) * cnn_dtype_size(t->dtype);
}

/* ---- writing ------------------------------------------------------------------------ */

static void header_entry(sbuf *s, const char *name, const cnn_tensor *t, uint64_t begin,
                         uint64_t end) {
  sb_json_string(s, name);
  sb_printf(s, ":{\"dtype\":\"%s\",\"shape\":[", dtype_code(t->dtype));
  for (int d = 0; d < t->ndim; d++) sb_printf(s, "%s%" PRId64, d ? "," : "", t->shape[d]);
  sb_printf(s, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", begin, end);
}

static int build_header(sbuf *s, int n, const char *const *names, cnn_tensor *const *tensors,
                        int nmeta, const char *const *keys, const char *const *values) {
  sb_put(s, "{", 1);
  if (nmeta > 0) {
    sb_put(s, "\"__metadata__\":{", 16);
    for (int i = 0; i < nmeta; i++) {
      if (i) sb_put(s, ",", 1);
      sb_json_string(s, keys[i]);
      sb_put(s, ":", 1);
      sb_json_string(s, values[i]);
    }
    sb_put(s, "}", 1);
  }
  uint64_t at = 0;
  for (int i = 0; i < n; i++) {
    uint64_t nb = tensor_bytes(tensors[i]);
    if (nmeta > 0 || i) sb_put(s, ",", 1);
    header_entry(s, names[i], tensors[i], at, at + nb);
    at += nb;
  }
  sb_put(s, "}", 1);
  while (s->n % 8) sb_put(s, " ", 1);
  if (s->failed) cnn_set_error("save: out of memory building the header");
  return s->failed ? -1 : 0;
}

/* the tensor's bytes, contiguous on the host: borrowed when it already is */
static int write_tensor(cnn_io_atomic *a, const char *name, cnn_tensor *t) {
  size_t nb = tensor_bytes(t);
  if (nb == 0) return 0;
  if (cnn_tensor_device(t).type == CNN_CPU && cnn_tensor_is_contiguous(t))
    return cnn_io_atomic_write(a, cnn_tensor_data(t), nb);
  void *host = malloc(nb);
  if (!host) {
    cnn_set_error("save: out of memory copying tensor '%s' (%zu bytes)", name, nb);
    cnn_io_atomic_abort(a);
    return -1;
  }
  int rc = cnn_tensor_copy_to_host(t, host);
  if (rc < 0) {
    char dev[32], msg[512];
    snprintf(msg, sizeof msg, "%s", cnn_error());
    cnn_set_error("save: cannot copy tensor '%s' (on %s) to the host: %s", name,
                  cnn_device_str(cnn_tensor_device(t), dev), msg);
    cnn_io_atomic_abort(a);
  } else {
    rc = cnn_io_atomic_write(a, host, nb);
  }
  free(host);
  return rc;
}

int cnn_safetensors_save(const char *path, int n, const char *const *names,
                         cnn_tensor *const *tensors, int nmeta, const char *const *keys,
                         const char *const *values) {
  if (check_args(n, names, tensors, nmeta, keys, values) < 0) return -1;
  sbuf s = {0};
  if (build_header(&s, n, names, tensors, nmeta, keys, values) < 0) {
    free(s.p);
    return -1;
  }
  uint8_t len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)s.n >> (8 * i));
  cnn_io_atomic a;
  int rc = cnn_io_atomic_open(&a, "save", path);
  if (rc == 0) rc = cnn_io_atomic_write(&a, len8, 8);
  if (rc == 0) rc = cnn_io_atomic_write(&a, s.p, s.n);
  for (int i = 0; i < n && rc == 0; i++) rc = write_tensor(&a, names[i], tensors[i]);
  if (rc == 0) rc = cnn_io_atomic_commit(&a);
  free(s.p);
  return rc;
}
