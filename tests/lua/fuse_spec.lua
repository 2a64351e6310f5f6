-- fuse_spec.lua -- net:fuse() (stdlib/nn/fuse.lua): batch norm folded into
-- the convolution or linear layer before it, the activation after it fused
-- into the layer (for a Conv2d without autograd: F.conv2d_act, an eltwise
-- post-op inside oneDNN's convolution).
--
-- Evidence: the folded weights of a 1x1 convolution against values worked
-- out by hand; fused networks against the same network before fusing (a
-- different computation: separate batch norm and activation layers), within
-- 1e-5, in eval mode, for every activation that fuses and for ResNet-18;
-- F.conv2d_act against F.conv2d followed by the activation.
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
    local net = nn.Sequential(nn.BatchNorm2d(2), nn.Conv2d(2, 2, 1), nn.Softmax(2)):eval():fuse()
    assert.are.equal(1, count(net, "BatchNorm2d"))
    assert.are.equal(0, count(net, "Fused")) -- softmax is no elementwise activation
  end)

  -- every activation module that fuses into a Conv2d, with non-default options
  local activations = {
    nn.ReLU(), nn.LeakyReLU(0.2), nn.ELU(0.7), nn.ReLU6(), nn.Hardtanh(-0.5, 0.8), nn.Sigmoid(), nn.Tanh(),
    nn.GELU(), nn.GELU("tanh"), nn.SiLU(), nn.Hardswish(), nn.Hardsigmoid(), nn.Mish(), nn.Softplus(),
    nn.Softplus(2, 10), -- no oneDNN post-op: applied after the convolution
  }

  for _, act in ipairs(activations) do
    it("fuses " .. tostring(act):gsub("\n.*", "") .. " into a convolution: within 1e-5 of the unfused net", function()
      cnn.manual_seed(3)
      local net = with_stats(nn.Sequential(nn.Conv2d(3, 16, 3, { padding = 1 }), nn.BatchNorm2d(16), act,
                                           nn.Conv2d(16, 32, 3, { stride = 2, groups = 2 }), act), { 6, 3, 11, 9 })
      local x = cnn.randn(4, 3, 11, 9) * 2
      local before = cnn.no_grad(function() return net(x) end)
      net:fuse()
      assert.are.equal(2, count(net, "Fused"))
      assert.are.equal(0, count(net, "BatchNorm2d") + count(net, act.__name))
      assert_close(cnn.no_grad(function() return net(x) end), before) -- fused: inside the convolution
      assert_close(net(x), before) -- recorded: the convolution, then the activation
    end)
  end

  it("F.conv2d_act equals F.conv2d then the activation, with and without autograd", function()
    cnn.manual_seed(4)
    local x, w, b = cnn.randn(2, 16, 8, 7) * 2, cnn.randn(32, 16, 3, 3) * 0.2, cnn.randn(32)
    local o = { padding = 1, stride = { 1, 2 } }
    local specs = {
      { "relu", F.relu }, { { "leaky_relu", 0.3 }, function(y) return F.leaky_relu(y, 0.3) end },
      { { "elu", 0.5 }, function(y) return F.elu(y, 0.5) end }, { "relu6", F.relu6 },
      { { "hardtanh", -2, 0.5 }, function(y) return F.hardtanh(y, -2, 0.5) end }, { "sigmoid", F.sigmoid },
      { "tanh", F.tanh }, { "gelu", F.gelu }, { "gelu_tanh", function(y) return F.gelu(y, { approximate = "tanh" }) end },
      { "silu", F.silu }, { "hardswish", F.hardswish }, { "hardsigmoid", F.hardsigmoid }, { "mish", F.mish },
      { "softplus", F.softplus }, { { "softplus", 0.5, 3 }, function(y) return F.softplus(y, 0.5, 3) end },
    }
    for _, s in ipairs(specs) do
      local want = cnn.no_grad(function() return s[2](F.conv2d(x, w, b, o)) end)
      assert_close(cnn.no_grad(function() return F.conv2d_act(x, w, b, s[1], o) end), want)
      w.requires_grad = true
      local y = F.conv2d_act(x, w, b, s[1], o)
      assert(y.grad_fn, "recorded with a weight that requires grad")
      assert_close(y, want)
      w.requires_grad = false
    end
  end)

  it("fuses ResNet-18's blocks (fuse_chains): within 1e-5, every batch norm folded", function()
    cnn.manual_seed(8)
    local net = with_stats(models.resnet18({ num_classes = 10 }), { 4, 3, 32, 32 })
    local x = cnn.randn(2, 3, 32, 32)
    local before = cnn.no_grad(function() return net(x) end)
    net:fuse()
    assert.are.equal(0, count(net, "BatchNorm2d"))
    assert.are.equal(9, count(net, "Fused")) -- the stem and conv1 of each of the 8 blocks
    assert_close(cnn.no_grad(function() return net(x) end), before)
  end)

  it("post_ops = false keeps the activation after the layer, with the same outputs", function()
    cnn.manual_seed(12)
    local function make()
      return with_stats(nn.Sequential(nn.Conv2d(2, 16, 3), nn.BatchNorm2d(16), nn.SiLU(), nn.Conv2d(16, 4, 1),
                                      nn.ReLU()), { 4, 2, 7, 7 })
    end
    local a, b = make(), make()
    b:load_state_dict(a:state_dict())
    local x = cnn.randn(3, 2, 7, 7)
    a:fuse()
    b:fuse({ post_ops = false })
    assert.are.equal(2, count(b, "Fused"))
    assert_close(cnn.no_grad(function() return b(x) end), cnn.no_grad(function() return a(x) end))
    assert.has_error(function() b:fuse({ post_op = false }) end)
  end)

  it("runs a hooked fused layer unfused, so summary and calibration see it", function()
    local net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU()):eval():fuse()
    local seen = 0
    local h = net[1].layer:register_forward_pre_hook(function() seen = seen + 1 end)
    cnn.no_grad(function() return net(cnn.randn(1, 1, 5, 5)) end)
    h:remove()
    assert.are.equal(1, seen)
  end)

  it("exports a network fused with other activations to ONNX with the same outputs", function()
    cnn.manual_seed(6)
    local net = with_stats(nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.SiLU(), nn.Conv2d(4, 4, 1),
                                         nn.GELU("tanh"), nn.Conv2d(4, 2, 1), nn.Hardswish(), nn.Flatten(),
                                         nn.Linear(2 * 4 * 4, 3)), { 4, 1, 6, 6 }):fuse()
    assert.are.equal(3, count(net, "Fused"))
    local path = (os.getenv("CNNSH_TEST_TMP") or "/tmp") .. "/fuse_spec_acts.onnx"
    local x = cnn.randn(2, 1, 6, 6)
    cnn.onnx.export(net, x, path, { dynamic_batch = true })
    H.assert_onnx_checked(path)
    assert_close(cnn.onnx.load(path)(x), cnn.no_grad(function() return net(x) end))
    os.remove(path)
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
