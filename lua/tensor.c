/*
 * tensor.c -- the "cnn.Tensor" userdata type: check/push, release, fields,
 * metamethods, and the methods that state facts or convert (size, item,
 * totable, to, float, ...).  Views live in tensor_view.c, math in
 * tensor_math.c and tensor_reduce.c, indexing in tensor_index.c, printing
 * in tensor_print.c.
 *
 * Design (STYLE.md convention 3, after liolib.c): the userdata is a box
 * holding one `cnn_tensor *` reference.  __gc and __close share one
 * idempotent release that sets the box to NULL; every check of a boxed
 * tensor raises "tensor was released" on a NULL box, so a released tensor
 * used again is an error, never a crash.
 *
 * __index is a C function because integer and table keys index the tensor,
 * but methods live in a plain table (upvalue 1, also stored in the
 * metatable as `__methods` for the REPL's completion): a string key is
 * looked up raw in the methods first, then in the field getters (upvalue
 * 2: name -> C function reading the tensor at index 1).  __newindex sets
 * the settable fields (requires_grad, grad) or assigns into a slice.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bind.h"

/* ---- check / push / release ---------------------------------------------
 * The metatable is in the registry by name (CNN_TENSOR_MT, what "cnn.Tensor
 * expected" names) and by an integer key (luaL_ref).  The per-op checks and
 * pushes fetch it by the integer key: by name, each lua_getfield turns the C
 * string into a Lua string through Lua's string cache (a strcmp), ~120
 * instructions, three times per `x + y` and once more in its result's __gc.
 * The key is kept process-wide, so it is trusted only while every state that
 * registered the type got the same key (one state, or states set up alike);
 * a state that gets another one turns the integer path off for all
 * (LUA_NOREF), and lookups go by name again. */

static _Atomic int tensor_mt_ref; /* 0 before the first state; LUA_NOREF: off */

static void push_tensor_mt(lua_State *L) {
  int ref = tensor_mt_ref;
  if (ref > 0)
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
  else
    luaL_getmetatable(L, CNN_TENSOR_MT);
}

/* The metatable on top of the stack: its integer key in this state. */
static void register_tensor_mt(lua_State *L) {
  lua_pushvalue(L, -1);
  int ref = luaL_ref(L, LUA_REGISTRYINDEX), first = 0;
  if (!atomic_compare_exchange_strong(&tensor_mt_ref, &first, ref) && first != ref)
    tensor_mt_ref = LUA_NOREF;
}

/* luaL_testudata(L, idx, CNN_TENSOR_MT), the metatable fetched by push_tensor_mt */
static cnn_tensor **tensor_box(lua_State *L, int idx) {
  cnn_tensor **box = lua_touserdata(L, idx);
  if (!box || !lua_getmetatable(L, idx)) return NULL;
  push_tensor_mt(L);
  /* lua_rawequal of two tables (or of a table and nil); half the instructions */
  if (lua_topointer(L, -1) != lua_topointer(L, -2)) box = NULL;
  lua_pop(L, 2);
  return box;
}

/* luaL_checkudata(L, idx, CNN_TENSOR_MT): the same message when not a tensor */
static cnn_tensor **check_box(lua_State *L, int idx) {
  cnn_tensor **box = tensor_box(L, idx);
  if (!box) luaL_typeerror(L, idx, CNN_TENSOR_MT);
  return box;
}

cnn_tensor *cnn_lua_check_tensor(lua_State *L, int idx) {
  cnn_tensor **box = check_box(L, idx);
  if (!*box) luaL_argerror(L, idx, "tensor was released");
  return *box;
}

cnn_tensor *cnn_lua_to_tensor(lua_State *L, int idx) {
  cnn_tensor **box = tensor_box(L, idx);
  if (!box) return NULL;
  if (!*box) luaL_argerror(L, idx, "tensor was released");
  return *box;
}

