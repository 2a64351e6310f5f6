/*
 * creation.c -- cnn.tensor, zeros, ones, empty, full, rand, randn, randint,
 * arange, linspace, eye and the *_like variants.
 *
 * Argument shapes (lua_api.md): sizes as varargs `zeros(2, 3)` or one table
 * `zeros({2, 3})`, then an optional dtype string or options table
 * {dtype=, device=, requires_grad=}.  A table in first position is always
 * sizes; a trailing table after it is options.  Creation happens on the
 * CPU or the requested device; options are applied after the result is
 * anchored on the Lua stack, so an error never leaks a tensor.
 *
 * cnn.tensor(nested_tables [, dtype]) infers the shape from the first
 * element of each level and checks every level has that length; int64
 * values from Lua integers are stored exactly (no trip through double).
 * The default dtype is float32 everywhere, except arange of integers and
 * randint (int64).
 */
#include <math.h>
#include <string.h>

#include "bind.h"

typedef struct {
  cnn_dtype dtype;
  bool has_dtype;
  cnn_device device;
  bool has_device;
  bool requires_grad;
} create_opts;

/* Read options at index i (string dtype or table); returns the index of
 * the last argument before them. */
static int read_opts(lua_State *L, int first, const char *fn, create_opts *o) {
  int top = lua_gettop(L);
  memset(o, 0, sizeof *o);
  o->device = CNN_DEVICE_CPU;
  if (top < first) return top;
  if (lua_type(L, top) == LUA_TSTRING) {
    o->dtype = cnn_lua_check_dtype(L, top);
    o->has_dtype = true;
    return top - 1;
  }
  if (!lua_istable(L, top) || top == first) return top;
  const char *dt = cnn_lua_opt_string(L, top, "dtype", NULL);
  const char *dev = cnn_lua_opt_string(L, top, "device", NULL);
  o->requires_grad = cnn_lua_opt_bool(L, top, "requires_grad", false);
  if (dt && cnn_dtype_from_name(dt, &o->dtype) != 0)
    cnn_lua_fail(L, "%s: unknown dtype '%s' (float32, float64, int64, uint8)", fn, dt);
  if (dev && cnn_lua_parse_device(dev, &o->device) != 0)
    cnn_lua_fail(L, "%s: unknown device '%s' (cpu, cuda, cuda:N)", fn, dev);
  o->has_dtype = dt != NULL;
  o->has_device = dev != NULL;
  return top - 1;
}

/* Push t (raise if NULL), then move it to the device and set requires_grad. */
static int finish(lua_State *L, cnn_tensor *t, const create_opts *o) {
  cnn_lua_push_result(L, t);
  if (o->has_device && !cnn_device_equal(cnn_tensor_device(t), o->device))
    t = cnn_to_device(t, o->device), cnn_lua_push_result(L, t);
  if (o->requires_grad && cnn_set_requires_grad(t, true) != 0) return cnn_lua_error(L);
  return 1;
}

static cnn_dtype dtype_or(const create_opts *o, cnn_dtype def) {
  return o->has_dtype ? o->dtype : def;
}

/* ---- filled tensors ----------------------------------------------------------- */

typedef enum { FILL_ZEROS, FILL_ONES, FILL_EMPTY, FILL_RAND, FILL_RANDN } fill_kind;

static cnn_tensor *make(fill_kind k, int nd, const int64_t *shape, cnn_dtype dt, cnn_device dev) {
  switch (k) {
  case FILL_ZEROS: return cnn_zeros(nd, shape, dt, dev);
  case FILL_ONES: return cnn_full(nd, shape, 1, dt, dev);
  case FILL_EMPTY: return cnn_empty(nd, shape, dt, dev);
  case FILL_RAND: return cnn_rand(nd, shape, dt);
  default: return cnn_randn(nd, shape, dt);
  }
}

static int filled(lua_State *L, fill_kind k, const char *fn) {
  create_opts o;
  int last = read_opts(L, 1, fn, &o);
  int64_t shape[CNN_MAX_DIMS];
  int nd = cnn_lua_sizes(L, 1, last, fn, shape, false);
  return finish(L, make(k, nd, shape, dtype_or(&o, CNN_FLOAT32), o.device), &o);
}

