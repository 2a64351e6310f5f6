-- bench/bf16_step.lua -- a training step of the example network
-- (examples/fashion_mnist.lua: batch 64, Adam, cross-entropy) under
-- cnn.autocast('bfloat16') against the same step in float32, as a ratio
-- measured in one run (issue 19 point 5: goal >= 1.5x), and the layers that
-- autocast changes (the convolutions and the linear layers, forward +
-- backward) as ratios, to show where the step's difference comes from.
--
--   {"bench":"bf16_step","net":"fmnist_cnn","batch":64,"threads":2,"path":"onednn",
--    "fp32_images_per_s":...,"bf16_images_per_s":...,"speedup":...,"goal":1.5}
--   {"bench":"bf16_layer","layer":"conv_32x64_14","batch":64,"fp32_ms":...,"bf16_ms":...,"speedup":...}
--
--   cnnsh bench/bf16_step.lua [--steps N] [--rounds N]   (--quick: a smoke run)
-- "path" is cnn.autocast_info(): "onednn" (bfloat16 kernels) or "emulated"
-- (a CPU without AVX512-BF16: expect a ratio below 1).  Each figure is the
-- median over `rounds` rounds of `steps` steps; float32 and bfloat16
-- alternate within every round (order swapped each round) so drifts in the
-- machine's load hit both.
local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local steps, rounds = 10, 7
local i = 1
while arg and arg[i] do
  if arg[i] == "--quick" then steps, rounds, i = 2, 1, i + 1
  elseif arg[i] == "--steps" then steps, i = math.tointeger(tonumber(arg[i + 1])) or error("--steps needs an integer", 0), i + 2
  elseif arg[i] == "--rounds" then rounds, i = math.tointeger(tonumber(arg[i + 1])) or error("--rounds needs an integer", 0), i + 2
  else error("usage: cnnsh bench/bf16_step.lua [--steps N] [--rounds N] [--quick]", 0) end
end

local BATCH = 64
local path = cnn.autocast_info()

-- ms per call of fn, for each of two variants alternated round by round
local function alternate(fa, fb, n)
  local ta, tb = {}, {}
  local function time(f)
    local t0 = cnn.clock()
    for _ = 1, n do f() end
    return (cnn.clock() - t0) * 1000 / n
  end
  fa(); fb() -- warm-up: primitive creation, first allocations
  for r = 1, rounds do
    if r % 2 == 1 then
      ta[r], tb[r] = time(fa), time(fb)
    else
      tb[r], ta[r] = time(fb), time(fa)
    end
  end
  return B.median(ta), B.median(tb)
end

local function bf16(fn) return function() return cnn.autocast("bfloat16", fn) end end

-- ---- the training step -----------------------------------------------------------

cnn.manual_seed(0)
local x, y = cnn.randn(BATCH, 1, 28, 28), cnn.randint(1, 10, { BATCH })
local function trainer(autocast)
  local net = B.fmnist_cnn()
  local opt = optim.Adam(net:parameters(), { lr = 1e-3 })
  local loss_of = function() return F.cross_entropy(net(x), y) end
  if autocast then loss_of = bf16(loss_of) end
  return function()
    opt:zero_grad()
    loss_of():backward()
    opt:step()
  end
end
local fp32_step, bf16_step = trainer(false), trainer(true)
for _ = 1, 3 do fp32_step(); bf16_step() end
local a, b = alternate(fp32_step, bf16_step, steps)
B.emit({ { "bench", "bf16_step" }, { "net", "fmnist_cnn" }, { "batch", BATCH },
         { "threads", cnn.get_num_threads() }, { "path", path },
         { "fp32_images_per_s", BATCH * 1000 / a }, { "bf16_images_per_s", BATCH * 1000 / b },
         { "speedup", a / b }, { "goal", 1.5 } })

-- ---- the layers autocast changes, forward + backward ---------------------------------

local function layer_pass(shape, make)
  local input = cnn.randn(table.unpack(shape)):requires_grad_()
  local m = make()
  local function run()
    local out = m(input)
    out:backward(cnn.ones_like(out))
  end
  return run, bf16(run)
end

local layers = {
  { "conv_1x32_28", { BATCH, 1, 28, 28 }, function() return nn.Conv2d(1, 32, 3, { padding = 1 }) end },
  { "conv_32x64_14", { BATCH, 32, 14, 14 }, function() return nn.Conv2d(32, 64, 3, { padding = 1 }) end },
  { "linear_3136x128", { BATCH, 3136 }, function() return nn.Linear(3136, 128) end },
  { "linear_128x10", { BATCH, 128 }, function() return nn.Linear(128, 10) end },
}
for _, l in ipairs(layers) do
  local fa, fb = layer_pass(l[2], l[3])
  local ta, tb = alternate(fa, fb, steps)
  B.emit({ { "bench", "bf16_layer" }, { "layer", l[1] }, { "batch", BATCH }, { "path", path },
           { "fp32_ms", ta }, { "bf16_ms", tb }, { "speedup", ta / tb } })
end