cnn_tensor *cnn_lua_opt_tensor(lua_State *L, int idx) {
  return lua_isnoneornil(L, idx) ? NULL : cnn_lua_check_tensor(L, idx);
}

void cnn_lua_push_tensor(lua_State *L, cnn_tensor *t) {
  cnn_tensor **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = t;
  push_tensor_mt(L);
  lua_setmetatable(L, -2);
  cnn_lua_memory_step(L);
}

/* Raise core's message.  Core's allocator does not know which op asked for
 * memory, so an out-of-memory message gets the running function's name. */
int cnn_lua_error(lua_State *L) {
  const char *msg = cnn_error();
  lua_Debug ar;
  if (strncmp(msg, "out of memory", 13) == 0 && lua_getstack(L, 0, &ar) &&
      lua_getinfo(L, "n", &ar) && ar.name)
    return luaL_error(L, "%s: %s", ar.name, msg);
  return luaL_error(L, "%s", msg);
}

int cnn_lua_push_result(lua_State *L, cnn_tensor *t) {
  if (!t) return cnn_lua_error(L);
  cnn_lua_push_tensor(L, t);
  return 1;
}

static int tensor_release(lua_State *L) {
  cnn_tensor **box = check_box(L, 1);
  if (*box) {
    cnn_tensor *t = *box;
    *box = NULL;
    cnn_tensor_release(t);
  }
  return 0;
}

/* ---- fields ---------------------------------------------------------------- */

static void push_shape(lua_State *L, const cnn_tensor *t) {
  cnn_lua_push_shape(L, t->shape, t->ndim);
}

static int field_shape(lua_State *L) {
  push_shape(L, cnn_lua_check_tensor(L, 1));
  return 1;
}

static int field_dtype(lua_State *L) {
  lua_pushstring(L, cnn_dtype_name(cnn_lua_check_tensor(L, 1)->dtype));
  return 1;
}

static int field_device(lua_State *L) {
  char buf[32];
  lua_pushstring(L, cnn_device_str(cnn_tensor_device(cnn_lua_check_tensor(L, 1)), buf));
  return 1;
}

static int field_requires_grad(lua_State *L) {
  lua_pushboolean(L, cnn_lua_check_tensor(L, 1)->requires_grad);
  return 1;
}

static int field_grad(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  if (!t->grad) return 0;
  cnn_tensor_retain(t->grad);
  cnn_lua_push_tensor(L, t->grad);
  return 1;
}

static int field_grad_fn(lua_State *L) {
  const char *name = cnn_grad_fn_name(cnn_lua_check_tensor(L, 1));
  if (!name) return 0;
  lua_pushstring(L, name);
  return 1;
}

static int field_is_leaf(lua_State *L) {
  lua_pushboolean(L, cnn_lua_check_tensor(L, 1)->grad_fn == NULL);
  return 1;
}

static int field_ndim(lua_State *L) {
  lua_pushinteger(L, cnn_lua_check_tensor(L, 1)->ndim);
  return 1;
}

static const luaL_Reg fields[] = {{"shape", field_shape},
                                  {"dtype", field_dtype},
                                  {"device", field_device},
                                  {"requires_grad", field_requires_grad},
                                  {"grad", field_grad},
                                  {"grad_fn", field_grad_fn},
                                  {"is_leaf", field_is_leaf},
                                  {"ndim", field_ndim},
                                  {NULL, NULL}};

/* x.requires_grad = bool (value at 3) */
static int set_requires_grad(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  if (!lua_isboolean(L, 3)) luaL_typeerror(L, 3, "boolean");
  if (cnn_set_requires_grad(t, lua_toboolean(L, 3)) != 0) return cnn_lua_error(L);
  return 0;
}

/* x.grad = nil | tensor of x's shape, dtype and device */
static int set_grad(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  if (cnn_tensor_set_grad(t, cnn_lua_opt_tensor(L, 3)) != 0) return cnn_lua_error(L);
  return 0;
}

