-- nn/linear_block.lua -- when nn.Sequential runs Linear, ReLU and a
-- Dropout after them as one op (cnn.fused.linear_relu_dropout: the bias,
-- relu and dropout's mask one pass over the product, one autograd node;
-- core/ops/nn_linear_block.c), and the call that does it.
--
-- They fuse only where the op computes exactly what the layers would (the
-- same product, the same mask for one seed: the same bits): nn.Linear
-- itself (not a subclass), nn.ReLU and nn.Dropout with their own forwards,
-- and no hooks on any of them (a hook would see or replace a tensor the
-- block never makes).  A Dropout in eval mode or with p = 0 is the
-- identity and fuses as p = 0; one with p = 1 stays a layer of its own
-- (Linear and ReLU still fuse).  A Linear and a ReLU without a Dropout
-- fuse too.  Unlike the convolution block this holds in eval mode as
-- well: nothing here but the dropout depends on the mode.  The C op may
-- still decline (CUDA, float16, mixed dtypes, an autocast that casts
-- operands): then run() returns nil having changed nothing, and
-- nn.Sequential calls the layers one by one.
local cnn = _G.cnn
local Module = require("nn.module")

local Linear = require("nn.linear").Linear
local ReLU, Dropout -- loaded on first use, as nn/conv_block.lua does

local plain = Module.is_plain

local M = {}

-- candidate(seq, i): whether seq[i], seq[i+1] (and seq[i+2]) are layers
-- run() would fuse, leaving aside the input (bench/step_profile.lua asks
-- before any hook exists): how many (2 or 3) and dropout's p, or nil.
function M.candidate(seq, i)
  local l, r = seq[i], seq[i + 1]
  -- nn.Sequential asks at every child: the common "no" first, and cheap
  if getmetatable(l) ~= Linear or r == nil then return nil end
  ReLU = ReLU or require("nn.activation").ReLU
  Dropout = Dropout or require("nn.dropout").Dropout
  if not (plain(l, Linear) and plain(r, ReLU)) then return nil end
  local d = seq[i + 2]
  if d ~= nil and plain(d, Dropout) then
    if not d.training or d.p == 0 then return 3, 0 end
    if d.p < 1 then return 3, d.p end
  end
  return 2, 0
end

local function call_block(l, x, p)
  return cnn.fused.linear_relu_dropout(x, l.weight, l.bias, p)
end

-- run(seq, i, x): the fused layers applied to x and how many they were,
-- or nil (nothing changed: run the layers).  Errors name the Linear.
function M.run(seq, i, x)
  local count, p = M.candidate(seq, i)
  if not (count and cnn.is_tensor(x)) then return nil end
  local y = seq[i]:call_unhooked(call_block, x, p)
  if y then return y, count end
  return nil
end

return M
