/*
 * onnx_write.c -- writing a cnn_onnx_model (io.h) as an ONNX ModelProto.
 *
 * The model is translated into protoc-c's generated structs (onnx.pb-c.h)
 * and packed by libprotobuf-c: no protobuf encoding is written by hand.
 * The structs borrow the model's strings and arrays; what must be built
 * (the message structs, the double -> float attribute lists, the host
 * copies of tensors) lives in a small arena freed after packing.  Tensors
 * are written as raw little-endian data.  The file goes through the atomic
 * writer of io_util.c, so a failure leaves the target untouched.
 */
#include "onnx_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  void **blocks; /* everything calloc'd for the messages */
  int nblocks, capblocks;
  void **keep; /* cnn_tensor *: host copies the raw data points into */
  int nkeep, capkeep;
  bool failed;
} arena;

static bool grow(void ***list, int *cap, int need) {
  if (need <= *cap) return true;
  int cap2 = *cap ? *cap * 2 : 64;
  void **p = realloc(*list, (size_t)cap2 * sizeof *p);
  if (!p) return false;
  *list = p, *cap = cap2;
  return true;
}

static void *arena_alloc(arena *a, size_t n, size_t size) {
  if (a->failed) return NULL;
  void *p = calloc(n ? n : 1, size);
  if (!p || !grow(&a->blocks, &a->capblocks, a->nblocks + 1)) {
    free(p);
    cnn_set_error("onnx: out of memory while building the model");
    a->failed = true;
    return NULL;
  }
  a->blocks[a->nblocks++] = p;
  return p;
}

static void arena_free(arena *a) {
  for (int i = 0; i < a->nblocks; i++) free(a->blocks[i]);
  free(a->blocks);
  for (int i = 0; i < a->nkeep; i++) cnn_tensor_release((cnn_tensor *)a->keep[i]);
  free(a->keep);
}

static Onnx__TensorProto *tensor_proto(arena *a, cnn_tensor *t, const char *name) {
  Onnx__TensorProto *p = arena_alloc(a, 1, sizeof *p);
  if (!p) return NULL;
  onnx__tensor_proto__init(p);
  if (!grow(&a->keep, &a->capkeep, a->nkeep + 1)) {
    cnn_set_error("onnx: out of memory while building the model");
    a->failed = true;
    return NULL;
  }
  cnn_tensor *keep;
  if (cnn_onnx_tensor_to_proto(t, name, p, &keep) < 0) {
    a->failed = true;
    return NULL;
  }
  a->keep[a->nkeep++] = keep;
  return p;
}

/* ---- attributes and nodes ----------------------------------------------------------- */

static void attr_lists(arena *a, const cnn_onnx_attr *s, Onnx__AttributeProto *p) {
  if (s->type == CNN_ONNX_FLOATS) {
    p->n_floats = (size_t)s->n;
    p->floats = arena_alloc(a, (size_t)s->n, sizeof(float));
    for (int k = 0; p->floats && k < s->n; k++) p->floats[k] = (float)s->floats[k];
  } else if (s->type == CNN_ONNX_INTS) {
    p->n_ints = (size_t)s->n;
    p->ints = s->ints;
  } else {
    p->n_strings = (size_t)s->n;
    p->strings = arena_alloc(a, (size_t)s->n, sizeof *p->strings);
    for (int k = 0; p->strings && k < s->n; k++)
      p->strings[k] = (ProtobufCBinaryData){strlen(s->strings[k]), (uint8_t *)s->strings[k]};
  }
}

static Onnx__AttributeProto *attr_proto(arena *a, const cnn_onnx_attr *s) {
  Onnx__AttributeProto *p = arena_alloc(a, 1, sizeof *p);
  if (!p) return NULL;
  onnx__attribute_proto__init(p);
  p->name = s->name;
  p->has_type = 1;
  p->type = (Onnx__AttributeProto__AttributeType)s->type;
  switch (s->type) {
  case CNN_ONNX_FLOAT: p->has_f = 1, p->f = (float)s->f; break;
  case CNN_ONNX_INT: p->has_i = 1, p->i = s->i; break;
  case CNN_ONNX_STRING:
    p->has_s = 1, p->s = (ProtobufCBinaryData){strlen(s->s), (uint8_t *)s->s};
    break;
  case CNN_ONNX_TENSOR: p->t = tensor_proto(a, s->t, ""); break;
  case CNN_ONNX_FLOATS:
  case CNN_ONNX_INTS:
  case CNN_ONNX_STRINGS: attr_lists(a, s, p); break;
  default:
    cnn_set_error("onnx: attribute '%s' has type %d, which cnnsh does not write", s->name, s->type);
    a->failed = true;
  }
  return p;
}

static Onnx__NodeProto *node_proto(arena *a, const cnn_onnx_node *s) {
  Onnx__NodeProto *p = arena_alloc(a, 1, sizeof *p);
  if (!p) return NULL;
  onnx__node_proto__init(p);
  p->op_type = s->op_type;
  p->name = s->name && *s->name ? s->name : NULL;
  p->domain = s->domain && *s->domain ? s->domain : NULL;
  p->n_input = (size_t)s->ninputs, p->input = s->inputs;
  p->n_output = (size_t)s->noutputs, p->output = s->outputs;
  p->n_attribute = (size_t)s->nattrs;
  p->attribute = arena_alloc(a, (size_t)s->nattrs, sizeof *p->attribute);
  for (int k = 0; p->attribute && k < s->nattrs; k++) p->attribute[k] = attr_proto(a, &s->attrs[k]);
  return p;
}

/* ---- graph inputs and outputs ------------------------------------------------------- */

