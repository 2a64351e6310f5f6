-- autograd_spec.lua -- autograd through the bindings: backward, .grad,
-- accumulation, explicit gradients, retain_graph, retain_grad, hooks,
-- no_grad and grad mode, and finite-difference checks (float64) of ops
-- called from Lua.
package.path = "./?.lua;" .. package.path
local H = require("helpers")
local close, raises = H.assert_close, H.raises

local gradcheck = H.gradcheck

describe("backward", function()
  it("x.grad of (w*w):sum() is 2w", function()
    cnn.manual_seed(7)
    local w = cnn.randn(3, 3)
    w.requires_grad = true
    local y = (w * w):sum()
    y:backward()
    close(w.grad, H.map(w:totable(), function(v) return 2 * v end))
  end)

  it("accumulates across calls; zero_grad and grad = nil clear", function()
    local w = cnn.tensor({1, 2, 3}):requires_grad_()
    ;(w * w):sum():backward()
    ;(w * w):sum():backward()
    close(w.grad, {4, 8, 12})
    w:zero_grad()
    assert.is_nil(w.grad)
    ;(w * 3):sum():backward()
    close(w.grad, {3, 3, 3})
    w.grad = nil
    assert.is_nil(w.grad)
  end)

  it("x.grad = g takes g; a g of another shape, dtype or device is refused", function()
    local w = cnn.zeros(2, 3):requires_grad_()
    local g = cnn.tensor({{1, 2, 3}, {4, 5, 6}})
    w.grad = g
    g = nil
    collectgarbage()
    close(w.grad, {{1, 2, 3}, {4, 5, 6}})
    raises(function() w.grad = cnn.zeros(3, 2) end, "grad", "3x2", "2x3")
    raises(function() w.grad = cnn.zeros(2, 3, "float64") end, "grad", "float64", "float32")
    close(w.grad, {{1, 2, 3}, {4, 5, 6}}) -- a refused assignment leaves .grad alone
    if cnn.cuda.is_available() then
      raises(function() w.grad = cnn.zeros(2, 3):cuda() end, "grad", "cuda:0", "cpu")
    end
  end)

  it("takes an explicit gradient for non-scalar outputs", function()
    local w = cnn.tensor({1, 2}):requires_grad_()
    local y = w * 3
    y:backward(cnn.tensor({1, 10}))
    close(w.grad, {3, 30})
  end)

  it("frees the graph unless retain_graph", function()
    local w = cnn.tensor({1, 2}):requires_grad_()
    local y = (w * w):sum()
    y:backward(nil, {retain_graph = true})
    y:backward()
    close(w.grad, {4, 8})
    raises(function() y:backward() end)
    local z = (w * w):sum()
    z:backward({retain_graph = true})
    z:backward()
  end)

  -- a fan-out's gradients are summed (core/backward.c accumulate): the sums
  -- must be exact, and a gradient another input or a hook still holds must
  -- be left as it was (a sum written in place into one of them would not)
  it("sums a fan-out's gradients; a gradient held elsewhere is not written", function()
    local x = cnn.tensor({1, 2, 3}):requires_grad_()
    ;(x * 2 + x * 3 + x * 4):sum():backward() -- three fresh gradients
    close(x.grad, {9, 9, 9})
    local k = cnn.tensor({1, 10, 100})
    for _, order in ipairs({ "add first", "mul first" }) do
      local a = cnn.tensor({1, 2, 3}):requires_grad_()
      local w = cnn.tensor({0, 0, 0}):requires_grad_()
      -- a + w hands the same gradient tensor to a and to w
      local u, v = (a + w) * k, a * 3
      local y = order == "add first" and u:sum() + v:sum() or v:sum() + u:sum()
      y:backward()
      close(w.grad, {1, 10, 100}, 0, 0, order)
      close(a.grad, {4, 13, 103}, 0, 0, order)
    end
    local a = cnn.tensor({1, 2, 3}):requires_grad_()
    local w1, w2 = cnn.zeros(3):requires_grad_(), cnn.zeros(3):requires_grad_()
    ;((a + w1) * k):sum():add(((a + w2) * 2):sum()):backward() -- both of a's are held elsewhere
    close(w1.grad, {1, 10, 100})
    close(w2.grad, {2, 2, 2})
    close(a.grad, {3, 12, 102})
    local b = cnn.tensor({1, 2}):requires_grad_()
    ;(b + b):sum():backward() -- one tensor arrives twice
    close(b.grad, {2, 2})
    local c = cnn.tensor({1, 2}):requires_grad_()
    local kept
    local h = c * 1
    local p = h + cnn.zeros(2)
    p:register_hook(function(g) kept = g end) -- a hook keeps p's gradient, which h gets too
    ;(p * 5):sum():add((h * 7):sum()):backward()
    close(kept, {5, 5})
    close(c.grad, {12, 12})
  end)

  it("reduces broadcast gradients to the input's shape", function()
    local a = cnn.zeros(2, 3):requires_grad_()
    local b = cnn.tensor({1, 2, 3}):requires_grad_()
    ;(a * b + b):sum():backward()
    close(b.grad, {2, 2, 2})
    close(a.grad, {{1, 2, 3}, {1, 2, 3}})
  end)

  it("leaves, grad_fn names, detach", function()
    local w = cnn.ones(2):requires_grad_()
    local y = w * 2
    assert.is_true(w.is_leaf)
    assert.is_false(y.is_leaf)
    assert.is_truthy(y.grad_fn:find("Backward"))
    local d = y:detach()
    assert.is_nil(d.grad_fn)
    assert.is_false(d.requires_grad)
    local e = w:float()
    assert.equal("float32", e.dtype)
  end)
end)

