-- nn/distributed.lua -- nn.DistributedDataParallel and nn.SyncBatchNorm:
-- one model trained by several processes (dist.init first; see dist).
--
-- DistributedDataParallel(net) makes every rank's replica of net take the
-- same steps.  At wrap time rank 0's parameters and buffers are broadcast
-- to every rank.  Gradients are averaged over the ranks in buckets: the
-- parameters, in reverse order (the order backward produces their
-- gradients), are grouped by dtype and device into buckets of about
-- bucket_cap_mb megabytes, each with one flat tensor.
--
-- How the all-reduce overlaps backward.  Core runs a leaf's gradient hooks
-- only at the end of backward (core/backward.c), so during a forward that
-- will be synchronised the wrapper hands the layers a view of each
-- parameter (p:view(shape), a graph node) instead of p itself.  The view's
-- hook fires as soon as backward has the parameter's whole gradient: it
-- copies the gradient (plus any .grad accumulated under no_sync) into its
-- bucket, and when a bucket is full -- and every bucket before it has been
-- started, so every rank starts them in the same order -- starts a
-- non-blocking all-reduce of the bucket ('mean'), and polls the started
-- ones so MPI makes progress.  At the end of backward the first leaf hook
-- starts what is left (parameters that got no gradient count as zeros),
-- waits for every bucket, and each leaf hook makes p.grad the averaged
-- value.  So after loss:backward() the gradients are synchronised, and the
-- optimizer step needs nothing more.
--
-- model:no_sync(fn) runs fn (forward and backward) without synchronising:
-- gradients accumulate locally and the next synchronised backward averages
-- the sum.  Buffers (batch-norm running statistics) are broadcast from
-- rank 0 at every training forward (broadcast_buffers = true), as PyTorch
-- does.  nn.SyncBatchNorm normalises with the statistics of the whole
-- global batch instead.
local cnn = _G.cnn
local Module = require("nn.module")
local fmt = require("fmt")
local check = require("check")
local BatchNorm2d = require("nn.normalization").BatchNorm2d
local doc = cnn.doc or {}

local function need_dist(name)
  local dist = require("dist")
  if not dist.is_initialized() then error(name .. ": call dist.init() first", 4) end
  return dist
end

-- ---- buckets -----------------------------------------------------------------------

