-- activations_spec.lua -- the activations of issue 13 through the bindings:
-- F.* and nn.* against their mathematical definitions written here in Lua
-- (values at chosen points, the kinks included), their derivatives by
-- finite differences in float64 and, at the kinks, PyTorch's chosen values;
-- the modules' options, printing and errors.
package.path = "./?.lua;" .. package.path
local H = require("helpers")
local close, raises = H.assert_close, H.raises

-- f applied to every element of the list xs
local function map(xs, f)
  local r = {}
  for i, v in ipairs(xs) do r[i] = f(v) end
  return r
end

-- The gradient of sum(act(x)) at the points xs (float64), as a list.
local function grad_at(act, xs)
  local x = cnn.tensor(xs, "float64"):requires_grad_()
  act(x):sum():backward()
  return H.flat(x.grad)
end

-- float64 tensor of the list xs (exact comparisons)
local function f64(xs) return cnn.tensor(xs, "float64") end

-- finite differences of sum(act(x)) at points away from the kinks
local function fd_check(act, xs)
  H.gradcheck(function(x) return act(x):sum() end, { cnn.tensor(xs, "float64") }, 1e-6)
end

describe("hardtanh and relu6", function()
  local function hardtanh(v, lo, hi) return math.min(math.max(v, lo), hi) end
  local xs = { -7, -1, -0.999, -0.25, 0, 0.5, 1, 3, 6, 6.5 }

  it("F.hardtanh clamps with PyTorch's defaults [-1, 1]", function()
    close(F.hardtanh(f64(xs)), map(xs, function(v) return hardtanh(v, -1, 1) end), 0, 0)
    close(F.hardtanh(f64(xs), -2, 3), map(xs, function(v) return hardtanh(v, -2, 3) end), 0, 0)
    close(F.hardtanh(f64(xs), { max_val = 0.5 }), map(xs, function(v) return hardtanh(v, -1, 0.5) end), 0, 0)
  end)

  it("F.relu6 is hardtanh on [0, 6]", function()
    close(F.relu6(f64(xs)), map(xs, function(v) return hardtanh(v, 0, 6) end), 0, 0)
  end)

  it("has gradient 1 strictly inside, 0 at the limits and beyond", function()
    close(grad_at(F.relu6, { -1, 0, 1e-9, 3, 6 - 1e-9, 6, 9 }), { 0, 0, 1, 1, 1, 0, 0 }, 0, 0)
    close(grad_at(function(x) return F.hardtanh(x, -1, 2) end, { -1, 2, 0 }), { 0, 0, 1 }, 0, 0)
    fd_check(F.relu6, { -3, 0.5, 2, 5.5, 8 })
    fd_check(function(x) return F.hardtanh(x, -0.5, 1.5) end, { -2, -0.4, 1, 1.49, 1.6 })
  end)

  it("keeps integer dtypes (limits truncated, as PyTorch)", function()
    local y = F.relu6(cnn.tensor({ -3, 2, 9 }, "int64"))
    assert.equals("int64", y.dtype)
    close(y, { 0, 2, 6 }, 0, 0)
  end)

  it("nn.ReLU6 and nn.Hardtanh", function()
    local x = f64(xs)
    close(nn.ReLU6()(x), F.relu6(x), 0, 0)
    close(nn.Hardtanh()(x), F.hardtanh(x), 0, 0)
    close(nn.Hardtanh(-2, 2)(x), F.hardtanh(x, -2, 2), 0, 0)
    close(nn.Hardtanh({ min_val = 0, max_val = 6 })(x), F.relu6(x), 0, 0)
    assert.equals("ReLU6()", tostring(nn.ReLU6()))
    assert.equals("ReLU6(inplace=True)", tostring(nn.ReLU6({ inplace = true })))
    assert.equals("Hardtanh(min_val=-2.0, max_val=2.0)", tostring(nn.Hardtanh(-2, 2)))
  end)

  it("rejects bad options", function()
    local x = f64(xs)
    raises(function() F.hardtanh(x, 0 / 0) end, "hardtanh", "min_val", "finite")
    raises(function() F.hardtanh(x, { min = 0 }) end, "F.hardtanh", "unknown option 'min'", "max_val, min_val")
    raises(function() nn.Hardtanh(1, 1) end, "nn.Hardtanh", "max_val (1) must be greater than min_val (1)")
    raises(function() nn.Hardtanh({ maxval = 2 }) end, "nn.Hardtanh", "unknown option 'maxval'")
    raises(function() nn.Hardtanh("a") end, "nn.Hardtanh", "min_val")
    raises(function() nn.ReLU6(1, 2) end, "nn.ReLU6 takes at most 1 arguments")
    raises(function() nn.ReLU6({ inplace = 1 }) end, "nn.ReLU6", "inplace")
    raises(function() F.hardtanh(cnn.tensor({ 1, 2 }, "uint8"), -1, 1) end, "hardtanh", "uint8")
  end)

  it("has help", function()
    for _, f in ipairs({ F.hardtanh, F.relu6, nn.ReLU6, nn.Hardtanh }) do
      assert.truthy(cnn.doc[f], "missing help")
    end
  end)
end)

