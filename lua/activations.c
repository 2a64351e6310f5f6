/*
 * activations.c -- F.* activations: one closure per row of the unary op
 * table that asks for F (relu, sigmoid, tanh, silu, ...), and the
 * activations with options bound by hand: leaky_relu, elu, hardtanh,
 * relu6, softplus, gelu (approximate = 'none' | 'tanh').
 *
 * Every activation is a unary elementwise op (core/ops/elementwise_table.c),
 * so the CPU loops, the CUDA kernels and the fake device all run the same
 * per-element math (core/elementwise_ops.h).  Options follow PyTorch's
 * names and defaults, positionally or in a trailing table; a non-finite
 * option is an error (a NaN limit would poison every output).
 */
#include <math.h>
#include <string.h>

#include "bind.h"

static int act(lua_State *L, cnn_unary_op op, double p0, double p1) {
  return cnn_lua_push_result(L, cnn_unary(op, cnn_lua_check_tensor(L, 1), p0, p1));
}

/* F.<name> for a row of cnn_unary_ops with CNN_LUA_FUNCTIONAL: the op is
 * the closure's upvalue, a light userdata holding the enum value (as the
 * methods of lua/tensor_math.c) */
static int f_activation(lua_State *L) {
  return act(L, (cnn_unary_op)(intptr_t)lua_touserdata(L, lua_upvalueindex(1)), 0, 0);
}

/* A finite number argument at i, or def when absent. */
static double finite_arg(lua_State *L, int i, double def, const char *op, const char *what) {
  double v = luaL_optnumber(L, i, def);
  if (!isfinite(v)) cnn_lua_fail(L, "%s: %s must be a finite number, got %f", op, what, v);
  return v;
}

/* Option `key`: the positional argument at pos, or the field of the
 * options table at opts (0: none), or def; finite. */
static double finite_option(lua_State *L, int opts, int pos, const char *key, double def,
                            const char *op) {
  if (opts) {
    double v = cnn_lua_opt_number(L, opts, key, def);
    if (!isfinite(v)) cnn_lua_fail(L, "%s: %s must be a finite number, got %f", op, key, v);
    return v;
  }
  return finite_arg(L, pos, def, op, key);
}

/* the options table at index 2 (checked against known), or 0 */
static int options_at_2(lua_State *L, const char *fn, const char *const *known) {
  if (!lua_istable(L, 2)) return 0;
  cnn_lua_check_options(L, 2, fn, known);
  return 2;
}

static int f_leaky_relu(lua_State *L) {
  return act(L, CNN_OP_LEAKY_RELU, finite_arg(L, 2, 0.01, "leaky_relu", "negative_slope"), 0);
}
static int f_elu(lua_State *L) {
  return act(L, CNN_OP_ELU, finite_arg(L, 2, 1.0, "elu", "alpha"), 0);
}

/* F.hardtanh(x [, min_val=-1 [, max_val=1]]) or F.hardtanh(x, {min_val=, max_val=}) */
static int f_hardtanh(lua_State *L) {
  static const char *const known[] = {"max_val", "min_val", NULL};
  int opts = options_at_2(L, "F.hardtanh", known);
  double lo = finite_option(L, opts, 2, "min_val", -1.0, "hardtanh");
  double hi = finite_option(L, opts, 3, "max_val", 1.0, "hardtanh");
  return act(L, CNN_OP_HARDTANH, lo, hi);
}

/* F.relu6(x): min(max(x, 0), 6), PyTorch's hardtanh(x, 0, 6) */
static int f_relu6(lua_State *L) { return act(L, CNN_OP_HARDTANH, 0, 6); }

/* F.softplus(x [, beta=1 [, threshold=20]]) or F.softplus(x, {beta=, threshold=}) */
static int f_softplus(lua_State *L) {
  static const char *const known[] = {"beta", "threshold", NULL};
  int opts = options_at_2(L, "F.softplus", known);
  double beta = finite_option(L, opts, 2, "beta", 1.0, "softplus");
  double threshold = finite_option(L, opts, 3, "threshold", 20.0, "softplus");
  if (beta == 0) return cnn_lua_fail(L, "softplus: beta must not be 0");
  return act(L, CNN_OP_SOFTPLUS, beta, threshold);
}

/* F.gelu(x [, {approximate='none'}]): 'none' the erf form, 'tanh' the approximation */
static int f_gelu(lua_State *L) {
  static const char *const known[] = {"approximate", NULL};
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  int opts = options_at_2(L, "F.gelu", known);
  const char *a = cnn_lua_opt_string(L, opts, "approximate", "none");
  if (strcmp(a, "none") == 0) return act(L, CNN_OP_GELU, 0, 0);
  if (strcmp(a, "tanh") == 0) return act(L, CNN_OP_GELU_TANH, 0, 0);
  return cnn_lua_fail(L, "gelu: approximate must be 'none' or 'tanh', got '%s'", a);
}

static const luaL_Reg activation_funcs[] = {{"leaky_relu", f_leaky_relu},
                                            {"elu", f_elu},
                                            {"hardtanh", f_hardtanh},
                                            {"relu6", f_relu6},
                                            {"softplus", f_softplus},
                                            {"gelu", f_gelu},
                                            {NULL, NULL}};

/* Into the table on top of the stack (F): the table-driven activations,
 * then those bound by hand. */
void cnn_lua_activation_register(lua_State *L) {
  for (int op = 0; op < CNN_NUNARY; op++) {
    if (!(cnn_unary_ops[op].lua & CNN_LUA_FUNCTIONAL)) continue;
    lua_pushlightuserdata(L, (void *)(intptr_t)op);
    lua_pushcclosure(L, f_activation, 1);
    lua_setfield(L, -2, cnn_unary_ops[op].name);
  }
  luaL_setfuncs(L, activation_funcs, 0);
}
