-- fake_timing_spec.lua -- CUDA-event timing on the fake CUDA device
-- (tests/gpu/fake_cuda.h, whose events are host CLOCK_MONOTONIC stamps):
-- cnn.timer('cuda'), net:profile of a model on 'cuda' (per-layer times from
-- events recorded in the hooks) and cnn.timeit on 'cuda'.
--
-- References: the fake's events read the clock cnn.clock() reads, so marks
-- must fall within the test's own readings around them; a layer that
-- busy-waits a known time must show at least that time.
--
-- CTest runs it from tests/gpu/CMakeLists.txt (lua_fake_timing) with
-- CNNSH_CUDA_MODULE=libcnn_fake_cuda.so and CNNSH_FAKE_CUDA_REQUIRED=1 (it
-- must run); without a module it exits 77 (skipped).  By hand:
--   cd tests/lua && CNNSH_CUDA_MODULE=../../build/tests/gpu/libcnn_fake_cuda.so \
--     ../../build/repl/cnnsh /usr/bin/busted fake_timing_spec.lua

package.path = "./?.lua;" .. package.path
local H = require("helpers")
H.need_cuda("fake_timing_spec")

require("inspect")
local gc = require("timeit") -- gc.timeit (stdlib/timeit.lua)

local spin, Spin = H.spin, H.SpinLayer

local no_hooks_left = H.no_hooks_left

describe("cnn.timer('cuda') on the fake device", function()
  it("records events whose times fall within the host's readings", function()
    local t <close> = cnn.timer("cuda")
    assert.equal("cuda:0", t:device())
    local r0 = cnn.clock()
    local a = t:mark()
    local r1 = cnn.clock()
    local x = cnn.randn(32, 32):cuda()
    local y = x:matmul(x)
    spin(0.005)
    local r2 = cnn.clock()
    local b = t:mark()
    local r3 = cnn.clock()
    local s = t:elapsed(a, b)
    -- fake events keep nanoseconds; elapsed passes through float ms: 1 us slack
    assert.is_true(s >= r2 - r1 - 1e-6 and s <= r3 - r0 + 1e-6, tostring(s))
    assert.is_true(math.abs(t:times()[2] - s) < 1e-9)
    assert.equal(2, #t)
    t:reset()
    assert.equal(0, #t)
    assert.is_true(y:cpu():numel() == 1024)
  end)

  it("takes the device of a tensor, refuses a missing ordinal", function()
    local t = cnn.timer(cnn.zeros(3):cuda())
    assert.equal("cuda:0", t:device())
    t:close()
    local ok, err = pcall(cnn.timer, "cuda:1")
    assert.is_false(ok)
    assert.truthy(err:find("timer: cuda:1 does not exist (1 CUDA device)", 1, true))
  end)
end)

describe("timing on 'cuda' (fake device)", function()
  it("net:profile gives positive per-layer times from events", function()
    cnn.manual_seed(7)
    local net = nn.Sequential(nn.Conv2d(1, 4, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(4 * 4 * 4, 5), Spin(3)):to("cuda")
    local x = cnn.randn(2, 1, 8, 8):cuda()
    local r = net:profile(x, { iters = 3, warmup = 1, print = false })
    local types = { "Conv2d", "ReLU", "MaxPool2d", "Flatten", "Linear", "Spin" }
    assert.equal(#types, #r.rows)
    for i, row in ipairs(r.rows) do
      assert.equal(types[i], row.type)
      assert.is_true(row.fwd_ms > 0, "fwd " .. i)
      assert.is_true(row.bwd_ms > 0, "bwd " .. i)
    end
    assert.is_true(r.rows[6].fwd_ms >= 3 and r.rows[6].fwd_ms < 30, tostring(r.rows[6].fwd_ms))
    assert.is_true(r.rows[1].gflops_fwd > 0)
    assert.is_true(r.forward_ms >= 3 and r.backward_ms > 0)
    assert.is_nil(net[1].weight.grad)
    assert.is_true(no_hooks_left(net))
  end)

  it("cnn.timeit times runs with events", function()
    local x = cnn.randn(16, 16):cuda()
    local r = gc.timeit(function() spin(0.001); return x:matmul(x) end, { n = 4, device = "cuda" })
    assert.equal(4, #r.times)
    for _, s in ipairs(r.times) do assert.is_true(s >= 0.001 - 1e-6 and s < 0.05, tostring(s)) end
    r = gc.timeit(function() return x + 1 end, 300) -- default device: cuda, two chunks
    assert.equal(300, #r.times)
  end)
end)