describe("silu, hardswish, hardsigmoid, mish, softplus, gelu", function()
  local function sigmoid(v) return 1 / (1 + math.exp(-v)) end
  local function softplus(v) return math.log(1 + math.exp(v)) end
  local function tanh(v) return (math.exp(2 * v) - 1) / (math.exp(2 * v) + 1) end
  local function gelu_tanh(v)
    return 0.5 * v * (1 + tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3)))
  end
  local function relu6(v) return math.min(math.max(v, 0), 6) end
  local xs = { -5, -3, -2.5, -1, -0.25, 0, 0.5, 1, 2.5, 3, 4 }
  local smooth = { -4, -2.5, -1, -0.25, 0.3, 1, 2.5, 4 } -- away from the kinks

  local cases = {
    { "silu", F.silu, function(v) return v * sigmoid(v) end },
    { "hardswish", F.hardswish, function(v) return v * relu6(v + 3) / 6 end },
    { "hardsigmoid", F.hardsigmoid, function(v) return relu6(v + 3) / 6 end },
    { "mish", F.mish, function(v) return v * tanh(softplus(v)) end },
    { "softplus", F.softplus, softplus },
    { "softplus(beta 2, threshold 3)", function(x) return F.softplus(x, 2, 3) end,
      function(v) return 2 * v > 3 and v or softplus(2 * v) / 2 end },
    { "softplus{beta = 0.5}", function(x) return F.softplus(x, { beta = 0.5 }) end,
      function(v) return softplus(0.5 * v) / 0.5 end },
    { "gelu tanh", function(x) return F.gelu(x, { approximate = "tanh" }) end, gelu_tanh },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. " matches its definition and finite differences", function()
      close(c[2](f64(xs)), map(xs, c[3]), 1e-14, 1e-13)
      close(c[2](cnn.tensor(xs)), map(xs, c[3]), 1e-6, 1e-6) -- float32
      fd_check(c[2], smooth)
    end)
  end

  it("takes PyTorch's values of the derivative at the kinks", function()
    close(grad_at(F.hardswish, { -3, 3, -3.5, 3.5 }), { -0.5, 1.5, 0, 1 }, 1e-15, 0)
    close(grad_at(F.hardsigmoid, { -3, 3, 0 }), { 0, 0, 1 / 6 }, 1e-15, 0)
    close(grad_at(function(x) return F.softplus(x, 1, 2) end, { 2, 2.5 }), { sigmoid(2), 1 }, 1e-15, 0)
  end)

  it("F.gelu defaults to the erf form", function()
    local x = f64(xs)
    close(F.gelu(x), F.gelu(x, { approximate = "none" }), 0, 0)
    close(F.gelu(x), x:gelu(), 0, 0)
    assert.is_true((F.gelu(x) - F.gelu(x, { approximate = "tanh" })):abs():max():item() > 1e-5)
  end)

  it("nn modules call them", function()
    local x = f64(xs)
    close(nn.SiLU()(x), F.silu(x), 0, 0)
    close(nn.Hardswish()(x), F.hardswish(x), 0, 0)
    close(nn.Hardsigmoid()(x), F.hardsigmoid(x), 0, 0)
    close(nn.Mish()(x), F.mish(x), 0, 0)
    close(nn.Softplus()(x), F.softplus(x), 0, 0)
    close(nn.Softplus(2, 3)(x), F.softplus(x, 2, 3), 0, 0)
    close(nn.Softplus({ threshold = 1 })(x), F.softplus(x, 1, 1), 0, 0)
    close(nn.GELU()(x), F.gelu(x), 0, 0)
    close(nn.GELU({ approximate = "tanh" })(x), F.gelu(x, { approximate = "tanh" }), 0, 0)
    close(nn.GELU("tanh")(x), F.gelu(x, { approximate = "tanh" }), 0, 0)
    assert.equals("SiLU()", tostring(nn.SiLU()))
    assert.equals("Hardswish(inplace=True)", tostring(nn.Hardswish({ inplace = true })))
    assert.equals("Softplus(beta=1.0, threshold=20.0)", tostring(nn.Softplus()))
    assert.equals("GELU(approximate='tanh')", tostring(nn.GELU({ approximate = "tanh" })))
    assert.equals("GELU()", tostring(nn.GELU()))
    -- integer inputs compute in float32, as PyTorch's promotion of these ops
    assert.equals("float32", F.silu(cnn.tensor({ 1, 2 }, "int64")).dtype)
  end)

  it("rejects bad options", function()
    local x = f64(xs)
    raises(function() F.gelu(x, { approximate = "fast" }) end, "gelu", "'none' or 'tanh'", "fast")
    raises(function() F.gelu(x, { approx = "tanh" }) end, "F.gelu", "unknown option 'approx'")
    raises(function() F.gelu(x, "tanh") end, "table expected")
    raises(function() F.softplus(x, 0) end, "softplus", "beta must not be 0")
    raises(function() F.softplus(x, 1, 1 / 0) end, "softplus", "threshold", "finite")
    raises(function() F.softplus(x, { betta = 1 }) end, "F.softplus", "unknown option 'betta'")
    raises(function() nn.GELU({ approximate = "erf" }) end, "nn.GELU", "approximate")
    raises(function() nn.Softplus(0) end, "nn.Softplus", "beta")
    raises(function() nn.Mish({ foo = 1 }) end, "nn.Mish", "unknown option 'foo'")
  end)

  it("has help", function()
    for _, f in ipairs({ F.silu, F.hardswish, F.hardsigmoid, F.mish, F.softplus, F.gelu, nn.SiLU,
                         nn.Hardswish, nn.Hardsigmoid, nn.Mish, nn.Softplus, nn.GELU }) do
      assert.truthy(cnn.doc[f], "missing help")
    end
  end)
