/*
 * data_bind.h -- the Lua binding of core/io's dataset readers and of the
 * background batcher: the `cnn.io` table used by stdlib/data.lua.
 *
 *   cnn.io.load_idx(path)        -> tensor (IDX as stored: uint8 images,
 *                                   uint8 labels, 0-based)
 *   cnn.io.load_cifar10(path)    -> images (N x 3 x 32 x 32 uint8),
 *                                   labels (int64 N, 0-based as stored)
 *   cnn.io.Batcher(images, labels, order, batch_size [, drop_last
 *                  [, transform [, label_offset [, seed]]]])
 *                                -> "cnn.Batcher" userdata with :next()
 *                                   (x, y | nil), :close(), #b
 *   cnn.io.isatty(fd_or_file)    -> boolean (progress bars)
 *
 * cnn_lua_open_data() fills `cnn.io` (creating it when absent, keeping what
 * another binding file already put there, e.g. save/load) given the cnn
 * module table on top of the stack; the stack is left as it was.
 */
#ifndef CNN_LUA_DATA_BIND_H
#define CNN_LUA_DATA_BIND_H

#include <lua.h>

void cnn_lua_open_data(lua_State *L);

#endif
