-- examples/finetune.lua -- fine-tune a ResNet-18: freeze the backbone, train
-- a new head on Fashion-MNIST.
--
--   cnnsh examples/finetune.lua [--weights FILE] [--epochs N] [--subset N] [--test-subset N]
--                               [--size N] [--batch-size N] [--lr X] [--workers N] [--seed N]
--
-- --weights: a ResNet-18 state dict saved by PyTorch, e.g.
--   import torchvision, safetensors.torch as st
--   st.save_file(torchvision.models.resnet18(weights="DEFAULT").state_dict(), "resnet18.safetensors")
-- It loads with PyTorch's names (load_state_dict(sd, {torch = true})).
-- Without it the backbone keeps its random weights, and the script says so:
-- the head then learns from random features, which still beats chance by far
-- but is not what fine-tuning is for.
--
-- The grey 28x28 images are resized to --size (64) and repeated into 3
-- channels, then normalised with ImageNet's statistics, as the backbone
-- expects.  The backbone is frozen (net:freeze()) and kept in eval mode (its
-- BatchNorm statistics stay those of the weights); net.fc becomes a new
-- nn.Linear(512, 10), the only trained layer.  Since no input of the backbone
-- requires a gradient, its forward records no graph: a step costs one
-- backbone forward and the head's backward.  SGD with momentum, the lr cut by
-- ReduceLROnPlateau when the test accuracy stalls.  With the defaults
-- (6,000 training images, 2 epochs) it takes a few minutes on two cores.

-- ---- command line ---------------------------------------------------------------
local args = require("cli").parse(arg, {
  usage = "cnnsh examples/finetune.lua [--weights FILE] [--epochs N] [--subset N] [--test-subset N] " ..
          "[--size N] [--batch-size N] [--lr X] [--workers N] [--seed N]",
  options = { { "weights", nil, "string" }, { "epochs", 2, "integer" }, { "subset", 6000, "integer" },
              { "test-subset", 2000, "integer" }, { "size", 64, "integer" }, { "batch-size", 64, "integer" },
              { "lr", 0.01, "number" }, { "workers", nil, "integer" }, { "seed", 1, "integer" } },
})
cnn.manual_seed(args.seed)

-- ---- the model --------------------------------------------------------------------
local net = models.resnet18()
if args.weights then
  net:load_state_dict(cnn.load(args.weights), { torch = true })
  print("loaded the backbone from " .. args.weights)
else
  print("no --weights given: the backbone starts from random weights " ..
        "(pass a torchvision resnet18 state dict saved as safetensors to fine-tune for real)")
end
net:freeze()                 -- no gradients for the backbone ...
net:eval()                   -- ... and its BatchNorm statistics stay as loaded
net.fc = nn.Linear(512, 10)  -- the new head replaces torchvision's 1000-class fc
print(string.format("ResNet-18: %d parameters, %d of them trained (the new head)",
  models.count_parameters(net), models.count_parameters(net.fc)))

-- ---- data ---------------------------------------------------------------------------
local T = data.transforms
local function subset(ds, n)
  local pick = data.randperm(#ds)
  return data.Subset(ds, table.move(pick, 1, math.min(n, #ds), 1, {}))
end
local resize = T.Resize({ args.size, args.size })
local train_set = subset(data.FashionMNIST{ train = true, transform = resize }, args.subset)
local test_set = subset(data.FashionMNIST{ train = false, transform = resize }, args["test-subset"])
local workers = args.workers or cnn.io.default_workers()
local train_loader = data.DataLoader(train_set, { batch_size = args["batch-size"], shuffle = true, num_workers = workers })
local test_loader = data.DataLoader(test_set, { batch_size = 250, num_workers = workers })

-- N x 1 x H x W grey -> N x 3 x H x W, ImageNet-normalised
local mean = cnn.tensor({ 0.485, 0.456, 0.406 }):view(1, 3, 1, 1)
local std = cnn.tensor({ 0.229, 0.224, 0.225 }):view(1, 3, 1, 1)
local function to_rgb(x)
  return (x:expand(x:size(1), 3, x:size(3), x:size(4)) - mean) / std
end

-- ---- training the head ----------------------------------------------------------------
local opt = optim.SGD(net.fc:parameters(), { lr = args.lr, momentum = 0.9 })
local plateau = optim.lr_scheduler.ReduceLROnPlateau(opt, { mode = "max", factor = 0.3, patience = 0 })

local function evaluate()
  local correct = 0
  cnn.no_grad(function()
    for x, y in test_loader do correct = correct + net(to_rgb(x)):argmax(2):eq(y):long():sum():item() end
  end)
  return 100 * correct / #test_set
end

for epoch = 1, args.epochs do
  local total, count, t0 = 0, 0, os.clock()
  for x, y in train_loader do
    opt:zero_grad()
    local loss = F.cross_entropy(net(to_rgb(x)), y)
    loss:backward()
    opt:step()
    total, count = total + loss:item() * x:size(1), count + x:size(1)
  end
  local acc = evaluate()
  plateau:step(acc)
  print(string.format("epoch %d: train loss %.4f, test accuracy %.2f%%, lr %g, %.1f s CPU", epoch,
    total / math.max(count, 1), acc, opt.param_groups[1].lr, os.clock() - t0))
end
