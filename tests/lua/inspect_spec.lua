-- inspect_spec.lua -- net:summary, net:trace, net:profile (stdlib/inspect.lua),
-- the module hooks they stand on, and gradcheck / timeit (stdlib/gradcheck.lua).
--
-- References are independent of the code under test: parameter counts and
-- multiply-adds from the layer formulas written out here, statistics from
-- naive Lua loops over totable(), gradients from the calculus of sum(W x + b).
require("inspect")
local gc = require("gradcheck")
package.path = "./?.lua;" .. package.path
local H = require("helpers")

local flat = H.flat -- a tensor or nested table as a flat list

local function close(a, b, tol)
  return math.abs(a - b) <= (tol or 1e-5) * math.max(1, math.abs(b))
end

-- naive statistics: mean, unbiased std, min, max, share of zeros
local function naive_stats(t)
  local v = flat(t)
  local n, s, lo, hi, z = #v, 0, math.huge, -math.huge, 0
  for _, x in ipairs(v) do
    s = s + x
    lo, hi = math.min(lo, x), math.max(hi, x)
    if x == 0 then z = z + 1 end
  end
  local mean, ss = s / n, 0
  for _, x in ipairs(v) do ss = ss + (x - mean) ^ 2 end
  return { mean = mean, std = math.sqrt(ss / (n - 1)), min = lo, max = hi, zeros = z / n }
end

