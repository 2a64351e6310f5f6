-- examples/image_folder.lua -- train the example network on your own
-- images: a folder with one subfolder per class.
--
--   cnnsh examples/image_folder.lua [--root DIR] [--epochs N] [--size N] [--batch-size N]
--                                   [--workers N] [--mode rgb|gray] [--seed N] [--demo N]
--                                   [--demo-dir DIR]
--
--   photos/                 (--root photos)
--     cats/  a.jpg b.png ...
--     dogs/  c.jpg ...
--
-- Without --root it first writes 2,000 (--demo N) Fashion-MNIST images as
-- PNG files into a folder of that layout (data.export_images; --demo-dir,
-- else a new folder under /tmp that it names) and trains on that.
-- Every image is resized (shorter edge) and centre-cropped to --size, so
-- the pictures may differ in size; training adds random crops and flips.
-- 10% of the images are held out to measure the accuracy.  Decoding and
-- augmentation run on --workers threads (default: every core).

-- ---- command line ---------------------------------------------------------------
local usage = "cnnsh examples/image_folder.lua [--root DIR] [--epochs N] [--size N] [--batch-size N] " ..
              "[--workers N] [--mode rgb|gray] [--seed N] [--demo N] [--demo-dir DIR]"
local args = require("cli").parse(arg, {
  usage = usage,
  options = { { "root", nil, "string" }, { "epochs", 3, "integer" }, { "size", 28, "integer" },
              { "batch-size", 64, "integer" }, { "workers", nil, "integer" }, { "mode", "rgb", "string" },
              { "seed", 1, "integer" }, { "demo", 2000, "integer" }, { "demo-dir", nil, "string" } },
})
if args.mode ~= "rgb" and args.mode ~= "gray" then
  io.stderr:write("--mode must be rgb or gray, got '" .. args.mode .. "'\nusage: " .. usage .. "\n")
  os.exit(2)
end
cnn.manual_seed(args.seed)

-- ---- the folder -------------------------------------------------------------------------
local root = args.root
if not root then
  root = args["demo-dir"]
  if not root then -- a fresh folder beside a temporary file's name
    local tmp = os.tmpname()
    os.remove(tmp)
    root = tmp .. "_fmnist_folder"
  end
  local fm = data.FashionMNIST{ train = true }
  local pick = data.randperm(#fm)
  local n = math.max(20, math.min(args.demo, #fm))
  data.export_images(data.Subset(fm, table.move(pick, 1, n, 1, {})), root)
  args.mode = "gray"
  print(string.format("wrote %d Fashion-MNIST images as PNG under %s", n, root))
end

local T = data.transforms
local size, mode = args.size, args.mode
local channels = mode == "gray" and 1 or 3
local train_tf = T.Compose{ T.Resize(size), T.CenterCrop(size), T.RandomCrop(size, { padding = 2 }),
                            T.RandomHorizontalFlip(), T.Normalize(0.5, 0.25) }
local eval_tf = T.Compose{ T.Resize(size), T.CenterCrop(size), T.Normalize(0.5, 0.25) }
local all = data.ImageFolder{ root = root, transform = train_tf, mode = mode, skip_bad = true }
local plain = data.ImageFolder{ root = root, transform = eval_tf, mode = mode, skip_bad = true }
print(all)
local n_val = math.max(1, #all // 10)
local order = data.randperm(#all)
local train_set = data.Subset(all, table.move(order, n_val + 1, #all, 1, {}))
local val_set = data.Subset(plain, table.move(order, 1, n_val, 1, {}))
local workers = args.workers or cnn.io.default_workers()
local train_loader = data.DataLoader(train_set, { batch_size = args["batch-size"], shuffle = true, num_workers = workers })
local val_loader = data.DataLoader(val_set, { batch_size = 256, num_workers = workers })

-- ---- the network (examples/fashion_mnist.lua's, for any size and classes) ---------------
local s4 = size // 4
local net = nn.Sequential(
  nn.Conv2d(channels, 32, 3, { padding = 1 }), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
  nn.Conv2d(32, 64, 3, { padding = 1 }), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
  nn.Flatten(), nn.Linear(64 * s4 * s4, 128), nn.ReLU(), nn.Linear(128, #all.classes))
local opt = optim.Adam(net:parameters(), { lr = 2e-3 })

-- ---- train and measure ----------------------------------------------------------------------
for epoch = 1, args.epochs do
  local t0 = os.clock()
  net:train()
  local total, count = 0, 0
  for x, y in train_loader do
    opt:zero_grad()
    local loss = F.cross_entropy(net(x), y)
    loss:backward()
    opt:step()
    total, count = total + loss:item() * x:size(1), count + x:size(1)
  end
  net:eval()
  local correct = 0
  cnn.no_grad(function()
    for x, y in val_loader do correct = correct + net(x):argmax(2):eq(y):long():sum():item() end
  end)
  print(string.format("epoch %d: train loss %.4f, validation accuracy %.2f%% (%d images), %.1f s CPU",
    epoch, total / math.max(count, 1), 100 * correct / #val_set, #val_set, os.clock() - t0))
end
