/*
 * onnx_read.c -- reading an ONNX model into cnn_onnx_model (io.h).
 *
 * protobuf-c's generated unpacker (onnx.pb-c.c, from Debian's onnx.proto)
 * decodes the bytes; it checks every length against the buffer, so a
 * truncated or corrupt file fails there.  This file then copies what cnnsh
 * uses out of the decoded message, validating as it goes: a graph must be
 * present, every node needs an op_type, names must be present where the IR
 * requires them, counts must fit an int, strings must hold no NUL, and every
 * tensor goes through cnn_onnx_tensor_from_proto's checks.  Any failure frees
 * what was built (cnn_onnx_model_free copes with a half-filled model) and
 * returns NULL with a message naming the file and the node or tensor.
 */
#include "onnx_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COUNT (1 << 24) /* nodes, inputs, attributes, list entries */

typedef struct {
  const char *what; /* the file, for messages */
  bool failed;
} reader;

static void *alloc_n(reader *r, size_t n, size_t size) {
  if (r->failed) return NULL;
  if (n > MAX_COUNT) {
    cnn_set_error("onnx: %s: a list of %zu entries is too long", r->what, n);
    r->failed = true;
    return NULL;
  }
  void *p = calloc(n ? n : 1, size);
  if (!p) {
    cnn_set_error("onnx: %s: out of memory", r->what);
    r->failed = true;
  }
  return p;
}

static char *dup_str(reader *r, const char *s) {
  if (r->failed) return NULL;
  char *d = strdup(s ? s : "");
  if (!d) {
    cnn_set_error("onnx: %s: out of memory", r->what);
    r->failed = true;
  }
  return d;
}

static void fail(reader *r, const char *fmt, const char *a, const char *b) {
  if (r->failed) return;
  char msg[256];
  snprintf(msg, sizeof msg, fmt, a, b);
  cnn_set_error("onnx: %s: %s", r->what, msg);
  r->failed = true;
}

/* a protobuf `bytes` field as a C string (refused if it holds a NUL) */
static char *dup_bytes(reader *r, ProtobufCBinaryData b, const char *attr) {
  if (r->failed) return NULL;
  if (b.len && memchr(b.data, 0, b.len)) {
    fail(r, "attribute '%s' holds a string with a NUL byte%s", attr, "");
    return NULL;
  }
  char *s = alloc_n(r, b.len + 1, 1);
  if (s && b.len) memcpy(s, b.data, b.len);
  return s;
}

static char **dup_strs(reader *r, size_t n, char *const *src) {
  char **out = alloc_n(r, n, sizeof *out);
  for (size_t i = 0; out && i < n; i++) out[i] = dup_str(r, src[i]);
  return out;
}

/* ---- attributes ------------------------------------------------------------------ */

static void read_lists(reader *r, const Onnx__AttributeProto *a, cnn_onnx_attr *o) {
  if (o->type == CNN_ONNX_FLOATS) {
    o->n = (int)a->n_floats;
    o->floats = alloc_n(r, a->n_floats, sizeof(double));
    for (size_t k = 0; o->floats && k < a->n_floats; k++) o->floats[k] = a->floats[k];
  } else if (o->type == CNN_ONNX_INTS) {
    o->n = (int)a->n_ints;
    o->ints = alloc_n(r, a->n_ints, sizeof(int64_t));
    if (o->ints && a->n_ints) memcpy(o->ints, a->ints, a->n_ints * sizeof(int64_t));
  } else if (o->type == CNN_ONNX_STRINGS) {
    o->n = (int)a->n_strings;
    o->strings = alloc_n(r, a->n_strings, sizeof(char *));
    for (size_t k = 0; o->strings && k < a->n_strings; k++)
      o->strings[k] = dup_bytes(r, a->strings[k], a->name);
  }
}

