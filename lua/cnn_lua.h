/*
 * cnn_lua.h -- the one public header of lua/: the Lua bindings of core/.
 *
 * luaopen_cnn() builds the `cnn` module table (tensor type "cnn.Tensor",
 * creation functions, F = functional ops, autograd, memory, rng, docs).
 * cnn_lua_open_all() is what the cnnsh program calls on a fresh state: it
 * requires cnn, sets the globals `cnn` and `F`, makes `nn`, `optim`, `data`,
 * `train`, `viz` and `help` lazily-required globals, and installs a
 * package.searchers entry that loads the embedded stdlib (or, when the
 * environment variable CNNSH_STDLIB names a folder, the stdlib files there).
 *
 * Ownership: a tensor userdata owns exactly one reference to its
 * cnn_tensor; cnn_lua_push_tensor() takes over the caller's reference.
 */
#ifndef CNN_LUA_H
#define CNN_LUA_H

#include <lua.h>

#include "cnn.h"

#ifdef __cplusplus
extern "C" {
#endif

int luaopen_cnn(lua_State *L);
void cnn_lua_open_all(lua_State *L);

/* The tensor at stack index idx; raises "cnn.Tensor expected" or "tensor
 * was released".  The reference is borrowed. */
cnn_tensor *cnn_lua_check_tensor(lua_State *L, int idx);
/* Push t as a "cnn.Tensor" userdata, taking over one reference. */
void cnn_lua_push_tensor(lua_State *L, cnn_tensor *t);
/* Raise cnn_error() as a Lua error (never returns). */
int cnn_lua_error(lua_State *L);
/* How often == compared two tensors (identity; tensor_math.c), so the
 * prompt can point to x:eq(y) after a typed `x == y`. */
unsigned long cnn_lua_tensor_eq_calls(void);

#ifdef __cplusplus
}
#endif
#endif
