/*
 * tensor_index.c -- x[key] and x[key] = value.
 *
 * Syntax (1-based, negatives from the end, ranges inclusive, Torch7's):
 *   x[i]                  select index i along dim 1 (a view, one dim less)
 *   x[{i, j}]             select along dim 1, then dim 2 (a 0-d view at the end)
 *   x[{ {}, {2, 3} }]     per-dim entries: a number selects; a table
 *                         {a, b} keeps a..b; {a} keeps a..a; {} keeps all;
 *                         {a, nil}-style missing ends default to 1 / size
 *   x[idx]                idx an int64 tensor: index_select along dim 1
 *   x[key] = v            v a number (fill) or a tensor broadcast into the view
 *   x[mask] = v           mask a uint8 tensor of x's shape: masked fill
 *
 * Design: a table key is first translated into a list of steps (select or
 * narrow, with 0-based positions) checked against the shape, with errors in
 * 1-based terms; only then are the views made, so nothing is held when an
 * error is raised.
 */
#include <stdio.h>

#include "bind.h"

typedef struct {
  bool select; /* select `start` (drops the dim) or narrow start..start+len-1 */
  int dim;
  int64_t start, len;
} index_step;

static int fail_shape(lua_State *L, const cnn_tensor *t, const char *what) {
  char s[CNN_SHAPE_STR];
  return cnn_lua_fail(L, "index: %s (tensor %s)", what, cnn_tensor_shape_str(t, s));
}

/* integer value at idx or an error naming the entry */
static int64_t entry_int(lua_State *L, int idx, const cnn_tensor *t) {
  int isnum;
  lua_Integer v = lua_tointegerx(L, idx, &isnum);
  if (!isnum) {
    lua_pushfstring(L, "entries must be integers or tables, got %s %s", luaL_typename(L, idx),
                    lua_type(L, idx) == LUA_TNUMBER ? lua_tostring(L, idx) : "");
    fail_shape(L, t, lua_tostring(L, -1));
  }
  return v;
}

/* dim: in the current view; orig: the 1-based dim of the user's tensor (messages) */
static void plan_select(lua_State *L, const cnn_tensor *t, int64_t i, int dim, int orig,
                        index_step *s) {
  int64_t size = t->shape[dim];
  int64_t j = i < 0 ? i + size : i - 1;
  if (i == 0)
    cnn_lua_fail(
        L, "index: index 0 for dim %d of size %lld: indices are 1-based (1..%lld; -1 is the last)",
        orig, (long long)size, (long long)size);
  if (j < 0 || j >= size)
    cnn_lua_fail(L, "index: index %lld out of range for dim %d of size %lld", (long long)i, orig,
                 (long long)size);
  *s = (index_step){true, dim, j, 1};
}

/* {a, b} / {a} / {} at stack top -> narrow step */
static void plan_range(lua_State *L, const cnn_tensor *t, int dim, int orig, index_step *s) {
  int64_t size = t->shape[dim];
  lua_Integer n = luaL_len(L, -1);
  int64_t a = 1, b = size;
  if (n >= 1) {
    lua_geti(L, -1, 1);
    a = entry_int(L, -1, t);
    b = a;
    lua_pop(L, 1);
  }
  if (n >= 2) {
    lua_geti(L, -1, 2);
    b = entry_int(L, -1, t);
    lua_pop(L, 1);
  }
  if (n > 2) fail_shape(L, t, "a range is {first, last}");
  int64_t a0 = a < 0 ? a + size + 1 : a, b0 = b < 0 ? b + size + 1 : b;
  if (a0 < 1 || a0 > size + 1 || b0 > size || b0 < a0 - 1)
    cnn_lua_fail(L, "index: range {%lld, %lld} out of range for dim %d of size %lld", (long long)a,
                 (long long)b, orig, (long long)size);
  *s = (index_step){false, dim, a0 - 1, b0 - a0 + 1};
}

