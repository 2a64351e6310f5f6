-- linear_block_spec.lua -- nn.Sequential's fused Linear -> ReLU (->
-- Dropout) (cnn.fused.linear_relu_dropout: the bias, relu and dropout's
-- mask one pass over the product; core/ops/nn_linear_block.c).
--
-- The fused block must give the bits of the three layers run one by one
-- (the same product, the same mask for one seed), so it is compared with
-- them exactly, and with a float64 oracle in naive Lua loops: y = relu(x
-- w^T + b) * mask, dz = g * mask where x w^T + b > 0, dx = dz w, dw = dz^T
-- x, db = the column sums of dz.  The oracle's mask is F.dropout applied
-- to ones after the same seed (the mask's bits are checked against an
-- independent splitmix64 in tests/core/test_dropout_mask.c).
local H = require("helpers")

local F = cnn.F

-- Linear(i, o) -> ReLU (-> Dropout(p)); opts.bias = false drops the bias
local function block(i, o, p, opts)
  local net = nn.Sequential(nn.Linear(i, o, opts), nn.ReLU())
  if p then net:append(nn.Dropout(p)) end
  return net
end

-- the layers called one by one (nothing fused)
local unfused = H.run_layers

-- forward + backward with output gradient g after manual_seed(seed):
-- output and the gradients of x, weight, bias (clones)
local function run(net, x0, g, seed, forward)
  cnn.manual_seed(seed)
  local x = x0:clone():requires_grad_()
  net:zero_grad()
  local y = forward(net, x)
  y:backward(g)
  local l = net[1]
  return y:detach(), x.grad:clone(), l.weight.grad:clone(), l.bias and l.bias.grad:clone(), y
end

-- the oracle, float64 Lua loops over nested tables (H.matmul): z = x w^T + b,
-- y = relu(z) * mask, dz = g * mask where z > 0, dx = dz w, dw = dz^T x,
-- db = the column sums of dz
local function oracle(x, w, b, mask, g)
  local X, W, M, G = x:double():totable(), w:double():totable(), mask:double():totable(), g:double():totable()
  local B = b and b:double():totable()
  local z = H.matmul(X, H.transpose(W))
  local y, dz, db = {}, {}, {}
  for r = 1, #z do
    y[r], dz[r] = {}, {}
    for c = 1, #W do
      local v = z[r][c] + (B and B[c] or 0)
      y[r][c] = math.max(v, 0) * M[r][c]
      dz[r][c] = v > 0 and G[r][c] * M[r][c] or 0
      db[c] = (db[c] or 0) + dz[r][c]
    end
  end
  return y, H.matmul(dz, W), H.matmul(H.transpose(dz), X), db
end

local function assert_same(a, b, what)
  assert.are.equal(0, (a:double() - b:double()):abs():max():item(), what .. " differs from the layers'")
end

