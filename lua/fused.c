/*
 * fused.c -- cnn.fused: the fused optimizer updates of core/ops/optim.c,
 * called by stdlib/optim (SGD, Adam/AdamW, RMSprop) once per parameter and
 * step.  Positional arguments (no option tables) keep the call cheap; the
 * optimizers have validated the hyper-parameters already.
 *
 *   cnn.fused.sgd(p, g, buf|nil, lr, momentum, dampening, weight_decay, nesterov, first_step)
 *   cnn.fused.adam(p, g, m, v, vmax|nil, lr, beta1, beta2, eps, weight_decay, decoupled, step)
 *   cnn.fused.rmsprop(p, g, sq, ga|nil, buf|nil, lr, alpha, eps, weight_decay, momentum, centered)
 *   cnn.fused.adam_many({p...}, {g...}, {m...}, {v...}, {vmax...}|nil, {step...},
 *                       lr, beta1, beta2, eps, weight_decay, decoupled)
 * adam_many updates a whole parameter group in one
 * call: one pass over all elements instead of one call per tensor.
 *
 *   cnn.fused.add_relu(a, b)
 * is F.relu(a + b) in one pass and one node (CNN_OP_ADD_RELU), what the
 * model zoo's residual blocks end with (stdlib/models/resnet.lua).
 *
 *   cnn.fused.batch_norm_relu(x, running_mean|nil, running_var|nil, weight|nil, bias|nil,
 *                             training, momentum, eps)
 * is F.relu(F.batch_norm(...)) in one node (cnn_batch_norm_relu), what
 * nn.Sequential calls for a BatchNorm followed by a ReLU (stdlib/nn/container.lua).
 *
 *   cnn.fused.batch_norm_add_relu(x, residual, running_mean|nil, running_var|nil,
 *                                 weight|nil, bias|nil, training, momentum, eps)
 * is F.relu(F.batch_norm(x, ...) + residual) in one node
 * (cnn_batch_norm_add_relu): a residual block's end in the model zoo.
 *
 *   cnn.fused.conv_bn_relu_pool(x, w, b|nil, {sh, sw, pt, pb, pl, pr, dh, dw},
 *                               running_mean|nil, running_var|nil, weight|nil, bias|nil,
 *                               momentum, eps, {kh, kw, sh, sw})
 * is the training block conv -> batch norm -> ReLU -> max pool in one node
 * (cnn_conv_bn_relu_pool), or nil where the block does not apply.
 *
 *   cnn.fused.linear_relu_dropout(x, w, b|nil, p)
 * is F.dropout(F.relu(F.linear(x, w, b)), p) in one node (p = 0: no
 * dropout; cnn_linear_relu_dropout), or nil where the block does not apply.
 */
#include "bind.h"

static int f_sgd(lua_State *L) {
  int rc = cnn_sgd_update(cnn_lua_check_tensor(L, 1), cnn_lua_check_tensor(L, 2),
                          cnn_lua_opt_tensor(L, 3), luaL_checknumber(L, 4), luaL_checknumber(L, 5),
                          luaL_checknumber(L, 6), luaL_checknumber(L, 7), lua_toboolean(L, 8),
                          lua_toboolean(L, 9));
  return rc ? cnn_lua_error(L) : 0;
}

static int f_adam(lua_State *L) {
  int rc = cnn_adam_update(cnn_lua_check_tensor(L, 1), cnn_lua_check_tensor(L, 2),
                           cnn_lua_check_tensor(L, 3), cnn_lua_check_tensor(L, 4),
                           cnn_lua_opt_tensor(L, 5), luaL_checknumber(L, 6), luaL_checknumber(L, 7),
                           luaL_checknumber(L, 8), luaL_checknumber(L, 9), luaL_checknumber(L, 10),
                           lua_toboolean(L, 11), luaL_checkinteger(L, 12));
  return rc ? cnn_lua_error(L) : 0;
}

