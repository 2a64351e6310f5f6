/*
 * tensor_math.c -- elementwise tensor math from Lua: binary ops (methods and
 * the operators + - * / ^ and unary minus), comparisons (uint8 masks),
 * unary functions, clamp, where, and the in-place variants (add_, fill_,
 * copy_, relu_, ...).
 *
 * A number on either side of a binary op becomes a 0-d tensor whose dtype
 * follows the tensor (cnn_lua_operand), so `x + 1` keeps x's dtype and an
 * int64 tensor times 0.5 becomes float32.  `x ^ number` uses the scalar
 * power (one input, simpler gradient).  Hot path (two tensors): no table,
 * no string, no extra allocation beyond the result.  In-place methods
 * return the tensor itself, so calls chain.  The methods of the plain
 * unary and binary ops are registered by looping over core's op tables
 * (cnn_unary_ops, cnn_binary_ops: cnn_lua_math_register).
 */
#include <math.h>
#include <stdio.h>

#include "bind.h"

/* ---- binary -------------------------------------------------------------- */

static int binary(lua_State *L, cnn_binary_op op) {
  cnn_tensor *a = cnn_lua_to_tensor(L, 1), *b = cnn_lua_to_tensor(L, 2);
  if (a && b) return cnn_lua_push_result(L, cnn_binary(op, a, b));
  if (!a && !b) {
    if (lua_isnone(L, 2)) luaL_argerror(L, 2, "cnn.Tensor or number expected, got no value");
    return luaL_typeerror(L, lua_type(L, 1) == LUA_TNUMBER ? 2 : 1, CNN_TENSOR_MT);
  }
  cnn_tensor *sa = a ? a : cnn_lua_operand(L, 1, b);
  cnn_tensor *sb = b ? b : cnn_lua_operand(L, 2, a);
  cnn_tensor *r = cnn_binary(op, sa, sb);
  cnn_tensor_release(a ? sb : sa);
  return cnn_lua_push_result(L, r);
}

static int m_add(lua_State *L) { return binary(L, CNN_OP_ADD); }
static int m_sub(lua_State *L) { return binary(L, CNN_OP_SUB); }
static int m_mul(lua_State *L) { return binary(L, CNN_OP_MUL); }
static int m_div(lua_State *L) { return binary(L, CNN_OP_DIV); }

/* x ^ p with p a number: the scalar power; otherwise the binary op */
static int m_pow(lua_State *L) {
  cnn_tensor *a = cnn_lua_to_tensor(L, 1);
  if (a && lua_type(L, 2) == LUA_TNUMBER)
    return cnn_lua_push_result(L, cnn_unary(CNN_OP_POW_SCALAR, a, lua_tonumber(L, 2), 0));
  return binary(L, CNN_OP_POW);
}

static int m_unm(lua_State *L) {
  return cnn_lua_push_result(L, cnn_unary(CNN_OP_NEG, cnn_lua_check_tensor(L, 1), 0, 0));
}

/* ---- unary ------------------------------------------------------------------ */

static int unary(lua_State *L, cnn_unary_op op) {
  return cnn_lua_push_result(L, cnn_unary(op, cnn_lua_check_tensor(L, 1), 0, 0));
}

static int m_leaky_relu(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  return cnn_lua_push_result(L, cnn_unary(CNN_OP_LEAKY_RELU, t, luaL_optnumber(L, 2, 0.01), 0));
}

static int m_elu(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  return cnn_lua_push_result(L, cnn_unary(CNN_OP_ELU, t, luaL_optnumber(L, 2, 1.0), 0));
}

/* clamp bounds at args 2, 3: nil = open (NaN for core) */
static void clamp_bounds(lua_State *L, double *lo, double *hi) {
  *lo = lua_isnoneornil(L, 2) ? NAN : luaL_checknumber(L, 2);
  *hi = lua_isnoneornil(L, 3) ? NAN : luaL_checknumber(L, 3);
  if (*lo != *lo && *hi != *hi && !(lua_isnoneornil(L, 2) && lua_isnoneornil(L, 3)))
    luaL_argerror(L, 2, "clamp: NaN bound");
}