static int f_zeros(lua_State *L) { return filled(L, FILL_ZEROS, "zeros"); }
static int f_ones(lua_State *L) { return filled(L, FILL_ONES, "ones"); }
static int f_empty(lua_State *L) { return filled(L, FILL_EMPTY, "empty"); }
static int f_rand(lua_State *L) { return filled(L, FILL_RAND, "rand"); }
static int f_randn(lua_State *L) { return filled(L, FILL_RANDN, "randn"); }

/* cnn.full(size..., value [, opts]) */
static int f_full(lua_State *L) {
  create_opts o;
  int last = read_opts(L, 1, "full", &o);
  if (last < 2 && !(last == 1 && lua_type(L, 1) == LUA_TNUMBER))
    return cnn_lua_fail(L, "full: expects sizes and a fill value");
  double v = luaL_checknumber(L, last);
  int64_t shape[CNN_MAX_DIMS];
  int nd = last == 1 ? 0 : cnn_lua_sizes(L, 1, last - 1, "full", shape, false);
  return finish(L, cnn_full(nd, shape, v, dtype_or(&o, CNN_FLOAT32), o.device), &o);
}

/* cnn.randint(low, high, sizes... [, opts]): uniform integers in [low, high] */
static int f_randint(lua_State *L) {
  create_opts o;
  int last = read_opts(L, 3, "randint", &o);
  int64_t lo = cnn_lua_check_int(L, 1), hi = cnn_lua_check_int(L, 2);
  if (lo > hi)
    return cnn_lua_fail(L, "randint: low %lld is above high %lld", (long long)lo, (long long)hi);
  int64_t shape[CNN_MAX_DIMS];
  int nd = cnn_lua_sizes(L, 3, last, "randint", shape, false);
  return finish(L, cnn_randint(lo, hi, nd, shape, dtype_or(&o, CNN_INT64)), &o);
}

/* ---- ranges ----------------------------------------------------------------- */

static double finite_arg(lua_State *L, int arg, const char *fn) {
  double v = luaL_checknumber(L, arg);
  if (!isfinite(v)) luaL_argerror(L, arg, lua_pushfstring(L, "%s: expects a finite number", fn));
  return v;
}

/* Number of values a, a+step, ... that do not pass b (Lua's numeric for). */
static int64_t range_count(lua_State *L, double a, double b, double step, bool ints) {
  if (step == 0) return cnn_lua_fail(L, "arange: step must not be zero");
  double q = (b - a) / step;
  if (!ints) q += 1e-9 * (fabs(q) > 1 ? fabs(q) : 1); /* 0.1-style rounding */
  if (q < 0) return 0;
  if (q > 1e12) return cnn_lua_fail(L, "arange: %.17g values are too many", q);
  return (int64_t)floor(q) + 1;
}

/* cnn.arange(a, b [, step] [, opts]): inclusive end when reachable;
 * cnn.arange(n) = 1..n.  int64 if every argument is an integer. */
static int f_arange(lua_State *L) {
  create_opts o;
  int last = read_opts(L, 1, "arange", &o);
  if (last < 1) return luaL_argerror(L, 1, "number expected, got no value");
  bool ints = true;
  for (int i = 1; i <= last && i <= 3; i++) ints = ints && lua_isinteger(L, i);
  double a = last >= 2 ? finite_arg(L, 1, "arange") : 1;
  double b = finite_arg(L, last >= 2 ? 2 : 1, "arange");
  double step = last >= 3 ? finite_arg(L, 3, "arange") : 1;
  int64_t n = range_count(L, a, b, step, ints);
  cnn_dtype dt = dtype_or(&o, ints ? CNN_INT64 : CNN_FLOAT32);
  if (n == 0) return finish(L, cnn_empty(1, (int64_t[]){0}, dt, CNN_DEVICE_CPU), &o);
  return finish(L, cnn_arange(a, a + ((double)n - 0.5) * step, step, dt), &o);
}

/* cnn.linspace(a, b, n [, opts]) */
static int f_linspace(lua_State *L) {
  create_opts o;
  read_opts(L, 3, "linspace", &o);
  double a = finite_arg(L, 1, "linspace"), b = finite_arg(L, 2, "linspace");
  int64_t n = cnn_lua_check_int(L, 3);
  if (n < 0 || n > ((int64_t)1 << 40))
    return cnn_lua_fail(L, "linspace: bad number of steps %lld", (long long)n);
  return finish(L, cnn_linspace(a, b, n, dtype_or(&o, CNN_FLOAT32)), &o);
}

