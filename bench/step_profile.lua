-- bench/step_profile.lua -- where the time of one training step goes, and
-- how close each part comes to what this machine can do (issue 19 point 1).
--
--   cnnsh bench/step_profile.lua [--net fmnist|resnet20|all] [--batch N] [--iters N]
--                                [--autocast bf16] [--memory-format contiguous|channels_last]
--
-- --memory-format channels_last: the batch as x:contiguous('channels_last')
-- (core/memory_format.c), so the network runs in that layout; the step's
-- JSON line says which.
-- --autocast bf16: forward and loss under cnn.autocast('bfloat16') (the
-- step of bench/bf16_step.lua), to see where the bfloat16 step's time
-- goes; the byte model and the yardsticks stay float32's.
--
-- The machine first (measured here, never looked up): the float32 FMA peak
-- of the threads (cnn.fma_peak) and the copy bandwidth (cnn.copy_bandwidth)
-- at the working-set size of each layer (two arrays of half the pass's
-- bytes, rounded up to 64 KB), so a layer whose tensors fit in the cache
-- is held to the cache's speed.  It was rounded up to a power of two, which
-- could double the copy's working set: at 64x32x28x28 the batch norm
-- backward (25.7 MB) was held to a 32 MB copy that spills out of the L3
-- (a quiet 2-thread run's figures imply 57 GB/s for it, against 167 GB/s
-- for the forward's 16 MB one).
-- Then, per network (examples/fashion_mnist.lua's net at 1x28x28, ResNet-20
-- at 3x32x32; batch 64; Adam, cross-entropy), `iters` real training steps
-- (zero_grad, forward, loss, backward, optimizer step), the medians of:
--   * each leaf layer's forward and backward pass (a BatchNorm -> ReLU pair
--     that nn.Sequential fuses counts as one, "BatchNorm2d+ReLU", whose
--     backward also reads relu's output; so does a Conv2d -> BatchNorm2d ->
--     ReLU -> MaxPool2d block that it runs as one node in training,
--     "Conv2d+BatchNorm2d+ReLU+MaxPool2d", with the convolution's FLOPs and
--     the block's input, output and parameters as its bytes: the
--     activations between stay inside the node; the model zoo's ResNet
--     blocks fuse their batch norm + ReLU pairs the same way), from marks
--     around its forward -- its class's forward wrapped for the step, not a
--     module hook, which would turn those fusions off and time other code
--     than the clean step runs -- and tensor hooks on its input and output
--     (backward: from the gradient reaching the layer's output to the next
--     gradient event, so a fan-out in a residual block is counted once),
--     with its FLOPs and the bytes the pass must move at least;
--     `bound` is "compute" when FLOPs/bytes exceeds the machine's balance
--     (peak / bandwidth) and `of_peak` the fraction of the FMA peak, else
--     "memory" and the fraction of the copy bandwidth at the pass's
--     working-set size, as if all its tensors were in cache -- the strict
--     yardstick; `of_memory` is the same bytes/s against the memory's copy
--     bandwidth (the 256 MB copy), the limit of a pass whose tensors come
--     from memory: in a step larger than the L3, a backward reads the
--     tensors its forward saved long before (batch norm's x and y), and
--     at 64x32x28x28 its backward ran at about the memory's copy rate
--     while the cache yardstick said 27 % (one thread).  A pass is at its
--     limit when of_memory nears 1 with inputs from memory, or of_peak
--     with inputs in cache.  And where it runs: `of_in_step_copy` against a
--     copy of the layer's input into a new tensor made at the same point of
--     a step (in_step_copy_gbs: in yardstick steps of their own, one set
--     copying just before the forward, one when the gradient reaches the output -- the
--     bandwidth a pass has there, with the cache as the step leaves it);
--     `copy_of_peak`: that copy's own rate against the in-cache yardstick
--     of of_peak -- how far the strict yardstick lies above what even a
--     plain copy gets at that point of the step (ResNet-20: about 0.3);
--   * the optimizer step alone, against the bandwidth at its working-set
--     size (Adam reads p, g, m, v and writes p, m, v: 28 bytes a float32
--     parameter), and of_memory as for the layers; and against a copy
--     moving the same bytes at the same point of a step (in_step_copy_ms,
--     of_in_step_copy = copy ms / optimizer ms: where Adam's arrays come
--     from the cache only in part, that copy is the bandwidth there is);
--     and run again at once, its arrays in cache, against the in-cache
--     copy (in_cache_ms, in_cache_of_bandwidth);
--   * the collector's step that pays for backward's allocations
--     (collector_ms): backward defers the collector (lua/memory.c) and the
--     first tensor handed to Lua afterwards -- inside the optimizer, when
--     it reads the first gradient -- ran it, so the optimizer was charged
--     with it (example network, one thread: Adam 0.63 ms with it; 0.25 ms
--     and 0.44 ms for the collector once apart).  The hooked step now
--     hands one gradient to Lua between backward and the optimizer and
--     times that step apart;
--   * the collector steps that the layers' own allocations ran inside their
--     forward intervals (collector_in_layers_ms, from cnn.memory()'s
--     collector_time): left out of the rows and counted in outside_ms,
--     since they land on whichever layer's allocation crosses the pace;
--   * the whole step without hooks (separate iterations, alternated with
--     the hooked ones: the figure images/s and of_fma_peak come from);
--   * what lies outside the layers and the optimizer (the loss, autograd
--     bookkeeping, allocation, Lua): measured in the hooked step as the
--     time between its start and the end of the optimizer that no layer
--     interval covers, so it is a sum of measured gaps and never negative;
--   * the hooks' own cost, hook_overhead_ms = hooked step - clean step.
--     It lands partly in the layer intervals (a backward interval ends at
--     the next gradient hook, which runs Lua) and partly in the gaps: per
--     iteration layers + optimizer + outside = the hooked step (the printed
--     medians add up only about), which exceeds step_ms by the overhead.
-- One JSON line per figure:
--   {"bench":"machine","threads":2,"fma_gflops":...,"copy_gbs_1mb":...,"copy_gbs_256mb":...}
--   {"bench":"step_layer","net":"fmnist","layer":"2","type":"BatchNorm2d","pass":"bwd","ms":...,
--    "gflop":...,"mbytes":...,"bound":"memory","of_peak":...,"of_memory":...,
--    "in_step_copy_gbs":...,"of_in_step_copy":...,"copy_of_peak":...}
--   {"bench":"step_optimizer","net":"fmnist","params":...,"ms":...,"of_bandwidth":...,"of_memory":...,
--    "in_step_copy_ms":...,"of_in_step_copy":...,"in_cache_ms":...,"in_cache_of_bandwidth":...}
--   {"bench":"step","net":"fmnist","batch":64,"step_ms":...,"hooked_step_ms":...,
--    "hook_overhead_ms":...,"layers_ms":...,"optimizer_ms":...,"collector_ms":...,"collector_in_layers_ms":...,"outside_ms":...,
--    "images_per_s":...,"gflops":...,"of_fma_peak":...}
-- Byte model (float32): forward = input + output + parameters (+ int64
-- indices for max pooling); backward = grad out + saved tensor + grad in
-- (+ parameter gradients); Flatten moves nothing (bound "view").  FLOPs: 2 per MAC
-- forward, 4 per MAC backward (input and weight gradients) for Conv2d and
-- Linear; the other layers count as memory-bound.
-- Pin the threads (OMP_NUM_THREADS) and compare runs on the same machine;
-- on a shared machine, compare only ratios taken in one run.

local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local opts = { net = "all", batch = 64, iters = 10, autocast = "off", ["memory-format"] = "contiguous" }
do
  local i = 1
  while arg and arg[i] do
    local k = arg[i]:match("^%-%-(.+)$")
    if not k or opts[k] == nil or arg[i + 1] == nil then
      error("usage: cnnsh bench/step_profile.lua [--net fmnist|resnet20|all] [--batch N] [--iters N]"
            .. " [--autocast bf16] [--memory-format contiguous|channels_last]", 0)
    end
    if k == "autocast" and arg[i + 1] ~= "bf16" then error("--autocast takes bf16", 0) end
    if k == "memory-format" and arg[i + 1] ~= "contiguous" and arg[i + 1] ~= "channels_last" then
      error("--memory-format takes contiguous or channels_last", 0)
    end
    local named = k == "net" or k == "autocast" or k == "memory-format"
    opts[k] = named and arg[i + 1] or math.tointeger(tonumber(arg[i + 1]))
      or error("--" .. k .. " needs an integer", 0)
    i = i + 2
  end
end

local median = B.median

-- the forward and the loss, under bf16 autocast when asked
local function loss_of(net, x, y)
  if opts.autocast == "bf16" then
    return cnn.autocast("bfloat16", function() return F.cross_entropy(net(x), y) end)
  end
  return F.cross_entropy(net(x), y)
end

-- ---- the machine -------------------------------------------------------------------------

local PEAK = cnn.fma_peak(0.3)
local bw_memo = {}
-- copy bandwidth (bytes/s) over two arrays of `bytes` each, rounded up to
-- 64 KB (at least 64 KB, at most 1 GB)
local function bandwidth(bytes)
  local size = math.max(1, math.ceil(bytes / 65536)) * 65536
  size = math.min(size, 1 << 30)
  if not bw_memo[size] then bw_memo[size] = cnn.copy_bandwidth(size, 0.1) end
  return bw_memo[size]
end
B.emit({ { "bench", "machine" }, { "threads", cnn.get_num_threads() }, { "fma_gflops", PEAK / 1e9 },
         { "copy_gbs_1mb", bandwidth(1 << 20) / 1e9 }, { "copy_gbs_256mb", bandwidth(1 << 28) / 1e9 } })

-- ---- what a layer must compute and move --------------------------------------------------

local is_instance = require("class").is_instance
local function class_is(m, name) return is_instance(m, nn[name]) end

local function param_elems(m)
  local n = 0
  for _, p in ipairs(m:parameters()) do n = n + p:numel() end
  return n
end

-- FLOPs and bytes of the forward and backward pass of leaf m (float32);
-- fused: "relu" (BatchNorm's forward_relu), "add_relu" (forward_add_relu:
-- relu(bn(x) + residual)) or nil.
local function layer_cost(m, xin, out, fused, block)
  local nx, ny, np = xin:numel(), out:numel(), param_elems(m)
  local macs = require("inspect").macs_of(m, out)
  -- a Linear -> ReLU (-> Dropout) block (block.count) counts as its linear;
  -- a convolution block (block.ca): the convolution's MACs at its own
  -- output size, and the block's parameters
  if block and block.ca then
    local ca = block.ca
    local kh, kw = m.kernel_size[1], m.kernel_size[2]
    local oh = (xin:size(3) + ca[3] + ca[4] - ca[7] * (kh - 1) - 1) // ca[1] + 1
    local ow = (xin:size(4) + ca[5] + ca[6] - ca[8] * (kw - 1) - 1) // ca[2] + 1
    macs = xin:size(1) * m.out_channels * oh * ow * m.in_channels * kh * kw
    np = np + param_elems(block.bn)
  end
  local matmul = class_is(m, "Conv2d") or class_is(m, "Linear")
  local c = { fwd_flop = matmul and 2 * macs or 0, bwd_flop = matmul and 4 * macs or 0 }
  c.fwd_bytes = 4 * (nx + ny + np)
  c.bwd_bytes = 4 * (ny + nx + nx + 2 * np)            -- dy, saved x, dx, w and dw
  if class_is(m, "MaxPool2d") then
    c.fwd_bytes = 4 * (nx + ny) + 8 * ny                -- + int64 indices
    c.bwd_bytes = 4 * (ny + nx) + 8 * ny                -- dy, indices, dx
  elseif class_is(m, "AdaptiveAvgPool2d") or class_is(m, "AvgPool2d") then
    c.bwd_bytes = 4 * (ny + nx)
  elseif class_is(m, "Flatten") then
    c.fwd_bytes, c.bwd_bytes = 0, 0
  end
  if fused == "relu" then c.bwd_bytes = c.bwd_bytes + 4 * ny end -- + relu's output, its mask
  if fused == "add_relu" then -- + the residual; backward: relu's output read, its gradient written
    c.fwd_bytes, c.bwd_bytes = c.fwd_bytes + 4 * ny, c.bwd_bytes + 8 * ny
  end
  return c
end

-- ---- one instrumented step ---------------------------------------------------------------

-- The Conv2d -> BatchNorm2d -> ReLU -> MaxPool2d blocks nn.Sequential
-- runs as one node (stdlib/nn/conv_block.lua's candidate), then the
-- Linear -> ReLU (-> Dropout) ones (nn/linear_block.lua):
-- {[first layer] = {ca = conv args, bn = its batch norm} or {count = 2|3}}
-- and {[each layer of a block] = true}.
local conv_block = require("nn.conv_block")
local linear_block = require("nn.linear_block")
local function fused_blocks(net)
  local blocks, in_block = {}, {}
  for _, m in ipairs(net:modules()) do
    if class_is(m, "Sequential") then
      local i = 1
      while i <= #m do
        local ca = i + 3 <= #m and conv_block.candidate(m, i)
        local count = not ca and linear_block.candidate(m, i)
        if ca or count then
          blocks[m[i]] = ca and { ca = ca, bn = m[i + 1], name = "Conv2d+BatchNorm2d+ReLU+MaxPool2d" }
            or { count = count, name = count == 3 and "Linear+ReLU+Dropout" or "Linear+ReLU" }
          count = count or 4
          for k = i, i + count - 1 do in_block[m[k]] = true end
          i = i + count
        else
          i = i + 1
        end
      end
    end
  end
  return blocks, in_block
end

-- the first parameter's gradient, handed to Lua (a push: lua/memory.c steps
-- the collector there)
local function first_grad(net)
  for _, p in ipairs(net:parameters()) do
    if p.grad then return p.grad end
  end
end

-- Seconds Lua's collector has spent for tensor memory (lua/memory.c): a
-- forward row leaves out the collector steps its allocations ran, which
-- land on whichever layer crosses the collector's pace (0.1-0.5 ms each
-- on ResNet-20); they count in outside_ms and collector_in_layers_ms.
local function collector_time() return cnn.memory().collector_time end

