/*
 * test_onnx.c -- ONNX models and tensors (core/io/onnx_*.c) against the
 * protobuf wire format spelled out here as bytes, never through the
 * generated encoder:
 *
 * 1. TensorProtos written byte by byte (packed float_data, int64_data,
 *    raw_data, sign-extended INT8, BOOL) decode to the right tensors.
 * 2. Every refusal: a data type cnnsh cannot hold, a byte count that does
 *    not match the dims, negative dims, external data, garbage.
 * 3. A model saved from C comes back with every field (attributes of each
 *    kind, initializers, symbolic dims), and every prefix of the file either
 *    decodes or fails with an "onnx: " message (no crash, no leak).
 * 4. Messages nested 300 deep (graph in attribute in node in graph ...),
 *    which would overflow protobuf-c's recursive unpacker, are refused.
 */
#include "check.h"
#include "cnn.h"
#include "io/io.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc(*len ? *len : 1);
  if (fread(b, 1, *len, f) != *len) *len = 0;
  fclose(f);
  return b;
}

/* ---- 1. tensors from hand-written bytes ------------------------------------------------ */

static void test_tensor_bytes(void) {
  /* dims 2, 2 (field 1 varint); data_type 1 FLOAT (field 2); float_data packed (field 4):
   * 1.5 = 0x3FC00000, -2 = 0xC0000000, 0.25 = 0x3E800000, 3 = 0x40400000 */
  const uint8_t floats[] = {0x08, 2, 0x08, 2,    0x10, 1, 0x22, 16,   0, 0, 0xC0, 0x3F,
                            0,    0, 0,    0xC0, 0,    0, 0x80, 0x3E, 0, 0, 0x40, 0x40};
  cnn_tensor *t = cnn_onnx_tensor_parse(floats, sizeof floats, "floats");
  CHECK(t && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 2 && t->dtype == CNN_FLOAT32);
  if (t) {
    const float *d = cnn_tensor_data(t);
    CHECK(d[0] == 1.5f && d[1] == -2.0f && d[2] == 0.25f && d[3] == 3.0f);
    cnn_tensor_release(t);
  }
  /* INT64 (7), int64_data packed (field 7): 5, -1 (ten 0xFF.. bytes ending 0x01) */
  const uint8_t ints[] = {0x08, 2,    0x10, 7,    0x3A, 11,   5,    0xFF, 0xFF,
                          0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01};
  t = cnn_onnx_tensor_parse(ints, sizeof ints, "ints");
  CHECK(t && t->dtype == CNN_INT64 && ((int64_t *)cnn_tensor_data(t))[0] == 5 &&
        ((int64_t *)cnn_tensor_data(t))[1] == -1);
  if (t) cnn_tensor_release(t);
  /* INT8 (3) in raw_data (field 9): 0x80 = -128, 0x7F = 127, widened to int64 */
  const uint8_t int8[] = {0x08, 2, 0x10, 3, 0x4A, 2, 0x80, 0x7F};
  t = cnn_onnx_tensor_parse(int8, sizeof int8, "int8");
  CHECK(t && t->dtype == CNN_INT64 && ((int64_t *)cnn_tensor_data(t))[0] == -128 &&
        ((int64_t *)cnn_tensor_data(t))[1] == 127);
  if (t) cnn_tensor_release(t);
  /* BOOL (9) in int32_data (field 5, packed): 0, 7 -> 0, 1 as uint8 */
  const uint8_t bools[] = {0x08, 2, 0x10, 9, 0x2A, 2, 0, 7};
  t = cnn_onnx_tensor_parse(bools, sizeof bools, "bools");
  CHECK(t && t->dtype == CNN_UINT8 && ((uint8_t *)cnn_tensor_data(t))[0] == 0 &&
        ((uint8_t *)cnn_tensor_data(t))[1] == 1);
  if (t) cnn_tensor_release(t);
  /* a scalar (no dims) DOUBLE (11) in raw_data: 0.5 = 0x3FE0000000000000 */
  const uint8_t scalar[] = {0x10, 11, 0x4A, 8, 0, 0, 0, 0, 0, 0, 0xE0, 0x3F};
  t = cnn_onnx_tensor_parse(scalar, sizeof scalar, "scalar");
  CHECK(t && t->ndim == 0 && t->dtype == CNN_FLOAT64 && ((double *)cnn_tensor_data(t))[0] == 0.5);
  if (t) cnn_tensor_release(t);
}

