-- onnx/ops_shape.lua -- the shape and reduction operators of cnn.onnx.load
-- (Shape, Size, Cast, ConstantOfShape, Unsqueeze, Squeeze, Slice,
-- DepthToSpace, SpaceToDepth, ReduceMean/Sum/Max/Min), added to the table
-- of onnx/ops.lua.  Axes lists come from an input (opset 13 for
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

-- ---- Slice ---------------------------------------------------------------------

-- The 1-based indices start, start + step, ... of one sliced axis of size
-- n, clamped as the ONNX spec says (ends beyond the axis are cut).
local function slice_indices(n, start, stop, step)
  if start < 0 then start = start + n end
  if stop < 0 then stop = stop + n end
  if step > 0 then
    start, stop = math.max(0, math.min(start, n)), math.max(0, math.min(stop, n))
  else
    start, stop = math.max(0, math.min(start, n - 1)), math.max(-1, math.min(stop, n - 1))
  end
  local idx = {}
  local i = start
  while (step > 0 and i < stop) or (step < 0 and i > stop) do
    idx[#idx + 1] = i + 1
    i = i + step
  end
  return idx
end

-- starts, ends, axes, steps: inputs from opset 10, attributes before
function M.Slice(node, x, starts, ends, axes, steps)
  local s = starts and starts:totable() or attr(node, "starts", nil)
  local e = ends and ends:totable() or attr(node, "ends", nil)
  if not s or not e or #s ~= #e then node_helpers.fail(node, "starts and ends must be given, of one length") end
  local ax = axes and axes:totable() or attr(node, "axes", nil)
  local st = steps and steps:totable() or {}
  local r = x:dim()
  for i = 1, #s do
    local a = ax and ax[i] or i - 1
    local d = (a < 0 and a + r or a) + 1
    local step = st[i] or 1
    if step == 0 then node_helpers.fail(node, "a step of 0") end
    local idx = slice_indices(x:size(d), s[i], e[i], step)
    if step == 1 then
      x = x:narrow(d, #idx > 0 and idx[1] or 1, #idx)
    else
      x = x:index_select(d, #idx > 0 and cnn.tensor(idx, "int64") or cnn.zeros({ 0 }, "int64"))
    end
  end
  return x
end

function M.Size(node, x) return cnn.tensor(x:numel(), "int64") end

-- a tensor of the shape in `shape` (int64), every entry attribute value's one entry (float 0)
function M.ConstantOfShape(node, shape)
  local v = attr(node, "value", nil)
  local value, dtype = 0.0, "float32"
  if v then value, dtype = v:reshape(1):totable()[1], v.dtype end
  local dims = shape:totable()
  if #dims == 0 then return cnn.tensor(value, dtype) end
  return cnn.full(dims, value, dtype)
end

-- ---- DepthToSpace / SpaceToDepth (N x C x H x W, block b) ----------------------

-- the blocksize attribute and N, C, H, W of 4-D x
local function block_and_shape(node, x)
  local b = attr(node, "blocksize", nil)
  if math.type(b) ~= "integer" or b < 1 then
    node_helpers.fail(node, "blocksize must be a positive integer, got %s", tostring(b))
  end
  if x:dim() ~= 4 then node_helpers.fail(node, "input must be 4-D, got %s", table.concat(x.shape, "x")) end
  return b, table.unpack(x.shape)
end

-- DCR (default): channel (i * b + j) * C' + c moves to (c, h * b + i, w * b + j);
-- CRD: channel c * b * b + i * b + j does, which is F.pixel_shuffle.
function M.DepthToSpace(node, x)
  local b, n, c, h, w = block_and_shape(node, x)
  if c % (b * b) ~= 0 then node_helpers.fail(node, "%d channels do not divide by blocksize^2 = %d", c, b * b) end
  local mode = attr(node, "mode", "DCR")
  if mode == "CRD" then return cnn.F.pixel_shuffle(x, b) end
  if mode ~= "DCR" then node_helpers.not_supported(node, "mode '%s'", mode) end
  return x:reshape(n, b, b, c // (b * b), h, w):permute(1, 4, 5, 2, 6, 3):reshape(n, c // (b * b), h * b, w * b)
end

-- channel (i * b + j) * C + c of the output holds x[c, h * b + i, w * b + j]
-- (so the inverse of DCR, not of PyTorch's pixel_unshuffle)
function M.SpaceToDepth(node, x)
  local b, n, c, h, w = block_and_shape(node, x)
  if h % b ~= 0 or w % b ~= 0 then node_helpers.fail(node, "%dx%d does not divide by blocksize %d", h, w, b) end
  return x:reshape(n, c, h // b, b, w // b, b):permute(1, 4, 6, 2, 3, 5):reshape(n, c * b * b, h // b, w // b)
end

M.ReduceMean = reduce(function(x, dims, keep) return x:mean(dims, keep) end)
M.ReduceSum = reduce(function(x, dims, keep) return x:sum(dims, keep) end)
M.ReduceMax = reduce(one_by_one("max"))
M.ReduceMin = reduce(one_by_one("min"))

return M
