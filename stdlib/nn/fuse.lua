-- nn/fuse.lua -- net:fuse(): fold batch norm into the layer before it and
-- fuse ReLU into it, for inference.
--
-- Where: adjacent layers inside every nn.Sequential of the network (the only
-- place the data flow between two children is known).  In order:
--   1. Conv2d followed by BatchNorm2d, or Linear followed by BatchNorm1d
--      (eval mode, running statistics): with s = gamma / sqrt(var + eps)
--      per output channel, W' = W * s and b' = (b - mean) * s + beta
--      (gamma = 1, beta = 0 without affine; b = 0 without a bias, which
--      the layer then gains); the batch norm's slot becomes nn.Identity, so
--      the other children keep their indices.
--   2. Conv2d or Linear followed by ReLU (Identity slots skipped): the
--      layer is wrapped in nn.Fused, which applies ReLU in place on the
--      layer's fresh output when no gradient is recorded (no second
--      buffer, one pass less over memory), and out of place otherwise, so a
--      fused net still differentiates; the ReLU's slot becomes Identity.
--      (ReLU as a oneDNN post-op inside the convolution is not wired: the
--      in-place pass is this version's fused path.)
-- Arithmetic in float64, stored back in the weights' dtype.  fuse()
-- requires eval mode (folding uses the running statistics, so a training
-- forward afterwards would differ) and returns the net.
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local doc = cnn.doc or {}

local M = {}

local function is(m, name)
  local nn = require("nn")
  return Module.is_instance(m, nn[name])
end

-- ---- nn.Fused ------------------------------------------------------------------------

local Fused = Module:extend("Fused")

function Fused:init(layer, activation)
  self.layer = layer
  self.activation = activation -- "relu"
end

function Fused:forward(x)
  local y = self.layer(x)
  if cnn.is_grad_enabled() and y.requires_grad then return F.relu(y) end
  return y:relu_()
end

function Fused:extra_repr() return "activation=" .. self.activation end
function Fused:short_repr() return self.layer:short_repr() .. "+ReLU" end

doc[Fused] = [[
nn.Fused(layer, "relu")
A Conv2d or Linear with its ReLU applied to its own output: in place when no
gradient is recorded (inference), out of place otherwise.  net:fuse() makes them.]]

-- ---- folding batch norm ----------------------------------------------------------------

local function foldable(layer, bn)
  if bn.training then return false end
  if not bn.track_running_stats then return false end
  if is(layer, "Conv2d") and is(bn, "BatchNorm2d") then return layer.out_channels == bn.num_features end
  if is(layer, "Linear") and is(bn, "BatchNorm1d") then return layer.out_features == bn.num_features end
  return false
end

-- W' = W * s, b' = (b - mean) * s + beta, s = gamma / sqrt(var + eps)
local function fold(layer, bn)
  cnn.no_grad(function()
    local w = layer.weight
    local c = w:size(1)
    local s = bn.running_var:double():add(bn.eps):rsqrt()
    if bn.weight then s = s * bn.weight:double() end
    local shape = { c }
    for _ = 2, w:dim() do shape[#shape + 1] = 1 end
    local b = layer.bias and layer.bias:double() or cnn.zeros({ c }, "float64")
    local nb = (b - bn.running_mean:double()) * s
    if bn.bias then nb = nb + bn.bias:double() end
    w:copy_(w:double() * s:view(shape))
    if layer.bias then layer.bias:copy_(nb)
    else layer:register_parameter("bias", nb:to(w.dtype)) end
  end)
end

-- ---- one Sequential ------------------------------------------------------------------------

local function next_real(seq, i)
  local j = i + 1
  while j <= #seq and is(seq[j], "Identity") do j = j + 1 end
  return j
end

local function fuse_sequence(seq, nn)
  for i = 1, #seq - 1 do
    local j = next_real(seq, i)
    if j <= #seq and foldable(seq[i], seq[j]) then
      fold(seq[i], seq[j])
      seq[j] = nn.Identity():eval()
    end
  end
  for i = 1, #seq - 1 do
    local a = seq[i]
    local j = next_real(seq, i)
    if j <= #seq and (is(a, "Conv2d") or is(a, "Linear")) and Module.is_instance(seq[j], nn.ReLU) then
      seq[i] = Fused(a, "relu"):eval()
      seq[j] = nn.Identity():eval()
    end
  end
end

function M.fuse(self)
  local nn = require("nn")
  for _, m in ipairs(self:modules()) do
    if m.training then
      error("fuse: call net:eval() first (folding batch norm uses the running statistics)", 2)
    end
  end
  for _, m in ipairs(self:modules()) do
    if Module.is_instance(m, nn.Sequential) then fuse_sequence(m, nn) end
  end
  return self
end

Module.fuse = M.fuse
doc[M.fuse] = [[
net:fuse() -> net
For inference (eval mode): inside every nn.Sequential, folds each BatchNorm2d
into the Conv2d before it (BatchNorm1d into Linear) and fuses a following ReLU
into the layer (nn.Fused: in place when no gradient is recorded).  Replaced
layers become nn.Identity, so indices stay.  Outputs match the unfused net
within float rounding (~1e-6).
  net:eval(); net:fuse()]]

M.Fused = Fused
return M
