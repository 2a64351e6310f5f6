/*
 * dist.c -- the `cnn.dist` table: core's collectives (core/dist.h) for Lua,
 * and the "cnn.dist.Work" type of a started all-reduce.  stdlib/dist.lua
 * builds the `dist` module (DDP, the sampler, the launch helpers) on these.
 *
 *   cnn.dist.init(backend)            -- 'mpi' | 'nccl'; loads the module
 *   cnn.dist.info()                   -> rank, world, local_rank, local_world
 *   cnn.dist.is_initialized(), cnn.dist.backend()
 *   cnn.dist.all_reduce(t, op)        -> t   (op 'sum' | 'mean' | 'max' | 'min')
 *   cnn.dist.broadcast(t, root)       -> t   (root a 0-based rank)
 *   cnn.dist.all_gather(t)            -> world x t's shape
 *   cnn.dist.reduce_scatter(t, op)    -> t:size(1)/world x ...
 *   cnn.dist.barrier()
 *   cnn.dist.all_reduce_async(t, op)  -> work: work:wait() -> t,
 *                                        work:is_completed() -> bool
 *   cnn.dist.shutdown(status)         -- finalize (0) or stop every rank
 *   cnn.dist.abort(code)              -- stop every rank now
 *
 * Ranks are 0-based, as MPI's and as CUDA device ordinals ("cuda:0").
 * Nothing here loads Open MPI before init.  A Work box holds a core
 * cnn_dist_work* (NULL once freed); __gc and __close wait and free, so a
 * forgotten work never leaves MPI writing into freed memory.
 */
#include <lauxlib.h>
#include <lua.h>

#include "bind.h"
#include "dist.h"

#define WORK_MT "cnn.dist.Work"

void cnn_lua_dist_push(lua_State *L);

static const char *const op_names[] = {"sum", "mean", "max", "min", NULL};

static cnn_dist_op check_op(lua_State *L, int arg) {
  return (cnn_dist_op)luaL_checkoption(L, arg, "sum", op_names);
}

static int init(lua_State *L) {
  if (cnn_dist_init(luaL_optstring(L, 1, "mpi"))) return cnn_lua_error(L);
  return 0;
}

static int info(lua_State *L) {
  cnn_dist_info in = cnn_dist_get_info();
  lua_pushinteger(L, in.rank);
  lua_pushinteger(L, in.world);
  lua_pushinteger(L, in.local_rank);
  lua_pushinteger(L, in.local_world);
  return 4;
}

static int is_initialized(lua_State *L) {
  lua_pushboolean(L, cnn_dist_is_initialized());
  return 1;
}

static int backend(lua_State *L) {
  const char *b = cnn_dist_backend();
  if (b)
    lua_pushstring(L, b);
  else
    lua_pushnil(L);
  return 1;
}

static int all_reduce(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  if (cnn_dist_all_reduce(t, check_op(L, 2))) return cnn_lua_error(L);
  lua_settop(L, 1);
  return 1;
}

static int broadcast(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  int64_t root = cnn_lua_opt_int(L, 2, 0);
  if (root < 0 || root > 1 << 30) return luaL_argerror(L, 2, "root must be a rank (0-based)");
  if (cnn_dist_broadcast(t, (int)root)) return cnn_lua_error(L);
  lua_settop(L, 1);
  return 1;
}

static int all_gather(lua_State *L) {
  return cnn_lua_push_result(L, cnn_dist_all_gather(cnn_lua_check_tensor(L, 1)));
}

static int reduce_scatter(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  return cnn_lua_push_result(L, cnn_dist_reduce_scatter(t, check_op(L, 2)));
}

static int barrier(lua_State *L) {
  if (cnn_dist_barrier()) return cnn_lua_error(L);
  return 0;
}

static int shutdown(lua_State *L) {
  lua_pushinteger(L, cnn_dist_shutdown((int)luaL_optinteger(L, 1, 0)));
  return 1;
}

static int abort_all(lua_State *L) {
  cnn_dist_abort((int)luaL_optinteger(L, 1, 1));
  return 0; /* without dist: nothing to stop */
}

/* ---- cnn.dist.Work ----------------------------------------------------------------------- */

typedef struct {
  cnn_dist_work *w; /* NULL once freed */
} work_box;

static work_box *check_work(lua_State *L) { return luaL_checkudata(L, 1, WORK_MT); }

static int all_reduce_async(lua_State *L) {
  cnn_tensor *t = cnn_lua_check_tensor(L, 1);
  cnn_dist_op op = check_op(L, 2);
  work_box *box = lua_newuserdatauv(L, sizeof *box, 1); /* closed before the work exists */
  box->w = NULL;
  luaL_setmetatable(L, WORK_MT);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1); /* the tensor, returned by wait() */
  if (!(box->w = cnn_dist_all_reduce_start(t, op))) return cnn_lua_error(L);
  return 1;
}

static int work_wait(lua_State *L) {
  work_box *box = check_work(L);
  if (!box->w) return luaL_error(L, "work:wait(): the work was freed");
  if (cnn_dist_work_wait(box->w)) return cnn_lua_error(L);
  lua_getiuservalue(L, 1, 1);
  return 1;
}

static int work_is_completed(lua_State *L) {
  work_box *box = check_work(L);
  bool done = true;
  if (box->w && cnn_dist_work_test(box->w, &done)) return cnn_lua_error(L);
  lua_pushboolean(L, done);
  return 1;
}

static int work_free(lua_State *L) {
  work_box *box = check_work(L);
  cnn_dist_work_free(box->w);
  box->w = NULL;
  return 0;
}

static void work_type(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"wait", work_wait}, {"is_completed", work_is_completed}, {NULL, NULL}};
  static const luaL_Reg meta[] = {{"__gc", work_free}, {"__close", work_free}, {NULL, NULL}};
  luaL_newmetatable(L, WORK_MT);
  luaL_setfuncs(L, meta, 0);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

void cnn_lua_dist_push(lua_State *L) {
  static const luaL_Reg f[] = {{"init", init},
                               {"info", info},
                               {"is_initialized", is_initialized},
                               {"backend", backend},
                               {"all_reduce", all_reduce},
                               {"broadcast", broadcast},
                               {"all_gather", all_gather},
                               {"reduce_scatter", reduce_scatter},
                               {"barrier", barrier},
                               {"all_reduce_async", all_reduce_async},
                               {"shutdown", shutdown},
                               {"abort", abort_all},
                               {NULL, NULL}};
  work_type(L);
  luaL_newlib(L, f);
}