end)

describe("ONNX export and load of the activations", function()
  local tmp = (os.getenv("CNNSH_TEST_TMP") or "/tmp") .. "/activations_spec.onnx"
  local layers = {
    { "ReLU6", function() return nn.ReLU6() end },
    { "Hardtanh", function() return nn.Hardtanh(-0.5, 2) end },
    { "SiLU", function() return nn.SiLU() end },
    { "Hardswish", function() return nn.Hardswish() end },
    { "Hardsigmoid", function() return nn.Hardsigmoid() end },
    { "Mish", function() return nn.Mish() end },
    { "Softplus", function() return nn.Softplus() end },
    { "Softplus(2, 20)", function() return nn.Softplus(2, 20) end },
    { "GELU tanh", function() return nn.GELU({ approximate = "tanh" }) end },
  }
  for _, l in ipairs(layers) do
    for _, opset in ipairs(l[1] == "Hardswish" and { 13, 17 } or { 17 }) do
      it(l[1] .. " at opset " .. opset .. " round-trips with the same outputs", function()
        local net = nn.Sequential(nn.Linear(4, 6), l[2]())
        net:eval()
        local x = cnn.randn(3, 4) * 3
        cnn.onnx.export(net, x, tmp, { opset = opset })
        H.assert_onnx_checked(tmp)
        local m = cnn.onnx.load(tmp)
        close(m(x), net(x), 1e-5, 1e-5)
      end)
    end
  end
  it("refuses a Softplus threshold below 20", function()
    raises(function() cnn.onnx.export(nn.Softplus(1, 1), cnn.randn(2), tmp) end, "Softplus", "threshold")
  end)
end)

