/*
 * tensor_view.c -- tensor methods that make views (no copies): view,
 * reshape, transpose, t, permute, squeeze, unsqueeze, narrow, select,
 * expand, expand_as, view_as, flatten.
 *
 * The only work here is translating Lua's conventions: 1-based dims and
 * indices with negatives from the end, sizes as varargs or a table.
 * Ranges are validated here so that messages speak 1-based; core checks
 * everything again.
 */
#include "bind.h"

static int m_view(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int64_t shape[CNN_MAX_DIMS];
  int nd = cnn_lua_sizes(L, 2, lua_gettop(L), "view", shape, true);
  return cnn_lua_push_result(L, cnn_view(t, nd, shape));
}

static int m_reshape(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int64_t shape[CNN_MAX_DIMS];
  int nd = cnn_lua_sizes(L, 2, lua_gettop(L), "reshape", shape, true);
  return cnn_lua_push_result(L, cnn_reshape(t, nd, shape));
}

static int m_view_as(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1), *o = cnn_lua_check_tensor(L, 2);
  return cnn_lua_push_result(L, cnn_view(t, o->ndim, o->shape));
}

static int m_transpose(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int d0 = cnn_lua_check_dim(L, 2, "transpose", t->ndim);
  int d1 = cnn_lua_check_dim(L, 3, "transpose", t->ndim);
  return cnn_lua_push_result(L, cnn_transpose(t, d0, d1));
}

/* x:t(): transpose of a matrix; 0-d and 1-d tensors come back as they are */
static int m_t(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  if (t->ndim > 2) {
    char s[CNN_SHAPE_STR];
    return cnn_lua_fail(L, "t: expects a tensor with at most 2 dims, got %s (use transpose)",
                        cnn_tensor_shape_str(t, s));
  }
  if (t->ndim < 2) {
    lua_settop(L, 1);
    return 1;
  }
  return cnn_lua_push_result(L, cnn_transpose(t, 0, 1));
}

/* the i-th (1-based) integer of varargs from arg 2, or of a table at 2 */
static lua_Integer vararg_int(lua_State *L, int i) {
  if (!lua_istable(L, 2)) return cnn_lua_check_int(L, i + 1);
  lua_geti(L, 2, i);
  int isnum;
  lua_Integer v = lua_tointegerx(L, -1, &isnum);
  if (!isnum) cnn_lua_fail(L, "permute: entry %d is not an integer", i);
  lua_pop(L, 1);
  return v;
}

static int m_permute(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int dims[CNN_MAX_DIMS], seen = 0;
  lua_Integer n = lua_istable(L, 2) ? luaL_len(L, 2) : lua_gettop(L) - 1;
  if (n != t->ndim) {
    char s[CNN_SHAPE_STR];
    return cnn_lua_fail(L, "permute: %d dims given for a %s tensor", (int)n,
                        cnn_tensor_shape_str(t, s));
  }
  for (int i = 0; i < n; i++) {
    dims[i] = cnn_lua_dim_value(L, "permute", vararg_int(L, i + 1), t->ndim, 0);
    if (seen & (1 << dims[i])) return cnn_lua_fail(L, "permute: dim %d repeated", dims[i] + 1);
    seen |= 1 << dims[i];
  }
  return cnn_lua_push_result(L, cnn_permute(t, dims));
}

static int m_squeeze(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int d = lua_isnoneornil(L, 2) ? -1 : cnn_lua_check_dim(L, 2, "squeeze", t->ndim);
  return cnn_lua_push_result(L, cnn_squeeze(t, d));
}

static int m_unsqueeze(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int d = cnn_lua_dim_value(L, "unsqueeze", cnn_lua_check_int(L, 2), t->ndim, 1);
  return cnn_lua_push_result(L, cnn_unsqueeze(t, d));
}

/* x:narrow(dim, start, length): start 1-based (negative from the end) */
static int m_narrow(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int d = cnn_lua_check_dim(L, 2, "narrow", t->ndim);
  int64_t start = cnn_lua_check_int(L, 3), len = cnn_lua_check_int(L, 4);
  int64_t size = t->shape[d];
  if (start < 0) start += size + 1;
  if (start < 1 || start > size + 1 || len < 0 || len > size - (start - 1))
    return cnn_lua_fail(L, "narrow: start %lld, length %lld out of range for dim %d of size %lld",
                        (long long)cnn_lua_check_int(L, 3), (long long)len, d + 1, (long long)size);
  return cnn_lua_push_result(L, cnn_narrow(t, d, start - 1, len));
}

/* x:select(dim, index): index 1-based (negative from the end) */
static int m_select(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int d = cnn_lua_check_dim(L, 2, "select", t->ndim);
  int64_t i = cnn_lua_check_int(L, 3), size = t->shape[d];
  int64_t j = i < 0 ? i + size : i - 1;
  if (j < 0 || j >= size)
    return cnn_lua_fail(L, "select: index %lld out of range for dim %d of size %lld", (long long)i,
                        d + 1, (long long)size);
  return cnn_lua_push_result(L, cnn_select(t, d, j));
}

static int m_expand(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int64_t shape[CNN_MAX_DIMS];
  int nd = cnn_lua_sizes(L, 2, lua_gettop(L), "expand", shape, true);
  return cnn_lua_push_result(L, cnn_expand(t, nd, shape));
}

static int m_expand_as(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1), *o = cnn_lua_check_tensor(L, 2);
  return cnn_lua_push_result(L, cnn_expand(t, o->ndim, o->shape));
}

/* x:flatten([start=1 [, end=-1]]) */
static int m_flatten(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  if (t->ndim == 0) return cnn_lua_push_result(L, cnn_view(t, 1, (int64_t[]){1}));
  int s = cnn_lua_dim_value(L, "flatten", cnn_lua_opt_int(L, 2, 1), t->ndim, 0);
  int e = cnn_lua_dim_value(L, "flatten", cnn_lua_opt_int(L, 3, -1), t->ndim, 0);
  if (s > e) return cnn_lua_fail(L, "flatten: start dim %d comes after end dim %d", s + 1, e + 1);
  return cnn_lua_push_result(L, cnn_flatten(t, s, e));
}

const luaL_Reg cnn_lua_view_methods[] = {{"view", m_view},
                                         {"reshape", m_reshape},
                                         {"view_as", m_view_as},
                                         {"transpose", m_transpose},
                                         {"t", m_t},
                                         {"permute", m_permute},
                                         {"squeeze", m_squeeze},
                                         {"unsqueeze", m_unsqueeze},
                                         {"narrow", m_narrow},
                                         {"select", m_select},
                                         {"expand", m_expand},
                                         {"expand_as", m_expand_as},
                                         {"flatten", m_flatten},
                                         {NULL, NULL}};