static int f_rmsprop(lua_State *L) {
  int rc = cnn_rmsprop_update(
      cnn_lua_check_tensor(L, 1), cnn_lua_check_tensor(L, 2), cnn_lua_check_tensor(L, 3),
      cnn_lua_opt_tensor(L, 4), cnn_lua_opt_tensor(L, 5), luaL_checknumber(L, 6),
      luaL_checknumber(L, 7), luaL_checknumber(L, 8), luaL_checknumber(L, 9),
      luaL_checknumber(L, 10), lua_toboolean(L, 11));
  return rc ? cnn_lua_error(L) : 0;
}

/* ---- adam_many ---- */

/* Entry i (1-based) of the list at arg as a tensor; raises naming the list.
 * (cnn_lua_to_tensor: the metatable by its integer key, not by name --
 * five lookups a parameter every step.) */
static cnn_tensor *list_tensor(lua_State *L, int arg, int i, const char *what) {
  lua_rawgeti(L, arg, i);
  cnn_tensor *t = cnn_lua_to_tensor(L, -1);
  lua_pop(L, 1); /* the list keeps the tensor alive */
  if (!t) luaL_error(L, "adam_many: %s[%d] is not a tensor", what, i);
  return t;
}

static int f_adam_many(lua_State *L) {
  static const char *const what[] = {"params", "grads", "exp_avgs", "exp_avg_sqs",
                                     "max_exp_avg_sqs"};
  for (int a = 1; a <= 6; a++)
    if (a != 5 || !lua_isnoneornil(L, 5)) luaL_checktype(L, a, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 1);
  if (n > 1000000) return luaL_error(L, "adam_many: %I parameters (at most 1000000)", n);
  bool ams = !lua_isnoneornil(L, 5);
  for (int a = 2; a <= 6; a++)
    if ((a != 5 || ams) && luaL_len(L, a) != n)
      return luaL_error(L, "adam_many: %s has %I entries, params %I",
                        a == 6 ? "steps" : what[a - 1], luaL_len(L, a), n);
  /* scratch owned by Lua (an error below frees it with the userdata) */
  cnn_tensor **t = lua_newuserdatauv(L, (size_t)(n ? n : 1) * (5 * sizeof *t + sizeof(int64_t)), 0);
  int64_t *steps = (int64_t *)(t + 5 * n);
  for (int a = 0; a < 5; a++)
    for (lua_Integer i = 0; i < n && (a != 4 || ams); i++)
      t[a * n + i] = list_tensor(L, a + 1, (int)i + 1, what[a]);
  for (lua_Integer i = 0; i < n; i++) {
    lua_rawgeti(L, 6, (int)i + 1);
    int ok;
    steps[i] = lua_tointegerx(L, -1, &ok);
    lua_pop(L, 1);
    if (!ok) return luaL_error(L, "adam_many: steps[%d] is not an integer", (int)i + 1);
  }
  int rc =
      cnn_adam_update_many((int)n, t, t + n, t + 2 * n, t + 3 * n, ams ? t + 4 * n : NULL, steps,
                           luaL_checknumber(L, 7), luaL_checknumber(L, 8), luaL_checknumber(L, 9),
                           luaL_checknumber(L, 10), luaL_checknumber(L, 11), lua_toboolean(L, 12));
  return rc ? cnn_lua_error(L) : 0;
}

static int f_add_relu(lua_State *L) {
  cnn_tensor *a = cnn_lua_check_tensor(L, 1), *b = cnn_lua_check_tensor(L, 2);
  return cnn_lua_push_result(L, cnn_binary(CNN_OP_ADD_RELU, a, b));
}

/* batch_norm_relu's and batch_norm_add_relu's arguments from `first`:
 * running_mean|nil, running_var|nil, weight|nil, bias|nil, training,
 * momentum, eps (checked, naming `op`) */
typedef struct {
  cnn_tensor *t[4];
  bool training;
  double momentum, eps;
} bn_call;

