-- bench/layers.lua -- the memory-bound layers of the example network
-- (examples/fashion_mnist.lua) at its training shapes, batch 64: batch
-- norm, ReLU and max pooling, forward and backward, and the Adam step over
-- its 421,834 parameters, each in GB/s of the bytes the pass must move
-- (bench/step_profile.lua's byte model) and in ms.  One JSON line a figure:
--   {"bench":"layer","op":"batch_norm","shape":"64x32x28x28","pass":"bwd","ms":...,"gbs":...}
--   {"bench":"layer","op":"adam","params":421834,"ms":...,"gbs":...}
-- Usage: cnnsh bench/layers.lua [rounds]   (median of `rounds` timed runs
-- of 10 calls each, after a warm-up).  It uses no function newer than the
-- layers themselves, so two builds can be timed alternately by a script;
-- where the build has cnn.fused.batch_norm_relu it also times batch norm +
-- ReLU fused against the two layers, alternated in this process:
--   {"bench":"layer_pair","op":"batch_norm_relu","shape":...,"pass":"fwd+bwd",
--    "fused_ms":...,"unfused_ms":...,"speedup":...}

local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")
local rounds = tonumber(arg and arg[1]) or 7

local function time_ms(fn)
  fn()
  local t = {}
  for r = 1, rounds do
    local t0 = cnn.clock()
    for _ = 1, 10 do fn() end
    t[r] = (cnn.clock() - t0) / 10 * 1e3
  end
  return B.median(t)
end

local function emit(op, shape, pass, ms, bytes)
  B.emit({ { "bench", "layer" }, { "op", op }, { "shape", shape }, { "pass", pass }, { "ms", ms },
           { "gbs", bytes / (ms * 1e-3) / 1e9 } })
end

local function shape_str(t) return table.concat(t.shape, "x") end

-- forward (y = f(x)) and backward (y:backward(dy)) of one layer
local function fwd_bwd(op, x, f, fwd_bytes, bwd_bytes)
  x.requires_grad = true
  local dy
  emit(op, shape_str(x), "fwd", time_ms(function() local _ = f(x) end), fwd_bytes)
  local function bwd()
    local y = f(x)
    dy = dy or cnn.randn(table.unpack(y.shape))
    x.grad = nil
    y:backward(dy)
  end
  local both = time_ms(bwd)
  local fwd = time_ms(function() local _ = f(x) end)
  emit(op, shape_str(x), "bwd", both - fwd, bwd_bytes)
end

cnn.manual_seed(0)
for _, s in ipairs({ { 64, 32, 28, 28 }, { 64, 64, 14, 14 } }) do
  local n = s[1] * s[2] * s[3] * s[4]
  local C = s[2]
  local rm, rv, w, b = cnn.zeros(C), cnn.ones(C), cnn.ones(C), cnn.zeros(C)
  w.requires_grad, b.requires_grad = true, true
  fwd_bwd("batch_norm", cnn.randn(table.unpack(s)),
          function(x) return F.batch_norm(x, rm, rv, w, b, { training = true }) end, 8 * n, 12 * n)
  fwd_bwd("relu", cnn.randn(table.unpack(s)), function(x) return F.relu(x) end, 8 * n, 12 * n)
  fwd_bwd("max_pool2d", cnn.randn(table.unpack(s)), function(x) return F.max_pool2d(x, 2) end,
          4 * n + 12 * n / 4, 4 * n + 12 * n / 4)
end

-- batch norm + ReLU, fused (one op) against the two ops, forward and
-- backward, the two alternated round by round
local function pair_ms(x, f)
  local dy = cnn.randn(table.unpack(x.shape))
  local function once()
    x.grad = nil
    f(x):backward(dy)
  end
  once()
  local t0 = cnn.clock()
  for _ = 1, 10 do once() end
  return (cnn.clock() - t0) / 10 * 1e3
end
if cnn.fused.batch_norm_relu then
  for _, s in ipairs({ { 64, 32, 28, 28 }, { 64, 64, 14, 14 } }) do
    local C = s[2]
    local rm, rv, w, b = cnn.zeros(C), cnn.ones(C), cnn.ones(C), cnn.zeros(C)
    w.requires_grad, b.requires_grad = true, true
    local x = cnn.randn(table.unpack(s))
    x.requires_grad = true
    local function fused(t) return cnn.fused.batch_norm_relu(t, rm, rv, w, b, true, 0.1, 1e-5) end
    local function unfused(t) return F.relu(F.batch_norm(t, rm, rv, w, b, { training = true })) end
    local tf, tu = {}, {}
    for r = 1, rounds do tf[r], tu[r] = pair_ms(x, fused), pair_ms(x, unfused) end
    local f, u = B.median(tf), B.median(tu)
    B.emit({ { "bench", "layer_pair" }, { "op", "batch_norm_relu" }, { "shape", shape_str(x) },
             { "pass", "fwd+bwd" }, { "fused_ms", f }, { "unfused_ms", u }, { "speedup", u / f } })
  end
end

-- Adam over the example network's parameters, through optim.Adam
local net = B.fmnist_cnn()
local params = net:parameters()
local opt = optim.Adam(params, { lr = 1e-3 })
local nparam = 0
for _, p in ipairs(params) do
  p.grad = cnn.randn(table.unpack(p.shape)) * 1e-3
  nparam = nparam + p:numel()
end
local ms = time_ms(function() opt:step() end)
B.emit({ { "bench", "layer" }, { "op", "adam" }, { "params", nparam }, { "ms", ms },
         { "gbs", 28 * nparam / (ms * 1e-3) / 1e9 } })
