/*
 * safetensors.c -- reading safetensors files (checkpoints, state dicts).
 *
 * Layout (huggingface/safetensors): an unsigned 64-bit little-endian header
 * length N; N bytes of UTF-8 JSON, an object mapping each tensor name to
 * {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, plus an
 * optional "__metadata__" object of string -> string; then the data
 * section.  Offsets are relative to the first byte after the header, data
 * are contiguous row-major little-endian, and (by the spec) the tensors
 * tile the data section exactly: no overlaps, no holes.  The header may be
 * padded with spaces.
 *
 * Validation happens in three passes, before any tensor is allocated:
 * header length and JSON (describe_header), each entry (describe_entries:
 * dtype, shape, offsets, byte count with overflow checks), then the set
 * (unique names, offsets tiling the data).  Only then are tensors copied
 * out.  Every message names the file and the entry.
 */
#include "io_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host (the format's byte order)"
#endif

#define MAX_HEADER ((uint64_t)100 << 20)

typedef struct {
  const char *code; /* "F32" */
  cnn_dtype dtype;  /* tensor dtype */
  int size;         /* bytes per element in the file */
} st_dtype;

static const st_dtype st_dtypes[] = {
    {"F32", CNN_FLOAT32, 4}, {"F64", CNN_FLOAT64, 8}, {"I64", CNN_INT64, 8},
    {"U8", CNN_UINT8, 1},    {"F16", CNN_FLOAT16, 2}, {"BF16", CNN_BFLOAT16, 2},
    {"BOOL", CNN_UINT8, 1},  {"I32", CNN_INT64, 4},
};

typedef struct {
  const char *name; /* borrowed from the cJSON tree */
  const st_dtype *dt;
  int ndim;
  int64_t shape[CNN_MAX_DIMS];
  uint64_t begin, end; /* relative to the data section */
} st_entry;

typedef struct {
  const char *what;
  cJSON *root;
  const cJSON *meta; /* __metadata__ or NULL */
  st_entry *entries;
  int n;
  const uint8_t *data;
  uint64_t dlen;
} st_parse;

/* ---- pass 1: the header ----------------------------------------------------- */

static bool only_spaces(const char *p, const char *end) {
  for (; p < end; p++)
    if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') return false;
  return true;
}

static cJSON *parse_json(const uint8_t *h, size_t hlen, const char *what) {
  char *copy = malloc(hlen + 1); /* NUL-terminated: cJSON never runs past it */
  if (!copy) {
    cnn_set_error("safetensors: %s: out of memory for a %zu-byte header", what, hlen);
    return NULL;
  }
  memcpy(copy, h, hlen);
  copy[hlen] = '\0';
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithOpts(copy, &end, 0);
  if (!root || !cJSON_IsObject(root) || !end || !only_spaces(end, copy + hlen)) {
    size_t at = end && end >= copy ? (size_t)(end - copy) : 0;
    if (!root) at = cJSON_GetErrorPtr() ? (size_t)(cJSON_GetErrorPtr() - copy) : 0;
    cnn_set_error("safetensors: %s: the header is not a JSON object (error near byte %zu of %zu)",
                  what, at > hlen ? hlen : at, hlen);
    cJSON_Delete(root);
    root = NULL;
  }
  free(copy);
  return root;
}

static int describe_header(st_parse *p, const uint8_t *buf, size_t len) {
  if (len < 8) {
    cnn_set_error("safetensors: %s is truncated: %zu bytes, too short for the 8-byte header length",
                  p->what, len);
    return -1;
  }
  uint64_t hlen = cnn_io_le64(buf);
  if (hlen < 2 || hlen > MAX_HEADER || hlen > len - 8) {
    cnn_set_error("safetensors: %s: header length %llu is %s (the file has %zu bytes)", p->what,
                  (unsigned long long)hlen,
                  hlen < 2            ? "too small"
                  : hlen > MAX_HEADER ? "over the 100 MB limit"
                                      : "past the end of the file",
                  len);
    return -1;
  }
  if (buf[8] != '{') {
    cnn_set_error("safetensors: %s: the header does not start with '{'; not a safetensors file?",
                  p->what);
    return -1;
  }
  if (!(p->root = parse_json(buf + 8, (size_t)hlen, p->what))) return -1;
  p->data = buf + 8 + hlen;
  p->dlen = len - 8 - hlen;
  return 0;
}

