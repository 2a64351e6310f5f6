-- models/resnet.lua -- residual networks: ResNet-18/34/50 in torchvision's
-- ImageNet layout and ResNet-20 for 32x32 images (He et al. 2015).
--
-- ImageNet layout (torchvision.models.resnet, names kept so that state
-- dicts map 1:1, see nn/torch_names.lua):
--   conv1 (7x7, stride 2, 64) - bn1 - relu - maxpool (3x3, stride 2)
--   layer1..layer4: stages of blocks at 64, 128, 256, 512 "planes"; the
--     first block of layer2..4 halves the size (stride 2 in its 3x3 conv)
--   avgpool (global) - flatten - fc
-- A block adds its input to its output; when the shapes differ the input
-- goes through `downsample` = Sequential(1x1 conv with the block's stride,
-- BatchNorm) first.  BasicBlock (18, 34): two 3x3 convs.  Bottleneck (50):
-- 1x1 down to `planes`, 3x3 (the stride is here, "ResNet v1.5" as
-- torchvision), 1x1 up to 4 * planes.
--
-- ResNet-20 (the paper's section 4.2, for CIFAR-10): conv1 (3x3, 16) -
-- bn1 - relu - layer1..3 of three BasicBlocks at 16, 32, 64 channels -
-- avgpool - fc.  Shortcuts that change shape are projections (1x1 conv +
-- BatchNorm, the paper's option B): 272,474 parameters for 10 classes.
-- models.cifar_resnet{depth = 6n + 2} builds the other depths (n blocks a stage).
--
-- Weights are initialised as torchvision does (models/common.lua).
--
-- net:fuse(): each class lists in `fuse_chains` the
-- children that follow one another in its forward with nothing else
-- reading between them (conv1 -> bn1 -> relu ...), so that fuse() can fold
-- the batch norms and fuse the activations there too.  For that, the
-- activation after a residual addition (and Bottleneck's second one) is
-- F.relu rather than the shared `relu` module torchvision reuses: `relu`
-- belongs to the first chain only.  No parameter or state_dict name changes.
--
-- A batch norm followed by a ReLU runs as one op (bn_relu below: one pass
-- each way, the two ops' values bit for bit on the CPU) where nothing could
-- tell the difference -- nn.Sequential's rule, fuses_bn_relu: the batch
-- norm's own forward, no hook on either.  A block ends with
-- relu(bn(h) + identity): cnn.fused.batch_norm_add_relu where the batch
-- norm has its own forward and no hook (one pass forward), else the batch
-- norm and then cnn.fused.add_relu (F.relu(out + identity) as one pass and
-- one node); the same values bit for bit as the three ops (ONNX export,
-- which wraps every forward, writes BatchNormalization, Add, Relu).
local cnn = _G.cnn
local F = cnn.F
local nn = require("nn")
local common = require("models.common")
local doc = cnn.doc or {}

local function conv3x3(cin, cout, stride)
  return nn.Conv2d(cin, cout, 3, { stride = stride, padding = 1, bias = false })
end

local function conv1x1(cin, cout, stride)
  return nn.Conv2d(cin, cout, 1, { stride = stride, bias = false })
end

-- A batch norm with its own forward and no hook: one op may stand for it
-- and what follows.
local function bn_fuses(bn)
  return bn.fuses_relu ~= nil and bn:fuses_relu() and not bn:has_hooks()
end

-- relu(bn(x)) as one op where nn.Sequential would fuse them; `relu` is the
-- module, or nil for F.relu (which has no hooks)
local function bn_relu(bn, relu, x)
  local fused
  if relu then
    fused = nn.Sequential.fuses_bn_relu(bn, relu)
  else
    fused = bn_fuses(bn)
  end
  if fused then return bn:call_unhooked(bn.forward_relu, x) end
  if relu then return relu(bn(x)) end
  return F.relu(bn(x))
end

-- A block's end, relu(bn(h) + shortcut): the shortcut is downsample(x)
-- or x.  One op after the shortcut where bn_fuses; else the batch norm,
-- the shortcut (torchvision's order, for hooks), then add + relu as one op.
local function residual_end(bn, h, downsample, x)
  if bn_fuses(bn) then
    local identity = downsample and downsample(x) or x
    return bn:call_unhooked(bn.forward_add_relu, h, identity)
  end
  local out = bn(h)
  local identity = downsample and downsample(x) or x
  return cnn.fused.add_relu(out, identity)
end

-- ---- blocks -------------------------------------------------------------------------

local BasicBlock = nn.Module:extend("BasicBlock")
BasicBlock.expansion = 1

function BasicBlock:init(inplanes, planes, stride, downsample)
  self.conv1 = conv3x3(inplanes, planes, stride)
  self.bn1 = nn.BatchNorm2d(planes)
  self.relu = nn.ReLU()
  self.conv2 = conv3x3(planes, planes, 1)
  self.bn2 = nn.BatchNorm2d(planes)
  if downsample then self.downsample = downsample end
end

BasicBlock.fuse_chains = { { "conv1", "bn1", "relu" }, { "conv2", "bn2" } }

function BasicBlock:forward(x)
  local out = bn_relu(self.bn1, self.relu, self.conv1(x))
  return residual_end(self.bn2, self.conv2(out), self.downsample, x)
end

local Bottleneck = nn.Module:extend("Bottleneck")
Bottleneck.expansion = 4

function Bottleneck:init(inplanes, planes, stride, downsample)
  self.conv1 = conv1x1(inplanes, planes, 1)
  self.bn1 = nn.BatchNorm2d(planes)
  self.conv2 = conv3x3(planes, planes, stride)
  self.bn2 = nn.BatchNorm2d(planes)
  self.conv3 = conv1x1(planes, planes * 4, 1)
  self.bn3 = nn.BatchNorm2d(planes * 4)
  self.relu = nn.ReLU()
  if downsample then self.downsample = downsample end
end

Bottleneck.fuse_chains = { { "conv1", "bn1", "relu" }, { "conv2", "bn2" }, { "conv3", "bn3" } }

function Bottleneck:forward(x)
  local out = bn_relu(self.bn1, self.relu, self.conv1(x))
  out = bn_relu(self.bn2, nil, self.conv2(out))
  return residual_end(self.bn3, self.conv3(out), self.downsample, x)
end

-- A stage of `blocks` blocks; returns it and the channels it ends with.
local function make_layer(block, inplanes, planes, blocks, stride)
  local width = planes * block.expansion
  local downsample
  if stride ~= 1 or inplanes ~= width then
    downsample = nn.Sequential(conv1x1(inplanes, width, stride), nn.BatchNorm2d(width))
  end
  local layer = nn.Sequential(block(inplanes, planes, stride, downsample))
  for _ = 2, blocks do layer:append(block(width, planes, 1)) end
  return layer, width
end

-- ---- the network -------------------------------------------------------------------------

local ResNet = nn.Module:extend("ResNet")

-- ResNet(block, layers, opts): layers = blocks per stage ({2, 2, 2, 2} for
-- ResNet-18); opts as the constructors below (already checked).
function ResNet:init(block, layers, opts)
  self.conv1 = nn.Conv2d(opts.in_channels, 64, 7, { stride = 2, padding = 3, bias = false })
  self.bn1 = nn.BatchNorm2d(64)
  self.relu = nn.ReLU()
  self.maxpool = nn.MaxPool2d(3, { stride = 2, padding = 1 })
  local inplanes = 64
  for i, planes in ipairs({ 64, 128, 256, 512 }) do
    self["layer" .. i], inplanes = make_layer(block, inplanes, planes, layers[i], i == 1 and 1 or 2)
  end
  self.avgpool = nn.AdaptiveAvgPool2d({ 1, 1 })
  self.fc = nn.Linear(inplanes, opts.num_classes)
  common.init_torchvision(self, false)
end

ResNet.fuse_chains = { { "conv1", "bn1", "relu" } }

function ResNet:forward(x)
  x = self.maxpool(bn_relu(self.bn1, self.relu, self.conv1(x)))
  x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
  return self.fc(self.avgpool(x):flatten(2))
end

local DEFAULTS = { num_classes = 1000, in_channels = 3 }

local function constructor(name, block, layers)
  return function(opts)
    opts = common.options("models." .. name, opts, DEFAULTS, 2)
    return ResNet(block, layers, opts)
  end
end

local M = { BasicBlock = BasicBlock, Bottleneck = Bottleneck, ResNet = ResNet }
M.resnet18 = constructor("resnet18", BasicBlock, { 2, 2, 2, 2 })
M.resnet34 = constructor("resnet34", BasicBlock, { 3, 4, 6, 3 })
M.resnet50 = constructor("resnet50", Bottleneck, { 3, 4, 6, 3 })

-- ---- ResNet-20 for 32x32 images --------------------------------------------------------------

local CifarResNet = nn.Module:extend("CifarResNet")

function CifarResNet:init(n, opts)
  self.conv1 = conv3x3(opts.in_channels, 16, 1)
  self.bn1 = nn.BatchNorm2d(16)
  self.relu = nn.ReLU()
  local inplanes = 16
  for i, planes in ipairs({ 16, 32, 64 }) do
    self["layer" .. i], inplanes = make_layer(BasicBlock, inplanes, planes, n, i == 1 and 1 or 2)
  end
  self.avgpool = nn.AdaptiveAvgPool2d({ 1, 1 })
  self.fc = nn.Linear(64, opts.num_classes)
  common.init_torchvision(self, false)
end

CifarResNet.fuse_chains = { { "conv1", "bn1", "relu" } }

function CifarResNet:forward(x)
  x = bn_relu(self.bn1, self.relu, self.conv1(x))
  x = self.layer3(self.layer2(self.layer1(x)))
  return self.fc(self.avgpool(x):flatten(2))
end

M.CifarResNet = CifarResNet

-- cifar_resnet{depth = 6n + 2, ...}: ResNet-20, 32, 44, 56, 110, ... (and
-- the tiny ResNet-8 that the PyTorch fixture of the tests uses).
function M.cifar_resnet(opts)
  local fname = "models.cifar_resnet"
  opts = common.options(fname, opts, { depth = 20, num_classes = 10, in_channels = 3 }, 2)
  if opts.depth < 8 or (opts.depth - 2) % 6 ~= 0 then
    require("check").fail(fname, "depth", "6n + 2 (8, 14, 20, 32, 44, 56, 110, ...)", opts.depth, 2)
  end
  return CifarResNet((opts.depth - 2) // 6, opts)
end

function M.resnet20(opts)
  opts = common.options("models.resnet20", opts, { num_classes = 10, in_channels = 3 }, 2)
  return CifarResNet(3, opts)
end

-- ---- help ------------------------------------------------------------------------------------

local IMAGENET_HELP = [[
models.%s([{num_classes = 1000, in_channels = 3}])
ResNet-%s in torchvision's layout (conv1, bn1, layer1..layer4, fc; blocks
with `downsample`): %s parameters with 1000 classes, the same names as
torchvision, so a PyTorch state dict loads with
  net:load_state_dict(cnn.load("resnet.safetensors"), {torch = true}).
Input N x in_channels x H x W (224 x 224 for ImageNet; any size >= 32).
  net = models.%s{num_classes = 10}; out = net(cnn.randn(2, 3, 64, 64))  -- 2x10]]

doc[M.resnet18] = IMAGENET_HELP:format("resnet18", "18", "11,689,512", "resnet18")
doc[M.resnet34] = IMAGENET_HELP:format("resnet34", "34", "21,797,672", "resnet34")
doc[M.resnet50] = IMAGENET_HELP:format("resnet50", "50 (Bottleneck blocks)", "25,557,032", "resnet50")
doc[M.resnet20] = [[
models.resnet20([{num_classes = 10, in_channels = 3}])
ResNet-20 for 32x32 images (He et al. 2015, section 4.2): a 3x3 conv to 16
channels, three stages of three BasicBlocks (16, 32, 64 channels; stride 2
and a 1x1-conv + BatchNorm shortcut where the shape changes), global
average pooling, fc.  272,474 parameters with 10 classes.
  net = models.resnet20(); out = net(cnn.randn(8, 3, 32, 32))  -- 8x10]]
doc[M.cifar_resnet] = [[
models.cifar_resnet([{depth = 20, num_classes = 10, in_channels = 3}])
He et al.'s ResNets for 32x32 images with depth = 6n + 2 (20, 32, 44, 56,
110; 8 is the smallest): n BasicBlocks per stage, as models.resnet20.
  net = models.cifar_resnet{depth = 56}]]
doc[ResNet] = "models.ResNet -- the class of models.resnet18/34/50 (conv1, bn1, relu, maxpool, layer1..4, avgpool, fc).\nBuild one with models.resnet18{...}; help(models.resnet18)."
doc[CifarResNet] = "models.CifarResNet -- the class of models.resnet20 / cifar_resnet (conv1, bn1, relu, layer1..3, avgpool, fc).\nBuild one with models.resnet20{...}; help(models.cifar_resnet)."
doc[BasicBlock] = "models.BasicBlock(inplanes, planes, stride [, downsample])\nTwo 3x3 convs with BatchNorm and a residual connection (ResNet-18/34)."
doc[Bottleneck] = "models.Bottleneck(inplanes, planes, stride [, downsample])\n1x1, 3x3, 1x1 convs (out 4 * planes) with BatchNorm and a residual connection (ResNet-50)."

return M