/* ---- 2. refusals ------------------------------------------------------------------------- */

static void expect_tensor_error(const uint8_t *b, size_t n, const char *what, const char *needle) {
  cnn_tensor *t = cnn_onnx_tensor_parse(b, n, what);
  CHECK(t == NULL);
  if (t)
    cnn_tensor_release(t);
  else if (!strstr(cnn_error(), needle)) {
    fprintf(stderr, "%s: message \"%s\" lacks \"%s\"\n", what, cnn_error(), needle);
    CHECK(0);
  }
}

static void test_tensor_errors(void) {
  const uint8_t string_type[] = {0x08, 1, 0x10, 8};
  expect_tensor_error(string_type, sizeof string_type, "string", "cannot hold");
  const uint8_t short_raw[] = {0x08, 3, 0x10, 1, 0x4A, 8, 0, 0, 0, 0, 0, 0, 0, 0};
  expect_tensor_error(short_raw, sizeof short_raw, "short", "expected 12");
  const uint8_t few_values[] = {0x08, 3, 0x10, 1, 0x22, 4, 0, 0, 0, 0};
  expect_tensor_error(few_values, sizeof few_values, "few", "holds 1 values for 3 elements");
  /* dims -1 (ten-byte varint) */
  const uint8_t neg_dim[] = {0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                             0xFF, 0xFF, 0xFF, 0x01, 0x10, 1};
  expect_tensor_error(neg_dim, sizeof neg_dim, "negative", "negative or absurd");
  const uint8_t external[] = {0x08, 1, 0x10, 1, 0x70, 1};
  expect_tensor_error(external, sizeof external, "external", "external file");
  const uint8_t garbage[] = {0xFF, 0xFF, 0xFF};
  expect_tensor_error(garbage, sizeof garbage, "garbage", "not a valid TensorProto");
}

/* ---- 3. a model round trip ------------------------------------------------------------------ */

static char *sdup(const char *s) { return strdup(s); }

static cnn_onnx_model *small_model(void) {
  cnn_onnx_model *m = calloc(1, sizeof *m);
  m->ir_version = 8, m->opset_version = 13;
  m->producer_name = sdup("test"), m->producer_version = sdup("1"), m->graph_name = sdup("g");
  m->nnodes = 1;
  m->nodes = calloc(1, sizeof *m->nodes);
  cnn_onnx_node *n = &m->nodes[0];
  n->op_type = sdup("Gemm"), n->name = sdup("fc"), n->domain = sdup("");
  n->ninputs = 3, n->inputs = calloc(3, sizeof(char *));
  n->inputs[0] = sdup("x"), n->inputs[1] = sdup("W"), n->inputs[2] = sdup("");
  n->noutputs = 1, n->outputs = calloc(1, sizeof(char *)), n->outputs[0] = sdup("y");
  n->nattrs = 4, n->attrs = calloc(4, sizeof *n->attrs);
  n->attrs[0] = (cnn_onnx_attr){.name = sdup("transB"), .type = CNN_ONNX_INT, .i = 1};
  n->attrs[1] = (cnn_onnx_attr){.name = sdup("alpha"), .type = CNN_ONNX_FLOAT, .f = 0.5};
  n->attrs[2] =
      (cnn_onnx_attr){.name = sdup("axes"), .type = CNN_ONNX_INTS, .n = 2, .ints = calloc(2, 8)};
  n->attrs[2].ints[0] = -1, n->attrs[2].ints[1] = 3;
  n->attrs[3] = (cnn_onnx_attr){.name = sdup("mode"), .type = CNN_ONNX_STRING, .s = sdup("linear")};
  m->ninits = 1, m->inits = calloc(1, sizeof *m->inits);
  m->inits[0].name = sdup("W");
  float w[6] = {1, 2, 3, 4, 5, 6};
  m->inits[0].tensor = cnn_from_buffer(2, (int64_t[]){3, 2}, CNN_FLOAT32, w);
  m->ninputs = 1, m->inputs = calloc(1, sizeof *m->inputs);
  m->inputs[0] = (cnn_onnx_value){.name = sdup("x"),
                                  .elem_type = 1,
                                  .ndim = 2,
                                  .dims = calloc(2, 8),
                                  .dim_params = calloc(2, sizeof(char *))};
  m->inputs[0].dims[0] = -1, m->inputs[0].dim_params[0] = sdup("batch"), m->inputs[0].dims[1] = 2;
  m->noutputs = 1, m->outputs = calloc(1, sizeof *m->outputs);
  m->outputs[0] = (cnn_onnx_value){.name = sdup("y"), .elem_type = 1, .ndim = -1};
  return m;
}

