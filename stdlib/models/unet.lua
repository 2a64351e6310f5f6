-- models/unet.lua -- a small U-Net (Ronneberger et al. 2015) for
-- segmentation: one class score per pixel, output the size of the input.
--
-- Layout (the usual PyTorch one, e.g. milesial/Pytorch-UNet with
-- transposed convolutions; torchvision has none), with `depth`
-- down-samplings and `base_channels` c:
--   inc        DoubleConv(in_channels -> c)
--   down1..D   MaxPool2d(2), DoubleConv(c*2^(i-1) -> c*2^i)     (maxpool_conv)
--   up1..D     ConvTranspose2d(k 2, stride 2) halving the channels (up), then
--              the skip connection of the same size concatenated on the
--              channels, DoubleConv(2x -> x)                        (conv)
--   outc       Conv2d 1x1 to num_classes                            (conv)
-- DoubleConv = double_conv: Sequential(Conv2d 3x3 pad 1 no bias, BatchNorm2d,
-- ReLU, Conv2d 3x3 pad 1 no bias, BatchNorm2d, ReLU).
-- Height and width must be divisible by 2^depth (each down-sampling halves
-- them and each up-sampling doubles them back).  Defaults (c = 16, depth =
-- 3) give 482,466 parameters for 1 input channel and 2 classes; c = 64,
-- depth = 4 and 3 input channels is the paper's size (31,037,698, as
-- milesial's model).  Layers keep their default (PyTorch) initialisation.
local cnn = _G.cnn
local nn = require("nn")
local common = require("models.common")
local fmt = require("fmt")
local doc = cnn.doc or {}

local DoubleConv = nn.Module:extend("DoubleConv")

function DoubleConv:init(cin, cout)
  self.double_conv = nn.Sequential(
    nn.Conv2d(cin, cout, 3, { padding = 1, bias = false }), nn.BatchNorm2d(cout), nn.ReLU(),
    nn.Conv2d(cout, cout, 3, { padding = 1, bias = false }), nn.BatchNorm2d(cout), nn.ReLU())
end

function DoubleConv:forward(x) return self.double_conv(x) end

local Down = nn.Module:extend("Down")

function Down:init(cin, cout)
  self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(cin, cout))
end

function Down:forward(x) return self.maxpool_conv(x) end

local Up = nn.Module:extend("Up")

function Up:init(cin, cout)
  self.up = nn.ConvTranspose2d(cin, cin // 2, 2, { stride = 2 })
  self.conv = DoubleConv(cin, cout)
end

-- x: the coarser map; skip: the encoder's map of twice its size
function Up:forward(x, skip)
  return self.conv(cnn.cat({ skip, self.up(x) }, 2))
end

local OutConv = nn.Module:extend("OutConv")

function OutConv:init(cin, cout)
  self.conv = nn.Conv2d(cin, cout, 1)
end

function OutConv:forward(x) return self.conv(x) end

local UNet = nn.Module:extend("UNet")

function UNet:init(opts)
  local c = opts.base_channels
  self.depth = opts.depth
  self.inc = DoubleConv(opts.in_channels, c)
  for i = 1, opts.depth do self["down" .. i] = Down(c * 2 ^ (i - 1) // 1, c * 2 ^ i // 1) end
  for i = 1, opts.depth do
    local cin = c * 2 ^ (opts.depth - i + 1) // 1
    self["up" .. i] = Up(cin, cin // 2)
  end
  self.outc = OutConv(c, opts.num_classes)
end

function UNet:forward(x)
  local f = 2 ^ self.depth // 1
  if x:dim() ~= 4 or x:size(3) % f ~= 0 or x:size(4) % f ~= 0 then
    error(string.format("UNet: input %s must be N x C x H x W with H and W divisible by %d (2^depth)",
      fmt.shape_str(x), f), 0)
  end
  local skips = { self.inc(x) }
  for i = 1, self.depth do skips[i + 1] = self["down" .. i](skips[i]) end
  local y = skips[self.depth + 1]
  for i = 1, self.depth do y = self["up" .. i](y, skips[self.depth + 1 - i]) end
  return self.outc(y)
end

local M = { UNet = UNet, DoubleConv = DoubleConv }

function M.unet(opts)
  opts = common.options("models.unet", opts,
    { in_channels = 1, num_classes = 2, base_channels = 16, depth = 3 }, 2, { depth = { 1, 6 } })
  return UNet(opts)
end

doc[UNet] = "models.UNet -- the class of models.unet (inc, down1.., up1.., outc); help(models.unet)."
doc[DoubleConv] = "models.DoubleConv(cin, cout)\nTwo 3x3 convs (no bias), each with BatchNorm2d and ReLU: U-Net's building block."
doc[M.unet] = [[
models.unet([{in_channels = 1, num_classes = 2, base_channels = 16, depth = 3}])
A small U-Net for segmentation: an encoder of `depth` (max-pool, two 3x3
convs) stages doubling the channels from base_channels, a decoder of
transposed convolutions (2x2, stride 2) with the encoder's maps
concatenated (skip connections), a 1x1 conv to num_classes scores per
pixel.  Output N x num_classes x H x W; H and W divisible by 2^depth.
482,466 parameters with the defaults (31,037,698 with base_channels = 64, depth = 4, in_channels = 3).
  net = models.unet(); scores = net(cnn.randn(2, 1, 64, 64))   -- 2x2x64x64
  loss = F.cross_entropy(scores, masks)   -- masks: N x H x W int64 in 1..classes]]

return M
