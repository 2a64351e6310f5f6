/*
 * viz_bind.h -- C helpers of stdlib/viz.lua and stdlib/inspect.lua that Lua
 * cannot reach or would do too slowly (lua/viz_bind.c).
 *
 * cnn_lua_open_viz(L) adds these functions to the `cnn` table on top of the
 * stack (lua/init.c calls it after building the module):
 *   cnn.viz_png(t, path)          uint8 H x W or H x W x C (C = 1, 3, 4) -> PNG
 *   cnn.png_read(path)            -> h, w, channels, uint8 tensor h x w x channels
 *   cnn.grad_fn_inputs(t)         -> list of the inputs of the node that made t
 *                                    (false where an input needs no gradient), or nil
 *   cnn.viz_node_key(t)           -> an integer naming t's graph node (its
 *                                    grad_fn, or the tensor itself for a leaf)
 *   cnn.viz_isatty([fd = 1])      -> whether fd is a terminal
 *   cnn.viz_term_width()          -> the terminal's columns, or nil
 */
#ifndef CNN_LUA_VIZ_BIND_H
#define CNN_LUA_VIZ_BIND_H

#include <lua.h>

void cnn_lua_open_viz(lua_State *L);

#endif
