-- examples/inspect.lua -- looking inside a network from the terminal.
--
-- Trains the quickstart network (conv 1->32, ReLU, max-pool, linear) for a
-- few hundred steps on Fashion-MNIST, then shows: its summary, the loss
-- curve, the 32 learned filters, the feature maps of one test image after
-- each block, the per-layer statistics and gradient flow of one batch, the
-- autograd graph of a small loss, and the per-layer time profile.  Filters
-- and feature maps are also written as PNG files.  Run it with
--
--   cnnsh examples/inspect.lua [steps] [out_dir]       (defaults: 300 and .)
--
-- Pictures are in 24-bit colour on a terminal, in grey with NO_COLOR=1, in
-- ASCII with cnnsh --ascii.  Without the Fashion-MNIST files (Debian package
-- dataset-fashion-mnist) it trains on random data: the pictures then show noise.
require("inspect") -- adds summary/trace/profile to nn.Module (nn loads it too)

local args = require("cli").parse(arg, {
  usage = "cnnsh examples/inspect.lua [steps] [out_dir]   (defaults: 300 and .)",
  positional = { { "steps", 300, "integer" }, { "out_dir", ".", "string" } },
})
local steps, out_dir = args.steps, args.out_dir
cnn.manual_seed(0)

-- 1. Data: Fashion-MNIST if installed, else random images.  epoch() gives
-- an iterator over (x, y) batches of 64.
local function fashion_mnist()
  local train_set = data.FashionMNIST{ train = true }
  local loader = data.DataLoader(train_set, { batch_size = 64, shuffle = true })
  local image, label = data.FashionMNIST{ train = false }:get(1)
  image = image:float():view(1, 1, 28, 28)
  if image:max():item() > 1 then image = image / 255 end
  return function() return loader end, image, label
end

local function random_data()
  local x, y = cnn.rand(640, 1, 28, 28), cnn.randint(1, 10, { 640 })
  local function epoch()
    local i = 0
    return function()
      i = i + 1
      if i > 10 then return nil end
      return x:narrow(1, (i - 1) * 64 + 1, 64), y:narrow(1, (i - 1) * 64 + 1, 64)
    end
  end
  return epoch, cnn.rand(1, 1, 28, 28), nil
end

local ok, epoch, test_image, test_label = pcall(fashion_mnist)
if not ok then
  print("(Fashion-MNIST not available: " .. tostring(epoch) .. "; using random data)")
  epoch, test_image, test_label = random_data()
end

-- 2. The quickstart network.
local SimpleCNN = nn.Module:extend("SimpleCNN")
function SimpleCNN:init()
  self.conv = nn.Conv2d(1, 32, 3, { padding = 1 })
  self.relu = nn.ReLU()
  self.pool = nn.MaxPool2d(2)
  self.fc = nn.Linear(32 * 14 * 14, 10)
end
function SimpleCNN:forward(x)
  return self.fc(self.pool(self.relu(self.conv(x))):flatten(2))
end
local net = SimpleCNN()

print("== summary ==")
net:summary{ 1, 1, 28, 28 }

-- 3. Train briefly, recording the loss.
local opt = optim.Adam(net:parameters(), { lr = 1e-3 })
local losses, step, last_x, last_y = {}, 0, nil, nil
while step < steps do
  for x, y in epoch() do
    opt:zero_grad()
    local loss = F.cross_entropy(net(x), y)
    loss:backward()
    opt:step()
    step = step + 1
    losses[step] = loss:item()
    last_x, last_y = x, y
    if step >= steps then break end
  end
end

print("\n== training loss ==")
viz.plot(losses, { title = string.format("cross-entropy over %d steps", steps) })

-- 4. What the first layer learned, and what it sees in one image.
print("\n== the 32 filters of conv ==")
viz.grid(net.conv.weight)
viz.save_png(net.conv.weight, out_dir .. "/inspect_filters.png", { scale = 8 })

print("\n== one test image" .. (test_label and (" (class " .. tostring(test_label) .. ")") or "") .. " ==")
viz.show(test_image)
cnn.no_grad(function()
  local c = net.conv(test_image)
  local r = net.relu(c)
  local p = net.pool(r)
  print("\n== after conv (first 8 maps, 2x2 pixel blocks averaged) ==")
  viz.grid(c, { max = 8, shrink = 2 })
  print("\n== after relu + pool (first 8 maps) ==")
  viz.grid(p, { max = 8 })
  viz.save_png(p, out_dir .. "/inspect_maps.png", { scale = 4 })
end)

-- 5. One batch in detail: activations, gradients, gradient flow.
print("\n== trace of one batch ==")
net:trace(last_x, last_y)
print("\n== gradient flow ==")
viz.gradflow(net)
print("\n== histogram of the conv weights ==")
viz.hist(net.conv.weight, { bins = 12 })

-- 6. The autograd graph of a small loss (before backward frees it).
print("\n== autograd graph ==")
local small = F.cross_entropy(net(last_x:narrow(1, 1, 2)), last_y:narrow(1, 1, 2))
viz.graph(small, { names = net })

-- 7. Where the time goes.
print("\n== profile (batch of 64) ==")
net:profile(last_x, { iters = 10 })
print("\nwrote " .. out_dir .. "/inspect_filters.png and " .. out_dir .. "/inspect_maps.png")
