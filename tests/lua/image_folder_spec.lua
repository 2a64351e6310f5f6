-- image_folder_spec.lua -- data.ImageFolder, data.export_images,
-- cnn.io.read_image/write_jpeg and the DataLoader's worker pool
-- (core/io/batcher.c) on small folders this spec writes.  References: the
-- uint8 tensors written (PNG is lossless, so read-back must be exact), the
-- folder layout built here, one-sample get() against the batches, batches
-- with 0 workers against 1 and 3, live memory during an epoch against the
-- size of the decoded folder.
package.path = "./?.lua;" .. package.path
local H = require("helpers")
local T = data.transforms

local base = (os.getenv("CNNSH_TEST_TMP") or "/tmp") .. string.format("/image_folder_spec_%d", math.random(1, 1e9))
local function dir(name)
  local d = base .. "/" .. name
  cnn.io.mkdir(d)
  return d
end
local write = H.write_bytes

-- n uint8 images 3 x h x w (sizes may vary with i), labels 1..3
local function make_images(n, h, w, vary)
  cnn.manual_seed(5)
  local xs, ys = {}, {}
  for i = 1, n do
    local hh, ww = h + (vary and i % 3 or 0), w + (vary and (i * 2) % 5 or 0)
    xs[i] = (cnn.rand(3, hh, ww) * 255):round():to("uint8")
    ys[i] = (i - 1) % 3 + 1
  end
  return xs, ys
end

local function write_folder(root, xs, ys, names)
  for i, x in ipairs(xs) do
    local d = root .. "/" .. names[ys[i]]
    cnn.io.mkdir(d)
    cnn.io.write_png(string.format("%s/img%03d.png", d, i), x)
  end
end

