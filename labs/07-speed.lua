-- labs/07-speed.lua -- Lab 7: mixed precision and data-parallel training
-- (45 min).
--
-- Two ways to train faster, each measured here.
--
-- Mixed precision.  bfloat16 keeps float32's 8 exponent bits but only 7 of
-- its 23 fraction bits (plus the implicit 1): a relative rounding error of
-- at most 2^-8 ~ 0.4%, the same range, half the bytes.  GPUs multiply
-- bfloat16 (and float16) matrices several times faster than float32.
-- cnn.autocast('bfloat16', fn) runs the convolutions and matrix products
-- inside fn on bfloat16 operands with float32 accumulation and float32
-- results; everything else stays float32.  On this CPU cnnsh *emulates*
-- it (operands rounded to bfloat16, float32 arithmetic: the same numbers,
-- not the speed), so the numbers can be checked here and the speed
-- measured on a GPU.  float16 needs CUDA (and optim.GradScaler).
--
-- Data parallel.  N processes (ranks) each hold a copy of the model and
-- train on their own share of every batch; before each step the gradients
-- are averaged over the ranks (an all-reduce), so every copy takes the
-- same step and stays identical.  cnnsh --nproc N starts the ranks through
-- mpirun; nn.DistributedDataParallel does the averaging; a DataLoader with
-- distributed = true gives each rank its share.
--
-- How to work.  Fill in each TODO block, then run
--     cnnsh --check labs/07-speed.lua
--
-- Try this (in the shell, not at the prompt):
--   cnnsh --threads 2 labs/07-speed.lua ddp               # 1 rank, 2 threads
--   cnnsh --threads 1 --nproc 2 labs/07-speed.lua ddp     # 2 ranks, 1 thread each
-- and compare the images/s.  At the prompt:
--   > lab = dofile("labs/07-speed.lua")
--   > x = cnn.randn(4); x, x:to('bfloat16'):float()     -- rounded to 8 significant bits
--   > net = lab.small_net(); xb = cnn.randn(64, 1, 28, 28)
--   > lab.measure(net, xb)
--   > cnn.cuda.is_available()     -- on a GPU: net:to('cuda'), then time autocast('float16') too
local lab = {}
local mode = ...   -- "ddp" when run as `cnnsh labs/07-speed.lua ddp`

local function TODO(what) error("TODO: " .. what, 2) end

-- Given: the network of this lab.
function lab.small_net()
  return nn.Sequential(nn.Conv2d(1, 16, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
end

-- Exercise 1. Run net(x) under autocast in bfloat16 and return the output
-- (a float32 tensor, close to the float32 output but not identical).
function lab.autocast_forward(net, x)
  -- TODO: cnn.autocast('bfloat16', function() ... end)
  return net(x)
end

-- Exercise 2. The largest relative error of rounding x to bfloat16:
-- max over elements of |bf16(x) - x| / |x|, a Lua number, where bf16(x) is
-- x:to('bfloat16'):float().  x has no zeros.  (It is at most 2^-8.)
function lab.bfloat16_error(x)
  -- TODO: round, subtract, divide, take the max
  return 0
end

-- Exercise 3. The samples of one rank, as PyTorch's DistributedSampler
-- without shuffling: pad 1..n by repeating it from the start to a
-- multiple of world (total = ceil(n / world) * world), then rank r
-- (0-based) takes positions r + 1, r + 1 + world, r + 1 + 2 world, ...
-- Return the list of sample indices (1-based).  E.g. n = 10, world = 3:
-- padded 1..10, 1, 2; rank 1 gets {2, 5, 8, 1}.
function lab.shard(n, rank, world)
  local out = {}
  -- TODO: every world-th position starting at rank + 1, wrapped into 1..n
  for i = 1, n do out[i] = i end
  return out
end

-- Exercise 4. What the all-reduce does: grads[r] is the list of gradient
-- tensors of rank r (same shapes on every rank); return one list whose
-- k-th tensor is the mean over ranks of grads[r][k].
function lab.average_gradients(grads)
  TODO("sum grads[r][k] over r, divide by #grads")
end

-- Exercise 5. Time net(x) in float32 and under bfloat16 autocast with
-- cnn.timeit(fn, 5).median; return {fp32 = seconds, bf16 = seconds}.  On
-- this CPU bf16 is emulated, so expect it slower, not faster: the gain
-- exists only where the hardware multiplies bfloat16 (a GPU).
function lab.measure(net, x)
  local times = {}
  TODO("two cnn.timeit calls, one inside autocast")
  return times
end

-- Given: data-parallel training on 4,096 images (run by `... ddp` above).
function lab.ddp_demo()
  dist.init()
  local net = lab.small_net()
  local model = nn.DistributedDataParallel(net)
  local train = data.FashionMNIST{ train = true }
  local ds = data.Subset(train, table.move(data.randperm(#train), 1, 4096, 1, {}))
  local loader = data.DataLoader(ds, { batch_size = 64, shuffle = true, distributed = true })
  local opt = optim.SGD(net:parameters(), { lr = 0.05, momentum = 0.9 })
  local start = cnn.clock()
  for x, y in loader do
    opt:zero_grad(); F.cross_entropy(model(x), y):backward(); opt:step()
  end
  local seconds = cnn.clock() - start
  dist.print(string.format("%d rank(s): %d images in %.2f s, %.0f images/s", dist.world_size(), #ds,
    seconds, #ds / seconds))
end

if mode == "ddp" then lab.ddp_demo() end
return lab
