-- machine_peak_spec.lua -- cnn.fma_peak and cnn.copy_bandwidth (core/cpu/
-- machine_peak.c).  They measure, so the checks are ranges that any machine
-- running the suite lands in, even a busy one, and a relation that holds
-- everywhere.  One thread: best-of-many short rounds then survives a
-- machine shared with other jobs (two threads spin at every barrier while
-- the other is descheduled).
describe("machine peaks", function()
  local threads
  before_each(function()
    threads = cnn.get_num_threads()
    cnn.set_num_threads(1)
  end)
  after_each(function() cnn.set_num_threads(threads) end)

  it("fma_peak is a plausible FLOP/s figure", function()
    local f = cnn.fma_peak(0.05)
    assert.is_true(f > 1e7 and f < 1e14, "fma_peak " .. f)
  end)

  it("fma_peak beats the FLOP/s a real matrix product reaches", function()
    -- the peak is a ceiling: OpenBLAS's SGEMM cannot exceed it
    local a, b = cnn.randn(256, 256), cnn.randn(256, 256)
    local best = 0
    for _ = 1, 20 do
      local t0 = cnn.clock()
      local _ = a:matmul(b)
      local dt = cnn.clock() - t0
      if dt > 0 then best = math.max(best, 2 * 256 ^ 3 / dt) end
    end
    local peak = cnn.fma_peak(0.2)
    assert.is_true(peak > 0.9 * best, ("fma_peak %.3g < sgemm %.3g FLOP/s"):format(peak, best))
  end)

  it("copy_bandwidth is a plausible bytes/s figure", function()
    local bw = cnn.copy_bandwidth(1 << 20, 0.05)
    assert.is_true(bw > 1e7 and bw < 1e13, "copy_bandwidth " .. bw)
  end)

  it("rejects sizes and durations out of range, naming the function", function()
    assert.error_matches(function() cnn.copy_bandwidth(10) end, "copy_bandwidth")
    assert.error_matches(function() cnn.copy_bandwidth(1 << 20, -1) end, "copy_bandwidth")
    assert.error_matches(function() cnn.fma_peak(0) end, "fma_peak")
  end)
end)