static const luaL_Reg setters[] = {
    {"requires_grad", set_requires_grad}, {"grad", set_grad}, {NULL, NULL}};

/* ---- __index / __newindex / __len ------------------------------------------ */

static int tensor_index(lua_State *L) {
  if (lua_type(L, 2) == LUA_TSTRING) {
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(2)) != LUA_TFUNCTION) return 0;
    lua_CFunction f = lua_tocfunction(L, -1);
    lua_settop(L, 1);
    return f(L);
  }
  return cnn_lua_index_get(L, cnn_lua_check_tensor(L, 1), 2);
}

static int tensor_newindex(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  if (lua_type(L, 2) == LUA_TSTRING) {
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TFUNCTION)
      return luaL_error(L, "cnn.Tensor: cannot set field '%s' (settable: requires_grad, grad)",
                        lua_tostring(L, 2));
    lua_CFunction f = lua_tocfunction(L, -1);
    lua_settop(L, 3);
    return f(L);
  }
  return cnn_lua_index_set(L, t, 2, 3);
}

static int tensor_len(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  if (t->ndim == 0) return luaL_error(L, "len: a 0-d tensor has no length (use :item())");
  lua_pushinteger(L, t->shape[0]);
  return 1;
}

/* ---- facts ------------------------------------------------------------------- */

static int m_size(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  if (lua_isnoneornil(L, 2)) {
    push_shape(L, t);
    return 1;
  }
  lua_pushinteger(L, t->shape[cnn_lua_check_dim(L, 2, "size", t->ndim)]);
  return 1;
}

