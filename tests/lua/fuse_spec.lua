-- fuse_spec.lua -- net:fuse() (stdlib/nn/fuse.lua): batch norm folded into
-- the convolution or linear layer before it, ReLU fused into the layer.
--
-- Evidence: the folded weights of a 1x1 convolution against values worked
-- out by hand; fused networks against the same network before fusing (a
-- different computation: separate batch norm and ReLU layers), within 1e-5.
local H = require("helpers")

local function assert_close(a, b, atol)
  local ok, msg = H.compare(a, b, atol or 1e-5, 0)
  assert(ok, msg)
end

local function with_stats(net, shape)
  net:train()
  for _ = 1, 3 do net(cnn.randn(table.unpack(shape))) end
  return net:eval()
end

local function count(net, name)
  local n = 0
  for _, m in ipairs(net:modules()) do if m.__name == name then n = n + 1 end end
  return n
end

describe("net:fuse", function()
  it("folds batch norm into a convolution: weights worked out by hand", function()
    local conv = nn.Conv2d(1, 2, 1)
    local bn = nn.BatchNorm2d(2)
    cnn.no_grad(function()
      conv.weight:copy_(cnn.tensor({ 2, -1 }):view(2, 1, 1, 1))
      conv.bias:copy_(cnn.tensor({ 1, 0.5 }))
      bn.weight:copy_(cnn.tensor({ 3, 1 }))
      bn.bias:copy_(cnn.tensor({ 0.25, -1 }))
      bn.running_mean:copy_(cnn.tensor({ 0.5, 2 }))
      bn.running_var:copy_(cnn.tensor({ 4 - 1e-5, 0.25 - 1e-5 }))
    end)
    local net = nn.Sequential(conv, bn):eval():fuse()
    -- s = gamma / sqrt(var + eps) = {3 / 2, 1 / 0.5} = {1.5, 2}
    -- W' = W * s = {3, -2}; b' = (b - mean) * s + beta = {0.5 * 1.5 + 0.25, -1.5 * 2 - 1} = {1, -4}
    assert_close(net[1].weight:view(2), { 3, -2 })
    assert_close(net[1].bias, { 1, -4 })
    assert.are.equal("Identity", net[2].__name)
  end)

  it("keeps a CNN's outputs within 1e-5 (conv + BN + ReLU, conv without bias, linear + BN1d)", function()
    cnn.manual_seed(11)
    local net = with_stats(nn.Sequential(
      nn.Conv2d(3, 6, 3, { padding = 1 }), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2),
      nn.Conv2d(6, 8, 3, { stride = 2, bias = false }), nn.BatchNorm2d(8), nn.ReLU(),
      nn.Flatten(), nn.Linear(8 * 3 * 3, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4)), { 8, 3, 14, 14 })
    local x = cnn.randn(5, 3, 14, 14)
    local before = net(x)
    net:fuse()
    assert.are.equal(0, count(net, "BatchNorm2d") + count(net, "BatchNorm1d") + count(net, "ReLU"))
    assert.are.equal(3, count(net, "Fused"))
    assert_close(cnn.no_grad(function() return net(x) end), before)
    assert_close(net(x), before) -- the recorded (out-of-place) path too
  end)

  it("leaves a fused network differentiable", function()
    local net = with_stats(nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU()), { 6, 4 }):fuse()
    local x = cnn.randn(2, 4)
    net(x):sum():backward()
    local layer = net[1].layer
    assert(layer.weight.grad and layer.bias.grad, "fused layer parameters get gradients")
  end)

  it("refuses a network in training mode", function()
    local net = nn.Sequential(nn.Conv2d(1, 1, 1), nn.BatchNorm2d(1))
    assert.has_error(function() net:fuse() end,
      "fuse: call net:eval() first (folding batch norm uses the running statistics)")
  end)

  it("leaves batch norm alone where nothing precedes it or the shapes do not match", function()
    local net = nn.Sequential(nn.BatchNorm2d(2), nn.Conv2d(2, 2, 1), nn.Sigmoid()):eval():fuse()
    assert.are.equal(1, count(net, "BatchNorm2d"))
    assert.are.equal(0, count(net, "Fused"))
  end)

  it("exports a fused network to ONNX with the same outputs", function()
    cnn.manual_seed(5)
    local net = with_stats(nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                                         nn.Linear(4 * 4 * 4, 3)), { 4, 1, 6, 6 }):fuse()
    local path = (os.getenv("CNNSH_TEST_TMP") or "/tmp") .. "/fuse_spec.onnx"
    local x = cnn.randn(2, 1, 6, 6)
    cnn.onnx.export(net, x, path, { dynamic_batch = true })
    assert_close(cnn.onnx.load(path)(x), cnn.no_grad(function() return net(x) end))
  end)
end)
