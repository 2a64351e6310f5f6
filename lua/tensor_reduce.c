/*
 * tensor_reduce.c -- reductions (sum, mean, prod, var, std, norm, max, min,
 * argmax, argmin), matrix products (matmul, mm, bmm), gathering
 * (index_select, gather) and joining (cnn.cat, cnn.stack) from Lua.
 *
 * Translation rules: a dim argument is one 1-based dim or a table of them
 * (turned into core's bitmask); nil means all dims.  Indices going out
 * (max/min with a dim, argmax, argmin) get +1; indices coming in
 * (index_select, gather) get -1 after a range check that speaks 1-based.
 */
#include "bind.h"

/* ---- reductions ------------------------------------------------------------- */

/* dims at arg: nil -> 0 (all), a number, or a table of numbers */
static uint32_t dims_mask(lua_State *L, int arg, const char *fn, int ndim) {
  if (lua_isnoneornil(L, arg)) return 0;
  if (!lua_istable(L, arg)) return 1u << cnn_lua_check_dim(L, arg, fn, ndim);
  uint32_t mask = 0;
  lua_Integer n = luaL_len(L, arg);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, arg, i);
    int isnum;
    lua_Integer d = lua_tointegerx(L, -1, &isnum);
    if (!isnum) cnn_lua_fail(L, "%s: dims must be integers", fn);
    mask |= 1u << cnn_lua_dim_value(L, fn, d, ndim, 0);
    lua_pop(L, 1);
  }
  if (n == 0) cnn_lua_fail(L, "%s: empty table of dims", fn);
  return mask;
}

static bool opt_keepdim(lua_State *L, int arg) {
  if (lua_isnoneornil(L, arg)) return false;
  luaL_checktype(L, arg, LUA_TBOOLEAN);
  return lua_toboolean(L, arg);
}

/* x:op([dim [, keepdim]]) */
static int reduce(lua_State *L, cnn_reduce_op op, const char *fn) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  uint32_t mask = dims_mask(L, 2, fn, t->ndim);
  bool keep = opt_keepdim(L, 3);
  return cnn_lua_push_result(L, cnn_reduce(op, t, mask, keep, 0));
}

static int m_sum(lua_State *L) { return reduce(L, CNN_RED_SUM, "sum"); }
static int m_mean(lua_State *L) { return reduce(L, CNN_RED_MEAN, "mean"); }
static int m_prod(lua_State *L) { return reduce(L, CNN_RED_PROD, "prod"); }

/* x:var([dim [, {correction=1, keepdim=false} | keepdim]]) */
static int var_std(lua_State *L, cnn_reduce_op op, const char *fn) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  uint32_t mask = dims_mask(L, 2, fn, t->ndim);
  double corr = 1;
  bool keep = false;
  if (lua_istable(L, 3)) {
    corr = cnn_lua_opt_number(L, 3, "correction", 1);
    keep = cnn_lua_opt_bool(L, 3, "keepdim", false);
  } else {
    keep = opt_keepdim(L, 3);
  }
  return cnn_lua_push_result(L, cnn_reduce(op, t, mask, keep, corr));
}

static int m_var(lua_State *L) { return var_std(L, CNN_RED_VAR, "var"); }
static int m_std(lua_State *L) { return var_std(L, CNN_RED_STD, "std"); }

/* x:norm([p=2 [, dim [, keepdim]]]) */
static int m_norm(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  double p = luaL_optnumber(L, 2, 2);
  uint32_t mask = dims_mask(L, 3, "norm", t->ndim);
  bool keep = opt_keepdim(L, 4);
  return cnn_lua_push_result(L, cnn_reduce(CNN_RED_NORM, t, mask, keep, p));
}

/* x:max() -> 0-d; x:max(dim [, keepdim]) -> values, indices (1-based);
 * x:max(other_tensor) -> elementwise maximum */
static int max_min(lua_State *L, bool is_min) {
  const char *fn = is_min ? "min" : "max";
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  cnn_tensor *other = cnn_lua_to_tensor(L, 2);
  if (other)
    return cnn_lua_push_result(L, cnn_binary(is_min ? CNN_OP_MINIMUM : CNN_OP_MAXIMUM, t, other));
  if (lua_isnoneornil(L, 2))
    return cnn_lua_push_result(L, cnn_reduce(is_min ? CNN_RED_MIN : CNN_RED_MAX, t, 0, false, 0));
  int d = cnn_lua_check_dim(L, 2, fn, t->ndim);
  bool keep = opt_keepdim(L, 3);
  cnn_tensor *values = NULL, *indices = NULL;
  if (cnn_max_dim(t, d, keep, is_min, &values, &indices) != 0) return cnn_lua_error(L);
  cnn_lua_push_tensor(L, values);
  cnn_lua_push_one_based(L, indices); /* core may have saved indices for backward */
  return 2;
}

static int m_max(lua_State *L) { return max_min(L, false); }
static int m_min(lua_State *L) { return max_min(L, true); }

/* x:argmax([dim [, keepdim]]): 1-based (flat index over all elements without dim) */
static int arg_reduce(lua_State *L, cnn_reduce_op op, const char *fn) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  uint32_t mask = lua_isnoneornil(L, 2) ? 0 : 1u << cnn_lua_check_dim(L, 2, fn, t->ndim);
  bool keep = opt_keepdim(L, 3);
  cnn_tensor *r = cnn_reduce(op, t, mask, keep, 0);
  if (!r) return cnn_lua_error(L);
  return cnn_lua_push_one_based(L, r);
}