-- The class table that defines m's method `name` (nil if none does).
local function defining_class(m, name)
  local c = getmetatable(m)
  while c and rawget(c, name) == nil do c = rawget(c, "super") end
  return c
end

-- For the step, every `forward` (and BatchNorm's `forward_relu` and
-- `forward_add_relu`, the fused batch norm + ReLU and batch norm + residual
-- + ReLU) that a timed module runs is replaced in the class that
-- defines it by a wrapper calling pre and post around the timed module's
-- own calls (outermost only).  Module hooks would change what is timed:
-- any hook makes a layer "not plain", which turns off the fusions that
-- nn.Sequential and the model zoo's ResNet blocks make (batch norm + ReLU,
-- the blocks), so the hooked step ran other code than the clean one.  A
-- class-level wrapper keeps Module.is_plain true (m.forward and
-- cls.forward are the same wrapper).  Returns the undo functions.
local FUSED_BY = { forward_relu = "relu", forward_add_relu = "add_relu" }

local function wrap_forwards(timed, pre, post)
  local undo, wrapped = {}, {}
  for m in pairs(timed) do
    for _, name in ipairs({ "forward", "forward_relu", "forward_add_relu" }) do
      local cls = defining_class(m, name)
      if cls and not wrapped[cls] then wrapped[cls] = {} end
      if cls and not wrapped[cls][name] then
        local orig = rawget(cls, name)
        local active = {}
        wrapped[cls][name] = true
        rawset(cls, name, function(self, xin, ...)
          if not timed[self] or active[self] then return orig(self, xin, ...) end
          active[self] = true
          pre(self, xin, FUSED_BY[name])
          local r = table.pack(orig(self, xin, ...))
          post(self, xin, r[1])
          active[self] = nil
          return table.unpack(r, 1, r.n)
        end)
        undo[#undo + 1] = function() rawset(cls, name, orig) end
      end
    end
  end
  return undo
end

-- The yardstick of a memory-bound pass where it runs (yardstick steps,
-- apart from the timed ones): a copy of the layer's input into a new
-- tensor, timed just before its forward (it reads x where the layer reads
-- it and writes new memory from the same allocator, as the layer's output)
-- and again when the gradient reaches its output (x is then a tensor the
-- forward saved long before, as the backward reads it).  Its bytes, two
-- of x's, against the pass's bytes/s: of_in_step_copy.  The forward
-- copies and the backward ones are made in separate steps (`yard` "fwd"
-- or "bwd"): made in one step, the global pool's forward copy, released
-- just before, handed its block -- still in cache -- to the backward copy
-- a few layers later, which then wrote 1 MB in 15 us, while the pool's
-- backward writes its gradient into a block from the memory (30-40 us,
-- the DRAM's write rate; streaming stores did not change it).  For the
-- same reason every copy lives until the step ends (`kept`): released at
-- once, its block -- just written, in cache -- went to the next layer's
-- copy, which then wrote warm memory while the layer's output is a block
-- that left the cache (ResNet-20's layer3 batch norm forwards read
-- 0.42-0.58 of such a copy, 0.52-0.60 of a fair one).
local function copies_in_step(m, xin, block)
  return not block and cnn.is_tensor(xin) and xin:numel() > 0
    and not (class_is(m, "Conv2d") or class_is(m, "Linear") or class_is(m, "Flatten"))
end

local function timed_copy(t, kept)
  local src = t:detach()
  local c0, t0 = collector_time(), cnn.clock()
  local c = src:clone()
  local ms = (cnn.clock() - t0 - (collector_time() - c0)) * 1e3 -- without a collector step
  kept[#kept + 1] = c
  return { ms = ms, bytes = 2 * src:numel() * src:element_size() }
end

-- A training step with a mark before and after each leaf layer's forward,
-- and one each time a gradient reaches a layer's input or output.  A fused
-- batch norm + ReLU (forward_relu) is timed as one layer
-- ("BatchNorm2d+ReLU"), so is a residual block's end (forward_add_relu:
-- "BatchNorm2d+Add+ReLU"), a block as one ("Conv2d+...": its run() wrapped).
-- Returns the records (per leaf call: m, cost, f0, f1 and gout as mark
-- numbers) and the marks of the step's phases.
local function instrumented_step(net, opt, x, y, tm, yard)
  local recs, stack, handles, ph, kept = {}, {}, {}, {}, {}
  local hooked = setmetatable({}, { __mode = "k" }) -- one gradient event per tensor
  local blocks, in_block = fused_blocks(net)
  tm:reset()
  local function mark_grad() tm:mark() end
  local function pre(mod, xin, fused)
    local rec = { m = mod, f0 = tm:mark(), fused = fused, block = blocks[mod] }
    rec.c0 = collector_time()
    recs[#recs + 1] = rec
    stack[#stack + 1] = rec
    if yard and copies_in_step(mod, xin, rec.block) then
      if yard == "fwd" then rec.copy_fwd = timed_copy(xin, kept) else rec.x = xin end
    end
    if cnn.is_tensor(xin) and xin.requires_grad and not hooked[xin] then
      hooked[xin] = true
      handles[#handles + 1] = xin:register_hook(mark_grad)
    end
  end
  local function post(mod, xin, out)
    local rec = table.remove(stack)
    rec.c1 = collector_time()
    rec.f1 = tm:mark()
    if not rec.cost then rec.cost = layer_cost(mod, xin, out, rec.fused, rec.block) end
    if cnn.is_tensor(out) and out.requires_grad then
      hooked[out] = true
      handles[#handles + 1] = out:register_hook(function()
        rec.gout = tm:mark()
        if rec.x then rec.copy_bwd, rec.x = timed_copy(rec.x, kept), nil end
      end)
    end
  end
  -- a block is timed around nn.Sequential's call of its run(); where the
  -- op declines (a dtype or device it does not take), its layers run
  -- unhooked and untimed in this step (their time lands in outside_ms)
  for _, lib in ipairs({ conv_block, linear_block }) do
    local run_block = lib.run
    lib.run = function(seq, i, xin)
      if not blocks[seq[i]] then return run_block(seq, i, xin) end
      pre(seq[i], xin)
      local out, count = run_block(seq, i, xin)
      if out then
        post(seq[i], xin, out)
      else
        table.remove(stack)
        table.remove(recs)
      end
      return out, count
    end
    handles[#handles + 1] = { remove = function() lib.run = run_block end }
  end
  local timed = {}
  for _, m in ipairs(net:modules()) do
    if #m:children() == 0 and not in_block[m] then timed[m] = true end
  end
  for _, f in ipairs(wrap_forwards(timed, pre, post)) do handles[#handles + 1] = { remove = f } end
  ph.start = tm:mark()
  opt:zero_grad()
  local loss = loss_of(net, x, y)
  ph.fwd = tm:mark()
  loss:backward()
  ph.bwd = tm:mark()
  local _ = first_grad(net) -- the first push after backward: the collector's deferred step
  ph.gc = tm:mark()
  opt:step()
  ph.opt = tm:mark()
  for i = #handles, 1, -1 do handles[i]:remove() end
  for _, c in ipairs(kept) do c:release() end
  return recs, ph, tm:times()
end

-- ms of every leaf pass of one instrumented step, in call order; a
-- backward runs from its gradient event to the next one (marks are
-- numbered in time order, and ph.bwd closes the last)
local function layer_times(recs, ph, T)
  local out, collector = {}, 0
  for i, r in ipairs(recs) do
    local bwd = r.gout and T[r.gout + 1] - T[r.gout] or 0
    local c = r.c1 - r.c0 -- the collector steps its allocations ran
    collector = collector + c
    out[i] = { fwd = (T[r.f1] - T[r.f0] - c) * 1e3, bwd = bwd * 1e3 }
  end
  out.collector_ms = collector * 1e3
  return out, (T[ph.opt] - T[ph.gc]) * 1e3, (T[ph.gc] - T[ph.bwd]) * 1e3,
    (T[ph.opt] - T[ph.start]) * 1e3
end

-- ---- per network -------------------------------------------------------------------------

local function fraction(flop, bytes, ms)
  if ms <= 0 then return "none", 0 end
  if flop == 0 and bytes == 0 then return "view", 0 end -- Flatten: no pass at all
  local bw = bandwidth(bytes / 2)
  if flop > 0 and flop / bytes > PEAK / bw then return "compute", flop / (ms * 1e-3) / PEAK end
  return "memory", bytes / (ms * 1e-3) / bw, bytes / (ms * 1e-3) / bandwidth(1 << 28)
end

local FUSED_LABEL = { relu = "+ReLU", add_relu = "+Add+ReLU" }

local function emit_layer(name, r, idx, pass, ms, flop, bytes, copy_gbs)
  local bound, of_peak, of_memory = fraction(flop, bytes, ms)
  local f = { { "bench", "step_layer" }, { "net", name }, { "layer", tostring(idx) },
              { "type", r.block and r.block.name or r.m.__name .. (FUSED_LABEL[r.fused] or "") },
              { "pass", pass }, { "ms", ms }, { "gflop", flop / 1e9 }, { "mbytes", bytes / 1e6 },
              { "bound", bound }, { "of_peak", of_peak } }
  if of_memory then f[#f + 1] = { "of_memory", of_memory } end
  if bound == "memory" and copy_gbs then
    f[#f + 1] = { "in_step_copy_gbs", copy_gbs }
    f[#f + 1] = { "of_in_step_copy", bytes / (ms * 1e-3) / 1e9 / copy_gbs }
    f[#f + 1] = { "copy_of_peak", copy_gbs * 1e9 / bandwidth(bytes / 2) }
  end
  B.emit(f)
end

-- The optimizer's yardstick where it runs: Adam moves 28 bytes a
-- parameter (reads p, g, m, v; writes p, m, v), mostly from arrays last
-- touched a step before, after a backward that has filled the cache with
-- activations.  A copy_ (threads, as Adam) of 14 bytes a parameter from one
-- array to another -- the same 28 bytes moved, the arrays also last touched
-- a step before -- timed at the same point of a step: after backward and the
-- collector's step, just before opt:step.  (A copy also reads its
-- destination before writing it, which Adam's in-place updates do not; so
-- this says what the memory gives at that point, not a bound.)  And the
-- optimizer with its arrays in cache: opt:step run again at once, against
-- the in-cache copy.  Median ms of each.
local function optimizer_yardsticks(net, opt, x, y, nparam)
  local n = 7 * nparam // 2
  local src, dst, copy_ms, hot_ms = cnn.ones(n), cnn.zeros(n), {}, {}
  for it = 1, opts.iters do
    opt:zero_grad()
    loss_of(net, x, y):backward()
    local _ = first_grad(net)
    local t0 = cnn.clock()
    dst:copy_(src)
    local t1 = cnn.clock()
    opt:step()
    local t2 = cnn.clock()
    opt:step()
    copy_ms[it], hot_ms[it] = (t1 - t0) * 1e3, (cnn.clock() - t2) * 1e3
  end
  return median(copy_ms), median(hot_ms)
end

local function profile_net(name, net, x, y)
  net:train()
  if opts["memory-format"] == "channels_last" then x = x:contiguous("channels_last") end
  local opt = optim.Adam(net:parameters(), { lr = 1e-3 })
  local tm <close> = cnn.timer(x)
  local function step()
    opt:zero_grad()
    loss_of(net, x, y):backward()
    opt:step()
  end
  for _ = 1, 2 do step() end -- warm-up: oneDNN primitives, optimizer state
  local per_layer, opt_ms, gc_ms, step_ms, hooked_ms, gap_ms, recs = {}, {}, {}, {}, {}, {}, nil
  local layer_gc_ms = {}
  for it = 1, opts.iters do
    local ph, T
    recs, ph, T = instrumented_step(net, opt, x, y, tm)
    local lt, o, gc, h = layer_times(recs, ph, T)
    local inside = o + gc
    for i, t in ipairs(lt) do
      per_layer[i] = per_layer[i] or { fwd = {}, bwd = {} }
      per_layer[i].fwd[it], per_layer[i].bwd[it] = t.fwd, t.bwd
      inside = inside + t.fwd + t.bwd
    end
    opt_ms[it], gc_ms[it], hooked_ms[it], gap_ms[it] = o, gc, h, h - inside
    layer_gc_ms[it] = lt.collector_ms
    local t0 = cnn.clock()
    step()
    step_ms[it] = (cnn.clock() - t0) * 1e3
  end
  local copy_gbs = {} -- per record and pass: the in-step copy's GB/s, median
  for it = 1, opts.iters do
    for _, pass in ipairs({ "fwd", "bwd" }) do
      for i, r in ipairs((instrumented_step(net, opt, x, y, tm, pass))) do
        copy_gbs[i] = copy_gbs[i] or { fwd = {}, bwd = {} }
        local c = r["copy_" .. pass]
        if c then copy_gbs[i][pass][it] = c.bytes / (c.ms * 1e-3) / 1e9 end
      end
    end
  end
  local function copy_rate(i, pass)
    local v = copy_gbs[i] and copy_gbs[i][pass]
    return v and #v > 0 and median(v) or nil
  end
  local layers_ms, flop_total = 0, 0
  local names = {}
  for n, m in net:named_modules() do if names[m] == nil then names[m] = n end end
  for i, r in ipairs(recs) do
    local f, b = median(per_layer[i].fwd), median(per_layer[i].bwd)
    layers_ms = layers_ms + f + b
    flop_total = flop_total + r.cost.fwd_flop + r.cost.bwd_flop
    local idx = names[r.m] or i
    emit_layer(name, r, idx, "fwd", f, r.cost.fwd_flop, r.cost.fwd_bytes, copy_rate(i, "fwd"))
    if r.gout then
      emit_layer(name, r, idx, "bwd", b, r.cost.bwd_flop, r.cost.bwd_bytes, copy_rate(i, "bwd"))
    end
  end
  local nparam = 0
  for _, p in ipairs(net:parameters()) do nparam = nparam + p:numel() end
  local o, s, h = median(opt_ms), median(step_ms), median(hooked_ms)
  local c, hot = optimizer_yardsticks(net, opt, x, y, nparam)
  B.emit({ { "bench", "step_optimizer" }, { "net", name }, { "params", nparam }, { "ms", o },
           { "of_bandwidth", 28 * nparam / (o * 1e-3) / bandwidth(14 * nparam) },
           { "of_memory", 28 * nparam / (o * 1e-3) / bandwidth(1 << 28) },
           { "in_step_copy_ms", c }, { "of_in_step_copy", c / o },
           { "in_cache_ms", hot }, { "in_cache_of_bandwidth", 28 * nparam / (hot * 1e-3) / bandwidth(14 * nparam) } })
  B.emit({ { "bench", "step" }, { "net", name }, { "batch", x:size(1) }, { "threads", cnn.get_num_threads() },
           { "autocast", opts.autocast }, { "memory_format", opts["memory-format"] },
           { "step_ms", s }, { "hooked_step_ms", h }, { "hook_overhead_ms", h - s },
           { "layers_ms", layers_ms }, { "optimizer_ms", o }, { "collector_ms", median(gc_ms) },
           { "collector_in_layers_ms", median(layer_gc_ms) },
           { "outside_ms", median(gap_ms) },
           { "images_per_s", x:size(1) / (s * 1e-3) },
           { "gflops", flop_total / (s * 1e-3) / 1e9 }, { "of_fma_peak", flop_total / (s * 1e-3) / PEAK } })
end

cnn.manual_seed(0)
local N = opts.batch
if opts.net == "fmnist" or opts.net == "all" then
  profile_net("fmnist", B.fmnist_cnn(), cnn.randn(N, 1, 28, 28), cnn.randint(1, 10, { N }))
end
if opts.net == "resnet20" or opts.net == "all" then
  profile_net("resnet20", B.resnet20(10), cnn.randn(N, 3, 32, 32), cnn.randint(1, 10, { N }))
end
