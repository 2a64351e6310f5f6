-- bench/train.lua -- images per second of the example network
-- (examples/fashion_mnist.lua) in training (forward + backward + Adam step)
-- and in evaluation (forward under no_grad), as JSON lines:
--
--   {"bench":"train","net":"fmnist_cnn","source":"synthetic","batch":64,"images_per_s":...}
--   {"bench":"eval", ...}
--   {"bench":"train","source":"loader", ...}   (real Fashion-MNIST through the
--                                              DataLoader, when installed)
--
--   cnnsh bench/train.lua [--steps N] [--batch N] [--eval-batch N] [--train-only] [--autocast bf16]
-- Each figure is the median over 3 timed runs of N steps after one warm-up step.
-- --train-only: the synthetic training figure alone.  --autocast bf16: that
-- figure alone, its forward and loss under cnn.autocast('bfloat16') (the
-- line gets "autocast":"bf16"); the counterparts of bench/torch_step.py's
-- flags of the same names (bench/torch_compare.py runs both).

local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local opts = { steps = 20, batch = 64, ["eval-batch"] = 1000 }
local usage = "usage: cnnsh bench/train.lua [--steps N] [--batch N] [--eval-batch N] [--train-only] [--autocast bf16]"
local autocast -- nil (float32) or "bf16"
local train_only = false
local i = 1
while arg and arg[i] do
  local k = arg[i]:match("^%-%-(.+)$")
  if k == "train-only" then
    train_only, i = true, i - 1
  elseif k == "autocast" then
    autocast = arg[i + 1] == "bf16" and "bf16" or error(usage, 0)
  else
    if not k or opts[k] == nil then error(usage, 0) end
    opts[k] = math.tointeger(tonumber(arg[i + 1])) or error("--" .. k .. " needs an integer", 0)
  end
  i = i + 2
end

cnn.manual_seed(0)
local net = B.fmnist_cnn()
local opt = optim.Adam(net:parameters(), { lr = 1e-3 })

local function loss_of(x, y) return F.cross_entropy(net(x), y) end
if autocast then
  local fp32_loss_of = loss_of
  loss_of = function(x, y) return cnn.autocast("bfloat16", function() return fp32_loss_of(x, y) end) end
end

local function train_step(x, y)
  opt:zero_grad()
  loss_of(x, y):backward()
  opt:step()
end

local function eval_step(x)
  cnn.no_grad(function() return net(x):argmax(2) end)
end

local median = B.median

-- images/s of `step` over `opts.steps` calls with batches from next_batch()
local function measure(step, next_batch)
  local x, y = next_batch()
  step(x, y) -- warm-up (oneDNN primitives, allocations)
  local rates = {}
  for run = 1, 3 do
    local n, t0 = 0, cnn.clock()
    for _ = 1, opts.steps do
      x, y = next_batch()
      step(x, y)
      n = n + x:size(1)
    end
    rates[run] = n / (cnn.clock() - t0)
  end
  return median(rates)
end

local function emit(kind, source, batch, rate)
  print(string.format('{"bench":"%s","net":"fmnist_cnn","source":"%s","batch":%d,"threads":%d,%s"images_per_s":%.1f}',
    kind, source, batch, cnn.get_num_threads(), autocast and '"autocast":"bf16","path":"' .. cnn.autocast_info() .. '",' or "",
    rate))
end

local xb, yb = cnn.randn(opts.batch, 1, 28, 28), cnn.randint(1, 10, { opts.batch })
net:train()
emit("train", "synthetic", opts.batch, measure(train_step, function() return xb, yb end))
if autocast or train_only then return end
local xe = cnn.randn(opts["eval-batch"], 1, 28, 28)
net:eval()
emit("eval", "synthetic", opts["eval-batch"], measure(eval_step, function() return xe end))

local ok, ds = pcall(data.FashionMNIST, { train = true, transform = data.transforms.Normalize(0.2860, 0.3530) })
if ok then
  local loader = data.DataLoader(ds, { batch_size = opts.batch, shuffle = true })
  local next_in_epoch
  local function next_batch()
    local x, y
    if next_in_epoch then x, y = next_in_epoch() end
    if x == nil then -- a new epoch
      next_in_epoch = loader:iter()
      x, y = next_in_epoch()
    end
    return x, y
  end
  net:train()
  emit("train", "loader", opts.batch, measure(train_step, next_batch))
end