static int m_clamp(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  double lo, hi;
  clamp_bounds(L, &lo, &hi);
  return cnn_lua_push_result(L, cnn_unary(CNN_OP_CLAMP, t, lo, hi));
}

/* cnn.where(cond, a, b): a, b tensors or numbers (numbers follow the
 * other operand's dtype).  Operands made here are anchored on the stack. */
static int f_where(lua_State *L) {
  cnn_tensor *c = cnn_lua_check_tensor(L, 1);
  cnn_tensor *ta = cnn_lua_to_tensor(L, 2), *tb = cnn_lua_to_tensor(L, 3);
  for (int i = 2; i <= 3; i++)
    if (!cnn_lua_to_tensor(L, i) && lua_type(L, i) != LUA_TNUMBER)
      return luaL_typeerror(L, i, "cnn.Tensor or number");
  lua_settop(L, 3);
  cnn_tensor *a = cnn_lua_operand(L, 2, ta ? ta : tb);
  cnn_lua_push_tensor(L, a);
  cnn_tensor *b = cnn_lua_operand(L, 3, ta ? ta : tb ? tb : a);
  cnn_lua_push_tensor(L, b);
  return cnn_lua_push_result(L, cnn_where(c, a, b));
}

/* ---- in place --------------------------------------------------------------- */

static int inplace_status(lua_State *L, int rc) {
  if (rc != 0) return cnn_lua_error(L);
  lua_settop(L, 1);
  return 1;
}

static int binary_(lua_State *L, cnn_binary_op op) {
  cnn_tensor *a = cnn_lua_check_tensor(L, 1);
  cnn_tensor *b = cnn_lua_operand(L, 2, a);
  int rc = cnn_binary_(op, a, b);
  cnn_tensor_release(b);
  return inplace_status(L, rc);
}

static int unary_(lua_State *L, cnn_unary_op op, double p0, double p1) {
  return inplace_status(L, cnn_unary_(op, cnn_lua_check_tensor(L, 1), p0, p1));
}

static int m_clamp_(lua_State *L) {
  cnn_lua_check_tensor(L, 1);
  double lo, hi;
  clamp_bounds(L, &lo, &hi);
  return unary_(L, CNN_OP_CLAMP, lo, hi);
}

static int m_fill_(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  cnn_tensor *v = cnn_lua_to_tensor(L, 2);
  if (v) return inplace_status(L, cnn_copy_(t, v)); /* fill_ with a 0-d tensor */
  return inplace_status(L, cnn_fill_(t, luaL_checknumber(L, 2)));
}

static int m_zero_(lua_State *L) {
  return inplace_status(L, cnn_fill_(cnn_lua_check_tensor(L, 1), 0));
}

static int m_copy_(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  return inplace_status(L, cnn_copy_(t, cnn_lua_check_tensor(L, 2)));
}

/* x:masked_fill_(mask, value): where mask is non-zero, x = value */
static int m_masked_fill_(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1), *mask = cnn_lua_check_tensor(L, 2);
  cnn_tensor *v = cnn_lua_operand(L, 3, t);
  cnn_tensor *r = cnn_where(mask, v, t);
  cnn_tensor_release(v);
  if (!r) return cnn_lua_error(L);
  int rc = cnn_copy_(t, r);
  cnn_tensor_release(r);
  return inplace_status(L, rc);
}

static int m_masked_fill(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1), *mask = cnn_lua_check_tensor(L, 2);
  cnn_tensor *v = cnn_lua_operand(L, 3, t);
  cnn_tensor *r = cnn_where(mask, v, t);
  cnn_tensor_release(v);
  return cnn_lua_push_result(L, r);
}

/* ---- the op tables' methods -------------------------------------------------
 * One closure per row of cnn_unary_ops / cnn_binary_ops that asks for a
 * method (CNN_LUA_METHOD) or an in-place variant (CNN_LUA_INPLACE); the op
 * is the closure's upvalue, a light userdata holding the enum value:
 * lua_touserdata reads it in half the instructions of lua_tointeger (~20
 * of ~2,500 per x:add_(y) on 16 elements). */