describe("nn.Sequential Linear -> ReLU -> Dropout block", function()
  it("gives the layers' bits and the oracle's values, forward and backward", function()
    for _, p in ipairs({ 0.3, 0.5 }) do
      cnn.manual_seed(11)
      local net = block(6, 5, p)
      local x0, g = cnn.randn(8, 6), cnn.randn(8, 5)
      local y, dx, dw, db, yg = run(net, x0, g, 42, function(m, x) return m(x) end)
      assert.are.equal("LinearReluDropoutBackward", tostring(yg.grad_fn))
      local y2, dx2, dw2, db2, yg2 = run(net, x0, g, 42, unfused)
      assert.are.equal("DropoutBackward", tostring(yg2.grad_fn))
      assert_same(y, y2, "output"); assert_same(dx, dx2, "dx")
      assert_same(dw, dw2, "dw"); assert_same(db, db2, "db")
      cnn.manual_seed(42)
      local mask = F.dropout(cnn.ones(8, 5), p, true)
      local ey, edx, edw, edb = oracle(x0, net[1].weight, net[1].bias, mask, g)
      H.assert_close(y, ey, 1e-5, 1e-5, "output")
      H.assert_close(dx, edx, 1e-5, 1e-5, "dx")
      H.assert_close(dw, edw, 1e-5, 1e-5, "dw")
      H.assert_close(db, edb, 1e-5, 1e-5, "db")
      -- the mask really drops: some kept, some dropped, kept ones scaled
      local zeros = mask:eq(0):sum():item()
      assert.is_true(zeros > 0 and zeros < 40)
      H.assert_close(mask:max():item(), 1 / (1 - p), 1e-6, 1e-6)
    end
  end)

  it("fuses Linear and ReLU alone, without a bias, and on 3-d input", function()
    cnn.manual_seed(3)
    local net = block(7, 4, nil, { bias = false })
    local x0, g = cnn.randn(2, 3, 7), cnn.randn(2, 3, 4)
    local y, dx, dw, _, yg = run(net, x0, g, 1, function(m, x) return m(x) end)
    assert.are.equal("LinearReluBackward", tostring(yg.grad_fn))
    local y2, dx2, dw2 = run(net, x0, g, 1, unfused)
    assert_same(y, y2, "output"); assert_same(dx, dx2, "dx"); assert_same(dw, dw2, "dw")
    local ey, edx, edw = oracle(x0:view(6, 7), net[1].weight, nil, cnn.ones(6, 4), g:view(6, 4))
    H.assert_close(y:view(6, 4), ey, 1e-5, 1e-5, "output")
    H.assert_close(dx:view(6, 7), edx, 1e-5, 1e-5, "dx")
    H.assert_close(dw, edw, 1e-5, 1e-5, "dw")
  end)

  it("runs the threaded passes on a large output the same as the layers", function()
    cnn.manual_seed(5)
    local net = block(64, 1100, 0.25) -- 96 x 1100 = 105,600 elements: above one thread's share
    local x0, g = cnn.randn(96, 64), cnn.randn(96, 1100)
    local y, dx, dw, db = run(net, x0, g, 9, function(m, x) return m(x) end)
    local y2, dx2, dw2, db2 = run(net, x0, g, 9, unfused)
    assert_same(y, y2, "output"); assert_same(dx, dx2, "dx")
    assert_same(dw, dw2, "dw"); assert_same(db, db2, "db")
    local kept = y2:ne(0):sum():item() / y2:numel()
    assert.is_true(kept > 0.3 and kept < 0.6, "kept fraction " .. kept) -- relu halves, dropout keeps 3/4
  end)

  it("in eval mode fuses Linear and ReLU and leaves dropout out", function()
    cnn.manual_seed(2)
    local net = block(6, 5, 0.5)
    net:eval()
    local x = cnn.randn(4, 6):requires_grad_()
    local y = net(x)
    assert.are.equal("LinearReluBackward", tostring(y.grad_fn))
    assert_same(y, F.relu(net[1](x)), "eval output")
  end)

  it("takes float64 and bfloat16 autocast as the layers do", function()
    cnn.manual_seed(4)
    local net = block(6, 5, 0.2):to("float64")
    local x0, g = cnn.randn(3, 6):double(), cnn.randn(3, 5):double()
    local y, dx, dw, db, yg = run(net, x0, g, 8, function(m, x) return m(x) end)
    assert.are.equal("LinearReluDropoutBackward", tostring(yg.grad_fn))
    local y2, dx2, dw2, db2 = run(net, x0, g, 8, unfused)
    assert_same(y, y2, "float64 output"); assert_same(dx, dx2, "float64 dx")
    assert_same(dw, dw2, "float64 dw"); assert_same(db, db2, "float64 db")
    local net32 = block(16, 8, 0.2)
    local x1, g1 = cnn.randn(4, 16), cnn.randn(4, 8)
    local function ac(f) return function(m, x) return cnn.autocast("bfloat16", function() return f(m, x) end) end end
    local a = { run(net32, x1, g1, 3, ac(function(m, x) return m(x) end)) }
    assert.are.equal("LinearReluDropoutBackward", tostring(a[5].grad_fn))
    local b = { run(net32, x1, g1, 3, ac(unfused)) }
    for k = 1, 4 do assert_same(a[k], b[k], "bf16 result " .. k) end
  end)

  it("does not fuse where the layers could tell", function()
    cnn.manual_seed(6)
    local x = cnn.randn(4, 6):requires_grad_()
    -- a hook on any of the three
    for k = 1, 3 do
      local net = block(6, 5, 0.5)
      local seen = 0
      local h = net[k]:register_forward_hook(function() seen = seen + 1 end)
      local y = net(x)
      assert.are.equal("DropoutBackward", tostring(y.grad_fn))
      assert.are.equal(1, seen)
      h:remove()
    end
    -- p = 1: Linear and ReLU fuse, the Dropout zeroes everything on its own
    local net = block(6, 5, 1)
    local seen
    net[3]:register_forward_pre_hook(function(_, xin) seen = tostring(xin.grad_fn) end)
    local y = net(x)
    assert.are.equal("LinearReluBackward", seen)
    assert.are.equal(0, y:abs():sum():item())
    -- a subclass of Linear, and a ReLU with its own forward
    local MyLinear = nn.Linear:extend("MyLinear")
    local sub = nn.Sequential(MyLinear(6, 5), nn.ReLU())
    assert.are.equal("ReluBackward", tostring(sub(x).grad_fn))
    local net2 = block(6, 5)
    net2[2].forward = function(_, t) return F.relu(t) * 2 end
    H.assert_close(net2(x), F.relu(net2[1](x)) * 2, 1e-6, 1e-6, "own forward")
  end)

  it("leaves the caller's output gradient untouched", function()
    cnn.manual_seed(8)
    local net = block(6, 5, 0.5)
    local x = cnn.randn(4, 6):requires_grad_()
    local g = cnn.randn(4, 5)
    local before = g:clone()
    net(x):backward(g)
    assert_same(g, before, "g after backward")
  end)

  it("reports bad input as the Linear's error and declines what it cannot do", function()
    local net = block(6, 5, 0.5)
    H.raises(function() net(cnn.randn(4, 7)) end, "1 (Linear", "linear: input has 7 features")
    local x, w, b = cnn.randn(4, 6), cnn.randn(5, 6), cnn.randn(5)
    H.raises(function() cnn.fused.linear_relu_dropout(x, w, b, 2) end, "linear_relu_dropout",
             "between 0 and 1")
    H.raises(function() cnn.fused.linear_relu_dropout(x, cnn.randn(5, 4), b, 0) end,
             "linear: input has 6 features")
    assert.is_nil(cnn.fused.linear_relu_dropout(x, w, b, 1))                     -- p = 1
    assert.is_nil(cnn.fused.linear_relu_dropout(x:double(), w, b, 0.5))          -- mixed dtypes
    local y = cnn.fused.linear_relu_dropout(x, w, nil, 0)
    H.assert_close(y, F.relu(F.linear(x, w)), 0, 0, "direct call")
  end)
end)
