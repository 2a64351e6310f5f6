/*
 * tensor_ops.c -- the tensor ops from Lua: sort, topk,
 * cumsum, cumprod, scatter (and _add, and in place), repeat/tile, flip,
 * roll, chunk, split, unbind, tolist, and F.one_hot.  any and all live
 * with the reductions (tensor_reduce.c).
 *
 * Lua conventions over core's: dims 1-based (negatives from the end),
 * indices coming out get +1 (sort, topk), indices going in get -1 after a
 * 1-based range check (scatter, one_hot); lists of pieces (chunk, split,
 * unbind) come back as a Lua sequence of tensors, as Torch7's split did.
 * Options are PyTorch's keyword arguments, positional in PyTorch's order
 * or in a table; an unknown option is an error.
 *
 * `repeat` is a Lua keyword, so x:repeat(2, 3) does not parse: the method
 * is registered as "repeat" (x["repeat"](x, 2, 3), cnn["repeat"]) and as
 * x:repeat_tensor(2, 3); x:tile(...) is PyTorch's tile (fewer counts than
 * dimensions mean leading 1s).
 */
#include <string.h>

#include "bind.h"

/* a dim that 0-d tensors also accept (as one dimension of size 1) */
static int sort_dim(lua_State *L, const char *fn, lua_Integer d, const cnn_tensor *t) {
  return cnn_lua_dim_value(L, fn, d, t->ndim ? t->ndim : 1, 0);
}

/* boolean at arg, or def when nil/none; a table there is read by the caller */
static bool opt_flag(lua_State *L, int arg, bool def) {
  if (lua_isnoneornil(L, arg) || lua_istable(L, arg)) return def;
  luaL_checktype(L, arg, LUA_TBOOLEAN);
  return lua_toboolean(L, arg);
}

/* the index of the last argument if it is an options table, else 0 */
static int options_at(lua_State *L, int first) {
  int top = lua_gettop(L);
  return top >= first && lua_istable(L, top) && !cnn_lua_to_tensor(L, top) ? top : 0;
}

/* the dim at arg (a number), else the options' `dim`, else -1 */
static lua_Integer dim_arg(lua_State *L, int arg, int opts) {
  if (lua_type(L, arg) == LUA_TNUMBER) return cnn_lua_check_int(L, arg);
  if (!lua_isnoneornil(L, arg) && arg != opts)
    luaL_typeerror(L, arg, "integer dim or options table");
  return (lua_Integer)cnn_lua_opt_number(L, opts, "dim", -1);
}

static int push_values_indices(lua_State *L, cnn_tensor *values, cnn_tensor *indices) {
  cnn_lua_push_tensor(L, values);
  cnn_lua_push_one_based(L, indices); /* core saved the 0-based ones for backward */
  return 2;
}

/* x:sort([dim = -1 [, descending = false]]) or x:sort([dim,] {descending =, stable =}) */
static int m_sort(lua_State *L) {
  static const char *const known[] = {"descending", "dim", "stable", NULL};
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int opts = options_at(L, 2);
  cnn_lua_check_options(L, opts, "sort", known);
  lua_Integer d = dim_arg(L, 2, opts);
  bool desc = opts ? cnn_lua_opt_bool(L, opts, "descending", false) : opt_flag(L, 3, false);
  if (opts) (void)cnn_lua_opt_bool(L, opts, "stable", false); /* every sort is stable */
  cnn_tensor *values = NULL, *indices = NULL;
  if (cnn_sort(t, sort_dim(L, "sort", d, t), desc, &values, &indices)) return cnn_lua_error(L);
  return push_values_indices(L, values, indices);
}

/* x:topk(k [, dim = -1 [, largest = true [, sorted = true]]]) or x:topk(k, [dim,] {opts}) */
static int m_topk(lua_State *L) {
  static const char *const known[] = {"dim", "largest", "sorted", NULL};
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int64_t k = cnn_lua_check_int(L, 2);
  int opts = options_at(L, 3);
  cnn_lua_check_options(L, opts, "topk", known);
  lua_Integer d = dim_arg(L, 3, opts);
  bool largest = opts ? cnn_lua_opt_bool(L, opts, "largest", true) : opt_flag(L, 4, true);
  if (opts)
    (void)cnn_lua_opt_bool(L, opts, "sorted", true); /* always sorted */
  else
    (void)opt_flag(L, 5, true);
  cnn_tensor *values = NULL, *indices = NULL;
  if (cnn_topk(t, k, sort_dim(L, "topk", d, t), largest, &values, &indices))
    return cnn_lua_error(L);
  return push_values_indices(L, values, indices);
}

