-- onnx/export_ops.lua -- the ONNX nodes of the F.* functions and tensor
-- methods a custom forward calls (cnn.onnx.export records them).
--
-- FUNCS[name] / METHODS[name] = function(g, out, a, b, ...) adds the nodes
-- computing out from the call's arguments.  patch() wraps each of them in
-- F, in the tensor method table (getmetatable(t).__methods) and in the
-- tensor operators (__add ...) for the duration of an export: a call is
-- recorded when one of its tensors is a traced value or a parameter; the
-- recorder itself runs with g.quiet raised, so the tensor calls it makes
-- are not recorded.  Dims convert from cnnsh's 1-based to ONNX's 0-based.
local cnn = _G.cnn
local F = cnn.F

local M = {}

local function axis(d) return d < 0 and d or d - 1 end

local function binary(op)
  return function(g, out, a, b)
    local like = cnn.is_tensor(a) and a or b
    local function nm(v) return cnn.is_tensor(v) and g:name_of(v) or g:const(v, like.dtype) end
    g:bind(out, g:node(op, { nm(a), nm(b) }))
  end
end

local function unary(op)
  return function(g, out, x) g:bind(out, g:node(op, { g:name_of(x) })) end
end

local function reshape(g, out, x)
  g:bind(out, g:node("Reshape", { g:name_of(x), g:ints(g:batch_shape(out.shape, x)) }))
end

local function permutation(g, out, x, perm)
  g:bind(out, g:node("Transpose", { g:name_of(x) }, { perm = perm }))
end

-- ---- tensor methods and operators -----------------------------------------------------

local METHODS = {
  add = binary("Add"), sub = binary("Sub"), mul = binary("Mul"), div = binary("Div"), pow = binary("Pow"),
  __add = binary("Add"), __sub = binary("Sub"), __mul = binary("Mul"), __div = binary("Div"),
  __pow = binary("Pow"), __unm = unary("Neg"), neg = unary("Neg"),
  matmul = binary("MatMul"), mm = binary("MatMul"),
  relu = unary("Relu"), sigmoid = unary("Sigmoid"), tanh = unary("Tanh"), exp = unary("Exp"),
  log = unary("Log"), sqrt = unary("Sqrt"), abs = unary("Abs"), reciprocal = unary("Reciprocal"),
  contiguous = unary("Identity"), clone = unary("Identity"),
  view = reshape, reshape = reshape, flatten = reshape, view_as = reshape,
}

function METHODS.permute(g, out, x, ...)
  local p = type(...) == "table" and ... or { ... }
  local perm = {}
  for i, d in ipairs(p) do perm[i] = (d < 0 and d + x:dim() + 1 or d) - 1 end
  permutation(g, out, x, perm)
end

function METHODS.transpose(g, out, x, a, b)
  local r = x:dim()
  a, b = (a < 0 and a + r + 1 or a), (b < 0 and b + r + 1 or b)
  local perm = {}
  for i = 1, r do perm[i] = i - 1 end
  perm[a], perm[b] = b - 1, a - 1
  permutation(g, out, x, perm)
end

function METHODS.t(g, out, x)
  if x:dim() < 2 then return g:bind(out, g:node("Identity", { g:name_of(x) })) end
  permutation(g, out, x, { 1, 0 })
end

function METHODS.unsqueeze(g, out, x, d)
  g:bind(out, g:node("Unsqueeze", { g:name_of(x), g:ints({ d < 0 and d + x:dim() + 1 or d - 1 }) }))
end

function METHODS.squeeze(g, out, x) reshape(g, out, x) end

-- mean over dims (a number or a list), keepdim; all dims without one
function METHODS.mean(g, out, x, dims, keepdim)
  local axes = {}
  if dims == nil then for i = 1, x:dim() do axes[i] = i - 1 end
  else for i, d in ipairs(type(dims) == "table" and dims or { dims }) do axes[i] = axis(d) end end
  g:bind(out, g:node("ReduceMean", { g:name_of(x) }, { axes = axes, keepdims = keepdim and 1 or 0 }))
end

-- ---- F.* ------------------------------------------------------------------------------------

local FUNCS = {
  relu = unary("Relu"), sigmoid = unary("Sigmoid"), tanh = unary("Tanh"),
}

function FUNCS.leaky_relu(g, out, x, slope)
  g:bind(out, g:node("LeakyRelu", { g:name_of(x) }, { alpha = (slope or 0.01) + 0.0 }))
end

function FUNCS.elu(g, out, x, alpha)
  g:bind(out, g:node("Elu", { g:name_of(x) }, { alpha = (alpha or 1.0) + 0.0 }))
end

local function softmax(op)
  return function(g, out, x, d) g:bind(out, g:node(op, { g:name_of(x) }, { axis = axis(d or -1) })) end
