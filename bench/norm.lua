-- bench/norm.lua -- LayerNorm and GroupNorm forward and backward bandwidth
-- as a fraction of this machine's copy bandwidth, measured in the same run
-- (issue 13 point 13).  Bytes counted are the minimum each pass must move:
-- copy 2 (read + write), forward 2 (read x, write y), backward 3 (read dy
-- and x, write dx) times the tensor's bytes; the parameters and the per-row
-- statistics are negligible.  One JSON line a figure:
--   {"bench":"norm","op":"copy","shape":...,"ms":...,"gbs":...}
--   {"bench":"norm","op":"layer_norm","shape":...,"pass":"fwd","ms":...,"gbs":...,"of_copy":...}
-- Usage: cnnsh bench/norm.lua [rounds] [--quick] [--cuda]  (median of
-- `rounds` timed runs of 10 calls after a warm-up; --quick: small shapes
-- and one round, a smoke run whose figures mean nothing).
local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")
local quick, device, rounds = false, "cpu", 7
for _, a in ipairs(arg or {}) do
  if a == "--quick" then quick, rounds = true, 1
  elseif a == "--cuda" then device = "cuda"
  elseif tonumber(a) then rounds = tonumber(a) end
end

local function sync() if device == "cuda" then cnn.cuda.synchronize() end end

local function time_ms(fn)
  fn()
  sync()
  local t = {}
  for r = 1, rounds do
    local t0 = cnn.clock()
    for _ = 1, 10 do fn() end
    sync()
    t[r] = (cnn.clock() - t0) / 10 * 1e3
  end
  return B.median(t)
end

local function shape_str(x) return table.concat(x.shape, "x") end

local function emit(op, x, pass, ms, bytes, copy_gbs)
  local gbs = bytes / (ms * 1e-3) / 1e9
  local fields = { { "bench", "norm" }, { "op", op }, { "shape", shape_str(x) } }
  if pass then fields[#fields + 1] = { "pass", pass } end
  fields[#fields + 1] = { "ms", ms }
  fields[#fields + 1] = { "gbs", gbs }
  if copy_gbs then fields[#fields + 1] = { "of_copy", gbs / copy_gbs } end
  B.emit(fields)
  return gbs
end

local function copy_gbs(x)
  local y = cnn.empty(table.unpack(x.shape)):to(device)
  return emit("copy", x, nil, time_ms(function() y:copy_(x) end), 2 * x:numel() * 4)
end

local function fwd_bwd(op, layer, x, ref)
  local bytes = x:numel() * 4
  emit(op, x, "fwd", time_ms(function() local _ = cnn.no_grad(function() return layer(x) end) end), 2 * bytes, ref)
  x.requires_grad = true
  local dy = cnn.randn(table.unpack(x.shape)):to(device)
  local y
  local ms = time_ms(function()
    y = layer(x)
    y:backward(dy)
  end)
  -- the timed call ran a forward too: subtract it to leave the backward
  local fwd = time_ms(function() y = layer(x) end)
  emit(op, x, "bwd", math.max(ms - fwd, 1e-6), 3 * bytes, ref)
  x.requires_grad = false
end

local ln_shape = quick and { 64, 96 } or { 8192, 768 }
local gn_shape = quick and { 2, 32, 8, 8 } or { 32, 256, 28, 28 }
local x = cnn.randn(table.unpack(ln_shape)):to(device)
fwd_bwd("layer_norm", nn.LayerNorm(ln_shape[2]):to(device), x, copy_gbs(x))
local g = cnn.randn(table.unpack(gn_shape)):to(device)
fwd_bwd("group_norm", nn.GroupNorm(32, gn_shape[2]):to(device), g, copy_gbs(g))
