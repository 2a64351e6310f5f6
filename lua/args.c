/*
 * args.c -- argument helpers shared by the binding files: Lua's conventions
 * to core's.
 *
 * Lua side: dims and indices are 1-based, negatives count from the end
 * (-1 = last), sizes come as varargs or one table, dtypes by name, options
 * in a trailing table.  Core side: 0-based dims, int64_t shapes.  Every
 * helper validates completely (integer-valued, in range, no overflow, no
 * NaN) and raises an error naming the function before core is called, so
 * nothing reachable from Lua hands core an absurd value.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bind.h"

int cnn_lua_fail(lua_State *L, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return luaL_error(L, "%s", msg);
}

/* ---- integers -------------------------------------------------------------- */

int64_t cnn_lua_check_int(lua_State *L, int arg) {
  int isnum;
  lua_Integer v = lua_tointegerx(L, arg, &isnum);
  if (isnum) return v;
  if (lua_type(L, arg) == LUA_TNUMBER) {
    double d = lua_tonumber(L, arg);
    if (d != d) luaL_argerror(L, arg, "integer expected, got NaN");
    luaL_argerror(L, arg, lua_pushfstring(L, "integer expected, got %f", d));
  }
  luaL_typeerror(L, arg, "integer");
  return 0;
}

int64_t cnn_lua_opt_int(lua_State *L, int arg, int64_t def) {
  return lua_isnoneornil(L, arg) ? def : cnn_lua_check_int(L, arg);
}

/* ---- dims -------------------------------------------------------------------- */

int cnn_lua_dim_value(lua_State *L, const char *fn, lua_Integer d, int ndim, int extra) {
  lua_Integer n = ndim + extra;
  if (d >= 1 && d <= n) return (int)(d - 1);
  if (d <= -1 && d >= -n) return (int)(n + d);
  if (n == 0)
    return cnn_lua_fail(L, "%s: dim %lld out of range: the tensor is 0-d", fn, (long long)d);
  return cnn_lua_fail(L,
                      "%s: dim %lld out of range for a %d-d tensor (expected 1..%lld or -%lld..-1)",
                      fn, (long long)d, ndim, (long long)n, (long long)n);
}

int cnn_lua_check_dim(lua_State *L, int arg, const char *fn, int ndim) {
  return cnn_lua_dim_value(L, fn, cnn_lua_check_int(L, arg), ndim, 0);
}

/* ---- sizes ------------------------------------------------------------------- */

static int64_t size_value(lua_State *L, int idx, const char *fn, int i, bool allow_neg1) {
  int isnum;
  lua_Integer v = lua_tointegerx(L, idx, &isnum);
  if (!isnum) {
    if (lua_type(L, idx) == LUA_TNUMBER)
      return cnn_lua_fail(L, "%s: size %d must be an integer, got %s", fn, i, lua_tostring(L, idx));
    return cnn_lua_fail(L, "%s: size %d must be an integer, got %s", fn, i, luaL_typename(L, idx));
  }
  if (v < 0 && !(allow_neg1 && v == -1))
    return cnn_lua_fail(L, "%s: size %d is negative (%lld)", fn, i, (long long)v);
  return v;
}

static void check_product(lua_State *L, const char *fn, int ndim, const int64_t *shape) {
  int64_t prod = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] <= 0) continue;
    if (prod > ((int64_t)1 << 56) / shape[i]) {
      char buf[CNN_SHAPE_STR];
      cnn_lua_fail(L, "%s: sizes %s hold too many elements", fn, cnn_shape_str(ndim, shape, buf));
    }
    prod *= shape[i];
  }
}

