-- bench/fuse.lua -- net:fuse() against the unfused network: inference
-- images per second of the example network (examples/fashion_mnist.lua)
-- in eval mode under no_grad, at batch 1 and 256, each pair measured in one
-- run and reported as a ratio:
--
--   {"bench":"fuse","net":"fmnist_cnn","batch":256,"threads":2,"unfused_images_per_s":...,
--    "fused_images_per_s":...,"speedup":...,"max_abs_diff":...}
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

for _, batch in ipairs({ 1, 256 }) do
  local x = cnn.randn(batch, 1, 28, 28)
  local diff = cnn.no_grad(function() return (net(x) - fused(x)):abs():max():item() end) -- also the warm-up
  local a, b = {}, {}
  for run = 1, 3 do a[run], b[run] = rate(net, x), rate(fused, x) end
  local ua, fb = B.median(a), B.median(b)
  B.emit({ { "bench", "fuse" }, { "net", "fmnist_cnn" }, { "batch", batch }, { "threads", cnn.get_num_threads() },
           { "unfused_images_per_s", ua }, { "fused_images_per_s", fb }, { "speedup", fb / ua },
           { "max_abs_diff", diff } })
end