describe("dropout2d", function()
  it("zeroes whole channels, scales the rest by 1/(1-p), and eval is the identity", function()
    cnn.manual_seed(5)
    local x = cnn.ones(4, 8, 3, 3, "float64"):requires_grad_()
    local y = F.dropout2d(x, 0.5)
    local zeros, kept = 0, 0
    for n = 1, 4 do for c = 1, 8 do
      local ch = y[n][c]
      local lo, hi = ch:min():item(), ch:max():item()
      assert.equals(lo, hi) -- one value per channel
      if lo == 0 then zeros = zeros + 1 else assert.equals(2, lo); kept = kept + 1 end
    end end
    assert.is_true(zeros > 0 and kept > 0)
    y:sum():backward()
    close(x.grad, y:detach(), 0, 0) -- the gradient is the mask
    local m = nn.Dropout2d(0.3)
    m:eval()
    close(m(x), x, 0, 0)
    close(F.dropout2d(x, 0.5, false), x, 0, 0)
    assert.equals("float64", F.dropout2d(cnn.ones(2, 3, 5, "float64"), 0.2).dtype) -- N x C x L
  end)
  it("rejects bad input", function()
    raises(function() F.dropout2d(cnn.ones(2, 3), 0.5) end, "dropout2d", "2x3")
    raises(function() F.dropout2d(cnn.ones(1, 2, 2, 2), 1.5) end, "dropout2d", "p")
    raises(function() nn.Dropout2d(2) end, "nn.Dropout2d", "p")
    assert.truthy(cnn.doc[F.dropout2d] and cnn.doc[nn.Dropout2d])
  end)
end)

-- cnn.fused.add_relu(a, b): F.relu(a + b) in one op.  Independent of both:
-- values against the definition at chosen points (the kink, -0, NaN, the
-- infinities); then the same bits as the two ops, forward and backward,
-- over broadcasting, channels-last, float64 and an input that needs no
-- gradient; the gradient at the kink is relu's (0 at 0).
describe("cnn.fused.add_relu", function()
  it("is relu(a + b) at chosen points, NaN and the infinities included", function()
    local inf = math.huge
    local a = cnn.tensor({ -2, -1, 0, 0.5, 3, -0.0, inf, -inf, 1, 0 / 0 }, "float64")
    local b = cnn.tensor({ 1, 1, 0, -0.5, -1, 0, -1, 5, -inf, 1 }, "float64")
    local y = cnn.fused.add_relu(a, b):totable()
    local want = { 0, 0, 0, 0, 2, 0, inf, 0, 0 }
    for i = 1, 9 do assert.are.equal(want[i], y[i], "element " .. i) end
    assert.is_true(y[10] ~= y[10], "NaN passes")
    assert.are.equal("AddReluBackward", cnn.fused.add_relu(a:requires_grad_(), b).grad_fn)
  end)

  it("gives F.relu(a + b)'s bits and gradients: broadcast, channels-last, float64", function()
    cnn.manual_seed(4)
    local same = function(u, v) return u:eq(v):sum():item() == u:numel() end
    local cases = {
      { "same shape", { 2, 3, 4, 5 }, { 2, 3, 4, 5 }, "float32" },
      { "b broadcast", { 2, 3, 4, 5 }, { 3, 1, 1 }, "float32" },
      { "a broadcast", { 1, 5 }, { 4, 1, 5 }, "float64" },
      { "channels-last", { 2, 16, 3, 3 }, { 2, 16, 3, 3 }, "float32", true },
    }
    for _, c in ipairs(cases) do
      local what, sa, sb, dt, cl = c[1], c[2], c[3], c[4], c[5]
      local a0, b0 = cnn.randn(sa, dt), cnn.randn(sb, dt)
      if cl then a0, b0 = a0:contiguous("channels_last"), b0:contiguous("channels_last") end
      local out = cnn.fused.add_relu(a0, b0)
      local g = cnn.randn(out:size(), dt)
      local function grads(fused, b_needs)
        local a, b = a0:clone():requires_grad_(), b0:clone():requires_grad_(b_needs)
        local y = fused and cnn.fused.add_relu(a, b) or F.relu(a + b)
        y:backward(g)
        return y, a.grad, b.grad
      end
      local y1, ga1, gb1 = grads(true, true)
      local y2, ga2, gb2 = grads(false, true)
      assert.is_true(same(y1, y2), what .. ": forward")
      assert.is_true(same(ga1, ga2) and same(gb1, gb2), what .. ": gradients")
      assert.are.same(b0:size(), gb1:size())
      assert.are.equal(cl or false, y1:is_contiguous("channels_last") and not y1:is_contiguous(), what .. ": layout")
      local _, ga3, gb3 = grads(true, false)
      assert.is_true(same(ga3, ga1) and gb3 == nil, what .. ": b needs no gradient")
    end
    -- at the kink: relu's derivative at 0 is 0
    local a = cnn.tensor({ -1, 2 }):requires_grad_()
    cnn.fused.add_relu(a, cnn.tensor({ 1, -2 })):sum():backward()
    assert.are.same({ 0, 0 }, a.grad:totable())
  end)

  it("refuses shapes that do not broadcast, and non-tensors, naming the op", function()
    H.raises(function() cnn.fused.add_relu(cnn.zeros(2, 3), cnn.zeros(4)) end, "add_relu", "2x3", "4")
    H.raises(function() cnn.fused.add_relu(cnn.zeros(2), 1) end, "add_relu", "Tensor expected")
  end)
end)