/* x:cumsum(dim), x:cumprod(dim) */
static int cumulative(lua_State *L, const char *fn, cnn_tensor *(*op)(cnn_tensor *, int)) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  if (lua_gettop(L) > 2)
    return cnn_lua_fail(L, "%s: expects (dim), got %d arguments", fn, lua_gettop(L) - 1);
  return cnn_lua_push_result(L, op(t, sort_dim(L, fn, cnn_lua_check_int(L, 2), t)));
}

static int m_cumsum(lua_State *L) { return cumulative(L, "cumsum", cnn_cumsum); }
static int m_cumprod(lua_State *L) { return cumulative(L, "cumprod", cnn_cumprod); }

/* ---- scatter ------------------------------------------------------------------------- */

/* x:scatter(dim, index, src | value) and friends; returns the core status */
static int scatter_args(lua_State *L, const char *fn, bool value_ok, cnn_tensor **x, int *dim,
                        cnn_tensor **ix, cnn_tensor **src, double *value) {
  *x = cnn_lua_check_tensor(L, 1);
  if (lua_gettop(L) > 4)
    return cnn_lua_fail(L, "%s: expects (dim, index, src); the reduce argument is not supported",
                        fn);
  *dim = sort_dim(L, fn, cnn_lua_check_int(L, 2), *x);
  *src = cnn_lua_to_tensor(L, 4);
  *value = 0;
  if (!*src && !(value_ok && lua_type(L, 4) == LUA_TNUMBER))
    return luaL_typeerror(L, 4, value_ok ? "cnn.Tensor or number" : "cnn.Tensor");
  if (!*src) *value = lua_tonumber(L, 4);
  *ix = cnn_lua_index_arg(L, 3, fn, (*x)->ndim ? (*x)->shape[*dim] : 1);
  cnn_lua_push_tensor(L, *ix); /* anchored */
  return 0;
}

static int scatter_new(lua_State *L, bool add) {
  cnn_tensor *x, *ix, *src;
  int dim;
  double value;
  scatter_args(L, add ? "scatter_add" : "scatter", !add, &x, &dim, &ix, &src, &value);
  return cnn_lua_push_result(L, add ? cnn_scatter_add(x, dim, ix, src)
                                    : cnn_scatter(x, dim, ix, src, value));
}

static int scatter_in_place(lua_State *L, bool add) {
  cnn_tensor *x, *ix, *src;
  int dim;
  double value;
  scatter_args(L, add ? "scatter_add_" : "scatter_", !add, &x, &dim, &ix, &src, &value);
  if ((add ? cnn_scatter_add_(x, dim, ix, src) : cnn_scatter_(x, dim, ix, src, value)) != 0)
    return cnn_lua_error(L);
  lua_settop(L, 1);
  return 1;
}

static int m_scatter(lua_State *L) { return scatter_new(L, false); }
static int m_scatter_add(lua_State *L) { return scatter_new(L, true); }
static int m_scatter_(lua_State *L) { return scatter_in_place(L, false); }
static int m_scatter_add_(lua_State *L) { return scatter_in_place(L, true); }

/* F.one_hot(labels [, num_classes = the largest label]): labels int64 in 1..C */
static int f_one_hot(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int64_t c = cnn_lua_opt_int(L, 2, -1);
  if (t->dtype != CNN_INT64)
    return cnn_lua_fail(L, "one_hot: class labels must be int64, got %s", cnn_dtype_name(t->dtype));
  if (c < -1)
    return cnn_lua_fail(L, "one_hot: num_classes %lld (expected -1 or at least 0)", (long long)c);
  if (c == -1 && cnn_tensor_numel(t) > 0) {
    cnn_tensor *m = cnn_reduce(CNN_RED_MAX, t, 0, false, 0);
    if (!m) return cnn_lua_error(L);
    c = (int64_t)cnn_tensor_get(m, 0);
    cnn_tensor_release(m);
  }
  cnn_tensor *ix = cnn_lua_index_arg(L, 1, "one_hot", c < 0 ? 0 : c);
  cnn_lua_push_tensor(L, ix);
  return cnn_lua_push_result(L, cnn_one_hot(ix, c));
}

