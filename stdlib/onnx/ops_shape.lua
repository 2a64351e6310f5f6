-- onnx/ops_shape.lua -- the shape and reduction operators of cnn.onnx.load
-- (Shape, Cast, Unsqueeze, Squeeze, ReduceMean/Sum/Max/Min), added to the
-- table of onnx/ops.lua.  Axes lists come from an input (opset 13 for
-- Unsqueeze, Squeeze and ReduceSum) or an attribute (before, and for the
-- other reductions up to opset 17); ONNX axes are 0-based, negatives from
-- the end; cnnsh dims are 1-based.
local cnn = _G.cnn

local M = {}

local node_helpers = require("onnx.node")
local attr, not_supported = node_helpers.attr, node_helpers.not_supported

-- 1-based dims, ascending, from an axes input (tensor) or attribute (list)
local function axes_of(node, axes, rank)
  local list = axes and axes:totable() or attr(node, "axes", nil)
  if not list then return nil end
  local dims = {}
  for i, a in ipairs(list) do dims[i] = (a < 0 and a + rank or a) + 1 end
  table.sort(dims)
  return dims
end

function M.Shape(node, x)
  local r = x:dim()
  local s, e = attr(node, "start", 0), attr(node, "end", r)
  if s < 0 then s = s + r end
  if e < 0 then e = e + r end
  s, e = math.max(0, math.min(s, r)), math.max(0, math.min(e, r))
  local out = {}
  for i = s + 1, e do out[#out + 1] = x:size(i) end
  if #out == 0 then return cnn.zeros({ 0 }, "int64") end
  return cnn.tensor(out, "int64")
end

local CAST = { [1] = "float32", [11] = "float64", [10] = "float16", [16] = "bfloat16", [2] = "uint8",
               [3] = "int64", [4] = "int64", [5] = "int64", [6] = "int64", [7] = "int64", [12] = "int64", [13] = "int64" }

function M.Cast(node, x)
  local to = attr(node, "to", nil)
  if to == 9 then return x:ne(0) end -- BOOL: uint8 0/1
  local dtype = CAST[to]
  if not dtype then not_supported(node, "cast to data type %s", tostring(to)) end
  return x:to(dtype)
end

function M.Unsqueeze(node, x, axes)
  local list = axes and axes:totable() or attr(node, "axes", {})
  local r = x:dim() + #list
  local dims = {}
  for i, a in ipairs(list) do dims[i] = (a < 0 and a + r or a) + 1 end
  table.sort(dims)
  for _, d in ipairs(dims) do x = x:unsqueeze(d) end
  return x
end

function M.Squeeze(node, x, axes)
  local dims = axes_of(node, axes, x:dim())
  local shape, drop = {}, {}
  if dims then for _, d in ipairs(dims) do drop[d] = true end end
  for i = 1, x:dim() do
    if dims == nil and x:size(i) == 1 then drop[i] = true end
    if not drop[i] then shape[#shape + 1] = x:size(i) end
  end
  return x:reshape(shape)
end

-- a reduction over axes (all when none, unless noop_with_empty_axes)
local function reduce(fn)
  return function(node, x, axes)
    local keep = attr(node, "keepdims", 1) ~= 0
    local dims = axes_of(node, axes, x:dim())
    if dims == nil or #dims == 0 then
      if attr(node, "noop_with_empty_axes", 0) ~= 0 then return x end
      dims = {}
      for i = 1, x:dim() do dims[i] = i end
    end
    return fn(x, dims, keep)
  end
end

-- max and min reduce one dim at a time (from the last, so dims stay valid)
local function one_by_one(method)
  return function(x, dims, keep)
    for i = #dims, 1, -1 do x = x[method](x, dims[i], keep) end
    return x
  end
end

M.ReduceMean = reduce(function(x, dims, keep) return x:mean(dims, keep) end)
M.ReduceSum = reduce(function(x, dims, keep) return x:sum(dims, keep) end)
M.ReduceMax = reduce(one_by_one("max"))
M.ReduceMin = reduce(one_by_one("min"))

return M
