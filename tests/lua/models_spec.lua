-- models_spec.lua -- the model zoo (stdlib/models/): every model is built,
-- its parameters counted against the published figure (torchvision's
-- model cards, and torchvision itself for the MobileNetV2 widths; He et
-- al. for ResNet-20), its module names checked against
-- torchvision's, and a forward and a backward run at a small input size.
-- The large ones (VGG, ResNet-18 at 224x224 with its MACs) are in
-- models_slow_spec.lua.
local H = require("helpers")

local count = models.count_parameters

-- A forward and a backward at a small size: the output has the expected
-- shape and every parameter receives a finite gradient of its own shape,
-- not all zero (a layer left out of the graph would have none).
local function forward_backward(net, shape, classes)
  cnn.manual_seed(1)
  local x = cnn.randn(table.unpack(shape))
  local out = net(x)
  H.assert_shape(out, { shape[1], classes })
  local loss = (out * out):mean()
  loss:backward()
  for name, p in net:named_parameters() do
    assert(p.grad ~= nil, name .. " got no gradient")
    H.assert_shape(p.grad, p.shape)
    local g = p.grad:abs():sum():item()
    assert(g == g and g < math.huge, name .. ": gradient not finite")
    assert(g > 0, name .. ": gradient is all zero")
  end
end

local function has_names(net, names)
  local got = {}
  for name in net:named_parameters() do got[name] = true end
  for name in net:named_buffers() do got[name] = true end
  for _, n in ipairs(names) do assert(got[n], "no tensor named " .. n) end
end

describe("models.lenet5", function()
  it("has LeNet-5's 61,706 parameters: 156 + 2,416 + 48,120 + 10,164 + 850", function()
    assert.equal(156 + 2416 + 48120 + 10164 + 850, 61706)
    assert.equal(61706, count(models.lenet5()))
    -- a 3-class head: the last layer is 84 * 3 + 3
    assert.equal(61706 - 850 + 84 * 3 + 3, count(models.lenet5{ num_classes = 3 }))
  end)

  it("runs forward and backward on 28x28, and 32x32 with padding = 0", function()
    forward_backward(models.lenet5(), { 3, 1, 28, 28 }, 10)
    forward_backward(models.lenet5{ padding = 0, in_channels = 3, num_classes = 4 }, { 2, 3, 32, 32 }, 4)
  end)

  it("names its layers features.* and classifier.*", function()
    has_names(models.lenet5(), { "features.1.weight", "features.4.bias", "classifier.6.weight" })
  end)
end)