/* Translate the table key at k into steps; returns the count. */
static int plan(lua_State *L, const cnn_tensor *t, int k, index_step *steps) {
  lua_Integer n = luaL_len(L, k);
  if (n > t->ndim) {
    char msg[64];
    snprintf(msg, sizeof msg, "%lld entries for %d dims", (long long)n, t->ndim);
    fail_shape(L, t, msg);
  }
  int dim = 0; /* dim of the current view that the next entry addresses */
  cnn_tensor shape_only = *t;
  for (int i = 0; i < n; i++) {
    lua_geti(L, k, i + 1);
    if (lua_istable(L, -1)) {
      plan_range(L, &shape_only, dim, i + 1, &steps[i]);
      dim++;
    } else {
      plan_select(L, &shape_only, entry_int(L, -1, t), dim, i + 1, &steps[i]);
      for (int d = dim; d < shape_only.ndim - 1; d++) shape_only.shape[d] = shape_only.shape[d + 1];
      shape_only.ndim--;
    }
    lua_pop(L, 1);
  }
  return (int)n;
}

/* Apply steps to t: a new reference, or NULL with cnn_error() set. */
static cnn_tensor *apply(cnn_tensor *t, const index_step *steps, int n) {
  cnn_tensor *cur = t;
  cnn_tensor_retain(cur);
  for (int i = 0; i < n && cur; i++) {
    const index_step *s = &steps[i];
    cnn_tensor *next =
        s->select ? cnn_select(cur, s->dim, s->start) : cnn_narrow(cur, s->dim, s->start, s->len);
    cnn_tensor_release(cur);
    cur = next;
  }
  return cur;
}

/* The view t[key] as a new reference (raises on bad keys or core errors). */
static cnn_tensor *view_of(lua_State *L, cnn_tensor *t, int k) {
  index_step steps[CNN_MAX_DIMS];
  int n;
  if (lua_type(L, k) == LUA_TNUMBER) {
    if (t->ndim == 0) fail_shape(L, t, "a 0-d tensor cannot be indexed (use :item())");
    plan_select(L, t, entry_int(L, k, t), 0, 1, &steps[0]);
    n = 1;
  } else if (lua_istable(L, k)) {
    n = plan(L, t, k, steps);
  } else {
    fail_shape(L, t,
               lua_pushfstring(L, "a key must be an integer, a table or an int64 tensor, got %s",
                               luaL_typename(L, k)));
    return NULL;
  }
  cnn_tensor *v = apply(t, steps, n);
  if (!v) cnn_lua_error(L);
  return v;
}

int cnn_lua_index_get(lua_State *L, cnn_tensor *t, int k) {
  cnn_tensor *idx = cnn_lua_to_tensor(L, k);
  if (idx) {
    if (idx->dtype != CNN_INT64)
      fail_shape(L, t, "a tensor key must be int64 indices (masks: use masked_fill or where)");
    if (t->ndim == 0) fail_shape(L, t, "a 0-d tensor cannot be indexed");
    cnn_tensor *i0 = cnn_lua_index_arg(L, k, "index", t->shape[0]);
    cnn_tensor *r = cnn_index_select(t, 0, i0);
    cnn_tensor_release(i0);
    return cnn_lua_push_result(L, r);
  }
  return cnn_lua_push_result(L, view_of(L, t, k));
}

/* x[mask] = v */
static int masked_set(lua_State *L, cnn_tensor *t, cnn_tensor *mask, int v) {
  cnn_tensor *val = cnn_lua_operand(L, v, t);
  cnn_tensor *r = cnn_where(mask, val, t);
  cnn_tensor_release(val);
  if (!r) return cnn_lua_error(L);
  int rc = cnn_copy_(t, r);
  cnn_tensor_release(r);
  return rc != 0 ? cnn_lua_error(L) : 0;
}

int cnn_lua_index_set(lua_State *L, cnn_tensor *t, int k, int v) {
  cnn_tensor *mask = cnn_lua_to_tensor(L, k);
  if (mask && mask->dtype == CNN_UINT8) return masked_set(L, t, mask, v);
  if (mask) fail_shape(L, t, "assignment through a tensor key needs a uint8 mask");
  cnn_tensor *src = cnn_lua_to_tensor(L, v);
  if (!src && lua_type(L, v) != LUA_TNUMBER) luaL_typeerror(L, v, "number or cnn.Tensor");
  cnn_tensor *view = view_of(L, t, k);
  int rc = src ? cnn_copy_(view, src) : cnn_fill_(view, lua_tonumber(L, v));
  cnn_tensor_release(view);
  return rc != 0 ? cnn_lua_error(L) : 0;
}
