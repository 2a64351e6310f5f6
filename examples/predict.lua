-- examples/predict.lua -- classify PNG (or JPEG) files with a model saved by
-- examples/fashion_mnist.lua:
--
--   cnnsh examples/predict.lua fmnist.safetensors a.png b.png ...
--
-- Each image is read as grayscale, resized to 28x28 when it is another size,
-- scaled to [0, 1] and normalised as in training; the script prints, per
-- file, the predicted class name and its probability.  Fashion-MNIST
-- pictures are light garments on black: a photo with a white background
-- wants inverting first (x = 255 - x).
local here = (arg and arg[0] or ""):match("^(.*/)") or ""
local network = dofile(here .. "fmnist_net.lua")
local CLASSES = { "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                  "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot" } -- labels 1..10

local model_path = arg and arg[1]
if not model_path or not arg[2] then
  error("usage: cnnsh examples/predict.lua MODEL.safetensors IMAGE.png [IMAGE.png ...]", 0)
end

local net = network()
local ckpt = cnn.load(model_path)
net:load_state_dict(ckpt.model or ckpt)
net:eval()

local normalize = data.transforms.Normalize(0.2860, 0.3530)
local resize = data.transforms.Resize({ 28, 28 })

-- one image file -> 1 x 1 x 28 x 28 float32, as the training images
local function load(path)
  local img = cnn.io.read_image(path, { mode = "gray" }):float() / 255
  if img:size(2) ~= 28 or img:size(3) ~= 28 then img = resize(img) end
  return normalize(img):view(1, 1, 28, 28)
end

for i = 2, #arg do
  local p = cnn.no_grad(function() return F.softmax(net(load(arg[i])), 2) end)
  local prob, class = p:max(2)
  class = class:item()
  print(string.format("%-40s %-12s %5.1f%%", arg[i], CLASSES[class], 100 * prob:item()))
end
