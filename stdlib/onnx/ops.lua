-- onnx/ops.lua -- what each ONNX operator computes, in cnnsh ops.
--
-- ops[op_type] = function(node, a, b, ...) -> outputs.  `node` is the
-- graph's node module (stdlib/onnx/load.lua): node.attrs holds the ONNX
-- attributes, node.opset the model's opset, node.training the module's
-- mode; a, b, ... are the node's inputs in order (nil for an omitted
-- optional input).  Every op is a composition of differentiable cnnsh ops,
-- so a loaded model trains.
--
-- ONNX counts axes from 0 (negatives from the end); cnnsh from 1: `dim`
-- below converts.  ONNX pads list all begins then all ends
-- ({top, left, bottom, right} for 2-D); F.conv2d takes {top, bottom, left,
-- right} and F.pad {left, right, top, bottom} (the last dim first).
-- supported_reason(node) says why a node cannot run (an attribute value
-- cnnsh does not have), checked when the model is loaded.
local cnn = _G.cnn
local F = cnn.F

local ops = {}
local unsupported = {} -- op_type -> function(attrs, node) -> reason or nil

local function dim(axis, rank)
  if axis < 0 then axis = axis + rank end
  return axis + 1
end

local node_helpers = require("onnx.node")
local attr, fail, not_supported = node_helpers.attr, node_helpers.fail, node_helpers.not_supported

-- ---- padding -------------------------------------------------------------------------

-- {begins..., ends...} for the spatial dims of x given auto_pad (SAME_UPPER,
-- SAME_LOWER, VALID, NOTSET) and the effective kernel sizes.
local function spatial_pads(node, x, kernel, strides, dilations)
  local mode = attr(node, "auto_pad", "NOTSET")
  local nsp = #kernel
  if mode == "NOTSET" then
    local p = attr(node, "pads", nil)
    if p then return p end
    local z = {}
    for i = 1, 2 * nsp do z[i] = 0 end
    return z
  end
  local pads = {}
  for i = 1, nsp do
    local size, s, d = x:size(2 + i), strides[i], dilations[i]
    local total = 0
    if mode ~= "VALID" then
      local out = (size + s - 1) // s
      total = math.max((out - 1) * s + (kernel[i] - 1) * d + 1 - size, 0)
    end
    local small = total // 2
    if mode == "SAME_LOWER" then pads[i], pads[i + nsp] = total - small, small
    else pads[i], pads[i + nsp] = small, total - small end
  end
  return pads
end

-- F.pad's list (last dim first) from ONNX spatial pads of a 4-D input.
local function fpad_list(p)
  return { p[2], p[4], p[1], p[3] }
end

local function ones_list(n, v)
  local t = {}
  for i = 1, n do t[i] = v or 1 end
  return t
end

-- ---- convolution ----------------------------------------------------------------------

function ops.Conv(node, x, w, b)
  local nsp = x:dim() - 2
  if nsp ~= 1 and nsp ~= 2 then not_supported(node, "only 1-D and 2-D convolutions run (input %s)", table.concat(x.shape, "x")) end
  local k = { table.unpack(w.shape, 3) }
  local strides = attr(node, "strides", ones_list(nsp))
  local dil = attr(node, "dilations", ones_list(nsp))
  local p = spatial_pads(node, x, k, strides, dil)
  local squeeze = false
  if nsp == 1 then
    strides, dil = { 1, strides[1] }, { 1, dil[1] }
    p = { 0, p[1], 0, p[2] }
    x, w, squeeze = x:unsqueeze(3), w:unsqueeze(3), true
  end
  local y = F.conv2d(x, w, b, { stride = strides, dilation = dil, groups = attr(node, "group", 1),
                                padding = { p[1], p[3], p[2], p[4] } })
  if squeeze then y = y:squeeze(3) end
  return y
end