static bn_call bn_call_args(lua_State *L, int first, const char *op) {
  bn_call c;
  for (int i = 0; i < 4; i++) c.t[i] = cnn_lua_opt_tensor(L, first + i);
  luaL_checktype(L, first + 4, LUA_TBOOLEAN);
  c.training = lua_toboolean(L, first + 4);
  c.momentum = luaL_checknumber(L, first + 5), c.eps = luaL_checknumber(L, first + 6);
  if (!(c.eps > 0)) cnn_lua_fail(L, "%s: eps must be positive, got %g", op, c.eps);
  if (!(c.momentum >= 0 && c.momentum <= 1))
    cnn_lua_fail(L, "%s: momentum must be in [0, 1], got %g", op, c.momentum);
  return c;
}

static int f_batch_norm_relu(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1);
  bn_call c = bn_call_args(L, 2, "batch_norm_relu");
  return cnn_lua_push_result(
      L, cnn_batch_norm_relu(x, c.t[0], c.t[1], c.t[2], c.t[3], c.training, c.momentum, c.eps));
}

static int f_batch_norm_add_relu(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1), *r = cnn_lua_check_tensor(L, 2);
  bn_call c = bn_call_args(L, 3, "batch_norm_add_relu");
  return cnn_lua_push_result(L, cnn_batch_norm_add_relu(x, r, c.t[0], c.t[1], c.t[2], c.t[3],
                                                        c.training, c.momentum, c.eps));
}

/* The n integers of the list at arg into out ("<what> must be a list of n integers"). */
static void int_list(lua_State *L, int arg, const char *what, int n, int *out) {
  luaL_checktype(L, arg, LUA_TTABLE);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, arg, i + 1);
    int ok;
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    lua_pop(L, 1);
    if (!ok || v < 0 || v > 1000000)
      luaL_error(L, "conv_bn_relu_pool: %s must be a list of %d integers in [0, 1000000]", what, n);
    out[i] = (int)v;
  }
}

static int f_conv_bn_relu_pool(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1), *w = cnn_lua_check_tensor(L, 2),
             *b = cnn_lua_opt_tensor(L, 3), *t[4];
  cnn_conv_block_params p;
  int conv[8], pool[4];
  int_list(L, 4, "the convolution's {sh, sw, pt, pb, pl, pr, dh, dw}", 8, conv);
  for (int i = 0; i < 4; i++) t[i] = cnn_lua_opt_tensor(L, i + 5);
  double momentum = luaL_checknumber(L, 9), eps = luaL_checknumber(L, 10);
  int_list(L, 11, "the pool's {kh, kw, sh, sw}", 4, pool);
  if (!(eps > 0)) return cnn_lua_fail(L, "conv_bn_relu_pool: eps must be positive, got %g", eps);
  if (!(momentum >= 0 && momentum <= 1))
    return cnn_lua_fail(L, "conv_bn_relu_pool: momentum must be in [0, 1], got %g", momentum);
  p.conv = (cnn_conv_params){.stride = {conv[0], conv[1]},
                             .pad = {conv[2], conv[3], conv[4], conv[5]},
                             .dilation = {conv[6], conv[7]},
                             .groups = 1};
  p.pool_kernel[0] = pool[0], p.pool_kernel[1] = pool[1];
  p.pool_stride[0] = pool[2], p.pool_stride[1] = pool[3];
  bool declined;
  cnn_tensor *y =
      cnn_conv_bn_relu_pool(x, w, b, t[0], t[1], t[2], t[3], momentum, eps, &p, &declined);
  if (!y && declined) return lua_pushnil(L), 1;
  return cnn_lua_push_result(L, y);
}

static int f_linear_relu_dropout(lua_State *L) {
  cnn_tensor *x = cnn_lua_check_tensor(L, 1), *w = cnn_lua_check_tensor(L, 2),
             *b = cnn_lua_opt_tensor(L, 3);
  double p = luaL_checknumber(L, 4);
  bool declined;
  cnn_tensor *y = cnn_linear_relu_dropout(x, w, b, p, &declined);
  if (!y && declined) return lua_pushnil(L), 1;
  return cnn_lua_push_result(L, y);
}