/* ---- rearranging ----------------------------------------------------------------------- */

/* integers as varargs from `first`, or one table there; returns the count */
static int int_list(lua_State *L, int first, const char *fn, const char *what, int64_t *out) {
  bool table = lua_istable(L, first);
  int n = table ? (int)luaL_len(L, first) : lua_gettop(L) - first + 1;
  if (n > CNN_MAX_DIMS) return cnn_lua_fail(L, "%s: %d %s (at most %d)", fn, n, what, CNN_MAX_DIMS);
  for (int i = 0; i < n; i++) {
    if (table) lua_geti(L, first, i + 1);
    int isnum;
    lua_Integer v = lua_tointegerx(L, table ? -1 : first + i, &isnum);
    if (!isnum) return cnn_lua_fail(L, "%s: %s must be integers (entry %d)", fn, what, i + 1);
    out[i] = v;
    if (table) lua_pop(L, 1);
  }
  return n;
}

/* 1-based dims (varargs or a table from arg) -> 0-based */
static int dim_list(lua_State *L, int arg, const char *fn, const cnn_tensor *t, int *dims) {
  int64_t raw[CNN_MAX_DIMS];
  int n = int_list(L, arg, fn, "dims", raw);
  for (int i = 0; i < n; i++) dims[i] = sort_dim(L, fn, raw[i], t);
  return n;
}

/* x:flip(dims...) or x:flip{dims} */
static int m_flip(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int dims[CNN_MAX_DIMS];
  if (lua_isnoneornil(L, 2)) return cnn_lua_fail(L, "flip: expects the dims to flip");
  int n = dim_list(L, 2, "flip", t, dims);
  return cnn_lua_push_result(L, cnn_flip(t, n, dims));
}

/* x:roll(shifts [, dims]): numbers or tables; no dims rolls the flattened tensor */
static int m_roll(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int64_t shifts[CNN_MAX_DIMS];
  int dims[CNN_MAX_DIMS], nd = 0;
  lua_settop(L, 3);
  if (lua_isnil(L, 2)) return cnn_lua_fail(L, "roll: expects shifts");
  lua_pushvalue(L, 2); /* int_list reads to the top: one value or a table */
  int ns = int_list(L, 4, "roll", "shifts", shifts);
  lua_settop(L, 3);
  if (!lua_isnil(L, 3)) nd = dim_list(L, 3, "roll", t, dims);
  return cnn_lua_push_result(L, cnn_roll(t, ns, shifts, nd, dims));
}

/* x:repeat(counts...) / x:tile(counts...): varargs or one table */
static int repeat_like(lua_State *L, const char *fn, bool tile) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int64_t reps[CNN_MAX_DIMS], padded[CNN_MAX_DIMS];
  int n = int_list(L, 2, fn, "counts", reps);
  if (!tile || n >= t->ndim) return cnn_lua_push_result(L, cnn_repeat(t, n, reps));
  int pad = t->ndim - n; /* tile: leading 1s up to x's rank */
  for (int d = 0; d < t->ndim; d++) padded[d] = d < pad ? 1 : reps[d - pad];
  return cnn_lua_push_result(L, cnn_repeat(t, t->ndim, padded));
}

static int m_repeat(lua_State *L) { return repeat_like(L, "repeat", false); }
static int m_tile(lua_State *L) { return repeat_like(L, "tile", true); }

/* ---- splitting ------------------------------------------------------------------------- */

