-- examples/cifar10_resnet.lua -- ResNet-20 on CIFAR-10 (He et al., "Deep
-- Residual Learning for Image Recognition", section 4.2).
--
--   cnnsh examples/cifar10_resnet.lua [--root DIR] [--epochs N] [--subset N]
--                                     [--batch-size N] [--lr X] [--workers N] [--seed N]
--
-- Needs CIFAR-10's binary version (data_batch_1.bin .. data_batch_5.bin,
-- test_batch.bin) in --root, $CNNSH_DATA/cifar-10-batches-bin or
-- /usr/share/datasets/cifar-10-batches-bin; without them it says where it
-- looked and exits with status 1.
--
-- The network is models.resnet20 from the model zoo (stdlib/models/resnet.lua):
-- a 3x3 convolution to 16 channels, three stages of three basic blocks
-- (16, 32, 64 channels; the first block of stages 2 and 3 halves the size
-- with stride 2 and projects its shortcut with a 1x1 convolution, the
-- paper's option B), global average pooling and a linear layer: 20 layers
-- with weights, 0.27 M parameters.  Training as in the paper, shortened:
-- SGD with momentum 0.9, weight decay 1e-4, learning rate 0.1 annealed
-- along a cosine, random crops of the 4-pixel padded image and flips.
-- The paper's 91.25% takes 160+ epochs (hours on a CPU, minutes on a GPU).

-- ---- command line ---------------------------------------------------------------
local args = require("cli").parse(arg, {
  usage = "cnnsh examples/cifar10_resnet.lua [--root DIR] [--epochs N] [--subset N] [--batch-size N] " ..
          "[--lr X] [--workers N] [--seed N]",
  options = { { "root", nil, "string" }, { "epochs", 10, "integer" }, { "subset", nil, "integer" },
              { "batch-size", 128, "integer" }, { "lr", 0.1, "number" }, { "workers", nil, "integer" },
              { "seed", 1, "integer" } },
})
cnn.manual_seed(args.seed)

-- ---- data --------------------------------------------------------------------------------
local T = data.transforms
-- CIFAR-10's per-channel mean and standard deviation (training set, [0, 1] pixels)
local normalize = T.Normalize({ 0.4914, 0.4822, 0.4465 }, { 0.2470, 0.2435, 0.2616 })
local ok, train_set = pcall(data.CIFAR10, { root = args.root, train = true,
  transform = T.Compose{ T.RandomCrop(32, { padding = 4 }), T.RandomHorizontalFlip(), normalize } })
if not ok then
  io.stderr:write(tostring(train_set):gsub("^[^:]*:%d+: ", "") .. "\n")
  os.exit(1)
end
local test_set = data.CIFAR10{ root = args.root, train = false, transform = normalize }
if args.subset then
  local perm = data.randperm(#train_set)
  train_set = data.Subset(train_set, table.move(perm, 1, math.min(args.subset, #perm), 1, {}))
end
local workers = args.workers or cnn.io.default_workers()
local train_loader = data.DataLoader(train_set, { batch_size = args["batch-size"], shuffle = true, num_workers = workers })
local test_loader = data.DataLoader(test_set, { batch_size = 500, num_workers = workers })

-- ---- ResNet-20 (models.resnet20, stdlib/models/resnet.lua) ------------------------------------
local net = models.resnet20{ num_classes = 10 }
print(string.format("ResNet-20: %d parameters", models.count_parameters(net)))

-- ---- training ------------------------------------------------------------------------------
local opt = optim.SGD(net:parameters(), { lr = args.lr, momentum = 0.9, weight_decay = 1e-4 })
local sched = optim.lr_scheduler.CosineAnnealingLR(opt, args.epochs)

local function evaluate()
  net:eval()
  local correct = 0
  cnn.no_grad(function()
    for x, y in test_loader do
      correct = correct + net(x:contiguous("channels_last")):argmax(2):eq(y):long():sum():item()
    end
  end)
  return 100 * correct / #test_set
end

for epoch = 1, args.epochs do
  net:train()
  local total, count, t0 = 0, 0, os.clock()
  for x, y in train_loader do
    opt:zero_grad()
    -- channels-last batches: the convolutions run oneDNN's nhwc kernels
    -- without reorders, ~1.1-1.2x a step (README, "Channels-last tensors")
    local loss = F.cross_entropy(net(x:contiguous("channels_last")), y)
    loss:backward()
    opt:step()
    total, count = total + loss:item() * x:size(1), count + x:size(1)
  end
  sched:step()
  print(string.format("epoch %d: train loss %.4f, test accuracy %.2f%%, %.1f s CPU", epoch,
    total / math.max(count, 1), evaluate(), os.clock() - t0))
end