static Onnx__TensorShapeProto *shape_proto(arena *a, const cnn_onnx_value *s) {
  Onnx__TensorShapeProto *sp = arena_alloc(a, 1, sizeof *sp);
  if (!sp) return NULL;
  onnx__tensor_shape_proto__init(sp);
  sp->n_dim = (size_t)s->ndim;
  sp->dim = arena_alloc(a, (size_t)s->ndim, sizeof *sp->dim);
  for (int d = 0; sp->dim && d < s->ndim; d++) {
    Onnx__TensorShapeProto__Dimension *dim = arena_alloc(a, 1, sizeof *dim);
    if (!dim) return sp;
    onnx__tensor_shape_proto__dimension__init(dim);
    if (s->dim_params && s->dim_params[d]) {
      dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      dim->dim_param = s->dim_params[d];
    } else if (s->dims[d] >= 0) {
      dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      dim->dim_value = s->dims[d];
    }
    sp->dim[d] = dim;
  }
  return sp;
}

static Onnx__ValueInfoProto *value_proto(arena *a, const cnn_onnx_value *s) {
  Onnx__ValueInfoProto *v = arena_alloc(a, 1, sizeof *v);
  Onnx__TypeProto *tp = arena_alloc(a, 1, sizeof *tp);
  Onnx__TypeProto__Tensor *tt = arena_alloc(a, 1, sizeof *tt);
  if (!v || !tp || !tt) return NULL;
  onnx__value_info_proto__init(v);
  onnx__type_proto__init(tp);
  onnx__type_proto__tensor__init(tt);
  v->name = s->name;
  v->type = tp;
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = tt;
  tt->has_elem_type = 1;
  tt->elem_type = s->elem_type ? s->elem_type : 1;
  if (s->ndim >= 0) tt->shape = shape_proto(a, s);
  return v;
}

static Onnx__ValueInfoProto **value_protos(arena *a, const cnn_onnx_value *s, int n) {
  Onnx__ValueInfoProto **v = arena_alloc(a, (size_t)n, sizeof *v);
  for (int k = 0; v && k < n; k++) v[k] = value_proto(a, &s[k]);
  return v;
}

/* ---- the model ------------------------------------------------------------------------ */

static Onnx__GraphProto *graph_proto(arena *a, const cnn_onnx_model *m) {
  Onnx__GraphProto *g = arena_alloc(a, 1, sizeof *g);
  if (!g) return NULL;
  onnx__graph_proto__init(g);
  g->name = m->graph_name && *m->graph_name ? m->graph_name : "cnnsh";
  g->n_node = (size_t)m->nnodes;
  g->node = arena_alloc(a, (size_t)m->nnodes, sizeof *g->node);
  for (int k = 0; g->node && k < m->nnodes; k++) g->node[k] = node_proto(a, &m->nodes[k]);
  g->n_initializer = (size_t)m->ninits;
  g->initializer = arena_alloc(a, (size_t)m->ninits, sizeof *g->initializer);
  for (int k = 0; g->initializer && k < m->ninits; k++)
    g->initializer[k] = tensor_proto(a, m->inits[k].tensor, m->inits[k].name);
  g->n_input = (size_t)m->ninputs, g->input = value_protos(a, m->inputs, m->ninputs);
  g->n_output = (size_t)m->noutputs, g->output = value_protos(a, m->outputs, m->noutputs);
  return g;
}

static int check_model(const cnn_onnx_model *m) {
  for (int k = 0; k < m->nnodes; k++)
    if (!m->nodes[k].op_type || !*m->nodes[k].op_type) {
      cnn_set_error("onnx: save: node %d has no op_type", k + 1);
      return -1;
    }
  for (int k = 0; k < m->ninits; k++)
    if (!m->inits[k].name || !*m->inits[k].name || !m->inits[k].tensor) {
      cnn_set_error("onnx: save: initializer %d needs a name and a tensor", k + 1);
      return -1;
    }
  return 0;
}

/* packs into a malloc'd buffer; NULL on failure */
static uint8_t *pack_model(const cnn_onnx_model *m, arena *a, size_t *len) {
  Onnx__ModelProto p;
  onnx__model_proto__init(&p);
  Onnx__OperatorSetIdProto op;
  onnx__operator_set_id_proto__init(&op);
  Onnx__OperatorSetIdProto *ops[1] = {&op};
  op.has_version = 1, op.version = m->opset_version;
  p.has_ir_version = 1, p.ir_version = m->ir_version;
  p.n_opset_import = 1, p.opset_import = ops;
  p.producer_name = m->producer_name;
  p.producer_version = m->producer_version;
  p.graph = graph_proto(a, m);
  if (a->failed) return NULL;
  *len = onnx__model_proto__get_packed_size(&p);
  uint8_t *buf = malloc(*len ? *len : 1);
  if (!buf) {
    cnn_set_error("onnx: save: out of memory for a %zu-byte model", *len);
    return NULL;
  }
  onnx__model_proto__pack(&p, buf);
  return buf;
}

int cnn_onnx_save(const char *path, const cnn_onnx_model *m) {
  if (check_model(m) < 0) return -1;
  arena a = {0};
  size_t len = 0;
  uint8_t *buf = pack_model(m, &a, &len);
  arena_free(&a);
  if (!buf) return -1;
  cnn_io_atomic w;
  int rc = cnn_io_atomic_open(&w, "onnx", path);
  if (rc == 0 && (rc = cnn_io_atomic_write(&w, buf, len)) == 0)
    rc = cnn_io_atomic_commit(&w);
  else
    cnn_io_atomic_abort(&w);
  free(buf);
  return rc;
}