static void read_attr(reader *r, const Onnx__AttributeProto *a, cnn_onnx_attr *o,
                      const char *node) {
  if (!a->name || !*a->name)
    return fail(r, "node '%s' has an attribute without a name%s", node, "");
  o->name = dup_str(r, a->name);
  o->type = a->has_type ? (int)a->type : 0;
  switch (o->type) {
  case CNN_ONNX_FLOAT: o->f = a->f; break;
  case CNN_ONNX_INT: o->i = a->i; break;
  case CNN_ONNX_STRING: o->s = dup_bytes(r, a->s, a->name); break;
  case CNN_ONNX_TENSOR:
    if (!a->t) return fail(r, "attribute '%s' of node '%s' has no tensor", a->name, node);
    if (!r->failed && !(o->t = cnn_onnx_tensor_from_proto(a->t, r->what))) r->failed = true;
    break;
  case CNN_ONNX_FLOATS:
  case CNN_ONNX_INTS:
  case CNN_ONNX_STRINGS: read_lists(r, a, o); break;
  case 0: return fail(r, "attribute '%s' of node '%s' has no type", a->name, node);
  default: break; /* graphs, sparse tensors, type protos: named by the loader */
  }
}

/* ---- nodes ----------------------------------------------------------------------- */

static void read_node(reader *r, const Onnx__NodeProto *n, cnn_onnx_node *o, size_t index) {
  char idx[32];
  snprintf(idx, sizeof idx, "#%zu", index + 1);
  const char *label = n->name && *n->name ? n->name : idx;
  if (!n->op_type || !*n->op_type) return fail(r, "node %s has no op_type%s", label, "");
  o->op_type = dup_str(r, n->op_type);
  o->name = dup_str(r, n->name);
  o->domain = dup_str(r, n->domain);
  o->ninputs = (int)n->n_input, o->noutputs = (int)n->n_output;
  o->inputs = dup_strs(r, n->n_input, n->input);
  o->outputs = dup_strs(r, n->n_output, n->output);
  o->attrs = alloc_n(r, n->n_attribute, sizeof *o->attrs);
  if (r->failed) return;
  o->nattrs = (int)n->n_attribute;
  for (size_t k = 0; k < n->n_attribute && !r->failed; k++)
    read_attr(r, n->attribute[k], &o->attrs[k], label);
}

/* ---- graph inputs and outputs ---------------------------------------------------- */

static void read_dims(reader *r, const Onnx__TensorShapeProto *s, cnn_onnx_value *o) {
  o->ndim = (int)s->n_dim;
  o->dims = alloc_n(r, s->n_dim, sizeof(int64_t));
  o->dim_params = alloc_n(r, s->n_dim, sizeof(char *));
  for (size_t d = 0; !r->failed && d < s->n_dim; d++) {
    const Onnx__TensorShapeProto__Dimension *dim = s->dim[d];
    o->dims[d] = -1;
    if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
        dim->dim_value >= 0)
      o->dims[d] = dim->dim_value;
    else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
      o->dim_params[d] = dup_str(r, dim->dim_param);
  }
}

static void read_value(reader *r, const Onnx__ValueInfoProto *v, cnn_onnx_value *o) {
  if (!v->name || !*v->name) return fail(r, "a graph input or output has no name%s%s", "", "");
  o->name = dup_str(r, v->name);
  o->ndim = -1;
  const Onnx__TypeProto *tp = v->type;
  if (tp && tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
    o->elem_type = -1; /* sequence, map, ... */
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) return;
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  o->elem_type = tt->has_elem_type ? tt->elem_type : 0;
  if (tt->shape) read_dims(r, tt->shape, o);
}

static void read_values(reader *r, size_t n, Onnx__ValueInfoProto **src, cnn_onnx_value **out,
                        int *count) {
  *out = alloc_n(r, n, sizeof **out);
  if (r->failed) return;
  *count = (int)n;
  for (size_t k = 0; k < n && !r->failed; k++) read_value(r, src[k], &(*out)[k]);
}

/* ---- the model ------------------------------------------------------------------- */

static void read_inits(reader *r, const Onnx__GraphProto *g, cnn_onnx_model *m) {
  m->inits = alloc_n(r, g->n_initializer, sizeof *m->inits);
  if (r->failed) return;
  m->ninits = (int)g->n_initializer;
  for (size_t k = 0; k < g->n_initializer && !r->failed; k++) {
    const Onnx__TensorProto *t = g->initializer[k];
    if (!t->name || !*t->name) return fail(r, "an initializer has no name%s%s", "", "");
    m->inits[k].name = dup_str(r, t->name);
    if (!r->failed && !(m->inits[k].tensor = cnn_onnx_tensor_from_proto(t, r->what)))
      r->failed = true;
  }
}

