-- onnx/ops_norm.lua -- LayerNormalization (opset 17) and
-- InstanceNormalization of cnn.onnx.load, added to the table of
-- onnx/ops.lua.
--
-- LayerNormalization normalises over the dims from `axis` on (default -1,
-- 0-based, negatives from the end) by their mean and biased variance, then
-- multiplies by Scale and adds B (both broadcast against the normalised
-- dims); its optional outputs Mean and InvStdDev have x's rank with the
-- normalised dims 1.  When Scale (and B) have exactly the normalised
-- shape and only Y is asked for, F.layer_norm computes it (one fused
-- kernel, as nn.LayerNorm); otherwise it is composed of differentiable ops.
-- InstanceNormalization normalises each channel of each sample of
-- N x C x D1 x ... over its positions: F.instance_norm with the input's
-- statistics and Scale / B as its affine parameters.
local cnn = _G.cnn
local F = cnn.F

local M = {}

local node_helpers = require("onnx.node")
local attr = node_helpers.attr

local function same_shape(t, shape)
  if t == nil then return true end
  if t:dim() ~= #shape then return false end
  for i, n in ipairs(shape) do if t:size(i) ~= n then return false end end
  return true
end

-- whether the node asks for an output beyond the first
local function wants_stats(node)
  for i = 2, #node.outputs do if node.outputs[i] ~= "" then return true end end
  return false
end

function M.LayerNormalization(node, x, scale, bias)
  local r = x:dim()
  local axis = attr(node, "axis", -1)
  if axis < 0 then axis = axis + r end
  if axis < 0 or axis >= r then
    node_helpers.fail(node, "axis %d is outside the input's %d dims", attr(node, "axis", -1), r)
  end
  if not scale then node_helpers.fail(node, "the Scale input is required") end
  local eps = attr(node, "epsilon", 1e-5)
  local shape, dims = {}, {}
  for d = axis + 1, r do shape[#shape + 1], dims[#dims + 1] = x:size(d), d end
  if not wants_stats(node) and same_shape(scale, shape) and same_shape(bias, shape) then
    return F.layer_norm(x, shape, scale, bias, { eps = eps })
  end
  local mean = x:mean(dims, true)
  local centred = x - mean
  local inv_std = ((centred * centred):mean(dims, true) + eps):rsqrt()
  local y = centred * inv_std * scale
  if bias then y = y + bias end
  return y, mean, inv_std
end

function M.InstanceNormalization(node, x, scale, bias)
  if not scale or not bias then node_helpers.fail(node, "the scale and B inputs are required") end
  if x:dim() < 3 then
    node_helpers.fail(node, "input must be N x C x D1 x ..., got %s", table.concat(x.shape, "x"))
  end
  return F.instance_norm(x, nil, nil, scale, bias, { eps = attr(node, "epsilon", 1e-5) })
end

return M
