-- memory_flat_spec.lua -- memory stays flat in a steady training loop
-- (DESIGN.md, memory under a garbage collector): a small CNN (conv -> batch norm -> ReLU -> max-pool ->
-- linear) trained with Adam for 300 steps on fresh random batches of 32,
-- with no collectgarbage() in the loop.
--
-- Design.  Every step records cnn.memory().live (bytes held by live
-- tensor storages), cnn.memory().count and the process RSS
-- (/proc/self/statm).  The first steps are a warm-up (Adam creates its
-- moment tensors, the allocator and the collector settle); the maxima
-- over steps 50-150 and 250-300 are then compared.  Dead tensors wait for
-- the collector, so the count at a given step depends on where its cycle
-- is: the exact leak check is a full collection at steps 150 and 300 (what
-- is truly alive must not grow); between collections, live + uncollected
-- bytes must stay within twice the earlier maximum, and RSS within 16 MB.  A leak of even one small tensor per step (the batch
-- is 32 KB) would show in live bytes: 150 steps x 32 KB = 4.8 MB, far
-- above 5% of a few MB.  Under AddressSanitizer the quarantine keeps
-- freed blocks resident, so RSS is not a measure of leaks there and only
-- the live-bytes check runs (LeakSanitizer covers the rest).
-- A second case feeds the same network through data.DataLoader (batches
-- assembled by the C batcher on its thread) for several epochs.
package.path = "./?.lua;" .. package.path
local H = require("helpers")

local MB = 1048576

local function make_net()
  return nn.Sequential(
    nn.Conv2d(1, 8, 3, { padding = 1 }), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), -- 8x8x8
    nn.Flatten(), nn.Linear(8 * 8 * 8, 10))
end

local function statm_rss_mb() return H.rss_mb() end

-- Max of the field over records first..last.
local function max_over(rec, first, last, field)
  local m = -math.huge
  for i = first, last do m = math.max(m, rec[i][field]) end
  return m
end

-- At steps 150 and 300 a full collection also records what is truly alive
-- (the exact leak check); the other steps see live + garbage not yet
-- collected, which must stay bounded without any collectgarbage() call.
local function record(rec, step)
  local m = cnn.memory()
  rec[step] = { live = m.live, count = m.count, rss = statm_rss_mb(), lua = collectgarbage("count") }
  if step == 150 or step == 300 then
    collectgarbage()
    collectgarbage()
    local after = cnn.memory()
    rec[step].alive_bytes, rec[step].alive_count = after.live, after.count
  end
end

local function one_step(net, opt, x, y)
  opt:zero_grad()
  local out = net(x)
  local loss = F.cross_entropy(out, y)
  loss:backward()
  opt:step()
  return loss:item()
end

-- The checks shared by both cases; rec has 300 entries.
local function assert_flat(rec, what)
  local live1, live2 = max_over(rec, 50, 150, "live"), max_over(rec, 250, 300, "live")
  local cnt1, cnt2 = max_over(rec, 50, 150, "count"), max_over(rec, 250, 300, "count")
  local rss1, rss2 = max_over(rec, 50, 150, "rss"), max_over(rec, 250, 300, "rss")
  local lua1, lua2 = max_over(rec, 50, 150, "lua"), max_over(rec, 250, 300, "lua")
  local msg = ("%s: live %.2f -> %.2f MB, storages %d -> %d, RSS %.1f -> %.1f MB, Lua heap %.1f -> %.1f MB"):format(
    what, live1 / MB, live2 / MB, cnt1, cnt2, rss1, rss2, lua1 / 1024, lua2 / 1024)
  print(msg)
  assert(rec[300].alive_count <= rec[150].alive_count and rec[300].alive_bytes <= rec[150].alive_bytes,
         ("after a full collection: %d storages (%d bytes) at step 150, %d (%d) at step 300: %s"):format(
           rec[150].alive_count, rec[150].alive_bytes, rec[300].alive_count, rec[300].alive_bytes, msg))
  -- garbage waiting for the collector stays within a small multiple of one step's worth
  assert(live2 <= math.max(live1, rec[150].alive_bytes) * 2, "live tensor bytes grew: " .. msg)
  assert(cnt2 <= math.max(cnt1, rec[150].alive_count) * 2 + 8, "the number of live storages grew: " .. msg)
  assert(lua2 <= lua1 * 1.05 + 64, "the Lua heap grew: " .. msg)
  if H.sanitized() then return end
  -- (core/host_cache.c aligns blocks by hand over malloc: glibc 2.36 never
  -- reuses freed aligned_alloc chunks, which made RSS grow ~140 KB a step)
  assert(rss2 - rss1 < 16, "resident memory grew by 16 MB or more: " .. msg)
end

describe("memory stays flat while training", function()
  it("300 Adam steps of a conv-bn-relu-pool-linear net on batches of 32", function()
    cnn.manual_seed(1)
    collectgarbage()
    collectgarbage()
    local net = make_net()
    net:train()
    local opt = optim.Adam(net:parameters(), { lr = 1e-3 })
    local rec, first_loss, last_loss = {}, nil, nil
    for step = 1, 300 do
      local x = cnn.randn(32, 1, 16, 16)
      local y = cnn.randint(1, 10, { 32 })
      local l = one_step(net, opt, x, y)
      first_loss = first_loss or l
      last_loss = l
      record(rec, step)
    end
    assert(last_loss == last_loss and last_loss < 100, "training diverged: loss " .. tostring(last_loss))
    assert_flat(rec, "random batches")
  end)

  it("the same through data.DataLoader, epoch after epoch", function()
    cnn.manual_seed(2)
    collectgarbage()
    collectgarbage()
    local images = cnn.randint(0, 255, { 640, 1, 16, 16 }):byte()
    local labels = cnn.randint(1, 10, { 640 })
    local loader = data.DataLoader(data.TensorDataset(images, labels), { batch_size = 32, shuffle = true })
    assert.equal(20, #loader)
    local net = make_net()
    local opt = optim.Adam(net:parameters(), { lr = 1e-3 })
    local rec, step = {}, 0
    for _ = 1, 15 do -- 15 epochs of 20 steps
      for x, y in loader do
        step = step + 1
        one_step(net, opt, x, y)
        record(rec, step)
      end
    end
    assert.equal(300, step)
    assert_flat(rec, "DataLoader")
  end)

  it("evaluation under no_grad stays flat too", function()
    collectgarbage()
    local net = make_net()
    net:eval()
    local x = cnn.randn(32, 1, 16, 16)
    local rec = {}
    for step = 1, 300 do
      cnn.no_grad(function() return net(x):argmax(2) end)
      record(rec, step)
    end
    assert_flat(rec, "no_grad evaluation")
  end)
end)
