-- inspect.lua -- looking inside a network: net:summary, net:trace, net:profile.
--
-- Loading this module adds the three methods to nn.Module (so to every
-- layer and network); nn/init.lua requires it at its end.  It requires only
-- "nn.module" (never "nn", which may be loading it).
--
-- Design.  All three run the network once (or a few times) with a forward
-- pre-hook and a forward hook on every module (nn.Module's hooks), which
-- give each call's input and output in call order; a stack of open calls
-- tells, when a forward fails, which layer failed.  trace and profile add
-- tensor hooks (register_hook) on outputs to see gradients and to time the
-- backward pass.  Every hook is removed and the model's state restored
-- (training flags, buffers such as BatchNorm's running statistics, the RNG)
-- before returning, also on error, so looking never changes the model;
-- only trace leaves fresh parameter gradients (.grad), for viz.gradflow.
--
-- Conventions (printed in the help texts):
--   MACs  multiply-adds of the given input's whole batch: Conv2d
--         N*K*OH*OW * C/groups*R*S, Conv1d N*K*OL * C/groups*k,
--         ConvTranspose2d N*C*H*W * K/groups*R*S (C, H, W: its input),
--         Linear (output numel) * in_features; BatchNorm, LayerNorm,
--         GroupNorm, InstanceNorm2d one per element (the scale-and-shift
--         (x - mean) * inv_std * w + b, one multiply-add as eval-mode batch
--         norm folds it, with or without affine parameters); bilinear
--         Upsample 4 per output element (its taps); everything else 0:
--         activations (ReLU, SiLU, Hardswish, Mish, Softplus, GELU, ... are
--         elementwise functions, not products with weights or taps; as in
--         torchvision's published counts), pools, nearest Upsample,
--         PixelShuffle/Unshuffle, AdaptiveMaxPool2d, Dropout.  A node of a
--         model from cnn.onnx.load that is no nn layer counts as its layer:
--         Batch/Layer/InstanceNormalization one per element, a linear
--         Resize of 4-D output 4 (so GroupNorm's export, whose
--         InstanceNormalization covers every element, counts as GroupNorm).
--         FLOPs = 2 * MACs.  Tested against hand counts in macs_spec.lua.
--   std   unbiased (divides by n - 1), as torch.std.
--   Each returns a table r with r.rows (one per layer call), r.text (the
--   printed table) and a short tostring, so the prompt does not print the
--   table twice.
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local check = require("check")
local doc = cnn.doc or {}

local inspect = {}

inspect.VANISHING = 1e-7
inspect.EXPLODING = 1e3

-- ---- formatting --------------------------------------------------------------

local shape_str = require("fmt").shape_str

-- 63050 -> "63,050"
local function commas(n)
  local s = tostring(math.floor(n))
  local out = s:reverse():gsub("(%d%d%d)", "%1,"):reverse()
  return (out:gsub("^(-?),", "%1"))
end
inspect.commas = commas

-- 1690000 -> "1.69M"
local function si(n)
  local units = { { 1e12, "T" }, { 1e9, "G" }, { 1e6, "M" }, { 1e3, "K" } }
  for _, u in ipairs(units) do
    if math.abs(n) >= u[1] then return string.format("%.2f%s", n / u[1], u[2]) end
  end
  return tostring(math.floor(n))
end

local function bytes_str(n)
  if n >= 1024 * 1024 then return string.format("%.2f MB", n / 1048576) end
  if n >= 1024 then return string.format("%.1f KB", n / 1024) end
  return string.format("%d B", n)
end

local function num(v)
  if v == nil then return "" end
  if v ~= v then return "nan" end
  if v == 0 then return "0" end
  return string.format("%.3g", v)
end

-- Lines of a table: headers, rows of strings; numeric columns (right[i])
-- are right-aligned.
local function format_table(headers, rows, right)
  local w = {}
  for i, h in ipairs(headers) do w[i] = utf8.len(h) end
  for _, r in ipairs(rows) do
    for i = 1, #headers do w[i] = math.max(w[i], utf8.len(r[i] or "")) end
  end
  local function line(r)
    local parts = {}
    for i = 1, #headers do
      local s = r[i] or ""
      local padn = string.rep(" ", w[i] - utf8.len(s))
      parts[i] = right[i] and padn .. s or s .. padn
    end
    return (table.concat(parts, "  "):gsub("%s+$", ""))
  end
  local out = { line(headers) }
  local total = 0
  for i = 1, #headers do total = total + w[i] + 2 end
  out[2] = string.rep("-", total - 2)
  for _, r in ipairs(rows) do out[#out + 1] = line(r) end
  return out
end
inspect.format_table = format_table

-- The result object: fields plus a one-line tostring.
local function result(fields, short)
  return setmetatable(fields, { __tostring = function() return short end })
end

-- ---- shared machinery ---------------------------------------------------------

local DTYPE_SIZE = { float32 = 4, float64 = 8, int64 = 8, uint8 = 1, float16 = 2, bfloat16 = 2 }

local function first_tensor(v)
  if cnn.is_tensor(v) then return v end
  if type(v) == "table" then
    for _, x in ipairs(v) do if cnn.is_tensor(x) then return x end end
  end
  return nil
end

-- Whether m is an nn.<name> (or a subclass); by class name before nn loads.
local function class_is(m, name)
  local nn = package.loaded.nn
  if type(nn) == "table" and nn[name] then return Module.is_instance(m, nn[name]) end
  return m.__name == name
end

-- Multiply-adds of one call of m with output `out` (convention above).
local function macs_of(m, out)
  if not cnn.is_tensor(out) then return 0 end
  if class_is(m, "Conv2d") then
    local k = m.kernel_size
    return out:numel() * (m.in_channels // m.groups) * k[1] * k[2]
  elseif class_is(m, "Conv1d") then
    return out:numel() * (m.in_channels // m.groups) * m.kernel_size[1]
  elseif class_is(m, "ConvTranspose2d") and out:dim() == 4 then
    -- every input element meets (out/groups)*kh*kw weights
    local k = m.kernel_size
    local h, w = m:input_size_for(out:size(3), out:size(4))
    return out:size(1) * m.in_channels * h * w * (m.out_channels // m.groups) * k[1] * k[2]
  elseif class_is(m, "Linear") then
    return out:numel() * m.in_features
  elseif class_is(m, "BatchNorm2d") or class_is(m, "BatchNorm1d") then
    return out:numel()
  -- normalisation one per element, bilinear upsampling 4 (its taps)
  elseif class_is(m, "LayerNorm") or class_is(m, "GroupNorm") or class_is(m, "InstanceNorm2d") then
    return out:numel()
  elseif class_is(m, "Upsample") and m.mode == "bilinear" then
    return 4 * out:numel()
  elseif rawget(m, "op_type") then -- a node of a model from cnn.onnx.load, as its layer would count
    local op = m.op_type
    if op == "BatchNormalization" or op == "LayerNormalization" or op == "InstanceNormalization" then
      return out:numel()
    elseif op == "Resize" and m.attrs.mode == "linear" and out:dim() == 4 then
      return 4 * out:numel()
    end
  end
  return 0
end
inspect.macs_of = macs_of

local function is_leaf_module(m)
  return #m:children() == 0
end

-- Trainable and frozen element counts of m's own parameters.
local function own_params(m)
  local tr, fr = 0, 0
  for _, pname in ipairs(rawget(m, "_params") or {}) do
    local p = rawget(m, pname)
    if cnn.is_tensor(p) then
      if p.requires_grad then tr = tr + p:numel() else fr = fr + p:numel() end
    end
  end
  return tr, fr
end

-- Trainable and frozen counts of every parameter below m (each once).
local function tree_params(m)
  local tr, fr = 0, 0
  for _, p in m:named_parameters() do
    if p.requires_grad then tr = tr + p:numel() else fr = fr + p:numel() end
  end
  return tr, fr
end

-- Registers pre(name, m, x) and post(name, m, x, out) on every module;
-- returns a function that removes them all.
local function hook_all(net, pre, post)
  local handles = {}
  for name, m in net:named_modules() do
    handles[#handles + 1] = m:register_forward_pre_hook(function(mod, x) pre(name, mod, x) end)
    handles[#handles + 1] = m:register_forward_hook(function(mod, x, out) post(name, mod, x, out) end)
  end
  return function()
    for _, h in ipairs(handles) do h:remove() end
  end
end

-- Saves what running the model may change: training flags, buffers, RNG.
local function save_state(net)
  local s = { modes = {}, bufs = {} }
  for _, m in ipairs(net:modules()) do s.modes[m] = rawget(m, "training") end
  for _, b in ipairs(net:buffers()) do s.bufs[#s.bufs + 1] = { b, b:clone() } end
  if cnn.get_rng_state then s.rng = cnn.get_rng_state() end
  return s
end

local function restore_state(s)
  for m, mode in pairs(s.modes) do rawset(m, "training", mode) end
  cnn.no_grad(function()
    for _, e in ipairs(s.bufs) do e[1]:copy_(e[2]) end
  end)
  if s.rng then cnn.set_rng_state(s.rng) end
end

-- Runs fn() with hooks installed and the model's state saved; always
-- cleans up; returns ok, err_or_result.
local function guarded(net, pre, post, fn)
  local state = save_state(net)
  local unhook = hook_all(net, pre, post)
  local ok, res = pcall(fn)
  unhook()
  restore_state(state)
  return ok, res
end

local function dotted_depth(name)
  if name == "" then return 0 end
  local _, dots = name:gsub("%.", "")
  return dots + 1
end

-- A dummy input: a tensor as given, or zeros of a shape ({1, 1, 28, 28} or
-- numbers), in the dtype and on the device of the first parameter.
-- Errors point at the user's line (dummy_input < summary < caller).
local function dummy_input(net, a, ...)
  if cnn.is_tensor(a) then return a end
  local given = type(a) == "table" and a or { a, ... }
  if #given == 0 then check.fail("summary", "the input", "a tensor or a shape such as {1, 1, 28, 28}", a, 3) end
  local shape = {}
  for i = 1, #given do shape[i] = check.integer("summary", "input size " .. i, given[i], 3, 1) end
  local dtype, device = "float32", "cpu"
  local p = net:parameters()[1]
  if p then dtype, device = p.dtype, p.device end
  local x = cnn.zeros(shape, dtype)
  if device ~= "cpu" then x = x:to(device) end
  return x
end

-- ---- summary ---------------------------------------------------------------------

-- "nn.Conv2d(3, 16, 3, {padding = 1})" with `cin` input channels.
local function conv_ctor(m, cin)
  local k = m.kernel_size
  local ks = k[1] == k[2] and tostring(k[1]) or string.format("{%d, %d}", k[1], k[2])
  local o = {}
  local function opt(name, v, def)
    if type(v) == "table" then v = "{" .. table.concat(v, ", ") .. "}" end
    if v ~= def and v ~= nil then o[#o + 1] = name .. " = " .. tostring(v) end
  end
  opt("stride", m.stride, 1)
  opt("padding", m.padding, 0)
  opt("groups", m.groups, 1)
  local tail = #o > 0 and (", {" .. table.concat(o, ", ") .. "}") or ""
  return string.format("nn.Conv2d(%d, %d, %s%s)", cin, m.out_channels, ks, tail)
end

local function suggest_linear(m, s)
  if #s > 2 then
    local feat = 1
    for i = 2, #s do feat = feat * s[i] end
    if feat == m.in_features then
      return "insert nn.Flatten() before this layer"
    end
    return string.format("insert nn.Flatten() and use nn.Linear(%d, %d)", feat, m.out_features)
  end
  if s[#s] ~= m.in_features then
    return string.format("use nn.Linear(%d, %d)", s[#s], m.out_features)
  end
end

-- What the failing layer m (input x) should be, or nil.
local function suggest(m, x)
  if not cnn.is_tensor(x) then return nil end
  local s = x.shape
  if class_is(m, "Linear") then return suggest_linear(m, s) end
  if class_is(m, "Conv2d") then
    if #s == 3 then return "add a batch dim: x:unsqueeze(1) (" .. shape_str(x) .. " -> 1x" .. shape_str(x) .. ")" end
    if #s == 4 and s[2] ~= m.in_channels then return "use " .. conv_ctor(m, s[2]) end
    if #s == 4 then return "the input " .. shape_str(x) .. " is too small for this kernel: pad it or pool less before" end
  end
  for _, bn in ipairs({ "BatchNorm2d", "BatchNorm1d" }) do
    if class_is(m, bn) and #s >= 2 and s[2] ~= m.num_features then
      return string.format("use nn.%s(%d)", bn, s[2])
    end
  end
  if class_is(m, "MaxPool2d") or class_is(m, "AvgPool2d") then
    return "the input " .. shape_str(x) .. " is smaller than the pooling window: pool less before"
  end
  return nil
end
inspect.suggest = suggest

-- The row of one call (filled in by the post hook).
local function new_row(name, m)
  return { name = name == "" and "(root)" or name, type = m.__name, module = m,
           depth = dotted_depth(name), leaf = is_leaf_module(m) }
end

local function fill_summary_row(row, m, out)
  local o = first_tensor(out)
  row.shape = o and o.shape or nil
  row.output = shape_str(o)
  if row.leaf then
    row.params, row.frozen = own_params(m)
    row.macs = macs_of(m, o)
    row.act_bytes = o and o:numel() * (DTYPE_SIZE[o.dtype] or 4) or 0
  else
    row.params, row.frozen = tree_params(m)
  end
end

local function summary_lines(rows, has_root)
  local cells = {}
  for _, r in ipairs(rows) do
    if r.depth > 0 or not has_root then
      local indent = string.rep("  ", math.max(0, r.depth - 1))
      cells[#cells + 1] = {
        indent .. r.name, r.type, r.failed and "FAILED" or (r.output or "?"),
        commas(r.params or 0), commas(r.frozen or 0),
        (r.leaf and not r.failed) and si(r.macs or 0) or "",
        (r.leaf and not r.failed) and bytes_str(r.act_bytes or 0) or "" }
    end
  end
  return format_table({ "layer", "type", "output", "params", "frozen", "MACs", "act. mem" },
                      cells, { false, false, false, true, true, true, true })
end

local function summary_totals(net, x, rows)
  local t = { macs = 0, act_bytes = 0, param_bytes = 0 }
  t.trainable, t.frozen = tree_params(net)
  for _, p in ipairs(net:parameters()) do t.param_bytes = t.param_bytes + p:numel() * (DTYPE_SIZE[p.dtype] or 4) end
  for _, r in ipairs(rows) do
    if r.leaf then t.macs, t.act_bytes = t.macs + (r.macs or 0), t.act_bytes + (r.act_bytes or 0) end
  end
  t.input_bytes = x:numel() * (DTYPE_SIZE[x.dtype] or 4)
  return t
end

local function totals_lines(t, x)
  return {
    string.format("input %s; params: %s total, %s trainable, %s frozen (%s)", shape_str(x),
      commas(t.trainable + t.frozen), commas(t.trainable), commas(t.frozen), bytes_str(t.param_bytes)),
    string.format("MACs (whole batch): %s (%s FLOPs); activations: %s; input: %s",
      si(t.macs), si(2 * t.macs), bytes_str(t.act_bytes), bytes_str(t.input_bytes)),
  }
end

-- Runs the summary forward; returns rows, ok, err, stack of open calls.
local function summary_run(net, x)
  local rows, stack = {}, {}
  local function pre(name, m)
    local row = new_row(name, m)
    rows[#rows + 1] = row
    stack[#stack + 1] = { row = row }
  end
  local function post(_, m, xin, out)
    local e = table.remove(stack)
    fill_summary_row(e.row, m, out)
  end
  local inputs = {}
  local function pre_with_input(name, m, xin)
    pre(name, m)
    inputs[#stack] = xin
  end
  local ok, err = guarded(net, pre_with_input, post, function()
    net:eval()
    return cnn.no_grad(function() return net(x) end)
  end)
  return rows, ok, err, stack, inputs
end

-- net:summary(input_or_shape [, {print = true}])
function Module:summary(input, opts, ...)
  local x
  if type(opts) == "number" then
    local sizes = { input, opts, ... }
    opts = type(sizes[#sizes]) == "table" and table.remove(sizes) or nil
    x = dummy_input(self, sizes)
  else
    x = dummy_input(self, input)
  end
  opts = check.options("summary", opts, { "print" }, 2)
  check.boolean("summary", "print", opts.print, 2)
  local rows, ok, err, stack, inputs = summary_run(self, x)
  local r = { rows = {}, ok = ok, input_shape = x.shape }
  local failed
  if not ok then
    failed = stack[#stack] and stack[#stack].row
    if failed then
      failed.failed = true
      failed.params, failed.frozen = own_params(failed.module)
      r.suggestion = suggest(failed.module, inputs[#stack])
    end
    r.error = tostring(err)
  end
  local has_root = #rows > 1
  for _, row in ipairs(rows) do
    if row.depth > 0 or not has_root then r.rows[#r.rows + 1] = row end
    row.module = nil
  end
  local t = summary_totals(self, x, rows)
  r.total_params, r.trainable, r.frozen = t.trainable + t.frozen, t.trainable, t.frozen
  r.macs, r.activation_bytes, r.param_bytes = t.macs, t.act_bytes, t.param_bytes
  local lines = summary_lines(rows, has_root)
  for _, l in ipairs(totals_lines(t, x)) do lines[#lines + 1] = l end
  if not ok then
    lines[#lines + 1] = "error at " .. (failed and failed.name or "?") .. ": " .. r.error
    if r.suggestion then lines[#lines + 1] = "fix: " .. r.suggestion end
  else
    r.output_shape = rows[1] and rows[1].shape
  end
  r.text = table.concat(lines, "\n") .. "\n"
  if opts.print ~= false then io.write(r.text) end
  return result(r, string.format("<summary: %d layers, %s params%s>", #r.rows,
                                 commas(r.total_params), ok and "" or ", FAILED"))
end

-- ---- statistics --------------------------------------------------------------------

local function finite_stats(t, s)
  local v = t:reshape(-1):totable()
  local n, sum, lo, hi = 0, 0, math.huge, -math.huge
  for _, x in ipairs(v) do
    if x == x and x ~= math.huge and x ~= -math.huge then
      n, sum = n + 1, sum + x
      lo, hi = math.min(lo, x), math.max(hi, x)
    end
  end
  if n == 0 then return s end
  s.mean, s.min, s.max = sum / n, lo, hi
  local ss = 0
  for _, x in ipairs(v) do
    if x == x and x ~= math.huge and x ~= -math.huge then ss = ss + (x - s.mean) ^ 2 end
  end
  s.std = n > 1 and math.sqrt(ss / (n - 1)) or 0
  return s
end

-- inspect.stats(t) -> {numel, mean, std, min, max, zeros (share), nan, inf}.
-- mean/std/min/max are over the finite values; std is unbiased.
function inspect.stats(t)
  local x = t:detach():double()
  local n = x:numel()
  local s = { numel = n, nan = 0, inf = 0, zeros = 0 }
  if n == 0 then return s end
  s.nan = x:ne(x):double():sum():item()
  s.inf = x:abs():eq(math.huge):double():sum():item()
  s.zeros = x:eq(0):double():sum():item() / n
  if s.nan + s.inf > 0 then return finite_stats(x, s) end
  s.mean, s.min, s.max = x:mean():item(), x:min():item(), x:max():item()
  s.std = n > 1 and math.sqrt(((x - s.mean) ^ 2):sum():item() / (n - 1)) or 0
  return s
end

local function grad_flag(norm)
  if norm == nil then return nil end
  if norm ~= norm or norm == math.huge then return "NaN/Inf grad" end
  if norm < inspect.VANISHING then return "vanishing" end
  if norm > inspect.EXPLODING then return "exploding" end
  return nil
end

local function value_flag(s)
  if s.nan + s.inf > 0 then return "NaN/Inf" end
  if s.numel > 0 and s.zeros == 1 then return "all zero" end
  return nil
end

-- ---- trace --------------------------------------------------------------------------

-- The loss for trace: fn(out), or cross-entropy for int64 targets, else MSE.
local function trace_loss(out, target)
  if type(target) == "function" then return target(out) end
  if target.dtype == "int64" then return F.cross_entropy(out, target) end
  return F.mse_loss(out, target)
end

local function grad_stats(row, g)
  local gd = g:detach():double()
  row.grad_norm = gd:norm():item()
  row.grad_mean_abs = gd:abs():mean():item()
end

-- The layer rows of one forward (and the hooks catching output gradients).
local function trace_run(net, x, target)
  local rows, stack, handles, loss = {}, {}, {}, nil
  local function pre(name, m)
    local row = new_row(name, m)
    rows[#rows + 1] = row
    stack[#stack + 1] = row
  end
  local function post(_, m, xin, out)
    local row = table.remove(stack)
    local o = first_tensor(out)
    if not o then return end
    row.shape, row.output = o.shape, shape_str(o)
    for k, v in pairs(inspect.stats(o)) do row[k] = v end
    if target ~= nil and o.requires_grad then
      handles[#handles + 1] = o:register_hook(function(g) grad_stats(row, g) end)
    end
  end
  local ok, err = guarded(net, pre, post, function()
    local out = net(x)
    if target == nil then return end
    for _, p in ipairs(net:parameters()) do p.grad = nil end
    loss = trace_loss(first_tensor(out), target)
    loss:backward()
  end)
  for _, h in ipairs(handles) do h:remove() end
  if not ok then error(err, 0) end
  return rows, loss
end

local function param_rows(net, with_grad)
  local rows = {}
  for name, p in net:named_parameters() do
    local row = { name = name, output = shape_str(p), shape = p.shape }
    for k, v in pairs(inspect.stats(p)) do row[k] = v end
    if with_grad and p.grad then grad_stats(row, p.grad) end
    row.flag = (row.nan + row.inf > 0) and "NaN/Inf" or grad_flag(row.grad_norm)
    rows[#rows + 1] = row
  end
  return rows
end

local function trace_cells(r, kind)
  return { r.name, kind or r.type, r.output, num(r.mean), num(r.std), num(r.min), num(r.max),
           string.format("%.0f%%", 100 * (r.zeros or 0)), tostring(math.floor((r.nan or 0) + (r.inf or 0))),
           num(r.grad_norm), num(r.grad_mean_abs), r.flag and ("<- " .. r.flag) or "" }
end

local function trace_text(rows, params, loss)
  local cells = {}
  for _, r in ipairs(rows) do cells[#cells + 1] = trace_cells(r) end
  for _, r in ipairs(params) do cells[#cells + 1] = trace_cells(r, "param") end
  local lines = format_table({ "layer", "type", "shape", "mean", "std", "min", "max", "zeros",
                               "nan/inf", "|grad|", "mean|g|", "" }, cells,
                             { false, false, false, true, true, true, true, true, true, true, true, false })
  if loss then lines[#lines + 1] = "loss " .. num(loss) end
  return table.concat(lines, "\n") .. "\n"
end

-- net:trace(x [, target_or_lossfn [, {print = true}]])
function Module:trace(x, target, opts)
  assert(cnn.is_tensor(x), "trace: expected an input tensor")
  opts = check.options("trace", opts, { "print" }, 2)
  check.boolean("trace", "print", opts.print, 2)
  local rows, loss = trace_run(self, x, target)
  local out_rows = {}
  for _, row in ipairs(rows) do
    row.module = nil
    if row.depth > 0 or #rows == 1 then
      row.flag = value_flag(row) or grad_flag(row.grad_norm)
      out_rows[#out_rows + 1] = row
    end
  end
  local params = param_rows(self, target ~= nil)
  local r = { rows = out_rows, params = params, loss = loss and loss:item() or nil }
  r.text = trace_text(out_rows, params, r.loss)
  if opts.print ~= false then io.write(r.text) end
  local nflag = 0
  for _, row in ipairs(out_rows) do if row.flag then nflag = nflag + 1 end end
  for _, row in ipairs(params) do if row.flag then nflag = nflag + 1 end end
  return result(r, string.format("<trace: %d layers, %d params, %d flagged>", #out_rows, #params, nflag))
end

-- ---- profile -----------------------------------------------------------------------------

local median = require("timeit").median
inspect.median = median

-- Timing (DESIGN.md "Timing"): one cnn.timer on the input's device.  The
-- hooks only record marks -- on the CPU a clock reading, on a GPU a CUDA
-- event queued on the stream, which never waits -- and the marks are read
-- after the iteration with timer:times(), one synchronization per iteration.
-- Each record keeps mark numbers while the iteration runs (m0, m1, gout,
-- gin, ...); resolve_marks turns them into seconds after the first mark.
local function resolve_marks(recs, tm)
  local T = tm:times()
  for _, rec in ipairs(recs) do
    rec.fwd = T[rec.m1] - T[rec.m0]
    if rec.gout then rec.gout = T[rec.gout] end
    if rec.gin then rec.gin = T[rec.gin] end
  end
  recs.total_fwd = T[recs.m_fwd] - T[recs.m_start]
  if recs.m_end then
    recs.t_end = T[recs.m_end]
    recs.total_bwd = recs.t_end - T[recs.m_fwd]
  end
end

-- One timed iteration: fills rec[k] (k-th leaf call) with fwd, gout, gin
-- (seconds), using timer tm (reset here).
local function profile_iter(net, x, backward, tm)
  local recs, stack, handles = {}, {}, {}
  tm:reset()
  local function pre(_, m, xin)
    if not is_leaf_module(m) then return end
    local rec = { m0 = tm:mark(), m = m }
    recs[#recs + 1] = rec
    stack[#stack + 1] = rec
    if backward and cnn.is_tensor(xin) and xin.requires_grad then
      handles[#handles + 1] = xin:register_hook(function() rec.gin = tm:mark() end)
    end
  end
  local function post(_, m, xin, out)
    if not is_leaf_module(m) then return end
    local rec = table.remove(stack)
    rec.m1 = tm:mark()
    local o = first_tensor(out)
    rec.out = o
    if backward and o and o.requires_grad then
      handles[#handles + 1] = o:register_hook(function() rec.gout = tm:mark() end)
    end
  end
  local unhook = hook_all(net, pre, post)
  local ok, err = pcall(function()
    recs.m_start = tm:mark()
    local out = first_tensor(net(x))
    recs.m_fwd = tm:mark()
    if backward and out.requires_grad then
      out:sum():backward()
      recs.m_end = tm:mark()
    end
    resolve_marks(recs, tm)
  end)
  unhook()
  for _, h in ipairs(handles) do h:remove() end
  if not ok then error(err, 0) end
  return recs
end

-- Times of every iteration -> rows of medians.
local function profile_rows(iters)
  local rows = {}
  for k, rec in ipairs(iters[1]) do
    local fwd, bwd = {}, {}
    for i, it in ipairs(iters) do
      local r = it[k]
      fwd[i] = r.fwd
      if r.gout then bwd[i] = (r.gin or it.t_end) - r.gout end
    end
    local name = rec.name
    rows[k] = { name = name, type = rec.m.__name, macs = macs_of(rec.m, rec.out),
                fwd_ms = median(fwd) * 1e3, bwd_ms = #bwd > 0 and median(bwd) * 1e3 or 0 }
  end
  return rows
end

local function profile_finish(rows, iters)
  local sum = 0
  for _, r in ipairs(rows) do
    r.total_ms = r.fwd_ms + r.bwd_ms
    sum = sum + r.total_ms
    r.gflops_fwd = r.fwd_ms > 0 and 2 * r.macs / (r.fwd_ms * 1e-3) / 1e9 or 0
    r.gflops_bwd = r.bwd_ms > 0 and 4 * r.macs / (r.bwd_ms * 1e-3) / 1e9 or 0
  end
  for _, r in ipairs(rows) do r.share = sum > 0 and r.total_ms / sum or 0 end
  local fw, bw = {}, {}
  for i, it in ipairs(iters) do fw[i], bw[i] = it.total_fwd, it.total_bwd or 0 end
  return median(fw) * 1e3, median(bw) * 1e3, sum
end

local function profile_text(rows, fwd_ms, bwd_ms, iters, backward)
  local cells = {}
  for _, r in ipairs(rows) do
    cells[#cells + 1] = { r.name, r.type, string.format("%.3f", r.fwd_ms),
      backward and string.format("%.3f", r.bwd_ms) or "-", string.format("%.1f%%", 100 * r.share),
      r.macs > 0 and string.format("%.3g", r.gflops_fwd) or "",
      (r.macs > 0 and backward) and string.format("%.3g", r.gflops_bwd) or "" }
  end
  local lines = format_table({ "layer", "type", "fwd ms", "bwd ms", "share", "fwd GFLOP/s", "bwd GFLOP/s" },
                             cells, { false, false, true, true, true, true, true })
  lines[#lines + 1] = string.format("whole net: forward %.3f ms, backward %.3f ms (medians of %d runs)",
                                    fwd_ms, bwd_ms, iters)
  return table.concat(lines, "\n") .. "\n"
end

-- net:profile(x [, {iters = 10, warmup = 2, backward = true, print = true}])
function Module:profile(x, opts)
  assert(cnn.is_tensor(x), "profile: expected an input tensor")
  opts = check.options("profile", opts, { "iters", "warmup", "backward", "print" }, 2)
  local iters = check.integer("profile", "iters", opts.iters or 10, 2, 1)
  local warmup = check.integer("profile", "warmup", opts.warmup or 2, 2, 0)
  local backward = check.boolean("profile", "backward", opts.backward, 2) ~= false
  check.boolean("profile", "print", opts.print, 2)
  local tm <close> = cnn.timer(x)
  local names = {}
  for name, m in self:named_modules() do if names[m] == nil then names[m] = name end end
  local saved_grads, state = {}, save_state(self)
  for _, p in ipairs(self:parameters()) do saved_grads[p] = p.grad or false end
  local runs = {}
  local ok, err = pcall(function()
    for i = 1, warmup + iters do
      for p in pairs(saved_grads) do p.grad = nil end
      local recs = profile_iter(self, x, backward, tm)
      if i > warmup then runs[#runs + 1] = recs end
    end
  end)
  for p, g in pairs(saved_grads) do p.grad = g or nil end
  restore_state(state)
  if not ok then error(err, 0) end
  for _, rec in ipairs(runs[1]) do rec.name = names[rec.m] or "?" end
  local rows = profile_rows(runs)
  local fwd_ms, bwd_ms = profile_finish(rows, runs)
  local r = { rows = rows, forward_ms = fwd_ms, backward_ms = bwd_ms, iters = iters }
  r.text = profile_text(rows, fwd_ms, bwd_ms, iters, backward)
  if opts.print ~= false then io.write(r.text) end
  return result(r, string.format("<profile: %d layers, forward %.3f ms, backward %.3f ms>",
                                 #rows, fwd_ms, bwd_ms))
end

-- ---- documentation ---------------------------------------------------------------------

doc[Module.summary] = [==[
net:summary(input_or_shape [, {print = true}]) -> r
Runs the network once on a dummy input (zeros of the shape, e.g. {1, 1, 28, 28},
or the tensor given) in eval mode under no_grad, and prints one row per
layer call: dotted name, type, output shape, trainable and frozen
parameters, multiply-adds (MACs) and activation memory, then totals.
MACs count the whole batch of the input: Conv2d N*K*OH*OW*(C/groups)*R*S,
ConvTranspose2d N*C*H*W*(K/groups)*R*S (C, H, W: its input), Conv1d N*K*OL*(C/groups)*k,
Linear (output elements)*in_features, BatchNorm, LayerNorm, GroupNorm and
InstanceNorm2d one per element, bilinear Upsample 4 per output element, others 0
(activations such as ReLU, SiLU, GELU, Mish; pools; nearest Upsample; PixelShuffle).
On a shape error it stops at the failing layer and suggests the fix
(e.g. "use nn.Linear(1600, 128)").  r.rows, r.total_params, r.macs,
r.ok, r.error, r.suggestion, r.text.  The model is left unchanged.]==]
doc[Module.trace] = [==[
net:trace(x [, target_or_lossfn [, {print = true}]]) -> r
One forward (and, with a target or a loss function fn(out) -> loss, one
backward) recording per layer the output's shape, mean, std (unbiased), min,
max, share of zeros and NaN/Inf count, and the gradient's norm and mean |g|
(seen by tensor hooks on the outputs); then the same for every parameter.
Int64 targets use F.cross_entropy, others F.mse_loss.  Gradients below
1e-7 are marked "vanishing", above 1e3 "exploding".  r.rows, r.params,
r.loss, r.text.  Parameter .grad holds this batch's gradients afterwards
(for viz.gradflow); buffers and the RNG are restored.]==]
doc[Module.profile] = [==[
net:profile(x [, {iters = 10, warmup = 2, backward = true, print = true}]) -> r
Per leaf layer: median forward ms (marks of a cnn.timer on x's device in
forward pre/post hooks), median backward ms (time between the gradient
reaching the layer's output and reaching its input, seen by tensor hooks;
the first layer ends when backward returns), share of the total and
GFLOP/s (forward 2*MACs/time, backward 4*MACs/time).  The loss is
out:sum().  On a GPU the marks are CUDA events recorded on the stream
without waiting and read after each iteration (one synchronization per
iteration), so the times are the device's own and the layers still
overlap with the host as in training.  Gradients, buffers and the RNG
are restored.  r.rows (name, type, fwd_ms,
bwd_ms, share, macs, gflops_fwd, gflops_bwd), r.forward_ms, r.backward_ms.]==]
doc[inspect] = [==[
inspect -- net:summary(shape), net:trace(x [, target]), net:profile(x);
loaded with nn.  inspect.stats(t) gives {mean, std, min, max, zeros, nan, inf}.]==]

return inspect
