/*
 * test_safetensors.c -- checkpoints in the safetensors format
 * (core/io/safetensors*.c) against the published layout: u64 little-endian
 * header length, JSON header {"name": {"dtype", "shape", "data_offsets"}},
 * offsets relative to the first byte after the header, "__metadata__" of
 * strings, contiguous little-endian data.
 *
 * 1. Save two tensors and metadata and compare the file, byte for byte,
 *    with bytes spelled out here (header text, padding, IEEE-754 and
 *    two's-complement data written as literal bytes).
 * 2. Parse a hand-written file in another writer's style (pretty JSON,
 *    keys in another order, data order different from header order).
 * 3. Round trips: every dtype, a non-contiguous view, a scalar, an empty
 *    tensor, names needing JSON escapes.
 * 4. Every validation error, each by editing a valid file, and the clean
 *    failures of save (the target untouched, no temporary left behind).
 */
#include "check.h"
#include "cnn.h"
#include "io/io.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
  *len = fread(b, 1, (size_t)n, f);
  fclose(f);
  return b;
}

static int count_temporaries(void) {
  DIR *d = opendir(tmpdir);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
  closedir(d);
  return n;
}

/* header text + data -> a whole file (length prefix written byte by byte) */
static uint8_t *make_file(const char *header, const uint8_t *data, size_t dlen, size_t *len) {
  size_t h = strlen(header);
  *len = 8 + h + dlen;
  uint8_t *b = malloc(*len);
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(h >> (8 * i));
  memcpy(b + 8, header, h);
  memcpy(b + 8 + h, data, dlen);
  return b;
}

/* ---- 1. exact bytes of a saved file ---------------------------------------- */

static void test_exact_bytes(void) {
  char path[512];
  snprintf(path, sizeof path, "%s/exact.safetensors", tmpdir);
  float av[4] = {1.0f, 2.0f, -0.5f, 3.0f};
  int64_t bv[3] = {-1, 0, 258};
  cnn_tensor *a = cnn_from_buffer(2, (int64_t[]){2, 2}, CNN_FLOAT32, av);
  cnn_tensor *b = cnn_from_buffer(1, (int64_t[]){3}, CNN_INT64, bv);
  const char *names[] = {"conv.weight", "step"}, *keys[] = {"epoch"}, *vals[] = {"3"};
  CHECK(cnn_safetensors_save(path, 2, names, (cnn_tensor *[]){a, b}, 1, keys, vals) == 0);
  const char *json = "{\"__metadata__\":{\"epoch\":\"3\"},"
                     "\"conv.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                     "\"step\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[16,40]}}";
  size_t jl = strlen(json), hl = (jl + 7) / 8 * 8; /* spaces up to a multiple of 8 */
  uint8_t want[8 + 256 + 40];
  memset(want, 0, sizeof want);
  want[0] = (uint8_t)hl, want[1] = (uint8_t)(hl >> 8);
  memcpy(want + 8, json, jl);
  memset(want + 8 + jl, ' ', hl - jl);
  const uint8_t data[40] = {0,    0,    0x80, 0x3F, 0,    0,    0,    0x40, 0,    0,
                            0,    0xBF, 0,    0,    0x40, 0x40, 0xFF, 0xFF, 0xFF, 0xFF,
                            0xFF, 0xFF, 0xFF, 0xFF, 0,    0,    0,    0,    0,    0,
                            0,    0,    0x02, 0x01, 0,    0,    0,    0,    0,    0};
  memcpy(want + 8 + hl, data, 40);
  size_t len;
  uint8_t *got = slurp(path, &len);
  CHECK(got && len == 8 + hl + 40);
  CHECK(hl % 8 == 0);
  if (got && len == 8 + hl + 40) CHECK(memcmp(got, want, len) == 0);
  /* the same file cut short anywhere is refused with an error naming it */
  for (size_t cut = 0; got && cut < len; cut += 7) {
    cnn_tensor_file *f = cnn_safetensors_parse(got, cut, "cut.st");
    CHECK(f == NULL && strstr(cnn_error(), "cut.st"));
    cnn_tensor_file_free(f);
  }
  if (got && len > 8 + hl) {
    cnn_tensor_file *f = cnn_safetensors_parse(got, len - 1, "cut.st");
    CHECK(f == NULL && strstr(cnn_error(), "is the file truncated?"));
    cnn_tensor_file_free(f);
  }
  free(got);
  CHECK(count_temporaries() == 0);
  /* and it loads back */
  cnn_tensor_file *f = cnn_safetensors_load(path);
  CHECK(f && f->ntensors == 2 && f->nmeta == 1);
  if (f) {
    CHECK(strcmp(f->tensors[0].name, "conv.weight") == 0 &&
          strcmp(f->tensors[1].name, "step") == 0);
    CHECK(memcmp(cnn_tensor_data(f->tensors[0].tensor), av, 16) == 0);
    CHECK(memcmp(cnn_tensor_data(f->tensors[1].tensor), bv, 24) == 0);
    CHECK(strcmp(cnn_tensor_file_meta(f, "epoch"), "3") == 0 && !cnn_tensor_file_meta(f, "x"));
  }
  cnn_tensor_file_free(f);
  cnn_tensor_release(a), cnn_tensor_release(b);
}