/* ---- pass 2: each entry -------------------------------------------------------- */

/* a JSON number that is an integer in [0, 2^53] */
static bool get_count(const cJSON *j, uint64_t *out) {
  if (!cJSON_IsNumber(j)) return false;
  double d = j->valuedouble;
  if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d)) return false;
  *out = (uint64_t)d;
  return true;
}

static const st_dtype *find_dtype(const char *code) {
  for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
    if (strcmp(st_dtypes[i].code, code) == 0) return &st_dtypes[i];
  return NULL;
}

static int entry_dtype(const st_parse *p, const cJSON *j, st_entry *e) {
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(j, "dtype");
  if (!cJSON_IsString(dt)) {
    cnn_set_error("safetensors: %s: tensor '%s' has no \"dtype\" string", p->what, e->name);
    return -1;
  }
  if (!(e->dt = find_dtype(dt->valuestring))) {
    cnn_set_error("safetensors: %s: tensor '%s' has dtype '%.32s', which cnnsh does not support "
                  "(F32, F64, I64, U8, F16, BF16, BOOL, I32)",
                  p->what, e->name, dt->valuestring);
    return -1;
  }
  return 0;
}

static int entry_shape(const st_parse *p, const cJSON *j, st_entry *e) {
  const cJSON *sh = cJSON_GetObjectItemCaseSensitive(j, "shape");
  if (!cJSON_IsArray(sh)) {
    cnn_set_error("safetensors: %s: tensor '%s' has no \"shape\" array", p->what, e->name);
    return -1;
  }
  int n = cJSON_GetArraySize(sh);
  if (n > CNN_MAX_DIMS) {
    cnn_set_error("safetensors: %s: tensor '%s' has %d dimensions (at most %d)", p->what, e->name,
                  n, CNN_MAX_DIMS);
    return -1;
  }
  e->ndim = 0;
  const cJSON *d;
  cJSON_ArrayForEach(d, sh) {
    uint64_t v;
    if (!get_count(d, &v)) {
      cnn_set_error("safetensors: %s: tensor '%s': shape entry %d is not a non-negative integer",
                    p->what, e->name, e->ndim + 1);
      return -1;
    }
    e->shape[e->ndim++] = (int64_t)v;
  }
  return 0;
}

static int entry_offsets(const st_parse *p, const cJSON *j, st_entry *e) {
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(j, "data_offsets");
  if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
      !get_count(cJSON_GetArrayItem(off, 0), &e->begin) ||
      !get_count(cJSON_GetArrayItem(off, 1), &e->end)) {
    cnn_set_error("safetensors: %s: tensor '%s' needs \"data_offsets\": [begin, end] "
                  "with non-negative integers",
                  p->what, e->name);
    return -1;
  }
  if (e->begin > e->end || e->end > p->dlen) {
    cnn_set_error("safetensors: %s: tensor '%s' has data_offsets [%llu, %llu] %s the "
                  "%llu-byte data section%s",
                  p->what, e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                  e->begin > e->end ? "reversed, in" : "past the end of",
                  (unsigned long long)p->dlen,
                  e->begin > e->end ? "" : " (is the file truncated?)");
    return -1;
  }
  return 0;
}

static int entry_size(const st_parse *p, st_entry *e) {
  uint64_t n = (uint64_t)e->dt->size;
  bool overflow = false;
  for (int i = 0; i < e->ndim; i++)
    overflow |= __builtin_mul_overflow(n, (uint64_t)e->shape[i], &n);
  char sh[CNN_SHAPE_STR];
  if (!overflow && !cnn_io_shape_ok(e->ndim, e->shape)) {
    cnn_set_error("safetensors: %s: tensor '%s' has shape %s, too many elements", p->what, e->name,
                  cnn_shape_str(e->ndim, e->shape, sh));
    return -1;
  }
  if (overflow || n != e->end - e->begin) {
    cnn_set_error("safetensors: %s: tensor '%s' is %s %s (%s%llu bytes) but its data_offsets "
                  "[%llu, %llu] hold %llu bytes",
                  p->what, e->name, e->dt->code, cnn_shape_str(e->ndim, e->shape, sh),
                  overflow ? "over " : "", (unsigned long long)(overflow ? UINT64_MAX : n),
                  (unsigned long long)e->begin, (unsigned long long)e->end,
                  (unsigned long long)(e->end - e->begin));
    return -1;
  }
  return 0;
}

