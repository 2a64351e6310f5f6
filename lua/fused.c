/*
 * fused.c -- cnn.fused: the fused optimizer updates of core/ops/optim.c,
 * called by stdlib/optim (SGD, Adam/AdamW, RMSprop) once per parameter and
 * step.  Positional arguments (no option tables) keep the call cheap; the
 * optimizers have validated the hyper-parameters already.
 *
 *   cnn.fused.sgd(p, g, buf|nil, lr, momentum, dampening, weight_decay, nesterov, first_step)
 *   cnn.fused.adam(p, g, m, v, vmax|nil, lr, beta1, beta2, eps, weight_decay, decoupled, step)
 *   cnn.fused.rmsprop(p, g, sq, ga|nil, buf|nil, lr, alpha, eps, weight_decay, momentum, centered)
 */
#include "bind.h"

static int f_sgd(lua_State *L) {
  int rc = cnn_sgd_update(cnn_lua_check_tensor(L, 1), cnn_lua_check_tensor(L, 2), cnn_lua_opt_tensor(L, 3),
                          luaL_checknumber(L, 4), luaL_checknumber(L, 5), luaL_checknumber(L, 6),
                          luaL_checknumber(L, 7), lua_toboolean(L, 8), lua_toboolean(L, 9));
  return rc ? cnn_lua_error(L) : 0;
}

static int f_adam(lua_State *L) {
  int rc = cnn_adam_update(cnn_lua_check_tensor(L, 1), cnn_lua_check_tensor(L, 2), cnn_lua_check_tensor(L, 3),
                           cnn_lua_check_tensor(L, 4), cnn_lua_opt_tensor(L, 5), luaL_checknumber(L, 6),
                           luaL_checknumber(L, 7), luaL_checknumber(L, 8), luaL_checknumber(L, 9),
                           luaL_checknumber(L, 10), lua_toboolean(L, 11), luaL_checkinteger(L, 12));
  return rc ? cnn_lua_error(L) : 0;
}

static int f_rmsprop(lua_State *L) {
  int rc = cnn_rmsprop_update(cnn_lua_check_tensor(L, 1), cnn_lua_check_tensor(L, 2), cnn_lua_check_tensor(L, 3),
                              cnn_lua_opt_tensor(L, 4), cnn_lua_opt_tensor(L, 5), luaL_checknumber(L, 6),
                              luaL_checknumber(L, 7), luaL_checknumber(L, 8), luaL_checknumber(L, 9),
                              luaL_checknumber(L, 10), lua_toboolean(L, 11));
  return rc ? cnn_lua_error(L) : 0;
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
    {"rmsprop", f_rmsprop,
     "cnn.fused.rmsprop(p, g, sq, ga|nil, buf|nil, lr, alpha, eps, weight_decay, momentum, centered)\n"
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
