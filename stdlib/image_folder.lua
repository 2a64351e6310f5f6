-- image_folder.lua -- data.ImageFolder (a folder of PNG/JPEG images, one
-- subfolder per class) and data.export_images (any dataset written as such
-- a folder).  Installed into the data module by stdlib/data.lua.
--
-- Design.  ImageFolder{root = "photos"} lists root's subfolders (sorted by
-- name, hidden ones starting with "." left out): class k is the k-th, so
-- labels are 1..C.  Each class folder is walked recursively (sorted; its
-- own files before its subfolders) for files ending in .png, .jpg or .jpeg
-- (any case); other files are ignored, as torchvision does.  Only the
-- names are kept (ds.paths, ds.targets and the int64 tensor ds.labels), never
-- the pixels: the DataLoader decodes and transforms each file on its
-- worker threads (cnn.io.FileBatcher), so a folder larger than memory
-- trains in bounded memory.  ds:get(i) decodes one file on this thread.
--
-- Every sample is float32 C x H x W in [0, 1] (before Normalize); C is 3
-- for mode = "rgb" (the default, like torchvision's loader converting to
-- RGB), 1 for "gray", 4 for "rgba".  The images may differ in size when
-- the transform makes them one size (Resize + CenterCrop, RandomResizedCrop,
-- ...); the loader takes the size from the first image and a sample that
-- comes out different is an error naming the file.
--
-- Bad files (truncated, corrupt, not an image): an error naming the file,
-- or with skip_bad = true dropped from their batch (that batch is smaller)
-- and counted in a warning at the end of the epoch.
local cnn = _G.cnn
local check = require("check")
local transforms = require("transforms")

local IMAGE_EXT = { png = true, jpg = true, jpeg = true }
local MODES = { rgb = true, gray = true, rgba = true }

local function is_image(name)
  local ext = name:match("%.([%w]+)$")
  return ext ~= nil and IMAGE_EXT[ext:lower()] == true
end

