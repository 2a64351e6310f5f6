-- nn/quantized.lua -- nn.QuantizedConv2d and nn.QuantizedLinear: the int8
-- layers that cnn.quantize (stdlib/quantize.lua) puts in place of Conv2d,
-- Linear and nn.Fused(conv or linear, "relu").
--
-- Arithmetic (F.conv2d_int8, core/cpu/conv_int8.c): the float32 input is
-- quantized per tensor with input_scale, qx = clamp(round(x / input_scale),
-- -128, 127) (ONNX's int8 QuantizeLinear, zero point 0); the weight is
-- stored quantized per output channel, weight_q = round(W / weight_scale)
-- in [-127, 127] (whole numbers kept in a float32 tensor, so state_dict
-- and printing need no int8 dtype); oneDNN sums qx * weight_q in int32 and
-- the result is acc * input_scale * weight_scale[k] + bias[k], float32,
-- with the ReLU of a fused layer applied in the same pass.  Inference only.
-- Buffers (saved by state_dict): weight_q, weight_scale, input_scale (one
-- element), bias (or none).
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local doc = cnn.doc or {}

local M = {}

-- W (out x ...) -> weight_q (same shape, whole numbers), weight_scale (out):
-- symmetric per output channel, scale = max|W[k]| / 127 (1 for an all-zero row).
function M.quantize_weight(w)
  return cnn.no_grad(function()
    local k = w:size(1)
    local amax = w:detach():abs():reshape(k, -1):max(2)
    local scale = amax:div(127):masked_fill(amax:eq(0), 1)
    local shape = { k }
    for _ = 2, w:dim() do shape[#shape + 1] = 1 end
    local q = (w:detach() / scale:view(shape)):round():clamp(-127, 127)
    return q:contiguous(), scale:contiguous()
  end)
end

-- Buffers common to both layers.
local function set_buffers(self, weight, bias, input_scale)
  local q, s = M.quantize_weight(weight)
  self:register_buffer("weight_q", q)
  self:register_buffer("weight_scale", s)
  self:register_buffer("input_scale", cnn.tensor({ input_scale }))
  self:register_buffer("bias", bias and bias:detach():clone() or nil)
end

-- ---- nn.QuantizedConv2d --------------------------------------------------------------

local QuantizedConv2d = Module:extend("QuantizedConv2d")

-- conv: an nn.Conv2d; input_scale: the calibrated scale of its input;
-- relu: apply ReLU to the output (a fused layer).
function QuantizedConv2d:init(conv, input_scale, relu)
  self.in_channels, self.out_channels = conv.in_channels, conv.out_channels
  self.kernel_size, self.stride, self.padding = conv.kernel_size, conv.stride, conv.padding
  self.dilation, self.groups, self.relu = conv.dilation, conv.groups, relu or false
  set_buffers(self, conv.weight, conv.bias, input_scale)
  self.training = false
end

function QuantizedConv2d:forward(x)
  return F.conv2d_int8(x, self.weight_q, self.weight_scale, self.bias, self.input_scale:item(), {
    stride = self.stride, padding = self.padding, dilation = self.dilation,
    groups = self.groups, relu = self.relu })
end

function QuantizedConv2d:extra_repr()
  return string.format("%d, %d, kernel_size=%dx%d, input_scale=%.4g%s", self.in_channels,
    self.out_channels, self.kernel_size[1], self.kernel_size[2], self.input_scale:item(),
    self.relu and ", relu" or "")
end

function QuantizedConv2d:short_repr()
  return string.format("QConv %d->%d %dx%d%s", self.in_channels, self.out_channels,
    self.kernel_size[1], self.kernel_size[2], self.relu and "+ReLU" or "")
end

doc[QuantizedConv2d] = [[
nn.QuantizedConv2d(conv, input_scale [, relu])
An int8 Conv2d (made by cnn.quantize): input quantized per tensor with
input_scale, weights per output channel (weight_q, weight_scale), int32
sums through oneDNN, float32 output (+ bias, then ReLU when relu).
Inference only.]]

-- ---- nn.QuantizedLinear ---------------------------------------------------------------

local QuantizedLinear = Module:extend("QuantizedLinear")

function QuantizedLinear:init(linear, input_scale, relu)
  self.in_features, self.out_features = linear.in_features, linear.out_features
  self.relu = relu or false
  set_buffers(self, linear.weight, linear.bias, input_scale)
  self.training = false
end

-- Over the last dimension, as nn.Linear: a 1x1 int8 convolution of the
-- rows (leading dimensions flattened).
function QuantizedLinear:forward(x)
  if x:dim() < 1 or x:size(-1) ~= self.in_features then
    error(string.format("QuantizedLinear: input %s does not end in %d features",
                        require("fmt").shape_str(x.shape), self.in_features), 2)
  end
  local shape = x.shape
  local rows = x:reshape(-1, self.in_features)
  local w = self.weight_q:view(self.out_features, self.in_features, 1, 1)
  local y = F.conv2d_int8(rows:view(rows:size(1), self.in_features, 1, 1), w, self.weight_scale,
                          self.bias, self.input_scale:item(), { relu = self.relu })
  shape[#shape] = self.out_features
  return y:view(shape)
end

function QuantizedLinear:extra_repr()
  return string.format("in_features=%d, out_features=%d, input_scale=%.4g%s", self.in_features,
    self.out_features, self.input_scale:item(), self.relu and ", relu" or "")
end

function QuantizedLinear:short_repr()
  return string.format("QLinear %d->%d%s", self.in_features, self.out_features,
    self.relu and "+ReLU" or "")
end

doc[QuantizedLinear] = [[
nn.QuantizedLinear(linear, input_scale [, relu])
An int8 Linear (made by cnn.quantize), computed as a 1x1 int8 convolution
of the rows: see nn.QuantizedConv2d.  Inference only.]]

M.QuantizedConv2d = QuantizedConv2d
M.QuantizedLinear = QuantizedLinear
return M
