-- bench/loader.lua -- the image loader (data.ImageFolder + DataLoader's
-- worker pool, core/io/batcher.c) as JSON lines:
--
--   {"bench":"decode","format":"png","size":32,"workers":2,"images_per_s":...}
--       decoded + augmented images per second (RandomResizedCrop, flip,
--       ColorJitter, Normalize) for PNG and JPEG folders of RGB images of
--       size x size, for each worker count;
--   {"bench":"train_folder","workers":2,"images_per_s":...,"ratio_to_memory":...}
--   {"bench":"train_memory","images_per_s":...}
--       the example network (examples/fashion_mnist.lua) trained from a PNG
--       folder of Fashion-MNIST images (exported here) and from the same
--       images in memory; ratio_to_memory is folder / memory.
--
--   cnnsh bench/loader.lua [--images N] [--sizes 32,224] [--workers 1,2,4] [--steps N] [--repeats N]
--
-- Folders are written under $TMPDIR (or /tmp) and removed at the end.
-- Each figure is the median of --repeats epochs over the folder (after one
-- warm-up epoch that fills the page cache).  Training needs Fashion-MNIST.

local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local opts = { images = 512, sizes = "32,224", workers = "1,2,4", steps = 20, repeats = 3 }
local i = 1
while arg and arg[i] do
  local k = arg[i]:match("^%-%-(.+)$")
  if not k or opts[k] == nil then
    error("usage: cnnsh bench/loader.lua [--images N] [--sizes 32,224] [--workers 1,2,4] [--steps N] [--repeats N]", 0)
  end
  local v = arg[i + 1] or error("--" .. k .. " needs a value", 0)
  opts[k] = (k == "sizes" or k == "workers") and v or (math.tointeger(tonumber(v)) or error("--" .. k .. " needs an integer", 0))
  i = i + 2
end
local function list(s)
  local t = {}
  for n in s:gmatch("%d+") do t[#t + 1] = tonumber(n) end
  return t
end

local tmp = (os.getenv("TMPDIR") or "/tmp") .. string.format("/cnnsh_bench_loader_%d", math.random(1, 1e9))
local T = data.transforms

-- a folder of n random smooth RGB images of size x size in 4 classes
local function make_folder(fmt, size, n)
  cnn.manual_seed(1)
  local dir = string.format("%s/%s_%d", tmp, fmt, size)
  local imgs = (cnn.rand(n, 3, 8, 8) * 255):round():to("uint8")
  local up = T.Resize({ size, size })
  local samples = {}
  for k = 1, n do samples[k] = (up(imgs[k]) * 255):round():clamp(0, 255):to("uint8") end
  local ds = data.TensorDataset(cnn.stack(samples, 1), cnn.tensor((function()
    local l = {}
    for k = 1, n do l[k] = (k - 1) % 4 + 1 end
    return l
  end)(), "int64"))
  data.export_images(ds, dir, { format = fmt })
  return dir
end

local function epoch_rate(loader)
  local s, n = cnn.clock(), 0
  for x in loader do n = n + x:size(1) end
  return n / math.max(cnn.clock() - s, 1e-9)
end

local function median_rate(loader)
  epoch_rate(loader) -- warm-up: page cache, allocator
  local r = {}
  for k = 1, opts.repeats do r[k] = epoch_rate(loader) end
  return B.median(r)
end

for _, fmt in ipairs({ "png", "jpeg" }) do
  for _, size in ipairs(list(opts.sizes)) do
    local dir = make_folder(fmt, size, opts.images)
    local crop = math.max(8, size * 7 // 8)
    local ds = data.ImageFolder{ root = dir, transform = T.Compose{ T.RandomResizedCrop(crop), T.RandomHorizontalFlip(),
      T.ColorJitter(0.2, 0.2, 0.2), T.Normalize({ 0.5, 0.5, 0.5 }, { 0.25, 0.25, 0.25 }) } }
    for _, w in ipairs(list(opts.workers)) do
      local rate = median_rate(data.DataLoader(ds, { batch_size = 32, shuffle = true, num_workers = w }))
      B.emit({ { "bench", "decode" }, { "format", fmt }, { "size", size }, { "workers", w }, { "images_per_s", rate } })
    end
  end
end

-- training: from a PNG folder vs from memory
local ok, fm = pcall(data.FashionMNIST, { train = true })
if ok then
  local n = math.min(#fm, 64 * opts.steps)
  local sub = data.Subset(fm, (function() local t = {} for k = 1, n do t[k] = k end return t end)())
  local dir = tmp .. "/fmnist"
  data.export_images(sub, dir)
  local norm = T.Normalize(0.2860, 0.3530)
  local function train_rate(loader)
    cnn.manual_seed(0)
    local net = B.fmnist_cnn()
    local opt = optim.Adam(net:parameters(), { lr = 1e-3 })
    local function epoch()
      local s, seen = cnn.clock(), 0
      for x, y in loader do
        opt:zero_grad()
        F.cross_entropy(net(x), y):backward()
        opt:step()
        seen = seen + x:size(1)
      end
      return seen / math.max(cnn.clock() - s, 1e-9)
    end
    epoch()
    local r = {}
    for k = 1, opts.repeats do r[k] = epoch() end
    return B.median(r)
  end
  local mem = train_rate(data.DataLoader(data.TensorDataset(sub.dataset.images:narrow(1, 1, n),
    sub.dataset.labels:narrow(1, 1, n), { transform = norm }), { batch_size = 64, shuffle = true }))
  B.emit({ { "bench", "train_memory" }, { "images", n }, { "images_per_s", mem } })
  for _, w in ipairs(list(opts.workers)) do
    local folder = data.ImageFolder{ root = dir, mode = "gray", transform = norm }
    local rate = train_rate(data.DataLoader(folder, { batch_size = 64, shuffle = true, num_workers = w }))
    B.emit({ { "bench", "train_folder" }, { "images", n }, { "workers", w }, { "images_per_s", rate },
             { "ratio_to_memory", rate / mem } })
  end
end
os.execute("rm -rf '" .. tmp .. "'")
