-- bench/ops.lua -- the cost of small ops called from Lua and the throughput
-- of elementwise ops on large tensors.  One JSON line per figure:
--   {"bench":"op_overhead","op":"add16","us":...}   median microseconds of x + y
--                                                     on 16-element float32 tensors
--   {"bench":"elementwise","op":"add","gbps":...}   16M-element float32 tensors,
--                                                     (bytes read + written) / time
-- Ops ending in "_" are the in-place variants (no allocation: the kernel's
-- own speed); the others include allocating the result (first-touch page
-- faults of a fresh 64 MB buffer), which is what a user's expression costs.
-- The activations (gelu ... mish) read randn * 3, so that about half the
-- values take each branch (elu, softplus) and the tails are exercised;
-- "<op>_fwd_bwd" is y = op(x) then y:backward(g): 5 arrays of 4N bytes
-- (x, y; g, x, dx).
-- Usage: cnnsh bench/ops.lua [rounds [pattern]]
--   pattern: a Lua pattern; only the elementwise rows whose op matches it
--   run, and no overhead rows (a quick look at a few ops).
-- Old build against new: python3 bench/compare_builds.py OLD NEW --only ops
-- (rows of ops the old build lacks print "missing" and are skipped)

local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")
local rounds = tonumber(arg and arg[1]) or 7
local only = arg and arg[2]

local median = B.median

local function emit(fmt, ...)
  io.write(string.format(fmt, ...), "\n")
  io.flush()
end

-- ---- per-op overhead ----------------------------------------------------------

local function overhead(name, n, body)
  local times = {}
  for _ = 1, rounds do
    local t0 = cnn.clock()
    body(n)
    times[#times + 1] = (cnn.clock() - t0) / n * 1e6
  end
  emit('{"bench":"op_overhead","op":"%s","us":%.3f}', name, median(times))
end

local x, y = cnn.rand(16), cnn.rand(16)
local function add16(n) for _ = 1, n do local _ = x + y end end
if not only then
  add16(20000) -- warm up
  overhead("add16", 100000, add16)
  overhead("add16_scalar", 100000, function(n) for _ = 1, n do local _ = x + 1 end end)
  overhead("add16_inplace", 100000, function(n) for _ = 1, n do x:add_(y) end end)
  overhead("relu16", 100000, function(n) for _ = 1, n do local _ = x:relu() end end)
  overhead("sum16", 100000, function(n) for _ = 1, n do local _ = x:sum() end end)
  overhead("index16", 100000, function(n) for _ = 1, n do local _ = x[3] end end)
end

-- ---- elementwise throughput ------------------------------------------------------

local N = 16 * 1024 * 1024
local a, b = cnn.rand(N), cnn.rand(N)
local out = cnn.empty(N)

-- A row whose op this build lacks (an older build run by
-- bench/compare_builds.py) says so and is skipped; any other error stops
-- the script.
local function lacks_op(name, fn)
  local ok, err = pcall(fn)
  if ok then return false end
  if not tostring(err):find("attempt to call a nil value", 1, true) then error(err, 0) end
  emit('{"bench":"elementwise","op":"%s","missing":"this build lacks the op"}', name)
  return true
end

local function throughput(name, bytes, fn, setup)
  if only and not name:match(only) then return end
  if setup then setup() end
  if lacks_op(name, fn) then return end -- also the warm-up
  local times = {}
  for _ = 1, rounds do
    if setup then setup() end
    local t0 = cnn.clock()
    fn()
    times[#times + 1] = cnn.clock() - t0
  end
  emit('{"bench":"elementwise","op":"%s","gbps":%.2f,"ms":%.2f}', name, bytes / median(times) / 1e9,
       median(times) * 1e3)
end

local F4 = 4 * N
throughput("add", 3 * F4, function() local r <close> = a + b end)
throughput("relu", 2 * F4, function() local r <close> = a:relu() end)
throughput("exp", 2 * F4, function() local r <close> = a:exp() end)
throughput("log", 2 * F4, function() local r <close> = a:log() end)
throughput("expm1", 2 * F4, function() local r <close> = a:expm1() end)
throughput("tanh", 2 * F4, function() local r <close> = a:tanh() end)
throughput("sigmoid", 2 * F4, function() local r <close> = a:sigmoid() end)
throughput("sum", F4, function() local r <close> = a:sum() end)
local function reset() out:copy_(a) end
throughput("add_", 3 * F4, function() out:add_(b) end, reset)
throughput("relu_", 2 * F4, function() out:relu_() end, reset)
throughput("exp_", 2 * F4, function() out:exp_() end, reset)
throughput("log_", 2 * F4, function() out:log_() end, reset)
throughput("expm1_", 2 * F4, function() out:expm1_() end, reset)
throughput("tanh_", 2 * F4, function() out:tanh_() end, reset)
throughput("sigmoid_", 2 * F4, function() out:sigmoid_() end, reset)

-- activations (issue 19 point 4: vector kernels instead of libm per element)
local s = cnn.randn(N):mul(3)
throughput("gelu", 2 * F4, function() local r <close> = F.gelu(s) end)
throughput("gelu_tanh", 2 * F4, function() local r <close> = F.gelu(s, { approximate = "tanh" }) end)
throughput("elu", 2 * F4, function() local r <close> = F.elu(s) end)
throughput("softplus", 2 * F4, function() local r <close> = F.softplus(s) end)
throughput("mish", 2 * F4, function() local r <close> = F.mish(s) end)

local xs, gy = s:clone(), cnn.randn(N)
xs.requires_grad = true
local function fwd_bwd(fn)
  return function()
    xs.grad = nil
    local y <close> = fn(xs)
    y:backward(gy)
  end
end
throughput("gelu_fwd_bwd", 5 * F4, fwd_bwd(F.gelu))
throughput("gelu_tanh_fwd_bwd", 5 * F4, fwd_bwd(function(t) return F.gelu(t, { approximate = "tanh" }) end))
throughput("elu_fwd_bwd", 5 * F4, fwd_bwd(F.elu))
throughput("softplus_fwd_bwd", 5 * F4, fwd_bwd(F.softplus))
throughput("mish_fwd_bwd", 5 * F4, fwd_bwd(F.mish))
