-- data.lua -- the "data" module: datasets, transforms and the DataLoader.
--
-- Design.  A dataset is an object with `#ds` and `ds:get(i) -> x, y`
-- (1-based i).  Lua's indexing returns one value, so `ds[i]` gives the pair
-- as a table {x, y}; `local x, y = ds:get(i)` gives both.  The image
-- datasets (FashionMNIST, MNIST, CIFAR10) and TensorDataset keep their
-- samples in two tensors, `images` (N x C x H x W, uint8 for the image
-- sets) and `labels` (int64 N, 1-based: the files store 0-based labels and
-- we add 1, so `pred:eq(y)` works with argmax's 1-based indices).
-- Subset and random_split keep a list of indices into another dataset.
--
-- data.DataLoader batches a dataset.  When the samples live in tensors
-- (every dataset here, and Subsets of them) the batches are assembled in C
-- on a background thread (cnn.io.Batcher, core/io/batcher.c) while the
-- training step runs; other datasets (user classes with only get and #)
-- are batched in Lua with cnn.stack.  Shuffling draws a permutation from
-- the core generator (data.randperm), so cnn.manual_seed() fixes the order
-- and cnn.get_rng_state() / set_rng_state() make a resumed run identical.
--
-- Transforms are descriptions, not functions: Compose{...} is flattened to
-- one spec {scale, mean, std, crop_pad, hflip} that the C batcher applies
-- per sample in a fixed order: random crop (zero padding), horizontal
-- flip, to-float (x * scale), normalise ((x - mean) / std).  Supported:
-- any of RandomCrop / RandomHorizontalFlip, then ToFloat, then Normalize;
-- ToFloat is implicit (uint8 always becomes float32 in [0, 1]).  Rejected
-- (error): a geometric transform after Normalize (the batcher pads raw
-- pixels, so the result would differ from torchvision's), Normalize before
-- ToFloat, a transform given twice, RandomCrop to a size other than the
-- images' own (the batcher crops windows of the original size).
--
-- pin_memory = true (as PyTorch's DataLoader) hands out every batch in
-- page-locked memory: the batcher allocates its output tensors pinned, on
-- the caller's thread (its worker only fills them), and Lua-batched
-- datasets pin the stacked batch.  `x:cuda{non_blocking = true}` (train.fit
-- and train.evaluate do this) then copies without waiting for the
-- transfer.  Decision: without a usable CUDA device the option is ignored
-- -- batches stay in ordinary memory and the loader's field `pin_memory`
-- reads false -- so one script runs on both; PyTorch does the same (with a
-- warning).  Tensor:pin_memory() itself raises without CUDA, as in PyTorch.
local cnn = _G.cnn
local doc = cnn.doc or {}

local data = {}

-- ---- dataset classes (stdlib/class.lua) ----------------------------------------------

local classes = require("class")

local function construct(c, ...)
  local self = setmetatable({}, c)
  self:init(...)
  return self
end

-- A dataset class whose instances answer ds[i] with {ds:get(i)} and find
-- methods in the class (then its parents); parent nil: the root.
local function class(name, parent)
  local cls = parent and classes.extend(parent, name, { __index = false }) or classes.new(name, construct)
  cls.__index = function(self, k)
    if math.type(k) == "integer" then return { self:get(k) } end
    return cls[k]
  end
  cls.__len = function(self) return self:len() end
  cls.__tostring = function(self) return self:repr() end
  return cls
end

-- i (1-based, negatives from the end) checked against n; returns 1..n.
local function check_index(where, i, n)
  if math.type(i) ~= "integer" then
    error(string.format("%s: index must be an integer, got %s", where, tostring(i)), 3)
  end
  if i < 0 then i = n + 1 + i end
  if i < 1 or i > n then
    error(string.format("%s: index %d out of range (the dataset has %d samples)", where, i, n), 3)
  end
  return i
end

local function list_of_integers(where, v)
  if cnn.is_tensor(v) then v = v:long():totable() end
  if type(v) ~= "table" then error(where .. ": indices must be a table or a tensor", 3) end
  return v
end

-- ---- randomness -------------------------------------------------------------------------

-- data.randperm(n) -> {..} a random permutation of 1..n drawn from the core
-- generator (Fisher-Yates over one tensor of uniforms).
function data.randperm(n)
  if math.type(n) ~= "integer" or n < 0 then
    error("data.randperm: n must be a non-negative integer, got " .. tostring(n), 2)
  end
  local p = {}
  for i = 1, n do p[i] = i end
  if n < 2 then return p end
  local u = cnn.rand(n, "float64"):totable()
  for i = n, 2, -1 do
    local j = math.floor(u[i] * i) + 1
    if j > i then j = i end
    p[i], p[j] = p[j], p[i]
  end
  return p
end

-- ---- transforms (stdlib/transforms.lua) ---------------------------------------------------

local transforms = require("transforms")
data.transforms = transforms

-- The fixed path's spec for images of h x w and dtype (nil: needs the pipeline).
local transform_spec = transforms.fixed_spec

-- ---- datasets ------------------------------------------------------------------------------

local Dataset = class("Dataset")
data.Dataset = Dataset

function Dataset:init() end
function Dataset:len() error(self.__name .. ": len() is not implemented", 2) end
function Dataset:get() error(self.__name .. ": get(i) is not implemented", 2) end
function Dataset:repr() return string.format("%s (%d samples)", self.__name, self:len()) end

-- A dataset class for users: data.Dataset:extend("Name") then define
-- init, len and get.
function Dataset:extend(name) return class(name, self) end

-- TensorDataset(x [, y]): sample i is x[i] (and y[i]).
local TensorDataset = class("TensorDataset", Dataset)
data.TensorDataset = TensorDataset

function TensorDataset:init(x, y, opts)
  if not cnn.is_tensor(x) or x:dim() < 1 then
    error("data.TensorDataset: x must be a tensor with a sample dimension (N x ...)", 3)
  end
  if y ~= nil and (not cnn.is_tensor(y) or y:dim() < 1 or y:size(1) ~= x:size(1)) then
    error(string.format("data.TensorDataset: y must be a tensor of %d samples", x:size(1)), 3)
  end
  self.images, self.labels = x, y
  self.transform = opts and opts.transform
end

function TensorDataset:len() return self.images:size(1) end

local function label_value(labels, i)
  if labels == nil then return nil end
  local y = labels[i]
  if y:dim() == 0 then return y:item() end
  return y
end

function TensorDataset:get(i)
  i = check_index(self.__name, i, self:len())
  local x = self.images[i]
  if self.images.dtype == "uint8" or self.transform then x = self:transformed(i) end
  return x, label_value(self.labels, i)
end

-- Sample i through the dataset's transform (one-sample batch in C on the
-- fixed path, else the pipeline on a C x H x W view).
function TensorDataset:transformed(i)
  local shape = self.images.shape
  local spec = transform_spec(self.transform, shape[#shape - 1], shape[#shape], self.images.dtype)
  if spec then
    local b <close> = cnn.io.Batcher(self.images, nil, { i }, 1, false, spec, 0)
    return b:next()[1]
  end
  local x = self.images[i]
  if x:dim() == 2 then x = x:view(1, shape[#shape - 1], shape[#shape]) end
  return cnn.io.transform(x, transforms.pipeline_spec(self.transform, self.images.dtype))
end

function TensorDataset:repr()
  local shape = self.images.shape
  table.remove(shape, 1)
  return string.format("%s: %d samples of %s %s", self.__name, self:len(),
    table.concat(shape, "x"), self.images.dtype)
end

-- Subset(ds, indices): the samples of ds at the given 1-based indices.
local Subset = class("Subset", Dataset)
data.Subset = Subset

function Subset:init(ds, indices)
  indices = list_of_integers("data.Subset", indices)
  local n = #ds
  for k, i in ipairs(indices) do indices[k] = check_index("data.Subset", i, n) end
  self.dataset, self.indices = ds, indices
end

function Subset:len() return #self.indices end
function Subset:get(i) return self.dataset:get(self.indices[check_index("Subset", i, #self.indices)]) end
function Subset:repr()
  return string.format("Subset: %d of %s", #self.indices, tostring(self.dataset))
end

-- random_split(ds, {n1, n2, ...}) -> Subset, Subset, ...  Lengths are
-- counts summing to #ds, or fractions summing to 1 (remainders go to the
-- first splits, as PyTorch does).
function data.random_split(ds, lengths)
  local n, total, counts = #ds, 0, {}
  for i, l in ipairs(lengths) do counts[i] = l; total = total + l end
  if math.abs(total - 1) < 1e-9 and total ~= n then
    local assigned = 0
    for i, f in ipairs(lengths) do counts[i] = math.floor(f * n); assigned = assigned + counts[i] end
    for i = 1, n - assigned do counts[(i - 1) % #counts + 1] = counts[(i - 1) % #counts + 1] + 1 end
    total = n
  end
  if total ~= n then
    error(string.format("data.random_split: lengths sum to %s but the dataset has %d samples", total, n), 2)
  end
  local perm, out, pos = data.randperm(n), {}, 0
  for i, c in ipairs(counts) do
    local idx = {}
    for k = 1, c do idx[k] = perm[pos + k] end
    pos = pos + c
    out[i] = Subset(ds, idx)
  end
  return table.unpack(out)
end

-- ---- image datasets --------------------------------------------------------------------------

-- data.ImageFolder and data.export_images (stdlib/image_folder.lua)
require("image_folder")(data)

-- The class of FashionMNIST, MNIST and CIFAR10 (not public: those are
-- its constructors; your own images are data.ImageFolder).
local ImageDataset = class("ImageDataset", TensorDataset)

function ImageDataset:init(name, images, labels, classes, opts)
  self.__name = name -- instance field: shows in errors and tostring
  self.images, self.labels, self.classes = images, labels, classes
  self.transform = opts.transform
  self.train = opts.train ~= false
end

function ImageDataset:repr()
  local s = self.images.shape
  return string.format("%s (%s): %d images %dx%dx%d uint8, %d classes", self.__name,
    self.train and "train" or "test", s[1], s[2], s[3], s[4], #self.classes)
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- The first folder among `roots` (nil entries skipped) holding a file of
-- one of `names`; returns folder .. "/" .. name.
local function find_file(roots, names)
  for _, r in ipairs(roots) do
    for _, n in ipairs(names) do
      if exists(r .. "/" .. n) then return r .. "/" .. n end
    end
  end
end

local function candidate_roots(opts, sub, default)
  local roots = {}
  local function add(p) if p and p ~= "" then roots[#roots + 1] = p end end
  add(opts.root)
  if opts.root then add(opts.root .. "/" .. sub) end
  if not opts.root then
    local env = os.getenv("CNNSH_DATA")
    if env then add(env .. "/" .. sub); add(env) end
    add(default)
  end
  return roots
end

-- Loaded tensors, shared between datasets built from the same files.
local cache = setmetatable({}, { __mode = "v" })

local function load_idx_cached(path)
  local t = cache[path]
  if not t then t = cnn.io.load_idx(path); cache[path] = t end
  return t
end

local function idx_pair(where, roots, prefix, hint)
  local img = find_file(roots, { prefix .. "-images-idx3-ubyte.gz", prefix .. "-images-idx3-ubyte",
                                 prefix .. "-images.idx3-ubyte" })
  local lab = find_file(roots, { prefix .. "-labels-idx1-ubyte.gz", prefix .. "-labels-idx1-ubyte",
                                 prefix .. "-labels.idx1-ubyte" })
  if not img or not lab then
    error(string.format("%s: cannot find %s-images-idx3-ubyte[.gz] and %s-labels-idx1-ubyte[.gz] in %s; %s",
      where, prefix, prefix, table.concat(roots, ", "), hint), 3)
  end
  local images, labels = load_idx_cached(img), load_idx_cached(lab)
  if images:dim() ~= 3 or labels:dim() ~= 1 or images:size(1) ~= labels:size(1) then
    error(string.format("%s: %s and %s do not match (images must be N x H x W, labels N)", where, img, lab), 3)
  end
  local s = images.shape
  return images:view(s[1], 1, s[2], s[3]), labels:long() + 1
end

local FASHION_CLASSES = { "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                          "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot" }
local DIGITS = { "0", "1", "2", "3", "4", "5", "6", "7", "8", "9" }
local CIFAR_CLASSES = { "airplane", "automobile", "bird", "cat", "deer",
                        "dog", "frog", "horse", "ship", "truck" }

-- FashionMNIST{train = true, root =, transform =}
function data.FashionMNIST(opts)
  opts = opts or {}
  local roots = candidate_roots(opts, "fashion-mnist", "/usr/share/datasets/fashion-mnist")
  local hint = "install Debian's package (apt-get install dataset-fashion-mnist) " ..
               "or pass root= (or set CNNSH_DATA) to the folder holding the IDX files"
  local images, labels = idx_pair("data.FashionMNIST", roots, opts.train == false and "t10k" or "train", hint)
  return ImageDataset("FashionMNIST", images, labels, FASHION_CLASSES, opts)
end

-- MNIST{root =, train = true, transform =}
function data.MNIST(opts)
  opts = opts or {}
  local roots = candidate_roots(opts, "mnist", "/usr/share/datasets/mnist")
  local hint = "pass root= (or set CNNSH_DATA) to the folder holding MNIST's IDX files"
  local images, labels = idx_pair("data.MNIST", roots, opts.train == false and "t10k" or "train", hint)
  return ImageDataset("MNIST", images, labels, DIGITS, opts)
end

-- CIFAR10{root =, train = true, transform =}: the binary version
-- (data_batch_1..5.bin, test_batch.bin), in root or root/cifar-10-batches-bin.
function data.CIFAR10(opts)
  opts = opts or {}
  local roots = candidate_roots(opts, "cifar-10-batches-bin", "/usr/share/datasets/cifar-10-batches-bin")
  local names = opts.train == false and { "test_batch.bin" }
                or { "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin" }
  local ims, labs = {}, {}
  for i, n in ipairs(names) do
    local path = find_file(roots, { n })
    if not path then
      error(string.format("data.CIFAR10: cannot find %s in %s; pass root= (or set CNNSH_DATA) to the folder " ..
        "of CIFAR-10's binary version (cifar-10-batches-bin)", n, table.concat(roots, ", ")), 2)
    end
    ims[i], labs[i] = cnn.io.load_cifar10(path)
  end
  local images = #ims == 1 and ims[1] or cnn.cat(ims, 1)
  local labels = (#labs == 1 and labs[1] or cnn.cat(labs, 1)) + 1
  return ImageDataset("CIFAR10", images, labels, CIFAR_CLASSES, opts)
end

-- ---- the DataLoader --------------------------------------------------------------------------

data.DistributedSampler = require("dist.sampler")

-- The dataset that holds the samples under (Subsets of) ds -- tensors
-- (`images`) or image files (`paths`) -- with the index map from ds's
-- positions to its samples (nil: the identity).
local function sample_source(ds)
  if cnn.is_tensor(rawget(ds, "images")) or type(rawget(ds, "paths")) == "table" then return ds, nil end
  local inner, idx = rawget(ds, "dataset"), rawget(ds, "indices")
  if inner == nil or idx == nil then return nil end
  local root, map = sample_source(inner)
  if not root then return nil end
  if not map then return root, idx end
  local composed = {}
  for k, i in ipairs(idx) do composed[k] = map[i] end
  return root, composed
end

local function check_loader_opts(opts)
  local known = { batch_size = true, shuffle = true, drop_last = true, transform = true,
                  pin_memory = true, sampler = true, distributed = true, seed = true,
                  num_workers = true, prefetch_factor = true }
  for k in pairs(opts) do
    if not known[k] then
      error("data.DataLoader: unknown option '" .. tostring(k) ..
            "' (options: batch_size, shuffle, drop_last, transform, pin_memory, sampler, " ..
            "distributed, seed, num_workers, prefetch_factor)", 3)
    end
  end
  local nw, pf = opts.num_workers, opts.prefetch_factor
  if nw ~= nil and (math.type(nw) ~= "integer" or nw < 0 or nw > 256) then
    error("data.DataLoader: num_workers must be an integer in [0, 256], got " .. tostring(nw), 3)
  end
  if pf ~= nil and (math.type(pf) ~= "integer" or pf < 1 or pf > 64) then
    error("data.DataLoader: prefetch_factor must be an integer in [1, 64], got " .. tostring(pf), 3)
  end
  if opts.pin_memory ~= nil and type(opts.pin_memory) ~= "boolean" then
    error("data.DataLoader: pin_memory must be a boolean", 3)
  end
  if opts.sampler ~= nil and (opts.distributed or opts.shuffle) then
    error("data.DataLoader: sampler is exclusive with shuffle and distributed", 3)
  end
  if opts.seed ~= nil and not opts.distributed then
    error("data.DataLoader: seed applies to distributed = true (else cnn.manual_seed)", 3)
  end
  local bs = opts.batch_size or 1
  if math.type(bs) ~= "integer" or bs < 1 then
    error("data.DataLoader: batch_size must be a positive integer", 3)
  end
  return bs
end

-- pin_memory = true takes effect only where CUDA can be used (see the top).
local function can_pin(requested)
  return requested == true and cnn.cuda ~= nil and cnn.cuda.is_available() == true
end

-- DataLoader(ds, {batch_size = 1, shuffle = false, drop_last = false, transform =,
--                 pin_memory = false})
local DataLoader = classes.new("DataLoader", function(cls, ds, opts)
  opts = opts or {}
  if type(ds) ~= "table" then error("data.DataLoader: expected a dataset", 2) end
  local self = setmetatable({ dataset = ds, batch_size = check_loader_opts(opts),
                              shuffle = opts.shuffle == true, drop_last = opts.drop_last == true,
                              pin_memory = can_pin(opts.pin_memory) }, cls)
  self.sampler = opts.sampler
  if opts.distributed then -- shuffling moves into the sampler (seeded by seed + epoch)
    self.sampler = data.DistributedSampler(ds, { shuffle = self.shuffle, seed = opts.seed })
    self.shuffle = false
  end
  self.num_workers = opts.num_workers or cnn.io.default_workers()
  self.prefetch_factor = opts.prefetch_factor or 2
  self.source, self.map = sample_source(ds)
  self.transform = opts.transform
  if self.transform == nil and self.source then self.transform = self.source.transform end
  if self.source then self:plan_transform() end
  return self
end)
data.DataLoader = DataLoader

-- The C path of the transform: the fixed spec of tensor datasets when it
-- can (self.spec), else the pipeline (self.pipeline; self.out_shape, the
-- C x H x W of every sample, found now for tensors, at the first epoch for
-- files, from one decoded image).
function DataLoader:plan_transform()
  local src = self.source
  if src.paths then
    self.pipeline = transforms.pipeline_spec(self.transform, "uint8")
    return
  end
  local s, dt = src.images.shape, src.images.dtype
  self.spec = transform_spec(self.transform, s[#s - 1], s[#s], dt)
  if self.spec then return end
  local c = 1
  for d = 2, #s - 2 do c = c * s[d] end
  self.pipeline = transforms.pipeline_spec(self.transform, dt)
  self.out_shape = cnn.io.transform_shape(self.pipeline, { c, s[#s - 1], s[#s] })
end

function DataLoader:__len()
  local n = self.sampler and #self.sampler or #self.dataset
  if self.drop_last then return n // self.batch_size end
  return (n + self.batch_size - 1) // self.batch_size
end

function DataLoader:__tostring()
  return string.format("DataLoader: %d batches of %d from %s%s", #self, self.batch_size,
    tostring(self.dataset), self.shuffle and ", shuffled" or "")
end

-- set_epoch(e): the distributed sampler's epoch (a new order every rank agrees on).
function DataLoader:set_epoch(epoch)
  if self.sampler and self.sampler.set_epoch then self.sampler:set_epoch(epoch) end
end

-- The positions of one epoch in the dataset (1-based), or nil for 1..#ds.
function DataLoader:sample_order()
  if self.sampler then return self.sampler:indices() end
  if self.shuffle then return data.randperm(#self.dataset) end
  return nil
end

-- The sample order of one epoch as indices into the source tensors.
function DataLoader:epoch_order()
  local order = self:sample_order()
  local n = order and #order or #self.dataset
  if self.map then
    local mapped = {}
    for p = 1, n do mapped[p] = self.map[order and order[p] or p] end
    return mapped
  end
  return order -- nil: 1..n in order
end

-- An epoch in C: a cnn.io.Batcher over the source tensors, or a
-- cnn.io.FileBatcher over the source's image files.
function DataLoader:c_epoch()
  local src = self.source
  local opts = { num_workers = self.num_workers, prefetch_factor = self.prefetch_factor,
                 skip_bad = rawget(src, "skip_bad") == true }
  if src.paths then
    self.out_shape = self.out_shape or src:output_shape(self.pipeline)
    return cnn.io.FileBatcher(src.paths, src.labels, self:epoch_order(), self.batch_size, self.drop_last,
                              self.pipeline, self.out_shape, src.mode, 0, self.pin_memory, opts)
  end
  opts.pipeline, opts.out_shape = self.pipeline, self.out_shape
  return cnn.io.Batcher(src.images, src.labels, self:epoch_order(), self.batch_size,
                        self.drop_last, self.spec or {}, 0, self.pin_memory, opts)
end

-- At the end of an epoch: a warning counting the bad files skip_bad skipped.
local function report_skipped(self, epoch)
  if not epoch.skipped then return end
  local n, first = epoch:skipped()
  if n > 0 then
    io.stderr:write(string.format("warning: %s: skipped %d bad file%s this epoch (first: %s)\n",
      tostring(self.source.__name), n, n == 1 and "" or "s", first))
  end
end

-- An epoch in Lua (datasets without tensors): an object with next/close.
function DataLoader:lua_epoch()
  local ds, bs = self.dataset, self.batch_size
  local order = self:sample_order()
  local n = order and #order or #ds
  local pos, stop = 0, self.drop_last and (n // bs) * bs or n
  local function collect()
    if pos >= stop then return nil end
    local xs, ys, hi = {}, {}, math.min(pos + bs, stop)
    for p = pos + 1, hi do
      local x, y = ds:get(order and order[p] or p)
      xs[#xs + 1] = x
      ys[#ys + 1] = cnn.is_tensor(y) and y or (y ~= nil and cnn.tensor(y, math.type(y) == "integer" and "int64" or "float32")) or nil
    end
    pos = hi
    local tx, ty = cnn.stack(xs, 1), #ys > 0 and cnn.stack(ys, 1) or nil
    if self.pin_memory then
      tx = tx:pin_memory()
      if ty then ty = ty:pin_memory() end
    end
    return tx, ty
  end
  return { next = collect, close = function() pos = stop end }
end

-- iter() -> next, nil, nil, epoch: a fresh epoch for a generic for; the
-- epoch is the loop's to-be-closed value (its thread stops on break).
function DataLoader:iter()
  local epoch = self.source and self:c_epoch() or self:lua_epoch()
  local closer = setmetatable({}, { __close = function() epoch:close() end })
  return function()
    local x, y = epoch:next()
    if x == nil then report_skipped(self, epoch) end
    return x, y
  end, nil, nil, closer
end

-- `for x, y in loader do`: Lua calls loader(nil, control) each iteration.
-- control is nil on the first call of a loop, so that call starts a new
-- epoch (closing any epoch a `break` left open); later calls continue it.
function DataLoader:__call(_, control)
  if control == nil or self.epoch == nil then
    if self.epoch then self.epoch:close() end
    self.epoch = self.source and self:c_epoch() or self:lua_epoch()
  end
  local x, y = self.epoch:next()
  if x == nil then
    report_skipped(self, self.epoch)
    self.epoch:close()
    self.epoch = nil
  end
  return x, y
end

-- ---- docs -------------------------------------------------------------------------------------

doc[data] = [[
data -- datasets, transforms and the DataLoader (labels are 1-based: 1..C).
  train = data.FashionMNIST{train = true}          -- finds /usr/share/datasets/fashion-mnist
  loader = data.DataLoader(train, {batch_size = 128, shuffle = true,
    transform = data.transforms.Normalize(0.2860, 0.3530)})
  for x, y in loader do ... end                    -- x: 128x1x28x28 float32, y: int64
  photos = data.ImageFolder{root = "photos", transform = data.transforms.Compose{
    data.transforms.Resize(64), data.transforms.CenterCrop(64)}}   -- photos/<class>/<image>.png|jpg
Datasets: FashionMNIST, MNIST, CIFAR10, ImageFolder, TensorDataset(x, y), Subset(ds, idx),
random_split(ds, {n1, n2}); #ds, ds:get(i) -> x, y, ds[i] -> {x, y}; export_images(ds, dir).
Transforms (data.transforms): Resize, CenterCrop, RandomCrop, RandomResizedCrop,
RandomHorizontalFlip, RandomRotation, ColorJitter, Grayscale, ToFloat, Normalize, Compose.]]
doc[data.FashionMNIST] = [[
data.FashionMNIST{train = true, root =, transform =} -> dataset
Fashion-MNIST from Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist),
root= or $CNNSH_DATA.  ds.images: N x 1 x 28 x 28 uint8, ds.labels: int64 N in 1..10,
ds.classes: {"T-shirt/top", "Trouser", ...}.]]
doc[data.MNIST] = "data.MNIST{root =, train = true, transform =} -> dataset\nMNIST from the IDX files in root (or $CNNSH_DATA/mnist); labels 1..10 for digits 0..9."
doc[data.CIFAR10] = "data.CIFAR10{root =, train = true, transform =} -> dataset\nCIFAR-10's binary batches in root: images N x 3 x 32 x 32 uint8, labels 1..10."
doc[data.ImageFolder] = [[
data.ImageFolder{root =, transform =, mode = "rgb", skip_bad = false} -> dataset
PNG and JPEG files in root/<class>/... (subfolders sorted by name: labels 1..C; hidden
folders and other files ignored).  ds.classes, ds.class_to_idx, ds.paths, ds.targets,
ds.labels (int64).  Samples: float32 C x H x W in [0, 1] before Normalize; C = 3 (rgb),
1 (gray) or 4 (rgba).  Images may differ in size if the transform makes them one size.
The DataLoader decodes on its worker threads: nothing is held decoded.  A bad file is an
error naming it; skip_bad = true drops it from its batch and warns with a count.]]
doc[data.export_images] = [[
data.export_images(ds, dir [, {format = "png", quality = 90}]) -> count
Writes every sample of ds as dir/<label>_<class>/<i>.png (or .jpg; labels zero-padded so
that ImageFolder gives the same labels back).  uint8 samples are written as they are,
floats are taken as [0, 1].]]
doc[data.TensorDataset] = "data.TensorDataset(x [, y]) -> dataset\nSample i is x[i], y[i]; uint8 x becomes float32 in the loader."
doc[data.Subset] = "data.Subset(ds, indices) -> dataset\nThe samples of ds at the given 1-based indices (a table or a tensor)."
doc[data.random_split] = "data.random_split(ds, {n1, n2, ...}) -> subset1, subset2, ...\nA random partition (counts, or fractions summing to 1), seeded by cnn.manual_seed."
doc[data.randperm] = "data.randperm(n) -> table\nA random permutation of 1..n from the core generator."
doc[DataLoader] = [[
data.DataLoader(ds, {batch_size = 1, shuffle = false, drop_last = false, transform =,
                     pin_memory = false, num_workers = <cores>, prefetch_factor = 2}) -> loader
Batches ds; `for x, y in loader do` runs one epoch; #loader is the number of batches.
Tensor datasets and ImageFolder are batched in C: num_workers threads decode and
transform samples (0: on this thread), at most prefetch_factor * num_workers batches ahead
(memory stays bounded).  The batches are the same for the same seed (cnn.manual_seed)
whatever num_workers.  Other datasets are batched in Lua with ds:get.  The transform
defaults to the dataset's; uint8 images always become float32 in [0, 1].
pin_memory = true gives page-locked batches for x:cuda{non_blocking = true}; without
CUDA it is ignored and loader.pin_memory reads false.]]
local T = transforms
doc[T.ToFloat] = "data.transforms.ToFloat([scale = 1/255])\nuint8 -> float32 times scale (implicit: 1/255 for uint8, 1 for floats); before Normalize/ColorJitter."
doc[T.Normalize] = "data.transforms.Normalize(mean, std)\n(x - mean) / std per channel (numbers or lists of 1 to 4)."
doc[T.RandomCrop] = "data.transforms.RandomCrop(size, {padding = 0})\nZero-pad every side, then crop a random size (n or {h, w}) window (torchvision's)."
doc[T.CenterCrop] = "data.transforms.CenterCrop(size)\nThe centre size (n or {h, w}) window; zero-padded when larger than the image."
doc[T.Resize] = [[
data.transforms.Resize(size [, {antialias = true}])
Bilinear resize as PIL/torchvision: size n sets the shorter edge (aspect kept), {h, w}
sets both; shrinking is antialiased (the filter widens with the factor).]]
doc[T.RandomResizedCrop] = [[
data.transforms.RandomResizedCrop(size [, {scale = {0.08, 1}, ratio = {3/4, 4/3}}])
A random window of area scale * H * W and aspect ratio in ratio (torchvision's 10 tries,
then the centre), resized (bilinear, antialiased) to size.]]
doc[T.RandomHorizontalFlip] = "data.transforms.RandomHorizontalFlip([p = 0.5])\nMirror left-right with probability p."
doc[T.RandomRotation] = "data.transforms.RandomRotation(degrees)\nRotate by U(-degrees, degrees) (or {min, max}) counter-clockwise about the centre; bilinear, zero fill, same size."
doc[T.ColorJitter] = [[
data.transforms.ColorJitter{brightness = 0, contrast = 0, saturation = 0, hue = 0}  (or (b, c, s, h))
Each factor ~ U(max(0, 1 - v), 1 + v), applied in a random order as torchvision's
adjust_brightness/contrast/saturation on [0, 1] values (clamped).  hue = h in [0, 0.5]
(or {min, max} within [-0.5, 0.5]) shifts the hue of RGB images by U(-h, h) turns in
HSV space (adjust_hue); one-channel images are left as they are.]]
doc[T.Grayscale] = "data.transforms.Grayscale([num_output_channels = 1])\n0.299 R + 0.587 G + 0.114 B, as 1 or 3 channels."
doc[T.pipeline_spec] = "data.transforms.pipeline_spec(tf, dtype) -> spec\nThe {scale, ops} table cnn.io.transform and the C loader run for a transform."
doc[T.fixed_spec] = "data.transforms.fixed_spec(tf, h, w, dtype) -> spec | nil\nThe tensor loader's fast-path spec, or nil when the transform needs the pipeline."
doc[T.Compose] = [[
data.transforms.Compose{t1, t2, ...}
Runs the transforms in the order given (in C, on the loader's worker threads); every
random choice is seeded per sample from cnn.manual_seed.  tf(img [, seed]) applies a
transform to one C x H x W image.]]

return data
