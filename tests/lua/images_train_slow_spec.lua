-- images_train_spec.lua -- the end-to-end check of image folders: 2,000
-- Fashion-MNIST training images written by data.export_images as PNG and
-- as JPEG (quality 95) train the example network to within 1 point of the
-- same images read from IDX, measured on 1,000 test images from IDX.
--
-- The IDX run uses the images in the folder's order (a Subset built from
-- the exported file names), the same seed, network and batch order, so
-- the PNG run -- lossless, decoded on 2 worker threads -- must match it
-- exactly; the JPEG run differs only by compression noise.  Skipped (77)
-- without Debian's dataset-fashion-mnist.
package.path = "./?.lua;" .. package.path

local ok, train = pcall(data.FashionMNIST, { train = true })
if not ok then
  print("images_train_spec: Fashion-MNIST is not installed; skipped")
  os.exit(77)
end
local test = data.FashionMNIST{ train = false }

local base = (os.getenv("CNNSH_TEST_TMP") or "/tmp") .. string.format("/images_train_spec_%d", math.random(1, 1e9))
local N, EPOCHS = 2000, 2

local function net()
  return nn.Sequential(
    nn.Conv2d(1, 32, 3, { padding = 1 }), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, { padding = 1 }), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
end

-- test accuracy (%) after EPOCHS over ds, everything seeded alike
local function accuracy_after_training(ds, workers)
  cnn.manual_seed(7)
  local m = net()
  local opt = optim.Adam(m:parameters(), { lr = 2e-3 })
  local loader = data.DataLoader(ds, { batch_size = 50, shuffle = true, num_workers = workers })
  for _ = 1, EPOCHS do
    m:train()
    for x, y in loader do
      opt:zero_grad()
      F.cross_entropy(m(x), y):backward()
      opt:step()
    end
  end
  m:eval()
  local correct = 0
  local sub = data.Subset(test, (function() local t = {} for i = 1, 1000 do t[i] = i end return t end)())
  cnn.no_grad(function()
    for x, y in data.DataLoader(sub, { batch_size = 500 }) do correct = correct + m(x):argmax(2):eq(y):long():sum():item() end
  end)
  return correct / 10
end

describe("a Fashion-MNIST image folder", function()
  it("trains like the same images read from IDX (PNG exactly, JPEG within 1 point)", function()
    cnn.manual_seed(1)
    local pick = data.randperm(#train)
    local sub = data.Subset(train, table.move(pick, 1, N, 1, {}))
    assert.equal(N, data.export_images(sub, base .. "/png"))
    assert.equal(N, data.export_images(sub, base .. "/jpeg", { format = "jpeg", quality = 95 }))
    local png = data.ImageFolder{ root = base .. "/png", mode = "gray" }
    local jpg = data.ImageFolder{ root = base .. "/jpeg", mode = "gray" }
    assert.equal(N, #png)
    assert.equal(10, #png.classes)
    -- the IDX images in the folder's order: file <k>.png holds sub's sample k
    local order = {}
    for i, path in ipairs(png.paths) do
      local k = tonumber(path:match("/(%d+)%.png$"))
      order[i] = pick[k]
      assert.equal(train.labels[pick[k]]:item(), png.targets[i], path)
    end
    local idx = data.Subset(train, order)
    local a_idx = accuracy_after_training(idx)
    local a_png = accuracy_after_training(png, 2)
    local a_jpg = accuracy_after_training(jpg, 2)
    print(string.format("test accuracy after %d epochs on %d images: IDX %.1f%%, PNG %.1f%%, JPEG %.1f%%",
      EPOCHS, N, a_idx, a_png, a_jpg))
    assert.is_true(a_idx > 60, "IDX run learned too little: " .. a_idx)
    assert.equal(a_idx, a_png)
    assert.is_true(math.abs(a_jpg - a_idx) <= 1, string.format("JPEG %.1f%% vs IDX %.1f%%", a_jpg, a_idx))
    os.execute("rm -rf '" .. base .. "'")
  end)
end)
