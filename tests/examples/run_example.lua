-- run_example.lua -- runs one example of examples/ briefly and checks what
-- it produced (the examples' short runs, also under ASan/LSan).
--
--   cnnsh tests/examples/run_example.lua EXAMPLES_DIR NAME OUT_DIR
--
-- NAME is quickstart, fashion_mnist, inspect, deploy, predict, image_folder, cifar10_resnet or finetune.  The driver sets `arg` as
-- the command line would, runs the example with dofile() in this state,
-- then checks its output with independent means:
--   quickstart     its printed test accuracy is at least 60% (10 classes:
--                  chance is 10%; one epoch on 10,000 images gives ~82%)
--   fashion_mnist  1 epoch on 512 images; the checkpoint it writes loads
--                  with cnn.load, restores into a freshly built network of
--                  the same architecture (strict load_state_dict), and that
--                  network classifies 1,000 test images better than chance
--                  (> 25%; ~40% after 512 images); epoch and RNG state are there
--   deploy         trains 512 images (no checkpoint), fuses, quantizes,
--                  exports both, loads them back: on 1,000 test images fp32
--                  beats chance, fused and ONNX agree within 0.3 points,
--                  bf16 and int8 within 1 of fp32; both files read back
--                  with a dynamic batch dim
--   predict        classifies 3 test images written as PNG with a saved
--                  (untrained) network: the classes printed are those the
--                  network gives the same images taken from the dataset
--   inspect        20 steps; both PNG files it writes are fresh, readable
--                  and of a plausible size
-- Outputs from an earlier run are deleted first, so a stale file never
-- passes.  Exit status 77 (CTest: skipped) when Fashion-MNIST is missing
-- for an example that needs it.
local examples, name, out = arg[1], arg[2], arg[3]
assert(examples and name and out, "usage: run_example.lua EXAMPLES_DIR NAME OUT_DIR")

local FMNIST = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"
local function have_fmnist()
  local f = io.open(FMNIST, "rb")
  if f then f:close() end
  return f ~= nil
end

-- Run examples/<name>.lua with the given command-line arguments; returns
-- everything it printed (and prints it too).
local function run(file, args)
  local lines, print0 = {}, print
  print = function(...) -- luacheck: ignore
    local parts = table.pack(...)
    for i = 1, parts.n do parts[i] = tostring(parts[i]) end
    lines[#lines + 1] = table.concat(parts, "\t")
    print0(...)
  end
  arg = { [0] = examples .. "/" .. file } -- luacheck: ignore
  for i, a in ipairs(args) do arg[i] = a end
  local ok, err = pcall(dofile, examples .. "/" .. file)
  print = print0 -- luacheck: ignore
  if not ok then error(file .. " failed: " .. tostring(err), 0) end
  return table.concat(lines, "\n")
end

local checks = {}

-- image_folder: 600 Fashion-MNIST images exported as PNG, one epoch;
-- the validation accuracy it prints beats chance (10 classes: 10%)
function checks.image_folder()
  if not have_fmnist() then os.exit(77) end
  local text = run("image_folder.lua", { "--demo", "600", "--epochs", "1", "--workers", "2",
                                       "--demo-dir", out .. "/image_folder_demo" })
  assert(text:find("wrote 600 Fashion-MNIST images", 1, true), "image_folder did not write its folder")
  local acc = tonumber(text:match("validation accuracy ([%d.]+)%%"))
  assert(acc and acc > 25, "image_folder: validation accuracy " .. tostring(acc) .. "% <= 25%")
end

-- cifar10_resnet: synthetic files in CIFAR-10's binary format (records of
-- a label byte and 3072 pixel bytes); one epoch must run, print the
-- parameter count of ResNet-20 with projection shortcuts (272,474,
-- counted by hand: stem 464, stage 1 14,016, stage 2 51,648, stage 3
-- 205,696, classifier 650) and a test accuracy.
function checks.cifar10_resnet()
  local root = out .. "/cifar_synthetic"
  cnn.io.mkdir(root)
  math.randomseed(3)
  local function batch(path, n)
    local parts = {}
    for r = 1, n do
      local px = {}
      for k = 1, 3072 do px[k] = string.char(math.random(0, 255)) end
      parts[r] = string.char((r - 1) % 10) .. table.concat(px)
    end
    local f = assert(io.open(path, "wb"))
    f:write(table.concat(parts))
    f:close()
  end
  for b = 1, 5 do batch(root .. "/data_batch_" .. b .. ".bin", 6) end
  batch(root .. "/test_batch.bin", 10)
  local text = run("cifar10_resnet.lua", { "--root", root, "--epochs", "1", "--batch-size", "8", "--workers", "2" })
  assert(text:find("ResNet-20: 272474 parameters", 1, true), "cifar10_resnet: wrong parameter count")
  assert(text:match("epoch 1: train loss [%d.]+, test accuracy [%d.]+%%"), "cifar10_resnet printed no epoch line")
end

-- finetune: a tiny run from random weights (it must say so, and count
-- 11,181,642 parameters of which the new head's 512 * 10 + 10 train), then
-- one from a --weights file in PyTorch's names written here, which must load.
function checks.finetune()
  if not have_fmnist() then os.exit(77) end
  local small = { "--subset", "64", "--test-subset", "50", "--epochs", "1", "--size", "32", "--workers", "1" }
  local text = run("finetune.lua", small)
  assert(text:find("starts from random weights", 1, true), "finetune did not say it starts from random weights")
  assert(text:find("11181642 parameters, 5130 of them trained", 1, true), "finetune: wrong parameter counts")
  assert(text:match("epoch 1: train loss [%d.]+, test accuracy [%d.]+%%"), "finetune printed no epoch line")
  local weights = out .. "/finetune_resnet18.safetensors"
  os.remove(weights)
  cnn.manual_seed(7)
  local source = models.resnet18()
  cnn.save(weights, source:state_dict{ torch = true })
  small[#small + 1] = "--weights"
  small[#small + 1] = weights
  text = run("finetune.lua", small)
  assert(text:find("loaded the backbone from " .. weights, 1, true), "finetune did not load --weights")
end

function checks.quickstart()
  if not have_fmnist() then os.exit(77) end
  local text = run("quickstart.lua", {})
  local acc = tonumber(text:match("test accuracy: ([%d.]+)%%"))
  assert(acc, "quickstart printed no test accuracy")
  assert(acc >= 60, ("quickstart: test accuracy %.2f%% < 60%%"):format(acc))
end

-- The network of examples/fashion_mnist.lua, built again here.
local function fmnist_net()
  return nn.Sequential(
    nn.Conv2d(1, 32, 3, { padding = 1 }), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, { padding = 1 }), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.3), nn.Linear(128, 10))
end

function checks.fashion_mnist()
  if not have_fmnist() then os.exit(77) end
  local ckpt = out .. "/fmnist_example.safetensors"
  os.remove(ckpt)
  run("fashion_mnist.lua", { "--epochs", "1", "--subset", "512", "--out", ckpt })
  local t = cnn.load(ckpt)
  assert(t.epoch == 1, "checkpoint epoch " .. tostring(t.epoch))
  assert(type(t.rng) == "table", "checkpoint has no RNG state")
  assert(type(t.optimizer) == "table" and type(t.model) == "table", "checkpoint lacks model or optimizer")
  local net = fmnist_net()
  net:load_state_dict(t.model) -- strict: every key and shape must match
  net:eval()
  local test = data.FashionMNIST{ train = false, transform = data.transforms.Normalize(0.2860, 0.3530) }
  local first = {}
  for i = 1, 1000 do first[i] = i end
  local loader = data.DataLoader(data.Subset(test, first), { batch_size = 250 })
  local correct, n = 0, 0
  cnn.no_grad(function()
    for x, y in loader do
      correct = correct + net(x):argmax(2):eq(y):long():sum():item()
      n = n + x:size(1)
    end
  end)
  assert(n == 1000, "evaluated " .. n .. " images")
  assert(correct / n > 0.25, ("the restored network is right on %d of 1000 test images"):format(correct))
  os.remove(ckpt)
end

function checks.deploy()
  if not have_fmnist() then os.exit(77) end
  local onnx_path, int8_path = out .. "/deploy_example.onnx", out .. "/deploy_example_int8.onnx"
  os.remove(onnx_path)
  os.remove(int8_path)
  local text = run("deploy.lua", { "--train-subset", "512", "--test", "1000", "--out", onnx_path,
                                   "--out-int8", int8_path, "--calibration", "256", "--batch1", "5",
                                   "--checkpoint", out .. "/no_checkpoint.safetensors" })
  local acc = {}
  for a in text:gmatch("%s([%d.]+)%%") do acc[#acc + 1] = tonumber(a) end
  assert(#acc == 6, "deploy printed " .. #acc .. " accuracies, expected 6 (fp32, fused, bf16, int8, 2 x ONNX)")
  assert(acc[1] > 25, ("deploy: accuracy %.2f%% after 512 images"):format(acc[1]))
  local function near(i, j, tol, what)
    assert(math.abs(acc[i] - acc[j]) <= tol, ("deploy: %s %.2f%% vs %.2f%%"):format(what, acc[i], acc[j]))
  end
  -- folding changes the float rounding only: the predictions agree
  near(2, 1, 0.3, "fused vs fp32")
  near(5, 2, 0.3, "ONNX fused vs fused")
  near(3, 1, 1, "bf16 vs fp32")
  near(4, 1, 1, "int8 vs fp32")
  near(6, 4, 0.3, "ONNX int8 (QDQ in float) vs int8")
  for _, path in ipairs({ onnx_path, int8_path }) do -- the files are there and read back
    local model = cnn.io.onnx_read(path)
    assert(#model.nodes > 0 and model.inputs[1].shape[1] == "batch", "deploy: " .. path .. " lacks its graph")
    os.remove(path)
  end
end

-- predict: a network saved as fashion_mnist.lua saves it, three test images
-- written as PNG; each printed class is the one the network gives the same
-- image taken from the dataset (not through PNG files)
function checks.predict()
  if not have_fmnist() then os.exit(77) end
  cnn.manual_seed(2)
  local net = dofile(examples .. "/fmnist_net.lua")()
  local model = out .. "/predict_model.safetensors"
  cnn.save(model, { model = net:state_dict() })
  net:eval()
  local test = data.FashionMNIST{ train = false }
  local normalize = data.transforms.Normalize(0.2860, 0.3530)
  local files, want = {}, {}
  for k = 1, 3 do
    files[k] = out .. "/predict_" .. k .. ".png"
    cnn.io.write_png(files[k], test.images[k])
    local x = normalize(test.images[k]:float() / 255):view(1, 1, 28, 28)
    local class = cnn.no_grad(function() return net(x):argmax(2):item() end)
    want[k] = test.classes[class]
  end
  local text = run("predict.lua", { model, files[1], files[2], files[3] })
  local k = 0
  for line in text:gmatch("[^\n]+") do
    k = k + 1
    local file, class, p = line:match("^(%S+)%s+(.-)%s+([%d.]+)%%$")
    assert(file == files[k], "predict: line " .. k .. " is '" .. line .. "'")
    assert(class == want[k], ("predict: %s classified as %s, the network says %s"):format(file, class, want[k]))
    assert(tonumber(p) > 0 and tonumber(p) <= 100, "predict: probability " .. p)
    os.remove(file)
  end
  assert(k == 3, "predict printed " .. k .. " lines for 3 images")
  os.remove(model)
end

function checks.inspect()
  local files = { out .. "/inspect_filters.png", out .. "/inspect_maps.png" }
  for _, f in ipairs(files) do os.remove(f) end
  run("inspect.lua", { "20", out })
  for _, f in ipairs(files) do
    local h, w, c = require("cnn.internal").png_read(f)
    assert(h >= 8 and w >= 8 and (c == 1 or c == 3 or c == 4), ("%s: %dx%dx%d"):format(f, h, w, c))
    os.remove(f)
  end
end

assert(checks[name], "unknown example " .. tostring(name))
checks[name]()
print("example " .. name .. ": ok")
