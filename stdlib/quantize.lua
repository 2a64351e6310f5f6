-- quantize.lua -- cnn.quantize(net, calibration [, opts]): an INT8 copy of a
-- network by post-training calibration.
--
-- Steps:
--   1. calibrate: run the float network (eval mode, no gradient) on the
--      calibration batches with a forward pre-hook on every Conv2d and
--      Linear, recording how large each layer's input gets;
--   2. copy the network (tensors cloned; the original is left as it was);
--   3. in the copy, replace every Conv2d, Linear and nn.Fused(layer, "relu")
--      by nn.QuantizedConv2d / nn.QuantizedLinear (stdlib/nn/quantized.lua)
--      with input_scale = amax / 127, amax from step 1.
-- Weights are quantized per output channel (symmetric, max|W[k]| / 127);
-- activations per tensor, symmetric, int8 levels with zero point 0.
-- amax, by opts.method:
--   "minmax"      the largest |x| seen over all calibration batches;
--   "percentile"  per batch, the opts.percentile-th percentile of |x|
--                 (found by bisection on counts), averaged over batches:
--                 clips rare outliers so the common values keep more levels.
-- Layers are found wherever they are in the module tree; other layers
-- (pooling, batch norm left unfused, activations) stay float32.
local cnn = _G.cnn
local check = require("check")
local Module = require("nn.module")
local doc = cnn.doc or {}

local M = {}

local NAME = "cnn.quantize"
local OPTIONS = { "method", "percentile", "num_batches" }

-- ---- the calibration batches ---------------------------------------------------------

-- A list of tensors or {x, y} pairs, or one tensor -> an iterator giving
-- its inputs; a DataLoader -> its iterator (x, y); a function as it is.
local function inputs_of(source)
  if cnn.is_tensor(source) then source = { source } end
  if type(source) == "function" then return source end
  if type(source) ~= "table" then
    error(NAME .. ": calibration data must be a DataLoader, a list of tensors or a tensor, got "
          .. type(source), 3)
  end
  if type(source.iter) == "function" then return source:iter() end
  local i = 0
  return function()
    i = i + 1
    local v = source[i]
    if type(v) == "table" and not cnn.is_tensor(v) then v = v[1] end
    return v
  end
end

local function batch_input(x)
  if not cnn.is_tensor(x) then error(NAME .. ": a calibration batch is not a tensor", 0) end
  return x
end

-- ---- statistics of one layer's input ---------------------------------------------------

-- The p-th percentile of |x| (0 < p <= 100): the smallest t with at least
-- p% of the elements <= t, to 1e-4 of max|x| (30 halvings).
local function percentile_abs(x, p)
  local a = x:detach():abs()
  local hi, n = a:max():item(), a:numel()
  local allowed = n - math.ceil(p / 100 * n) -- elements that may lie above t
  local lo = 0
  for _ = 1, 30 do
    local mid = (lo + hi) / 2
    if a:gt(mid):sum():item() <= allowed then hi = mid else lo = mid end
  end
  return hi
end

local function recorder(stats, opts)
  return function(layer, x)
    local s = stats[layer] or { amax = 0, sum = 0, batches = 0 }
    stats[layer] = s
    if opts.method == "minmax" then
      s.amax = math.max(s.amax, x:detach():abs():max():item())
    else
      s.sum, s.batches = s.sum + percentile_abs(x, opts.percentile), s.batches + 1
      s.amax = s.sum / s.batches
    end
  end
end

local function is_target(m)
  local nn = require("nn")
  return Module.is_instance(m, nn.Conv2d) or Module.is_instance(m, nn.Linear)
end