static int m_argmax(lua_State *L) { return arg_reduce(L, CNN_RED_ARGMAX, "argmax"); }
static int m_argmin(lua_State *L) { return arg_reduce(L, CNN_RED_ARGMIN, "argmin"); }

/* x:any([dim | {dims} [, keepdim]]), x:all(...): uint8 0/1 */
static int logical(lua_State *L, const char *fn, cnn_tensor *(*op)(cnn_tensor *, uint32_t, bool)) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  uint32_t mask = dims_mask(L, 2, fn, t->ndim);
  return cnn_lua_push_result(L, op(t, mask, opt_keepdim(L, 3)));
}

static int m_any(lua_State *L) { return logical(L, "any", cnn_any); }
static int m_all(lua_State *L) { return logical(L, "all", cnn_all); }

/* ---- linear algebra ----------------------------------------------------------- */

static int m_matmul(lua_State *L) {
  cnn_tensor *a = cnn_lua_check_tensor(L, 1), *b = cnn_lua_check_tensor(L, 2);
  return cnn_lua_push_result(L, cnn_matmul(a, b));
}

static int m_mm(lua_State *L) {
  cnn_tensor *a = cnn_lua_check_tensor(L, 1), *b = cnn_lua_check_tensor(L, 2);
  return cnn_lua_push_result(L, cnn_mm(a, b));
}

static int m_bmm(lua_State *L) {
  cnn_tensor *a = cnn_lua_check_tensor(L, 1), *b = cnn_lua_check_tensor(L, 2);
  return cnn_lua_push_result(L, cnn_bmm(a, b));
}

/* ---- gathering ------------------------------------------------------------------ */

/* x:index_select(dim, idx): idx a 1-D int64 tensor of 1-based indices */
static int m_index_select(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int d = cnn_lua_check_dim(L, 2, "index_select", t->ndim);
  cnn_tensor *idx = cnn_lua_index_arg(L, 3, "index_select", t->shape[d]);
  cnn_tensor *r = cnn_index_select(t, d, idx);
  cnn_tensor_release(idx);
  return cnn_lua_push_result(L, r);
}

/* x:gather(dim, idx): idx int64 of x's rank, 1-based along dim */
static int m_gather(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int d = cnn_lua_check_dim(L, 2, "gather", t->ndim);
  cnn_tensor *idx = cnn_lua_index_arg(L, 3, "gather", t->shape[d]);
  cnn_tensor *r = cnn_gather(t, d, idx);
  cnn_tensor_release(idx);
  return cnn_lua_push_result(L, r);
}

/* ---- joining --------------------------------------------------------------------- */

/* Borrowed tensors of the table at arg 1 (array kept in a GC'd buffer). */
static cnn_tensor **tensor_list(lua_State *L, const char *fn, int *n) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer len = luaL_len(L, 1);
  if (len < 1) cnn_lua_fail(L, "%s: expects a non-empty table of tensors", fn);
  if (len > 1 << 20) cnn_lua_fail(L, "%s: too many tensors (%lld)", fn, (long long)len);
  cnn_tensor **ts = lua_newuserdatauv(L, sizeof *ts * (size_t)len, 0);
  for (lua_Integer i = 1; i <= len; i++) {
    lua_geti(L, 1, i);
    ts[i - 1] = cnn_lua_to_tensor(L, -1);
    if (!ts[i - 1])
      cnn_lua_fail(L, "%s: entry %lld is a %s, not a tensor", fn, (long long)i,
                   luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  *n = (int)len;
  return ts;
}

/* cnn.cat({a, b, ...} [, dim=1]) */
static int f_cat(lua_State *L) {
  lua_settop(L, 2);
  int n;
  cnn_tensor **ts = tensor_list(L, "cat", &n);
  int d = cnn_lua_dim_value(L, "cat", cnn_lua_opt_int(L, 2, 1), ts[0]->ndim, 0);
  return cnn_lua_push_result(L, cnn_cat(n, ts, d));
}

/* cnn.stack({a, b, ...} [, dim=1]) */
static int f_stack(lua_State *L) {
  lua_settop(L, 2);
  int n;
  cnn_tensor **ts = tensor_list(L, "stack", &n);
  int d = cnn_lua_dim_value(L, "stack", cnn_lua_opt_int(L, 2, 1), ts[0]->ndim, 1);
  return cnn_lua_push_result(L, cnn_stack(n, ts, d));
}

const luaL_Reg cnn_lua_reduce_methods[] = {{"sum", m_sum},       {"mean", m_mean},
                                           {"prod", m_prod},     {"var", m_var},
                                           {"std", m_std},       {"norm", m_norm},
                                           {"max", m_max},       {"min", m_min},
                                           {"argmax", m_argmax}, {"argmin", m_argmin},
                                           {"matmul", m_matmul}, {"mm", m_mm},
                                           {"bmm", m_bmm},       {"index_select", m_index_select},
                                           {"gather", m_gather}, {"any", m_any},
                                           {"all", m_all},       {NULL, NULL}};

const luaL_Reg cnn_lua_join_funcs[] = {{"cat", f_cat}, {"stack", f_stack}, {NULL, NULL}};