-- The quickstart network: conv 1->32 3x3 pad 1, ReLU, max-pool 2, linear 6272->10.
local function simple_cnn()
  return nn.Sequential(nn.Conv2d(1, 32, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
                       nn.Flatten(), nn.Linear(32 * 14 * 14, 10))
end

local no_hooks_left = H.no_hooks_left

describe("net:summary", function()
  it("reports the SimpleCNN's 63,050 parameters, shapes and MACs", function()
    local net = simple_cnn()
    local r = net:summary({ 1, 1, 28, 28 }, { print = false })
    assert.is_true(r.ok)
    -- conv: 32*1*3*3 + 32 = 320; linear: 6272*10 + 10 = 62,730
    assert.are.equal(63050, r.total_params)
    assert.are.equal(63050, r.trainable)
    assert.are.equal(0, r.frozen)
    assert.truthy(r.text:find("63,050", 1, true))
    local shapes = { { 1, 32, 28, 28 }, { 1, 32, 28, 28 }, { 1, 32, 14, 14 }, { 1, 6272 }, { 1, 10 } }
    local params = { 320, 0, 0, 0, 62730 }
    assert.are.equal(5, #r.rows)
    for i, row in ipairs(r.rows) do
      assert.are.same(shapes[i], row.shape)
      assert.are.equal(params[i], row.params)
      assert.are.equal(tostring(i), row.name)
    end
    -- MACs per batch: conv N*K*OH*OW * C*R*S, linear out * in
    assert.are.equal(1 * 32 * 28 * 28 * 1 * 3 * 3, r.rows[1].macs)
    assert.are.equal(10 * 6272, r.rows[5].macs)
    assert.are.equal(225792 + 62720, r.macs)
    -- activation memory of the conv output in float32
    assert.are.equal(32 * 28 * 28 * 4, r.rows[1].act_bytes)
    assert.are.same({ 1, 10 }, r.output_shape)
    assert.truthy(tostring(r):find("63,050", 1, true))
  end)

  it("reports the quickstart's class form (functional ReLU) the same way", function()
    local SimpleCNN = nn.Module:extend("SpecSimpleCNN")
    function SimpleCNN:init()
      self.conv = nn.Conv2d(1, 32, 3, { padding = 1 })
      self.pool = nn.MaxPool2d(2)
      self.fc = nn.Linear(32 * 14 * 14, 10)
    end
    function SimpleCNN:forward(x)
      return self.fc(self.pool(F.relu(self.conv(x))):flatten(2))
    end
    local r = SimpleCNN():summary({ 1, 1, 28, 28 }, { print = false })
    assert.are.equal(63050, r.total_params)
    local names, shapes = {}, {}
    for i, row in ipairs(r.rows) do names[i], shapes[i] = row.name, row.shape end
    assert.are.same({ "conv", "pool", "fc" }, names)
    assert.are.same({ { 1, 32, 28, 28 }, { 1, 32, 14, 14 }, { 1, 10 } }, shapes)
  end)

  it("accepts a tensor or sizes as numbers, and counts frozen parameters", function()
    local net = simple_cnn()
    net[5].weight.requires_grad = false
    local r = net:summary(cnn.zeros(2, 1, 28, 28), { print = false })
    assert.are.equal(330, r.trainable)
    assert.are.equal(62720, r.frozen)
    assert.are.same({ 2, 32, 28, 28 }, r.rows[1].shape)
    assert.are.equal(2 * 225792 + 2 * 62720, r.macs)
    local r2 = simple_cnn():summary(1, 1, 28, 28, { print = false })
    assert.are.same({ 1, 10 }, r2.output_shape)
  end)

  it("names nested layers with dotted paths", function()
    local Net = nn.Module:extend("SpecNet")
    function Net:init()
      self.features = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
      self.head = nn.Linear(4, 2)
    end
    function Net:forward(x)
      return self.head(self.features(x):mean(4):mean(3))
    end
    local r = Net():summary({ 1, 3, 5, 5 }, { print = false })
    local names = {}
    for i, row in ipairs(r.rows) do names[i] = row.name end
    assert.are.same({ "features", "features.1", "features.2", "head" }, names)
    assert.are.equal(1, r.rows[1].depth)
    assert.are.equal(2, r.rows[2].depth)
    assert.are.equal(3 * 4 * 9 + 4 + 4 * 2 + 2, r.total_params)
  end)

  it("stops at a shape error and suggests the layer", function()
    local net = nn.Sequential(nn.Conv2d(1, 64, 3), nn.MaxPool2d(2), nn.Conv2d(64, 64, 3),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(9216, 128))
    local r = net:summary({ 1, 1, 28, 28 }, { print = false })
    assert.is_false(r.ok)
    assert.are.equal("use nn.Linear(1600, 128)", r.suggestion)
    local last = r.rows[#r.rows]
    assert.are.equal("6", last.name)
    assert.is_true(last.failed)
    assert.truthy(r.text:find("fix: use nn.Linear(1600, 128)", 1, true))
    assert.truthy(r.error:find("1600", 1, true))
    assert.is_true(no_hooks_left(net))
  end)

  it("suggests Flatten and Conv2d fixes", function()
    local r = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Linear(4 * 26 * 26, 10))
                :summary({ 1, 1, 28, 28 }, { print = false })
    assert.are.equal("insert nn.Flatten() before this layer", r.suggestion)
    local r2 = nn.Sequential(nn.Conv2d(1, 8, 3), nn.Conv2d(4, 16, 3, { padding = 1 }))
                 :summary({ 1, 1, 10, 10 }, { print = false })
    assert.are.equal("use nn.Conv2d(8, 16, 3, {padding = 1})", r2.suggestion)
  end)

  it("leaves the model as it was (mode, BatchNorm statistics, hooks)", function()
    local net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    local before = flat(net[2].running_mean)
    net:summary(cnn.randn(2, 1, 6, 6) + 5, { print = false })
    assert.is_true(net.training)
    assert.is_true(net[2].training)
    assert.are.same(before, flat(net[2].running_mean))
    assert.is_true(no_hooks_left(net))
  end)
end)

describe("module hooks", function()
  it("fire in call order with the layers' inputs and outputs", function()
    local net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    local x = cnn.randn(5, 3)
    local seen = {}
    local handles = {}
    for i = 1, 3 do
      handles[i] = net[i]:register_forward_hook(function(m, inp, out)
        seen[#seen + 1] = { i = i, m = m, inp = flat(inp), out = flat(out) }
      end)
    end
    net(x)
    assert.are.equal(3, #seen)
    -- each layer applied by hand in the same order
    local h = x
    for i = 1, 3 do
      assert.are.equal(i, seen[i].i)
      assert.are.equal(net[i], seen[i].m)
      assert.are.same(flat(h), seen[i].inp)
      h = cnn.no_grad(function() return net[i]:forward(h) end)
      assert.are.same(flat(h), seen[i].out)
    end
    for _, hd in ipairs(handles) do hd:remove() end
    seen = {}
    net(x)
    assert.are.equal(0, #seen)
  end)

  it("backward hooks see output gradients from the last layer to the first", function()
    local net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    local order = {}
    local hs = {}
    for i = 1, 3 do
      hs[i] = net[i]:register_full_backward_hook(function(m, g)
        order[#order + 1] = { i = i, shape = g.shape, g = flat(g) }
      end)
    end
    net(cnn.randn(2, 3)):sum():backward()
    assert.are.same({ 3, 2, 1 }, { order[1].i, order[2].i, order[3].i })
    assert.are.same({ 2, 2 }, order[1].shape)
    assert.are.same({ 1, 1, 1, 1 }, order[1].g) -- d sum(y) / dy = 1
    assert.are.same({ 2, 4 }, order[3].shape)
    for _, h in ipairs(hs) do h:remove() end
  end)
end)

describe("net:trace", function()
  it("records per-layer statistics equal to direct computation", function()
    cnn.manual_seed(3)
    local net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    local x = cnn.randn(16, 6)
    local r = net:trace(x, nil, { print = false })
    assert.are.equal(3, #r.rows)
    local h = x
    for i = 1, 3 do
      h = cnn.no_grad(function() return net[i](h) end)
      local ref, row = naive_stats(h), r.rows[i]
      for _, k in ipairs({ "mean", "std", "min", "max", "zeros" }) do
        assert.is_true(close(row[k], ref[k], 1e-5), string.format("layer %d %s: %g vs %g", i, k, row[k], ref[k]))
      end
      assert.are.equal(0, row.nan)
      assert.are.equal(0, row.inf)
      assert.are.same(h.shape, row.shape)
    end
    assert.is_true(no_hooks_left(net))
  end)

  it("records output and parameter gradients after backward", function()
    local net = nn.Sequential(nn.Linear(3, 2), nn.Identity())
    local x = cnn.randn(4, 3)
    local r = net:trace(x, function(out) return out:sum() end, { print = false })
    -- d sum(out) / d out = ones(4, 2): norm sqrt(8), mean |g| 1
    assert.is_true(close(r.rows[2].grad_norm, math.sqrt(8)))
    assert.is_true(close(r.rows[2].grad_mean_abs, 1))
    -- dW[j][k] = sum_n x[n][k] for each j; db[j] = 4
    local xv = x:totable()
    local ss = 0
    for k = 1, 3 do
      local col = 0
      for n = 1, 4 do col = col + xv[n][k] end
      ss = ss + 2 * col * col
    end
    local pw, pb = r.params[1], r.params[2]
    assert.are.equal("1.weight", pw.name)
    assert.is_true(close(pw.grad_norm, math.sqrt(ss), 1e-4))
    assert.is_true(close(pb.grad_norm, math.sqrt(2 * 16)))
    assert.is_true(close(r.loss, flat(net(x):sum())[1], 1e-4))
    assert.is_not_nil(net[1].weight.grad) -- left for viz.gradflow
    assert.is_true(no_hooks_left(net))
  end)

  it("uses cross-entropy for int64 targets", function()
    local net = nn.Linear(4, 3)
    local x, y = cnn.randn(5, 4), cnn.tensor({ 1, 2, 3, 1, 2 }, "int64")
    local r = net:trace(x, y, { print = false })
    local ref = F.cross_entropy(net(x), y):item()
    assert.is_true(close(r.loss, ref, 1e-5))
  end)

  it("marks vanishing and exploding gradients and NaN activations", function()
    local net = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    local x = cnn.randn(2, 3)
    -- the ReLU output's gradient is 1e-12 (or 1e6) in every element
    local r = net:trace(x, function(out) return out:sum() * 1e-12 end, { print = false })
    assert.are.equal("vanishing", r.rows[2].flag)
    assert.truthy(r.text:find("<- vanishing", 1, true))
    local r2 = net:trace(x, function(out) return out:sum() * 1e6 end, { print = false })
    assert.are.equal("exploding", r2.rows[2].flag)
    assert.is_true(close(r2.rows[2].grad_norm, 1e6 * math.sqrt(6), 1e-5))
    local r3 = nn.Sequential(nn.Identity(), nn.ReLU()):trace(cnn.tensor{{ 0 / 0, 1, 0 }}, nil, { print = false })
    assert.are.equal(1, r3.rows[1].nan)
    assert.are.equal("NaN/Inf", r3.rows[1].flag)
    assert.is_true(close(r3.rows[1].mean, 0.5)) -- over the finite values
  end)

  it("leaves buffers and the RNG as they were", function()
    local net = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3), nn.Dropout(0.5))
    local before = flat(net[2].running_var)
    cnn.manual_seed(7)
    local x = cnn.randn(8, 3) * 5
    local expect = flat(cnn.rand(4))
    cnn.manual_seed(7)
    x = cnn.randn(8, 3) * 5
    net:trace(x, function(out) return out:sum() end, { print = false })
    assert.are.same(expect, flat(cnn.rand(4)))
    assert.are.same(before, flat(net[2].running_var))
  end)
end)

describe("net:profile", function()
  it("returns one row per layer with positive forward and backward times", function()
    local net = simple_cnn()
    local r = net:profile(cnn.randn(2, 1, 28, 28), { iters = 3, warmup = 1, print = false })
    assert.are.equal(5, #r.rows)
    local types = { "Conv2d", "ReLU", "MaxPool2d", "Flatten", "Linear" }
    local share = 0
    for i, row in ipairs(r.rows) do
      assert.are.equal(types[i], row.type)
      assert.are.equal(tostring(i), row.name)
      assert.is_true(row.fwd_ms > 0, "fwd " .. i)
      assert.is_true(row.bwd_ms > 0, "bwd " .. i)
      share = share + row.share
    end
    assert.is_true(close(share, 1, 1e-9))
    assert.are.equal(2 * 225792, r.rows[1].macs)
    assert.is_true(r.rows[1].gflops_fwd > 0)
    assert.is_true(r.forward_ms > 0 and r.backward_ms > 0)
    assert.is_nil(net[1].weight.grad) -- gradients restored
    assert.is_true(no_hooks_left(net))
  end)

  it("skips the backward on request", function()
    local r = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
                :profile(cnn.randn(3, 4), { iters = 2, warmup = 0, backward = false, print = false })
    assert.are.equal(2, #r.rows)
    assert.are.equal(0, r.rows[1].bwd_ms)
    assert.truthy(r.text:find("fwd ms", 1, true))
  end)
end)

describe("gradcheck", function()
  it("passes for correct gradients (float64)", function()
    local a = cnn.randn(3, 4, { dtype = "float64", requires_grad = true })
    local b = cnn.randn(3, 4, { dtype = "float64", requires_grad = true })
    local ok, rep = gc.gradcheck(function(p, q) return (p * q):tanh() end, a, b)
    assert.is_true(ok)
    assert.are.equal(24, rep.checked)
    assert.are.equal(0, rep.failed)
    assert.truthy(tostring(rep):find("passed", 1, true))
    assert.is_nil(a.grad) -- restored
  end)

  it("finds a wrong gradient and reports the worst element", function()
    local a = cnn.randn(2, 3, { dtype = "float64", requires_grad = true })
    -- a hook that doubles the gradient flowing into a*a breaks autograd on purpose
    local function f(x)
      local y = x * x
      if y.requires_grad then y:register_hook(function(g) return g * 2 end) end
      return y:sum()
    end
    local ok, rep = gc.gradcheck(f, a)
    assert.is_false(ok)
    assert.are.equal(6, rep.failed)
    assert.are.equal(1, rep.input)
    -- analytic 4x vs numeric 2x at the worst element
    assert.is_true(close(rep.analytic, 2 * rep.numeric, 1e-4))
    assert.truthy(tostring(rep):find("FAILED", 1, true))
  end)

  it("timeit returns positive timings", function()
    local calls = 0
    local r = require("timeit").timeit(function() calls = calls + 1 end, 5)
    assert.are.equal(5, r.n)
    assert.are.equal(6, calls) -- one warm-up run
    assert.is_true(r.min >= 0 and r.median >= r.min and r.max >= r.median)
    assert.truthy(tostring(r):find("5 runs", 1, true))
  end)
end)
