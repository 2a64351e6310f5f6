-- quantize_spec.lua -- int8 inference: F.conv2d_int8 (core/cpu/conv_int8.c,
-- oneDNN u8 x s8) and cnn.quantize (stdlib/quantize.lua, nn/quantized.lua).
--
-- Evidence, none comparing a path with itself:
--  * F.conv2d_int8 against a naive integer reference written here (Lua
--    rounding half to even, integer sums in Lua numbers through
--    helpers.conv2d_ref, then the scales and bias), on both the oneDNN path
--    and the C integer loop (conv algo "naive");
--  * strides, dilation and groups against float32 F.conv2d of the
--    dequantized operands (exact products, so equal to float rounding);
--  * cnn.quantize: the calibrated scale against max|x| / 127 worked out
--    from the calibration batch itself; outputs near the float network's;
--    and the accuracy of a small network trained on Fashion-MNIST within
--    1 point of float32.
local H = require("helpers")

local function round_half_even(v)
  local f = math.floor(v)
  local d = v - f
  if d > 0.5 or (d == 0.5 and f % 2 == 1) then return f + 1 end
  return f
end

-- the integer levels of x (nested tables), as cnn_conv2d_int8 defines them
local function quantize_table(t, scale)
  if type(t) == "number" then
    local q = round_half_even(t / scale)
    return math.max(-128, math.min(127, q))
  end
  local out = {}
  for i, v in ipairs(t) do out[i] = quantize_table(v, scale) end
  return out
end

-- y = acc * x_scale * w_scale[k] + b[k] (then ReLU), acc exact
local function int8_reference(x, wq, ws, b, xs, pad, relu)
  local acc = H.conv2d_ref(quantize_table(x:totable(), xs), wq:totable(), nil, pad)
  local s, bias = ws:totable(), b and b:totable()
  for n = 1, #acc do
    for k = 1, #acc[n] do
      for i = 1, #acc[n][k] do
        for j = 1, #acc[n][k][i] do
          local v = acc[n][k][i][j] * xs * s[k] + (bias and bias[k] or 0)
          acc[n][k][i][j] = relu and math.max(v, 0) or v
        end
      end
    end
  end
  return acc
end

local function random_operands(K, C)
  local wq = (cnn.randn(K, C, 3, 3) * 60):round():clamp(-127, 127)
  local ws = cnn.rand(K) * 0.01 + 0.002
  return wq, ws, cnn.randn(K)
end

local with_algo = H.with_conv_algo