/* cnn.eye(n [, m] [, opts]) */
static int f_eye(lua_State *L) {
  create_opts o;
  int last = read_opts(L, 1, "eye", &o);
  int64_t n = cnn_lua_check_int(L, 1), m = last >= 2 ? cnn_lua_check_int(L, 2) : n;
  int64_t shape[2] = {n, m};
  if (n < 0 || m < 0)
    return cnn_lua_fail(L, "eye: negative size %lldx%lld", (long long)n, (long long)m);
  cnn_lua_sizes(L, 1, last >= 2 ? 2 : 1, "eye", shape, false); /* overflow check */
  return finish(L, cnn_eye(n, m, dtype_or(&o, CNN_FLOAT32)), &o);
}

/* ---- *_like ------------------------------------------------------------------ */

static int like(lua_State *L, fill_kind k, const char *fn) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  create_opts o;
  read_opts(L, 1, fn, &o);
  if (!o.has_device) o.device = cnn_tensor_device(t), o.has_device = true;
  cnn_dtype dt = dtype_or(&o, t->dtype);
  cnn_device make_dev = (k == FILL_RAND || k == FILL_RANDN) ? CNN_DEVICE_CPU : o.device;
  return finish(L, make(k, t->ndim, t->shape, dt, make_dev), &o);
}

static int f_zeros_like(lua_State *L) { return like(L, FILL_ZEROS, "zeros_like"); }
static int f_ones_like(lua_State *L) { return like(L, FILL_ONES, "ones_like"); }
static int f_empty_like(lua_State *L) { return like(L, FILL_EMPTY, "empty_like"); }
static int f_rand_like(lua_State *L) { return like(L, FILL_RAND, "rand_like"); }
static int f_randn_like(lua_State *L) { return like(L, FILL_RANDN, "randn_like"); }

static int f_full_like(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  double v = luaL_checknumber(L, 2);
  create_opts o;
  read_opts(L, 2, "full_like", &o);
  if (!o.has_device) o.device = cnn_tensor_device(t), o.has_device = true;
  return finish(L, cnn_full(t->ndim, t->shape, v, dtype_or(&o, t->dtype), o.device), &o);
}

/* ---- cnn.tensor ------------------------------------------------------------------ */

