/*
 * memory.c -- telling Lua's collector about native tensor memory, and
 * cnn.memory(), cnn.empty_cache().
 *
 * Lua sees a tensor as a userdata of 8 bytes while it may own megabytes
 * (DESIGN.md "Memory under a garbage collector").  Core calls on_alloc()
 * after each storage allocation made on the Lua thread; we only add the
 * bytes (plus a fixed overhead for the headers) to `pending`.  The
 * collector is stepped in proportion to `pending` at the next safe point:
 * cnn_lua_push_tensor(), after the new result is anchored on the stack
 * (never in the middle of a core op, so finalizers never run while core is
 * half way through an operation).  When an allocation fails, on_oom() runs
 * a full collection (finalizers release unreachable tensors) and asks
 * core to retry once.
 *
 * While backward runs (it may call Lua hooks, which push tensors) the
 * collector is not stepped: a finalizer must not release a tensor of the
 * graph core is walking.  The debt is paid at the next push after it.
 *
 * A sentinel userdata in the registry removes the hooks when the state is
 * closed, so core never calls into a dead state.
 */
#include <limits.h>

#include "bind.h"

#define HEADER_OVERHEAD 256        /* tensor + storage headers, malloc slack */
#define STEP_THRESHOLD  (64 << 10) /* step the collector per 64 KiB */
#define CYCLE_MIN_KB    4096       /* at most ~one full cycle per 4 MiB of tensors, */
#define LIVE_SHARE      4          /* or per a quarter of the live tensor bytes */

static size_t pending;
static double collector_seconds; /* in the steps and collections tensor bytes ran */
static bool paused; /* during backward: no finalizers while core walks the graph */

bool cnn_lua_memory_pause(bool on) {
  bool prev = paused;
  paused = on;
  return prev;
}

static void on_alloc(size_t nbytes, void *ud) {
  (void)ud;
  pending += nbytes + HEADER_OVERHEAD;
}

static int on_oom(size_t nbytes, void *ud) {
  (void)nbytes;
  lua_State *L = ud;
  if (paused) return 0;
  int64_t before = cnn_memory(CNN_CPU).live;
  double t0 = cnn_now_seconds();
  lua_gc(L, LUA_GCCOLLECT, 0); /* refused (a no-op) inside a finalizer */
  collector_seconds += cnn_now_seconds() - t0;
  pending = 0;
  return cnn_memory(CNN_CPU).live < before;
}

/* Tensor bytes between two full cycles: CYCLE_MIN_KB, or a quarter of the
 * tensor bytes alive (CPU and GPU), whichever is larger. */
static size_t cycle_kb(void) {
  int64_t live = cnn_memory(CNN_CPU).live + cnn_memory(CNN_CUDA).live;
  size_t kb = live > 0 ? (size_t)(live >> 10) / LIVE_SHARE : 0;
  return kb > CYCLE_MIN_KB ? kb : CYCLE_MIN_KB;
}

/* Tensor bytes reach the collector as debt scaled by heap / cycle_kb()
 * while Lua's own heap is smaller than that: a full cycle costs about the
 * heap's size in work and Lua pauses about the heap's size of debt between
 * cycles, so unscaled, a 0.5 MB heap ran a full cycle (~60 us) for every
 * ~0.65 MB of tensors -- 70 % of an op on a 64x128 tensor.  Scaled, a
 * cycle comes about once per cycle_kb() of tensors (that much garbage may
 * wait for it); a heap larger than that is paced as before.
 * The live share: with a flat 4 MiB, a ResNet-20 step at batch 64 (157 MB
 * of tensors at its peak) ran 36 full cycles, most of which freed almost
 * nothing -- the forward's tensors stay alive until backward, and backward
 * pauses the collector -- and the collector's steps took 5.2 ms of the
 * ~100 ms step; with the share, 12 cycles and 2.7 ms, and the same peak.
 * Garbage may reach about a third of the truly live bytes (Lua's own pause
 * lets its heap double). */
void cnn_lua_memory_step(lua_State *L) {
  if (pending < STEP_THRESHOLD || paused) return;
  size_t kb = pending >> 10, heap_kb = (size_t)lua_gc(L, LUA_GCCOUNT) + 1, pace = cycle_kb();
  if (heap_kb < pace) kb = kb * heap_kb / pace;
  if (kb == 0) return; /* not a kilobyte of debt yet: keep counting */
  pending = 0;
  double t0 = cnn_now_seconds();
  lua_gc(L, LUA_GCSTEP, kb > INT_MAX ? INT_MAX : (int)kb);
  collector_seconds += cnn_now_seconds() - t0;
}

static int sentinel_gc(lua_State *L) {
  (void)L;
  cnn_set_alloc_hooks(NULL);
  return 0;
}

void cnn_lua_memory_install(lua_State *L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_State *main = lua_tothread(L, -1);
  lua_pop(L, 1);
  cnn_alloc_hooks h = {on_alloc, on_oom, main};
  cnn_set_alloc_hooks(&h);
  lua_newuserdatauv(L, 1, 0);
  lua_newtable(L);
  lua_pushcfunction(L, sentinel_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, "cnn.memory_sentinel");
}

static void set_int(lua_State *L, const char *k, int64_t v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}

/* cnn.memory(['cpu' | 'cuda']) -> {live=, peak=, count=, cached=} in bytes,
 * and collector_time: the seconds Lua's collector has spent in the steps
 * and collections that tensor allocations ran (the process's, any device) */
static int f_memory(lua_State *L) {
  const char *dev = luaL_optstring(L, 1, "cpu");
  cnn_device d;
  if (cnn_lua_parse_device(dev, &d) != 0) return luaL_argerror(L, 1, "device expected (cpu, cuda)");
  cnn_memory_stats s = cnn_memory(d.type);
  lua_createtable(L, 0, 3);
  set_int(L, "live", s.live);
  set_int(L, "peak", s.peak);
  set_int(L, "count", s.count);
  set_int(L, "cached", s.cached);
  lua_pushnumber(L, collector_seconds);
  lua_setfield(L, -2, "collector_time");
  return 1;
}

static int f_reset_peak_memory(lua_State *L) {
  (void)L;
  cnn_memory_reset_peak();
  return 0;
}

/* cnn.empty_cache() -> bytes given back (the CPU's cached free blocks) */
static int f_empty_cache(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)cnn_memory_empty_cache());
  return 1;
}

const luaL_Reg cnn_lua_memory_funcs[] = {{"memory", f_memory},
                                         {"reset_peak_memory", f_reset_peak_memory},
                                         {"empty_cache", f_empty_cache},
                                         {NULL, NULL}};