describe("retain_grad and hooks", function()
  it("retain_grad keeps an intermediate's gradient", function()
    local w = cnn.tensor({1, -2, 3}):requires_grad_()
    local h = w * 2
    assert.equal(h, h:retain_grad())
    ;(h * h):sum():backward()
    close(h.grad, {4, -8, 12})
    close(w.grad, {8, -16, 24})
  end)

  it("hooks see the gradient, may replace it, and can be removed", function()
    local w = cnn.tensor({1, 2}):requires_grad_()
    local seen
    local handle = w:register_hook(function(g) seen = g:totable() end)
    ;(w * 5):sum():backward()
    assert.same({5, 5}, seen)
    handle:remove()
    seen = nil
    w.grad = nil
    ;(w * 5):sum():backward()
    assert.is_nil(seen)
    local h2 = w:register_hook(function(g) return g * 0 + 1 end)
    w.grad = nil
    ;(w * 5):sum():backward()
    close(w.grad, {1, 1})
    h2:remove()
  end)

  it("hooks on intermediates change what flows further", function()
    local w = cnn.tensor({1, 2}):requires_grad_()
    local h = w * 3
    h:register_hook(function(g) return g * 2 end)
    ;(h * 1):sum():backward()
    close(w.grad, {6, 6})
  end)

  -- batch norm's backward writes dx over the gradient it receives when
  -- nothing else holds it (cnn_grad_is_private, core/ops/nn_norm.c): the
  -- gradients must be those of a backward that cannot (a hook keeps dy),
  -- and the kept dy must be untouched
  it("batch norm's dx over a private dy: same gradients, a kept dy untouched", function()
    cnn.manual_seed(11)
    local x0, c = cnn.randn(3, 4, 5, 7), cnn.randn(3, 4, 5, 7)
    local w0, b0 = cnn.rand(4) + 0.5, cnn.randn(4)
    for _, fused in ipairs({ true, false }) do
      for _, training in ipairs({ true, false }) do
        local function grads(keep)
          local x, w, b = x0:clone():requires_grad_(), w0:clone():requires_grad_(), b0:clone():requires_grad_()
          local rm, rv = cnn.zeros(4), cnn.ones(4)
          local y = fused and cnn.fused.batch_norm_relu(x, rm, rv, w, b, training, 0.1, 1e-5)
            or F.batch_norm(x, rm, rv, w, b, { training = training })
          local kept
          if keep then y:register_hook(function(g) kept = g end) end
          ;(y * c):sum():backward()
          return x.grad, w.grad, b.grad, kept
        end
        local gx, gw, gb = grads(false)
        local kx, kw, kb, kept = grads(true)
        local what = (fused and "fused" or "batch_norm") .. (training and " training" or " eval")
        local function same(a, b) return a:eq(b):sum():item() == a:numel() end
        assert.is_true(same(gx, kx) and same(gw, kw) and same(gb, kb), what)
        assert.is_true(same(kept, c), what .. ": the hook's dy was overwritten")
      end
    end
  end)

  it("an error in a hook stops backward with a Lua error", function()
    local w = cnn.tensor({1}):requires_grad_()
    w:register_hook(function() error("boom") end)
    raises(function() (w * 2):sum():backward() end, "hook", "boom")
    local v = cnn.tensor({1}):requires_grad_()
    v:register_hook(function() return "not a tensor" end)
    raises(function() (v * 2):sum():backward() end, "hook", "string")
  end)
end)