/* ---- 2. another writer's style ----------------------------------------------- */

static void test_foreign_style(void) {
  const char *h = "{\n  \"b\": {\"data_offsets\": [0, 2], \"shape\": [2], \"dtype\": \"U8\"},\n"
                  "  \"a\": {\"shape\": [], \"dtype\": \"F64\", \"data_offsets\": [2, 10]},\n"
                  "  \"__metadata__\": {\"format\": \"pt\"}\n}   ";
  const uint8_t data[10] = {7, 9, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F}; /* U8 {7,9}; F64 1.0 */
  size_t len;
  uint8_t *file = make_file(h, data, 10, &len);
  cnn_tensor_file *f = cnn_safetensors_parse(file, len, "foreign");
  CHECK(f && f->ntensors == 2);
  if (f) {
    CHECK(strcmp(f->tensors[0].name, "b") == 0 && f->tensors[0].tensor->dtype == CNN_UINT8);
    CHECK(((uint8_t *)cnn_tensor_data(f->tensors[0].tensor))[1] == 9);
    CHECK(f->tensors[1].tensor->ndim == 0 && f->tensors[1].tensor->dtype == CNN_FLOAT64);
    CHECK(*(double *)cnn_tensor_data(f->tensors[1].tensor) == 1.0);
    CHECK(strcmp(cnn_tensor_file_meta(f, "format"), "pt") == 0);
  }
  cnn_tensor_file_free(f);
  free(file);
  /* I32 widens to int64, BOOL reads as uint8 */
  const char *h2 = "{\"i\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"m\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[8,9]}}";
  const uint8_t d2[9] = {0xFE, 0xFF, 0xFF, 0xFF, 5, 0, 0, 0, 1};
  file = make_file(h2, d2, 9, &len);
  f = cnn_safetensors_parse(file, len, "foreign2");
  CHECK(f && f->ntensors == 2);
  if (f) {
    int64_t *iv = cnn_tensor_data(f->tensors[0].tensor);
    CHECK(f->tensors[0].tensor->dtype == CNN_INT64 && iv[0] == -2 && iv[1] == 5);
    CHECK(f->tensors[1].tensor->dtype == CNN_UINT8);
  }
  cnn_tensor_file_free(f);
  free(file);
}

/* ---- 3. round trips ------------------------------------------------------------ */

