-- examples/fashion_mnist_ddp.lua -- examples/fashion_mnist.lua's network
-- trained data-parallel on several processes (see dist and README,
-- "Several processes").
--
--   cnnsh --nproc 2 examples/fashion_mnist_ddp.lua [--epochs N] [--subset N]
--        [--batch-size N] [--lr X] [--dropout P] [--seed N] [--out PATH] [--resume PATH]
--        [--sync-bn 0|1] [--test-subset N]
--   mpirun -np 2 cnnsh examples/fashion_mnist_ddp.lua ...      (the same)
--   cnnsh examples/fashion_mnist_ddp.lua ...                   (one process)
--
-- --batch-size is the GLOBAL batch: each of the N ranks takes batch/N
-- samples per step (its own shard: DataLoader{distributed = true}), and
-- DistributedDataParallel averages the gradients, so a step is the step one
-- process would take on the whole batch.  With --sync-bn 1 (the default)
-- the batch-norm layers are nn.SyncBatchNorm, whose statistics are those
-- of the global batch: 2 processes then train the same model as 1 with the
-- same global batch, up to rounding and the dropout masks.  Only rank 0
-- prints and writes the checkpoint (every epoch, atomically); --resume
-- reads it on every rank, on any number of ranks (the global batch stays).
-- Test accuracy: each rank evaluates its shard of the test set and the
-- counts are summed over the ranks.

-- ---- command line ---------------------------------------------------------------
local args = require("cli").parse(arg, {
  usage = "cnnsh examples/fashion_mnist_ddp.lua [--epochs N] [--subset N] " ..
          "[--batch-size N] [--lr X] [--dropout P] [--seed N] [--out PATH] [--resume PATH] " ..
          "[--sync-bn 0|1] [--test-subset N]\n(N processes: cnnsh --nproc N examples/fashion_mnist_ddp.lua ...)",
  options = { { "epochs", 6, "integer" }, { "subset", 0, "integer" },
              { "out", "fmnist_ddp.safetensors", "string" }, { "batch-size", 64, "integer" },
              { "lr", 2e-3, "number" }, { "dropout", 0.25, "number" }, { "seed", 1, "integer" },
              { "resume", "", "string" }, { "sync-bn", 1, "integer" }, { "test-subset", 0, "integer" } },
})

local rank, world = dist.init()
local progress = require("progress")
cnn.manual_seed(args.seed) -- the same on every rank: the same subset, the same initial weights
local per_rank = args["batch-size"] // world
if per_rank * world ~= args["batch-size"] then
  error(string.format("--batch-size %d is not a multiple of the %d ranks", args["batch-size"], world), 0)
end

-- ---- data: each rank its shard ------------------------------------------------------
local normalize = data.transforms.Normalize(0.2860, 0.3530)
local train_set = data.FashionMNIST{ train = true, transform = normalize }
local test_set = data.FashionMNIST{ train = false, transform = normalize }
local function first(ds, n)
  if n <= 0 or n >= #ds then return ds end
  return data.Subset(ds, table.move(data.randperm(#ds), 1, n, 1, {}))
end
train_set, test_set = first(train_set, args.subset), first(test_set, args["test-subset"])
local train_loader = data.DataLoader(train_set, { batch_size = per_rank, shuffle = true,
                                                  distributed = true, seed = args.seed })
local test_loader = data.DataLoader(test_set, { batch_size = 500, distributed = true })

-- ---- the network, wrapped -------------------------------------------------------------
local net = nn.Sequential(
  nn.Conv2d(1, 32, 3, { padding = 1 }), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
  nn.Conv2d(32, 64, 3, { padding = 1 }), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
  nn.Flatten(),
  nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(args.dropout),
  nn.Linear(128, 10))
if args["sync-bn"] ~= 0 then net = nn.SyncBatchNorm.convert_sync_batchnorm(net) end
local opt = optim.Adam(net:parameters(), { lr = args.lr })
local steps = args.epochs * #train_loader
local sched = optim.lr_scheduler.OneCycleLR(opt, { max_lr = args.lr, total_steps = steps })
local start_epoch = 1
if args.resume ~= "" then -- every rank reads it; any number of ranks
  local ckpt = cnn.load(args.resume)
  net:load_state_dict(ckpt.model)
  opt:load_state_dict(ckpt.optimizer)
  sched:load_state_dict(ckpt.scheduler)
  start_epoch = math.tointeger(tonumber(ckpt.epoch)) + 1
  dist.print(string.format("resumed from %s after epoch %d", args.resume, start_epoch - 1))
end
local model = nn.DistributedDataParallel(net) -- rank 0's weights on every rank

-- ---- evaluation over every rank's shard -------------------------------------------------
local function test_accuracy()
  net:eval()
  local counts = cnn.zeros({ 2 }, "int64")
  cnn.no_grad(function()
    for x, y in test_loader do
      counts[1] = counts[1]:item() + net(x):argmax(2):eq(y):long():sum():item()
      counts[2] = counts[2]:item() + x:size(1)
    end
  end)
  dist.all_reduce(counts, "sum")
  return counts[1]:item() / counts[2]:item()
end

-- ---- training -----------------------------------------------------------------------------
dist.print(string.format("%d rank%s; training on %d images (%d per rank per step), testing on %d",
  world, world == 1 and "" or "s", #train_set, per_rank, #test_set))
local acc
for epoch = start_epoch, args.epochs do
  local t0 = cnn.clock()
  model:train()
  train_loader:set_epoch(epoch) -- a new shuffle that every rank agrees on
  local bar = progress.new{ total = #train_loader, title = string.format("epoch %d/%d", epoch, args.epochs) }
  bar.quiet = not dist.is_main()
  for x, y in train_loader do
    opt:zero_grad()
    local out = model(x)
    local loss = F.cross_entropy(out, y)
    loss:backward() -- gradients averaged over the ranks here
    opt:step()
    sched:step()
    bar:update{ loss = loss:item(), correct = out:argmax(2):eq(y):long():sum():item(), n = x:size(1) }
  end
  bar:finish()
  acc = test_accuracy()
  dist.print(string.format("epoch %d/%d: test accuracy %.2f%%  (%.1f s)", epoch, args.epochs,
    100 * acc, cnn.clock() - t0))
  if dist.is_main() then
    cnn.save(args.out, { model = net:state_dict(), optimizer = opt:state_dict(),
                         scheduler = sched:state_dict(), epoch = epoch })
  end
end
if acc then dist.print(string.format("done: test accuracy %.2f%%, checkpoint %s", 100 * acc, args.out)) end