-- Parameters in reverse order, grouped by dtype and device, cut at cap bytes.
local function make_buckets(params, cap)
  local buckets, open = {}, {}
  for i = #params, 1, -1 do
    local p = params[i]
    local key = p.dtype .. "@" .. p.device
    local b = open[key]
    local bytes = p:numel() * p:element_size()
    if b and b.bytes > 0 and b.bytes + bytes > cap then b = nil end
    if not b then
      b = { params = {}, offsets = {}, numel = 0, bytes = 0, dtype = p.dtype, device = p.device }
      buckets[#buckets + 1] = b
      open[key] = b
    end
    b.params[#b.params + 1] = p
    b.offsets[p] = b.numel
    b.numel = b.numel + p:numel()
    b.bytes = b.bytes + bytes
  end
  for i, b in ipairs(buckets) do
    b.index = i
    b.flat = cnn.zeros({ b.numel }, b.dtype):to(b.device)
  end
  return buckets
end

-- the slice of bucket b that holds p, as p's shape
local function slot(b, p)
  return b.flat:narrow(1, b.offsets[p] + 1, p:numel())
end

-- ---- DistributedDataParallel ---------------------------------------------------------

local DDP = Module:extend("DistributedDataParallel")

local OPTIONS = { "bucket_cap_mb", "broadcast_buffers" }

function DDP:init(net, opts)
  local name = "nn.DistributedDataParallel"
  opts = check.options(name, opts, OPTIONS, 4)
  if not Module.is_instance(net, Module) then error(name .. ": expected a module", 4) end
  local dist = need_dist(name)
  self.module = net
  self.bucket_cap_mb = check.number(name, "bucket_cap_mb", opts.bucket_cap_mb or 4, 4, 0)
  self.broadcast_buffers = check.boolean(name, "broadcast_buffers", opts.broadcast_buffers, 4) ~= false
  self.require_sync = true
  local params = {}
  for _, p in ipairs(net:parameters()) do
    if p.requires_grad then params[#params + 1] = p end
  end
  rawset(self, "_ddp", { dist = dist, params = params, round = nil,
                         buckets = make_buckets(params, self.bucket_cap_mb * 1024 * 1024),
                         stats = { rounds = 0, started_in_backward = 0, buckets_started = 0 } })
  local st = rawget(self, "_ddp")
  st.bucket_of = {}
  for _, b in ipairs(st.buckets) do
    for _, p in ipairs(b.params) do st.bucket_of[p] = b end
  end
  self:broadcast_state(true)
  for _, p in ipairs(params) do p:register_hook(function(g) return self:leaf_hook(p, g) end) end
end

-- rank 0's parameters (with_params) and buffers on every rank
function DDP:broadcast_state(with_params)
  local dist = rawget(self, "_ddp").dist
  cnn.no_grad(function()
    if with_params then
      for _, p in ipairs(self.module:parameters()) do dist.broadcast(p, 0) end
    end
    for _, b in ipairs(self.module:buffers()) do dist.broadcast(b, 0) end
  end)
end

-- ---- during backward ------------------------------------------------------------------

-- start every bucket that is full, in bucket order
local function start_ready(st, in_backward)
  local round = st.round
  while round.next <= #st.buckets do
    local b = st.buckets[round.next]
    if round.filled[b] ~= #b.params then break end
    round.works[b] = st.dist.all_reduce_async(b.flat, "mean")
    st.stats.buckets_started = st.stats.buckets_started + 1
    if in_backward then st.stats.started_in_backward = st.stats.started_in_backward + 1 end
    round.next = round.next + 1
  end
  for _, w in pairs(round.works) do w:is_completed() end -- progress
end

-- the view's hook: p's whole gradient for this backward is g
function DDP:grad_ready(p, g)
  local st = rawget(self, "_ddp")
  local round, b = st.round, st.bucket_of[p]
  if not round or round.seen[p] then return nil end
  round.seen[p] = true
  local s = slot(b, p)
  s:copy_(g:reshape(p:numel()))
  if p.grad ~= nil then s:add_(p.grad:reshape(p:numel())) end
  round.filled[b] = (round.filled[b] or 0) + 1
  start_ready(st, true)
  return nil
end

-- end of backward: parameters without a gradient count as zeros (plus
-- their accumulated .grad), the rest of the buckets start, all are waited for
local function finish_round(st)
  local round = st.round
  for _, b in ipairs(st.buckets) do
    for _, p in ipairs(b.params) do
      if not round.seen[p] then
        round.seen[p] = true
        local s = slot(b, p)
        if p.grad ~= nil then s:copy_(p.grad:reshape(p:numel())) else s:zero_() end
        round.filled[b] = (round.filled[b] or 0) + 1
        round.missing[#round.missing + 1] = p
      end
    end
  end
  start_ready(st, false)
  for _, b in ipairs(st.buckets) do round.works[b]:wait() end
  round.finished = true
  -- parameters no leaf hook will visit: set their averaged gradient now
  for _, p in ipairs(round.missing) do p.grad = slot(st.bucket_of[p], p):view(p.shape):clone() end
end

-- the leaf's hook (end of backward): p.grad becomes the bucket's average
function DDP:leaf_hook(p, g)
  local st = rawget(self, "_ddp")
  local round = st.round
  if not round or round.delivered[p] then return nil end
  if not round.finished then finish_round(st) end
  round.delivered[p] = true
  if p.grad ~= nil then p.grad:zero_() end -- the average already includes it
  return slot(st.bucket_of[p], p):view(p.shape)
end

-- ---- forward ------------------------------------------------------------------------------

-- every module's parameter fields replaced by views (restored by the caller)
local function swap_in_views(self, views)
  local saved = {}
  for _, m in self.module:named_modules() do
    for _, name in ipairs(rawget(m, "_params")) do
      local p = rawget(m, name)
      if p ~= nil and views[p] then
        saved[#saved + 1] = { m, name, p }
        rawset(m, name, views[p])
      end
    end
  end
  return saved
end

local function restore(saved)
  for _, s in ipairs(saved) do rawset(s[1], s[2], s[3]) end
end

-- a new synchronisation round: views whose hooks fill the buckets
function DDP:begin_round()
  local st = rawget(self, "_ddp")
  st.round = { next = 1, filled = {}, seen = {}, works = {}, delivered = {}, missing = {} }
  st.stats.rounds = st.stats.rounds + 1
  local views = {}
  for _, p in ipairs(st.params) do
    local v = p:view(p.shape)
    v:register_hook(function(g) return self:grad_ready(p, g) end)
    views[p] = v
  end
  return views
end

function DDP:forward(...)
  if self.training and self.broadcast_buffers then self:broadcast_state(false) end
  local st = rawget(self, "_ddp")
  if not (self.require_sync and cnn.is_grad_enabled()) then
    st.round = nil
    return self.module(...)
  end
  local saved = swap_in_views(self, self:begin_round())
  local r = table.pack(pcall(self.module, ...))
  restore(saved)
  if not r[1] then error(r[2], 0) end
  return table.unpack(r, 2, r.n)
end

-- no_sync(fn, ...): run fn without synchronising gradients (accumulation)
function DDP:no_sync(fn, ...)
  local was = self.require_sync
  self.require_sync = false
  local r = table.pack(pcall(fn, ...))
  self.require_sync = was
  if not r[1] then error(r[2], 0) end
  return table.unpack(r, 2, r.n)
end

-- counters: rounds, buckets started, and how many started during backward
function DDP:sync_stats()
  local s = rawget(self, "_ddp").stats
  return { rounds = s.rounds, buckets = #rawget(self, "_ddp").buckets,
           buckets_started = s.buckets_started, started_in_backward = s.started_in_backward }
end

function DDP:extra_repr()
  return string.format("buckets=%d, bucket_cap_mb=%s, world_size=%d", #rawget(self, "_ddp").buckets,
                       fmt.num(self.bucket_cap_mb + 0.0), rawget(self, "_ddp").dist.world_size())
end

-- ---- SyncBatchNorm -------------------------------------------------------------------

local SyncBatchNorm = BatchNorm2d:extend("SyncBatchNorm")
SyncBatchNorm.accepted_dims = { [2] = true, [3] = true, [4] = true }
SyncBatchNorm.accepted_text = "2D, 3D or 4D"

-- C x M: the channels of x (N x C x ...) as rows
local function channel_rows(x)
  local C = x:size(2)
  return x:transpose(1, 2):reshape(C, x:numel() // C)
end

-- per-channel [sum(x); sum(x^2)] of every rank: the value is the global sum;
-- backward sends each rank's gradient of it to every rank (an all-reduce
-- in a hook), so each x gets the gradient of every rank's loss
local function global_sums(dist, rows)
  local local_sums = cnn.cat({ rows:sum(2), (rows * rows):sum(2) }, 1):view(-1)
  local total = cnn.no_grad(function() return dist.all_reduce(local_sums:detach():clone(), "sum") end)
  local sums = local_sums + (total - local_sums:detach())
  sums:register_hook(function(g) return dist.all_reduce(g:clone(), "sum") end)
  return sums
end

function SyncBatchNorm:update_running(mean, var, count)
  if not self.track_running_stats then return end
  cnn.no_grad(function()
    self.num_batches_tracked:add_(1)
    local m = self.momentum or 1 / self.num_batches_tracked:item()
    local unbiased = var:detach() * (count / math.max(count - 1, 1))
    self.running_mean:mul_(1 - m):add_(mean:detach() * m)
    self.running_var:mul_(1 - m):add_(unbiased * m)
  end)
end

function SyncBatchNorm:forward(x)
  self:check_input(x)
  local dist = require("dist")
  local use_batch = self.training or not self.track_running_stats
  if not (use_batch and dist.is_initialized() and dist.world_size() > 1) then
    return BatchNorm2d.forward(self, x)
  end
  local C = x:size(2)
  local count = cnn.tensor({ x:numel() // C }, "float64")
  count = dist.all_reduce(count, "sum"):item()
  local sums = global_sums(dist, channel_rows(x))
  local mean = sums:narrow(1, 1, C) / count
  local var = sums:narrow(1, C + 1, C) / count - mean * mean
  if self.training then self:update_running(mean, var, count) end
  local shape = { 1, C }
  for _ = 3, x:dim() do shape[#shape + 1] = 1 end
  local y = (x - mean:view(shape)) * (var + self.eps):rsqrt():view(shape)
  if self.affine then y = y * self.weight:view(shape) + self.bias:view(shape) end
  return y
end

-- convert_sync_batchnorm(net) -> net with every BatchNorm1d/2d replaced by a
-- SyncBatchNorm holding the same parameters and buffers
function SyncBatchNorm.convert_sync_batchnorm(net)
  local nn_norm = require("nn.normalization")
  local function convert(m)
    if Module.is_instance(m, nn_norm.BatchNorm2d) or Module.is_instance(m, nn_norm.BatchNorm1d) then
      local s = SyncBatchNorm(m.num_features, { eps = m.eps, momentum = m.momentum, affine = m.affine,
        track_running_stats = m.track_running_stats, cumulative = m.momentum == nil or nil })
      for _, k in ipairs({ "weight", "bias", "running_mean", "running_var", "num_batches_tracked" }) do
        if rawget(m, k) ~= nil then rawset(s, k, rawget(m, k)) end
      end
      s.training = m.training
      return s
    end
    for _, name in ipairs(rawget(m, "_children")) do
      local c = rawget(m, name)
      if c ~= nil then rawset(m, name, convert(c)) end
    end
    return m
  end
  return convert(net)
end

doc[DDP] = [[
nn.DistributedDataParallel(net [, {bucket_cap_mb = 4, broadcast_buffers = true}]) -> model
Data-parallel training (after dist.init): rank 0's parameters and buffers are copied to
every rank; loss:backward() averages the gradients over the ranks with all-reduces that
start during backward (buckets in reverse parameter order); then opt:step() as usual.
  model = nn.DistributedDataParallel(net); out = model(x)
  model:no_sync(function() F.cross_entropy(model(x), y):backward() end)  -- accumulate
Save net:state_dict() (or model.module's) on rank 0 only: if dist.is_main() then ... end.]]
doc[SyncBatchNorm] = [[
nn.SyncBatchNorm(C [, options as nn.BatchNorm2d]) -> layer
Batch norm whose training statistics are those of the global batch (every rank's samples),
with gradients exchanged in backward.  Alone (no dist) it is BatchNorm.
nn.SyncBatchNorm.convert_sync_batchnorm(net) replaces the BatchNorm layers of net.]]

return { DistributedDataParallel = DDP, SyncBatchNorm = SyncBatchNorm }