static void test_round_trips(void) {
  char path[512];
  snprintf(path, sizeof path, "%s/rt.safetensors", tmpdir);
  cnn_tensor *t[7];
  double vals[24];
  for (int i = 0; i < 24; i++) vals[i] = i * 0.25 - 2;
  cnn_tensor *base = cnn_from_buffer(2, (int64_t[]){4, 6}, CNN_FLOAT64, vals);
  t[0] = cnn_transpose(base, 0, 1); /* 6x4, non-contiguous */
  t[1] = cnn_to_dtype(base, CNN_FLOAT32);
  t[2] = cnn_to_dtype(base, CNN_INT64);
  t[3] = cnn_to_dtype(base, CNN_UINT8);
  t[4] = cnn_scalar(42.5, CNN_FLOAT32, CNN_DEVICE_CPU);
  t[5] = cnn_empty(2, (int64_t[]){0, 3}, CNN_FLOAT32, CNN_DEVICE_CPU);
  t[6] = cnn_to_dtype(base, CNN_FLOAT16);
  const char *names[] = {"t\"quote\\back", "f32", "i64", "u8", "scalar", "empty", "line\nbreak"};
  bool ok = true;
  for (int i = 0; i < 7; i++) ok &= t[i] != NULL;
  CHECK(ok);
  if (!ok) return;
  CHECK(cnn_safetensors_save(path, 7, names, t, 0, NULL, NULL) == 0);
  cnn_tensor_file *f = cnn_safetensors_load(path);
  CHECK(f && f->ntensors == 7 && f->nmeta == 0);
  for (int i = 0; f && i < 7; i++) {
    cnn_tensor *g = f->tensors[i].tensor;
    CHECK(strcmp(f->tensors[i].name, names[i]) == 0);
    CHECK(g->dtype == t[i]->dtype && cnn_same_shape(g, t[i]));
    int64_t n = cnn_tensor_numel(g), bad = 0;
    for (int64_t k = 0; k < n; k++) bad += cnn_tensor_get(g, k) != cnn_tensor_get(t[i], k);
    CHECK(bad == 0);
  }
  if (f)
    CHECK(cnn_tensor_get(f->tensors[0].tensor, 1) == vals[6]); /* transposed: [0][1] = base[1][0] */
  cnn_tensor_file_free(f);
  for (int i = 0; i < 7; i++) cnn_tensor_release(t[i]);
  cnn_tensor_release(base);
  /* an empty file: no tensors, no metadata */
  CHECK(cnn_safetensors_save(path, 0, NULL, NULL, 0, NULL, NULL) == 0);
  f = cnn_safetensors_load(path);
  CHECK(f && f->ntensors == 0 && f->nmeta == 0);
  cnn_tensor_file_free(f);
  unlink(path);
}

/* ---- 4. validation ----------------------------------------------------------------- */

static void expect_parse_error(const char *header, const uint8_t *data, size_t dlen,
                               const char *fragment) {
  size_t len;
  uint8_t *file = make_file(header, data, dlen, &len);
  cnn_tensor_file *f = cnn_safetensors_parse(file, len, "bad.st");
  CHECK(f == NULL);
  cnn_tensor_file_free(f);
  if (!f && (!strstr(cnn_error(), fragment) || !strstr(cnn_error(), "bad.st"))) {
    CHECK(!"error message");
    fprintf(stderr, "  header %s\n  got '%s', expected '%s'\n", header, cnn_error(), fragment);
  }
  free(file);
}

#define E(dt, sh, off) "{\"x\":{\"dtype\":\"" dt "\",\"shape\":" sh ",\"data_offsets\":" off "}}"