static int m_stride(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  if (!lua_isnoneornil(L, 2)) {
    lua_pushinteger(L, t->stride[cnn_lua_check_dim(L, 2, "stride", t->ndim)]);
    return 1;
  }
  lua_createtable(L, t->ndim, 0);
  for (int i = 0; i < t->ndim; i++) {
    lua_pushinteger(L, t->stride[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int m_dim(lua_State *L) {
  lua_pushinteger(L, cnn_lua_check_tensor(L, 1)->ndim);
  return 1;
}

static int m_numel(lua_State *L) {
  lua_pushinteger(L, cnn_tensor_numel(cnn_lua_check_tensor(L, 1)));
  return 1;
}

static int m_nelement(lua_State *L) { return m_numel(L); }

/* ---- memory formats (core/memory_format.c) -------------------------------------------- */

typedef enum { FORMAT_CONTIGUOUS, FORMAT_CHANNELS_LAST, FORMAT_PRESERVE } memory_format;

static memory_format parse_memory_format(lua_State *L, const char *fn, const char *name,
                                         bool preserve_ok) {
  if (strcmp(name, "contiguous_format") == 0) return FORMAT_CONTIGUOUS;
  if (strcmp(name, "channels_last") == 0) return FORMAT_CHANNELS_LAST;
  if (preserve_ok && strcmp(name, "preserve_format") == 0) return FORMAT_PRESERVE;
  cnn_lua_fail(L, "%s: unknown memory_format '%s' (contiguous_format, channels_last%s)", fn, name,
               preserve_ok ? ", preserve_format" : "");
  return FORMAT_CONTIGUOUS;
}

/* The memory format argument at idx of x:contiguous, x:is_contiguous and
 * x:clone: none (def), a name, or {memory_format = name};
 * 'preserve_format' only where preserve_ok. */
static memory_format opt_memory_format(lua_State *L, int idx, const char *fn, memory_format def,
                                       bool preserve_ok) {
  if (lua_isnoneornil(L, idx)) return def;
  if (lua_type(L, idx) == LUA_TSTRING)
    return parse_memory_format(L, fn, lua_tostring(L, idx), preserve_ok);
  luaL_checktype(L, idx, LUA_TTABLE);
  static const char *const known[] = {"memory_format", NULL};
  cnn_lua_check_options(L, idx, fn, known);
  const char *name = cnn_lua_opt_string(L, idx, "memory_format", NULL);
  return name ? parse_memory_format(L, fn, name, preserve_ok) : def;
}

/* x:is_contiguous([memory_format]) -- 'contiguous_format' (default) or
 * 'channels_last', as PyTorch's x.is_contiguous(memory_format=...) */
static int m_is_contiguous(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  memory_format f = opt_memory_format(L, 2, "is_contiguous", FORMAT_CONTIGUOUS, false);
  lua_pushboolean(L, f == FORMAT_CHANNELS_LAST ? cnn_tensor_is_channels_last(t)
                                               : cnn_tensor_is_contiguous(t));
  return 1;
}

static cnn_tensor *in_memory_format(cnn_tensor *t, memory_format f) {
  if (f == FORMAT_CHANNELS_LAST) return cnn_contiguous_channels_last(t);
  if (f == FORMAT_CONTIGUOUS) return cnn_contiguous(t);
  cnn_tensor_retain(t);
  return t;
}

static int m_element_size(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)cnn_dtype_size(cnn_lua_check_tensor(L, 1)->dtype));
  return 1;
}

/* Push element i of a contiguous host dump `buf` of dtype dt. */
static void push_element(lua_State *L, cnn_dtype dt, const void *buf, int64_t i) {
  switch (dt) {
  case CNN_INT64: lua_pushinteger(L, ((const int64_t *)buf)[i]); break;
  case CNN_UINT8: lua_pushinteger(L, ((const uint8_t *)buf)[i]); break;
  case CNN_FLOAT32: lua_pushnumber(L, ((const float *)buf)[i]); break;
  case CNN_FLOAT64: lua_pushnumber(L, ((const double *)buf)[i]); break;
  default: lua_pushnumber(L, 0); break; /* half types: dumped as float below */
  }
}

/* A contiguous host dump of t (GC-owned buffer left on the stack); half
 * types are converted to float32 first.  *dt receives the dump's dtype. */
static const void *host_dump(lua_State *L, cnn_tensor *t, cnn_dtype *dt) {
  cnn_tensor *src = t;
  if (t->dtype == CNN_FLOAT16 || t->dtype == CNN_BFLOAT16) {
    src = cnn_to_dtype(t, CNN_FLOAT32);
    if (!src) cnn_lua_error(L);
  } else {
    cnn_tensor_retain(src);
  }
  size_t n = cnn_tensor_nbytes(src);
  void *buf = lua_newuserdatauv(L, n ? n : 1, 0);
  int rc = cnn_tensor_copy_to_host(src, buf);
  *dt = src->dtype;
  cnn_tensor_release(src);
  if (rc != 0) cnn_lua_error(L);
  return buf;
}

static int m_item(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int64_t n = cnn_tensor_numel(t);
  if (n != 1) {
    char s[CNN_SHAPE_STR];
    return cnn_lua_fail(L, "item: tensor with %lld elements (%s) cannot be converted to a number",
                        (long long)n, cnn_tensor_shape_str(t, s));
  }
  cnn_dtype dt;
  const void *buf = host_dump(L, t, &dt);
  push_element(L, dt, buf, 0);
  return 1;
}

/* Fill a nested table for dims d.. of a contiguous dump, from element *pos. */
static void fill_table(lua_State *L, const cnn_tensor *t, int d, cnn_dtype dt, const void *buf,
                       int64_t *pos) {
  luaL_checkstack(L, 3, "totable: nesting too deep");
  int64_t n = t->shape[d];
  lua_createtable(L, n > INT32_MAX ? 0 : (int)n, 0);
  for (int64_t i = 0; i < n; i++) {
    if (d == t->ndim - 1)
      push_element(L, dt, buf, (*pos)++);
    else
      fill_table(L, t, d + 1, dt, buf, pos);
    lua_rawseti(L, -2, i + 1);
  }
}

static int m_totable(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  cnn_dtype dt;
  const void *buf = host_dump(L, t, &dt);
  int64_t pos = 0;
  if (t->ndim == 0)
    push_element(L, dt, buf, 0);
  else
    fill_table(L, t, 0, dt, buf, &pos);
  return 1;
}

/* ---- conversions -------------------------------------------------------------- */

static int to_dtype(lua_State *L, cnn_tensor *t, cnn_dtype dt) {
  return cnn_lua_push_result(L, cnn_to_dtype(t, dt));
}

/* non_blocking: a pinned CPU tensor goes to the GPU asynchronously */
static cnn_tensor *move(cnn_tensor *t, cnn_device dev, bool non_blocking) {
  return non_blocking ? cnn_to_device_async(t, dev) : cnn_to_device(t, dev);
}

static int to_device(lua_State *L, cnn_tensor *t, cnn_device dev, bool non_blocking) {
  return cnn_lua_push_result(L, move(t, dev, non_blocking));
}

/* the non_blocking field of an options table at arg (absent: false) */
static bool opt_non_blocking(lua_State *L, int arg) {
  if (lua_isnoneornil(L, arg)) return false;
  luaL_checktype(L, arg, LUA_TTABLE);
  return cnn_lua_opt_bool(L, arg, "non_blocking", false);
}

/* device first, then dtype; pushes the result */
static int convert(lua_State *L, cnn_tensor *t, cnn_device dev, cnn_dtype dt, bool non_blocking) {
  cnn_tensor *a = move(t, dev, non_blocking);
  if (!a) return cnn_lua_error(L);
  cnn_tensor *b = cnn_to_dtype(a, dt);
  cnn_tensor_release(a);
  return cnn_lua_push_result(L, b);
}

/* x:to({dtype=, device=, non_blocking=, memory_format=}); memory_format
 * 'preserve_format' (the default), 'contiguous_format' or 'channels_last' */
static int to_options(lua_State *L, cnn_tensor *t) {
  static const char *const known[] = {"dtype", "device", "non_blocking", "memory_format", NULL};
  cnn_lua_check_options(L, 2, "to", known);
  const char *devname = cnn_lua_opt_string(L, 2, "device", NULL);
  const char *dtname = cnn_lua_opt_string(L, 2, "dtype", NULL);
  const char *fname = cnn_lua_opt_string(L, 2, "memory_format", NULL);
  memory_format f = fname ? parse_memory_format(L, "to", fname, true) : FORMAT_PRESERVE;
  cnn_device dev = cnn_tensor_device(t);
  cnn_dtype dt = t->dtype;
  if (devname && cnn_lua_parse_device(devname, &dev) != 0)
    return cnn_lua_fail(L, "to: unknown device '%s' (cpu, cuda, cuda:N)", devname);
  if (dtname && cnn_dtype_from_name(dtname, &dt) != 0)
    return cnn_lua_fail(L, "to: unknown dtype '%s' (float32, float64, int64, uint8)", dtname);
  convert(L, t, dev, dt, opt_non_blocking(L, 2));
  if (f == FORMAT_PRESERVE) return 1;
  cnn_tensor *moved = cnn_lua_check_tensor(L, -1);
  return cnn_lua_push_result(L, in_memory_format(moved, f));
}

/* x:to(device, dtype [, {non_blocking = true}]): PyTorch's x.to('cuda', torch.float16) */
static int to_device_dtype(lua_State *L, cnn_tensor *t) {
  const char *devname = luaL_checkstring(L, 2), *dtname = luaL_checkstring(L, 3);
  cnn_device dev;
  cnn_dtype dt;
  if (cnn_lua_parse_device(devname, &dev) != 0)
    return cnn_lua_fail(L, "to: unknown device '%s' (cpu, cuda, cuda:N)", devname);
  if (cnn_dtype_from_name(dtname, &dt) != 0)
    return cnn_lua_fail(L, "to: unknown dtype '%s' (float32, float64, float16, int64, uint8)",
                        dtname);
  return convert(L, t, dev, dt, opt_non_blocking(L, 4));
}

/* x:to('float64' | 'cuda' | other_tensor | {dtype=, device=, non_blocking=}
 *      [, {non_blocking = true}]), x:to(device, dtype [, {non_blocking = true}]) */
static int m_to(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  cnn_tensor *other = cnn_lua_to_tensor(L, 2);
  if (other) return convert(L, t, cnn_tensor_device(other), other->dtype, opt_non_blocking(L, 3));
  if (lua_istable(L, 2)) return to_options(L, t);
  if (lua_type(L, 3) == LUA_TSTRING) return to_device_dtype(L, t);
  const char *s = luaL_checkstring(L, 2);
  cnn_dtype dt;
  cnn_device dev;
  if (cnn_dtype_from_name(s, &dt) == 0) return to_dtype(L, t, dt);
  if (cnn_lua_parse_device(s, &dev) == 0) return to_device(L, t, dev, opt_non_blocking(L, 3));
  return cnn_lua_fail(L,
                      "to: '%s' is neither a dtype (float32, float64, int64, uint8) nor a "
                      "device (cpu, cuda, cuda:N)",
                      s);
}

static int m_float(lua_State *L) { return to_dtype(L, cnn_lua_check_tensor(L, 1), CNN_FLOAT32); }
static int m_double(lua_State *L) { return to_dtype(L, cnn_lua_check_tensor(L, 1), CNN_FLOAT64); }
static int m_half(lua_State *L) { return to_dtype(L, cnn_lua_check_tensor(L, 1), CNN_FLOAT16); }
static int m_long(lua_State *L) { return to_dtype(L, cnn_lua_check_tensor(L, 1), CNN_INT64); }
static int m_byte(lua_State *L) { return to_dtype(L, cnn_lua_check_tensor(L, 1), CNN_UINT8); }
static int m_cpu(lua_State *L) {
  return to_device(L, cnn_lua_check_tensor(L, 1), CNN_DEVICE_CPU, false);
}

/* x:cuda([n]), x:cuda{device = n, non_blocking = true}, x:cuda(n, {non_blocking = true}) */
static int m_cuda(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "device");
    cnn_device dev = {CNN_CUDA, (int)luaL_optinteger(L, -1, 0)};
    lua_pop(L, 1);
    return to_device(L, t, dev, opt_non_blocking(L, 2));
  }
  cnn_device dev = {CNN_CUDA, (int)cnn_lua_opt_int(L, 2, 0)};
  return to_device(L, t, dev, opt_non_blocking(L, 3));
}

