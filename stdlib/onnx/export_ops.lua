-- onnx/export_ops.lua -- the ONNX nodes of the F.* functions and tensor
-- methods a custom forward calls (cnn.onnx.export records them).
--
-- FUNCS[name] / METHODS[name] / FUSED[name] (cnn.fused.*) =
-- function(g, out, a, b, ...) adds the nodes computing out from the call's
-- arguments.  patch() wraps each of them in F, in the tensor method table
-- (getmetatable(t).__methods), in the tensor operators (__add ...) and in
-- cnn.fused for the duration of an export: a call is
-- recorded when one of its tensors is a traced value or a parameter; the
-- recorder itself runs with g.quiet raised, so the tensor calls it makes
-- are not recorded.  Dims convert from cnnsh's 1-based to ONNX's 0-based.
--
-- Every other tensor method, F.* function and cnn.* function is guarded
-- for the call: called on a traced value (outside a recorder or a layer
-- exporter), one that makes a new tensor nothing recorded, or any in-place
-- method (name ending in "_"), is the error "op <name> in layer <path> has
-- no ONNX export".  Without it an op whose result has no grad_fn (sort's
-- indices, argmax, comparisons, cumsum of integers) would be baked into
-- the file as a constant of the example's values.
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

-- Cast when the dtype changes (float(), double(), long(), to(dtype)); a
-- call that returns its own input adds nothing.
local ONNX_TYPES = { float32 = 1, uint8 = 2, int64 = 7, float16 = 10, float64 = 11, bfloat16 = 16 }
local function cast(g, out, x)
  if not cnn.is_tensor(out) or rawequal(out, x) then return end
  if out.dtype == x.dtype then return g:bind(out, g:name_of(x)) end -- a copy: the same value
  g:bind(out, g:node("Cast", { g:name_of(x) }, { to = ONNX_TYPES[out.dtype] }))
end

local METHODS = {
  add = binary("Add"), sub = binary("Sub"), mul = binary("Mul"), div = binary("Div"), pow = binary("Pow"),
  __add = binary("Add"), __sub = binary("Sub"), __mul = binary("Mul"), __div = binary("Div"),
  __pow = binary("Pow"), __unm = unary("Neg"), neg = unary("Neg"),
  matmul = binary("MatMul"), mm = binary("MatMul"),
  relu = unary("Relu"), sigmoid = unary("Sigmoid"), tanh = unary("Tanh"), exp = unary("Exp"),
  log = unary("Log"), sqrt = unary("Sqrt"), abs = unary("Abs"), reciprocal = unary("Reciprocal"),
  contiguous = unary("Identity"), clone = unary("Identity"),
  view = reshape, reshape = reshape, flatten = reshape, view_as = reshape,
  detach = unary("Identity"), float = cast, double = cast, long = cast, to = cast,
}

-- x:narrow(dim, start, length) (1-based start)
function METHODS.narrow(g, out, x, d, start, length)
  if d < 0 then d = d + x:dim() + 1 end
  g:bind(out, g:node("Slice", { g:name_of(x), g:ints({ start - 1 }), g:ints({ start - 1 + length }), g:ints({ d - 1 }) }))
end

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

-- (b, o) of F.conv*(x, w [, b] [, o])
local function bias_opts(b, o)
  if type(b) == "table" and not cnn.is_tensor(b) then return nil, b end
  return b, o or {}
end

-- (stride, o) of a pool's (x, k [, stride] [, o])
local function stride_opts(k, a, b)
  if type(a) == "number" or (type(a) == "table" and a[1] ~= nil) then
    local o = b or {}
    return a, o
  end
  local o = a or {}
  return o.stride or k, o
end

function FUNCS.conv2d(g, out, x, w, b, o)
  b, o = bias_opts(b, o)
  local m = { weight = w, bias = b, kernel_size = { w:size(3), w:size(4) }, stride = o.stride or 1,
              padding = o.padding or 0, dilation = o.dilation or 1, groups = o.groups or 1 }
  layers.Conv2d(g, m, out, x)
