/*
 * bind.h -- private header of lua/: what the binding files share.
 *
 * Each binding file exports its functions as luaL_Reg arrays; init.c puts
 * the tensor methods into one plain method table (also reachable as
 * cnn.<name>(x, ...)), the module functions into `cnn` and the functional
 * ops into `F`.  The argument helpers (args.c) translate Lua's conventions
 * (1-based dims and indices, negatives from the end, sizes as varargs or a
 * table, dtype names) into core's and raise errors that name the function.
 *
 * Not part of the public API (that is cnn_lua.h).
 */
#ifndef CNN_LUA_BIND_H
#define CNN_LUA_BIND_H

#include <lauxlib.h>
#include <lua.h>

#include "cnn.h"
#include "cnn_lua.h"
#include "io/io.h"

#define CNN_TENSOR_MT  "cnn.Tensor"
#define CNN_HOOK_MT    "cnn.HookHandle"
#define CNN_BATCHER_MT "cnn.Batcher"

/* ---- registration arrays, one or two per file ---------------------------- */
extern const luaL_Reg cnn_lua_tensor_methods[];     /* tensor.c */
extern const luaL_Reg cnn_lua_view_methods[];       /* tensor_view.c */
extern const luaL_Reg cnn_lua_math_methods[];       /* tensor_math.c */
void cnn_lua_math_register(lua_State *L);           /* those + the op tables' methods */
void cnn_lua_functional_register(lua_State *L);     /* functional.c: F.* */
void cnn_lua_activation_register(lua_State *L);     /* activations.c: F.relu, F.silu, ... */
extern const luaL_Reg cnn_lua_math_funcs[];         /* tensor_math.c: where */
extern const luaL_Reg cnn_lua_math_meta[];          /* tensor_math.c: __add ... __unm */
extern const luaL_Reg cnn_lua_reduce_methods[];     /* tensor_reduce.c */
extern const luaL_Reg cnn_lua_join_funcs[];         /* tensor_reduce.c: cat, stack */
extern const luaL_Reg cnn_lua_tensor_ops_methods[]; /* tensor_ops.c: sort, topk, cumsum, ... */
extern const luaL_Reg cnn_lua_tensor_ops_funcs[];   /* tensor_ops.c: F.one_hot */
extern const luaL_Reg cnn_lua_autograd_methods[];   /* autograd.c */
extern const luaL_Reg cnn_lua_autograd_funcs[];     /* autograd.c */
extern const luaL_Reg cnn_lua_autograd_internal[];  /* autograd.c: for stdlib, in cnn.internal */
extern const luaL_Reg cnn_lua_autocast_funcs[];     /* autocast.c: cnn.autocast */
extern const luaL_Reg cnn_lua_creation_funcs[];     /* creation.c */
extern const luaL_Reg cnn_lua_memory_funcs[];       /* memory.c */
extern const luaL_Reg cnn_lua_functional_funcs[];   /* functional.c */
extern const luaL_Reg cnn_lua_loss_funcs[];         /* losses.c (also in F) */
extern const luaL_Reg cnn_lua_norm_funcs[];    /* functional_norm.c: F.layer_norm, interpolate... */
extern const luaL_Reg cnn_lua_misc_funcs[];    /* init.c */
extern const luaL_Reg cnn_lua_io_funcs[];      /* io.c: cnn.save, cnn.load */
extern const luaL_Reg cnn_lua_io_internal[];   /* io.c: PNG and terminal helpers, in cnn.internal */
extern const luaL_Reg cnn_lua_io_module[];     /* io.c: cnn.io.* */
extern const luaL_Reg cnn_lua_batcher_funcs[]; /* batcher.c: cnn.io.Batcher */
extern const luaL_Reg cnn_lua_image_module[];  /* image.c: cnn.io.read_image, write_png, ... */
extern const luaL_Reg cnn_lua_onnx_funcs[];    /* onnx.c: cnn.io.onnx_read, ... */
extern const luaL_Reg
    cnn_lua_transform_module[]; /* transform.c: cnn.io.transform, transform_shape */

/* tensor.c: create the "cnn.Tensor" metatable; leaves the method table on
 * the stack (the caller fills it). */
void cnn_lua_tensor_type(lua_State *L);
/* shape.c: the "cnn.Shape" metatable; push a shape table (x.shape) */
void cnn_lua_shape_type(lua_State *L);
void cnn_lua_push_shape(lua_State *L, const int64_t *shape, int ndim);
/* tensor_print.c: __tostring */
int cnn_lua_tensor_tostring(lua_State *L);
/* tensor_index.c: push t[key] (key at stack index k) / copy value v into it */
int cnn_lua_index_get(lua_State *L, cnn_tensor *t, int k);
int cnn_lua_index_set(lua_State *L, cnn_tensor *t, int k, int v);
/* memory.c: install the allocation hooks; step the collector for the
 * native bytes allocated since the last call (cheap when there are few). */
void cnn_lua_memory_install(lua_State *L);
void cnn_lua_memory_step(lua_State *L);
/* Pause/resume collector steps and OOM collections (backward); returns the
 * previous state. */