describe("models.resnet20", function()
  it("has 272,474 parameters (He et al.'s 0.27M, projection shortcuts)", function()
    -- by hand: stem 432 + 32; stage 1: 6 convs 16*16*9 and 6 BN (32 each);
    -- stage 2: 16*32*9 + 5 * 32*32*9, 6 BN (64), shortcut 16*32 + 64;
    -- stage 3: 32*64*9 + 5 * 64*64*9, 6 BN (128), shortcut 32*64 + 128; fc 650
    local expect = 432 + 32 + 6 * 2304 + 6 * 32 + (4608 + 5 * 9216) + 6 * 64 + 512 + 64
                   + (18432 + 5 * 36864) + 6 * 128 + 2048 + 128 + 650
    assert.equal(272474, expect)
    assert.equal(272474, count(models.resnet20()))
  end)

  it("runs forward and backward on 32x32", function()
    forward_backward(models.resnet20(), { 2, 3, 32, 32 }, 10)
  end)

  it("has torchvision's names: conv1, bn1, layer1..3, downsample, fc", function()
    has_names(models.resnet20(), { "conv1.weight", "bn1.num_batches_tracked", "layer1.3.conv2.weight",
      "layer2.1.downsample.1.weight", "layer3.1.downsample.2.running_mean", "fc.bias" })
  end)

  -- The blocks run batch norm + ReLU as one op (models/resnet.lua's bn_relu)
  -- where no hook could tell, and end in cnn.fused.batch_norm_add_relu
  -- (relu(bn2(h) + identity)): the same bits as the separate ops, which run
  -- where the fusion is turned off (nn.Sequential.fuses_bn_relu and
  -- BatchNorm:fuses_relu saying no, add_relu replaced by F.relu(a + b)) or
  -- a hook is set.
  local block_ends = 0
  local function run(net, fuse, x, g)
    local fuses, bn_fuses, add_relu = nn.Sequential.fuses_bn_relu, nn.BatchNorm2d.fuses_relu, cnn.fused.add_relu
    local bn_add_relu = cnn.fused.batch_norm_add_relu
    if not fuse then
      nn.Sequential.fuses_bn_relu = function() return false end
      nn.BatchNorm2d.fuses_relu = function() return false end
      cnn.fused.add_relu = function(a, b) return F.relu(a + b) end
    else
      cnn.fused.batch_norm_add_relu = function(...)
        block_ends = block_ends + 1
        return bn_add_relu(...)
      end
    end
    local ok, out = pcall(function()
      net:zero_grad()
      local xr = x:clone():requires_grad_()
      local y = net(xr)
      y:backward(g)
      return { y, xr.grad, net.conv1.weight.grad:clone(), net.layer1[1].bn1.weight.grad:clone() }
    end)
    nn.Sequential.fuses_bn_relu, nn.BatchNorm2d.fuses_relu, cnn.fused.add_relu = fuses, bn_fuses, add_relu
    cnn.fused.batch_norm_add_relu = bn_add_relu
    assert(ok, out)
    return out
  end

  it("fuses batch norm + ReLU and each block's end where nothing could tell (bit for bit; BasicBlock, Bottleneck)", function()
    for blocks, build in pairs({ [9] = function() return models.resnet20() end,
                                 [3] = function() return models.cifar_resnet{ depth = 8 } end,
                                 [16] = function() return models.resnet50{ num_classes = 10 } end }) do
      block_ends = 0
      cnn.manual_seed(2)
      local net = build()
      local x, g = cnn.randn(2, 3, 16, 16), cnn.randn(2, 10)
      local bn = net.layer1[1].bn1
      local fused_calls, forward_relu = 0, bn.forward_relu
      rawset(bn, "forward_relu", function(...) fused_calls = fused_calls + 1; return forward_relu(...) end)
      net:eval() -- the running statistics do not move between the two runs
      for _, mode in ipairs({ "eval", "train" }) do
        if mode == "train" then net:train() end
        local a = run(net, true, x, g)
        local b = run(net, false, x, g)
        for k = 1, 4 do
          assert.are.equal(0, (a[k] - b[k]):abs():max():item(), mode .. ": result " .. k .. " differs")
        end
      end
      assert.are.equal(2, fused_calls) -- one fused call each mode, none when turned off
      assert.are.equal(2 * blocks, block_ends) -- each block's end, both modes
      rawset(bn, "forward_relu", nil)
      -- a hook on the batch norm sees its own output (the layers run)
      local seen
      local h = bn:register_forward_hook(function(_, _, y) seen = y:min():item() end)
      net(x)
      h:remove()
      assert.is_true(seen < 0) -- batch norm's output, before the ReLU
    end
  end)
end)

describe("models.resnet18/34/50", function()
  it("have torchvision's parameter counts", function()
    local r18 = models.resnet18()
    assert.equal(11689512, count(r18))
    -- a new head: torchvision's resnet18(num_classes=10) has 11,181,642
    assert.equal(11181642, count(models.resnet18{ num_classes = 10 }))
    -- one input channel: conv1 loses 64 * 2 * 7 * 7 weights
    assert.equal(11689512 - 64 * 2 * 49, count(models.resnet18{ in_channels = 1 }))
    assert.equal(21797672, count(models.resnet34()))
    assert.equal(25557032, count(models.resnet50()))
  end)

  it("resnet18 runs forward and backward at 32x32", function()
    forward_backward(models.resnet18{ num_classes = 10 }, { 2, 3, 32, 32 }, 10)
  end)

  it("resnet50 runs forward and backward at 32x32", function()
    forward_backward(models.resnet50{ num_classes = 5 }, { 2, 3, 32, 32 }, 5)
  end)

  it("resnet34 runs a forward at 32x32", function()
    local net = models.resnet34{ num_classes = 7 }
    net:eval()
    H.assert_shape(cnn.no_grad(function() return net(cnn.randn(1, 3, 32, 32)) end), { 1, 7 })
  end)

  it("have torchvision's module names", function()
    has_names(models.resnet18(), { "conv1.weight", "bn1.running_var", "layer1.2.conv2.weight",
      "layer2.1.downsample.1.weight", "layer2.1.downsample.2.num_batches_tracked",
      "layer4.2.bn2.bias", "fc.weight" })
    has_names(models.resnet50(), { "layer1.1.conv3.weight", "layer1.1.downsample.1.weight",
      "layer3.6.bn3.running_mean", "layer4.3.conv1.weight" })
  end)

  it("summary shows each stage's output shape at 64x64", function()
    local r = models.resnet18():summary({ 1, 3, 64, 64 }, { print = false })
    local shapes = {}
    for _, row in ipairs(r.rows) do shapes[row.name] = row.output end
    -- 64 -> conv1 /2 -> 32 -> maxpool /2 -> 16 -> layer2..4 /2 each -> 2
    assert.equal("1x64x32x32", shapes["conv1"])
    assert.equal("1x64x16x16", shapes["maxpool"])
    assert.equal("1x64x16x16", shapes["layer1"])
    assert.equal("1x128x8x8", shapes["layer2"])
    assert.equal("1x256x4x4", shapes["layer3"])
    assert.equal("1x512x2x2", shapes["layer4"])
    assert.equal("1x512x1x1", shapes["avgpool"])
    assert.equal("1x1000", shapes["fc"])
  end)
end)

describe("models.mobilenet_v2", function()
  it("has torchvision's parameter counts (3,504,872; width 0.5: 1,968,680; 1.4: 6,108,776)", function()
    assert.equal(3504872, count(models.mobilenet_v2()))
    assert.equal(1968680, count(models.mobilenet_v2{ width_mult = 0.5 }))
    assert.equal(6108776, count(models.mobilenet_v2{ width_mult = 1.4 }))
    -- a 10-class head: 1280 * 1000 + 1000 becomes 1280 * 10 + 10
    assert.equal(3504872 - 1281000 + 12810, count(models.mobilenet_v2{ num_classes = 10 }))
  end)

  -- (at 32x32 the last stages are 1x1, where the gradient of a BatchNorm
  -- bias upstream of train-mode BatchNorms and 1x1 convs is exactly zero)
  it("runs forward and backward at 64x64", function()
    forward_backward(models.mobilenet_v2{ num_classes = 10, width_mult = 0.5 }, { 2, 3, 64, 64 }, 10)
  end)

  it("has torchvision's names, depthwise convolutions and ReLU6", function()
    local net = models.mobilenet_v2()
    -- (cnnsh's 1-based names; PyTorch's are one lower, e.g. features.1.conv.0.0.weight)
    has_names(net, { "features.1.1.weight", "features.2.conv.1.1.weight", "features.2.conv.2.weight",
      "features.2.conv.3.running_mean", "features.18.conv.4.running_var",
      "features.19.2.num_batches_tracked", "classifier.2.weight" })
    local dw = net.features[3].conv[2][1] -- block 2's 3x3 depthwise conv: 96 groups
    assert.equal(96, dw.groups)
    H.assert_shape(dw.weight, { 96, 1, 3, 3 })
    assert.equal("ReLU6", net.features[1][3].__name)
    -- residual blocks: stride 1 and same channels (e.g. the second of the 24-channel stage)
    assert.is_true(net.features[4].use_res_connect)
    assert.is_false(net.features[3].use_res_connect)
  end)

  it("rejects a width_mult out of range", function()
    H.raises(function() models.mobilenet_v2{ width_mult = 0 } end, "models.mobilenet_v2", "width_mult")
  end)
end)

describe("models.unet", function()
  -- DoubleConv(a, b) without biases: 9ab + 9bb weights and 2 BatchNorms of 2b
  local function double_conv(a, b) return 9 * a * b + 9 * b * b + 4 * b end
  -- Up(a): ConvTranspose2d(a, a/2, 2) with bias, then DoubleConv(a, a/2)
  local function up(a) return a * (a // 2) * 4 + a // 2 + double_conv(a, a // 2) end

  it("has the parameters counted by hand (482,466; the paper's size 31,037,698)", function()
    local small = double_conv(1, 16) + double_conv(16, 32) + double_conv(32, 64) + double_conv(64, 128)
                  + up(128) + up(64) + up(32) + 16 * 2 + 2
    assert.equal(482466, small)
    assert.equal(small, count(models.unet()))
    local paper = double_conv(3, 64) + double_conv(64, 128) + double_conv(128, 256) + double_conv(256, 512)
                  + double_conv(512, 1024) + up(1024) + up(512) + up(256) + up(128) + 64 * 2 + 2
    assert.equal(31037698, paper)
    assert.equal(paper, count(models.unet{ in_channels = 3, base_channels = 64, depth = 4 }))
  end)

  it("gives one score per class and pixel; forward and backward", function()
    local net = models.unet{ num_classes = 3, base_channels = 4, depth = 2 }
    cnn.manual_seed(2)
    local out = net(cnn.randn(2, 1, 16, 12))
    H.assert_shape(out, { 2, 3, 16, 12 })
    local loss = F.cross_entropy(out, cnn.randint(1, 3, { 2, 16, 12 }))
    loss:backward()
    for name, p in net:named_parameters() do assert(p.grad ~= nil, name .. " got no gradient") end
    H.assert_shape(net.up1.up.weight.grad, { 16, 8, 2, 2 })
  end)

  it("refuses a size not divisible by 2^depth, naming it", function()
    H.raises(function() models.unet()(cnn.randn(1, 1, 20, 16)) end, "1x1x20x16", "divisible by 8")
    H.raises(function() models.unet{ depth = 0 } end, "models.unet", "depth")
  end)
end)

describe("models options", function()
  it("rejects unknown and bad options, naming the constructor", function()
    H.raises(function() models.resnet18{ num_class = 10 } end, "models.resnet18", "unknown option 'num_class'")
    H.raises(function() models.resnet20{ num_classes = 0 } end, "models.resnet20", "num_classes")
    H.raises(function() models.lenet5{ padding = 3 } end, "models.lenet5", "padding")
    H.raises(function() models.vgg11_bn{ dropout = 2 } end, "models.vgg11_bn", "dropout")
    H.raises(function() models.resnet50("x") end, "models.resnet50", "options")
  end)

  it("initialises as torchvision: BatchNorm 1/0, conv weights kaiming fan_out", function()
    local net = models.resnet18()
    assert.equal(64, net.bn1.weight:sum():item())
    assert.equal(0, net.bn1.bias:abs():sum():item())
    -- kaiming_normal_(fan_out, relu): std = sqrt(2 / (out * kh * kw))
    local w = net.layer3[1].conv2.weight -- 256 x 256 x 3 x 3
    local std = math.sqrt((w * w):mean():item())
    local expect = math.sqrt(2 / (256 * 9))
    assert(math.abs(std - expect) < 0.02 * expect, ("std %g, expected %g"):format(std, expect))
  end)

  it("are documented", function()
    for _, name in ipairs({ "lenet5", "vgg11_bn", "vgg16_bn", "resnet18", "resnet34", "resnet50", "resnet20",
                            "cifar_resnet", "mobilenet_v2", "unet" }) do
      assert(cnn.doc[models[name]], "no help for models." .. name)
    end
  end)
end)
