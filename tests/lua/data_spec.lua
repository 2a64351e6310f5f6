-- data_spec.lua -- stdlib/data.lua and cnn.io (lua/io.c, lua/batcher.c): readers on
-- small files this spec writes (valid, truncated, wrong magic), datasets,
-- transforms, the DataLoader.  References are built here independently:
-- the bytes written, naive Lua gathers and per-pixel arithmetic.
package.path = "./?.lua;" .. package.path

local function tmpdir()
  local base = os.getenv("CNNSH_TEST_TMP") or "/tmp"
  local d = string.format("%s/data_spec_%d_%d", base, os.time(), math.random(1, 1e9))
  assert(os.execute("mkdir -p '" .. d .. "'"))
  return d
end

local write = require("helpers").write_bytes

-- IDX bytes: magic 0x0000 08 ndims, big-endian dims, uint8 data.
local function idx_bytes(dims, values)
  local parts = { string.pack(">I4", 0x0800 + #dims) }
  for _, d in ipairs(dims) do parts[#parts + 1] = string.pack(">I4", d) end
  for _, v in ipairs(values) do parts[#parts + 1] = string.char(v) end
  return table.concat(parts)
end

-- n images of h x w with pixel (k, y, x) = (k * 17 + y * w + x) % 256,
-- labels k % 10 (0-based, as stored).
local function pixel(k, y, x, w) return ((k - 1) * 17 + (y - 1) * w + (x - 1)) % 256 end
local function write_idx_pair(dir, prefix, n, h, w)
  local px, lab = {}, {}
  for k = 1, n do
    lab[k] = (k - 1) % 10
    for y = 1, h do for x = 1, w do px[#px + 1] = pixel(k, y, x, w) end end
  end
  write(dir .. "/" .. prefix .. "-images-idx3-ubyte", idx_bytes({ n, h, w }, px))
  write(dir .. "/" .. prefix .. "-labels-idx1-ubyte", idx_bytes({ n }, lab))
end

local flat = require("helpers").flat -- a tensor or nested table as a flat list

local function count_batches(loader)
  local n = 0
  for _ in loader do n = n + 1 end
  return n
end

describe("cnn.io readers", function()
  local dir = tmpdir()

  it("reads a plain IDX file", function()
    write(dir .. "/a.idx", idx_bytes({ 2, 3 }, { 1, 2, 3, 250, 251, 252 }))
    local t = cnn.io.load_idx(dir .. "/a.idx")
    assert.are.same({ 2, 3 }, t.shape)
    assert.are.equal("uint8", t.dtype)
    assert.are.same({ { 1, 2, 3 }, { 250, 251, 252 } }, t:totable())
  end)

  it("reads a gzipped IDX file", function()
    write(dir .. "/g.idx", idx_bytes({ 4 }, { 9, 8, 7, 6 }))
    if not os.execute("gzip -f '" .. dir .. "/g.idx'") then return end -- no gzip: nothing to test
    assert.are.same({ 9, 8, 7, 6 }, cnn.io.load_idx(dir .. "/g.idx.gz"):totable())
  end)

  it("rejects a truncated IDX file with a clear error", function()
    write(dir .. "/t.idx", idx_bytes({ 10, 28, 28 }, { 1, 2, 3 }))
    local ok, err = pcall(cnn.io.load_idx, dir .. "/t.idx")
    assert.is_false(ok)
    assert.matches("truncated", err)
    assert.matches("10x28x28", err)
  end)

  it("rejects a wrong magic number", function()
    write(dir .. "/m.idx", string.pack(">I4I4", 0x12345678, 1) .. "x")
    local ok, err = pcall(cnn.io.load_idx, dir .. "/m.idx")
    assert.is_false(ok)
    assert.matches("idx", err)
  end)

  it("names a missing file", function()
    local ok, err = pcall(cnn.io.load_idx, dir .. "/nope.idx")
    assert.is_false(ok)
    assert.matches("nope.idx", err)
  end)

  it("reads CIFAR-10 records and rejects a truncated batch", function()
    local rec = {}
    for r = 1, 2 do
      rec[#rec + 1] = string.char(r + 2) -- label 3, 4
      for i = 1, 3072 do rec[#rec + 1] = string.char((i * r) % 256) end
    end
    write(dir .. "/c.bin", table.concat(rec))
    local images, labels = cnn.io.load_cifar10(dir .. "/c.bin")
    assert.are.same({ 2, 3, 32, 32 }, images.shape)
    assert.are.same({ 3, 4 }, labels:totable())
    -- record 2, channel 3 (blue), row 1, column 5 is byte 2048 + 5 of its pixels
    assert.are.equal(((2048 + 5) * 2) % 256, images[{ 2, 3, 1, 5 }]:item())
    write(dir .. "/ct.bin", table.concat(rec):sub(1, 3000))
    assert.has_error(function() cnn.io.load_cifar10(dir .. "/ct.bin") end)
  end)
end)

describe("data image datasets", function()
  local dir = tmpdir()
  write_idx_pair(dir, "train", 12, 4, 5)
  write_idx_pair(dir, "t10k", 3, 4, 5)

  it("FashionMNIST{root=} gives N x 1 x H x W uint8 and 1-based labels", function()
    local ds = data.FashionMNIST{ root = dir }
    assert.are.equal(12, #ds)
    assert.are.same({ 12, 1, 4, 5 }, ds.images.shape)
    assert.are.equal("uint8", ds.images.dtype)
    assert.are.equal("int64", ds.labels.dtype)
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2 }, ds.labels:totable())
    assert.are.equal("Ankle boot", ds.classes[10])
    assert.are.equal(pixel(7, 3, 2, 5), ds.images[{ 7, 1, 3, 2 }]:item())
    assert.are.equal(3, #data.FashionMNIST{ root = dir, train = false })
  end)

  it("ds:get(i) and ds[i] give the float image in [0, 1] and the label", function()
    local ds = data.FashionMNIST{ root = dir }
    local x, y = ds:get(7)
    assert.are.same({ 1, 4, 5 }, x.shape)
    assert.are.equal("float32", x.dtype)
    assert.are.equal(7, y)
    assert.is_true(math.abs(x[{ 1, 3, 2 }]:item() - pixel(7, 3, 2, 5) / 255) < 1e-6)
    local pair = ds[-1]
    assert.are.equal(2, pair[2])
    assert.has_error(function() ds:get(13) end)
  end)

  it("says how to install Fashion-MNIST when it is missing", function()
    local ok, err = pcall(data.FashionMNIST, { root = dir .. "/empty" })
    assert.is_false(ok)
    assert.matches("apt%-get install dataset%-fashion%-mnist", err)
    assert.matches("root=", err)
  end)

  it("MNIST{root=} reads the same files with digit class names", function()
    local ds = data.MNIST{ root = dir, train = false }
    assert.are.equal(3, #ds)
    assert.are.equal("0", ds.classes[1])
  end)

  it("CIFAR10{root=} concatenates the five batches", function()
    local cdir = dir .. "/cifar"
    os.execute("mkdir -p '" .. cdir .. "'")
    for b = 1, 5 do
      write(cdir .. "/data_batch_" .. b .. ".bin", string.char(b - 1) .. string.rep(string.char(b), 3072))
    end
    write(cdir .. "/test_batch.bin", string.char(9) .. string.rep("\0", 3072))
    local ds = data.CIFAR10{ root = cdir }
    assert.are.same({ 5, 3, 32, 32 }, ds.images.shape)
    assert.are.same({ 1, 2, 3, 4, 5 }, ds.labels:totable())
    assert.are.equal(4, ds.images[{ 4, 2, 7, 9 }]:item())
    assert.are.same({ 10 }, data.CIFAR10{ root = cdir, train = false }.labels:totable())
  end)

  it("the real Fashion-MNIST, when installed", function()
    local ok, ds = pcall(data.FashionMNIST, { train = false })
    if not ok then return end -- not installed here
    assert.are.equal(10000, #ds)
    local first = ds.labels[{ { 1, 4 } }]:totable()
    assert.are.same({ 10, 3, 2, 2 }, first) -- ankle boot, pullover, trouser, trouser
    local loader = data.DataLoader(ds, { batch_size = 1000 })
    local x, y = loader:iter()()
    assert.are.same({ 1000, 1, 28, 28 }, x.shape)
    assert.are.equal("int64", y.dtype)
  end)
end)

describe("data.DataLoader", function()
  -- x[i] = {{i*100 + 0..2}, {i*100 + 10..12}} (float64), y[i] = 10 + i
  local function tensor_data(n)
    local xs, ys = {}, {}
    for i = 1, n do
      xs[i] = { { i * 100, i * 100 + 1, i * 100 + 2 }, { i * 100 + 10, i * 100 + 11, i * 100 + 12 } }
      ys[i] = 10 + i
    end
    return cnn.tensor(xs, "float64"), cnn.tensor(ys, "int64")
  end

  it("batches in order, with a partial last batch", function()
    local x, y = tensor_data(10)
    local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 4 })
    assert.are.equal(3, #loader)
    local seen, sizes = {}, {}
    for bx, by in loader do
      sizes[#sizes + 1] = bx:size(1)
      assert.are.equal("float64", bx.dtype)
      local fx, fy = flat(bx), flat(by)
      for k = 1, #fy do
        local i = fy[k] - 10
        seen[#seen + 1] = i
        assert.are.equal(i * 100 + 11, fx[(k - 1) * 6 + 5])
      end
    end
    assert.are.same({ 4, 4, 2 }, sizes)
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, seen)
  end)

  it("keeps int64 and float samples as they are", function()
    local ids = cnn.tensor({ { 5, 6 }, { 7, 8 }, { 9, 10 } }, "int64")
    local bx = data.DataLoader(data.TensorDataset(ids), { batch_size = 3 }):iter()()
    assert.are.equal("int64", bx.dtype)
    assert.are.same({ { 5, 6 }, { 7, 8 }, { 9, 10 } }, bx:totable())
    local f = cnn.tensor({ { 0.5, 300 } }, "float32")
    local fx = data.DataLoader(data.TensorDataset(f)):iter()()
    assert.are.same({ { 0.5, 300 } }, fx:totable())
  end)

  it("drop_last drops the partial batch", function()
    local x, y = tensor_data(10)
    local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 4, drop_last = true })
    assert.are.equal(2, #loader)
    assert.are.equal(2, count_batches(loader))
  end)

  it("shuffles a permutation, reproducibly with the seed", function()
    local x, y = tensor_data(50)
    local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 8, shuffle = true })
    local function epoch()
      local order = {}
      for bx, by in loader do
        local fx = flat(bx)
        for k, v in ipairs(flat(by)) do
          order[#order + 1] = v - 10
          assert.are.equal((v - 10) * 100, fx[(k - 1) * 6 + 1]) -- x matches y
        end
      end
      return order
    end
    cnn.manual_seed(7)
    local a = epoch()
    local b = epoch()
    cnn.manual_seed(7)
    local c = epoch()
    assert.are.same(a, c)
    assert.are_not.same(a, b)
    local sorted = { table.unpack(a) }
    table.sort(sorted)
    for i = 1, 50 do assert.are.equal(i, sorted[i]) end
  end)

  it("starts a fresh epoch after a break", function()
    local x, y = tensor_data(10)
    local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 3 })
    for _ in loader do break end
    assert.are.equal(4, count_batches(loader))
    local first
    for _, by in loader do first = flat(by)[1]; break end
    assert.are.equal(11, first)
  end)

  it("scales and normalises uint8 images per pixel", function()
    local raw = {}
    for i = 1, 6 do raw[i] = { { (i * 40) % 256, 255 }, { 0, i } } end
    local imgs = cnn.tensor(raw, "uint8"):view(6, 1, 2, 2)
    local loader = data.DataLoader(data.TensorDataset(imgs, cnn.zeros(6, "int64")),
      { batch_size = 6, transform = data.transforms.Compose{ data.transforms.ToFloat(),
                                                              data.transforms.Normalize(0.5, 0.25) } })
    local bx = loader:iter()()
    assert.are.equal("float32", bx.dtype)
    local got, want = flat(bx), {}
    for _, v in ipairs(flat(raw)) do want[#want + 1] = (v / 255 - 0.5) / 0.25 end
    for k = 1, #want do assert.is_true(math.abs(got[k] - want[k]) < 1e-5, "pixel " .. k) end
  end)

  it("flips horizontally (each sample is the image or its mirror)", function()
    local img = cnn.tensor({ { { 1, 2, 3 }, { 4, 5, 6 } } }, "uint8")          -- 1x2x3
    local imgs = img:expand(40, 2, 3):contiguous():view(40, 1, 2, 3)
    local loader = data.DataLoader(data.TensorDataset(imgs),
      { batch_size = 40, transform = data.transforms.Compose{ data.transforms.RandomHorizontalFlip(),
                                                               data.transforms.ToFloat(1) } })
    local bx = loader:iter()()
    local flips = 0
    for k = 1, 40 do
      local s = {}
      for i, v in ipairs(flat(bx[k])) do s[i] = string.format("%g", v) end
      s = table.concat(s, ",")
      local same, mirrored = s == "1,2,3,4,5,6", s == "3,2,1,6,5,4"
      assert.is_true(same or mirrored, s)
      if mirrored then flips = flips + 1 end
    end
    assert.is_true(flips > 5 and flips < 35, "flips: " .. flips)
  end)

  it("crops with padding: same shape, content shifted with zeros", function()
    local h, w = 3, 4
    local raw = {}
    for y = 1, h do raw[y] = {} for x = 1, w do raw[y][x] = y * 10 + x end end
    local imgs = cnn.tensor({ raw }, "uint8"):expand(30, h, w):contiguous():view(30, 1, h, w)
    local loader = data.DataLoader(data.TensorDataset(imgs),
      { batch_size = 30, transform = data.transforms.Compose{
          data.transforms.RandomCrop({ h, w }, { padding = 1 }), data.transforms.ToFloat(1) } })
    local bx = loader:iter()()
    assert.are.same({ 30, 1, h, w }, bx.shape)
    local shifts = {}
    for k = 1, 30 do
      local out = bx[k][1]:totable()
      local found
      for dy = -1, 1 do for dx = -1, 1 do
        local ok = true
        for y = 1, h do for x = 1, w do
          local sy, sx = y + dy, x + dx
          local want = (sy >= 1 and sy <= h and sx >= 1 and sx <= w) and raw[sy][sx] or 0
          if out[y][x] ~= want then ok = false end
        end end
        if ok then found = dy .. "," .. dx end
      end end
      assert.is_not_nil(found, "sample " .. k .. " is no shift of the image")
      shifts[found] = true
    end
    local n = 0
    for _ in pairs(shifts) do n = n + 1 end
    assert.is_true(n >= 3, "only " .. n .. " distinct offsets")
  end)

  it("transforms beyond the fixed path run in the pipeline, in the order given", function()
    local T = data.transforms
    local imgs = (cnn.rand(2, 1, 4, 4) * 255):round():to("uint8")
    local ds = data.TensorDataset(imgs)
    -- Normalize before a flip (p = 1): the mirror of the normalised image
    local loader = data.DataLoader(ds, { transform = T.Compose{ T.Normalize(0.5, 0.5), T.RandomHorizontalFlip(1) },
                                         batch_size = 2 })
    assert.is_nil(loader.spec)
    local raw = imgs:totable()
    for x in loader do
      local got = x:totable()
      for i = 1, 2 do for y = 1, 4 do for c = 1, 4 do
        local want = (raw[i][1][y][5 - c] / 255 - 0.5) / 0.5
        assert.is_true(math.abs(got[i][1][y][c] - want) < 1e-6)
      end end end
    end
    -- a crop smaller than the image
    for x in data.DataLoader(ds, { transform = T.RandomCrop(3, { padding = 1 }), batch_size = 2 }) do
      assert.same({ 2, 1, 3, 3 }, { x:size(1), x:size(2), x:size(3), x:size(4) })
    end
    assert.has_error(function()
      data.DataLoader(ds, { transform = T.Compose{ T.Normalize(0.5, 0.5), T.ToFloat() } })
    end)
    assert.has_error(function() data.DataLoader(ds, { batch_size = 0 }) end)
    assert.has_error(function() data.DataLoader(ds, { batchsize = 4 }) end)
  end)

  it("Subset and random_split: sizes, disjoint, seeded", function()
    local x, y = tensor_data(20)
    local ds = data.TensorDataset(x, y)
    cnn.manual_seed(3)
    local a, b = data.random_split(ds, { 15, 5 })
    assert.are.equal(15, #a)
    assert.are.equal(5, #b)
    local seen = {}
    for _, s in ipairs({ a, b }) do
      for i = 1, #s do
        local _, label = s:get(i)
        assert.is_nil(seen[label])
        seen[label] = true
      end
    end
    cnn.manual_seed(3)
    local a2 = data.random_split(ds, { 0.75, 0.25 })
    assert.are.same(a.indices, a2.indices)
    -- a loader over a Subset of a Subset reads the right samples
    local sub = data.Subset(a, { 2, 4 })
    local labels = {}
    for _, by in data.DataLoader(sub, { batch_size = 5 }) do labels = flat(by) end
    assert.are.same({ 10 + a.indices[2], 10 + a.indices[4] }, labels)
    assert.has_error(function() data.random_split(ds, { 10, 5 }) end)
  end)

  it("batches a user dataset in Lua", function()
    local Squares = data.Dataset:extend("Squares")
    function Squares:init(n) self.n = n end
    function Squares:len() return self.n end
    function Squares:get(i) return cnn.tensor({ i, i * i }, "float64"), i end
    local loader = data.DataLoader(Squares(5), { batch_size = 2 })
    assert.are.equal(3, #loader)
    local rows = {}
    for bx, by in loader do
      assert.are.equal("int64", by.dtype)
      for k, v in ipairs(bx:totable()) do rows[#rows + 1] = v[2]; assert.are.equal(v[1], flat(by)[k]) end
    end
    assert.are.same({ 1, 4, 9, 16, 25 }, rows)
  end)

  it("cnn.io.Batcher checks its order", function()
    local imgs = cnn.zeros(3, 2, 2, "uint8")
    local ok, err = pcall(cnn.io.Batcher, imgs, nil, { 1, 4 }, 2)
    assert.is_false(ok)
    assert.matches("out of range", err)
    local b = cnn.io.Batcher(imgs, nil, { 3, 1 }, 2)
    assert.are.equal(1, #b)
    b:close()
    b:close() -- idempotent
    assert.has_error(function() b:next() end)
  end)
end)
