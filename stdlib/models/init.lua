-- models/init.lua -- the "models" package: a small model zoo, one readable
-- file per family (Lua's init.lua convention; models.X is the global).
--
--   models.lenet5      models/lenet.lua   LeNet-5 for 28x28 images
--   models.vgg11_bn    models/vgg.lua     VGG-11/16 with batch norm
--   models.vgg16_bn
--   models.resnet18    models/resnet.lua  ResNet-18/34/50, ImageNet layout
--   models.resnet34
--   models.resnet50
--   models.resnet20                       ResNet-20 for 32x32 (CIFAR-10)
--   models.cifar_resnet                   the same family at depth 6n + 2
--   models.mobilenet_v2 models/mobilenet.lua  MobileNetV2
--   models.unet        models/unet.lua    a small U-Net (segmentation)
--
-- Each constructor takes one options table with torchvision's names
-- (num_classes, in_channels, ...) and rejects unknown ones.  The module
-- names are torchvision's, so a state dict saved by PyTorch loads with
-- net:load_state_dict(sd, {torch = true}) (the name mapping is
-- nn/torch_names.lua) and net:state_dict{torch = true} gives PyTorch's names.
local cnn = _G.cnn
local doc = cnn.doc or {}

local models = {}

local files = { "models.lenet", "models.vgg", "models.resnet", "models.mobilenet", "models.unet" }
for _, f in ipairs(files) do
  for name, v in pairs(require(f)) do models[name] = v end
end

-- models.count_parameters(net) -> the number of parameter elements.
models.count_parameters = require("models.common").count_parameters
doc[models.count_parameters] = "models.count_parameters(net) -> n\nThe number of elements of net's parameters (each tensor once)."

doc[models] = [[
models -- a model zoo with torchvision's layouts, names and parameter counts.
  lenet5{num_classes = 10, in_channels = 1}     LeNet-5, 28x28 input, 61,706 parameters
  vgg11_bn{...}, vgg16_bn{...}                  VGG with batch norm (132.9M, 138.4M)
  resnet18{...}, resnet34{...}, resnet50{...}   ImageNet ResNets (11.7M, 21.8M, 25.6M)
  resnet20{num_classes = 10}                    ResNet-20 for 32x32 images (0.27M)
  cifar_resnet{depth = 56}                      the same family at depth 6n + 2
  mobilenet_v2{num_classes = 1000, width_mult = 1.0}   MobileNetV2 (3.5M)
  unet{in_channels = 1, num_classes = 2, base_channels = 16, depth = 3}   a small U-Net (0.48M)
Options as torchvision: num_classes (1000 for the ImageNet ones), in_channels (3).
Weights from PyTorch (a safetensors state dict saved with torchvision's names):
  net = models.resnet18()
  net:load_state_dict(cnn.load("resnet18.safetensors"), {torch = true})
  cnn.save("mine.safetensors", net:state_dict{torch = true})  -- PyTorch loads it
help(models.resnet18) and so on for each.]]

return models