end

function FUNCS.conv1d(g, out, x, w, b, o)
  b, o = bias_opts(b, o)
  local m = { weight = w, bias = b, kernel_size = { w:size(3) }, stride = o.stride or 1,
              padding = o.padding or 0, dilation = o.dilation or 1, groups = o.groups or 1 }
  layers.Conv1d(g, m, out, x)
end

-- F.conv_transpose2d as nn.ConvTranspose2d's exporter
function FUNCS.conv_transpose2d(g, out, x, w, b, o)
  b, o = bias_opts(b, o)
  local m = { weight = w, bias = b, kernel_size = { w:size(3), w:size(4) }, stride = o.stride or 1,
              padding = o.padding or 0, output_padding = o.output_padding or 0, dilation = o.dilation or 1,
              groups = o.groups or 1 }
  layers.ConvTranspose2d(g, m, out, x)
end

function FUNCS.max_pool2d(g, out, x, k, a, b)
  local stride, o = stride_opts(k, a, b)
  layers.MaxPool2d(g, { kernel_size = k, stride = stride, padding = o.padding or 0,
                        dilation = o.dilation or 1, ceil_mode = o.ceil_mode, return_indices = o.return_indices }, out, x)
end

function FUNCS.avg_pool2d(g, out, x, k, a, b)
  local stride, o = stride_opts(k, a, b)
  layers.AvgPool2d(g, { kernel_size = k, stride = stride, padding = o.padding or 0,
                        ceil_mode = o.ceil_mode, count_include_pad = o.count_include_pad ~= false }, out, x)
end

local function one(v) return type(v) == "table" and v[1] or v end

function FUNCS.max_pool1d(g, out, x, k, a, b)
  local stride, o = stride_opts(k, a, b)
  layers.MaxPool1d(g, { kernel_size = one(k), stride = one(stride), padding = one(o.padding or 0),
                        dilation = one(o.dilation or 1), ceil_mode = o.ceil_mode, return_indices = o.return_indices }, out, x)
end

function FUNCS.avg_pool1d(g, out, x, k, a, b)
  local stride, o = stride_opts(k, a, b)
  layers.AvgPool1d(g, { kernel_size = one(k), stride = one(stride), padding = one(o.padding or 0),
                        ceil_mode = o.ceil_mode, count_include_pad = o.count_include_pad ~= false }, out, x)
end

function FUNCS.adaptive_avg_pool2d(g, out, x, size)
  layers.AdaptiveAvgPool2d(g, { output_size = size }, out, x)
end

function FUNCS.adaptive_max_pool2d(g, out, x, size, o)
  layers.AdaptiveMaxPool2d(g, { output_size = size, return_indices = o and o.return_indices }, out, x)
end

function FUNCS.adaptive_avg_pool1d(g, out, x, size)
  layers.AdaptiveAvgPool1d(g, { output_size = one(size) }, out, x)
end

-- the activations beyond relu/sigmoid/tanh through their layers' exporters
local function as_layer(name, fields)
  return function(g, out, x, ...) layers[name](g, fields and fields(...) or {}, out, x) end
end
FUNCS.silu = as_layer("SiLU")
FUNCS.mish = as_layer("Mish")
FUNCS.hardswish = as_layer("Hardswish")
FUNCS.hardsigmoid = as_layer("Hardsigmoid")
FUNCS.relu6 = as_layer("ReLU6")
FUNCS.dropout2d = unary("Identity")
FUNCS.hardtanh = as_layer("Hardtanh", function(lo, hi)
  if type(lo) == "table" then lo, hi = lo.min_val, lo.max_val end
  return { min_val = lo or -1.0, max_val = hi or 1.0 }
end)
FUNCS.softplus = as_layer("Softplus", function(beta, threshold)
  if type(beta) == "table" then beta, threshold = beta.beta, beta.threshold end
  return { beta = beta or 1, threshold = threshold or 20 }
end)
FUNCS.gelu = as_layer("GELU", function(o) return { approximate = o and o.approximate or "none" } end)