describe("F.conv2d_int8", function()
  for _, algo in ipairs({ "auto", "naive" }) do
    it("matches the integer reference, signed input, padding (" .. algo .. ")", function()
      cnn.manual_seed(3)
      local x = cnn.randn(2, 3, 7, 5)
      local wq, ws, b = random_operands(4, 3)
      with_algo(algo, function()
        local y = F.conv2d_int8(x, wq, ws, b, 0.02, { padding = 1 })
        H.assert_shape(y, { 2, 4, 7, 5 })
        H.assert_close(y, int8_reference(x, wq, ws, b, 0.02, 1), 1e-5, 1e-5)
      end)
    end)

    it("matches the reference with relu, a non-negative input and saturation (" .. algo .. ")", function()
      cnn.manual_seed(4)
      local x = cnn.rand(1, 3, 6, 6) * 4 -- up to 4 / 0.02 = 200 levels: clamped to 127
      local wq, ws, b = random_operands(5, 3)
      with_algo(algo, function()
        local y = F.conv2d_int8(x, wq, ws, b, 0.02, { relu = true })
        H.assert_close(y, int8_reference(x, wq, ws, b, 0.02, 0, true), 1e-5, 1e-5)
        assert.is_true(y:min():item() >= 0)
      end)
    end)
  end

  it("strides, dilation and groups agree with float32 conv2d of the dequantized operands", function()
    cnn.manual_seed(5)
    local x = cnn.randn(3, 6, 11, 9)
    local wq = (cnn.randn(4, 3, 3, 2) * 50):round():clamp(-127, 127)
    local ws, b, xs = cnn.rand(4) * 0.01 + 0.001, cnn.randn(4), 0.025
    local opts = { stride = { 2, 1 }, padding = { 1, 0, 2, 1 }, dilation = { 1, 2 }, groups = 2 }
    local y = F.conv2d_int8(x, wq, ws, b, xs, opts)
    local xd = (x / xs):round():clamp(-128, 127) * xs
    local ref = F.conv2d(xd, wq * ws:view(4, 1, 1, 1), b,
                         { stride = { 2, 1 }, padding = { 1, 0, 2, 1 }, dilation = { 1, 2 }, groups = 2 })
    H.assert_close(y, ref, 1e-5, 1e-4)
  end)

  it("rejects bad input with the op's name", function()
    local x, wq, ws = cnn.randn(1, 2, 5, 5), cnn.zeros(3, 2, 3, 3), cnn.ones(3)
    H.raises(function() F.conv2d_int8(x:double(), wq, ws, nil, 0.1) end, "conv2d_int8", "float64")
    H.raises(function() F.conv2d_int8(x, wq + 0.5, ws, nil, 0.1) end, "conv2d_int8", "whole numbers")
    H.raises(function() F.conv2d_int8(x, wq + 128, ws, nil, 0.1) end, "conv2d_int8", "[-127, 127]")
    H.raises(function() F.conv2d_int8(x, wq, cnn.ones(2), nil, 0.1) end, "conv2d_int8", "weight scales")
    H.raises(function() F.conv2d_int8(x, wq, ws * 0, nil, 0.1) end, "conv2d_int8", "weight scale")
    H.raises(function() F.conv2d_int8(x, wq, ws, nil, 0) end, "conv2d_int8", "input scale")
    H.raises(function() F.conv2d_int8(x, wq, ws, nil, 0 / 0) end, "conv2d_int8", "input scale")
    H.raises(function() F.conv2d_int8(cnn.randn(1, 3, 5, 5), wq, ws, nil, 0.1) end, "channels")
    H.raises(function() F.conv2d_int8(x, wq, ws, nil, 0.1, { bogus = 1 }) end, "bogus")
    local g = cnn.randn(1, 2, 5, 5)
    g.requires_grad = true
    assert.is_false(F.conv2d_int8(g, wq, ws, nil, 0.1).requires_grad) -- inference only: not recorded
  end)
end)