static void check_round_trip(const cnn_onnx_model *r) {
  CHECK(r->opset_version == 13 && r->ir_version == 8 && strcmp(r->producer_name, "test") == 0);
  CHECK(r->nnodes == 1 && strcmp(r->nodes[0].op_type, "Gemm") == 0 &&
        strcmp(r->nodes[0].name, "fc") == 0);
  const cnn_onnx_node *n = &r->nodes[0];
  CHECK(n->ninputs == 3 && strcmp(n->inputs[1], "W") == 0 && strcmp(n->inputs[2], "") == 0);
  CHECK(n->nattrs == 4 && n->attrs[0].type == CNN_ONNX_INT && n->attrs[0].i == 1);
  CHECK(n->attrs[1].type == CNN_ONNX_FLOAT && n->attrs[1].f == 0.5);
  CHECK(n->attrs[2].type == CNN_ONNX_INTS && n->attrs[2].n == 2 && n->attrs[2].ints[0] == -1);
  CHECK(n->attrs[3].type == CNN_ONNX_STRING && strcmp(n->attrs[3].s, "linear") == 0);
  CHECK(r->ninits == 1 && strcmp(r->inits[0].name, "W") == 0);
  const cnn_tensor *w = r->inits[0].tensor;
  CHECK(w->ndim == 2 && w->shape[0] == 3 && ((float *)cnn_tensor_data(w))[5] == 6.0f);
  CHECK(r->ninputs == 1 && r->inputs[0].ndim == 2 &&
        strcmp(r->inputs[0].dim_params[0], "batch") == 0 && r->inputs[0].dims[1] == 2);
  CHECK(r->noutputs == 1 && r->outputs[0].ndim == -1);
}

static void test_model_round_trip(void) {
  char path[256];
  snprintf(path, sizeof path, "%s/cnn_onnx_test_%d.onnx",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
  cnn_onnx_model *m = small_model();
  CHECK(cnn_onnx_save(path, m) == 0);
  cnn_onnx_model_free(m);
  cnn_onnx_model *r = cnn_onnx_load(path);
  CHECK(r != NULL);
  if (r) check_round_trip(r);
  cnn_onnx_model_free(r);
  size_t len = 0;
  uint8_t *bytes = slurp(path, &len);
  CHECK(bytes && len > 40);
  for (size_t cut = 0; bytes && cut < len; cut++) { /* every prefix */
    cnn_onnx_model *p = cnn_onnx_parse(bytes, cut, "prefix");
    if (!p) CHECK(strncmp(cnn_error(), "onnx: ", 6) == 0);
    cnn_onnx_model_free(p);
  }
  free(bytes);
  unlink(path);
}

/* ---- 4. nesting ------------------------------------------------------------------------------- */

/* out = tag(field, 2) varint(len) payload */
static size_t wrap(uint8_t *out, int field, const uint8_t *payload, size_t n) {
  size_t k = 0;
  out[k++] = (uint8_t)(field << 3 | 2);
  size_t v = n;
  do {
    out[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  memmove(out + k, payload, n);
  return k + n;
}

static void test_deep_nesting(void) {
  size_t cap = 1 << 16, n = 0;
  uint8_t *a = calloc(cap, 1), *b = calloc(cap, 1);
  for (int level = 0; level < 300; level++) { /* Graph.node{Node.attribute{Attribute.g{...}}} */
    n = wrap(b, 6, a, n);
    n = wrap(a, 5, b, n);
    n = wrap(b, 1, a, n);
    memcpy(a, b, n);
  }
  n = wrap(b, 7, a, n); /* Model.graph */
  cnn_onnx_model *m = cnn_onnx_parse(b, n, "deep");
  CHECK(m == NULL && strstr(cnn_error(), "nested too deep"));
  cnn_onnx_model_free(m);
  free(a);
  free(b);
}

int main(void) {
  test_tensor_bytes();
  test_tensor_errors();
  test_model_round_trip();
  test_deep_nesting();
  return check_report("test_onnx");
}