/* Shape of nested tables at idx, following first elements. */
static int nested_shape(lua_State *L, int idx, int64_t *shape) {
  int nd = 0;
  lua_pushvalue(L, idx);
  while (lua_istable(L, -1)) {
    if (nd == CNN_MAX_DIMS) cnn_lua_fail(L, "tensor: nesting deeper than %d dims", CNN_MAX_DIMS);
    lua_Integer n = luaL_len(L, -1);
    shape[nd++] = n;
    if (n == 0) break;
    lua_geti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
  return nd;
}

static void store(lua_State *L, int idx, cnn_dtype dt, void *buf, int64_t i) {
  if (dt == CNN_INT64 && lua_isinteger(L, idx)) {
    ((int64_t *)buf)[i] = lua_tointeger(L, idx);
    return;
  }
  double v = lua_isboolean(L, idx) ? lua_toboolean(L, idx) : lua_tonumber(L, idx);
  switch (dt) {
  case CNN_FLOAT32: ((float *)buf)[i] = (float)v; break;
  case CNN_FLOAT64: ((double *)buf)[i] = v; break;
  case CNN_INT64:
    ((int64_t *)buf)[i] = v != v             ? 0
                          : fabs(v) < 9.2e18 ? (int64_t)v
                          : v < 0            ? INT64_MIN
                                             : INT64_MAX;
    break;
  case CNN_UINT8:
    ((uint8_t *)buf)[i] = (uint8_t)(v != v || fabs(v) > 9.2e18 ? 0 : (int64_t)v);
    break;
  default: break;
  }
}

/* Copy the nested table on top of the stack (level d) into buf from *pos. */
static void fill_nested(lua_State *L, int d, int nd, const int64_t *shape, cnn_dtype dt, void *buf,
                        int64_t *pos) {
  luaL_checkstack(L, 3, "tensor: nesting too deep");
  if (!lua_istable(L, -1))
    cnn_lua_fail(L, "tensor: ragged nested table: found a %s where level %d expects a table",
                 luaL_typename(L, -1), d + 1);
  if (luaL_len(L, -1) != shape[d])
    cnn_lua_fail(L, "tensor: ragged nested table: level %d should hold %lld entries, found %lld",
                 d + 1, (long long)shape[d], (long long)luaL_len(L, -1));
  for (int64_t i = 1; i <= shape[d]; i++) {
    lua_geti(L, -1, i);
    if (d + 1 < nd) {
      fill_nested(L, d + 1, nd, shape, dt, buf, pos);
    } else {
      int t = lua_type(L, -1);
      if (t != LUA_TNUMBER && t != LUA_TBOOLEAN)
        cnn_lua_fail(L, "tensor: element %lld of level %d is a %s, not a number%s", (long long)i,
                     d + 1, luaL_typename(L, -1),
                     cnn_lua_to_tensor(L, -1) ? " (to join tensors use cnn.stack)" : "");
      store(L, -1, dt, buf, (*pos)++);
    }
    lua_pop(L, 1);
  }
}

static int tensor_from_table(lua_State *L, const create_opts *o) {
  int64_t shape[CNN_MAX_DIMS];
  int nd = nested_shape(L, 1, shape);
  cnn_dtype dt = dtype_or(o, CNN_FLOAT32);
  if (cnn_dtype_size(dt) > 8 || dt == CNN_FLOAT16 || dt == CNN_BFLOAT16)
    return cnn_lua_fail(L, "tensor: cannot build %s tensors from tables", cnn_dtype_name(dt));
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  void *buf = lua_newuserdatauv(L, (size_t)(n ? n : 1) * cnn_dtype_size(dt), 0);
  int64_t pos = 0;
  lua_pushvalue(L, 1);
  if (nd > 0 && shape[nd - 1] > 0) fill_nested(L, 0, nd, shape, dt, buf, &pos);
  lua_pop(L, 1);
  return finish(L, cnn_from_buffer(nd, shape, dt, buf), o);
}

/* cnn.tensor(data [, dtype | opts]): nested tables, a number (0-d) or a tensor (copy) */
static int f_tensor(lua_State *L) {
  create_opts o;
  read_opts(L, 1, "tensor", &o);
  cnn_tensor *src = cnn_lua_to_tensor(L, 1);
  if (src) {
    cnn_tensor *c = cnn_detach(src);
    cnn_lua_push_result(L, c);
    cnn_tensor *d = cnn_clone(c);
    if (o.has_dtype) {
      cnn_lua_push_result(L, d);
      d = cnn_to_dtype(d, o.dtype);
    }
    return finish(L, d, &o);
  }
  if (lua_type(L, 1) == LUA_TNUMBER || lua_isboolean(L, 1)) {
    double v = lua_isboolean(L, 1) ? lua_toboolean(L, 1) : lua_tonumber(L, 1);
    cnn_dtype dt = dtype_or(&o, CNN_FLOAT32);
    if (dt == CNN_INT64 && lua_isinteger(L, 1)) {
      int64_t iv = lua_tointeger(L, 1);
      return finish(L, cnn_from_buffer(0, NULL, dt, &iv), &o);
    }
    return finish(L, cnn_scalar(v, dt, CNN_DEVICE_CPU), &o);
  }
  if (!lua_istable(L, 1)) return luaL_typeerror(L, 1, "table, number or cnn.Tensor");
  return tensor_from_table(L, &o);
}

const luaL_Reg cnn_lua_creation_funcs[] = {{"tensor", f_tensor},
                                           {"zeros", f_zeros},
                                           {"ones", f_ones},
                                           {"empty", f_empty},
                                           {"full", f_full},
                                           {"rand", f_rand},
                                           {"randn", f_randn},
                                           {"randint", f_randint},
                                           {"arange", f_arange},
                                           {"linspace", f_linspace},
                                           {"eye", f_eye},
                                           {"zeros_like", f_zeros_like},
                                           {"ones_like", f_ones_like},
                                           {"empty_like", f_empty_like},
                                           {"rand_like", f_rand_like},
                                           {"randn_like", f_randn_like},
                                           {"full_like", f_full_like},
                                           {NULL, NULL}};
