-- examples/quickstart.lua -- the smallest complete cnnsh script: load data,
-- define a network, train it, measure it.  Read it top to bottom; run it
-- with
--
--   cnnsh examples/quickstart.lua
--
-- (about a minute on two cores; it trains on 10,000 images, once).
-- `cnn`, `F`, `nn`, `optim` and `data` are globals in cnnsh: nothing to require.

require("cli").parse(arg, { usage = "cnnsh examples/quickstart.lua   (no arguments)" })

-- 1. Reproducible randomness: the same seed gives the same run.
cnn.manual_seed(0)

-- 2. Data.  Fashion-MNIST: 28x28 gray images of clothes in 10 classes.
-- A DataLoader hands out batches: x is 64x1x28x28 float32 (pixels scaled
-- to [0, 1]), y holds the 64 labels, 1..10 (1-based, like Lua).
local train_set = data.FashionMNIST{ train = true }
local test_set = data.FashionMNIST{ train = false }
local order = data.randperm(#train_set)                       -- a random order of 1..60000
local small = data.Subset(train_set, table.move(order, 1, 10000, 1, {})) -- its first 10,000
local train_loader = data.DataLoader(small, { batch_size = 64, shuffle = true })
local test_loader = data.DataLoader(test_set, { batch_size = 1000 })

-- 3. The network, a class of its own: nn.Module:extend makes one.
--    init() creates the layers, forward() says how data flows through them.
local SimpleCNN = nn.Module:extend("SimpleCNN")

function SimpleCNN:init()
  self.conv = nn.Conv2d(1, 32, 3, { padding = 1 }) -- 1 channel in, 32 out: 32x28x28
  self.pool = nn.MaxPool2d(2)                       -- halves height and width: 32x14x14
  self.fc = nn.Linear(32 * 14 * 14, 10)             -- one score per class
end

function SimpleCNN:forward(x)
  x = self.pool(F.relu(self.conv(x)))
  return self.fc(x:flatten(2)) -- flatten all but the batch dimension
end

local net = SimpleCNN()
print(net) -- the layers and their sizes

-- 4. The optimizer updates the parameters from their gradients.
local opt = optim.Adam(net:parameters(), { lr = 1e-3 })

-- 5. Training: for every batch, forward, loss, backward, step.
net:train()
for step_x, step_y in train_loader do
  opt:zero_grad()                                     -- forget the last gradients
  local loss = F.cross_entropy(net(step_x), step_y)   -- how wrong are we?
  loss:backward()                                     -- gradients of the loss
  opt:step()                                          -- move the parameters downhill
end

-- 6. Testing: no gradients needed; count the right answers.
net:eval()
local correct = 0
cnn.no_grad(function()
  for x, y in test_loader do
    local predicted = net(x):argmax(2)                -- the class with the highest score
    correct = correct + predicted:eq(y):long():sum():item()
  end
end)
print(string.format("test accuracy: %.2f%% of %d images", 100 * correct / #test_set, #test_set))

-- Next: examples/fashion_mnist.lua adds batch norm, a deeper network, a
-- progress bar, per-epoch test accuracy and a checkpoint.
