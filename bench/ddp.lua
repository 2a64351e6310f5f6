-- bench/ddp.lua -- data-parallel figures, one JSON line each:
--   train     images/s of the example network (bench/common.lua), global
--             batch 64: 1 process x 2 threads against 2 processes x 1 thread
--             (DistributedDataParallel, 32 per rank)
--   allreduce all-reduce time and bus bandwidth (2(N-1)/N x bytes / s, the
--             ring's traffic per rank) against message size, 2 ranks
--   overlap   the fraction of the gradient all-reduce hidden behind
--             backward: 1 - (t_ddp_backward - t_backward) / t_allreduce
--
--   cnnsh bench/ddp.lua [--quick]      -- the driver: times 1 x 2 itself, then
--                                         starts 2 ranks with cnnsh --nproc 2
-- The ranks run `bench/ddp.lua --worker [--quick]`.  Needs Open MPI.
-- --quick: few repetitions, small messages (a smoke run, no usable figures).
local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")
local quick, worker = false, false
for _, a in ipairs(arg) do
  if a == "--quick" then quick = true
  elseif a == "--worker" then worker = true
  else error("usage: cnnsh bench/ddp.lua [--quick]  (unknown argument '" .. a .. "')", 0) end
end
local STEPS = quick and 2 or 20
local GLOBAL = 64

local function batch(n)
  return cnn.randn(n, 1, 28, 28), cnn.randint(1, 10, { n })
end

-- median seconds of one training step of `model` on (x, y)
local function step_time(model, opt, x, y, sync)
  local times = {}
  for s = 1, STEPS + 2 do
    if sync then dist.barrier() end
    local t0 = cnn.clock()
    opt:zero_grad()
    F.cross_entropy(model(x), y):backward()
    opt:step()
    if s > 2 then times[#times + 1] = cnn.clock() - t0 end
  end
  return B.median(times)
end

-- ---- the ranks -----------------------------------------------------------------------

local function train_figure(world)
  cnn.manual_seed(1)
  local net = B.fmnist_cnn()
  local model = nn.DistributedDataParallel(net)
  local x, y = batch(GLOBAL // world)
  local t = step_time(model, optim.SGD(net:parameters(), { lr = 0.01 }), x, y, true)
  return net, model, x, y, t
end

local function allreduce_figures(world)
  local sizes = quick and { 4096, 65536 } or { 4096, 65536, 1 << 20, 4 << 20, 16 << 20, 64 << 20 }
  for _, bytes in ipairs(sizes) do
    local t, times = cnn.zeros(bytes // 4), {}
    for r = 1, (quick and 2 or 12) do
      dist.barrier()
      local t0 = cnn.clock()
      dist.all_reduce(t)
      if r > 2 or quick then times[#times + 1] = cnn.clock() - t0 end
    end
    local s = B.median(times)
    if dist.is_main() then
      B.emit{ { "bench", "allreduce" }, { "ranks", world }, { "bytes", bytes }, { "ms", 1e3 * s },
              { "bus_GBps", 2 * (world - 1) / world * bytes / s / 1e9 } }
    end
  end
end

-- backward with synchronisation against backward alone and the all-reduce alone
local function overlap_figure(net, model, x, y)
  local function backward_time(sync)
    local times = {}
    for s = 1, STEPS + 2 do
      dist.barrier()
      local t0 = cnn.clock()
      local function run() F.cross_entropy(model(x), y):backward() end
      if sync then run() else model:no_sync(run) end
      if s > 2 then times[#times + 1] = cnn.clock() - t0 end
      net:zero_grad()
    end
    return B.median(times)
  end
  local with, without = backward_time(true), backward_time(false)
  local grads, times = {}, {}
  for _, p in ipairs(net:parameters()) do grads[#grads + 1] = cnn.zeros(p.shape) end
  for s = 1, STEPS + 2 do
    dist.barrier()
    local t0 = cnn.clock()
    for _, g in ipairs(grads) do dist.all_reduce(g, "mean") end
    if s > 2 then times[#times + 1] = cnn.clock() - t0 end
  end
  local comm = B.median(times)
  local hidden = math.max(0, math.min(1, 1 - (with - without) / comm))
  return with, without, comm, hidden
end

local function run_worker()
  local rank, world = dist.init()
  cnn.set_num_threads(1)
  local net, model, x, y, t = train_figure(world)
  if rank == 0 then
    B.emit{ { "bench", "train" }, { "processes", world }, { "threads", 1 },
            { "images_per_s", GLOBAL / t }, { "step_ms", 1e3 * t } }
  end
  allreduce_figures(world)
  local with, without, comm, hidden = overlap_figure(net, model, x, y)
  if rank == 0 then
    B.emit{ { "bench", "overlap" }, { "processes", world }, { "backward_sync_ms", 1e3 * with },
            { "backward_ms", 1e3 * without }, { "allreduce_ms", 1e3 * comm }, { "hidden", hidden } }
  end
end

-- ---- the driver ------------------------------------------------------------------------

local function run_driver()
  cnn.set_num_threads(2)
  cnn.manual_seed(1)
  local net = B.fmnist_cnn()
  local x, y = batch(GLOBAL)
  local t = step_time(net, optim.SGD(net:parameters(), { lr = 0.01 }), x, y, false)
  B.emit{ { "bench", "train" }, { "processes", 1 }, { "threads", 2 },
          { "images_per_s", GLOBAL / t }, { "step_ms", 1e3 * t } }
  local first = -1 -- the interpreter: arg's most negative index
  while arg[first - 1] do first = first - 1 end
  local exe = arg[first] or "cnnsh"
  local cmd = string.format("%q --nproc 2 %q --worker%s 2>&1", exe, arg[0], quick and " --quick" or "")
  local p = assert(io.popen(cmd))
  for line in p:lines() do print(line) end
  local ok = p:close()
  if not ok then error("bench/ddp.lua: the 2-rank run failed", 0) end
end

if worker then run_worker() else run_driver() end