/* push a sequence of n tensors from a buffer of new references */
static int push_pieces(lua_State *L, int64_t n, cnn_tensor **pieces) {
  lua_createtable(L, n > INT32_MAX ? 0 : (int)n, 0);
  for (int64_t i = 0; i < n; i++) {
    cnn_lua_push_tensor(L, pieces[i]);
    pieces[i] = NULL;
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* split x along dim into pieces of sizes[0..n) (sizes in a GC'd buffer) */
static int split_with(lua_State *L, cnn_tensor *t, int dim, int64_t n, const int64_t *sizes) {
  cnn_tensor **pieces = lua_newuserdatauv(L, sizeof *pieces * (size_t)(n ? n : 1), 0);
  if (cnn_split(t, dim, n, sizes, pieces)) return cnn_lua_error(L);
  return push_pieces(L, n, pieces);
}

static int64_t *size_buffer(lua_State *L, int64_t n) {
  if (n < 0) cnn_lua_error(L);
  if (n > (int64_t)1 << 28) cnn_lua_fail(L, "split: %lld pieces are too many", (long long)n);
  return lua_newuserdatauv(L, sizeof(int64_t) * (size_t)(n ? n : 1), 0);
}

static int split_dim(lua_State *L, int arg, const char *fn, const cnn_tensor *t) {
  if (t->ndim == 0) return cnn_lua_fail(L, "%s: a 0-d tensor has no dimension to split", fn);
  return cnn_lua_dim_value(L, fn, cnn_lua_opt_int(L, arg, 1), t->ndim, 0);
}

/* x:chunk(chunks [, dim = 1]) -> {pieces} */
static int m_chunk(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int64_t chunks = cnn_lua_check_int(L, 2);
  int dim = split_dim(L, 3, "chunk", t);
  int64_t *sizes = size_buffer(L, cnn_chunk_sizes(t->shape[dim], chunks, NULL));
  int64_t n = cnn_chunk_sizes(t->shape[dim], chunks, sizes);
  return split_with(L, t, dim, n, sizes);
}

/* x:split(split_size | {sizes} [, dim = 1]) -> {pieces} */
static int m_split(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int dim = split_dim(L, 3, "split", t);
  if (!lua_istable(L, 2)) {
    int64_t size = cnn_lua_check_int(L, 2);
    int64_t *sizes = size_buffer(L, cnn_split_sizes(t->shape[dim], size, NULL));
    return split_with(L, t, dim, cnn_split_sizes(t->shape[dim], size, sizes), sizes);
  }
  int64_t n = (int64_t)luaL_len(L, 2);
  int64_t *sizes = size_buffer(L, n);
  for (int64_t i = 0; i < n; i++) {
    lua_geti(L, 2, i + 1);
    int isnum;
    sizes[i] = lua_tointegerx(L, -1, &isnum);
    if (!isnum)
      return cnn_lua_fail(L, "split: sizes must be integers (entry %lld)", (long long)i + 1);
    lua_pop(L, 1);
  }
  return split_with(L, t, dim, n, sizes);
}

/* x:unbind([dim = 1]) -> {slices} */
static int m_unbind(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int dim = split_dim(L, 2, "unbind", t);
  int64_t n = t->shape[dim];
  if (n > (int64_t)1 << 28)
    return cnn_lua_fail(L, "unbind: %lld slices are too many", (long long)n);
  cnn_tensor **pieces = lua_newuserdatauv(L, sizeof *pieces * (size_t)(n ? n : 1), 0);
  if (cnn_unbind(t, dim, pieces)) return cnn_lua_error(L);
  return push_pieces(L, n, pieces);
}

const luaL_Reg cnn_lua_tensor_ops_methods[] = {{"sort", m_sort},
                                               {"topk", m_topk},
                                               {"cumsum", m_cumsum},
                                               {"cumprod", m_cumprod},
                                               {"scatter", m_scatter},
                                               {"scatter_", m_scatter_},
                                               {"scatter_add", m_scatter_add},
                                               {"scatter_add_", m_scatter_add_},
                                               {"repeat", m_repeat},
                                               {"repeat_tensor", m_repeat},
                                               {"tile", m_tile},
                                               {"flip", m_flip},
                                               {"roll", m_roll},
                                               {"chunk", m_chunk},
                                               {"split", m_split},
                                               {"unbind", m_unbind},
                                               {NULL, NULL}};

const luaL_Reg cnn_lua_tensor_ops_funcs[] = {{"one_hot", f_one_hot}, {NULL, NULL}};
