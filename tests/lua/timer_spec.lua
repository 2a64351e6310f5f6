-- timer_spec.lua -- cnn.timer on the CPU (core/timer.c through lua/cuda.c),
-- and the timing of net:profile and cnn.timeit built on it.
--
-- References are the test's own cnn.clock() readings taken around each
-- mark (a CPU timer reads the same monotonic clock), and a layer that
-- busy-waits a known time.  The CUDA side runs on the fake device in
-- tests/lua/fake_timing_spec.lua.
require("inspect")
local gc = require("timeit") -- gc.timeit (stdlib/timeit.lua)
package.path = "./?.lua;" .. package.path
local H = require("helpers")

local spin, Spin = H.spin, H.SpinLayer

describe("cnn.timer (cpu)", function()
  it("measures between marks within the test's own clock readings", function()
    local t <close> = cnn.timer()
    assert.equal("cpu", t:device())
    local r0 = cnn.clock()
    local a = t:mark()
    local r1 = cnn.clock()
    spin(0.01)
    local r2 = cnn.clock()
    local b = t:mark()
    local r3 = cnn.clock()
    assert.equal(1, a)
    assert.equal(2, b)
    assert.equal(2, #t)
    assert.equal(2, t:count())
    local s = t:elapsed(a, b)
    assert.is_true(s >= r2 - r1 and s <= r3 - r0, tostring(s))
    assert.equal(s, t:elapsed(a)) -- default: to the last mark
    assert.equal(-s, t:elapsed(b, a))
    local v = t:times()
    assert.same({ 0, s }, v)
  end)

  it("accepts a device name or a tensor, and resets", function()
    local t = cnn.timer(cnn.zeros(2))
    assert.equal("cpu", t:device())
    t = cnn.timer("cpu")
    for i = 1, 300 do assert.equal(i, t:mark()) end
    local v = t:times()
    for i = 2, 300 do assert.is_true(v[i] >= v[i - 1]) end
    t:reset()
    assert.equal(0, #t)
    assert.equal(1, t:mark())
    assert.truthy(tostring(t):find("cnn.Timer(cpu, 1 mark)", 1, true))
  end)

  it("names the timer and the mark in errors", function()
    local t = cnn.timer()
    local ok, err = pcall(t.elapsed, t, 1)
    assert.is_false(ok)
    assert.truthy(err:find("timer: mark 1 does not exist (no marks recorded)", 1, true))
    t:mark()
    ok, err = pcall(t.elapsed, t, 1, 3)
    assert.truthy(err:find("timer: mark 3 does not exist (marks 1..1)", 1, true))
    ok, err = pcall(cnn.timer, "gpu")
    assert.truthy(err:find("timer: unknown device 'gpu'", 1, true))
    if not cnn.cuda.is_available() then
      ok, err = pcall(cnn.timer, "cuda")
      assert.truthy(err:find("timer: cuda is not available", 1, true))
    end
  end)

  it("closes once, by close(), __close or the collector", function()
    local t = cnn.timer()
    t:mark()
    t:close()
    t:close() -- idempotent
    local ok, err = pcall(t.mark, t)
    assert.is_false(ok)
    assert.truthy(err:find("timer: the timer is closed", 1, true))
    assert.equal("cnn.Timer (closed)", tostring(t))
    local kept
    do
      local u <close> = cnn.timer()
      u:mark()
      kept = u
    end
    assert.equal("cnn.Timer (closed)", tostring(kept))
    for _ = 1, 100 do cnn.timer():mark() end
    collectgarbage()
  end)
end)

describe("timing built on cnn.timer (cpu)", function()
  it("net:profile sees a layer's known forward time", function()
    local net = nn.Sequential(nn.Linear(8, 8), Spin(4), nn.ReLU())
    local r = net:profile(cnn.randn(2, 8), { iters = 3, warmup = 1, print = false })
    assert.equal(3, #r.rows)
    assert.equal("Spin", r.rows[2].type)
    assert.is_true(r.rows[2].fwd_ms >= 4 and r.rows[2].fwd_ms < 40, tostring(r.rows[2].fwd_ms))
    for i, row in ipairs(r.rows) do
      assert.is_true(row.fwd_ms > 0 and row.bwd_ms > 0, "layer " .. i)
    end
    assert.is_true(r.forward_ms >= 4)
  end)

  it("cnn.timeit times each run of fn", function()
    local calls = 0
    local r = gc.timeit(function() calls = calls + 1; spin(0.002) end, { n = 5, device = "cpu" })
    assert.equal(5, r.n)
    assert.equal(6, calls) -- one warm-up
    assert.equal(5, #r.times)
    for _, s in ipairs(r.times) do assert.is_true(s >= 0.002 and s < 0.05, tostring(s)) end
    assert.is_true(r.min <= r.median and r.median <= r.max)
    -- more runs than one chunk of marks (256 runs)
    r = gc.timeit(function() end, 600)
    assert.equal(600, #r.times)
    for _, s in ipairs(r.times) do assert.is_true(s >= 0) end
    local ok, err = pcall(gc.timeit, function() end, { n = 2, bogus = 1 })
    assert.truthy(err:find("timeit: unknown option 'bogus'", 1, true))
    ok, err = pcall(gc.timeit, function() end, { n = 2, device = "nowhere" })
    assert.truthy(err:find("timeit: timer: unknown device 'nowhere'", 1, true))
  end)
end)
