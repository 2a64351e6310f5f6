-- nn/fuse.lua -- net:fuse(): fold batch norm into the layer before it and
-- fuse the activation after it into the layer, for inference.
--
-- Where: adjacent layers inside every nn.Sequential of the network (the only
-- place the data flow between two children is known), and the chains a
-- module class declares in `fuse_chains`: lists of its children's names in
-- data-flow order whose intermediate outputs nothing else reads, e.g.
-- models.resnet's BasicBlock: { { "conv1", "bn1", "relu" }, { "conv2", "bn2" } }.
-- In order:
--   1. Conv2d followed by BatchNorm2d, or Linear followed by BatchNorm1d
--      (eval mode, running statistics): with s = gamma / sqrt(var + eps)
--      per output channel, W' = W * s and b' = (b - mean) * s + beta
--      (gamma = 1, beta = 0 without affine; b = 0 without a bias, which
--      the layer then gains); the batch norm's slot becomes nn.Identity, so
--      the other children keep their indices.
--   2. Conv2d followed by an activation (Identity slots skipped): ReLU,
--      LeakyReLU, ELU, ReLU6, Hardtanh, Sigmoid, Tanh, GELU (both forms),
--      SiLU, Hardswish, Hardsigmoid, Mish, Softplus; or Linear followed by
--      ReLU.  The layer is wrapped in nn.Fused and the activation's slot
--      becomes Identity.  A fused Conv2d (zero padding) runs
--      F.conv2d_act when no gradient is recorded: on the CPU in float32,
--      the activation is an eltwise post-op inside oneDNN's convolution (no
--      second pass over the output).  A fused Linear applies ReLU in place
--      on its fresh output.  When a gradient is recorded (and for export),
--      the layer and the activation run as before, out of place, so a fused
--      net still differentiates; so does a layer with hooks (cnn.quantize's
--      calibration, summary and profile watch the layer itself).
-- `net:fuse({post_ops = false})` keeps step 2 out of oneDNN (the activation
-- after the layer, in place: the previous fused path, for comparison).
-- Arithmetic of folding in float64, stored back in the weights' dtype.
-- fuse() requires eval mode (folding uses the running statistics, so a
-- training forward afterwards would differ) and returns the net.
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local check = require("check")
local doc = cnn.doc or {}

local M = {}

local function is(m, name)
  local nn = require("nn")
  return Module.is_instance(m, nn[name])
end

-- ---- activations ------------------------------------------------------------------------

-- The activation module m as F.conv2d_act takes it ({name, parameters...}),
-- or nil for a module that is none of them.
local function activation_of(m)
  if is(m, "ReLU") then return { "relu" } end
  if is(m, "LeakyReLU") then return { "leaky_relu", m.negative_slope } end
  if is(m, "ELU") then return { "elu", m.alpha } end
  if is(m, "ReLU6") then return { "relu6" } end
  if is(m, "Hardtanh") then return { "hardtanh", m.min_val, m.max_val } end
  if is(m, "GELU") then return { m.approximate == "tanh" and "gelu_tanh" or "gelu" } end
  if is(m, "Softplus") then return { "softplus", m.beta, m.threshold } end
  for _, name in ipairs({ "Sigmoid", "Tanh", "SiLU", "Hardswish", "Hardsigmoid", "Mish" }) do
    if is(m, name) then return { name:lower() } end
  end
  return nil
end

-- act(y) out of place, through the F function of the same name
local function apply(act, y)
  if act[1] == "gelu_tanh" then return F.gelu(y, { approximate = "tanh" }) end
  return F[act[1]](y, table.unpack(act, 2))
end

local function act_repr(act)
  if #act == 1 then return act[1] end
  local args = {}
  for i = 2, #act do args[#args + 1] = tostring(act[i]) end
  return act[1] .. "(" .. table.concat(args, ", ") .. ")"
end

-- ---- nn.Fused ------------------------------------------------------------------------

local Fused = Module:extend("Fused")