static void test_bad_headers(void) {
  uint8_t d[64] = {0};
  expect_parse_error(
      E("F32", "[2]", "[0,8]"), d, 7,
      "data_offsets [0, 8] past the end of the 7-byte data section (is the file truncated?)");
  expect_parse_error(E("F32", "[2]", "[0,8]"), d, 9,
                     "the data section has 9 bytes but the tensors end at 8");
  expect_parse_error(E("F33", "[2]", "[0,8]"), d, 8, "tensor 'x' has dtype 'F33'");
  expect_parse_error(E("F32", "[3]", "[0,8]"), d, 8,
                     "tensor 'x' is F32 3 (12 bytes) but its data_offsets [0, 8] hold 8 bytes");
  expect_parse_error(E("F32", "[-2]", "[0,8]"), d, 8,
                     "shape entry 1 is not a non-negative integer");
  expect_parse_error(E("F32", "[2.5]", "[0,8]"), d, 8,
                     "shape entry 1 is not a non-negative integer");
  expect_parse_error(E("F32", "[\"2\"]", "[0,8]"), d, 8, "shape entry 1");
  expect_parse_error(E("F32", "[1,1,1,1,1,1,1,1,2]", "[0,8]"), d, 8, "has 9 dimensions");
  expect_parse_error(E("F32", "[4294967296,4294967296,4294967296]", "[0,8]"), d, 8, "(over ");
  expect_parse_error(E("F32", "[0,1099511627776,1099511627776]", "[0,0]"), d, 0,
                     "has shape 0x1099511627776x1099511627776, too many elements");
  expect_parse_error(E("F32", "[2]", "[8,0]"), d, 8, "data_offsets [8, 0] reversed");
  expect_parse_error(E("F32", "[2]", "[0]"), d, 8, "needs \"data_offsets\": [begin, end]");
  expect_parse_error(E("F32", "[2]", "[0,-8]"), d, 8, "needs \"data_offsets\"");
  expect_parse_error(E("F32", "[2]", "[0,1e300]"), d, 8, "needs \"data_offsets\"");
  expect_parse_error("{\"x\":{\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8, "no \"dtype\" string");
  expect_parse_error("{\"x\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", d, 8,
                     "no \"shape\" array");
  expect_parse_error("{\"x\":[1,2]}", d, 8, "entry 'x' is not an object");
  expect_parse_error("{\"x\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                     "\"y\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
                     d, 6, "overlap");
  expect_parse_error("{\"x\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                     "\"y\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[6,10]}}",
                     d, 10, "a hole in the data: bytes 4..6");
  expect_parse_error("{\"x\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                     "\"x\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
                     d, 8, "tensor 'x' appears twice");
  expect_parse_error("{\"__metadata__\":{\"k\":1}}", d, 0,
                     "__metadata__ entry 'k' is not a string");
  expect_parse_error("{\"__metadata__\":[\"k\"]}", d, 0, "\"__metadata__\" is not an object");
  expect_parse_error("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", d, 0,
                     "__metadata__ key 'k' appears twice");
  expect_parse_error("{\"__metadata__\":{},\"__metadata__\":{}}", d, 0, "two \"__metadata__\"");
  expect_parse_error("{\"x\":{\"dtype\":\"U8\",", d, 0, "not a JSON object");
  expect_parse_error("{} trailing", d, 0, "not a JSON object");
  expect_parse_error("[1, 2, 3]", d, 0, "does not start with '{'");
  expect_parse_error("{", d, 0, "header length 1 is too small");
  /* the length prefix itself */
  uint8_t small[12] = {4, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '};
  CHECK(cnn_safetensors_parse(small, 7, "s") == NULL && strstr(cnn_error(), "too short"));
  small[0] = 200;
  CHECK(cnn_safetensors_parse(small, 12, "s") == NULL &&
        strstr(cnn_error(), "past the end of the file"));
  small[0] = 0, small[7] = 0x80; /* 2^63 */
  CHECK(cnn_safetensors_parse(small, 12, "s") == NULL &&
        strstr(cnn_error(), "over the 100 MB limit"));
  small[7] = 0, small[0] = 4; /* a valid empty file */
  cnn_tensor_file *f = cnn_safetensors_parse(small, 12, "s");
  CHECK(f && f->ntensors == 0);
  cnn_tensor_file_free(f);
  /* NUL inside the header */
  uint8_t nul[12] = {4, 0, 0, 0, 0, 0, 0, 0, '{', '}', 0, ' '};
  CHECK(cnn_safetensors_parse(nul, 12, "s") == NULL);
}

static void test_save_failures(void) {
  char path[512], dirpath[512], missing[512];
  snprintf(path, sizeof path, "%s/keep.safetensors", tmpdir);
  snprintf(dirpath, sizeof dirpath, "%s/adir", tmpdir);
  snprintf(missing, sizeof missing, "%s/no/such/dir/x.safetensors", tmpdir);
  float v[2] = {1, 2};
  cnn_tensor *a = cnn_from_buffer(1, (int64_t[]){2}, CNN_FLOAT32, v);
  const char *n1[] = {"a"}, *n2[] = {"a", "a"}, *n3[] = {"__metadata__"}, *n4[] = {""};
  CHECK(cnn_safetensors_save(path, 1, n1, &a, 0, NULL, NULL) == 0);
  size_t len0, len1;
  uint8_t *before = slurp(path, &len0);
  CHECK(cnn_safetensors_save(path, 2, n2, (cnn_tensor *[]){a, a}, 0, NULL, NULL) == -1);
  CHECK(strstr(cnn_error(), "save: tensor name 'a' appears twice") != NULL);
  CHECK(cnn_safetensors_save(path, 1, n3, &a, 0, NULL, NULL) == -1 &&
        strstr(cnn_error(), "reserved"));
  CHECK(cnn_safetensors_save(path, 1, n4, &a, 0, NULL, NULL) == -1 &&
        strstr(cnn_error(), "has no name"));
  CHECK(cnn_safetensors_save(path, 1, n1, (cnn_tensor *[]){NULL}, 0, NULL, NULL) == -1);
  const char *k2[] = {"e", "e"}, *v2[] = {"1", "2"};
  CHECK(cnn_safetensors_save(path, 1, n1, &a, 2, k2, v2) == -1 &&
        strstr(cnn_error(), "metadata key name 'e'"));
  const char *k1[] = {"note"}, *bin[] = {"\xff\xfe"}, *n5[] = {"caf\xc3\xa9", "\xed\xa0\x80"};
  CHECK(cnn_safetensors_save(path, 1, n1, &a, 1, k1, bin) == -1 &&
        strstr(cnn_error(), "metadata 'note' is not valid UTF-8"));
  CHECK(cnn_safetensors_save(path, 2, n5, (cnn_tensor *[]){a, a}, 0, NULL, NULL) == -1 &&
        strstr(cnn_error(), "tensor name 2 is not valid UTF-8")); /* a UTF-16 surrogate */
  uint8_t *after = slurp(path, &len1);
  CHECK(len0 == len1 && memcmp(before, after, len0) == 0);
  free(after);
  CHECK(cnn_safetensors_save(missing, 1, n1, &a, 0, NULL, NULL) == -1);
  CHECK(strstr(cnn_error(), "no/such/dir") && strstr(cnn_error(), "No such file"));
  /* the rename fails after all data is written: the temporary must go */
  mkdir(dirpath, 0755);
  CHECK(cnn_safetensors_save(dirpath, 1, n1, &a, 0, NULL, NULL) == -1);
  CHECK(strstr(cnn_error(), "rename") != NULL);
  struct stat st;
  CHECK(stat(dirpath, &st) == 0 && S_ISDIR(st.st_mode));
  rmdir(dirpath);
  CHECK(count_temporaries() == 0);
  /* the target keeps its permissions across a save */
  chmod(path, 0600);
  CHECK(cnn_safetensors_save(path, 1, n1, &a, 0, NULL, NULL) == 0);
  CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
  CHECK(cnn_safetensors_load(dirpath) == NULL && strstr(cnn_error(), "adir"));
  free(before);
  unlink(path);
  cnn_tensor_release(a);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "%s/cnn_st_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(tmpdir)) return perror("mkdtemp"), 1;
  test_exact_bytes();
  test_foreign_style();
  test_round_trips();
  test_bad_headers();
  test_save_failures();
  char p[512];
  snprintf(p, sizeof p, "%s/exact.safetensors", tmpdir);
  unlink(p);
  rmdir(tmpdir);
  return check_report("test_safetensors");
}