-- { [layer] = {amax = ...} } for every Conv2d and Linear the batches reach.
local function calibrate(net, source, opts)
  local stats, handles = {}, {}
  for _, m in ipairs(net:modules()) do
    if is_target(m) then handles[#handles + 1] = m:register_forward_pre_hook(recorder(stats, opts)) end
  end
  local ok, err = pcall(cnn.no_grad, function()
    local n = 0
    for x in inputs_of(source) do
      if opts.num_batches and n >= opts.num_batches then break end
      net(batch_input(x))
      n = n + 1
    end
    if n == 0 then error(NAME .. ": no calibration batches", 0) end
  end)
  for _, h in ipairs(handles) do h:remove() end
  if not ok then error(err, 0) end
  return stats
end

-- ---- copying and replacing -------------------------------------------------------------

-- A copy of a module tree: modules and plain tables copied, tensors cloned
-- (parameters stay leaves that require grad), anything else (functions,
-- classes, userdata) shared.  memo maps each original to its copy.
local function deep_copy(v, memo)
  if memo[v] then return memo[v] end
  if cnn.is_tensor(v) then
    local c = v:detach():clone()
    if v.requires_grad then c.requires_grad = true end
    memo[v] = c
    return c
  end
  if type(v) ~= "table" then return v end
  local mt = getmetatable(v)
  if mt ~= nil and rawget(v, "_children") == nil then return v end -- a class or an object
  local c = {}
  memo[v] = c
  for k, x in next, v do rawset(c, deep_copy(k, memo), deep_copy(x, memo)) end
  return setmetatable(c, mt)
end

-- The int8 layer for child m of the copy (orig: m's original), or nil.
local function quantized_layer(m, orig, stats)
  local nn = require("nn")
  local layer, o_layer, relu = m, orig, false
  if Module.is_instance(m, nn.Fused) and m.activation == "relu" then
    layer, o_layer, relu = m.layer, orig.layer, true
  end
  local s = is_target(layer) and stats[o_layer]
  if not s then return nil end
  local scale = s.amax > 0 and s.amax / 127 or 1
  local cls = Module.is_instance(layer, nn.Conv2d) and nn.QuantizedConv2d or nn.QuantizedLinear
  return cls(layer, scale, relu)
end

-- Replaces, in `copy`, each child that has an int8 version (originals
-- found through `original_of`); descends into the others.
local function replace(copy, original_of, stats)
  for name, child in copy:named_children() do
    local q = quantized_layer(child, original_of[child], stats)
    if q then copy[name] = q else replace(child, original_of, stats) end
  end
end

local function check_opts(opts)
  opts = check.options(NAME, opts, OPTIONS, 4)
  local method = opts.method or "minmax"
  if method ~= "minmax" and method ~= "percentile" then
    error(NAME .. ": method must be 'minmax' or 'percentile', got " .. tostring(method), 4)
  end
  local p = opts.percentile or 99.99
  if type(p) ~= "number" or not (p > 0 and p <= 100) then
    error(NAME .. ": percentile must be a number in (0, 100], got " .. tostring(p), 4)
  end
  local nb = opts.num_batches and check.integer(NAME, "num_batches", opts.num_batches, 4, 1)
  return { method = method, percentile = p, num_batches = nb }
end

function M.quantize(net, calibration, opts)
  if not Module.is_instance(net, Module) then
    error(NAME .. ": expected an nn.Module, got " .. type(net), 2)
  end
  local o = check_opts(opts)
  for _, m in ipairs(net:modules()) do
    if m.training then error(NAME .. ": call net:eval() first (calibration runs in eval mode)", 2) end
  end
  local stats = calibrate(net, calibration, o)
  local memo = {}
  local copy = deep_copy(net, memo)
  local original_of = {}
  for orig, c in pairs(memo) do original_of[c] = orig end
  replace(copy, original_of, stats)
  local top = quantized_layer(copy, net, stats) -- the net is itself one layer
  return (top or copy):eval()
end

doc[M.quantize] = [[
cnn.quantize(net, calibration [, {method = "minmax", percentile = 99.99, num_batches = all}]) -> int8 net
Post-training INT8 quantization (net in eval mode; fuse first to fold batch
norm and fuse ReLU).  Runs net on the calibration batches (a DataLoader, a
list of tensors, or one tensor) to measure each Conv2d/Linear input, then
returns a copy where those layers are nn.QuantizedConv2d/QuantizedLinear:
int8 weights per output channel, int8 activations per tensor (scale =
amax/127, zero point 0), oneDNN int8 kernels, float32 outputs.
method "minmax": amax = largest |x| seen; "percentile": the percentile of
|x| per batch, averaged.  The original net is unchanged.
  net:eval():fuse()
  q8 = cnn.quantize(net, data.DataLoader(calib_set, {batch_size = 64}), {num_batches = 8})]]

return M
