-- labs/checks/04-fashion.lua -- checks of Lab 4 (a CNN on Fashion-MNIST).
-- References: the network's output shape, a loss measured before and after
-- the student's epoch, an accuracy counted here with a plain Lua loop, and
-- the trained network tested here on images it never saw.

local function has_data()
  local f = io.open("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz", "rb")
  if f then f:close() end
  return f ~= nil
end

local function need_data(t)
  if not has_data() then t.skip("Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)") end
end

-- The given loaders of the student's file, or the same thing if missing.
local function subset(n, train, batch)
  local ds = data.FashionMNIST{ train = train }
  return data.DataLoader(data.Subset(ds, table.move(data.randperm(#ds), 1, n, 1, {})), { batch_size = batch })
end

local function mean_loss(net, loader)
  net:eval()
  local total, n = 0, 0
  cnn.no_grad(function()
    for x, y in loader do
      total, n = total + F.cross_entropy(net(x), y):item() * x:size(1), n + x:size(1)
    end
  end)
  return total / n
end

-- Accuracy counted element by element in Lua (not argmax + eq).
local function loop_accuracy(net, loader)
  net:eval()
  local correct, total = 0, 0
  cnn.no_grad(function()
    for x, y in loader do
      local scores, labels = net(x):totable(), y:totable()
      for i, row in ipairs(scores) do
        local best = 1
        for k = 2, #row do if row[k] > row[best] then best = k end end
        if best == labels[i] then correct = correct + 1 end
        total = total + 1
      end
    end
  end)
  return correct / total
end

local function count_params(net)
  local n = 0
  for _, p in ipairs(net:parameters()) do n = n + p:numel() end
  return n
end

local function has_conv(net)
  for _, m in ipairs(net:modules()) do
    if m.__name == "Conv2d" then return true end
  end
  return false
end

local function reference_net()
  return nn.Sequential(nn.Conv2d(1, 8, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    nn.Linear(8 * 14 * 14, 10))
end

return {
  title = "Lab 4: a CNN on Fashion-MNIST",
  limits = { seconds = 110, memory_mb = 2048 },
  exercises = {
    { name = "build_net", run = function(lab, t)
      local net = t.fn(lab, "build_net")()
      local out = net(cnn.randn(4, 1, 28, 28))
      t.that(cnn.is_tensor(out) and out.shape == { 4, 10 },
        string.format("build_net()(x 4x1x28x28): shape expected 4x10, got %s", require("fmt").shape_str(out)))
      t.that(has_conv(net), "build_net(): the network has no nn.Conv2d layer (this is a CNN lab)")
      local n = count_params(net)
      t.that(n <= 500000, string.format("build_net(): %d parameters, keep it under 500,000", n))
      t.note(n .. " parameters")
    end },
    { name = "train_epoch", run = function(lab, t)
      need_data(t)
      local net, loader = reference_net(), subset(512, true, 64)
      local before = mean_loss(net, loader)
      local opt = optim.Adam(net:parameters(), { lr = 1e-3 })
      local reported = t.fn(lab, "train_epoch")(net, loader, opt)
      local after = mean_loss(net, loader)
      t.that(type(reported) == "number" and reported > 0,
        "train_epoch should return the mean batch loss (a positive number), got " .. tostring(reported))
      t.that(after < before * 0.9, string.format(
        "after train_epoch the loss went from %.3f to %.3f: the weights did not learn (zero_grad, backward, step?)",
        before, after))
      t.that(reported < before * 1.05 and reported > after * 0.5, string.format(
        "train_epoch returned %.3f, but the loss was %.3f before and %.3f after: return the MEAN of the batch losses",
        reported, before, after))
    end },
    { name = "accuracy", run = function(lab, t)
      need_data(t)
      local net, loader = reference_net(), subset(300, false, 100)
      t.number(t.fn(lab, "accuracy")(net, loader), loop_accuracy(net, loader),
        "accuracy(net, 300 test images) of an untrained net", { atol = 1e-9 })
    end },
    { name = "trained_net", run = function(lab, t)
      need_data(t)
      local net = t.fn(lab, "trained_net")()
      t.that(type(net) == "table" and net.parameters, "trained_net() should return the network")
      cnn.manual_seed(123) -- test images that trained_net's subset did not pick in the same order
      local acc = loop_accuracy(net, subset(1000, false, 500))
      t.that(acc >= 0.75, string.format("test accuracy %.1f%% on 1,000 test images, expected 75%% or more", acc * 100))
      t.note(string.format("test accuracy %.1f%%", acc * 100))
    end },
  },
}
