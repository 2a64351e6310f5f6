-- onnx/export_norm_resize.lua -- the ONNX nodes of the normalisation
-- and resizing layers (cnn.onnx.export): LayerNorm, GroupNorm,
-- InstanceNorm2d, Upsample (and F.interpolate), PixelShuffle,
-- PixelUnshuffle.  Same contract as
-- onnx/export_layers.lua, which merges this table into its own:
-- layers[class name] = function(g, m, out, x).
--
-- Choices (the exporter's opsets are 13..17, what Debian's ONNX 1.12 knows):
--   LayerNorm      LayerNormalization (axis = -#normalized_shape) from opset
--                  17; below, its definition: ReduceMean, Sub, Mul,
--                  ReduceMean, Add eps, Sqrt, Div, then Mul weight, Add bias.
--   GroupNorm      GroupNormalization is opset 18 (and changed meaning in
--                  21), so, as PyTorch's exporter: Reshape to N x G x -1,
--                  InstanceNormalization (scale 1, bias 0), Reshape back,
--                  Mul weight, Add bias (weight and bias reshaped to C x 1 ...).
--   InstanceNorm2d InstanceNormalization; with track_running_stats the
--                  eval-mode layer normalises by its running statistics,
--                  which is BatchNormalization.  Unbatched C x H x W input
--                  is unsqueezed to 1 x C x H x W and squeezed back.
--   Upsample       Resize (opset 11 form: X, roi, scales, sizes), PyTorch's
--                  coordinates: nearest -> asymmetric + floor; bilinear ->
--                  linear with align_corners, else half_pixel, which is
--                  PyTorch's x = (dst + 0.5) / scale - 0.5 also for an output
--                  of size 1 (pytorch_half_pixel maps that one to 0).
--                  scale_factor -> scales (the same 1/scale coordinates);
--                  size or recompute_scale_factor -> sizes, whose batch and
--                  channels come from Shape + Slice with dynamic_batch.
--   PixelShuffle   DepthToSpace, mode CRD (PyTorch's channel order).
--   PixelUnshuffle SpaceToDepth orders channels block-first (DCR), not as
--                  PyTorch's pixel_unshuffle, so: Reshape to
--                  N x C x H/r x r x W/r x r, Transpose, Reshape.
-- (AdaptiveMaxPool2d exports beside AdaptiveAvgPool2d in export_layers.lua.)
local cnn = _G.cnn

local L = {}

local function pair(v)
  if type(v) == "number" then return { v, v } end
  return { v[1], v[#v] }
end

-- fn(name of x with a batch dim) -> name of the result; unbatched input
-- (rank `batched_rank` - 1) is unsqueezed first and squeezed after.
local function with_batch(g, x, batched_rank, fn)
  if x:dim() == batched_rank then return fn(g:name_of(x)) end
  local zero = g:ints({ 0 })
  return g:node("Squeeze", { fn(g:node("Unsqueeze", { g:name_of(x), zero })), zero })
end

-- ---- normalisation -------------------------------------------------------------

local function layer_norm_nodes(g, x, k, w, b, eps)
  local xn = g:name_of(x)
  if g.opset >= 17 then
    local ones = not w and cnn.ones({ table.unpack(x.shape, x:dim() - k + 1) }, x.dtype) -- no affine: scale 1
    local ins = { xn, w and g:name_of(w) or g:const(ones) }
    if b then ins[3] = g:name_of(b) end
    return g:node("LayerNormalization", ins, { axis = -k, epsilon = eps + 0.0 })
  end
  local axes = {}
  for i = 1, k do axes[i] = -k - 1 + i end
  local mean = g:node("ReduceMean", { xn }, { axes = axes, keepdims = 1 })
  local centred = g:node("Sub", { xn, mean })
  local var = g:node("ReduceMean", { g:node("Mul", { centred, centred }) }, { axes = axes, keepdims = 1 })
  local std = g:node("Sqrt", { g:node("Add", { var, g:const(eps + 0.0, x.dtype) }) })
  local y = g:node("Div", { centred, std })
  if w then y = g:node("Mul", { y, g:name_of(w) }) end
  if b then y = g:node("Add", { y, g:name_of(b) }) end
  return y
end

function L.LayerNorm(g, m, out, x)
  g:bind(out, layer_norm_nodes(g, x, #m.normalized_shape, m.weight, m.bias, m.eps))
end

-- a C-vector parameter as C x 1 x ... (rank - 1 dims) for broadcasting over N x C x ...
local function per_channel(g, t, rank)
  if rank <= 2 then return g:name_of(t) end
  local shape = { t:numel() }
  for i = 2, rank - 1 do shape[i] = 1 end
  return g:node("Reshape", { g:name_of(t), g:ints(shape) })
end

local function group_norm_nodes(g, x, groups, w, b, eps)
  local rows = g:node("Reshape", { g:name_of(x), g:ints({ 0, groups, -1 }) })
  local normed = g:node("InstanceNormalization",
    { rows, g:const(cnn.ones(groups, x.dtype)), g:const(cnn.zeros(groups, x.dtype)) }, { epsilon = eps + 0.0 })
  local shape = x.shape
  shape[1] = 0 -- keep the batch size of the N x G x -1 rows
  local y = g:node("Reshape", { normed, g:ints(shape) })
  if w then y = g:node("Mul", { y, per_channel(g, w, x:dim()) }) end
  if b then y = g:node("Add", { y, per_channel(g, b, x:dim()) }) end
  return y
end

function L.GroupNorm(g, m, out, x)
  g:bind(out, group_norm_nodes(g, x, m.num_groups, m.weight, m.bias, m.eps))
end

local function instance_norm_nodes(g, m, x)
  local c = m.num_features
  local w = m.weight and g:name_of(m.weight) or g:const(cnn.ones(c, x.dtype))
  local b = m.bias and g:name_of(m.bias) or g:const(cnn.zeros(c, x.dtype))
  return with_batch(g, x, 4, function(xn)
    if m.track_running_stats then -- eval mode: the running statistics
      return g:node("BatchNormalization", { xn, w, b, g:name_of(m.running_mean), g:name_of(m.running_var) },
        { epsilon = m.eps + 0.0, momentum = 1.0 - m.momentum })
    end
    return g:node("InstanceNormalization", { xn, w, b }, { epsilon = m.eps + 0.0 })
  end)
end

function L.InstanceNorm2d(g, m, out, x)
  g:bind(out, instance_norm_nodes(g, m, x))
end

-- ---- resizing ------------------------------------------------------------------------

-- v as the float32 the scales initializer will hold
local function as_float32(v) return (string.unpack("f", string.pack("f", v))) end

-- The Resize node's scales input for PyTorch's scale factors s, or nil
-- when sizes say the same: ONNX takes floor(n * float32(s)) as the output
-- size, which can differ from PyTorch's (5 * 1.4 is 6.99... in float32); then
-- sizes give the same coordinates when s = out / n on both axes, else no
-- ONNX Resize computes this layer.
local function scales_input(g, s, x, out)
  local exact, fits = true, true
  for i = 1, 2 do
    local n, m = x:size(2 + i), out:size(2 + i)
    if math.floor(n * as_float32(s[i])) ~= m then fits = false end
    if s[i] ~= m / n then exact = false end
  end
  if fits then return g:const(cnn.tensor({ 1.0, 1.0, s[1] + 0.0, s[2] + 0.0 })) end
  if exact then return nil end
  g:fail("layer %s: scale_factor {%s, %s} from %dx%d gives %dx%d, which ONNX's float32 scales do not (give size instead)",
    g:layer_path(), s[1], s[2], x:size(3), x:size(4), out:size(3), out:size(4))
end

-- The Resize node's sizes input: N x C of the input (from its shape with
-- dynamic_batch, so any batch runs) and the output's H x W.
local function resize_sizes(g, x, out)
  if not g.dynamic then return g:ints(out.shape) end
  local nc = g:node("Slice", { g:node("Shape", { g:name_of(x) }), g:ints({ 0 }), g:ints({ 2 }), g:ints({ 0 }) })
  return g:node("Concat", { nc, g:ints({ out:size(3), out:size(4) }) }, { axis = 0 })
end

-- o: the interpolate options (size, scale_factor, mode, align_corners, recompute_scale_factor)
local function resize_node(g, o, out, x)
  if x:dim() ~= 4 then g:fail("layer %s: Resize is exported for N x C x H x W input only", g:layer_path()) end
  local mode = o.mode or "nearest"
  local attrs = { mode = mode == "nearest" and "nearest" or "linear" }
  if mode == "nearest" then
    attrs.coordinate_transformation_mode, attrs.nearest_mode = "asymmetric", "floor"
  else
    attrs.coordinate_transformation_mode = o.align_corners and "align_corners" or "half_pixel"
  end
  local ins = { g:name_of(x), "" }
  if o.scale_factor ~= nil and not o.recompute_scale_factor then
    ins[3] = scales_input(g, pair(o.scale_factor), x, out)
  end
  if not ins[3] then ins[3], ins[4] = "", resize_sizes(g, x, out) end
  return g:node("Resize", ins, attrs)
end
L.resize_node = resize_node

function L.Upsample(g, m, out, x)
  g:bind(out, resize_node(g, m, out, x))
end

function L.PixelShuffle(g, m, out, x)
  if x:dim() ~= 4 then g:fail("layer %s: PixelShuffle is exported for N x C x H x W input only", g:layer_path()) end
  g:bind(out, g:node("DepthToSpace", { g:name_of(x) }, { blocksize = m.upscale_factor, mode = "CRD" }))
end

function L.PixelUnshuffle(g, m, out, x)
  if x:dim() ~= 4 then g:fail("layer %s: PixelUnshuffle is exported for N x C x H x W input only", g:layer_path()) end
  local r = m.downscale_factor
  local n, c, h, w = table.unpack(x.shape)
  local blocks = g:node("Reshape", { g:name_of(x), g:ints(g:batch_shape({ n, c, h // r, r, w // r, r }, x)) })
  local moved = g:node("Transpose", { blocks }, { perm = { 0, 1, 3, 5, 2, 4 } })
  g:bind(out, g:node("Reshape", { moved, g:ints(g:batch_shape({ n, c * r * r, h // r, w // r }, x)) }))
end

-- ---- the functional forms, for custom forwards (onnx/export_ops.lua) ------------

L.functional = {
  layer_norm = function(g, out, x, shape, w, b, o)
    local k = type(shape) == "table" and #shape or 1
    if type(w) == "table" and not cnn.is_tensor(w) then w, b, o = nil, nil, w end
    if type(b) == "table" and not cnn.is_tensor(b) then b, o = nil, b end
    g:bind(out, layer_norm_nodes(g, x, k, w, b, (o and o.eps) or 1e-5))
  end,
  group_norm = function(g, out, x, groups, w, b, o)
    if type(w) == "table" and not cnn.is_tensor(w) then w, b, o = nil, nil, w end
    if type(b) == "table" and not cnn.is_tensor(b) then b, o = nil, b end
    g:bind(out, group_norm_nodes(g, x, groups, w, b, (o and o.eps) or 1e-5))
  end,
  interpolate = function(g, out, x, o) g:bind(out, resize_node(g, o or {}, out, x)) end,
  pixel_shuffle = function(g, out, x, r) L.PixelShuffle(g, { upscale_factor = r }, out, x) end,
  pixel_unshuffle = function(g, out, x, r) L.PixelUnshuffle(g, { downscale_factor = r }, out, x) end,
}

return L