-- activation: "relu" or {name, parameters...} (F.conv2d_act's form)
function Fused:init(layer, activation, opts)
  local act = type(activation) == "string" and { activation } or activation
  if type(act) ~= "table" or type(act[1]) ~= "string" then
    error("nn.Fused: the activation is a name or {name, parameters...}", 3)
  end
  self.layer = layer
  self.activation = act[1] -- "relu", "leaky_relu", ... (cnn.quantize reads it)
  self.act = act
  self.post_op = not (opts and opts.post_ops == false)
end

local function records_grad(x, layer)
  if not cnn.is_grad_enabled() then return false end
  return x.requires_grad or layer.weight.requires_grad or (layer.bias ~= nil and layer.bias.requires_grad)
end

-- Hooks on the layer (cnn.quantize's calibration, summary, profile) must
-- see it called: such a layer runs unfused.
local function hooked(m)
  local h = rawget(m, "_hooks")
  return h ~= nil and (#h.pre > 0 or #h.fwd > 0 or #h.bwd > 0)
end

-- A convolution F.conv2d_act can run (not Conv1d, not padding_mode other
-- than zeros, no hooks).
local function post_op_conv(self)
  local l = self.layer
  return self.post_op and is(l, "Conv2d") and l.padding_mode == "zeros" and l.weight:dim() == 4 and
         not hooked(l)
end

function Fused:forward(x)
  local layer = self.layer
  local recording = records_grad(x, layer)
  if not recording and post_op_conv(self) then
    return F.conv2d_act(x, layer.weight, layer.bias, self.act, {
      stride = layer.stride, padding = layer.padding, dilation = layer.dilation, groups = layer.groups })
  end
  local y = layer(x)
  if recording or self.activation ~= "relu" then return apply(self.act, y) end
  return y:relu_()
end

function Fused:extra_repr() return "activation=" .. act_repr(self.act) end
function Fused:short_repr() return self.layer:short_repr() .. "+" .. act_repr(self.act) end

doc[Fused] = [[
nn.Fused(layer, activation [, {post_ops = true}])
A Conv2d or Linear with its activation ("relu" or {name, parameters...} as
F.conv2d_act takes it) applied to its own output.  Without autograd a Conv2d
runs F.conv2d_act (the activation inside oneDNN's convolution on the CPU), a
Linear applies ReLU in place; with autograd, the layer then the activation.
net:fuse() makes them.]]

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

-- The activation of `a` (a layer) followed by `b` that fuses, or nil.
local function fusable_activation(a, b)
  local act = activation_of(b)
  if not act then return nil end
  if is(a, "Conv2d") then return act end
  if is(a, "Linear") and act[1] == "relu" then return act end
  return nil
end

-- ---- a chain of slots ----------------------------------------------------------------------

-- Fuses along slots[1..n] of `owner` (a Sequential's indices, or a chain's
-- names): every layer with the batch norm and the activation after it.
local function fuse_slots(owner, slots, opts)
  local nn = require("nn")
  local function next_real(i)
    local j = i + 1
    while j <= #slots and is(owner[slots[j]], "Identity") do j = j + 1 end
    return j
  end
  for i = 1, #slots - 1 do
    local j = next_real(i)
    if j <= #slots and foldable(owner[slots[i]], owner[slots[j]]) then
      fold(owner[slots[i]], owner[slots[j]])
      owner[slots[j]] = nn.Identity():eval()
    end
  end
  for i = 1, #slots - 1 do
    local j = next_real(i)
    local act = j <= #slots and fusable_activation(owner[slots[i]], owner[slots[j]])
    if act then
      owner[slots[i]] = Fused(owner[slots[i]], act, opts):eval()
      owner[slots[j]] = nn.Identity():eval()
    end
  end
end

local function check_chain(m, chain)
  for _, name in ipairs(chain) do
    if not Module.is_instance(m[name], Module) then
      error(string.format("fuse: %s's fuse_chains names '%s', which is not a child module",
                          m.__name, tostring(name)), 4)
    end
  end
end

function M.fuse(self, opts)
  local nn = require("nn")
  opts = check.options("net:fuse", opts or {}, { "post_ops" }, 2)
  if opts.post_ops ~= nil then check.boolean("net:fuse", "post_ops", opts.post_ops, 2) end
  for _, m in ipairs(self:modules()) do
    if m.training then
      error("fuse: call net:eval() first (folding batch norm uses the running statistics)", 2)
    end
  end
  for _, m in ipairs(self:modules()) do
    if Module.is_instance(m, nn.Sequential) then
      local slots = {}
      for i = 1, #m do slots[i] = i end
      fuse_slots(m, slots, opts)
    end
    for _, chain in ipairs(m.fuse_chains or {}) do
      check_chain(m, chain)
      fuse_slots(m, chain, opts)
    end
  end
  return self
end

Module.fuse = M.fuse
doc[M.fuse] = [[
net:fuse([{post_ops = true}]) -> net
For inference (eval mode): inside every nn.Sequential (and the chains a module
class lists in `fuse_chains`, as models.resnet's blocks), folds each BatchNorm2d
into the Conv2d before it (BatchNorm1d into Linear) and fuses the activation
after a Conv2d (ReLU, LeakyReLU, ELU, ReLU6, Hardtanh, Sigmoid, Tanh, GELU,
SiLU, Hardswish, Hardsigmoid, Mish, Softplus; ReLU after a Linear) into it
(nn.Fused: without autograd, inside oneDNN's convolution as a post-op).
Replaced layers become nn.Identity, so indices stay.  Outputs match the
unfused net within float rounding (~1e-6).  post_ops = false applies the
activation after the layer instead (in place for ReLU).
  net:eval(); net:fuse()]]

M.Fused = Fused
return M
