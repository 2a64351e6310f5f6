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
