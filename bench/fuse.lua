-- bench/fuse.lua -- the deployment variants of the example network
-- (examples/fashion_mnist.lua) and of ResNet-18 (models.resnet18) against
-- float32: inference images per second in eval mode under no_grad, at batch
-- 1 and 256 (ResNet-18: 224x224, batch 1 and 16), each pair measured in one
-- run and reported as a ratio (issue 16, points 4 and 8):
--
--   {"bench":"fuse","net":"fmnist_cnn","batch":256,"threads":2,"base_images_per_s":...,
--    "images_per_s":...,"speedup":...,"max_abs_diff":...}
--   bench "fuse": net:fuse() (batch norm folded, activations as oneDNN
--   post-ops inside the convolutions) vs the unfused net;
--   "fuse_post_ops": the same fused net vs net:fuse{post_ops = false}
--   (batch norm folded, ReLU applied in place after the layer): what the
--   post-ops add on their own;
--   "bf16": cnn.autocast('bfloat16') on the unfused net vs float32
--   (emulated where the CPU lacks AVX-512 BF16); "int8": cnn.quantize(fused
--   net) vs the unfused float32 net (the example network only).
--
--   cnnsh bench/fuse.lua [--steps N]     (--quick: a smoke run, tiny sizes)
-- Each figure is the median over 3 timed runs of N calls (ResNet-18: N/5,
-- at least 2) after one warm-up; the two networks alternate run by run so
-- drifts hit both.
local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local steps, quick = 20, false
local i = 1
while arg and arg[i] do
  if arg[i] == "--quick" then steps, quick, i = 2, true, i + 1
  elseif arg[i] == "--steps" then steps, i = math.tointeger(tonumber(arg[i + 1])) or error("--steps needs an integer", 0), i + 2
  else error("usage: cnnsh bench/fuse.lua [--steps N | --quick]", 0) end
end

-- net in eval mode with running statistics away from 0 and 1
local function trained(net, shape)
  net:train()
  cnn.no_grad(function() for _ = 1, 2 do net(cnn.randn(table.unpack(shape))) end end)
  return net:eval()
end

-- a copy of net (same weights and statistics) made by make(), fused with opts
local function fused_copy(make, net, opts)
  local f = make()
  f:load_state_dict(net:state_dict())
  return f:eval():fuse(opts)
end

local function rate(m, x, n)
  local t0 = cnn.clock()
  for _ = 1, n do cnn.no_grad(function() return m(x) end) end
  return n * x:size(1) / (cnn.clock() - t0)
end

-- one JSON line per variant: base against m, alternated run by run
local function compare(net_name, batches, input_shape, n, variants)
  for _, batch in ipairs(batches) do
    local x = cnn.randn(batch, table.unpack(input_shape))
    for _, v in ipairs(variants) do
      local name, base, m = v[1], v[2], v[3]
      local diff = cnn.no_grad(function() return (base(x) - m(x)):abs():max():item() end) -- also the warm-up
      local a, b = {}, {}
      for run = 1, 3 do a[run], b[run] = rate(base, x, n), rate(m, x, n) end
      local r0, r1 = B.median(a), B.median(b)
      B.emit({ { "bench", name }, { "net", net_name }, { "batch", batch }, { "threads", cnn.get_num_threads() },
               { "base_images_per_s", r0 }, { "images_per_s", r1 }, { "speedup", r1 / r0 }, { "max_abs_diff", diff } })
    end
  end
end

-- ---- the example network ------------------------------------------------------------------

cnn.manual_seed(0)
local net = trained(B.fmnist_cnn(), { 32, 1, 28, 28 })
local fused = fused_copy(B.fmnist_cnn, net)
local fused_plain = fused_copy(B.fmnist_cnn, net, { post_ops = false })
local bf16 = function(x) return cnn.autocast("bfloat16", function() return net(x) end) end
local q8 = cnn.quantize(fused, { cnn.randn(64, 1, 28, 28) })
compare("fmnist_cnn", { 1, 256 }, { 1, 28, 28 }, steps, {
  { "fuse", net, fused }, { "fuse_post_ops", fused_plain, fused }, { "bf16", net, bf16 }, { "int8", net, q8 } })

-- ---- ResNet-18 ----------------------------------------------------------------------------

local size = quick and 32 or 224
local resnet = trained(models.resnet18(), { 2, 3, size, size })
local r_fused = fused_copy(models.resnet18, resnet)
local r_plain = fused_copy(models.resnet18, resnet, { post_ops = false })
compare("resnet18_" .. size, quick and { 1 } or { 1, 16 }, { 3, size, size }, math.max(2, steps // 5), {
  { "fuse", resnet, r_fused }, { "fuse_post_ops", r_plain, r_fused } })