/* x:pin_memory() -> a copy in page-locked memory (x itself if already);
 * an error naming the reason when CUDA is unavailable, as in PyTorch */
static int m_pin_memory(lua_State *L) {
  return cnn_lua_push_result(L, cnn_pin_memory(cnn_lua_check_tensor(L, 1)));
}

static int m_is_pinned(lua_State *L) {
  lua_pushboolean(L, cnn_is_pinned(cnn_lua_check_tensor(L, 1)));
  return 1;
}

static int m_type(lua_State *L) {
  lua_pushstring(L, cnn_dtype_name(cnn_lua_check_tensor(L, 1)->dtype));
  return 1;
}

/* x:contiguous([memory_format]): x itself if already laid out so, else a
 * copy ('channels_last': 4-d tensors only) */
static int m_contiguous(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  memory_format f = opt_memory_format(L, 2, "contiguous", FORMAT_CONTIGUOUS, false);
  return cnn_lua_push_result(L, in_memory_format(t, f));
}

/* x:clone([memory_format]): 'preserve_format' (the default: a channels-last
 * x stays so, anything else comes out contiguous), 'contiguous_format' or
 * 'channels_last', as PyTorch's x.clone(memory_format=...) */
static int m_clone(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  memory_format f = opt_memory_format(L, 2, "clone", FORMAT_PRESERVE, true);
  if (f == FORMAT_CONTIGUOUS) return cnn_lua_push_result(L, cnn_clone(t));
  if (f == FORMAT_CHANNELS_LAST && !cnn_tensor_is_channels_last(t)) /* copies (or refuses) */
    return cnn_lua_push_result(L, cnn_contiguous_channels_last(t));
  return cnn_lua_push_result(L, cnn_clone_like_layout(t));
}
static int m_detach(lua_State *L) {
  return cnn_lua_push_result(L, cnn_detach(cnn_lua_check_tensor(L, 1)));
}