end
FUNCS.softmax = softmax("Softmax")
FUNCS.log_softmax = softmax("LogSoftmax")

function FUNCS.linear(g, out, x, w, b)
  local y = g:node("MatMul", { g:name_of(x), g:node("Transpose", { g:name_of(w) }, { perm = { 1, 0 } }) })
  if b then y = g:node("Add", { y, g:name_of(b) }) end
  g:bind(out, y)
end

function FUNCS.dropout(g, out, x) g:bind(out, g:node("Identity", { g:name_of(x) })) end

function FUNCS.flatten(g, out, x) reshape(g, out, x) end

function FUNCS.cat(g, out, xs, d)
  local names = {}
  for i, t in ipairs(xs) do names[i] = g:name_of(t) end
  g:bind(out, g:node("Concat", names, { axis = axis(d or 1) }))
end

-- F.pad(x, {left, right, top, bottom, ...} (last dim first), value)
function FUNCS.pad(g, out, x, p, value)
  local r = x:dim()
  local begins, ends = {}, {}
  for i = 1, r do begins[i], ends[i] = 0, 0 end
  for k = 1, #p // 2 do begins[r - k + 1], ends[r - k + 1] = p[2 * k - 1], p[2 * k] end
  local pads = {}
  for i = 1, r do pads[i], pads[i + r] = begins[i], ends[i] end
  g:bind(out, g:node("Pad", { g:name_of(x), g:ints(pads), g:const(value or 0, x.dtype) }, { mode = "constant" }))
end

-- F.conv2d and the pools run as their layers do: reuse those exporters
-- through a stand-in layer built from the options.
local layers = require("onnx.export_layers")

function FUNCS.conv2d(g, out, x, w, b, o)
  o = o or {}
  local m = { weight = w, bias = b, kernel_size = { w:size(3), w:size(4) }, stride = o.stride or 1,
              padding = o.padding or 0, dilation = o.dilation or 1, groups = o.groups or 1 }
  layers.Conv2d(g, m, out, x)
end

-- issue 13: F.conv_transpose2d as nn.ConvTranspose2d's exporter
function FUNCS.conv_transpose2d(g, out, x, w, b, o)
  o = o or {}
  local m = { weight = w, bias = b, kernel_size = { w:size(3), w:size(4) }, stride = o.stride or 1,
              padding = o.padding or 0, output_padding = o.output_padding or 0, dilation = o.dilation or 1,
              groups = o.groups or 1 }
  layers.ConvTranspose2d(g, m, out, x)
end

function FUNCS.max_pool2d(g, out, x, k, o)
  o = o or {}
  layers.MaxPool2d(g, { kernel_size = k, stride = o.stride or k, padding = o.padding or 0,
                        dilation = o.dilation or 1, ceil_mode = o.ceil_mode, return_indices = o.return_indices }, out, x)
end

function FUNCS.avg_pool2d(g, out, x, k, o)
  o = o or {}
  layers.AvgPool2d(g, { kernel_size = k, stride = o.stride or k, padding = o.padding or 0,
                        ceil_mode = o.ceil_mode, count_include_pad = o.count_include_pad ~= false }, out, x)
end

function FUNCS.adaptive_avg_pool2d(g, out, x, size)
  layers.AdaptiveAvgPool2d(g, { output_size = size }, out, x)
end

-- ---- patching ----------------------------------------------------------------------------------

local function involved(g, ...)
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if cnn.is_tensor(v) and (g.names[v] or g.params[v] or v.grad_fn) then return true end
    if type(v) == "table" and not cnn.is_tensor(v) then
      for _, t in ipairs(v) do if cnn.is_tensor(t) and (g.names[t] or g.params[t] or t.grad_fn) then return true end end
    end
  end
  return false
end

local function recorder(g, emit)
  return function(orig)
    return function(...)
      local out = orig(...)
      if g.quiet == 0 and involved(g, ...) then
        g.quiet = g.quiet + 1
        local ok, err = pcall(emit, g, out, ...)
        g.quiet = g.quiet - 1
        if not ok then error(err, 0) end
      end
      return out
    end
  end
end

function M.patch(g, undo, patch)
  local mt = getmetatable(cnn.zeros(1))
  local methods = rawget(mt, "__methods")
  for name, emit in pairs(METHODS) do
    if name:sub(1, 2) == "__" then patch(undo, mt, name, recorder(g, emit))
    else patch(undo, methods, name, recorder(g, emit)) end
  end
  for name, emit in pairs(FUNCS) do patch(undo, F, name, recorder(g, emit)) end
  if rawget(cnn, "cat") then patch(undo, cnn, "cat", recorder(g, FUNCS.cat)) end
end

return M