describe("images", function()
  it("read_image reads back write_png exactly and write_jpeg closely", function()
    local d = dir("rw")
    local x = make_images(1, 9, 13)[1]
    cnn.io.write_png(d .. "/a.png", x)
    assert.same(x:totable(), cnn.io.read_image(d .. "/a.png"):totable())
    local smooth = (cnn.arange(0, 9 * 13 - 1):view(1, 9, 13):expand(3, 9, 13):contiguous() * 2):to("uint8")
    cnn.io.write_jpeg(d .. "/a.jpg", smooth, { quality = 100 })
    local back = cnn.io.read_image(d .. "/a.jpg")
    H.assert_shape(back, { 3, 9, 13 })
    assert.is_true((back:double() - smooth:double()):abs():max():item() <= 4)
    H.assert_shape(cnn.io.read_image(d .. "/a.jpg", { mode = "gray" }), { 1, 9, 13 })
    H.raises(function() cnn.io.write_jpeg(d .. "/b.jpg", x, { quality = 0 }) end, "write_jpeg", "quality")
    H.raises(function() cnn.io.write_jpeg(d .. "/b.jpg", cnn.zeros(4, 2, 2, "uint8")) end, "write_jpeg", "C = 1 or 3")
  end)

  it("ImageFolder: sorted classes, labels 1..C, hidden folders and other files ignored", function()
    local root = dir("classes")
    local xs, ys = make_images(9, 6, 7)
    write_folder(root, xs, ys, { "cat", "ant", "bee" })
    cnn.io.mkdir(root .. "/.hidden")
    cnn.io.write_png(root .. "/.hidden/x.png", xs[1])
    write(root .. "/cat/notes.txt", "not an image")
    cnn.io.mkdir(root .. "/bee/nested")
    cnn.io.write_png(root .. "/bee/nested/z.PNG", xs[2])
    local ds = data.ImageFolder{ root = root }
    assert.same({ "ant", "bee", "cat" }, ds.classes)
    assert.same({ ant = 1, bee = 2, cat = 3 }, ds.class_to_idx)
    assert.equal(10, #ds)
    -- labels follow the folder each file is in
    for i, path in ipairs(ds.paths) do
      local cls = path:match("/classes/(%a+)/")
      assert.equal(ds.class_to_idx[cls], ds.targets[i])
      assert.equal(ds.targets[i], ds.labels[i]:item())
    end
    assert.equal(root .. "/bee/nested/z.PNG", ds.paths[7]) -- own files first, then subfolders
    local x, y = ds:get(1)
    local src = tonumber(ds.paths[1]:match("img(%d+)"))
    H.assert_close((x * 255):round():totable(), xs[src]:double():totable(), 1e-3, 0)
    assert.equal(1, y)
    H.raises(function() data.ImageFolder{ root = base .. "/nope" } end, "ImageFolder", "nope")
    H.raises(function() data.ImageFolder{ root = root, mdoe = "rgb" } end, "ImageFolder", "mdoe")
    H.raises(function() data.ImageFolder{ root = dir("empty") } end, "ImageFolder", "no class")
  end)

  it("DataLoader over a folder: batches equal get(i), any worker count, same seed same batches", function()
    local root = dir("loader")
    local xs, ys = make_images(23, 10, 12, true)
    write_folder(root, xs, ys, { "a", "b", "c" })
    local tf = T.Compose{ T.Resize(9), T.RandomResizedCrop(8), T.RandomHorizontalFlip(), T.RandomRotation(10),
                          T.ColorJitter(0.3, 0.3, 0.3, 0.1), T.Normalize({ 0.5, 0.5, 0.5 }, { 0.2, 0.2, 0.2 }) }
    local ds = data.ImageFolder{ root = root, transform = tf }
    local function epoch(workers)
      cnn.manual_seed(11)
      local out = {}
      for x, y in data.DataLoader(ds, { batch_size = 5, shuffle = true, num_workers = workers }) do
        H.assert_shape(x, { #out < 4 and 5 or 3, 3, 8, 8 })
        out[#out + 1] = { x:totable(), y:totable() }
      end
      return out
    end
    local e0 = epoch(0)
    assert.equal(5, #e0)
    assert.same(e0, epoch(1))
    assert.same(e0, epoch(3))
    cnn.manual_seed(12)
    local other = {}
    for x in data.DataLoader(ds, { batch_size = 5, shuffle = true, num_workers = 2 }) do other[#other + 1] = x:totable() end
    assert.are_not.same(e0[1][1], other[1])
    -- without random transforms a batch is exactly the samples' get()
    local plain = data.ImageFolder{ root = root, transform = T.Compose{ T.Resize({ 7, 7 }), T.Normalize(0.5, 0.25) } }
    local k = 0
    for x, y in data.DataLoader(plain, { batch_size = 4, num_workers = 2 }) do
      for j = 1, x:size(1) do
        k = k + 1
        local gx, gy = plain:get(k)
        H.assert_close(x[j]:totable(), gx:totable(), 1e-6, 0)
        assert.equal(gy, y[j]:item())
      end
    end
    assert.equal(23, k)
  end)

  it("images of different sizes need a transform that makes them one size", function()
    local root = dir("sizes")
    local xs, ys = make_images(6, 8, 8, true)
    write_folder(root, xs, ys, { "a", "b", "c" })
    local ds = data.ImageFolder{ root = root }
    H.raises(function() for _ in data.DataLoader(ds, { batch_size = 6, num_workers = 2 }) do end end,
             "img", "after the transform", "Resize")
  end)

  it("bad files: an error naming the file, or skipped and counted with skip_bad", function()
    local root = dir("bad")
    local xs, ys = make_images(8, 5, 5)
    write_folder(root, xs, ys, { "a", "b", "c" })
    local f = assert(io.open(root .. "/a/img001.png", "rb"))
    local bytes = f:read("a")
    f:close()
    write(root .. "/a/img001.png", bytes:sub(1, #bytes // 2)) -- truncated
    write(root .. "/b/img002.png", "this is not a png")       -- not an image
    write(root .. "/c/img003.jpg", "\255\216\255\224 junk")    -- corrupt JPEG
    local ds = data.ImageFolder{ root = root }
    H.raises(function() for _ in data.DataLoader(ds, { batch_size = 4, num_workers = 2 }) do end end, "img00")
    H.raises(function() ds:get(1) end, "img001.png")
    local lenient = data.ImageFolder{ root = root, skip_bad = true }
    local n = 0
    for x, y in data.DataLoader(lenient, { batch_size = 4, num_workers = 3 }) do
      n = n + x:size(1)
      assert.equal(x:size(1), y:size(1))
    end
    assert.equal(#lenient - 3, n)
    -- the count: a C batcher directly
    local b <close> = cnn.io.FileBatcher(lenient.paths, lenient.labels, nil, 4, false,
      T.pipeline_spec(nil, "uint8"), { 3, 5, 5 }, "rgb", 0, false, { num_workers = 2, skip_bad = true })
    while b:next() do end
    local count, first = b:skipped()
    assert.equal(3, count)
    assert.is_truthy(first:find("img00", 1, true))
  end)

  it("memory stays bounded: only the batches in flight are decoded", function()
    local root = dir("big")
    local xs, ys = make_images(120, 48, 48)
    write_folder(root, xs, ys, { "a", "b", "c" })
    local ds = data.ImageFolder{ root = root }
    collectgarbage()
    local before, worst = cnn.memory().live, 0
    for x in data.DataLoader(ds, { batch_size = 4, num_workers = 2, prefetch_factor = 2 }) do
      worst = math.max(worst, cnn.memory().live - before)
      x = nil
      collectgarbage()
    end
    local batch = 4 * 3 * 48 * 48 * 4
    local folder = 120 * 3 * 48 * 48 * 4
    assert.is_true(worst <= 8 * batch, string.format("%d bytes live (a batch is %d, the folder %d)", worst, batch, folder))
  end)

  it("export_images writes any dataset as a folder that reads back the same", function()
    local n = 12
    local imgs = cnn.zeros(n, 1, 5, 6, "uint8")
    local labs = cnn.zeros(n, "int64")
    cnn.manual_seed(3)
    for i = 1, n do
      imgs[i] = (cnn.rand(1, 5, 6) * 255):round():to("uint8")
      labs[i] = (i % 4) + 1
    end
    local src = data.TensorDataset(imgs, labs)
    local out = base .. "/export"
    assert.equal(n, data.export_images(src, out))
    local back = data.ImageFolder{ root = out, mode = "gray" }
    assert.same({ "001", "002", "003", "004" }, back.classes) -- zero-padded: sorting keeps the labels
    assert.equal(n, #back)
    for i, path in ipairs(back.paths) do
      local k = tonumber(path:match("/(%d+)%.png$"))
      assert.equal(labs[k]:item(), back.targets[i])
      assert.same(imgs[k]:totable(), cnn.io.read_image(path):totable())
    end
    assert.equal(n, data.export_images(src, base .. "/export_jpg", { format = "jpeg", quality = 95 }))
    H.raises(function() data.export_images(src, out, { format = "gif" }) end, "export_images", "format")
  end)
end)
