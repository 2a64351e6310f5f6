-- sampler.lua -- data.DistributedSampler and DataLoader{distributed = true}
-- on 2 ranks: per epoch the ranks' samples are disjoint and together cover
-- the dataset exactly once (divisible size), or once plus the padding;
-- every rank draws the same order, a new one after set_epoch, the same one
-- without it; the Lua-batched and Subset paths shard alike.
local H = dofile(arg[0]:match("^(.*)/[^/]*$") .. "/helpers.lua")
local rank, world = dist.init()
H.check(world == 2, "run under mpirun -np 2")

-- a dataset whose sample i carries its own index i as x and as label
local function id_dataset(n)
  local x = cnn.arange(1, n):view(n, 1)
  return data.TensorDataset(x, cnn.arange(1, n):long())
end

-- the sample ids this rank's loader hands out in one epoch, in order
local function epoch_ids(loader)
  local ids = {}
  for _, y in loader do
    for _, v in ipairs(y:totable()) do ids[#ids + 1] = v end
  end
  return ids
end

-- every rank's ids (all the same length), gathered: rows are ranks
local function gather(ids)
  local g = dist.all_gather(cnn.tensor(ids, "int64"))
  return g:totable()
end

-- counts[i] = how often sample i was seen by any rank
local function counts(rows, n)
  local c = {}
  for i = 1, n do c[i] = 0 end
  for _, row in ipairs(rows) do
    for _, i in ipairs(row) do
      H.check(i >= 1 and i <= n, "sample %d out of range", i)
      c[i] = c[i] + 1
    end
  end
  return c
end

local function same(a, b)
  if #a ~= #b then return false end
  for k = 1, #a do if a[k] ~= b[k] then return false end end
  return true
end

-- divisible: exactly once per epoch; new order per set_epoch
local n = 20
local loader = data.DataLoader(id_dataset(n), { batch_size = 3, shuffle = true, distributed = true })
H.check(#loader == 4, "#loader %d (10 samples per rank in batches of 3)", #loader)
local previous
for epoch = 0, 2 do
  loader:set_epoch(epoch)
  local ids = epoch_ids(loader)
  H.check(#ids == n // world, "epoch %d: %d samples on this rank", epoch, #ids)
  local c = counts(gather(ids), n)
  for i = 1, n do H.check(c[i] == 1, "epoch %d: sample %d seen %d times", epoch, i, c[i]) end
  if previous then H.check(not same(ids, previous), "epoch %d repeats the previous order", epoch) end
  previous = ids
end
-- no set_epoch: the same order again (PyTorch's behaviour)
H.check(same(epoch_ids(loader), previous), "without set_epoch the order changed")

-- every rank computes the same global order from seed and epoch
local s = data.DistributedSampler(n, { seed = 7 })
s:set_epoch(3)
local rows = gather(s:global_order())
H.check(same(rows[1], rows[2]), "ranks disagree on the global order")
local other = data.DistributedSampler(n, { seed = 8 })
other:set_epoch(3)
H.check(not same(other:global_order(), rows[1]), "the seed does not change the order")

-- not divisible: 11 samples -> 6 per rank, every sample once plus one repeat
local odd = data.DistributedSampler(11, { shuffle = false })
H.check(#odd == 6, "#sampler %d", #odd)
local c = counts(gather(odd:indices()), 11)
local extra = 0
for i = 1, 11 do
  H.check(c[i] >= 1, "sample %d not covered", i)
  extra = extra + c[i] - 1
end
H.check(extra == 1, "%d padded samples (expected 1)", extra)
-- drop_last: 5 each, disjoint
local cut = data.DistributedSampler(11, { drop_last = true })
c = counts(gather(cut:indices()), 11)
local seen = 0
for i = 1, 11 do
  H.check(c[i] <= 1, "sample %d twice", i)
  seen = seen + c[i]
end
H.check(seen == 10, "drop_last covers %d samples", seen)

-- three replicas computed in one process: exactly once over all of them
local all = {}
for r = 0, 2 do all[#all + 1] = data.DistributedSampler(12, { num_replicas = 3, rank = r }):indices() end
c = counts(all, 12)
for i = 1, 12 do H.check(c[i] == 1, "3 replicas: sample %d seen %d times", i, c[i]) end

-- the Lua-batched path (a dataset without tensors) and a Subset (index map)
local Plain = data.Dataset:extend("Plain")
function Plain:len() return 8 end
function Plain:get(i) return cnn.tensor({ i }), i end
local lua_loader = data.DataLoader(Plain(), { batch_size = 2, shuffle = true, distributed = true })
c = counts(gather(epoch_ids(lua_loader)), 8)
for i = 1, 8 do H.check(c[i] == 1, "Lua path: sample %d seen %d times", i, c[i]) end
local sub = data.Subset(id_dataset(30), { 2, 4, 6, 8, 10, 12 })
local ids = epoch_ids(data.DataLoader(sub, { batch_size = 4, distributed = true }))
c = counts(gather(ids), 12)
for i = 1, 12 do H.check(c[i] == (i % 2 == 0 and 1 or 0), "Subset: sample %d seen %d times", i, c[i]) end

-- option errors
H.expect_error("sampler + shuffle", function()
  data.DataLoader(id_dataset(4), { sampler = s, shuffle = true })
end, { "sampler is exclusive" })
H.expect_error("seed alone", function() data.DataLoader(id_dataset(4), { seed = 1 }) end,
  { "seed applies to distributed" })
H.expect_error("bad rank", function() data.DistributedSampler(4, { rank = 2 }) end,
  { "rank 2 out of range" })
H.expect_error("unknown option", function() data.DistributedSampler(4, { epochs = 2 }) end,
  { "unknown option 'epochs'" })
if rank == 0 then print("sampler: ok") end
