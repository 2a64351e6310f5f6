-- onnx/export_layers.lua -- the ONNX nodes of each nn layer (cnn.onnx.export).
--
-- layers[class name] = function(g, m, out, x): the layer m was called on x
-- and returned out (already computed, unrecorded); the exporter adds the
-- nodes that compute out from x (g is onnx/export.lua's Graph: g:name_of
-- names a tensor, g:node adds a node, g:bind names the output).  Weights
-- are read through g:name_of, so they become initializers named after the
-- state_dict ("features.1.weight").  Attributes use ONNX's names and order:
-- pads list all begins then all ends ({top, left, bottom, right}).
local cnn = _G.cnn

local L = {}

local function pair(v)
  if type(v) == "number" then return { v, v } end
  if #v == 1 then return { v[1], v[1] } end
  return { v[1], v[2] }
end

-- cnnsh conv padding (a number, {h, w}, {top, bottom, left, right}, or
-- 'valid'/'same' for kernel k and dilation d) -> ONNX pads
local function conv_pads(p, k, d)
  if p == "valid" then return { 0, 0, 0, 0 } end
  if p == "same" then -- PyTorch's split: the odd pixel to the bottom/right
    local dd, t = pair(d), {}
    for i = 1, 2 do t[i] = dd[i] * (k[i] - 1) end
    return { t[1] // 2, t[2] // 2, t[1] - t[1] // 2, t[2] - t[2] // 2 }
  end
  if type(p) == "table" and #p == 4 then return { p[1], p[3], p[2], p[4] } end
  local h, w = table.unpack(pair(p))
  return { h, w, h, w }
end

-- x padded as conv layer m's padding_mode says (m:explicit_pads(), F.pad's
-- order: last dim first): Pad with mode reflect or edge; circular, which
-- Pad has only from opset 19, as Slice + Concat per dim (the last first,
-- so the corners wrap as PyTorch's).
local function mode_padded(g, m, x)
  local p, r = m:explicit_pads(), x:dim()
  local xn = g:name_of(x)
  if m.padding_mode == "circular" then
    for k = 1, #p // 2 do
      local axis, lo, hi = r - k, p[2 * k - 1], p[2 * k]
      local n = x:size(axis + 1)
      local parts = {}
      if lo > 0 then parts[1] = g:node("Slice", { xn, g:ints({ n - lo }), g:ints({ n }), g:ints({ axis }) }) end
      parts[#parts + 1] = xn
      if hi > 0 then parts[#parts + 1] = g:node("Slice", { xn, g:ints({ 0 }), g:ints({ hi }), g:ints({ axis }) }) end
      if #parts > 1 then xn = g:node("Concat", parts, { axis = axis }) end
    end
    return xn
  end
  local pads = {}
  for i = 1, 2 * r do pads[i] = 0 end
  for k = 1, #p // 2 do pads[r - k + 1], pads[2 * r - k + 1] = p[2 * k - 1], p[2 * k] end
  return g:node("Pad", { xn, g:ints(pads) }, { mode = m.padding_mode == "reflect" and "reflect" or "edge" })
end

-- The Conv node of conv layer m over the ONNX names xn (input) and wn
-- (weight); pads: ONNX's (begins, ends).
local function conv_node(g, m, xn, wn, pads)
  local ins = { xn, wn }
  if m.bias then ins[3] = g:name_of(m.bias) end
  local k = m.kernel_size
  local one = function(v) return type(v) == "table" and v or { v } end
  return g:node("Conv", ins, {
    kernel_shape = k, strides = #k == 1 and one(m.stride) or pair(m.stride), pads = pads,
    dilations = #k == 1 and one(m.dilation) or pair(m.dilation), group = m.groups })
end

-- A conv layer's Conv, after a Pad node for a padding_mode other than 'zeros'.
local function conv_layer(g, m, x, pads)
  local xn = g:name_of(x)
  if m.padding_mode and m.padding_mode ~= "zeros" then
    xn = mode_padded(g, m, x)
    for i = 1, #pads do pads[i] = 0 end
  end
  return conv_node(g, m, xn, g:name_of(m.weight), pads)
end

function L.Conv2d(g, m, out, x)
  g:bind(out, conv_layer(g, m, x, conv_pads(m.padding, m.kernel_size, m.dilation)))
end

-- The nodes of linear layer m (x of rank r, named xn; weight named wn).
local function linear_nodes(g, m, x, xn, wn)
  if x:dim() == 2 then
    local ins = { xn, wn }
    if m.bias then ins[3] = g:name_of(m.bias) end
    return g:node("Gemm", ins, { transB = 1 })
  end -- ... x in: MatMul with W^T, then the bias
  local y = g:node("MatMul", { xn, g:node("Transpose", { wn }, { perm = { 1, 0 } }) })
  if m.bias then y = g:node("Add", { y, g:name_of(m.bias) }) end
  return y
end

-- Conv1d -> Conv over one spatial dim
function L.Conv1d(g, m, out, x)
  local one = function(v) return type(v) == "table" and v[1] or v end
  local k, d, p = m.kernel_size[1], one(m.dilation), m.padding
  local pads = p == "valid" and { 0, 0 } or p == "same" and { d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2 }
               or { one(p), one(p) }
  g:bind(out, conv_layer(g, m, x, pads))
end

-- ConvTranspose2d -> ConvTranspose (symmetric pads, output_padding)
function L.ConvTranspose2d(g, m, out, x)
  local ins = { g:name_of(x), g:name_of(m.weight) }
  if m.bias then ins[3] = g:name_of(m.bias) end
  local p = pair(m.padding)
  g:bind(out, g:node("ConvTranspose", ins, {
    kernel_shape = m.kernel_size, strides = pair(m.stride), pads = { p[1], p[2], p[1], p[2] },
    output_padding = pair(m.output_padding), dilations = pair(m.dilation), group = m.groups }))
end

function L.Linear(g, m, out, x)
  g:bind(out, linear_nodes(g, m, x, g:name_of(x), g:name_of(m.weight)))
end

local function batch_norm(g, m, out, x)
  if not m.track_running_stats then
    g:fail("layer %s (%s) keeps no running statistics: ONNX's BatchNormalization needs them", g:layer_path(), m.__name)
  end
  local c = m.num_features
  local w = m.weight and g:name_of(m.weight) or g:const(cnn.ones(c))
  local b = m.bias and g:name_of(m.bias) or g:const(cnn.zeros(c))
  g:bind(out, g:node("BatchNormalization", { g:name_of(x), w, b, g:name_of(m.running_mean), g:name_of(m.running_var) },
    { epsilon = m.eps + 0.0, momentum = 1.0 - (m.momentum or 0.1) }))
end
L.BatchNorm2d = batch_norm
L.BatchNorm1d = batch_norm
L.SyncBatchNorm = batch_norm -- in eval mode, batch norm with its running statistics

local function simple(op)
  return function(g, m, out, x) g:bind(out, g:node(op, { g:name_of(x) })) end
end
L.ReLU = simple("Relu")
L.Sigmoid = simple("Sigmoid")
L.Tanh = simple("Tanh")
L.Identity = simple("Identity")
L.Dropout = simple("Identity") -- export is inference: dropout is the identity
L.Dropout2d = simple("Identity")

function L.LeakyReLU(g, m, out, x)
  g:bind(out, g:node("LeakyRelu", { g:name_of(x) }, { alpha = m.negative_slope + 0.0 }))
end

function L.ELU(g, m, out, x)
  g:bind(out, g:node("Elu", { g:name_of(x) }, { alpha = m.alpha + 0.0 }))
end

-- 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
local function gelu_tanh(g, out, x)
  local xn, dt = g:name_of(x), x.dtype
  local cube = g:node("Mul", { g:node("Mul", { xn, xn }), xn })
  local inner = g:node("Add", { xn, g:node("Mul", { cube, g:const(0.044715, dt) }) })
  local t = g:node("Tanh", { g:node("Mul", { inner, g:const(math.sqrt(2 / math.pi), dt) }) })
  local h = g:node("Mul", { g:node("Add", { t, g:const(1.0, dt) }), g:const(0.5, dt) })
  g:bind(out, g:node("Mul", { xn, h }))
end

-- GELU (exact): x * 0.5 * (1 + erf(x / sqrt(2))); Gelu itself is opset 20.
function L.GELU(g, m, out, x)
  if m.approximate == "tanh" then return gelu_tanh(g, out, x) end
  local xn = g:name_of(x)
  local e = g:node("Erf", { g:node("Div", { xn, g:const(math.sqrt(2), x.dtype) }) })
  local h = g:node("Mul", { g:node("Add", { e, g:const(1.0, x.dtype) }), g:const(0.5, x.dtype) })
  g:bind(out, g:node("Mul", { xn, h }))
end

-- ---- activations beyond ReLU/sigmoid/tanh: ONNX ops where the exporter's
-- opsets (13..17) have them, else their definitions in ONNX ops.

-- Clip with min and max as inputs (opset 11 and later)
local function clip(lo, hi)
  return function(g, m, out, x)
    g:bind(out, g:node("Clip", { g:name_of(x), g:const(lo(m), x.dtype), g:const(hi(m), x.dtype) }))
  end
end
L.ReLU6 = clip(function() return 0.0 end, function() return 6.0 end)
L.Hardtanh = clip(function(m) return m.min_val + 0.0 end, function(m) return m.max_val + 0.0 end)

-- PyTorch's hardsigmoid is ONNX's HardSigmoid with alpha 1/6 (ONNX's default is 0.2)
local function hardsigmoid(g, x)
  return g:node("HardSigmoid", { g:name_of(x) }, { alpha = 1.0 / 6.0, beta = 0.5 })
end
function L.Hardsigmoid(g, m, out, x) g:bind(out, hardsigmoid(g, x)) end
function L.Hardswish(g, m, out, x) -- HardSwish is opset 14
  if g.opset >= 14 then return g:bind(out, g:node("HardSwish", { g:name_of(x) })) end
  g:bind(out, g:node("Mul", { g:name_of(x), hardsigmoid(g, x) }))
end
function L.SiLU(g, m, out, x) g:bind(out, g:node("Mul", { g:name_of(x), g:node("Sigmoid", { g:name_of(x) }) })) end
function L.Mish(g, m, out, x) -- Mish is opset 18
  g:bind(out, g:node("Mul", { g:name_of(x), g:node("Tanh", { g:node("Softplus", { g:name_of(x) }) }) }))
end
-- ONNX's Softplus has no beta or threshold: Softplus(beta x) / beta, which
-- differs from PyTorch's x above a threshold >= 20 by less than 2e-9 / beta;
-- a lower threshold is refused
function L.Softplus(g, m, out, x)
  local xn, dt = g:name_of(x), x.dtype
  if m.threshold < 20 then
    g:fail("layer %s: Softplus with threshold %s < 20 has no ONNX export here", g:layer_path(), m.threshold)
  end
  if m.beta == 1 then return g:bind(out, g:node("Softplus", { xn })) end
  local z = g:node("Mul", { xn, g:const(m.beta + 0.0, dt) })
  g:bind(out, g:node("Div", { g:node("Softplus", { z }), g:const(m.beta + 0.0, dt) }))
end

local function softmax(op)
  return function(g, m, out, x)
    local axis = m.dim < 0 and m.dim or m.dim - 1
    g:bind(out, g:node(op, { g:name_of(x) }, { axis = axis }))
  end
end
L.Softmax = softmax("Softmax")
L.LogSoftmax = softmax("LogSoftmax")

function L.MaxPool2d(g, m, out, x)
  if m.return_indices then g:fail("layer %s: MaxPool2d with return_indices has no ONNX export here", g:layer_path()) end
  local p, d = pair(m.padding), pair(m.dilation or 1)
  g:bind(out, g:node("MaxPool", { g:name_of(x) }, {
    kernel_shape = pair(m.kernel_size), strides = pair(m.stride), pads = { p[1], p[2], p[1], p[2] },
    dilations = d, ceil_mode = m.ceil_mode and 1 or 0 }))
end

function L.AvgPool2d(g, m, out, x)
  local p = pair(m.padding)
  g:bind(out, g:node("AveragePool", { g:name_of(x) }, {
    kernel_shape = pair(m.kernel_size), strides = pair(m.stride), pads = { p[1], p[2], p[1], p[2] },
    ceil_mode = m.ceil_mode and 1 or 0, count_include_pad = m.count_include_pad and 1 or 0 }))
end

-- Adaptive pooling: the global pool when the output is 1x1; the plain
-- pool with kernel = stride when the input divides evenly (fixed for the
-- example's size); else an error naming the layer.
local function adaptive_pool_2d(name, global_op, op)
  return function(g, m, out, x)
    if m.return_indices then g:fail("layer %s: %s with return_indices has no ONNX export here", g:layer_path(), name) end
    if x:dim() ~= 4 then g:fail("layer %s: %s is exported for N x C x H x W input only", g:layer_path(), name) end
    local o = pair(m.output_size)
    local h, w = x:size(3), x:size(4)
    if o[1] == 1 and o[2] == 1 then return g:bind(out, g:node(global_op, { g:name_of(x) })) end
    if h % o[1] ~= 0 or w % o[2] ~= 0 then
      g:fail("layer %s: %s from %dx%d to %dx%d (not a whole factor) has no ONNX operator",
        g:layer_path(), name, h, w, o[1], o[2])
    end
    local k = { h // o[1], w // o[2] }
    g:bind(out, g:node(op, { g:name_of(x) }, { kernel_shape = k, strides = k }))
  end
end
L.AdaptiveAvgPool2d = adaptive_pool_2d("AdaptiveAvgPool2d", "GlobalAveragePool", "AveragePool")
L.AdaptiveMaxPool2d = adaptive_pool_2d("AdaptiveMaxPool2d", "GlobalMaxPool", "MaxPool")

-- the 1-d pools (N x C x L; unbatched C x L is unsqueezed first)
local function pool_1d(g, x, op, attrs)
  if x:dim() == 3 then return g:node(op, { g:name_of(x) }, attrs) end
  local zero = g:ints({ 0 })
  return g:node("Squeeze", { g:node(op, { g:node("Unsqueeze", { g:name_of(x), zero }) }, attrs), zero })
end

function L.MaxPool1d(g, m, out, x)
  if m.return_indices then g:fail("layer %s: MaxPool1d with return_indices has no ONNX export here", g:layer_path()) end
  g:bind(out, pool_1d(g, x, "MaxPool", { kernel_shape = { m.kernel_size }, strides = { m.stride },
    pads = { m.padding, m.padding }, dilations = { m.dilation }, ceil_mode = m.ceil_mode and 1 or 0 }))
end

function L.AvgPool1d(g, m, out, x)
  g:bind(out, pool_1d(g, x, "AveragePool", { kernel_shape = { m.kernel_size }, strides = { m.stride },
    pads = { m.padding, m.padding }, ceil_mode = m.ceil_mode and 1 or 0,
    count_include_pad = m.count_include_pad and 1 or 0 }))
end

function L.AdaptiveAvgPool1d(g, m, out, x)
  local n, o = x:size(x:dim()), m.output_size
  if o == 1 then return g:bind(out, pool_1d(g, x, "GlobalAveragePool", {})) end
  if n % o ~= 0 then
    g:fail("layer %s: AdaptiveAvgPool1d from %d to %d (not a whole factor) has no ONNX operator", g:layer_path(), n, o)
  end
  g:bind(out, pool_1d(g, x, "AveragePool", { kernel_shape = { n // o }, strides = { n // o } }))
end

-- Flatten to 2-D (dims 2.. into one) is ONNX's Flatten, all dims a Reshape
-- to {-1}; other ranges a Reshape to the traced shape (ONNX's Flatten
-- always gives 2-D, so Flatten(3) of N x C x H x W cannot be one).
function L.Flatten(g, m, out, x)
  local r = x:dim()
  local s, e = m.start_dim, m.end_dim
  if s < 0 then s = s + r + 1 end
  if e < 0 then e = e + r + 1 end
  if e == r and s == 1 then return g:bind(out, g:node("Reshape", { g:name_of(x), g:ints({ -1 }) })) end
  if e == r and s == 2 then return g:bind(out, g:node("Flatten", { g:name_of(x) }, { axis = 1 })) end
  g:bind(out, g:node("Reshape", { g:name_of(x), g:ints(g:batch_shape(out.shape, x)) }))
end

-- ---- int8 layers of cnn.quantize: QDQ form ------------------------------
-- The input passes QuantizeLinear then DequantizeLinear; the weight is an
-- initializer DequantizeLinear reads per output channel (axis 0); then the
-- float Conv / Gemm and a Relu for a fused layer.  Both use uint8 with
-- zero point 128, which holds int8's levels exactly (u = q + 128, q in
-- -128..127: the same saturation as nn.Quantized*'s int8), so the graph
-- computes what the layer computes (up to float summation order) and
-- writes with the dtypes the ONNX writer has.  Initializers: the weight
-- under the state_dict name of weight_q (as uint8), weight_scale, and the
-- input scale (a scalar) under that of input_scale.

-- fn() computed without recording nodes (tensor ops on a layer's buffers
-- would otherwise become nodes of the graph)
local function untraced(g, fn)
  g.quiet = g.quiet + 1
  local r = table.pack(pcall(fn))
  g.quiet = g.quiet - 1
  if not r[1] then error(r[2], 0) end
  return table.unpack(r, 2, r.n)
end

local function qdq_input(g, m, x)
  local scale = g:add_init(g.params[m.input_scale] or g:fresh("input_scale_"),
                           cnn.tensor(m.input_scale:item()))
  local zp = g:const(cnn.tensor(128, "uint8"))
  local q = g:node("QuantizeLinear", { g:name_of(x), scale, zp })
  return g:node("DequantizeLinear", { q, scale, zp })
end

local function qdq_weight(g, m)
  local u8, zeros = untraced(g, function()
    return (m.weight_q + 128):to("uint8"), (cnn.zeros(m.weight_q:size(1)) + 128):to("uint8")
  end)
  local wq = g:add_init(g.params[m.weight_q] or g:fresh("weight_q_"), u8)
  local zp = g:const(zeros)
  return g:node("DequantizeLinear", { wq, g:name_of(m.weight_scale), zp }, { axis = 0 })
end

local function maybe_relu(g, m, y)
  return m.relu and g:node("Relu", { y }) or y
end

function L.QuantizedConv2d(g, m, out, x)
  local pads = conv_pads(m.padding, m.kernel_size, m.dilation)
  g:bind(out, maybe_relu(g, m, conv_node(g, m, qdq_input(g, m, x), qdq_weight(g, m), pads)))
end

function L.QuantizedLinear(g, m, out, x)
  g:bind(out, maybe_relu(g, m, linear_nodes(g, m, x, qdq_input(g, m, x), qdq_weight(g, m))))
end

-- LayerNorm, GroupNorm, InstanceNorm2d, Upsample, PixelShuffle/Unshuffle
for name, fn in pairs(require("onnx.export_norm_resize")) do
  if name:match("^%u") then L[name] = fn end
end

return L
