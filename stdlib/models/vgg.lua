-- models/vgg.lua -- VGG-11 and VGG-16 with batch norm (Simonyan and
-- Zisserman 2014), in torchvision's layout (torchvision.models.vgg11_bn,
-- vgg16_bn), names kept so that state dicts map 1:1:
--   features    Sequential of [Conv2d 3x3 pad 1, BatchNorm2d, ReLU] per
--               number of the configuration, MaxPool2d(2) per "M"
--   avgpool     AdaptiveAvgPool2d(7x7) (any input of at least 32x32 works)
--   classifier  Linear(512*7*7, 4096) ReLU Dropout Linear(4096, 4096) ReLU
--               Dropout Linear(4096, num_classes)
-- Configurations "A" (VGG-11) and "D" (VGG-16) as in the paper's table 1.
-- Weights are initialised as torchvision does (models/common.lua).
local cnn = _G.cnn
local nn = require("nn")
local common = require("models.common")
local doc = cnn.doc or {}

local CONFIGS = {
  A = { 64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M" },
  D = { 64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M" },
}

-- The `features` Sequential of a configuration.
local function make_features(cfg, in_channels)
  local features, cin = nn.Sequential(), in_channels
  for _, v in ipairs(cfg) do
    if v == "M" then
      features:append(nn.MaxPool2d(2, { stride = 2 }))
    else
      features:append(nn.Conv2d(cin, v, 3, { padding = 1 }))
      features:append(nn.BatchNorm2d(v))
      features:append(nn.ReLU())
      cin = v
    end
  end
  return features
end

local VGG = nn.Module:extend("VGG")

function VGG:init(cfg, opts)
  self.features = make_features(cfg, opts.in_channels)
  self.avgpool = nn.AdaptiveAvgPool2d({ 7, 7 })
  self.classifier = nn.Sequential(
    nn.Linear(512 * 7 * 7, 4096), nn.ReLU(), nn.Dropout(opts.dropout),
    nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(opts.dropout),
    nn.Linear(4096, opts.num_classes))
  common.init_torchvision(self, true)
end

function VGG:forward(x)
  return self.classifier(self.avgpool(self.features(x)):flatten(2))
end

local DEFAULTS = { num_classes = 1000, in_channels = 3, dropout = 0.5 }

local function constructor(name, cfg)
  return function(opts)
    opts = common.options("models." .. name, opts, DEFAULTS, 2)
    return VGG(cfg, opts)
  end
end

local M = { VGG = VGG }
M.vgg11_bn = constructor("vgg11_bn", CONFIGS.A)
M.vgg16_bn = constructor("vgg16_bn", CONFIGS.D)

doc[VGG] = "models.VGG -- the class of models.vgg11_bn / vgg16_bn (features, avgpool, classifier).\nBuild one with models.vgg11_bn{...}; help(models.vgg11_bn)."

local HELP = [[
models.%s([{num_classes = 1000, in_channels = 3, dropout = 0.5}])
VGG-%s with batch norm in torchvision's layout (features, avgpool 7x7,
classifier): %s parameters with 1000 classes, torchvision's names (a
PyTorch state dict loads with load_state_dict(sd, {torch = true})).
Input N x in_channels x H x W with H, W >= 32 (224 for ImageNet).
  net = models.%s{num_classes = 10}]]
doc[M.vgg11_bn] = HELP:format("vgg11_bn", "11", "132,868,840", "vgg11_bn")
doc[M.vgg16_bn] = HELP:format("vgg16_bn", "16", "138,365,992", "vgg16_bn")

return M