static int describe_meta(st_parse *p, const cJSON *j) {
  if (p->meta) {
    cnn_set_error("safetensors: %s: two \"__metadata__\" entries", p->what);
    return -1;
  }
  if (!cJSON_IsObject(j)) {
    cnn_set_error("safetensors: %s: \"__metadata__\" is not an object", p->what);
    return -1;
  }
  const cJSON *v;
  cJSON_ArrayForEach(v, j) {
    if (!cJSON_IsString(v)) {
      cnn_set_error("safetensors: %s: __metadata__ entry '%s' is not a string", p->what, v->string);
      return -1;
    }
  }
  p->meta = j;
  return 0;
}

static int describe_entries(st_parse *p) {
  int n = cJSON_GetArraySize(p->root);
  p->entries = calloc(n > 0 ? (size_t)n : 1, sizeof *p->entries);
  if (!p->entries) {
    cnn_set_error("safetensors: %s: out of memory for %d entries", p->what, n);
    return -1;
  }
  const cJSON *j;
  cJSON_ArrayForEach(j, p->root) {
    if (strcmp(j->string, "__metadata__") == 0) {
      if (describe_meta(p, j) < 0) return -1;
      continue;
    }
    st_entry *e = &p->entries[p->n];
    e->name = j->string;
    if (!cJSON_IsObject(j)) {
      cnn_set_error("safetensors: %s: entry '%s' is not an object", p->what, e->name);
      return -1;
    }
    if (entry_dtype(p, j, e) < 0 || entry_shape(p, j, e) < 0 || entry_offsets(p, j, e) < 0 ||
        entry_size(p, e) < 0)
      return -1;
    p->n++;
  }
  return 0;
}

/* ---- pass 3: the set ------------------------------------------------------------ */

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* sorts `names` (n pointers) and reports the first duplicate, or NULL */
static const char *first_duplicate(const char **names, int n) {
  qsort(names, (size_t)n, sizeof *names, cmp_name);
  for (int i = 1; i < n; i++)
    if (strcmp(names[i - 1], names[i]) == 0) return names[i];
  return NULL;
}

static int check_unique(const st_parse *p) {
  int nmeta = p->meta ? cJSON_GetArraySize(p->meta) : 0;
  int most = p->n > nmeta ? p->n : nmeta;
  const char **names = malloc((most > 0 ? (size_t)most : 1) * sizeof *names);
  if (!names) {
    cnn_set_error("safetensors: %s: out of memory", p->what);
    return -1;
  }
  for (int i = 0; i < p->n; i++) names[i] = p->entries[i].name;
  const char *dup = first_duplicate(names, p->n), *kind = "tensor";
  if (!dup && p->meta) {
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, p->meta) names[i++] = v->string;
    dup = first_duplicate(names, nmeta), kind = "__metadata__ key";
  }
  if (dup) cnn_set_error("safetensors: %s: %s '%s' appears twice", p->what, kind, dup);
  free(names);
  return dup ? -1 : 0;
}

static int cmp_offsets(const void *a, const void *b) {
  const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

static int report_tiling(const st_parse *p, const st_entry *prev, const st_entry *e, uint64_t at) {
  if (!e)
    cnn_set_error("safetensors: %s: the data section has %llu bytes but the tensors end at %llu",
                  p->what, (unsigned long long)p->dlen, (unsigned long long)at);
  else if (e->begin < at)
    cnn_set_error(
        "safetensors: %s: tensors '%s' and '%s' overlap (data_offsets from %llu and %llu)", p->what,
        prev->name, e->name, (unsigned long long)prev->begin, (unsigned long long)e->begin);
  else
    cnn_set_error("safetensors: %s: a hole in the data: bytes %llu..%llu belong to no tensor "
                  "(before '%s')",
                  p->what, (unsigned long long)at, (unsigned long long)e->begin, e->name);
  return -1;
}

static int check_tiling(const st_parse *p) {
  const st_entry **order = malloc((p->n > 0 ? (size_t)p->n : 1) * sizeof *order);
  if (!order) {
    cnn_set_error("safetensors: %s: out of memory", p->what);
    return -1;
  }
  for (int i = 0; i < p->n; i++) order[i] = &p->entries[i];
  qsort(order, (size_t)p->n, sizeof *order, cmp_offsets);
  uint64_t at = 0;
  int rc = 0;
  for (int i = 0; i < p->n && rc == 0; i++) {
    if (order[i]->begin != at) rc = report_tiling(p, i ? order[i - 1] : NULL, order[i], at);
    at = order[i]->end;
  }
  if (rc == 0 && at != p->dlen) rc = report_tiling(p, NULL, NULL, at);
  free(order);
  return rc;
}

/* ---- building the result ----------------------------------------------------------- */

static cnn_tensor *make_tensor(const st_parse *p, const st_entry *e) {
  const uint8_t *src = p->data + e->begin;
  if (strcmp(e->dt->code, "I32") != 0) return cnn_from_buffer(e->ndim, e->shape, e->dt->dtype, src);
  cnn_tensor *t = cnn_empty(e->ndim, e->shape, CNN_INT64, CNN_DEVICE_CPU);
  if (!t) return NULL;
  int64_t *dst = cnn_tensor_data(t), n = cnn_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    int32_t v;
    memcpy(&v, src + 4 * i, 4);
    dst[i] = v;
  }
  return t;
}