static int op_of(lua_State *L) { return (int)(intptr_t)lua_touserdata(L, lua_upvalueindex(1)); }
static int unary_method(lua_State *L) { return unary(L, op_of(L)); }
static int unary_inplace(lua_State *L) { return unary_(L, op_of(L), 0, 0); }
static int binary_method(lua_State *L) { return binary(L, op_of(L)); }
static int binary_inplace(lua_State *L) { return binary_(L, op_of(L)); }

/* t[name .. suffix] = closure(fn, op), t on top of the stack */
static void set_op(lua_State *L, const char *name, const char *suffix, lua_CFunction fn, int op) {
  char key[64];
  snprintf(key, sizeof key, "%s%s", name, suffix);
  lua_pushlightuserdata(L, (void *)(intptr_t)op);
  lua_pushcclosure(L, fn, 1);
  lua_setfield(L, -2, key);
}

void cnn_lua_math_register(lua_State *L) {
  luaL_setfuncs(L, cnn_lua_math_methods, 0);
  for (int op = 0; op < CNN_NUNARY; op++) {
    const cnn_unary_info *u = &cnn_unary_ops[op];
    if (u->lua & CNN_LUA_METHOD) set_op(L, u->name, "", unary_method, op);
    if (u->lua & CNN_LUA_INPLACE) set_op(L, u->name, "_", unary_inplace, op);
  }
  for (int op = 0; op < CNN_NBINARY; op++) {
    const cnn_binary_info *b = &cnn_binary_ops[op];
    if (b->lua & CNN_LUA_METHOD) set_op(L, b->name, "", binary_method, op);
    if (b->lua & CNN_LUA_INPLACE) set_op(L, b->name, "_", binary_inplace, op);
  }
}

/* the methods with their own argument handling (the table's rows are added
 * by cnn_lua_math_register) */
const luaL_Reg cnn_lua_math_methods[] = {{"pow", m_pow},
                                         {"leaky_relu", m_leaky_relu},
                                         {"elu", m_elu},
                                         {"clamp", m_clamp},
                                         {"clamp_", m_clamp_},
                                         {"fill_", m_fill_},
                                         {"zero_", m_zero_},
                                         {"copy_", m_copy_},
                                         {"masked_fill_", m_masked_fill_},
                                         {"masked_fill", m_masked_fill},
                                         {NULL, NULL}};

const luaL_Reg cnn_lua_math_funcs[] = {{"where", f_where}, {NULL, NULL}};

/* ---- Lua's comparison operators ------------------------------------------------
 * Lua's ==, <, <=, >, >= must give one boolean, so PyTorch's elementwise
 * masks cannot be had through them.  Decision: == on two tensors is
 * identity -- true when both name the same tensor (two Lua values of one
 * tensor, such as x.grad read twice, included), never elementwise; a
 * tensor and a number are never equal (Lua decides that without asking).
 * The prompt points to x:eq(y) when a typed comparison reached here
 * (cnn_lua_tensor_eq_calls).  <, <=, >, >= are errors naming x:lt(y),
 * x:gt(0), ... */
static unsigned long eq_calls;

unsigned long cnn_lua_tensor_eq_calls(void) { return eq_calls; }

static int meta_eq(lua_State *L) {
  eq_calls++;
  lua_pushboolean(L, cnn_lua_check_tensor(L, 1) == cnn_lua_check_tensor(L, 2));
  return 1;
}

static int meta_order(lua_State *L) {
  return luaL_error(L, "< > <= >= on a tensor: Lua's comparisons give one boolean, not a mask; use "
                       "x:gt(0), x:lt(y), x:ge(y), x:le(y) (elementwise, uint8)");
}

const luaL_Reg cnn_lua_math_meta[] = {{"__add", m_add},  {"__sub", m_sub},     {"__mul", m_mul},
                                      {"__div", m_div},  {"__pow", m_pow},     {"__unm", m_unm},
                                      {"__eq", meta_eq}, {"__lt", meta_order}, {"__le", meta_order},
                                      {NULL, NULL}};