describe("grad mode", function()
  it("no_grad records nothing, returns fn's results and restores the mode", function()
    local w = cnn.ones(2):requires_grad_()
    local a, b = cnn.no_grad(function(x, k) return x * k, "second" end, w, 3)
    assert.is_nil(a.grad_fn)
    assert.is_false(a.requires_grad)
    assert.equal("second", b)
    assert.is_true(cnn.is_grad_enabled())
    local ok = pcall(cnn.no_grad, function() error("inside") end)
    assert.is_false(ok)
    assert.is_true(cnn.is_grad_enabled())
    assert.is_true(cnn.set_grad_enabled(false))
    assert.is_false(cnn.is_grad_enabled())
    assert.is_nil((w * 2).grad_fn)
    local r = cnn.enable_grad(function() return w * 2 end)
    assert.is_truthy(r.grad_fn)
    assert.is_false(cnn.set_grad_enabled(true))
  end)
end)

describe("finite differences in float64", function()
  cnn.manual_seed(11)
  local a = cnn.randn(3, 4, "float64")
  local b = cnn.randn(3, 4, "float64")
  local p = cnn.rand(3, 4, "float64") + 0.5
  local row = cnn.randn(4, "float64")
  local m = cnn.randn(4, 2, "float64")

  it("binary ops with broadcasting", function()
    gradcheck(function(x, y) return (x * y):sum() end, {a, b})
    gradcheck(function(x, y) return (x / y):sum() end, {a, p})
    gradcheck(function(x, y) return (x - y * 2 + 1):square():sum() end, {a, row})
    gradcheck(function(x, y) return (y ^ x):sum() end, {a, p})
    gradcheck(function(x, y) return x:maximum(y):sum() end, {a, b})
  end)

  it("unary ops", function()
    gradcheck(function(x) return x:exp():sum() end, {a})
    gradcheck(function(x) return x:log():sum() end, {p})
    gradcheck(function(x) return x:sqrt():sum() end, {p})
    gradcheck(function(x) return x:tanh():sum() end, {a})
    gradcheck(function(x) return x:sigmoid():sum() end, {a})
    gradcheck(function(x) return (x ^ 3):sum() end, {a})
    gradcheck(function(x) return (-x):abs():sum() end, {a})
    gradcheck(function(x) return x:clamp(-0.5, 0.5):sum() end, {a})
    gradcheck(function(x) return x:gelu():sum() end, {a})
  end)

  it("reductions, views and products", function()
    gradcheck(function(x) return x:mean(2):square():sum() end, {a})
    gradcheck(function(x) return x:var(1):sum() end, {a})
    gradcheck(function(x) return x:norm() end, {a})
    gradcheck(function(x) return x:max(2):sum() end, {a})
    gradcheck(function(x) return (x:t():contiguous():view(2, 6) * cnn.arange(1, 12, "float64"):view(2, 6)):sum() end, {a})
    gradcheck(function(x) return (x[{{2, 3}, {1, 2}}] * 3):square():sum() end, {a})
    gradcheck(function(x, y) return x:matmul(y):square():sum() end, {a, m})
    gradcheck(function(x, y) return cnn.cat({x, y:view(1, 4)}, 1):square():sum() end, {a, row})
    gradcheck(function(x) return (F.softmax(x, 2) * cnn.arange(1, 12, "float64"):view(3, 4)):sum() end, {a})
  end)
end)

