-- onnx/resize.lua -- ONNX Resize (and Upsample) with cnnsh ops: nearest and
-- linear (per axis, so bilinear on N x C x H x W), every coordinate
-- transformation mode except tf_crop_and_resize.
--
-- Each resized axis is one gather (index_select) for nearest, or two
-- gathers mixed by per-position weights for linear, so the result is
-- differentiable.  For output position o of an axis of input size n, output
-- size m and scale s (m / n when sizes are given):
--   half_pixel          x = (o + 0.5) / s - 0.5
--   pytorch_half_pixel  x = m > 1 and (o + 0.5) / s - 0.5 or 0
--   align_corners       x = m > 1 and o * (n - 1) / (m - 1) or 0
--   asymmetric          x = o / s
-- (m in align_corners and pytorch_half_pixel is n * s, unrounded, as in the
-- ONNX reference); nearest rounds x by nearest_mode; linear mixes floor(x) and floor(x) + 1
-- with weights 1 - f and f (f = x - floor(x)); indices clamp to [0, n - 1],
-- which is the ONNX reference's edge padding.
local cnn = _G.cnn

local M = {}

local attr = require("onnx.node").attr

-- m here is n * s, the unrounded output size (the ONNX reference's)
local function source_coord(mode, o, n, m, s)
  if mode == "half_pixel" then return (o + 0.5) / s - 0.5 end
  if mode == "pytorch_half_pixel" then return m > 1 and (o + 0.5) / s - 0.5 or 0 end
  if mode == "align_corners" then return m > 1 and o * (n - 1) / (m - 1) or 0 end
  return o / s -- asymmetric
end

local ROUND = {
  round_prefer_floor = function(x) return x - math.floor(x) <= 0.5 and math.floor(x) or math.ceil(x) end,
  round_prefer_ceil = function(x) return x - math.floor(x) < 0.5 and math.floor(x) or math.ceil(x) end,
  floor = math.floor,
  ceil = math.ceil,
}

local function clamp(i, n) return math.max(0, math.min(n - 1, i)) end

-- a weight per output position, shaped to broadcast along dim d
local function weights(w, x, d)
  local shape = {}
  for i = 1, x:dim() do shape[i] = 1 end
  shape[d] = #w
  return cnn.tensor(w, x.dtype):view(shape)
end

local function resize_axis(node, x, d, m, s)
  local n = x:size(d)
  local cmode = node.opset < 11 and "asymmetric" or attr(node, "coordinate_transformation_mode", "half_pixel")
  local linear = attr(node, "mode", "nearest") == "linear"
  local round = ROUND[node.opset < 11 and "floor" or attr(node, "nearest_mode", "round_prefer_floor")]
  local i0, i1, w = {}, {}, {}
  for o = 0, m - 1 do
    local c = source_coord(cmode, o, n, n * s, s)
    if linear then
      local f = math.floor(c)
      i0[o + 1], i1[o + 1], w[o + 1] = clamp(f, n) + 1, clamp(f + 1, n) + 1, c - f
    else
      i0[o + 1] = clamp(round(c), n) + 1
    end
  end
  local a = x:index_select(d, cnn.tensor(i0, "int64"))
  if not linear then return a end
  local b = x:index_select(d, cnn.tensor(i1, "int64"))
  local wt = weights(w, x, d)
  return a * (1 - wt) + b * wt
end

-- (X, roi, scales, sizes) from opset 11; (X, scales) before.
function M.run(node, x, roi, scales, sizes)
  if node.opset < 11 then scales, sizes = roi, nil end
  local sz = sizes and sizes:numel() > 0 and sizes:totable() or nil
  local sc = scales and scales:numel() > 0 and scales:totable() or nil
  if not sz and not sc then error("onnx Resize: neither scales nor sizes given", 0) end
  for d = 1, x:dim() do
    local n = x:size(d)
    local m = sz and sz[d] or math.floor(n * sc[d] + 1e-9)
    local s = sz and m / n or sc[d]
    if m ~= n or s ~= 1 then x = resize_axis(node, x, d, m, s) end
  end
  return x
end

function M.unsupported(node)
  local mode = attr(node, "mode", "nearest")
  if mode ~= "nearest" and mode ~= "linear" then return "Resize: mode '" .. mode .. "' is not supported (nearest, linear are)" end
  local c = attr(node, "coordinate_transformation_mode", "half_pixel")
  if c == "tf_crop_and_resize" or c == "tf_half_pixel_for_nn" then
    return "Resize: coordinate_transformation_mode '" .. c .. "' is not supported"
  end
  if attr(node, "antialias", 0) ~= 0 then return "Resize: antialias is not supported" end
  if attr(node, "axes", nil) then return "Resize: the axes attribute is not supported" end
  if attr(node, "keep_aspect_ratio_policy", "stretch") ~= "stretch" then
    return "Resize: keep_aspect_ratio_policy is not supported"
  end
end

return M