local function small_net()
  return nn.Sequential(nn.Conv2d(1, 8, 3, { padding = 1 }), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(8, 16, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(16 * 7 * 7, 32), nn.ReLU(), nn.Linear(32, 10))
end

describe("cnn.quantize", function()
  it("replaces conv, linear and fused layers; scales from the calibration batch", function()
    cnn.manual_seed(6)
    local net = small_net():eval():fuse()
    local calib = cnn.randn(8, 1, 28, 28)
    local q = cnn.quantize(net, { calib })
    assert.are.equal("QuantizedConv2d", q[1].__name)
    assert.is_true(q[1].relu)
    assert.are.equal("QuantizedLinear", q[9].__name)
    assert.is_true(q[9].relu)
    assert.is_false(q[11].relu)
    assert.are.equal("Fused", net[1].__name) -- the original is unchanged
    H.assert_close(q[1].input_scale, { calib:abs():max():item() / 127 }, 0, 1e-6)
    local wmax = net[1].layer.weight:abs():reshape(8, -1):max(2)
    H.assert_close(q[1].weight_scale, wmax / 127, 0, 1e-6)
    local x = cnn.randn(4, 1, 28, 28)
    local want, got = net(x), q(x)
    assert.is_true((want - got):abs():max():item() < 0.05 * want:abs():max():item())
  end)

  it("exports to ONNX in QDQ form: the checker accepts it, cnn.onnx.load runs it", function()
    cnn.manual_seed(9)
    local net = small_net():eval():fuse()
    local q = cnn.quantize(net, cnn.randn(8, 1, 28, 28))
    local path = (os.getenv("CNNSH_TEST_TMP") or "/tmp") .. "/quantize_spec_qdq.onnx"
    cnn.onnx.export(q, cnn.randn(1, 1, 28, 28), path, { dynamic_batch = true })
    H.assert_onnx_checked(path)
    local ops = {}
    for _, n in ipairs(cnn.io.onnx_read(path).nodes) do ops[n.op_type] = (ops[n.op_type] or 0) + 1 end
    -- per quantized layer (2 conv, 2 linear): Quantize+Dequantize of the input, Dequantize of the weight
    assert.are.equal(4, ops.QuantizeLinear)
    assert.are.equal(8, ops.DequantizeLinear)
    local loaded = cnn.onnx.load(path)
    local x = cnn.randn(3, 1, 28, 28)
    H.assert_close(loaded(x), q(x), 1e-5, 1e-4)
    os.remove(path)
  end)

  it("percentile calibration clips outliers", function()
    cnn.manual_seed(7)
    local net = small_net():eval()
    local calib = cnn.randn(4, 1, 28, 28)
    calib[1][1][1][1] = 100 -- one outlier
    local mm = cnn.quantize(net, calib)
    local pc = cnn.quantize(net, calib, { method = "percentile", percentile = 99.9 })
    H.assert_close(mm[1].input_scale, { 100 / 127 }, 0, 1e-6)
    -- 99.9% of N(0,1) values lie below ~3.3: the scale ignores the outlier
    local s = pc[1].input_scale:item() * 127
    assert.is_true(s > 2.5 and s < 4.5, "percentile amax " .. s)
  end)

  it("checks its arguments", function()
    local net = small_net()
    H.raises(function() cnn.quantize(net, cnn.randn(1, 1, 28, 28)) end, "eval")
    net:eval()
    H.raises(function() cnn.quantize(net, cnn.randn(1, 1, 28, 28), { method = "kl" }) end, "method")
    H.raises(function() cnn.quantize(net, cnn.randn(1, 1, 28, 28), { percentile = 0 }) end, "percentile")
    H.raises(function() cnn.quantize(net, cnn.randn(1, 1, 28, 28), { bins = 3 }) end, "unknown option")
    H.raises(function() cnn.quantize(net, {}) end, "no calibration batches")
    H.raises(function() cnn.quantize(42, {}) end, "nn.Module")
  end)

  it("keeps a trained Fashion-MNIST network within 1 point of float32 accuracy", function()
    cnn.manual_seed(8)
    local normalize = data.transforms.Normalize(0.2860, 0.3530)
    local train_set = data.FashionMNIST{ train = true, transform = normalize }
    local test_set = data.FashionMNIST{ train = false, transform = normalize }
    local first = function(n) local t = {} for i = 1, n do t[i] = i end return t end
    local net = small_net()
    train.fit(net, data.DataLoader(data.Subset(train_set, first(3000)), { batch_size = 64, shuffle = true }),
              { epochs = 1, optimizer = optim.Adam(net:parameters(), { lr = 3e-3 }), progress = false })
    net:eval():fuse()
    local calib = data.DataLoader(data.Subset(train_set, first(512)), { batch_size = 128 })
    local q = cnn.quantize(net, calib)
    local loader = data.DataLoader(data.Subset(test_set, first(2000)), { batch_size = 250 })
    local function accuracy(m)
      local correct = 0
      cnn.no_grad(function()
        for x, y in loader do correct = correct + m(x):argmax(2):eq(y):long():sum():item() end
      end)
      return 100 * correct / 2000
    end
    local a32, a8 = accuracy(net), accuracy(q)
    assert.is_true(a32 > 60, "float32 accuracy " .. a32)
    assert.is_true(math.abs(a32 - a8) <= 1, ("float32 %.2f%%, int8 %.2f%%"):format(a32, a8))
  end)
end)