static const struct {
  const char *name;
  lua_CFunction fn;
  const char *doc;
} fused[] = {
    {"sgd", f_sgd,
     "cnn.fused.sgd(p, g, buf|nil, lr, momentum, dampening, weight_decay, nesterov, first_step)\n"
     "One in-place SGD step of parameter p (torch.optim.SGD's formula), shared with the GPU."},
    {"adam", f_adam,
     "cnn.fused.adam(p, g, m, v, vmax|nil, lr, beta1, beta2, eps, weight_decay, decoupled, step)\n"
     "One in-place Adam (decoupled: AdamW; vmax: amsgrad) step of parameter p."},
    {"adam_many", f_adam_many,
     "cnn.fused.adam_many({p...}, {g...}, {m...}, {v...}, {vmax...}|nil, {step...}, lr, beta1, "
     "beta2, eps,\n"
     "                    weight_decay, decoupled)\n"
     "cnn.fused.adam over a list of parameters in one call (one pass over all their elements)."},
    {"add_relu", f_add_relu,
     "cnn.fused.add_relu(a, b)\n"
     "F.relu(a + b) as one op: one pass, one node (AddReluBackward), the same values bit for "
     "bit;\na residual block's end (models.resnet*).  Broadcasts as a + b does."},
    {"batch_norm_relu", f_batch_norm_relu,
     "cnn.fused.batch_norm_relu(x, running_mean|nil, running_var|nil, weight|nil, bias|nil, "
     "training, momentum, eps)\n"
     "F.relu(F.batch_norm(x, ...)) as one op: one pass forward and backward on the CPU (the two "
     "ops elsewhere);\nnn.Sequential uses it for a BatchNorm followed by a ReLU without hooks."},
    {"batch_norm_add_relu", f_batch_norm_add_relu,
     "cnn.fused.batch_norm_add_relu(x, residual, running_mean|nil, running_var|nil, weight|nil, "
     "bias|nil,\n"
     "                              training, momentum, eps)\n"
     "F.relu(F.batch_norm(x, ...) + residual) as one op (one pass forward on the CPU; the ops "
     "elsewhere), residual of\nx's shape; the model zoo's residual blocks end with it where "
     "the batch norm has no hook."},
    {"conv_bn_relu_pool", f_conv_bn_relu_pool,
     "cnn.fused.conv_bn_relu_pool(x, w, b|nil, {sh, sw, pt, pb, pl, pr, dh, dw}, "
     "running_mean|nil,\n"
     "                            running_var|nil, weight|nil, bias|nil, momentum, eps, {kh, kw, "
     "sh, sw})\n"
     "F.max_pool2d(F.relu(F.batch_norm(F.conv2d(x, w, b, ...), ..., training)), ...) as one op in\n"
     "oneDNN's blocked layouts (the CPU); nil where the block does not apply (run the layers).\n"
     "nn.Sequential uses it for Conv2d, BatchNorm2d, ReLU, MaxPool2d in training without hooks."},
    {"linear_relu_dropout", f_linear_relu_dropout,
     "cnn.fused.linear_relu_dropout(x, w, b|nil, p)\n"
     "F.dropout(F.relu(F.linear(x, w, b)), p) as one op (p = 0: F.relu(F.linear(x, w, b))): the\n"
     "bias, relu and dropout's mask one pass over the product, the mask F.dropout would draw;\n"
     "nil where the block does not apply (run the layers).  nn.Sequential uses it for Linear,\n"
     "ReLU[, Dropout] without hooks."},
    {"rmsprop", f_rmsprop,
     "cnn.fused.rmsprop(p, g, sq, ga|nil, buf|nil, lr, alpha, eps, weight_decay, momentum, "
     "centered)\n"
     "One in-place RMSprop step of parameter p."},
};

/* Push the cnn.fused table; registers the docs in the cnn table at index m. */
void cnn_lua_fused_push(lua_State *L, int m) {
  lua_newtable(L);
  lua_getfield(L, m, "doc");
  for (size_t i = 0; i < sizeof fused / sizeof fused[0]; i++) {
    lua_pushcfunction(L, fused[i].fn);
    lua_pushvalue(L, -1);
    lua_setfield(L, -4, fused[i].name);
    if (lua_istable(L, -2)) {
      lua_pushstring(L, fused[i].doc);
      lua_settable(L, -3);
    } else {
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1); /* doc */
}
