-- nn/init.lua -- the "nn" package itself (Lua's init.lua convention), NOT
-- nn.init: the weight initialisers nn.init are in nn/weight_init.lua.
--
-- Wires the per-concept files together; each class lives in its own file
-- (nn/module.lua holds the base class and is the place to start reading).
-- Layers and networks as Lua classes. nn.init holds the weight
-- initialisers (file nn/weight_init.lua), nn.utils
-- gradient clipping; inspect.lua adds summary/trace/profile to nn.Module.
-- Every public class carries a doc string (help(nn.X)).
local cnn = _G.cnn
local doc = cnn.doc or {}

local nn = {}

nn.Module = require("nn.module")

local files = { "nn.container", "nn.conv", "nn.linear", "nn.pooling", "nn.activation",
                "nn.normalization", "nn.dropout", "nn.flatten", "nn.distributed",
                "nn.conv_transpose", "nn.pooling_1d" --  ConvTranspose2d, 1-d pools
              }
files[#files + 1] = "nn.loss" -- the loss modules
-- LayerNorm, GroupNorm, InstanceNorm2d, Upsample, PixelShuffle, AdaptiveMaxPool2d
files[#files + 1] = "nn.norm_layers"
files[#files + 1] = "nn.resize"
files[#files + 1] = "nn.adaptive_max_pool"
for _, f in ipairs(files) do
  for name, cls in pairs(require(f)) do nn[name] = cls end
end

nn.init = require("nn.weight_init")
nn.Fused = require("nn.fuse").Fused -- also adds net:fuse() to nn.Module
nn.utils = require("nn.utils")
-- int8 layers of cnn.quantize
nn.QuantizedConv2d = require("nn.quantized").QuantizedConv2d
nn.QuantizedLinear = require("nn.quantized").QuantizedLinear

doc[nn] = [[
nn -- layers and networks (PyTorch names, 1-based dims).
Containers: Sequential, ModuleList; base class: Module (Module:extend("Name")).
Layers: Conv2d, Linear, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, BatchNorm2d,
BatchNorm1d, SyncBatchNorm, Dropout, Flatten, Identity; DistributedDataParallel (see dist).
Activations: ReLU, LeakyReLU, ELU, GELU, Sigmoid, Tanh, Softmax, LogSoftmax,
ReLU6, Hardtanh, SiLU, Hardswish, Hardsigmoid, Mish, Softplus.
Losses: CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, SmoothL1Loss, HuberLoss,
KLDivLoss, BCELoss, BCEWithLogitsLoss (loss = crit(input, target)).
ConvTranspose2d (upsampling: autoencoders, U-Nets); Conv1d, MaxPool1d, AvgPool1d,
AdaptiveAvgPool1d (sequences, N x C x L).
Also nn.init (initialisers) and nn.utils.clip_grad_norm.
  net = nn.Sequential(nn.Conv2d(1, 8, 3, {padding = 1}), nn.ReLU(),
                      nn.Flatten(), nn.Linear(8 * 28 * 28, 10))
  out = net(cnn.randn(4, 1, 28, 28))   -- 4x10
help(nn.Conv2d) and so on for each class.]]

-- net:summary, net:trace, net:profile (stdlib/inspect.lua adds them to
-- nn.Module; it requires only nn.module, so loading it here is safe).
require("inspect")

return nn
