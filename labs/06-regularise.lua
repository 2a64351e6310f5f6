-- labs/06-regularise.lua -- Lab 6: overfitting and regularisation (45 min).
--
-- A network with many weights and few images learns the training images
-- by heart: its training loss keeps falling while its test loss turns and
-- rises.  That is *overfitting*, and the curves of both losses per epoch
-- show it at a glance.  Three classic remedies:
--   dropout       during training, zero each activation with probability
--                 p and scale the others by 1/(1-p) (so the expected value
--                 is unchanged); at test time do nothing.  Units cannot rely
--                 on each other.
--   weight decay  pull every weight towards 0 at each step:
--                 w <- w - lr * (grad + weight_decay * w)   (SGD's rule)
--   augmentation  show a slightly different image each epoch: a mirrored
--                 shirt is still a shirt.
-- A simple remedy on top: *early stopping*, keep the weights of the epoch
-- with the lowest test (validation) loss.
--
-- How to work.  Fill in each TODO block, then run
--     cnnsh --check labs/06-regularise.lua
--
-- Try this at the prompt (each run takes about half a minute):
--   > lab = dofile("labs/06-regularise.lua")
--   > lab.overfit_demo{}                       -- test loss turns up: overfitting
--   > lab.overfit_demo{dropout = 0.5}          -- with your dropout
--   > lab.overfit_demo{weight_decay = 0.5}        -- AdamW's decoupled decay
--   > lab.overfit_demo{augment = true}         -- with your hflip
local lab = {}

local function TODO(what) error("TODO: " .. what, 2) end

-- Exercise 1. Dropout by hand.  training false: return x unchanged.
-- training true: keep each element with probability 1 - p, scaled by
-- 1/(1-p); zero it otherwise.  cnn.rand_like(x) gives uniform numbers in
-- [0, 1); a mask from :ge(p) is uint8 (turn it into x's dtype with
-- :to(x.dtype)).  p is in [0, 1).
function lab.dropout(x, p, training)
  -- TODO: the training case
  return x
end

-- Exercise 2. One SGD step with weight decay, by hand: return the new
-- weights w - lr * (grad + weight_decay * w) (a new tensor; leave w as is).
function lab.sgd_step(w, grad, lr, weight_decay)
  -- TODO: add the decay term
  return w - grad * lr
end

-- Exercise 3. Mirror a batch of images left to right: x is N x C x H x W,
-- return y with y[n][c][i][j] = x[n][c][i][W + 1 - j].
-- One way: index_select on dimension 4 with the indices W, W-1, ..., 1
-- (cnn.arange(W, 1, -1) or a cnn.tensor of them, int64).
function lab.hflip(x)
  TODO("reverse dimension 4")
end

-- Exercise 4. Early stopping: given the lists of training and test losses
-- per epoch, draw both in the terminal with
--   viz.plot(train_losses, test_losses, {title = "loss per epoch", names = {"train", "test"}})
-- and return the epoch (1-based) with the lowest TEST loss.
function lab.best_epoch(train_losses, test_losses)
  -- TODO: plot, then find the minimum of test_losses
  return #test_losses
end

-- Given: the demo of "try this".  An MLP on 128 training images for 30
-- epochs (AdamW, lr 3e-3, batches of 16), the test loss on 1,000 images
-- after each, both curves plotted.  opts: dropout = p, weight_decay = wd,
-- augment = true.

-- Your dropout as a layer: self.training is set by net:train() / net:eval().
local LabDropout = nn.Module:extend("LabDropout")
function LabDropout:init(p) self.p = p end
function LabDropout:forward(x) return lab.dropout(x, self.p, self.training) end

local function demo_net(p)
  return nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 256), nn.ReLU(), LabDropout(p or 0),
    nn.Linear(256, 10))
end

local function epoch_loss(net, loader, opt, augment)
  local total, n = 0, 0
  if opt then net:train() else net:eval() end
  for x, y in loader do
    if augment and opt then
      local flip = cnn.rand(x:size(1)):lt(0.5):to(x.dtype):view(-1, 1, 1, 1)
      x = lab.hflip(x) * flip + x * (1 - flip)
    end
    local loss = F.cross_entropy(net(x), y)
    if opt then
      opt:zero_grad(); loss:backward(); opt:step()
    end
    total, n = total + loss:item() * x:size(1), n + x:size(1)
  end
  return total / n
end

function lab.overfit_demo(opts)
  local train_set, test_set = data.FashionMNIST{ train = true }, data.FashionMNIST{ train = false }
  local train = data.DataLoader(data.Subset(train_set, table.move(data.randperm(#train_set), 1, 128, 1, {})),
    { batch_size = 16, shuffle = true })
  local test = data.DataLoader(data.Subset(test_set, table.move(data.randperm(#test_set), 1, 1000, 1, {})),
    { batch_size = 500 })
  local net = demo_net(opts.dropout)
  local opt = optim.AdamW(net:parameters(), { lr = 3e-3, weight_decay = opts.weight_decay or 0 })
  local tr, te = {}, {}
  for e = 1, 30 do
    tr[e] = epoch_loss(net, train, opt, opts.augment)
    te[e] = cnn.no_grad(function() return epoch_loss(net, test, nil) end)
  end
  print(string.format("best epoch %d, test loss %.3f (last %.3f)", lab.best_epoch(tr, te),
    math.min(table.unpack(te)), te[#te]))
end

return lab