bool cnn_lua_memory_pause(bool on);
/* autograd.c: the hook-handle type; io.c, batcher.c: their types */
void cnn_lua_hook_type(lua_State *L);
void cnn_lua_io_type(lua_State *L);
void cnn_lua_batcher_type(lua_State *L);
void cnn_lua_onnx_type(lua_State *L); /* onnx.c */
/* cuda.c: push the cnn.cuda table; cnn.version_info and friends */
void cnn_lua_cuda_push(lua_State *L);
extern const luaL_Reg cnn_lua_cuda_funcs[];
/* timer.c: cnn.timer and the cnn.Timer type */
extern const luaL_Reg cnn_lua_timer_funcs[];
/* dist.c: push the cnn.dist table (collectives; stdlib/dist.lua wraps it) */
void cnn_lua_dist_push(lua_State *L);
/* fused.c: push the cnn.fused table (optimizer updates); docs into cnn.doc of the table at m */
void cnn_lua_fused_push(lua_State *L, int m);
/* docs.c: fill cnn.doc; cnn module table at index m */
void cnn_lua_docs_register(lua_State *L, int m);

/* transform.c: a pipeline spec table at idx (raises on bad specs); {C, H, W} at arg */
void cnn_lua_read_pipeline(lua_State *L, int spec, cnn_pipeline *p);
void cnn_lua_read_shape3(lua_State *L, int arg, int64_t out[3]);
/* mean/std-like field: a number or 1..4 numbers into out; the count (0: absent) */
int cnn_lua_channel_values(lua_State *L, const char *fn, int t, const char *key, double *out);
/* ---- helpers (tensor.c, args.c) ----------------------------------------- */
/* A live tensor at idx, or NULL if the value is not one (no error). */
cnn_tensor *cnn_lua_to_tensor(lua_State *L, int idx);
/* nil/none -> NULL, else as cnn_lua_check_tensor */
cnn_tensor *cnn_lua_opt_tensor(lua_State *L, int idx);
/* Push the result of a core call (raise cnn_error() if NULL); returns 1. */
int cnn_lua_push_result(lua_State *L, cnn_tensor *t);
/* Raise "fn: msg" built like printf (never returns). */
int cnn_lua_fail(lua_State *L, const char *fmt, ...);

/* Integer-valued number at arg (floats like 2.0 accepted; NaN, 2.5 raise). */
int64_t cnn_lua_check_int(lua_State *L, int arg);
int64_t cnn_lua_opt_int(lua_State *L, int arg, int64_t def);
/* 1-based (negatives from the end) dim value d of a tensor with ndim dims
 * -> 0-based; `extra` widens the range (1 for unsqueeze). */
int cnn_lua_dim_value(lua_State *L, const char *fn, lua_Integer d, int ndim, int extra);
int cnn_lua_check_dim(lua_State *L, int arg, const char *fn, int ndim);
/* Sizes as varargs (first..last) or one table at first; sizes >= 0 (or -1
 * when allow_neg1); the product must not overflow.  Returns ndim. */
int cnn_lua_sizes(lua_State *L, int first, int last, const char *fn, int64_t *shape,
                  bool allow_neg1);
/* dtype name at arg -> dtype (raises on unknown names) */
cnn_dtype cnn_lua_check_dtype(lua_State *L, int arg);
/* "cpu", "cuda", "cuda:N" -> 0 and *out, or -1 */
int cnn_lua_parse_device(const char *s, cnn_device *out);
/* Tensor or number at idx as a tensor (new reference): numbers become a 0-d
 * tensor of a dtype suited to `like` (its dtype, or float32 when an integer
 * tensor meets a non-integer number). */
cnn_tensor *cnn_lua_operand(lua_State *L, int idx, const cnn_tensor *like);
/* The options table at index opts (0: none) holds only keys listed in
 * `known` (NULL-terminated, sorted), else raises "fn: unknown option 'k'
 * (options: a, b, ...)", as the nn constructors do (stdlib/check.lua). */
void cnn_lua_check_options(lua_State *L, int opts, const char *fn, const char *const *known);
/* Fields of an options table at index opts (0 or a non-table: defaults). */
bool cnn_lua_opt_bool(lua_State *L, int opts, const char *key, bool def);
double cnn_lua_opt_number(lua_State *L, int opts, const char *key, double def);
const char *cnn_lua_opt_string(lua_State *L, int opts, const char *key, const char *def);
/* Per-dim indices translated to 0-based int64 (new reference); validates
 * 1 <= i <= size on the CPU and says so in 1-based terms. */
cnn_tensor *cnn_lua_index_arg(lua_State *L, int arg, const char *fn, int64_t size);
/* Add delta to an int64 tensor in place (0-based <-> 1-based indices);
 * only for tensors nobody else holds (core may save returned indices for
 * backward: use cnn_lua_push_one_based for those). */
int cnn_lua_shift_(cnn_tensor *t, int64_t delta);
/* Push a 1-based copy of 0-based indices idx, taking over idx's reference. */
int cnn_lua_push_one_based(lua_State *L, cnn_tensor *idx);
#endif
