-- models/lenet.lua -- LeNet-5 (LeCun et al. 1998) for 28x28 digits and
-- clothes (MNIST, Fashion-MNIST).
--
-- Layout (no torchvision model exists; the usual PyTorch one):
--   features    Conv2d(in, 6, 5, padding = 2) ReLU MaxPool2d(2)
--               Conv2d(6, 16, 5) ReLU MaxPool2d(2)          -> 16 x 5 x 5
--   classifier  Flatten Linear(400, 120) ReLU Linear(120, 84) ReLU
--               Linear(84, num_classes)
-- 61,706 parameters with 10 classes.  The paper's 32x32 input takes
-- {padding = 0} (the padding of the first convolution); the paper's tanh
-- and average pooling are replaced by ReLU and max pooling, as is usual
-- today.  Layers keep their default (PyTorch) initialisation.
local cnn = _G.cnn
local nn = require("nn")
local common = require("models.common")
local doc = cnn.doc or {}

local LeNet5 = nn.Module:extend("LeNet5")

function LeNet5:init(opts)
  self.features = nn.Sequential(
    nn.Conv2d(opts.in_channels, 6, 5, { padding = opts.padding }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2))
  self.classifier = nn.Sequential(
    nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
    nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, opts.num_classes))
end

function LeNet5:forward(x)
  return self.classifier(self.features(x))
end

local M = { LeNet5 = LeNet5 }

function M.lenet5(opts)
  opts = common.options("models.lenet5", opts, { num_classes = 10, in_channels = 1, padding = 2 }, 2,
                         { padding = { 0, 2 } })
  return LeNet5(opts)
end

doc[LeNet5] = "models.LeNet5 -- the class of models.lenet5 (features, classifier); help(models.lenet5)."
doc[M.lenet5] = [[
models.lenet5([{num_classes = 10, in_channels = 1, padding = 2}])
LeNet-5 with ReLU and max pooling: features (two 5x5 convs, 6 and 16
channels), classifier (400 -> 120 -> 84 -> num_classes).  61,706 parameters.
Input N x in_channels x 28 x 28; 32 x 32 (the paper's) with {padding = 0}.
  net = models.lenet5(); out = net(cnn.randn(4, 1, 28, 28))  -- 4x10]]

return M
