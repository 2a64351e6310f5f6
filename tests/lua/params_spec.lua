-- params_spec.lua -- parameter counts of published networks, built with
-- stdlib/nn, equal the published figures (and so PyTorch's):
--   LeNet-5, common modern form (MNIST 1x28x28 input, conv 1->6 5x5 padding 2,
--   max-pool 2, conv 6->16 5x5, max-pool 2, 400->120->84->10, ReLU):
--   156 + 2,416 + 48,120 + 10,164 + 850 = 61,706.  (The same count holds for
--   the 32x32-input form without padding.)
--   ResNet-18 in torchvision's layout (7x7/2 stem, 3x3/2 max-pool, four stages
--   of two BasicBlocks, 64-128-256-512 channels, 1x1/2 projection shortcuts
--   with batch norm, global average pool) with a 10-class head: 11,181,642
--   (torchvision's 11,689,512 for 1000 classes minus 513 * 990).
-- The BasicBlock is a user-defined module, as a student would write it.

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

local BasicBlock = nn.Module:extend("BasicBlock")

function BasicBlock:init(cin, cout, stride)
  stride = stride or 1
  self.conv1 = nn.Conv2d(cin, cout, 3, { stride = stride, padding = 1, bias = false })
  self.bn1 = nn.BatchNorm2d(cout)
  self.conv2 = nn.Conv2d(cout, cout, 3, { padding = 1, bias = false })
  self.bn2 = nn.BatchNorm2d(cout)
  if stride ~= 1 or cin ~= cout then
    self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, { stride = stride, bias = false }),
                                    nn.BatchNorm2d(cout))
  end
end

function BasicBlock:forward(x)
  local out = F.relu(self.bn1(self.conv1(x)))
  out = self.bn2(self.conv2(out))
  local identity = self.downsample and self.downsample(x) or x
  return F.relu(out + identity)
end

local ResNet18 = nn.Module:extend("ResNet18")

function ResNet18:init(num_classes)
  self.conv1 = nn.Conv2d(3, 64, 7, { stride = 2, padding = 3, bias = false })
  self.bn1 = nn.BatchNorm2d(64)
  self.relu = nn.ReLU()
  self.maxpool = nn.MaxPool2d(3, { stride = 2, padding = 1 })
  local cin = 64
  for i, c in ipairs({ 64, 128, 256, 512 }) do
    local stride = i == 1 and 1 or 2
    self["layer" .. i] = nn.Sequential(BasicBlock(cin, c, stride), BasicBlock(c, c, 1))
    cin = c
  end
  self.avgpool = nn.AdaptiveAvgPool2d({ 1, 1 })
  self.fc = nn.Linear(512, num_classes)
end

function ResNet18:forward(x)
  x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
  x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
  return self.fc(F.flatten(self.avgpool(x), 2))
end

describe("parameter counts", function()
  it("LeNet-5 (modern form) has 61,706 parameters and maps 28x28 to 10", function()
    local net = lenet5()
    assert.are.equal(61706, count(net))
    assert.are.same({ 2, 10 }, net(cnn.randn(2, 1, 28, 28)).shape)
  end)

  it("ResNet-18 (torchvision layout, 10 classes) has 11,181,642 parameters", function()
    local net = ResNet18(10)
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