static void read_opset(reader *r, const Onnx__ModelProto *p, cnn_onnx_model *m) {
  for (size_t k = 0; k < p->n_opset_import; k++) {
    const Onnx__OperatorSetIdProto *o = p->opset_import[k];
    bool dflt = !o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0;
    if (dflt && o->has_version) m->opset_version = o->version;
  }
  if (m->opset_version <= 0)
    fail(r, "the model imports no version of the default opset%s%s", "", "");
}

static void read_model(reader *r, const Onnx__ModelProto *p, cnn_onnx_model *m) {
  const Onnx__GraphProto *g = p->graph;
  if (!g) return fail(r, "the model has no graph%s%s", "", "");
  m->ir_version = p->has_ir_version ? p->ir_version : 0;
  read_opset(r, p, m);
  m->producer_name = dup_str(r, p->producer_name);
  m->producer_version = dup_str(r, p->producer_version);
  m->graph_name = dup_str(r, g->name);
  m->nodes = alloc_n(r, g->n_node, sizeof *m->nodes);
  if (r->failed) return;
  m->nnodes = (int)g->n_node;
  for (size_t k = 0; k < g->n_node && !r->failed; k++) read_node(r, g->node[k], &m->nodes[k], k);
  read_inits(r, g, m);
  read_values(r, g->n_input, g->input, &m->inputs, &m->ninputs);
  read_values(r, g->n_output, g->output, &m->outputs, &m->noutputs);
}

cnn_onnx_model *cnn_onnx_parse(const uint8_t *buf, size_t len, const char *what) {
  if (!cnn_onnx_nesting_ok(buf, len, &onnx__model_proto__descriptor)) {
    cnn_set_error("onnx: %s: not a valid ONNX model (broken framing, or messages nested too deep)",
                  what);
    return NULL;
  }
  Onnx__ModelProto *p = onnx__model_proto__unpack(NULL, len, buf);
  if (!p) {
    cnn_set_error("onnx: %s: not a valid ONNX model (protobuf decoding failed)", what);
    return NULL;
  }
  reader r = {what, false};
  cnn_onnx_model *m = alloc_n(&r, 1, sizeof *m);
  if (m) read_model(&r, p, m);
  onnx__model_proto__free_unpacked(p, NULL);
  if (r.failed) {
    cnn_onnx_model_free(m);
    return NULL;
  }
  return m;
}

cnn_onnx_model *cnn_onnx_load(const char *path) {
  uint8_t *buf;
  size_t len;
  if (cnn_io_read_file("onnx", path, &buf, &len) < 0) return NULL;
  cnn_onnx_model *m = cnn_onnx_parse(buf, len, path);
  free(buf);
  return m;
}

/* ---- freeing ---------------------------------------------------------------------- */

static void free_strs(char **s, int n) {
  for (int i = 0; s && i < n; i++) free(s[i]);
  free(s);
}

static void free_attr(cnn_onnx_attr *a) {
  free(a->name);
  free(a->s);
  if (a->t) cnn_tensor_release(a->t);
  free(a->floats);
  free(a->ints);
  free_strs(a->strings, a->n);
}

static void free_node(cnn_onnx_node *n) {
  free(n->op_type);
  free(n->name);
  free(n->domain);
  free_strs(n->inputs, n->ninputs);
  free_strs(n->outputs, n->noutputs);
  for (int k = 0; n->attrs && k < n->nattrs; k++) free_attr(&n->attrs[k]);
  free(n->attrs);
}

static void free_values(cnn_onnx_value *v, int n) {
  for (int k = 0; v && k < n; k++) {
    free(v[k].name);
    free_strs(v[k].dim_params, v[k].ndim > 0 ? v[k].ndim : 0);
    free(v[k].dims);
  }
  free(v);
}

void cnn_onnx_model_free(cnn_onnx_model *m) {
  if (!m) return;
  for (int k = 0; m->nodes && k < m->nnodes; k++) free_node(&m->nodes[k]);
  free(m->nodes);
  for (int k = 0; m->inits && k < m->ninits; k++) {
    free(m->inits[k].name);
    if (m->inits[k].tensor) cnn_tensor_release(m->inits[k].tensor);
  }
  free(m->inits);
  free_values(m->inputs, m->ninputs);
  free_values(m->outputs, m->noutputs);
  free(m->producer_name);
  free(m->producer_version);
  free(m->graph_name);
  free(m);
}
