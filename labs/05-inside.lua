-- labs/05-inside.lua -- Lab 5: looking inside a network (45 min).
--
-- A trained CNN is not a black box: every layer's output (its *feature
-- maps*) can be looked at, every filter drawn, and the gradient that
-- reaches each layer measured.  That last one explains why deep networks
-- were hard to train before ReLU and batch normalisation: the sigmoid's
-- slope is at most 1/4, so the gradient shrinks by that factor (or more)
-- at every layer on its way back, and the first layers of a deep sigmoid
-- network barely learn (the *vanishing gradient*).  ReLU passes a slope of
-- 1 where it is active, and batch norm keeps each layer's activations at a
-- healthy scale, so the gradient reaches the first layer intact.
--
-- How to work.  Fill in each TODO block, then run
--     cnnsh --check labs/05-inside.lua
--
-- Try this at the prompt:
--   > net = nn.Sequential(nn.Conv2d(1, 8, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2))
--   > x = data.FashionMNIST{train = false}:get(1):view(1, 1, 28, 28)
--   > viz.grid(net[1].weight)                 -- the 8 filters (random for now)
--   > lab = dofile("labs/05-inside.lua")
--   > viz.grid(lab.feature_maps(net, x, 2)[1]) -- what the filters see, after ReLU
--   > deep = lab.deep_mlp("sigmoid", false)
--   > xb, yb = cnn.randn(64, 32), cnn.randint(1, 10, {64})
--   > F.cross_entropy(deep(xb), yb):backward(); viz.gradflow(deep)   -- tiny at the bottom
--   > deep = lab.deep_mlp("relu", true)
--   > F.cross_entropy(deep(xb), yb):backward(); viz.gradflow(deep)   -- even
--   > net:trace(cnn.randn(4, 1, 28, 28))      -- statistics of every layer
local lab = {}

local function TODO(what) error("TODO: " .. what, 2) end

-- Exercise 1. The output of the first k layers of the nn.Sequential net
-- for input x: run x through net[1], net[2], ..., net[k] and return it.
-- (#net is the number of layers.)
function lab.feature_maps(net, x, k)
  -- TODO: apply the layers one by one
  return net(x)
end

-- Exercise 2. Run one forward and backward pass of
-- F.cross_entropy(net(x), y) and return a list with the L2 norm (a Lua
-- number) of each parameter's gradient, in the order of net:parameters().
-- Start from zero gradients (net:zero_grad()).  p.grad:norm():item() is
-- one norm.
function lab.grad_norms(net, x, y)
  local norms = {}
  TODO("zero_grad, forward, loss, backward, then one norm per parameter")
  return norms
end

-- Exercise 3. A deep multi-layer perceptron for 32 inputs and 10 classes:
-- 8 hidden layers, each nn.Linear(32, 32), then (if batchnorm)
-- nn.BatchNorm1d(32), then the activation: nn.Sigmoid() when activation is
-- "sigmoid", nn.ReLU() when it is "relu".  Last, nn.Linear(32, 10).
-- The checker measures how much gradient reaches the first layer.
function lab.deep_mlp(activation, batchnorm)
  local layers = {}
  for _ = 1, 8 do
    layers[#layers + 1] = nn.Linear(32, 32)
    -- TODO: batch norm when asked, then the activation
  end
  layers[#layers + 1] = nn.Linear(32, 10)
  return nn.Sequential(table.unpack(layers))
end

-- Exercise 4. The gradient-flow ratio of a network built by deep_mlp: run
-- forward and backward of the cross-entropy on (x, y) (from zero
-- gradients) and return
--   (norm of the FIRST Linear's weight gradient) / (norm of the LAST Linear's weight gradient)
-- Near 1: the gradient flows; far below 1: it vanishes on its way down.
function lab.gradient_ratio(net, x, y)
  TODO("net[1].weight.grad and net[#net].weight.grad after one backward")
end

return lab