-- files under dir (recursive, sorted; own files first) appended to out
local function walk(dir, out)
  local names, kinds = cnn.io.list_dir(dir)
  local subdirs = {}
  for i, name in ipairs(names) do
    if name:sub(1, 1) ~= "." then
      if kinds[i] == "file" and is_image(name) then out[#out + 1] = dir .. "/" .. name
      elseif kinds[i] == "dir" then subdirs[#subdirs + 1] = dir .. "/" .. name end
    end
  end
  for _, d in ipairs(subdirs) do walk(d, out) end
  return out
end

return function(data)
  local ImageFolder = data.Dataset:extend("ImageFolder")
  data.ImageFolder = ImageFolder

  local function check_opts(opts)
    local f = "data.ImageFolder"
    if type(opts) ~= "table" then check.fail(f, "the argument", "a table {root = ...}", opts, 4) end
    check.options(f, opts, { "root", "transform", "mode", "skip_bad" }, 4)
    if type(opts.root) ~= "string" then check.fail(f, "root", "a folder name (string)", opts.root, 4) end
    if opts.mode ~= nil and not MODES[opts.mode] then check.fail(f, "mode", '"rgb", "gray" or "rgba"', opts.mode, 4) end
    check.boolean(f, "skip_bad", opts.skip_bad, 4)
    if opts.transform ~= nil and getmetatable(opts.transform) ~= transforms.Transform then
      check.fail(f, "transform", "a data.transforms object", opts.transform, 4)
    end
  end

  -- ImageFolder{root =, transform =, mode = "rgb", skip_bad = false}
  function ImageFolder:init(opts)
    check_opts(opts)
    local root = opts.root:gsub("/+$", "")
    if root == "" then root = "/" end
    local ok, names, kinds = pcall(cnn.io.list_dir, root)
    if not ok then error("data.ImageFolder: cannot read the folder " .. root .. " (" .. tostring(names):gsub("^[^:]*:%d+: ", "") .. ")", 3) end
    self.root, self.transform, self.mode, self.skip_bad = root, opts.transform, opts.mode or "rgb", opts.skip_bad == true
    self.classes, self.class_to_idx, self.paths, self.targets = {}, {}, {}, {}
    for i, name in ipairs(names) do
      if kinds[i] == "dir" and name:sub(1, 1) ~= "." then
        local k = #self.classes + 1
        self.classes[k], self.class_to_idx[name] = name, k
        for _, path in ipairs(walk(root .. "/" .. name, {})) do
          self.paths[#self.paths + 1], self.targets[#self.targets + 1] = path, k
        end
      end
    end
    if #self.classes == 0 then error("data.ImageFolder: " .. root .. " has no class subfolders (root/<class>/<image>.png)", 3) end
    if #self.paths == 0 then error("data.ImageFolder: found no .png, .jpg or .jpeg files under " .. root, 3) end
    self.labels = cnn.tensor(self.targets, "int64")
  end

  function ImageFolder:len() return #self.paths end

  -- get(i) -> float32 C x H x W, label: one file decoded and transformed here.
  function ImageFolder:get(i)
    if math.type(i) ~= "integer" then error("ImageFolder: index must be an integer, got " .. tostring(i), 2) end
    local n = #self.paths
    if i < 0 then i = n + 1 + i end
    if i < 1 or i > n then error(string.format("ImageFolder: index %d out of range (%d images)", i, n), 2) end
    local img = cnn.io.read_image(self.paths[i], { mode = self.mode })
    return cnn.io.transform(img, transforms.pipeline_spec(self.transform, "uint8")), self.targets[i]
  end

  -- The C x H x W every sample has after `pipeline` (from the first image
  -- that decodes; with skip_bad, bad ones before it are passed over).
  function ImageFolder:output_shape(pipeline)
    for i, path in ipairs(self.paths) do
      local ok, img = pcall(cnn.io.read_image, path, { mode = self.mode })
      if ok then return cnn.io.transform_shape(pipeline, img.shape) end
      if not self.skip_bad or i == #self.paths then error((tostring(img):gsub("^[^:]*:%d+: ", "")), 0) end
    end
  end

  function ImageFolder:repr()
    return string.format("ImageFolder: %d images in %d classes under %s (mode %s)%s", #self.paths,
      #self.classes, self.root, self.mode, self.transform and ", " .. tostring(self.transform) or "")
  end

  -- ---- export ------------------------------------------------------------------------------

  -- "<label>_<class name>" (zero-padded, so that sorted names keep the labels)
  local function folder_name(classes, label, width)
    local name = type(classes) == "table" and classes[label]
    local num = string.format("%0" .. width .. "d", label)
    if type(name) ~= "string" then return num end
    return num .. "_" .. name:gsub("[^%w%-%.]", "_")
  end

  -- a sample as uint8 C x H x W: uint8 as it is, floats taken as [0, 1]
  local function to_uint8(x)
    if x:dim() == 2 then x = x:view(1, x:size(1), x:size(2)) end
    if x.dtype == "uint8" then return x end
    return (x:double() * 255):round():clamp(0, 255):to("uint8")
  end

  local function label_of(y)
    if cnn.is_tensor(y) then y = y:item() end
    if math.type(y) ~= "integer" or y < 1 then
      error("data.export_images: labels must be integers 1..C, got " .. tostring(y), 4)
    end
    return y
  end

  -- data.export_images(ds, dir [, {format = "png", quality = 90}]) -> count
  function data.export_images(ds, dir, opts)
    local f = "data.export_images"
    opts = check.options(f, opts, { "format", "quality" }, 2)
    local fmt = opts.format or "png"
    if fmt ~= "png" and fmt ~= "jpeg" then check.fail(f, "format", '"png" or "jpeg"', fmt, 2) end
    if type(ds) ~= "table" or type(ds.get) ~= "function" then check.fail(f, "the dataset", "a dataset", ds, 2) end
    if type(dir) ~= "string" then check.fail(f, "dir", "a folder name", dir, 2) end
    local n = #ds
    local classes = rawget(ds, "classes") or (rawget(ds, "dataset") and ds.dataset.classes)
    local width = math.max(2, #tostring(type(classes) == "table" and #classes or 999))
    local iw, made = #tostring(n), {}
    for i = 1, n do
      local x, y = ds:get(i)
      local sub = dir .. "/" .. folder_name(classes, label_of(y), width)
      if not made[sub] then cnn.io.mkdir(sub); made[sub] = true end
      local path = string.format("%s/%0" .. iw .. "d.%s", sub, i, fmt == "png" and "png" or "jpg")
      if fmt == "png" then cnn.io.write_png(path, to_uint8(x))
      else cnn.io.write_jpeg(path, to_uint8(x), { quality = opts.quality or 90 }) end
    end
    return n
  end
end
