-- bench/conv.lua -- forward and backward speed of representative conv layers.
--
-- For each layer (batch 64, 3x3, padding 1) and each CPU algorithm
-- (oneDNN's direct kernels, "onednn"; "auto", which gives the shapes
-- core/cpu/conv_winograd.c picks to oneDNN's Winograd kernels -- there
-- gflops counts the direct convolution's FLOPs, an effective rate; im2col
-- + OpenBLAS SGEMM), prints one JSON line with the median
-- time, GFLOP/s and the ratio to this machine's SGEMM rate (OpenBLAS,
-- 1024x1024x1024) measured in the same run, so the figures survive a noisy
-- machine.  Backward covers both passes (data and weight), timed around
-- out:backward() alone, so it includes the autograd's bookkeeping and the
-- copy of each gradient into .grad but not the forward.
-- Usage: cnnsh bench/conv.lua [--quick]

local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local quick = arg[1] == "--quick"
local reps = quick and 3 or 7

local median = B.median

-- fn may return the seconds it measured itself (the part worth timing);
-- otherwise the whole call is timed.
local function time_median(fn, n)
  fn() -- warm-up: primitive creation, first-touch of buffers
  local times = {}
  for i = 1, n do
    local t0 = cnn.clock()
    local inner = fn()
    times[i] = inner or cnn.clock() - t0
  end
  return median(times)
end

local function sgemm_gflops()
  local n = 1024
  local a, b = cnn.randn(n, n), cnn.randn(n, n)
  local t = time_median(function() local c <close> = a:mm(b) end, reps)
  return 2 * n * n * n / t / 1e9
end

local layers = {
  {name = "conv1_1x32_28", c = 1, k = 32, hw = 28},
  {name = "conv2_32x64_14", c = 32, k = 64, hw = 14},
  {name = "conv3_64x128_16", c = 64, k = 128, hw = 16},
  {name = "conv4_128x256_8", c = 128, k = 256, hw = 8},
}

local emit = B.emit

local peak = sgemm_gflops()
emit({{"bench", "sgemm"}, {"n", 1024}, {"gflops", peak}})

for _, algo in ipairs({"onednn", "auto", "im2col"}) do
  cnn.set_conv_algo(algo)
  for _, L in ipairs(layers) do
    local batch = 64
    local x = cnn.randn(batch, L.c, L.hw, L.hw)
    local w = cnn.randn(L.k, L.c, 3, 3) * 0.1
    local b = cnn.zeros(L.k)
    local flops = 2 * batch * L.k * L.c * 9 * L.hw * L.hw
    local fwd = time_median(function()
      local y <close> = F.conv2d(x, w, b, {padding = 1})
    end, reps)
    x.requires_grad, w.requires_grad, b.requires_grad = true, true, true
    local y = F.conv2d(x, w, b, {padding = 1})
    local dy = cnn.randn(table.unpack(y.shape))
    -- only out:backward() is timed (the forward is not); the output and the
    -- gradients are released at once rather than left to the collector, so
    -- their blocks are reused as in a training step instead of each
    -- iteration paying for fresh pages
    local bwd = time_median(function()
      local out <close> = F.conv2d(x, w, b, {padding = 1})
      local t0 = cnn.clock()
      out:backward(dy)
      local t = cnn.clock() - t0
      x.grad:release(); w.grad:release(); b.grad:release()
      x.grad, w.grad, b.grad = nil, nil, nil
      return t
    end, reps)
    emit({{"bench", "conv2d"}, {"layer", L.name}, {"algo", algo}, {"pass", "forward"},
          {"ms", fwd * 1e3}, {"gflops", flops / fwd / 1e9}, {"vs_sgemm", flops / fwd / 1e9 / peak}})
    emit({{"bench", "conv2d"}, {"layer", L.name}, {"algo", algo}, {"pass", "backward"},
          {"ms", bwd * 1e3}, {"gflops", 2 * flops / bwd / 1e9}, {"vs_sgemm", 2 * flops / bwd / 1e9 / peak}})
    x.requires_grad, w.requires_grad, b.requires_grad = false, false, false
  end
end
cnn.set_conv_algo("auto")
