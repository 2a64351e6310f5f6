-- onnx/quantize_ops.lua -- QuantizeLinear and DequantizeLinear for
-- cnn.onnx.load (opset 13: per tensor, or per axis with `axis`, default 1).
--
--   QuantizeLinear:   y = saturate(round_half_even(x / y_scale) + y_zero_point)
--   DequantizeLinear: y = (x - x_zero_point) * x_scale
--
-- The zero point's type is the quantized type: uint8 (0..255; also the
-- default when the zero point is omitted) or int8, which the reader holds
-- as int64 (cnnsh has no int8 dtype), saturating to -128..127.  Quantized
-- values are uint8 or int64 tensors accordingly.  The arithmetic is float32
-- cnnsh ops, so a graph in QDQ form (cnn.quantize's export) runs as the
-- float model it simulates; rounding has no gradient.
local cnn = _G.cnn
local node_helpers = require("onnx.node")
local attr, fail = node_helpers.attr, node_helpers.fail

local M = {}

-- scale or zero point shaped to broadcast against x: a scalar as it is, a
-- 1-D tensor along `axis` (ONNX's 0-based axis, negatives from the end).
local function along_axis(node, t, x)
  if t:dim() == 0 then return t end
  local r = x:dim()
  local axis = attr(node, "axis", 1)
  if axis < 0 then axis = axis + r end
  if t:dim() ~= 1 or axis < 0 or axis >= r or t:size(1) ~= x:size(axis + 1) then
    fail(node, "scale or zero point of shape %s does not match axis %d of input %s",
         table.concat(t.shape, "x"), attr(node, "axis", 1), table.concat(x.shape, "x"))
  end
  local shape = {}
  for i = 1, r do shape[i] = i == axis + 1 and t:size(1) or 1 end
  return t:reshape(shape)
end

-- the quantized type's range and dtype, from the zero point (nil: uint8)
local function quantized_type(node, zp)
  if zp == nil or zp.dtype == "uint8" then return 0, 255, "uint8" end
  if zp.dtype == "int64" then return -128, 127, "int64" end
  fail(node, "zero point of dtype %s (uint8 or int8 expected)", zp.dtype)
end

function M.QuantizeLinear(node, x, scale, zp)
  local lo, hi, dtype = quantized_type(node, zp)
  local q = (x:float() / along_axis(node, scale:float(), x)):round()
  if zp then q = q + along_axis(node, zp:float(), x) end
  return q:clamp(lo, hi):to(dtype)
end

function M.DequantizeLinear(node, x, scale, zp)
  local v = x:float()
  if zp then v = v - along_axis(node, zp:float(), x) end
  return v * along_axis(node, scale:float(), x)
end

return M