-- cnn.fused.batch_norm_add_relu(x, r, ...): F.relu(F.batch_norm(x, ...) + r)
-- in one node.  The same bits as the three ops -- output, the gradients of
-- x, r, weight and bias, the running statistics -- in training and eval,
-- float32 and float64, NCHW and channels-last, and at ResNet-20's shapes
-- (the kernels' other paths); r without a gradient; its refusals.
describe("cnn.fused.batch_norm_add_relu", function()
  local function same(u, v) return u:eq(v):sum():item() == u:numel() end

  it("gives the three ops' bits and gradients", function()
    cnn.manual_seed(6)
    local cases = {
      { { 4, 16, 5, 6 }, "float32" }, { { 4, 16, 5, 6 }, "float64" },
      { { 4, 16, 5, 6 }, "float32", true }, { { 64, 32, 16, 16 }, "float32" },
      { { 8, 64, 8, 8 }, "float32", true }, { { 3, 5 }, "float32" },
    }
    for _, c in ipairs(cases) do
      local shape, dt, cl = c[1], c[2], c[3]
      local C = shape[2]
      local x0, r0, g = cnn.randn(shape, dt), cnn.randn(shape, dt), cnn.randn(shape, dt)
      if cl then x0, r0 = x0:contiguous("channels_last"), r0:contiguous("channels_last") end
      local w0, b0 = cnn.rand({ C }, dt) + 0.5, cnn.randn({ C }, dt)
      for _, training in ipairs({ true, false }) do
        local what = table.concat(shape, "x") .. " " .. dt .. (cl and " channels-last" or "")
                     .. (training and " training" or " eval")
        local function run(fused, r_grad)
          local x, r = x0:clone():requires_grad_(), r0:clone():requires_grad_(r_grad)
          local w, b = w0:clone():requires_grad_(), b0:clone():requires_grad_()
          local rm, rv = cnn.zeros({ C }, dt) + 0.1, cnn.ones({ C }, dt) * 1.5
          local y = fused and cnn.fused.batch_norm_add_relu(x, r, rm, rv, w, b, training, 0.1, 1e-5)
                    or F.relu(F.batch_norm(x, rm, rv, w, b, { training = training }) + r)
          y:backward(g)
          return { y, x.grad, r.grad, w.grad, b.grad, rm, rv }, y
        end
        local a, y = run(true, true)
        local b = run(false, true)
        assert.are.equal("BatchNormAddReluBackward", y.grad_fn, what)
        for k = 1, 7 do assert.is_true(same(a[k], b[k]), what .. ": result " .. k) end
        local c3 = run(true, false)
        assert.is_nil(c3[3], what)
        assert.is_true(same(c3[2], a[2]), what .. ": r without a gradient")
      end
    end
  end)

  it("refuses a residual of another shape or dtype, naming the op and both", function()
    local x = cnn.randn(2, 3, 4, 4)
    H.raises(function() cnn.fused.batch_norm_add_relu(x, cnn.zeros(2, 3, 4), nil, nil, nil, nil, true, 0.1, 1e-5) end,
      "batch_norm_add_relu", "2x3x4 ", "2x3x4x4")
    H.raises(function() cnn.fused.batch_norm_add_relu(x, cnn.zeros(2, 3, 4, 4, "float64"), nil, nil, nil, nil, true, 0.1, 1e-5) end,
      "batch_norm_add_relu", "float64", "float32")
    H.raises(function() cnn.fused.batch_norm_add_relu(x, x, nil, nil, nil, nil, true, 0.1, 0) end,
      "batch_norm_add_relu", "eps")
  end)
end)
