-- labs/04-fashion.lua -- Lab 4: build and train a CNN on Fashion-MNIST
-- (60 min).
--
-- Fashion-MNIST: 28x28 gray pictures of clothes in 10 classes (1 T-shirt,
-- 2 trouser, 3 pullover, 4 dress, 5 coat, 6 sandal, 7 shirt, 8 sneaker,
-- 9 bag, 10 ankle boot; labels are 1..10 in cnnsh).  A DataLoader hands
-- out batches: x is B x 1 x 28 x 28 float32 in [0, 1], y holds B labels.
--
-- Training is a loop of four steps per batch:
--   opt:zero_grad()                        forget the previous gradients
--   local loss = F.cross_entropy(net(x), y) how wrong the scores are
--   loss:backward()                        gradients of the loss
--   opt:step()                             move every weight downhill
-- net:train() before training and net:eval() before testing (dropout and
-- batch norm behave differently); no gradients are needed to test:
-- cnn.no_grad(function() ... end).
--
-- This lab trains on 2,000 of the 60,000 training images so that it runs
-- in seconds; examples/fashion_mnist.lua trains on all of them.
--
-- How to work.  Fill in each TODO block, then run
--     cnnsh --check labs/04-fashion.lua
--
-- Try this at the prompt:
--   > lab = dofile("labs/04-fashion.lua")
--   > train, test = lab.loaders(2000, 1000)
--   > x, y = train()                      -- one batch (a loader is an iterator)
--   > viz.grid(x[{ {1, 16} }])            -- 16 pictures
--   > net = lab.build_net(); net:summary{1, 1, 28, 28}
--   > net = lab.trained_net(); lab.accuracy(net, test)
local lab = {}

local function TODO(what) error("TODO: " .. what, 2) end

-- Given: loaders over the first n_train training and n_test test images
-- (a fixed random subset, so every run sees the same images).
function lab.loaders(n_train, n_test, batch_size)
  local train_set, test_set = data.FashionMNIST{ train = true }, data.FashionMNIST{ train = false }
  local order = data.randperm(#train_set)
  local train = data.Subset(train_set, table.move(order, 1, n_train, 1, {}))
  local test = data.Subset(test_set, table.move(data.randperm(#test_set), 1, n_test, 1, {}))
  return data.DataLoader(train, { batch_size = batch_size or 64, shuffle = true }),
         data.DataLoader(test, { batch_size = 500 })
end

-- Exercise 1. A CNN for B x 1 x 28 x 28 images that returns B x 10 scores.
-- Suggested: Conv2d(1, 16, 3, {padding = 1}), ReLU, MaxPool2d(2)  (16x14x14),
--            Conv2d(16, 32, 3, {padding = 1}), ReLU, MaxPool2d(2) (32x7x7),
--            Flatten, Linear(32 * 7 * 7, 10).
-- Keep it under 500,000 parameters.
function lab.build_net()
  -- TODO: add the convolution blocks before the classifier
  return nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 5))
end

-- Exercise 2. One epoch: the four steps above for every batch of loader.
-- Return the mean of the batch losses (a Lua number: loss:item()).
function lab.train_epoch(net, loader, opt)
  net:train()
  local total, batches = 0, 0
  for x, y in loader do
    TODO("zero_grad, loss, backward, step; add loss:item() to total")
  end
  return total / math.max(batches, 1)
end

-- Exercise 3. The fraction of loader's images that net classifies
-- correctly (a number in [0, 1]).  net:eval(), no gradients; the predicted
-- class is the index of the highest score: net(x):argmax(2).
function lab.accuracy(net, loader)
  local correct, total = 0, 0
  TODO("count pred:eq(y):sum():item() over the batches")
  return correct / math.max(total, 1)
end

-- Exercise 4. Train lab.build_net() on the batches of lab.loaders(2000,
-- 1000, 32) with Adam (lr 2e-3) for 3 epochs and return the trained
-- network.  The checker tests it on 1,000 test images: it must reach 75%
-- accuracy (about 79% is typical; the full example reaches 92%).
function lab.trained_net()
  local train = lab.loaders(2000, 1000, 32)
  local net = lab.build_net()
  TODO("an optimizer, then lab.train_epoch three times")
  return net
end

return lab
