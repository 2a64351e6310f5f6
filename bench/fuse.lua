-- bench/fuse.lua -- the deployment variants of the example network
-- (examples/fashion_mnist.lua) against float32: inference images per second
-- in eval mode under no_grad, at batch 1 and 256, each pair measured in one
-- run and reported as a ratio (issue 16, point 8):
--
--   {"bench":"fuse","net":"fmnist_cnn","batch":256,"threads":2,"base_images_per_s":...,
--    "images_per_s":...,"speedup":...,"max_abs_diff":...}
--   bench "fuse": net:fuse() vs the unfused net;  "bf16": cnn.autocast('bfloat16')
--   on the unfused net vs float32 (emulated where the CPU lacks AVX-512 BF16);
--   "int8": cnn.quantize(fused net) vs the unfused float32 net.
--
--   cnnsh bench/fuse.lua [--steps N]     (--quick: 2 steps, a smoke run)
-- Each figure is the median over 3 timed runs of N calls after one warm-up;
-- the two networks alternate run by run so drifts hit both.  ResNet-18 joins
-- when stdlib/models has it.
local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local steps = 20
local i = 1
while arg and arg[i] do
  if arg[i] == "--quick" then steps, i = 2, i + 1
  elseif arg[i] == "--steps" then steps, i = math.tointeger(tonumber(arg[i + 1])) or error("--steps needs an integer", 0), i + 2
  else error("usage: cnnsh bench/fuse.lua [--steps N | --quick]", 0) end
end

cnn.manual_seed(0)
local net = B.fmnist_cnn()
net:train()
for _ = 1, 3 do net(cnn.randn(32, 1, 28, 28)) end -- running statistics away from 0 and 1
net:eval()
local fused = B.fmnist_cnn()
fused:load_state_dict(net:state_dict())
fused:eval():fuse()

local function rate(m, x)
  local t0 = cnn.clock()
  for _ = 1, steps do cnn.no_grad(function() return m(x) end) end
  return steps * x:size(1) / (cnn.clock() - t0)
end

local bf16 = function(x) return cnn.autocast("bfloat16", function() return net(x) end) end
local q8 = cnn.quantize(fused, { cnn.randn(64, 1, 28, 28) })
local variants = { { "fuse", fused }, { "bf16", bf16 }, { "int8", q8 } }

for _, batch in ipairs({ 1, 256 }) do
  local x = cnn.randn(batch, 1, 28, 28)
  for _, v in ipairs(variants) do
    local name, m = v[1], v[2]
    local diff = cnn.no_grad(function() return (net(x) - m(x)):abs():max():item() end) -- also the warm-up
    local a, b = {}, {}
    for run = 1, 3 do a[run], b[run] = rate(net, x), rate(m, x) end
    local base, other = B.median(a), B.median(b)
    B.emit({ { "bench", name }, { "net", "fmnist_cnn" }, { "batch", batch }, { "threads", cnn.get_num_threads() },
             { "base_images_per_s", base }, { "images_per_s", other }, { "speedup", other / base },
             { "max_abs_diff", diff } })
  end
end
