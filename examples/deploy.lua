-- examples/deploy.lua -- from a trained network to deployable ones: load the
-- checkpoint of examples/fashion_mnist.lua (or train briefly when there is
-- none), fuse batch norm and ReLU into the layers (net:fuse()), quantize to
-- INT8 (cnn.quantize, calibrated on training images), export both to ONNX,
-- load the files back, and print the accuracy on the Fashion-MNIST test set
-- and the speed (images/s) at batch 1 and batch 256 of each:
--   fp32, fp32 fused, bf16 (cnn.autocast on the fused net), int8, and the
--   two ONNX files as cnn.onnx.load runs them.
--
--   cnnsh examples/deploy.lua [--checkpoint PATH] [--out model.onnx] [--out-int8 model_int8.onnx]
--                             [--train-subset N] [--test N] [--calibration N] [--batch1 N] [--seed N]
--
-- --train-subset: without a checkpoint, train one epoch on that many images
-- (default 5000).  --test: evaluate on the first N test images (default
-- all).  --calibration: training images the int8 scales are measured on
-- (default 1024).  --batch1: images timed one at a time (default 200).
-- Speeds are wall-clock seconds of the forward passes only (no data
-- loading); on a busy machine they are noise.  On a CPU without AVX-512
-- BF16, bf16 is emulated (float32 arithmetic on rounded operands) and is
-- slower than fp32: see README "Low precision".
local here = (arg and arg[0] or ""):match("^(.*/)") or ""
local network = dofile(here .. "fmnist_net.lua")

local args = { checkpoint = "fmnist.safetensors", out = "model.onnx", ["out-int8"] = "model_int8.onnx",
               ["train-subset"] = 5000, test = 10000, calibration = 1024, batch1 = 200, seed = 1 }
local PATHS = { checkpoint = true, out = true, ["out-int8"] = true }
local i = 1
while arg and arg[i] do
  local key = arg[i]:match("^%-%-(.+)$")
  if not key or args[key] == nil then
    error("usage: cnnsh examples/deploy.lua [--checkpoint PATH] [--out PATH] [--out-int8 PATH] [--train-subset N] "
          .. "[--test N] [--calibration N] [--batch1 N] [--seed N]  (unknown argument '" .. arg[i] .. "')", 0)
  end
  local v = arg[i + 1] or error("--" .. key .. " needs a value", 0)
  args[key] = PATHS[key] and v or math.tointeger(tonumber(v)) or error("--" .. key .. ": a whole number expected", 0)
  i = i + 2
end
cnn.manual_seed(args.seed)

local normalize = data.transforms.Normalize(0.2860, 0.3530)
local train_set = data.FashionMNIST{ train = true, transform = normalize }
local function first(ds, n)
  local idx = {}
  for k = 1, math.min(n, #ds) do idx[k] = k end
  return data.Subset(ds, idx)
end

-- ---- a trained network ----------------------------------------------------------------
local net = network()
local ok, ckpt = pcall(cnn.load, args.checkpoint)
if ok then
  net:load_state_dict(ckpt.model)
  print("loaded " .. args.checkpoint)
else
  print(string.format("no checkpoint at %s: training one epoch on %d images", args.checkpoint, args["train-subset"]))
  local perm = data.randperm(#train_set)
  local subset = data.Subset(train_set, table.move(perm, 1, math.min(args["train-subset"], #perm), 1, {}))
  train.fit(net, data.DataLoader(subset, { batch_size = 64, shuffle = true }),
            { epochs = 1, optimizer = optim.Adam(net:parameters(), { lr = 2e-3 }), progress = false })
end
net:eval()

-- ---- fuse, quantize, export, load back ------------------------------------------------------
local fused = network()
fused:load_state_dict(net:state_dict())
fused:eval():fuse()
local q8 = cnn.quantize(fused, data.DataLoader(first(train_set, args.calibration), { batch_size = 128 }))
local example = cnn.randn(1, 1, 28, 28)
cnn.onnx.export(fused, example, args.out, { dynamic_batch = true })
cnn.onnx.export(q8, example, args["out-int8"], { dynamic_batch = true })
local onnx_fused, onnx_int8 = cnn.onnx.load(args.out), cnn.onnx.load(args["out-int8"])
print("exported the fused network to " .. args.out .. " and the int8 one to " .. args["out-int8"])

-- ---- accuracy and speed ---------------------------------------------------------------------
local test_set = first(data.FashionMNIST{ train = false, transform = normalize }, args.test)
local loader = data.DataLoader(test_set, { batch_size = 256 })

-- accuracy (%) and images/s over the test set in batches of 256
local function evaluate(run)
  local correct, n, seconds = 0, 0, 0
  for x, y in loader do
    local t0 = cnn.clock()
    local pred = run(x):argmax(2)
    seconds = seconds + cnn.clock() - t0
    correct = correct + pred:eq(y):long():sum():item()
    n = n + x:size(1)
  end
  return 100 * correct / n, n / seconds
end

-- images/s one image at a time, over the first --batch1 test images
local function speed_batch1(run)
  local n = math.min(args.batch1, #test_set)
  local images = {}
  for k = 1, n do images[k] = test_set:get(k):view(1, 1, 28, 28) end
  local t0 = cnn.clock()
  for k = 1, n do run(images[k]) end
  return n / (cnn.clock() - t0)
end

local function plain(m) return function(x) return m(x) end end
local rows = {
  { "fp32", plain(net) },
  { "fp32 fused", plain(fused) },
  { "bf16 (fused, autocast)", function(x) return cnn.autocast("bfloat16", function() return fused(x) end) end },
  { "int8 (cnn.quantize)", plain(q8) },
  { "ONNX fused, loaded", plain(onnx_fused) },
  { "ONNX int8, loaded", plain(onnx_int8) },
}
print(string.format("%-24s %10s %14s %14s", "model", "accuracy", "img/s (b=1)", "img/s (b=256)"))
cnn.no_grad(function()
  for _, row in ipairs(rows) do
    local acc, fast = evaluate(row[2])
    print(string.format("%-24s %9.2f%% %14.0f %14.0f", row[1], acc, speed_batch1(row[2]), fast))
  end
end)