int cnn_lua_sizes(lua_State *L, int first, int last, const char *fn, int64_t *shape,
                  bool allow_neg1) {
  int ndim = 0;
  if (lua_istable(L, first)) {
    lua_Integer n = luaL_len(L, first);
    if (n > CNN_MAX_DIMS)
      return cnn_lua_fail(L, "%s: %lld sizes, at most %d dims", fn, (long long)n, CNN_MAX_DIMS);
    for (int i = 1; i <= n; i++) {
      lua_geti(L, first, i);
      shape[ndim++] = size_value(L, -1, fn, i, allow_neg1);
      lua_pop(L, 1);
    }
  } else {
    if (last - first + 1 > CNN_MAX_DIMS)
      return cnn_lua_fail(L, "%s: %d sizes, at most %d dims", fn, last - first + 1, CNN_MAX_DIMS);
    for (int a = first; a <= last; a++)
      shape[ndim++] = size_value(L, a, fn, a - first + 1, allow_neg1);
  }
  check_product(L, fn, ndim, shape);
  return ndim;
}

/* ---- dtypes, devices, options ---------------------------------------------------- */

cnn_dtype cnn_lua_check_dtype(lua_State *L, int arg) {
  const char *s = luaL_checkstring(L, arg);
  cnn_dtype dt;
  if (cnn_dtype_from_name(s, &dt) != 0)
    luaL_argerror(L, arg,
                  lua_pushfstring(L, "unknown dtype '%s' (float32, float64, int64, uint8)", s));
  return dt;
}

int cnn_lua_parse_device(const char *s, cnn_device *out) {
  if (strcmp(s, "cpu") == 0) return *out = CNN_DEVICE_CPU, 0;
  if (strcmp(s, "cuda") == 0) return *out = (cnn_device){CNN_CUDA, 0}, 0;
  int idx, used = 0;
  if (sscanf(s, "cuda:%d%n", &idx, &used) == 1 && s[used] == 0 && idx >= 0 && idx < 64)
    return *out = (cnn_device){CNN_CUDA, idx}, 0;
  return -1;
}

/* The name of the running C function (for messages), or "option". */
static const char *running_name(lua_State *L) {
  lua_Debug ar;
  if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.name) return ar.name;
  return "options";
}

static bool is_known(const char *key, const char *const *known) {
  for (; *known; known++)
    if (strcmp(key, *known) == 0) return true;
  return false;
}

void cnn_lua_check_options(lua_State *L, int opts, const char *fn, const char *const *known) {
  if (opts == 0 || !lua_istable(L, opts)) return;
  lua_pushnil(L);
  while (lua_next(L, opts)) {
    lua_pop(L, 1); /* the value */
    if (lua_type(L, -1) == LUA_TSTRING && is_known(lua_tostring(L, -1), known)) continue;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (const char *const *k = known; *k; k++) {
      if (k != known) luaL_addstring(&b, ", ");
      luaL_addstring(&b, *k);
    }
    luaL_pushresult(&b);
    const char *names = lua_tostring(L, -1), *bad = luaL_tolstring(L, -2, NULL);
    cnn_lua_fail(L, "%s: unknown option '%s' (options: %s)", fn, bad, names);
  }
}

/* Push field key of the options table (or nil); returns its type. */
static int opt_field(lua_State *L, int opts, const char *key) {
  if (opts == 0 || !lua_istable(L, opts)) {
    lua_pushnil(L);
    return LUA_TNIL;
  }
  return lua_getfield(L, opts, key);
}

bool cnn_lua_opt_bool(lua_State *L, int opts, const char *key, bool def) {
  int t = opt_field(L, opts, key);
  bool v = def;
  if (t == LUA_TBOOLEAN)
    v = lua_toboolean(L, -1);
  else if (t != LUA_TNIL)
    cnn_lua_fail(L, "%s: option '%s' must be a boolean, got %s", running_name(L), key,
                 lua_typename(L, t));
  lua_pop(L, 1);
  return v;
}

double cnn_lua_opt_number(lua_State *L, int opts, const char *key, double def) {
  int t = opt_field(L, opts, key);
  double v = def;
  if (t == LUA_TNUMBER)
    v = lua_tonumber(L, -1);
  else if (t != LUA_TNIL)
    cnn_lua_fail(L, "%s: option '%s' must be a number, got %s", running_name(L), key,
                 lua_typename(L, t));
  lua_pop(L, 1);
  return v;
}

