-- examples/deploy.lua -- from a trained network to a deployable one: load
-- the checkpoint of examples/fashion_mnist.lua (or train briefly when there
-- is none), fuse batch norm and ReLU into the convolutions (net:fuse()),
-- export to ONNX, load the ONNX file back, and print the accuracy and
-- speed of each on the Fashion-MNIST test set.
--
--   cnnsh examples/deploy.lua [--checkpoint PATH] [--out model.onnx]
--                             [--train-subset N] [--test N] [--seed N]
--
-- --train-subset: without a checkpoint, train one epoch on that many images
-- (default 5000).  --test: evaluate on the first N test images (default all).
-- Not here yet (issue 16, points 5 and 6): bfloat16 and int8 (cnn.quantize).
local args = { checkpoint = "fmnist.safetensors", out = "model.onnx", ["train-subset"] = 5000,
               test = 10000, seed = 1 }
local i = 1
while arg and arg[i] do
  local key = arg[i]:match("^%-%-(.+)$")
  if not key or args[key] == nil then
    error("usage: cnnsh examples/deploy.lua [--checkpoint PATH] [--out PATH] [--train-subset N] [--test N] "
          .. "[--seed N]  (unknown argument '" .. arg[i] .. "')", 0)
  end
  local v = arg[i + 1] or error("--" .. key .. " needs a value", 0)
  args[key] = (key == "checkpoint" or key == "out") and v or math.tointeger(tonumber(v))
  i = i + 2
end
cnn.manual_seed(args.seed)

local normalize = data.transforms.Normalize(0.2860, 0.3530)
local function network() -- the network of examples/fashion_mnist.lua
  return nn.Sequential(
    nn.Conv2d(1, 32, 3, { padding = 1 }), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, { padding = 1 }), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25), nn.Linear(128, 10))
end

-- ---- a trained network ----------------------------------------------------------------
local net = network()
local ok, ckpt = pcall(cnn.load, args.checkpoint)
if ok then
  net:load_state_dict(ckpt.model)
  print("loaded " .. args.checkpoint)
else
  print(string.format("no checkpoint at %s: training one epoch on %d images", args.checkpoint, args["train-subset"]))
  local train_set = data.FashionMNIST{ train = true, transform = normalize }
  local perm = data.randperm(#train_set)
  train_set = data.Subset(train_set, table.move(perm, 1, math.min(args["train-subset"], #perm), 1, {}))
  train.fit(net, data.DataLoader(train_set, { batch_size = 64, shuffle = true }),
            { epochs = 1, optimizer = optim.Adam(net:parameters(), { lr = 2e-3 }), progress = false })
end
net:eval()

-- ---- fuse, export, load back --------------------------------------------------------------
local fused = network()
fused:load_state_dict(net:state_dict())
fused:eval():fuse()
cnn.onnx.export(fused, cnn.randn(1, 1, 28, 28), args.out, { dynamic_batch = true })
local onnx_model = cnn.onnx.load(args.out)
print("exported the fused network to " .. args.out)

-- ---- accuracy and speed ---------------------------------------------------------------------
local test_set = data.FashionMNIST{ train = false, transform = normalize }
local first = {}
for k = 1, math.min(args.test, #test_set) do first[k] = k end
local loader = data.DataLoader(data.Subset(test_set, first), { batch_size = 256 })

local function evaluate(m)
  local correct, n, seconds = 0, 0, 0
  cnn.no_grad(function()
    for x, y in loader do
      local t0 = cnn.clock()
      local pred = m(x):argmax(2)
      seconds = seconds + cnn.clock() - t0
      correct = correct + pred:eq(y):long():sum():item()
      n = n + x:size(1)
    end
  end)
  return 100 * correct / n, n / seconds
end

print(string.format("%-22s %10s %12s", "model", "accuracy", "images/s"))
for _, row in ipairs({ { "fp32", net }, { "fp32 fused", fused }, { "ONNX (fused), loaded", onnx_model } }) do
  local acc, speed = evaluate(row[2])
  print(string.format("%-22s %9.2f%% %12.0f", row[1], acc, speed))
end
