-- models/mobilenet.lua -- MobileNetV2 (Sandler et al. 2018) in
-- torchvision's layout (torchvision.models.mobilenet_v2), names kept so
-- that state dicts map 1:1:
--   features    [0] ConvBNActivation(3 -> 32, 3x3, stride 2)
--               [1..17] InvertedResidual blocks, by the table below
--               [18] ConvBNActivation(320 -> 1280, 1x1)
--   (global average pooling, flatten)
--   classifier  Dropout(0.2) Linear(1280, num_classes)
-- ConvBNActivation is torchvision's Conv2dNormActivation: a Sequential of
-- Conv2d (no bias, padding (k-1)/2), BatchNorm2d and ReLU6.
-- InvertedResidual(inp, oup, stride, t): `conv` = Sequential of
--   [1x1 expand to inp * t, ReLU6 (left out when t = 1)]
--   3x3 depthwise (groups = hidden), stride, ReLU6
--   1x1 project to oup (Conv2d + BatchNorm2d, no activation: "linear
--   bottleneck"); the input is added when stride = 1 and inp = oup.
-- Channels are multiplied by width_mult and rounded to multiples of 8
-- (make_divisible, as torchvision).  3,504,872 parameters at width 1 with
-- 1000 classes.  Weights are initialised as torchvision does
-- (models/common.lua).
local cnn = _G.cnn
local nn = require("nn")
local common = require("models.common")
local doc = cnn.doc or {}

-- t (expansion), c (output channels), n (blocks), s (stride of the first)
local SETTINGS = {
  { 1, 16, 1, 1 }, { 6, 24, 2, 2 }, { 6, 32, 3, 2 }, { 6, 64, 4, 2 },
  { 6, 96, 3, 1 }, { 6, 160, 3, 2 }, { 6, 320, 1, 1 },
}

-- torchvision's _make_divisible: the nearest multiple of `divisor`, at
-- least `divisor`, never more than 10% below v.
local function make_divisible(v, divisor)
  local new_v = math.max(divisor, (math.floor(v + divisor / 2) // divisor) * divisor)
  if new_v < 0.9 * v then new_v = new_v + divisor end
  return math.tointeger(new_v)
end

-- Conv2d + BatchNorm2d (+ ReLU6 unless `linear`), as a Sequential.
local function conv_bn(cin, cout, k, stride, groups, linear)
  local seq = nn.Sequential(
    nn.Conv2d(cin, cout, k, { stride = stride, padding = (k - 1) // 2, groups = groups, bias = false }),
    nn.BatchNorm2d(cout))
  if not linear then seq:append(nn.ReLU6()) end
  return seq
end

local InvertedResidual = nn.Module:extend("InvertedResidual")

function InvertedResidual:init(inp, oup, stride, expand_ratio)
  local hidden = math.tointeger(math.floor(inp * expand_ratio + 0.5))
  self.use_res_connect = stride == 1 and inp == oup
  self.conv = nn.Sequential()
  if expand_ratio ~= 1 then self.conv:append(conv_bn(inp, hidden, 1, 1, 1)) end
  self.conv:append(conv_bn(hidden, hidden, 3, stride, hidden))
  self.conv:append(nn.Conv2d(hidden, oup, 1, { bias = false }))
  self.conv:append(nn.BatchNorm2d(oup))
  self.out_channels = oup
end

function InvertedResidual:forward(x)
  if self.use_res_connect then return x + self.conv(x) end
  return self.conv(x)
end

local MobileNetV2 = nn.Module:extend("MobileNetV2")

function MobileNetV2:init(opts)
  local input_channel = make_divisible(32 * opts.width_mult, 8)
  self.last_channel = make_divisible(1280 * math.max(1.0, opts.width_mult), 8)
  self.features = nn.Sequential(conv_bn(opts.in_channels, input_channel, 3, 2, 1))
  for _, s in ipairs(SETTINGS) do
    local t, c, n, stride = s[1], s[2], s[3], s[4]
    local output_channel = make_divisible(c * opts.width_mult, 8)
    for i = 1, n do
      self.features:append(InvertedResidual(input_channel, output_channel, i == 1 and stride or 1, t))
      input_channel = output_channel
    end
  end
  self.features:append(conv_bn(input_channel, self.last_channel, 1, 1, 1))
  self.classifier = nn.Sequential(nn.Dropout(opts.dropout), nn.Linear(self.last_channel, opts.num_classes))
  common.init_torchvision(self, true)
end

function MobileNetV2:forward(x)
  x = cnn.F.adaptive_avg_pool2d(self.features(x), { 1, 1 })
  return self.classifier(x:flatten(2))
end

local M = { MobileNetV2 = MobileNetV2, InvertedResidual = InvertedResidual }

function M.mobilenet_v2(opts)
  local fname = "models.mobilenet_v2"
  opts = common.options(fname, opts, { num_classes = 1000, in_channels = 3, width_mult = 1.0, dropout = 0.2 }, 2,
                        { width_mult = { 0.05, 4 } })
  return MobileNetV2(opts)
end

doc[M.mobilenet_v2] = [[
models.mobilenet_v2([{num_classes = 1000, in_channels = 3, width_mult = 1.0, dropout = 0.2}])
MobileNetV2 in torchvision's layout (features: a 3x3 stem, 17 inverted
residual blocks, a 1x1 conv to 1280; classifier: Dropout, Linear), ReLU6,
depthwise 3x3 convolutions: 3,504,872 parameters with 1000 classes,
torchvision's names (load_state_dict(sd, {torch = true}) takes its weights).
width_mult in [0.05, 4] scales every layer (channels rounded to multiples of 8).
  net = models.mobilenet_v2{num_classes = 10}; out = net(cnn.randn(2, 3, 64, 64))]]
doc[MobileNetV2] = "models.MobileNetV2 -- the class of models.mobilenet_v2 (features, classifier); help(models.mobilenet_v2)."
doc[InvertedResidual] = "models.InvertedResidual(inp, oup, stride, expand_ratio)\nMobileNetV2's block: 1x1 expand, 3x3 depthwise, 1x1 linear projection; residual when shapes match."

return M