void cnn_tensor_file_free(cnn_tensor_file *f) {
  if (!f) return;
  for (int i = 0; i < f->ntensors; i++) {
    free(f->tensors[i].name);
    if (f->tensors[i].tensor) cnn_tensor_release(f->tensors[i].tensor);
  }
  for (int i = 0; i < f->nmeta; i++) free(f->meta[i].key), free(f->meta[i].value);
  free(f->tensors);
  free(f->meta);
  free(f);
}

static int build_meta(const st_parse *p, cnn_tensor_file *f) {
  int n = p->meta ? cJSON_GetArraySize(p->meta) : 0;
  if (!(f->meta = calloc(n > 0 ? (size_t)n : 1, sizeof *f->meta))) return -1;
  const cJSON *v;
  if (p->meta) cJSON_ArrayForEach(v, p->meta) {
      cnn_meta_entry *m = &f->meta[f->nmeta++];
      m->key = strdup(v->string);
      m->value = strdup(v->valuestring);
      if (!m->key || !m->value) return -1;
    }
  return 0;
}

static cnn_tensor_file *build(const st_parse *p) {
  cnn_tensor_file *f = calloc(1, sizeof *f);
  if (!f || !(f->tensors = calloc(p->n > 0 ? (size_t)p->n : 1, sizeof *f->tensors)) ||
      build_meta(p, f) < 0) {
    cnn_tensor_file_free(f);
    cnn_set_error("safetensors: %s: out of memory", p->what);
    return NULL;
  }
  for (int i = 0; i < p->n; i++) {
    cnn_named_tensor *nt = &f->tensors[f->ntensors++];
    nt->name = strdup(p->entries[i].name);
    nt->tensor = nt->name ? make_tensor(p, &p->entries[i]) : NULL;
    if (!nt->tensor) {
      if (!nt->name) cnn_set_error("safetensors: %s: out of memory", p->what);
      cnn_tensor_file_free(f);
      return NULL;
    }
  }
  return f;
}

cnn_tensor_file *cnn_safetensors_parse(const uint8_t *buf, size_t len, const char *what) {
  st_parse p = {.what = what ? what : "buffer"};
  if (!buf && len) {
    cnn_set_error("safetensors: %s: no data", p.what);
    return NULL;
  }
  cnn_tensor_file *f = NULL;
  if (describe_header(&p, buf, len) == 0 && describe_entries(&p) == 0 && check_unique(&p) == 0 &&
      check_tiling(&p) == 0)
    f = build(&p);
  free(p.entries);
  cJSON_Delete(p.root);
  return f;
}

cnn_tensor_file *cnn_safetensors_load(const char *path) {
  uint8_t *buf;
  size_t len;
  if (!path) {
    cnn_set_error("load: no file name");
    return NULL;
  }
  if (cnn_io_read_file("load", path, &buf, &len) < 0) return NULL;
  cnn_tensor_file *f = cnn_safetensors_parse(buf, len, path);
  free(buf);
  return f;
}

const char *cnn_tensor_file_meta(const cnn_tensor_file *f, const char *key) {
  if (!f || !key) return NULL;
  for (int i = 0; i < f->nmeta; i++)
    if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
  return NULL;
}
