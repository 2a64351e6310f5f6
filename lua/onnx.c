/*
 * onnx.c -- ONNX files from Lua: cnn.io.onnx_read(path) -> model table,
 * cnn.io.onnx_write(path, model), cnn.io.onnx_read_tensor(path) -> tensor.
 * stdlib/onnx.lua (cnn.onnx) maps graphs to modules and back on top.
 *
 * The model table mirrors cnn_onnx_model (core/io/io.h):
 *   { ir_version = 8, opset = 13, producer_name = "...", producer_version,
 *     graph_name,
 *     nodes = { { op_type = "Conv", name = "...", domain = "",
 *                 inputs = {"x", "w", ""}, outputs = {"y"},
 *                 attrs = { strides = {1, 1}, alpha = 0.5, mode = "constant",
 *                           value = <tensor>, body = false } }, ... },
 *     initializers = { { name = "1.weight", tensor = <tensor> }, ... },
 *     inputs  = { { name = "input", elem_type = 1, shape = {"batch", 1, 28, 28} }, ... },
 *     outputs = { ... } }
 * Attribute values: FLOAT a Lua float, INT an integer, STRING a string,
 * TENSOR a tensor, FLOATS/INTS/STRINGS a list, other kinds `false`.  On
 * writing the Lua type decides: an integer -> INT, a float -> FLOAT, a list
 * of integers -> INTS (an empty list too), a list with a float -> FLOATS,
 * a list of strings -> STRINGS.  Shape entries: an integer size, a string
 * (a symbolic dim), or -1 (unknown); no shape means an unknown rank.
 *
 * Writing builds a cnn_onnx_model inside a box userdata whose __gc frees
 * it, so a Lua error halfway (a bad field) never leaks.
 */
#include <stdlib.h>
#include <string.h>

#include "bind.h"
#include "io/io.h"

#define MODEL_MT "cnn.OnnxModel"

/* ---- reading ------------------------------------------------------------------ */