/* The string stays valid: option tables are arguments, anchored on the stack. */
const char *cnn_lua_opt_string(lua_State *L, int opts, const char *key, const char *def) {
  int t = opt_field(L, opts, key);
  const char *v = def;
  if (t == LUA_TSTRING)
    v = lua_tostring(L, -1);
  else if (t != LUA_TNIL)
    cnn_lua_fail(L, "option '%s' must be a string, got %s", key, lua_typename(L, t));
  lua_pop(L, 1);
  return v;
}

/* ---- operands and indices ------------------------------------------------------- */

cnn_tensor *cnn_lua_operand(lua_State *L, int idx, const cnn_tensor *like) {
  cnn_tensor *t = cnn_lua_to_tensor(L, idx);
  if (t) {
    cnn_tensor_retain(t);
    return t;
  }
  if (lua_type(L, idx) != LUA_TNUMBER) luaL_typeerror(L, idx, "cnn.Tensor or number");
  cnn_dtype dt = like ? like->dtype : CNN_FLOAT32;
  if (!cnn_dtype_is_float(dt) && !lua_isinteger(L, idx)) {
    double v = lua_tonumber(L, idx);
    if (v != floor(v) || !isfinite(v)) dt = CNN_FLOAT32;
  }
  cnn_device dev = like ? cnn_tensor_device(like) : CNN_DEVICE_CPU;
  cnn_tensor *s = cnn_scalar(lua_tonumber(L, idx), dt, dev);
  if (!s) cnn_lua_error(L);
  return s;
}

int cnn_lua_shift_(cnn_tensor *t, int64_t delta) {
  if (cnn_tensor_device(t).type == CNN_CPU && t->dtype == CNN_INT64 &&
      cnn_tensor_is_contiguous(t)) {
    int64_t *p = cnn_tensor_data(t), n = cnn_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) p[i] += delta;
    return 0;
  }
  cnn_tensor *d = cnn_scalar((double)delta, t->dtype, cnn_tensor_device(t));
  if (!d) return -1;
  int rc = cnn_binary_(CNN_OP_ADD, t, d);
  cnn_tensor_release(d);
  return rc;
}

int cnn_lua_push_one_based(lua_State *L, cnn_tensor *idx) {
  cnn_lua_push_result(L, idx); /* anchored; the copy below is ours alone */
  cnn_tensor *c = cnn_clone(idx);
  cnn_lua_push_result(L, c);
  lua_remove(L, -2);
  if (cnn_lua_shift_(c, 1) != 0) return cnn_lua_error(L);
  return 1;
}

/* Check 1 <= idx <= size on a CPU int64 tensor; message in 1-based terms. */
static void check_index_range(lua_State *L, const char *fn, cnn_tensor *idx, int64_t size) {
  int64_t n = cnn_tensor_numel(idx);
  const int64_t *p = cnn_tensor_data(idx);
  for (int64_t i = 0; i < n; i++)
    if (p[i] < 1 || p[i] > size)
      cnn_lua_fail(L, "%s: index %lld out of range 1..%lld", fn, (long long)p[i], (long long)size);
}

cnn_tensor *cnn_lua_index_arg(lua_State *L, int arg, const char *fn, int64_t size) {
  cnn_tensor *idx = cnn_lua_check_tensor(L, arg);
  if (idx->dtype != CNN_INT64)
    luaL_argerror(
        L, arg,
        lua_pushfstring(L, "%s: indices must be int64, got %s", fn, cnn_dtype_name(idx->dtype)));
  cnn_tensor *c = cnn_clone(idx); /* contiguous, owned: shifted in place */
  if (!c) cnn_lua_error(L);
  if (cnn_tensor_device(c).type == CNN_CPU && size >= 0) {
    cnn_lua_push_tensor(L, c); /* anchored while we may raise */
    check_index_range(L, fn, c, size);
    cnn_tensor_retain(c);
    lua_pop(L, 1);
  }
  if (cnn_lua_shift_(c, -1) != 0) {
    cnn_tensor_release(c);
    cnn_lua_error(L);
  }
  return c;
}
