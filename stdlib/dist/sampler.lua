-- dist/sampler.lua -- data.DistributedSampler: each rank's share of a
-- dataset, as PyTorch's torch.utils.data.DistributedSampler.
--
-- Every rank computes the same order of the whole dataset -- a permutation
-- drawn from its own small generator seeded with seed + epoch (never the
-- global cnn generator, whose state may differ between ranks), or 1..N
-- without shuffle -- pads it by repeating its first indices up to a
-- multiple of the number of ranks (or, with drop_last, cuts it down to
-- one), then takes every num_replicas-th index starting at its rank:
-- the shares are disjoint and together cover the dataset once (plus the
-- padding).  set_epoch(e) before each epoch gives a new order that every
-- rank agrees on; without it every epoch repeats the same order, as in
-- PyTorch.
local cnn = _G.cnn
local doc = cnn.doc or {}
local class = require("class")

local OPTIONS = { num_replicas = true, rank = true, shuffle = true, seed = true, drop_last = true }

local function check_int(name, v, lo)
  if math.type(v) ~= "integer" or v < lo then
    error(string.format("data.DistributedSampler: %s must be an integer >= %d, got %s", name, lo,
                        tostring(v)), 4)
  end
  return v
end

local function world_facts(opts)
  local dist = require("dist")
  local replicas = opts.num_replicas or dist.world_size()
  local rank = opts.rank or dist.rank()
  check_int("num_replicas", replicas, 1)
  check_int("rank", rank, 0)
  if rank >= replicas then
    error(string.format("data.DistributedSampler: rank %d out of range (num_replicas %d)", rank,
                        replicas), 3)
  end
  return replicas, rank
end

-- DistributedSampler(dataset_or_n, {num_replicas =, rank =, shuffle = true,
--                                   seed = 0, drop_last = false})
local Sampler = class.new("DistributedSampler", function(cls, ds, opts)
  opts = opts or {}
  for k in pairs(opts) do
    if not OPTIONS[k] then
      error("data.DistributedSampler: unknown option '" .. tostring(k) ..
            "' (options: num_replicas, rank, shuffle, seed, drop_last)", 2)
    end
  end
  local n = math.type(ds) == "integer" and ds or (type(ds) == "table" and #ds)
  if math.type(n) ~= "integer" or n < 0 then
    error("data.DistributedSampler: expected a dataset or a sample count", 2)
  end
  local replicas, rank = world_facts(opts)
  local self = setmetatable({ size = n, num_replicas = replicas, rank = rank,
                              shuffle = opts.shuffle ~= false, drop_last = opts.drop_last == true,
                              seed = check_int("seed", opts.seed or 0, 0), epoch = 0 }, cls)
  if self.drop_last then self.num_samples = n // replicas
  else self.num_samples = (n + replicas - 1) // replicas end
  self.total_size = self.num_samples * replicas
  return self
end)

function Sampler:set_epoch(epoch)
  self.epoch = check_int("epoch", epoch, 0)
end

function Sampler:__len() return self.num_samples end

function Sampler:__tostring()
  return string.format("DistributedSampler: %d of %d samples for rank %d of %d%s, epoch %d",
    self.num_samples, self.size, self.rank, self.num_replicas,
    self.shuffle and ", shuffled" or "", self.epoch)
end

-- splitmix64 over Lua's 64-bit integers: a generator every rank can
-- replay from a seed alone.
local function generator(seed)
  local state = seed
  return function()
    state = state + 0x9E3779B97F4A7C15
    local z = state
    z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ~ (z >> 27)) * 0x94D049BB133111EB
    return z ~ (z >> 31)
  end
end

-- a permutation of 1..n (Fisher-Yates); j from the top 53 bits
local function permutation(n, seed)
  local p, next = {}, generator(seed)
  for i = 1, n do p[i] = i end
  for i = n, 2, -1 do
    local j = math.floor(((next() >> 11) / 9007199254740992.0) * i) + 1
    p[i], p[j] = p[j], p[i]
  end
  return p
end

-- the whole dataset's order for this epoch, padded or cut to total_size
function Sampler:global_order()
  local order
  if self.shuffle then order = permutation(self.size, self.seed + self.epoch)
  else
    order = {}
    for i = 1, self.size do order[i] = i end
  end
  for k = #order + 1, self.total_size do order[k] = order[(k - 1) % self.size + 1] end
  for k = #order, self.total_size + 1, -1 do order[k] = nil end
  return order
end

-- indices() -> this rank's dataset positions for the current epoch (1-based)
function Sampler:indices()
  local order, mine = self:global_order(), {}
  for k = self.rank + 1, self.total_size, self.num_replicas do mine[#mine + 1] = order[k] end
  return mine
end

doc[Sampler] = [[
data.DistributedSampler(ds, {num_replicas = world, rank = rank, shuffle = true, seed = 0,
                             drop_last = false}) -> sampler
This rank's share of ds: disjoint between ranks, together the whole dataset (padded by
repeating samples to a multiple of num_replicas, or cut with drop_last).  Every rank draws
the same order from seed + epoch: call sampler:set_epoch(e) at the start of each epoch.
sampler:indices() -> 1-based positions; #sampler.  data.DataLoader(ds, {distributed = true})
builds one.]]

return Sampler