/* x:set_(src) -> x, now sharing src's data (see cnn_tensor_set_) */
static int m_set_(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1), *src = cnn_lua_check_tensor(L, 2);
  if (cnn_tensor_set_(t, src)) return cnn_lua_error(L);
  lua_settop(L, 1);
  return 1;
}

/* x:release(): drop the tensor now (as <close> does); later use is an error */
static int m_release(lua_State *L) { return tensor_release(L); }

static int m_is_released(lua_State *L) {
  cnn_tensor **box = check_box(L, 1);
  lua_pushboolean(L, *box == NULL);
  return 1;
}

const luaL_Reg cnn_lua_tensor_methods[] = {{"size", m_size},
                                           {"stride", m_stride},
                                           {"dim", m_dim},
                                           {"numel", m_numel},
                                           {"nelement", m_nelement},
                                           {"is_contiguous", m_is_contiguous},
                                           {"element_size", m_element_size},
                                           {"item", m_item},
                                           {"totable", m_totable},
                                           {"to", m_to},
                                           {"float", m_float},
                                           {"tolist", m_totable}, /* PyTorch's name for totable */
                                           {"double", m_double},
                                           {"half", m_half},
                                           {"long", m_long},
                                           {"byte", m_byte},
                                           {"cpu", m_cpu},
                                           {"cuda", m_cuda},
                                           {"type", m_type},
                                           {"contiguous", m_contiguous},
                                           {"clone", m_clone},
                                           {"detach", m_detach},
                                           {"set_", m_set_},
                                           {"release", m_release},
                                           {"is_released", m_is_released},
                                           {"pin_memory", m_pin_memory},
                                           {"is_pinned", m_is_pinned},
                                           {NULL, NULL}};