-- ConvTranspose.  The pads of ONNX (begins, ends; from auto_pad
-- or output_shape as the spec says) may be asymmetric and output_padding
-- any size, so the general case is the full transposed convolution
-- (padding 0) with its begins cropped and its ends cropped or zero-padded
-- by one F.pad, then the bias; symmetric pads and a small output_padding
-- take F.conv_transpose2d directly.
local function convtranspose_pads(node, x, k, strides, dil, outpad)
  local nsp = #k
  local shape = attr(node, "output_shape", nil)
  local mode = attr(node, "auto_pad", "NOTSET")
  if not shape and mode == "NOTSET" then return attr(node, "pads", ones_list(2 * nsp, 0)) end
  if mode == "VALID" and not shape then return ones_list(2 * nsp, 0) end
  local pads = {}
  for i = 1, nsp do
    local full = strides[i] * (x:size(2 + i) - 1) + outpad[i] + (k[i] - 1) * dil[i] + 1
    local want = shape and shape[#shape - nsp + i] or x:size(2 + i) * strides[i]
    local total = full - want -- negative: rows added at the end (zeros, then the bias)
    if total < 0 then pads[i], pads[i + nsp] = 0, total
    elseif mode == "SAME_UPPER" then pads[i], pads[i + nsp] = total // 2, total - total // 2
    else pads[i], pads[i + nsp] = total - total // 2, total // 2 end
  end
  return pads
end

local function convtranspose_2d(x, w, b, strides, dil, group, p, op)
  local symmetric = p[1] == p[3] and p[2] == p[4]
  local small = (op[1] < strides[1] or op[1] < dil[1]) and (op[2] < strides[2] or op[2] < dil[2])
  local o = { stride = strides, dilation = dil, groups = group }
  if symmetric and small then
    o.padding, o.output_padding = { p[1], p[2] }, op
    return F.conv_transpose2d(x, w, b, o)
  end
  local y = F.pad(F.conv_transpose2d(x, w, nil, o), { -p[2], op[2] - p[4], -p[1], op[1] - p[3] }, 0)
  if b then y = y + b:view(1, b:numel(), 1, 1) end
  return y
end

function ops.ConvTranspose(node, x, w, b)
  local nsp = x:dim() - 2
  if nsp ~= 1 and nsp ~= 2 then
    not_supported(node, "only 1-D and 2-D transposed convolutions run (input %s)", table.concat(x.shape, "x"))
  end
  local k = { table.unpack(w.shape, 3) }
  local strides = attr(node, "strides", ones_list(nsp))
  local dil = attr(node, "dilations", ones_list(nsp))
  local op = attr(node, "output_padding", ones_list(nsp, 0))
  local p = convtranspose_pads(node, x, k, strides, dil, op)
  if nsp == 1 then
    local y = convtranspose_2d(x:unsqueeze(3), w:unsqueeze(3), b, { 1, strides[1] }, { 1, dil[1] },
                               attr(node, "group", 1), { 0, p[1], 0, p[2] }, { 0, op[1] })
    return y:squeeze(3)
  end
  return convtranspose_2d(x, w, b, strides, dil, attr(node, "group", 1), p, op)
end

-- ---- matrix products -------------------------------------------------------------------

function ops.Gemm(node, a, b, c)
  if attr(node, "transA", 0) ~= 0 then a = a:t() end
  if attr(node, "transB", 0) ~= 0 then b = b:t() end
  local y = a:matmul(b)
  local alpha, beta = attr(node, "alpha", 1.0), attr(node, "beta", 1.0)
  if alpha ~= 1 then y = y * alpha end
  if c then y = y + (beta ~= 1 and c * beta or c) end
  return y
end

function ops.MatMul(node, a, b) return a:matmul(b) end

-- ---- normalisation ----------------------------------------------------------------------

function ops.BatchNormalization(node, x, scale, bias, mean, var)
  return F.batch_norm(x, mean, var, scale, bias, { training = false, eps = attr(node, "epsilon", 1e-5) })
end
unsupported.BatchNormalization = function(node)
  if attr(node, "training_mode", 0) ~= 0 or #node.outputs > 1 then
    return "BatchNormalization: training_mode (running statistics as outputs) is not supported"
  end
end

-- ---- pooling ----------------------------------------------------------------------------

-- Window options shared by MaxPool and AveragePool, lifted to 2-D.
local function pool_window(node, x)
  local k = attr(node, "kernel_shape", nil)
  if not k then fail(node, "kernel_shape is required") end
  local nsp = #k
  if nsp ~= x:dim() - 2 or (nsp ~= 1 and nsp ~= 2) then
    not_supported(node, "only 1-D and 2-D pooling runs (kernel %s, input %s)", table.concat(k, "x"), table.concat(x.shape, "x"))
  end
  local s = attr(node, "strides", ones_list(nsp))
  local d = attr(node, "dilations", ones_list(nsp))
  local p = spatial_pads(node, x, k, s, d)
  if nsp == 1 then
    k, s, d, p = { 1, k[1] }, { 1, s[1] }, { 1, d[1] }, { 0, p[1], 0, p[2] }
    x = x:unsqueeze(3)
  end
  return x, k, s, d, p, nsp == 1
end

-- pads F.max_pool2d / F.avg_pool2d can take themselves: symmetric, <= k / 2
local function symmetric(p, k)
  return p[1] == p[3] and p[2] == p[4] and p[1] <= k[1] // 2 and p[2] <= k[2] // 2
end

function ops.MaxPool(node, x)
  local x2, k, s, d, p, one = pool_window(node, x)
  local o = { stride = s, dilation = d, ceil_mode = attr(node, "ceil_mode", 0) ~= 0 }
  if symmetric(p, k) then
    o.padding = { p[1], p[2] }
  else
    x2 = F.pad(x2, fpad_list(p), -math.huge)
  end
  local y = F.max_pool2d(x2, k, o)
  return one and y:squeeze(3) or y
end
unsupported.MaxPool = function(node)
  if #node.outputs > 1 then return "MaxPool: the Indices output is not supported" end
  if attr(node, "storage_order", 0) ~= 0 then return "MaxPool: storage_order = 1 is not supported" end
end

function ops.AveragePool(node, x)
  local x2, k, s, d, p, one = pool_window(node, x)
  local include = attr(node, "count_include_pad", 0) ~= 0
  local o = { stride = s, ceil_mode = attr(node, "ceil_mode", 0) ~= 0, count_include_pad = include }
  local y
  if symmetric(p, k) then
    o.padding = { p[1], p[2] }
    y = F.avg_pool2d(x2, k, o)
  elseif include then
    y = F.avg_pool2d(F.pad(x2, fpad_list(p), 0), k, o)
  else -- the mean over the real elements: pooled x over pooled ones
    local ones = cnn.ones(x2.shape, x2.dtype)
    o.count_include_pad = true
    y = F.avg_pool2d(F.pad(x2, fpad_list(p), 0), k, o) / F.avg_pool2d(F.pad(ones, fpad_list(p), 0), k, o)
  end
  return one and y:squeeze(3) or y
end
unsupported.AveragePool = function(node)
  local d = attr(node, "dilations", nil)
  if d then for _, v in ipairs(d) do if v ~= 1 then return "AveragePool: dilations are not supported" end end end
end

local function spatial_dims(x)
  local dims = {}
  for i = 3, x:dim() do dims[#dims + 1] = i end
  return dims
end

function ops.GlobalAveragePool(node, x) return x:mean(spatial_dims(x), true) end

function ops.GlobalMaxPool(node, x)
  for i = 3, x:dim() do x = x:max(i, true) end
  return x
end

-- ---- activations and elementwise ops ---------------------------------------------------

function ops.Relu(node, x) return F.relu(x) end
function ops.Sigmoid(node, x) return F.sigmoid(x) end
function ops.Tanh(node, x) return F.tanh(x) end
function ops.LeakyRelu(node, x) return F.leaky_relu(x, attr(node, "alpha", 0.01)) end
function ops.Elu(node, x) return F.elu(x, attr(node, "alpha", 1.0)) end
function ops.Gelu(node, x) return F.gelu(x, { approximate = attr(node, "approximate", "none") }) end

-- activations beyond relu/sigmoid/tanh
function ops.HardSwish(node, x) return F.hardswish(x) end
function ops.Mish(node, x) return F.mish(x) end
function ops.Softplus(node, x) return F.softplus(x) end
-- max(0, min(1, alpha x + beta)); PyTorch's hardsigmoid when alpha = 1/6, beta = 1/2
function ops.HardSigmoid(node, x)
  local a, b = attr(node, "alpha", 0.2), attr(node, "beta", 0.5)
  if math.abs(a - 1 / 6) < 1e-7 and b == 0.5 then return F.hardsigmoid(x) end
  return F.hardtanh(x * a + b, 0, 1)
end
-- Clip: bounds as attributes before opset 11, as optional inputs after
function ops.Clip(node, x, lo, hi)
  if node.opset < 11 then
    return x:clamp(attr(node, "min", -math.huge), attr(node, "max", math.huge))
  end
  lo = lo and lo:item() or -math.huge
  hi = hi and hi:item() or math.huge
  if lo == 0 and hi == 6 then return F.relu6(x) end
  return x:clamp(lo, hi)
end

function ops.Add(node, a, b) return a + b end
function ops.Sub(node, a, b) return a - b end
function ops.Mul(node, a, b) return a * b end
-- integer division truncates toward zero (C, ONNX); cnnsh's / gives floats
function ops.Div(node, a, b)
  if a.dtype ~= "int64" and a.dtype ~= "uint8" then return a / b end
  local q = a:double() / b:double()
  return (q:sign() * q:abs():floor()):to(a.dtype)
end
function ops.Abs(node, x) return x:abs() end
function ops.Neg(node, x) return -x end
function ops.Exp(node, x) return x:exp() end
function ops.Log(node, x) return x:log() end
function ops.Sqrt(node, x) return x:sqrt() end
function ops.Reciprocal(node, x) return x:reciprocal() end

-- erf by Abramowitz and Stegun 7.1.26 (absolute error < 1.5e-7), in
-- differentiable ops: cnnsh has no erf kernel.  Exported GELUs use it.
function ops.Erf(node, z)
  local a = z:abs()
  local t = (a * 0.3275911 + 1):reciprocal()
  local poly = ((((t * 1.061405429 - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
  return z:sign() * (1 - poly * (-(z * z)):exp())
end

-- Softmax and LogSoftmax: from opset 13 along one axis (default -1);
-- before, over the input flattened to 2-D at axis (default 1).
local function softmax_like(fn)
  return function(node, x)
    local r = x:dim()
    if node.opset >= 13 then return fn(x, dim(attr(node, "axis", -1), r)) end
    local axis = dim(attr(node, "axis", 1), r) - 1
    local rows = 1
    for i = 1, axis do rows = rows * x:size(i) end
    local shape = x.shape
    return fn(x:reshape(rows, x:numel() // math.max(rows, 1)), 2):reshape(shape)
  end
end
ops.Softmax = softmax_like(F.softmax)
ops.LogSoftmax = softmax_like(F.log_softmax)

-- ---- shapes ----------------------------------------------------------------------------

function ops.Concat(node, ...)
  local xs = { ... }
  return cnn.cat(xs, dim(attr(node, "axis", nil) or fail(node, "axis is required"), xs[1]:dim()))
end

function ops.Flatten(node, x)
  local r = x:dim()
  local axis = attr(node, "axis", 1)
  if axis < 0 then axis = axis + r end
  local rows = 1
  for i = 1, axis do rows = rows * x:size(i) end
  return x:reshape(rows, rows == 0 and 0 or x:numel() // rows)
end

function ops.Reshape(node, x, shape)
  local s = shape:totable()
  if attr(node, "allowzero", 0) == 0 then
    for i, v in ipairs(s) do if v == 0 then s[i] = x:size(i) end end
  end
  return x:reshape(s)
end

function ops.Transpose(node, x)
  local perm = attr(node, "perm", nil)
  local p = {}
  for i = 1, x:dim() do p[i] = perm and perm[i] + 1 or x:dim() - i + 1 end
  return x:permute(p)
end

-- ---- padding and resizing --------------------------------------------------------------

-- pads (tensor, opset >= 11, or attribute) -> F.pad's list, last dim first
local function pad_list(node, x, pads, axes)
  local p = pads and pads:totable() or attr(node, "pads", nil)
  local r = x:dim()
  local ax = {}
  if axes then for i, a in ipairs(axes:totable()) do ax[i] = a < 0 and a + r or a end
  else for i = 1, r do ax[i] = i - 1 end end
  local full = {}
  for i = 1, r do full[i] = { 0, 0 } end
  for i, a in ipairs(ax) do full[a + 1] = { p[i], p[i + #ax] } end
  local out = {}
  for i = r, 1, -1 do out[#out + 1] = full[i][1]; out[#out + 1] = full[i][2] end
  return out
end

-- ONNX Pad modes as F.pad's (reflect, edge, wrap)
local PAD_MODES = { constant = "constant", reflect = "reflect", edge = "replicate", wrap = "circular" }

function ops.Pad(node, x, pads, value, axes)
  local mode = PAD_MODES[attr(node, "mode", "constant")]
  local list = pad_list(node, x, pads, axes)
  if mode == "constant" then
    return F.pad(x, list, value and value:item() or attr(node, "value", 0.0))
  end
  -- the non-constant modes pad only the last dims: drop the leading dims' zeros
  while #list > 2 and list[#list] == 0 and list[#list - 1] == 0 do list[#list], list[#list - 1] = nil, nil end
  return F.pad(x, list, mode)
end
unsupported.Pad = function(node)
  local mode = attr(node, "mode", "constant")
  if not PAD_MODES[mode] then return "Pad: mode '" .. mode .. "' is not supported" end
end

function ops.Dropout(node, x, ratio, training)
  local p = ratio and ratio:item() or attr(node, "ratio", 0.5)
  if training ~= nil and training:item() ~= 0 then
    not_supported(node, "training_mode = true (cnnsh draws its own masks; m:train() turns dropout on)")
  end
  if not node.training then return x end
  return F.dropout(x, p, true)
end
unsupported.Dropout = function(node)
  if #node.outputs > 1 and node.outputs[2] ~= "" then return "Dropout: the mask output is not supported" end
end

function ops.Identity(node, x) return x end

function ops.Constant(node)
  local a = node.attrs
  if a.value ~= nil then return a.value:clone() end
  if a.value_float then return cnn.tensor(a.value_float) end
  if a.value_floats then return cnn.tensor(a.value_floats) end
  if a.value_int then return cnn.tensor(a.value_int, "int64") end
  if a.value_ints then return cnn.tensor(a.value_ints, "int64") end
  fail(node, "a Constant needs value, value_float(s) or value_int(s) (sparse values and strings are not supported)")
end

for name, fn in pairs(require("onnx.ops_shape")) do ops[name] = fn end
-- LayerNormalization, InstanceNormalization (the normalisation layers)
for name, fn in pairs(require("onnx.ops_norm")) do ops[name] = fn end
-- QuantizeLinear, DequantizeLinear (cnn.quantize's QDQ export)
for name, fn in pairs(require("onnx.quantize_ops")) do ops[name] = fn end

local resize = require("onnx.resize")
ops.Resize, unsupported.Resize = resize.run, resize.unsupported

return { ops = ops, unsupported = unsupported, attr = attr, dim = dim }
