-- nn/conv_block.lua -- when nn.Sequential runs Conv2d, BatchNorm2d, ReLU,
-- MaxPool2d as one op (cnn.fused.conv_bn_relu_pool: on the CPU one node
-- whose activations stay in oneDNN's blocked layouts, core/ops/
-- nn_conv_block.c), and the call that does it.
--
-- The four layers fuse only where the fused op computes exactly what they
-- would, up to rounding: nn.Conv2d and nn.BatchNorm2d themselves (not
-- subclasses), each layer's own forward and no hooks on any of them (a
-- hook would see or replace a tensor the block never makes); Conv2d with
-- numeric padding, zero
-- padding mode, one group; BatchNorm2d in training mode; MaxPool2d
-- without padding, dilation, ceil mode or indices; the input a 4-d batch
-- of the convolution's channels.  The C op may still decline (a dtype
-- other than float32, CUDA, a forced conv algorithm, a shape oneDNN has no
-- fast primitive for): then run() returns nil having changed nothing, and
-- nn.Sequential calls the layers one by one.  Eval mode is never fused
-- here (net:fuse() is the inference path).
local cnn = _G.cnn
local Module = require("nn.module")

local Conv2d = require("nn.conv").Conv2d
local BatchNorm2d = require("nn.normalization").BatchNorm2d
local MaxPool2d = require("nn.pooling").MaxPool2d
local ReLU -- nn.activation's, loaded on first use (it requires nn.container)

-- v (a number or {h, w}) as h, w
local function pair(v)
  if type(v) == "table" then return v[1], v[2] end
  return v, v
end

local plain = Module.is_plain

-- The convolution's {sh, sw, pt, pb, pl, pr, dh, dw}, or nil.
local function conv_args(c)
  if c.padding_mode ~= "zeros" or c.groups ~= 1 or type(c.padding) == "string"
      or #c.kernel_size ~= 2 then
    return nil
  end
  local sh, sw = pair(c.stride)
  local ph, pw = pair(c.padding)
  local dh, dw = pair(c.dilation)
  return { sh, sw, ph, ph, pw, pw, dh, dw }
end

-- The pool's {kh, kw, sh, sw}, or nil.
local function pool_args(p)
  local padh, padw = pair(p.padding)
  local dh, dw = pair(p.dilation)
  if padh ~= 0 or padw ~= 0 or dh ~= 1 or dw ~= 1 or p.ceil_mode or p.return_indices then return nil end
  local kh, kw = pair(p.kernel_size)
  local sh, sw = pair(p.stride)
  return { kh, kw, sh, sw }
end

local M = {}

-- candidate(seq, i): whether seq[i..i+3] are the four layers run() would
-- fuse, leaving aside the input (bench/step_profile.lua asks before any
-- hook exists, since a hook turns the fusion off): the convolution's and
-- the pool's argument lists, or nil.
function M.candidate(seq, i)
  local c, bn, r, p = seq[i], seq[i + 1], seq[i + 2], seq[i + 3]
  -- nn.Sequential asks at every child: the common "no" first, and cheap
  -- (an nn.Conv2d itself, not a subclass; then a batch norm in training)
  if getmetatable(c) ~= Conv2d or getmetatable(bn) ~= BatchNorm2d or not bn.training then return nil end
  ReLU = ReLU or require("nn.activation").ReLU
  if not (plain(c, Conv2d) and plain(bn, BatchNorm2d) and bn:fuses_relu() and plain(r, ReLU)
          and plain(p, MaxPool2d)) then
    return nil
  end
  local ca, pa = conv_args(c), pool_args(p)
  if ca and pa then return ca, pa end
  return nil
end

-- batch norm's running statistics and momentum, as BatchNorm:batch_norm_args
-- would give them, without its side effect (counting the batch)
local function bn_args(bn)
  if not bn.track_running_stats then return nil, nil, 0.0 end
  local momentum = bn.momentum
  if momentum == nil then momentum = 1 / (bn.num_batches_tracked:item() + 1) end
  return bn.running_mean, bn.running_var, momentum
end

local function call_block(c, x, bn, ca, pa)
  local rm, rv, momentum = bn_args(bn)
  return cnn.fused.conv_bn_relu_pool(x, c.weight, c.bias, ca, rm, rv, bn.weight, bn.bias,
                                     momentum, bn.eps, pa)
end

-- run(seq, i, x): seq[i..i+3] applied to x as one op, or nil (nothing
-- changed: run the layers).  Errors name the convolution.
function M.run(seq, i, x)
  local c, bn = seq[i], seq[i + 1]
  local ca, pa = M.candidate(seq, i)
  if not (ca and x:dim() == 4 and x:size(2) == c.in_channels) then return nil end
  local y = c:call_unhooked(call_block, x, bn, ca, pa)
  if y and bn.track_running_stats then
    cnn.no_grad(function() bn.num_batches_tracked:add_(1) end)
  end
  return y
end

return M
