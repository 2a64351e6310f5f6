-- params_spec.lua -- parameter counts of published networks, built with
-- stdlib/nn, equal the published figures (and so PyTorch's):
--   LeNet-5, common modern form (MNIST 1x28x28 input, conv 1->6 5x5 padding 2,
--   max-pool 2, conv 6->16 5x5, max-pool 2, 400->120->84->10, ReLU):
--   156 + 2,416 + 48,120 + 10,164 + 850 = 61,706.  (The same count holds for
--   the 32x32-input form without padding.)
--   ResNet-18 in torchvision's layout (7x7/2 stem, 3x3/2 max-pool, four stages
--   of two BasicBlocks, 64-128-256-512 channels, 1x1/2 projection shortcuts
--   with batch norm, global average pool) with a 10-class head: 11,181,642
--   (torchvision's 11,689,512 for 1000 classes minus 513 * 990).  The
--   network is stdlib/models' resnet18 (models_spec checks its other
--   counts); here its parameter list is PyTorch's list(parameters()): 62
--   tensors, in torchvision's order.

local function count(net)
  local n = 0
  for _, p in ipairs(net:parameters()) do n = n + p:numel() end
  return n
end

local function lenet5()
  return nn.Sequential(
    nn.Conv2d(1, 6, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(),
    nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
    nn.Linear(120, 84), nn.ReLU(),
    nn.Linear(84, 10))
end

describe("parameter counts", function()
  it("LeNet-5 (modern form) has 61,706 parameters and maps 28x28 to 10", function()
    local net = lenet5()
    assert.are.equal(61706, count(net))
    assert.are.same({ 2, 10 }, net(cnn.randn(2, 1, 28, 28)).shape)
  end)

  it("ResNet-18 (torchvision layout, 10 classes) has 11,181,642 parameters", function()
    local net = models.resnet18{ num_classes = 10 }
    assert.are.equal(11181642, count(net))
    assert.are.equal(62, #net:parameters()) -- as len(list(resnet18().parameters()))
    local names = {}
    for name in net:named_parameters() do names[#names + 1] = name end
    assert.are.equal("conv1.weight", names[1])
    assert.are.equal("layer2.1.downsample.1.weight", names[22])
    assert.are.equal("fc.bias", names[62])
    net:eval()
    assert.are.same({ 2, 10 }, net(cnn.randn(2, 3, 64, 64)).shape)
  end)
end)