/* ---- the type ---------------------------------------------------------------- */

static void push_funcs_table(lua_State *L, const luaL_Reg *l) {
  lua_newtable(L);
  luaL_setfuncs(L, l, 0);
}

/* The names of the computed fields, as a list the REPL completes from. */
static void push_field_names(lua_State *L, const luaL_Reg *l) {
  lua_newtable(L);
  for (int i = 1; l->name; l++, i++) {
    lua_pushstring(L, l->name);
    lua_rawseti(L, -2, i);
  }
}

void cnn_lua_tensor_type(lua_State *L) {
  luaL_newmetatable(L, CNN_TENSOR_MT); /* mt */
  register_tensor_mt(L);
  lua_newtable(L); /* mt methods */
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, "__methods");
  push_field_names(L, fields);
  lua_setfield(L, -3, "__fields");
  lua_pushvalue(L, -1);
  push_funcs_table(L, fields);
  lua_pushcclosure(L, tensor_index, 2);
  lua_setfield(L, -3, "__index");
  push_funcs_table(L, setters);
  lua_pushcclosure(L, tensor_newindex, 1);
  lua_setfield(L, -3, "__newindex");
  lua_pushcfunction(L, tensor_release);
  lua_setfield(L, -3, "__gc");
  lua_pushcfunction(L, tensor_release);
  lua_setfield(L, -3, "__close");
  lua_pushcfunction(L, tensor_len);
  lua_setfield(L, -3, "__len");
  lua_pushcfunction(L, cnn_lua_tensor_tostring);
  lua_setfield(L, -3, "__tostring");
  lua_pushvalue(L, -2);
  luaL_setfuncs(L, cnn_lua_math_meta, 0);
  lua_pop(L, 1);
  lua_remove(L, -2); /* methods */
}
