-- ddp.lua -- nn.DistributedDataParallel on 2 ranks against one process:
-- every rank also trains a plain copy of the model on the whole batch of
-- 64 (no dist involved), while the DDP replica sees only its half (32);
-- after 20 steps of SGD (momentum) and of Adam the parameters agree within
-- 1e-5, and are bitwise equal across ranks.  Also: parameters broadcast
-- from rank 0 at wrap, buckets started during backward, no_sync
-- accumulation, batch-norm buffers broadcast from rank 0, and
-- nn.SyncBatchNorm on 2 x 32 against BatchNorm2d on 64.
local H = dofile(arg[0]:match("^(.*)/[^/]*$") .. "/helpers.lua")
local rank, world = dist.init()
H.check(world == 2, "run under mpirun -np 2")
local HALF = 32

local function make_net(bn)
  return nn.Sequential(nn.Conv2d(1, 4, 3, { padding = 1 }), bn and nn.BatchNorm2d(4) or nn.Identity(),
    nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 16), nn.ReLU(), nn.Linear(16, 5))
end

-- the same data on every rank: 20 batches of 64
cnn.manual_seed(42)
local X, Y = cnn.randn(20, 64, 1, 8, 8), cnn.randint(1, 5, { 20, 64 })
local function mine(t, s) return t[s]:narrow(1, rank * HALF + 1, HALF) end

-- a reference net, and a replica that starts from other values on rank 1
local function pair(bn)
  cnn.manual_seed(7)
  local ref = make_net(bn)
  cnn.manual_seed(100 + rank)
  local net = make_net(bn)
  if rank == 0 then net:load_state_dict(ref:state_dict()) end
  return ref, net
end

local function max_diff(a, b)
  local worst = 0
  local pa, pb = a:parameters(), b:parameters()
  for i = 1, #pa do worst = math.max(worst, (pa[i] - pb[i]):abs():max():item()) end
  return worst
end

-- every parameter of net equal on all ranks (bitwise)
local function same_on_ranks(what, net)
  for i, p in ipairs(net:parameters()) do
    local g = dist.all_gather(p:detach():contiguous():view(-1))
    H.check((g[1] - g[2]):abs():max():item() == 0, "%s: parameter %d differs between ranks", what, i)
  end
end

local function train(what, make_opt, opts, bn)
  local ref, net = pair(bn)
  if bn == "sync" then net = nn.SyncBatchNorm.convert_sync_batchnorm(net) end
  local model = nn.DistributedDataParallel(net, opts)
  H.check(max_diff(ref, net) == 0, "%s: parameters not broadcast from rank 0 at wrap", what)
  local opt_ref, opt = make_opt(ref:parameters()), make_opt(net:parameters())
  for s = 1, 20 do
    opt_ref:zero_grad()
    F.cross_entropy(ref(X[s]), Y[s]):backward()
    opt_ref:step()
    opt:zero_grad()
    F.cross_entropy(model(mine(X, s)), mine(Y, s)):backward()
    opt:step()
  end
  local d = max_diff(ref, net)
  H.check(d <= 1e-5, "%s: parameters differ from one process by %g", what, d)
  same_on_ranks(what, net)
  return model, ref, net, d
end

local function sgd(p) return optim.SGD(p, { lr = 0.05, momentum = 0.9 }) end
local function adam(p) return optim.Adam(p, { lr = 1e-3 }) end

local model = train("SGD, 1 KB buckets", sgd, { bucket_cap_mb = 0.001 })
local st = model:sync_stats()
H.check(st.rounds == 20 and st.buckets > 2, "rounds %d, buckets %d", st.rounds, st.buckets)
H.check(st.buckets_started == 20 * st.buckets, "started %d buckets", st.buckets_started)
H.check(st.started_in_backward > 0, "no bucket started while backward was running")
train("Adam, default buckets", adam, nil)
local _, _, _, d_sync = train("SGD, SyncBatchNorm vs BatchNorm2d on 64", sgd, nil, "sync")

-- no_sync: two micro-batches of 16 per rank accumulate into one step equal
-- to one process's step on 64
do
  local ref, net = pair(false)
  local model2 = nn.DistributedDataParallel(net)
  local opt_ref, opt = sgd(ref:parameters()), sgd(net:parameters())
  F.cross_entropy(ref(X[1]), Y[1]):backward()
  opt_ref:step()
  local x, y = mine(X, 1), mine(Y, 1)
  local rounds = model2:sync_stats().rounds
  model2:no_sync(function()
    (F.cross_entropy(model2(x:narrow(1, 1, 16)), y:narrow(1, 1, 16)) * 0.5):backward()
  end)
  H.check(model2:sync_stats().rounds == rounds, "no_sync synchronised")
  local second = F.cross_entropy(model2(x:narrow(1, 17, 16)), y:narrow(1, 17, 16)) * 0.5
  second:backward()
  opt:step()
  local d = max_diff(ref, net)
  H.check(d <= 1e-6, "no_sync accumulation differs by %g", d)
end

-- batch-norm buffers: rank 0's are broadcast at every training forward
do
  local _, net = pair(true)
  local model3 = nn.DistributedDataParallel(net)
  local bn = net[2]
  if rank == 1 then cnn.no_grad(function() bn.running_mean:fill_(99) end) end
  model3(mine(X, 1))
  H.check(bn.running_mean:abs():max():item() < 1, "rank 1 kept its own running_mean")
  local g = dist.all_gather(bn.num_batches_tracked)
  local v = g:view(-1):totable()
  H.check(#v == 2 and v[1] == v[2], "num_batches_tracked differs")
end

-- errors
H.expect_error("not a module", function() nn.DistributedDataParallel({}) end, { "expected a module" })
H.expect_error("unknown option", function() nn.DistributedDataParallel(make_net(), { find_unused = true }) end,
  { "unknown option" })
if rank == 0 then print(string.format("ddp: ok (SyncBatchNorm max diff %.3g)", d_sync)) end
