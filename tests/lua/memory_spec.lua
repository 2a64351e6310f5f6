-- memory_spec.lua -- native tensor memory under Lua's collector: a loop
-- that allocates a 4 MB tensor 10,000 times keeps cnn.memory().live
-- bounded and the process RSS flat; <close> and release() free at once;
-- an autograd loop stays flat too.
package.path = "./?.lua;" .. package.path
local H = require("helpers")

local MB = 1048576

describe("cnn.memory", function()
  it("reports live, peak and count in bytes", function()
    local m0 = cnn.memory()
    assert.equal("number", type(m0.live))
    assert.is_true(m0.peak >= m0.live)
    local t = cnn.zeros(1000, "float64")
    local m1 = cnn.memory()
    assert.is_true(m1.live - m0.live >= 8000)
    assert.is_true(m1.count >= m0.count + 1)
    cnn.reset_peak_memory()
    assert.equal(cnn.memory().live, cnn.memory().peak)
    t:release()
    assert.is_true(cnn.memory().live <= m1.live - 8000)
  end)

  it("counts the time Lua's collector spends for tensor memory", function()
    local t0 = cnn.memory().collector_time
    assert.equal("number", type(t0))
    assert.is_true(t0 >= 0)
    for _ = 1, 500 do local _ = cnn.empty(256 * 1024) end -- 500 MiB of garbage: cycles
    local t1 = cnn.memory().collector_time
    assert.is_true(t1 > t0, ("collector_time %g -> %g"):format(t0, t1))
    assert.is_true(t1 - t0 < 60)
    collectgarbage()
    cnn.empty_cache() -- no garbage left for the next test's cache figures
  end)

  it("keeps freed large blocks in a cache that empty_cache gives back", function()
    cnn.empty_cache()
    assert.equal(0, cnn.memory().cached)
    local big = cnn.empty(4 * 1024 * 1024)          -- 16 MiB: cached when freed
    big:release()
    if H.sanitized() then -- the sanitizer build frees at once (core/host_cache.c)
      assert.equal(0, cnn.memory().cached)
      assert.equal(0, cnn.empty_cache())
      return
    end
    assert.equal(16 * 1024 * 1024, cnn.memory().cached)
    local again = cnn.empty(4 * 1024 * 1024)        -- the same size: reused
    assert.equal(0, cnn.memory().cached)
    again:release()
    assert.equal(16 * 1024 * 1024, cnn.empty_cache())
    assert.equal(0, cnn.memory().cached)
  end)

  it("holds the 200 large blocks a deep network's step frees, and reuses them", function()
    if H.sanitized() then return end -- no cache under the sanitizers
    cnn.empty_cache()
    local blocks = {}
    for i = 1, 200 do blocks[i] = cnn.empty(256 * 1024) end -- 1 MiB each
    for i = 1, 200 do blocks[i]:release() end
    assert.equal(200 * MB, cnn.memory().cached) -- 64 slots kept only 64 MiB
    for i = 1, 200 do blocks[i] = cnn.empty(256 * 1024) end
    assert.equal(0, cnn.memory().cached)
    for i = 1, 200 do blocks[i]:release() end
    assert.equal(200 * MB, cnn.empty_cache())
  end)
end)

describe("the collector hears about native memory", function()
  it("10,000 allocations of a 4 MB tensor keep live memory and RSS flat", function()
    collectgarbage()
    collectgarbage()
    local live0, rss0 = cnn.memory().live, H.rss_mb()
    local max_live, max_rss = 0, 0
    -- under ASan the quarantine keeps ~256 MB of freed blocks resident, and
    -- every block is poisoned: fewer rounds, and RSS is bounded by that
    local asan = H.sanitized()
    local rss_limit = asan and 64 + 320 or 64
    for i = 1, asan and 2000 or 10000 do
      local t = cnn.zeros(1024, 1024) -- 4 MiB, touched
      if i % 100 == 0 then
        max_live = math.max(max_live, cnn.memory().live - live0)
        max_rss = math.max(max_rss, H.rss_mb() - rss0)
      end
      t = nil -- luacheck: ignore
    end
    assert.is_true(max_live < 64 * MB, ("live grew by %.1f MB"):format(max_live / MB))
    assert.is_true(max_rss < rss_limit, ("RSS grew by %.1f MB"):format(max_rss))
  end)

  it("small tensors in a tight loop stay bounded too", function()
    collectgarbage()
    local live0 = cnn.memory().live
    local x, y = cnn.ones(16), cnn.ones(16)
    local max_count = 0
    for i = 1, 200000 do
      local z = x + y -- luacheck: ignore
      if i % 1000 == 0 then max_count = math.max(max_count, cnn.memory().count) end
    end
    assert.is_true(cnn.memory().live - live0 < 16 * MB)
    assert.is_true(max_count < 100000, "live storages: " .. max_count)
  end)

  it("an autograd training-like loop stays flat", function()
    collectgarbage()
    local w = cnn.randn(128, 128):requires_grad_()
    local x = cnn.randn(32, 128)
    local live0 = cnn.memory().live
    local max_live = 0
    for i = 1, 1000 do
      local loss = x:matmul(w):relu():square():mean()
      loss:backward()
      w.grad = nil
      if i % 50 == 0 then max_live = math.max(max_live, cnn.memory().live - live0) end
    end
    assert.is_true(max_live < 64 * MB, ("live grew by %.1f MB"):format(max_live / MB))
  end)
end)

describe("immediate release", function()
  it("<close> frees at the end of the scope", function()
    collectgarbage()
    local before = cnn.memory().live
    do
      local big <close> = cnn.zeros(2048, 2048) -- 16 MiB
      assert.is_true(cnn.memory().live - before >= 16 * MB)
    end
    assert.is_true(cnn.memory().live - before < MB)
  end)

  it("release() frees now and views keep storage alive", function()
    collectgarbage()
    local before = cnn.memory().live
    local big = cnn.zeros(1024, 1024)
    local row = big[1]
    big:release()
    assert.is_true(cnn.memory().live - before >= 4 * MB, "the view still holds the storage")
    row:release()
    assert.is_true(cnn.memory().live - before < MB)
  end)
end)