-- layer_norm, group_norm, interpolate, pixel_shuffle/unshuffle
for name, fn in pairs(require("onnx.export_norm_resize").functional) do FUNCS[name] = fn end

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

-- a tensor among the results that is none of the arguments and has no name
local function unrecorded_result(g, res, ...)
  local args = {}
  for i = 1, select("#", ...) do args[select(i, ...)] = true end
  local function fresh(v) return cnn.is_tensor(v) and not args[v] and not g.names[v] end
  for i = 1, res.n do
    local v = res[i]
    if fresh(v) then return true end
    if type(v) == "table" and not cnn.is_tensor(v) then
      for _, t in ipairs(v) do if fresh(t) then return true end end
    end
  end
  return false
end

-- Runs orig with recording off, then emit; errors pass through after
-- g.quiet is restored.
local function recorder(g, emit)
  return function(orig)
    return function(...)
      if g.quiet > 0 or not involved(g, ...) then return orig(...) end
      g.quiet = g.quiet + 1
      local res = table.pack(pcall(orig, ...))
      local ok, err = res[1], res[2]
      if ok then ok, err = pcall(emit, g, res[2], ...) end
      g.quiet = g.quiet - 1
      if not ok then error(err, 0) end
      return table.unpack(res, 2, res.n)
    end
  end
end

-- never an export error: queries and autograd plumbing
local HARMLESS = { backward = true, register_hook = true, retain_grad = true, requires_grad_ = true,
                   zero_grad = true, is_tensor = true }

-- shown: "sort" for a method, "F.silu", "cnn.stack"
local function guard(g, name, shown)
  return function(orig)
    return function(...)
      if g.quiet > 0 or HARMLESS[name] or not involved(g, ...) then return orig(...) end
      if name:sub(-1) == "_" then
        g:fail("op %s in layer %s has no ONNX export (it changes a traced tensor in place)", shown, g:layer_path())
      end
      local res = table.pack(orig(...))
      if unrecorded_result(g, res, ...) then g:fail("op %s in layer %s has no ONNX export", shown, g:layer_path()) end
      return table.unpack(res, 1, res.n)
    end
  end
end

-- Wraps every function of tbl: those in `emitters` record, the rest are guarded.
local function patch_table(g, undo, patch, tbl, emitters, prefix)
  local names = {}
  for name, v in pairs(tbl) do
    if type(v) == "function" then names[#names + 1] = name end
  end
  for _, name in ipairs(names) do
    local emit = emitters[name]
    patch(undo, tbl, name, emit and recorder(g, emit) or guard(g, name, prefix .. name))
  end
end

-- cnn.fused.*: add_relu (a residual block's end) as Add + Relu; the other
-- fused ops run inside layers whose exporters emit them, so called on a
-- traced value they are guarded as any unknown function.
local FUSED = {}

function FUSED.add_relu(g, out, a, b)
  g:bind(out, g:node("Relu", { g:node("Add", { g:name_of(a), g:name_of(b) }) }))
end

function M.patch(g, undo, patch)
  local mt = getmetatable(cnn.zeros(1))
  for name, emit in pairs(METHODS) do
    if name:sub(1, 2) == "__" then patch(undo, mt, name, recorder(g, emit)) end
  end
  patch_table(g, undo, patch, rawget(mt, "__methods"), METHODS, "")
  patch_table(g, undo, patch, F, FUNCS, "F.")
  -- cnn.add(a, b) ... take the methods' arguments
  patch_table(g, undo, patch, cnn, setmetatable({ cat = FUNCS.cat }, { __index = METHODS }), "cnn.")
  patch_table(g, undo, patch, cnn.fused, FUSED, "cnn.fused.")
end

return M