describe("prod where inputs are 0", function()
  -- the naive reference: d prod / d x_j = the product of the other elements
  local function others(row, j)
    local p = 1
    for k, v in ipairs(row) do if k ~= j then p = p * v end end
    return p
  end

  it("along a dim: no zero, one zero (the product of the others), two zeros (0)", function()
    local rows = { {2, -3, 0.5, 4}, {1.5, 0, -2, 3}, {0, 2, 0, 5} }
    local x = cnn.tensor(rows, "float64"):requires_grad_()
    local g = {1, -2, 0.5}
    ;(x:prod(2) * cnn.tensor(g, "float64")):sum():backward()
    local want = {}
    for i, row in ipairs(rows) do
      want[i] = {}
      for j = 1, #row do want[i][j] = g[i] * others(row, j) end
    end
    close(x.grad, want, 0, 0)
    assert.are.equal(0, want[3][1]) -- two zeros: 0 everywhere
    assert.are.equal(g[2] * (1.5 * -2 * 3), want[2][2]) -- one zero: the others' product
    gradcheck(function(t) return (t:prod(2) * cnn.tensor(g, "float64")):sum() end, {cnn.tensor(rows, "float64")})
    gradcheck(function(t) return t:prod(1, true):sum() end, {cnn.tensor(rows, "float64")})
  end)

  it("the whole tensor, with one and with two zeros, on float32 too", function()
    for _, dt in ipairs({"float64", "float32"}) do
      local x = cnn.tensor({{3, 0}, {-2, 5}}, dt):requires_grad_()
      x:prod():backward()
      close(x.grad, {{0, -30}, {0, 0}}, 0, 0)
      local z = cnn.tensor({{3, 0}, {0, 5}}, dt):requires_grad_()
      z:prod():backward()
      close(z.grad, {{0, 0}, {0, 0}}, 0, 0)
      local n = cnn.tensor({{3, 2}, {-2, 5}}, dt):requires_grad_()
      n:prod():backward()
      close(n.grad, {{-20, -30}, {30, -12}}, 1e-6, 0)
    end
    gradcheck(function(t) return t:prod() end, {cnn.tensor({{3, 0}, {-2, 5}}, "float64")})
  end)
end)

-- PyTorch 2.x at the edges (tools/autograd/derivatives.yaml and
-- FunctionsManual.cpp): clamp_backward passes the gradient where
-- min <= x <= max (so at a bound, not at NaN); relu's threshold_backward
-- zeroes it only where the output is <= 0 (so NaN passes it); max()/min()
-- over all elements share it among the positions equal to the result, a
-- NaN result matching the NaNs (evenly_distribute_backward); max/min along
-- a dim send it to the returned index (the first NaN).
describe("gradients at the edges, as PyTorch 2.x", function()
  local nan = 0 / 0
  local function grad_of(values, f)
    local x = cnn.tensor(values, "float64"):requires_grad_()
    f(x):backward()
    return x.grad:totable()
  end

  it("clamp: 1 exactly at either bound, 0 outside and at NaN", function()
    local g = grad_of({-1, -0.5, 1, 1.5, -2, nan}, function(x) return x:clamp(-1, 1):sum() end)
    assert.are.same({1, 1, 1, 0, 0, 0}, g)
    g = grad_of({0, -1, 2}, function(x) return x:clamp(0, nil):sum() end)
    assert.are.same({1, 0, 1}, g)
  end)

  it("relu: 0 at 0 and below, 1 above and at NaN", function()
    assert.are.same({0, 0, 1, 1}, grad_of({-1, 0, 2, nan}, function(x) return x:relu():sum() end))
    assert.are.same({0, 0, 1, 1}, grad_of({-1, 0, 2, nan}, function(x) return F.relu(x):sum() end))
  end)

  it("max()/min() share the gradient among the NaNs; along a dim it goes to the first NaN", function()
    assert.are.same({0, 0.5, 0, 0.5}, grad_of({1, nan, 3, nan}, function(x) return x:max() end))
    assert.are.same({0, 0.5, 0, 0.5}, grad_of({1, nan, 3, nan}, function(x) return x:min() end))
    assert.are.same({0, 0.5, 0.5}, grad_of({1, 3, 3}, function(x) return x:max() end)) -- ties share
    local g = grad_of({{1, nan, 3, nan}, {4, 2, 9, 9}}, function(x) return (x:max(2)):sum() end)
    assert.are.same({{0, 1, 0, 0}, {0, 0, 1, 0}}, g)
    g = grad_of({{1, nan, 3, nan}}, function(x) return (x:min(2)):sum() end)
    assert.are.same({{0, 1, 0, 0}}, g)
  end)
end)
