-- bench/resnet.lua -- ResNet-18 (models.resnet18, 1000 classes) images per
-- second in training (forward + backward + SGD step with momentum) and
-- inference (eval mode, forward under no_grad), at 32x32 and 224x224, batch
-- 16 (issue 13 point 13), on synthetic data, as JSON lines:
--
--   {"bench":"resnet18","mode":"train","size":224,"batch":16,"threads":2,"device":"cpu","images_per_s":...}
--   {"bench":"resnet18","mode":"eval", ...}
--
--   cnnsh bench/resnet.lua [--steps N] [--batch N] [--sizes 32,224] [--device cpu|cuda] [--quick]
-- Each figure is the median over 3 timed runs of N steps (default 5) after
-- one warm-up step.  --quick (the smoke test) runs 1 step at batch 2 and
-- size 32 only: it checks that the script works, its figures mean nothing.
-- PyTorch's figures for the same shapes: bench/torch_step.py --net resnet18,
-- and the ratios bench/torch_compare.py, both run by hand; never in the tests.
local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local opts = { steps = 5, batch = 16, sizes = "32,224", device = "cpu" }
local usage = "usage: cnnsh bench/resnet.lua [--steps N] [--batch N] [--sizes 32,224] [--device cpu|cuda] [--quick]"
local i = 1
while arg and arg[i] do
  local k = arg[i]:match("^%-%-(.+)$")
  if k == "quick" then
    opts.steps, opts.batch, opts.sizes = 1, 2, "32"
    i = i + 1
  elseif k and opts[k] ~= nil and arg[i + 1] then
    local v = arg[i + 1]
    if k == "steps" or k == "batch" then v = math.tointeger(tonumber(v)) or error("--" .. k .. " needs an integer", 0) end
    opts[k] = v
    i = i + 2
  else
    error(usage, 0)
  end
end
local sizes = {}
for s in opts.sizes:gmatch("[^,]+") do sizes[#sizes + 1] = math.tointeger(tonumber(s)) or error(usage, 0) end

cnn.manual_seed(0)
local net = models.resnet18():to(opts.device)
local opt = optim.SGD(net:parameters(), { lr = 0.01, momentum = 0.9 })

local function sync()
  if opts.device ~= "cpu" then cnn.cuda.synchronize() end
end

local function train_step(x, y)
  opt:zero_grad()
  F.cross_entropy(net(x), y):backward()
  opt:step()
end

local function eval_step(x)
  cnn.no_grad(function() return net(x) end)
end

-- images/s of `step` over opts.steps calls on the same batch
local function measure(step, x, y)
  step(x, y) -- warm-up (oneDNN primitives, cuDNN algorithms, allocations)
  sync()
  local rates = {}
  for run = 1, 3 do
    local t0 = cnn.clock()
    for _ = 1, opts.steps do step(x, y) end
    sync()
    rates[run] = opts.steps * x:size(1) / (cnn.clock() - t0)
  end
  return B.median(rates)
end

for _, size in ipairs(sizes) do
  local x = cnn.randn(opts.batch, 3, size, size):to(opts.device)
  local y = cnn.randint(1, 1000, { opts.batch }):to(opts.device)
  for _, mode in ipairs({ "train", "eval" }) do
    if mode == "train" then net:train() else net:eval() end
    local rate = measure(mode == "train" and train_step or eval_step, x, y)
    B.emit({ { "bench", "resnet18" }, { "mode", mode }, { "size", size }, { "batch", opts.batch },
             { "threads", cnn.get_num_threads() }, { "device", opts.device }, { "images_per_s", rate } })
  end
end