static void push_strings(lua_State *L, char **s, int n) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushstring(L, s[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

static void push_attr(lua_State *L, const cnn_onnx_attr *a) {
  switch (a->type) {
  case CNN_ONNX_FLOAT: lua_pushnumber(L, a->f); break;
  case CNN_ONNX_INT: lua_pushinteger(L, a->i); break;
  case CNN_ONNX_STRING: lua_pushstring(L, a->s); break;
  case CNN_ONNX_TENSOR: cnn_tensor_retain(a->t), cnn_lua_push_tensor(L, a->t); break;
  case CNN_ONNX_STRINGS: push_strings(L, a->strings, a->n); break;
  case CNN_ONNX_FLOATS:
  case CNN_ONNX_INTS:
    lua_createtable(L, a->n, 0);
    for (int i = 0; i < a->n; i++) {
      if (a->type == CNN_ONNX_INTS)
        lua_pushinteger(L, a->ints[i]);
      else
        lua_pushnumber(L, a->floats[i]);
      lua_rawseti(L, -2, i + 1);
    }
    break;
  default: lua_pushboolean(L, 0); break;
  }
}

static void push_node(lua_State *L, const cnn_onnx_node *n) {
  lua_createtable(L, 0, 6);
  lua_pushstring(L, n->op_type);
  lua_setfield(L, -2, "op_type");
  lua_pushstring(L, n->name);
  lua_setfield(L, -2, "name");
  lua_pushstring(L, n->domain);
  lua_setfield(L, -2, "domain");
  push_strings(L, n->inputs, n->ninputs);
  lua_setfield(L, -2, "inputs");
  push_strings(L, n->outputs, n->noutputs);
  lua_setfield(L, -2, "outputs");
  lua_createtable(L, 0, n->nattrs);
  for (int k = 0; k < n->nattrs; k++) {
    push_attr(L, &n->attrs[k]);
    lua_setfield(L, -2, n->attrs[k].name);
  }
  lua_setfield(L, -2, "attrs");
}

static void push_values(lua_State *L, const cnn_onnx_value *v, int n) {
  lua_createtable(L, n, 0);
  for (int k = 0; k < n; k++) {
    lua_createtable(L, 0, 3);
    lua_pushstring(L, v[k].name);
    lua_setfield(L, -2, "name");
    lua_pushinteger(L, v[k].elem_type);
    lua_setfield(L, -2, "elem_type");
    if (v[k].ndim >= 0) {
      lua_createtable(L, v[k].ndim, 0);
      for (int d = 0; d < v[k].ndim; d++) {
        if (v[k].dim_params[d])
          lua_pushstring(L, v[k].dim_params[d]);
        else
          lua_pushinteger(L, v[k].dims[d]);
        lua_rawseti(L, -2, d + 1);
      }
      lua_setfield(L, -2, "shape");
    }
    lua_rawseti(L, -2, k + 1);
  }
}

static void push_model(lua_State *L, const cnn_onnx_model *m) {
  luaL_checkstack(L, 16, "onnx_read");
  lua_createtable(L, 0, 10);
  lua_pushinteger(L, m->ir_version);
  lua_setfield(L, -2, "ir_version");
  lua_pushinteger(L, m->opset_version);
  lua_setfield(L, -2, "opset");
  lua_pushstring(L, m->producer_name);
  lua_setfield(L, -2, "producer_name");
  lua_pushstring(L, m->producer_version);
  lua_setfield(L, -2, "producer_version");
  lua_pushstring(L, m->graph_name);
  lua_setfield(L, -2, "graph_name");
  lua_createtable(L, m->nnodes, 0);
  for (int k = 0; k < m->nnodes; k++) {
    push_node(L, &m->nodes[k]);
    lua_rawseti(L, -2, k + 1);
  }
  lua_setfield(L, -2, "nodes");
  lua_createtable(L, m->ninits, 0);
  for (int k = 0; k < m->ninits; k++) {
    lua_createtable(L, 0, 2);
    lua_pushstring(L, m->inits[k].name);
    lua_setfield(L, -2, "name");
    cnn_tensor_retain(m->inits[k].tensor);
    cnn_lua_push_tensor(L, m->inits[k].tensor);
    lua_setfield(L, -2, "tensor");
    lua_rawseti(L, -2, k + 1);
  }
  lua_setfield(L, -2, "initializers");
  push_values(L, m->inputs, m->ninputs);
  lua_setfield(L, -2, "inputs");
  push_values(L, m->outputs, m->noutputs);
  lua_setfield(L, -2, "outputs");
}

static int model_gc(lua_State *L) {
  cnn_onnx_model **box = luaL_checkudata(L, 1, MODEL_MT);
  cnn_onnx_model_free(*box);
  *box = NULL;
  return 0;
}

static cnn_onnx_model **new_box(lua_State *L) {
  cnn_onnx_model **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  luaL_setmetatable(L, MODEL_MT);
  return box;
}

static int f_onnx_read(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  cnn_onnx_model **box = new_box(L);
  if (!(*box = cnn_onnx_load(path))) return cnn_lua_fail(L, "onnx_read: %s", cnn_error());
  push_model(L, *box);
  return 1;
}

static int f_onnx_read_tensor(lua_State *L) {
  cnn_tensor *t = cnn_onnx_tensor_load(luaL_checkstring(L, 1));
  if (!t) return cnn_lua_fail(L, "onnx_read_tensor: %s", cnn_error());
  return cnn_lua_push_result(L, t);
}

/* ---- writing ---------------------------------------------------------------------- */

static void *xcalloc(lua_State *L, size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) cnn_lua_fail(L, "onnx_write: out of memory");
  return p;
}

static char *xstrdup(lua_State *L, const char *s) {
  char *d = strdup(s);
  if (!d) cnn_lua_fail(L, "onnx_write: out of memory");
  return d;
}

/* t[key] as a string copy; `def` when absent (NULL: required) */
static char *field_str(lua_State *L, int t, const char *key, const char *def, const char *where) {
  int ty = lua_getfield(L, t, key);
  if (ty == LUA_TNIL && def) {
    lua_pop(L, 1);
    return xstrdup(L, def);
  }
  if (ty != LUA_TSTRING)
    cnn_lua_fail(L, "onnx_write: %s.%s must be a string, got %s", where, key, lua_typename(L, ty));
  char *s = xstrdup(L, lua_tostring(L, -1));
  lua_pop(L, 1);
  return s;
}

/* the list t[key] (a table) pushed; its length returned */
static int field_list(lua_State *L, int t, const char *key, const char *where) {
  if (lua_getfield(L, t, key) != LUA_TTABLE)
    cnn_lua_fail(L, "onnx_write: %s.%s must be a list", where, key);
  lua_Integer n = luaL_len(L, -1);
  if (n < 0 || n > (1 << 24)) cnn_lua_fail(L, "onnx_write: %s.%s is too long", where, key);
  return (int)n;
}

/* *out = a copy of the list of strings t[key], *n its length.  Each
 * allocation is stored in the model before the next may raise. */
static void string_list(lua_State *L, int t, const char *key, char ***out, int *n,
                        const char *where) {
  int len = field_list(L, t, key, where);
  *out = xcalloc(L, (size_t)len, sizeof **out);
  *n = len;
  int list = lua_gettop(L);
  for (int i = 0; i < len; i++) {
    if (lua_geti(L, list, i + 1) != LUA_TSTRING)
      cnn_lua_fail(L, "onnx_write: %s.%s[%d] must be a string", where, key, i + 1);
    (*out)[i] = xstrdup(L, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* The list at the top of the stack: kind INTS, FLOATS or STRINGS. */
static int list_kind(lua_State *L, int list, int n, const char *name) {
  int kind = CNN_ONNX_INTS;
  for (int i = 1; i <= n; i++) {
    int ty = lua_geti(L, list, i);
    if (ty == LUA_TSTRING)
      kind = CNN_ONNX_STRINGS;
    else if (ty != LUA_TNUMBER)
      cnn_lua_fail(L, "onnx_write: attribute %s[%d] is a %s", name, i, lua_typename(L, ty));
    else if (!lua_isinteger(L, -1) && kind == CNN_ONNX_INTS)
      kind = CNN_ONNX_FLOATS;
    lua_pop(L, 1);
  }
  return kind;
}

static void attr_list(lua_State *L, int list, cnn_onnx_attr *a) {
  lua_Integer n = luaL_len(L, list);
  if (n < 0 || n > (1 << 24)) cnn_lua_fail(L, "onnx_write: attribute %s is too long", a->name);
  a->type = list_kind(L, list, (int)n, a->name);
  if (a->type == CNN_ONNX_INTS)
    a->ints = xcalloc(L, (size_t)n, sizeof(int64_t));
  else if (a->type == CNN_ONNX_FLOATS)
    a->floats = xcalloc(L, (size_t)n, sizeof(double));
  else
    a->strings = xcalloc(L, (size_t)n, sizeof(char *));
  a->n = (int)n;
  for (int i = 0; i < n; i++) {
    lua_geti(L, list, i + 1);
    if (a->type == CNN_ONNX_INTS)
      a->ints[i] = lua_tointeger(L, -1);
    else if (a->type == CNN_ONNX_FLOATS)
      a->floats[i] = lua_tonumber(L, -1);
    else if (lua_type(L, -1) != LUA_TSTRING)
      cnn_lua_fail(L, "onnx_write: attribute %s mixes strings and numbers", a->name);
    else
      a->strings[i] = xstrdup(L, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
}

/* the value at the top of the stack into a (whose name is set) */
static void attr_value(lua_State *L, cnn_onnx_attr *a) {
  int v = lua_gettop(L);
  cnn_tensor *t;
  if (lua_type(L, v) == LUA_TNUMBER && lua_isinteger(L, v))
    a->type = CNN_ONNX_INT, a->i = lua_tointeger(L, v);
  else if (lua_type(L, v) == LUA_TNUMBER)
    a->type = CNN_ONNX_FLOAT, a->f = lua_tonumber(L, v);
  else if (lua_type(L, v) == LUA_TSTRING)
    a->type = CNN_ONNX_STRING, a->s = xstrdup(L, lua_tostring(L, v));
  else if ((t = cnn_lua_to_tensor(L, v)))
    a->type = CNN_ONNX_TENSOR, cnn_tensor_retain(t), a->t = t;
  else if (lua_istable(L, v))
    attr_list(L, v, a);
  else
    cnn_lua_fail(L, "onnx_write: attribute %s is a %s", a->name, luaL_typename(L, v));
}

static void read_attrs(lua_State *L, int node, cnn_onnx_node *n) {
  if (lua_getfield(L, node, "attrs") == LUA_TNIL) return (void)lua_pop(L, 1);
  if (!lua_istable(L, -1))
    cnn_lua_fail(L, "onnx_write: node %s: attrs must be a table", n->op_type);
  int t = lua_gettop(L), count = 0;
  for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) count++;
  n->attrs = xcalloc(L, (size_t)count, sizeof *n->attrs);
  int k = 0;
  for (lua_pushnil(L); lua_next(L, t) && k < count; lua_pop(L, 1)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      cnn_lua_fail(L, "onnx_write: node %s: attribute names must be strings", n->op_type);
    n->attrs[k].name = xstrdup(L, lua_tostring(L, -2));
    n->nattrs = ++k;
    attr_value(L, &n->attrs[k - 1]);
  }
  lua_pop(L, 1);
}

static void read_node(lua_State *L, int node, cnn_onnx_node *n) {
  if (!lua_istable(L, node)) cnn_lua_fail(L, "onnx_write: every node must be a table");
  n->op_type = field_str(L, node, "op_type", NULL, "node");
  n->name = field_str(L, node, "name", "", n->op_type);
  n->domain = field_str(L, node, "domain", "", n->op_type);
  string_list(L, node, "inputs", &n->inputs, &n->ninputs, n->op_type);
  string_list(L, node, "outputs", &n->outputs, &n->noutputs, n->op_type);
  read_attrs(L, node, n);
}

static void read_shape(lua_State *L, int shape, cnn_onnx_value *v) {
  lua_Integer n = luaL_len(L, shape);
  if (n < 0 || n > CNN_MAX_DIMS)
    cnn_lua_fail(L, "onnx_write: %s: a shape of %d dims", v->name, (int)n);
  v->dims = xcalloc(L, (size_t)n, sizeof(int64_t));
  v->dim_params = xcalloc(L, (size_t)n, sizeof(char *));
  v->ndim = (int)n;
  for (int d = 0; d < n; d++) {
    int ty = lua_geti(L, shape, d + 1);
    v->dims[d] = -1;
    if (ty == LUA_TSTRING)
      v->dim_params[d] = xstrdup(L, lua_tostring(L, -1));
    else if (ty == LUA_TNUMBER && lua_isinteger(L, -1) && lua_tointeger(L, -1) >= -1)
      v->dims[d] = lua_tointeger(L, -1);
    else
      cnn_lua_fail(L, "onnx_write: %s: shape[%d] must be a size, a name or -1", v->name, d + 1);
    lua_pop(L, 1);
  }
}

static void read_values(lua_State *L, int model, const char *key, cnn_onnx_value **out,
                        int *count) {
  int n = field_list(L, model, key, "model");
  int list = lua_gettop(L);
  *out = xcalloc(L, (size_t)n, sizeof **out);
  *count = n;
  for (int k = 0; k < n; k++) {
    cnn_onnx_value *v = &(*out)[k];
    v->ndim = -1;
    if (lua_geti(L, list, k + 1) != LUA_TTABLE)
      cnn_lua_fail(L, "onnx_write: model.%s[%d] must be a table", key, k + 1);
    int t = lua_gettop(L);
    v->name = field_str(L, t, "name", NULL, key);
    lua_getfield(L, t, "elem_type");
    v->elem_type = (int)luaL_optinteger(L, -1, 1);
    if (lua_getfield(L, t, "shape") == LUA_TTABLE) read_shape(L, lua_gettop(L), v);
    lua_pop(L, 3);
  }
  lua_pop(L, 1);
}

static void read_inits(lua_State *L, int model, cnn_onnx_model *m) {
  int n = field_list(L, model, "initializers", "model");
  int list = lua_gettop(L);
  m->inits = xcalloc(L, (size_t)n, sizeof *m->inits);
  m->ninits = n;
  for (int k = 0; k < n; k++) {
    if (lua_geti(L, list, k + 1) != LUA_TTABLE)
      cnn_lua_fail(L, "onnx_write: initializers[%d] must be a table", k + 1);
    m->inits[k].name = field_str(L, lua_gettop(L), "name", NULL, "initializer");
    lua_getfield(L, -1, "tensor");
    cnn_tensor *t = cnn_lua_to_tensor(L, -1);
    if (!t) cnn_lua_fail(L, "onnx_write: initializer %s has no tensor", m->inits[k].name);
    cnn_tensor_retain(t);
    m->inits[k].tensor = t;
    lua_pop(L, 2);
  }
  lua_pop(L, 1);
}

static void read_model(lua_State *L, int model, cnn_onnx_model *m) {
  lua_getfield(L, model, "ir_version");
  m->ir_version = luaL_optinteger(L, -1, 8);
  lua_getfield(L, model, "opset");
  m->opset_version = luaL_optinteger(L, -1, 13);
  lua_pop(L, 2);
  m->producer_name = field_str(L, model, "producer_name", "cnnsh", "model");
  m->producer_version = field_str(L, model, "producer_version", CNNSH_VERSION, "model");
  m->graph_name = field_str(L, model, "graph_name", "cnnsh", "model");
  int n = field_list(L, model, "nodes", "model");
  int list = lua_gettop(L);
  m->nodes = xcalloc(L, (size_t)n, sizeof *m->nodes);
  m->nnodes = n;
  for (int k = 0; k < n; k++) {
    lua_geti(L, list, k + 1);
    read_node(L, lua_gettop(L), &m->nodes[k]);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  read_inits(L, model, m);
  read_values(L, model, "inputs", &m->inputs, &m->ninputs);
  read_values(L, model, "outputs", &m->outputs, &m->noutputs);
}

static int f_onnx_write(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  cnn_onnx_model **box = new_box(L);
  *box = xcalloc(L, 1, sizeof **box);
  read_model(L, 2, *box);
  if (cnn_onnx_save(path, *box) != 0) return cnn_lua_fail(L, "onnx_write: %s", cnn_error());
  cnn_onnx_model_free(*box);
  *box = NULL;
  return 0;
}

const luaL_Reg cnn_lua_onnx_funcs[] = {{"onnx_read", f_onnx_read},
                                       {"onnx_write", f_onnx_write},
                                       {"onnx_read_tensor", f_onnx_read_tensor},
                                       {NULL, NULL}};

void cnn_lua_onnx_type(lua_State *L) {
  luaL_newmetatable(L, MODEL_MT);
  lua_pushcfunction(L, model_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
}
