-- models_slow_spec.lua -- the large models of the zoo (label slow): VGG's
-- parameter counts and a forward and backward, and ResNet-18's summary at
-- 224x224 against torchvision's 1.81 G multiply-adds, counted here by hand
-- layer by layer.
local H = require("helpers")

local count = models.count_parameters

describe("models.vgg11_bn / vgg16_bn", function()
  it("vgg11_bn has torchvision's 132,868,840 parameters and runs at 32x32", function()
    local net = models.vgg11_bn()
    assert.equal(132868840, count(net))
    -- 32x32 -> five max-pools -> 1x1, which avgpool spreads to 7x7
    cnn.manual_seed(3)
    local out = net(cnn.randn(2, 3, 32, 32))
    H.assert_shape(out, { 2, 1000 })
    out:sum():backward()
    for name, p in net:named_parameters() do assert(p.grad ~= nil, name .. " got no gradient") end
    local w = net.classifier[7].weight -- 1000 x 4096, normal(0, 0.01)
    local std = math.sqrt((w * w):mean():item())
    assert(math.abs(std - 0.01) < 0.0005, "classifier init std " .. std)
  end)

  it("vgg16_bn has torchvision's 138,365,992 parameters", function()
    local net = models.vgg16_bn{ num_classes = 10 }
    -- the 10-class head replaces 4096 * 1000 + 1000 by 4096 * 10 + 10
    assert.equal(138365992 - 4097000 + 40970, count(net))
    assert.equal(138365992, count(models.vgg16_bn()))
    net:eval()
    local out = cnn.no_grad(function() return net(cnn.randn(1, 3, 32, 32)) end)
    H.assert_shape(out, { 1, 10 })
  end)
end)

describe("ResNet-18 summary at 224x224", function()
  -- Multiply-adds of a convolution: out_c * oh * ow * in_c * kh * kw.
  local function conv(out_c, size, in_c, k) return out_c * size * size * in_c * k * k end
  -- torchvision's figure, the convolutions and fc of one 224x224 image:
  local expect_conv_fc =
      conv(64, 112, 3, 7)                                              -- conv1
    + 4 * conv(64, 56, 64, 3)                                          -- layer1
    + conv(128, 28, 64, 3) + 3 * conv(128, 28, 128, 3) + conv(128, 28, 64, 1)   -- layer2
    + conv(256, 14, 128, 3) + 3 * conv(256, 14, 256, 3) + conv(256, 14, 128, 1) -- layer3
    + conv(512, 7, 256, 3) + 3 * conv(512, 7, 512, 3) + conv(512, 7, 256, 1)    -- layer4
    + 512 * 1000                                                        -- fc
  -- summary's convention adds one per BatchNorm output element
  local bn = 64 * 112 * 112 + 4 * 64 * 56 * 56 + 5 * 128 * 28 * 28 + 5 * 256 * 14 * 14 + 5 * 512 * 7 * 7

  it("counts 1.81 G multiply-adds in the convolutions and fc, and the right shapes", function()
    assert.equal(1814073344, expect_conv_fc)
    local r = models.resnet18():summary({ 1, 3, 224, 224 }, { print = false })
    local conv_fc, shapes = 0, {}
    for _, row in ipairs(r.rows) do
      if row.type == "Conv2d" or row.type == "Linear" then conv_fc = conv_fc + row.macs end
      shapes[row.name] = row.output
    end
    assert.equal(expect_conv_fc, conv_fc)
    assert.equal(expect_conv_fc + bn, r.macs)
    assert(r.text:find("1.82G", 1, true) or r.text:find("1.81G", 1, true), "the total is not printed")
    assert.equal(11689512, r.total_params)
    assert.equal("1x64x112x112", shapes["conv1"])
    assert.equal("1x64x56x56", shapes["layer1"])
    assert.equal("1x128x28x28", shapes["layer2.1.downsample"])
    assert.equal("1x512x7x7", shapes["layer4"])
    assert.equal("1x1000", shapes["fc"])
  end)
end)
