-- transforms.lua -- data.transforms: per-image transforms, as descriptions.
--
-- Design.  A transform is a description (a table with `kind` and its
-- parameters), not a Lua function: the C loader runs it on its worker
-- threads (core/io/pipeline.c), so an epoch never calls back into Lua.
-- Compose{...} is a list.  Two C paths run them:
--   * the pipeline (every transform, any order): the image becomes float32
--     times the ToFloat scale (1/255 for uint8, else 1), then each op runs
--     in the order given; used for image folders and for tensor datasets
--     whose transform needs it;
--   * the fixed fast path of tensor datasets (core/io/batch_fill.c), which
--     applies RandomCrop of the image's own size (with padding),
--     RandomHorizontalFlip(0.5), ToFloat and Normalize in that order; a
--     transform made only of those, in that order, keeps using it (its
--     results are unchanged from earlier versions).
-- Semantics follow torchvision's (transforms v1 on PIL images; details in
-- core/io/image_ops.c and pipeline.c).  Randomness: each sample gets a seed
-- from (the loader's seed, its position in the epoch), drawn from the core
-- generator, so cnn.manual_seed fixes every random crop, flip, angle and
-- jitter, whatever the number of workers.  A transform called on one image,
-- tf(img [, seed]), runs the same C code on the calling thread.
local cnn = _G.cnn
local check = require("check")

local transforms = {}

local Transform = {}
Transform.__index = Transform
Transform.__tostring = function(t) return t.repr end
transforms.Transform = Transform

local function transform(kind, repr, fields)
  fields.kind, fields.repr = kind, repr
  return setmetatable(fields, Transform)
end

-- size: n or {h, w} -> h, w (positive integers)
local function size_hw(fname, size, level)
  local h, w = size, size
  if type(size) == "table" then h, w = size[1], size[2] end
  if math.type(h) ~= "integer" or math.type(w) ~= "integer" or h < 1 or w < 1 or h > 65536 or w > 65536 then
    check.fail(fname, "size", "a positive integer or {h, w}", size, level + 1)
  end
  return h, w
end

-- {lo, hi} or a number v meaning {-v, v} (rotation) -> lo, hi
local function range(fname, what, v, level, symmetric)
  if symmetric and type(v) == "number" and v >= 0 and v < math.huge then return -v, v end
  if type(v) == "table" and type(v[1]) == "number" and type(v[2]) == "number" and v[1] <= v[2]
     and v[1] > -math.huge and v[2] < math.huge then
    return v[1], v[2]
  end
  check.fail(fname, what, symmetric and "a number >= 0 or {min, max}" or "{min, max} with min <= max", v, level + 1)
end

function transforms.ToFloat(scale)
  if type(scale) == "table" then scale = scale.scale end
  scale = scale or 1 / 255
  check.number("data.transforms.ToFloat", "scale", scale, 2)
  return transform("tofloat", string.format("ToFloat(scale=%g)", scale), { scale = scale })
end

-- A finite number (or, for std, a positive one) or a list of 1 to 4 of them.
local function per_channel(name, v)
  local function ok(x)
    return type(x) == "number" and x == x and x > -math.huge and x < math.huge and (name ~= "std" or x > 0)
  end
  local list = type(v) == "table" and #v >= 1 and #v <= 4
  for i = 1, list and #v or 0 do list = list and ok(v[i]) end
  if ok(v) or list then return v end
  error("data.transforms.Normalize: " .. name .. " must be a " .. (name == "std" and "positive" or "finite") ..
        " number or a list of 1 to 4 of them, got " .. tostring(v), 3)
end

local function channels_str(v)
  return type(v) == "table" and "{" .. table.concat(v, ", ") .. "}" or tostring(v)
end

function transforms.Normalize(mean, std)
  mean, std = per_channel("mean", mean), per_channel("std", std)
  local nm = type(mean) == "table" and #mean or 1
  local ns = type(std) == "table" and #std or 1
  if nm ~= ns then error("data.transforms.Normalize: mean and std have different lengths", 2) end
  return transform("normalize", "Normalize(mean=" .. channels_str(mean) .. ", std=" .. channels_str(std) .. ")",
    { mean = mean, std = std })
end

function transforms.RandomCrop(size, opts)
  check.options("data.transforms.RandomCrop", opts, { "padding" }, 2)
  local pad = opts and opts.padding or 0
  if math.type(pad) ~= "integer" or pad < 0 or pad > 65536 then
    error("data.transforms.RandomCrop: padding must be a non-negative integer", 2)
  end
  local h, w = size_hw("data.transforms.RandomCrop", size, 2)
  return transform("crop", string.format("RandomCrop(%dx%d, padding=%d)", h, w, pad), { h = h, w = w, padding = pad })
end

function transforms.CenterCrop(size)
  local h, w = size_hw("data.transforms.CenterCrop", size, 2)
  return transform("center_crop", string.format("CenterCrop(%dx%d)", h, w), { h = h, w = w })
end

-- Resize(n): the shorter edge becomes n (aspect kept); Resize{h, w}: exactly.
function transforms.Resize(size, opts)
  check.options("data.transforms.Resize", opts, { "antialias" }, 2)
  local h, w = size_hw("data.transforms.Resize", size, 2)
  if type(size) ~= "table" then w = 0 end
  local aa = not (opts and opts.antialias == false)
  local shown = w == 0 and tostring(h) or string.format("%dx%d", h, w)
  return transform("resize", string.format("Resize(%s%s)", shown, aa and "" or ", antialias=false"),
    { h = h, w = w, antialias = aa })
end

function transforms.RandomResizedCrop(size, opts)
  local f = "data.transforms.RandomResizedCrop"
  check.options(f, opts, { "scale", "ratio", "antialias" }, 2)
  opts = opts or {}
  local h, w = size_hw(f, size, 2)
  local lo, hi = range(f, "scale", opts.scale or { 0.08, 1 }, 2)
  local rlo, rhi = range(f, "ratio", opts.ratio or { 3 / 4, 4 / 3 }, 2)
  if not (lo > 0 and rlo > 0) then check.fail(f, "scale and ratio", "positive", lo > 0 and rlo or lo, 2) end
  return transform("rrc", string.format("RandomResizedCrop(%dx%d, scale={%g, %g}, ratio={%g, %g})", h, w, lo, hi, rlo, rhi),
    { h = h, w = w, lo = lo, hi = hi, rlo = rlo, rhi = rhi, antialias = opts.antialias ~= false })
end

function transforms.RandomHorizontalFlip(p)
  p = p == nil and 0.5 or p
  check.number("data.transforms.RandomHorizontalFlip", "p", p, 2, 0, 1)
  return transform("hflip", string.format("RandomHorizontalFlip(p=%g)", p), { p = p })
end

-- RandomRotation(degrees): an angle ~ U(-degrees, degrees) (or {min, max}),
-- counter-clockwise, bilinear, zero fill, same size.
function transforms.RandomRotation(degrees)
  local lo, hi = range("data.transforms.RandomRotation", "degrees", degrees, 2, true)
  return transform("rotation", string.format("RandomRotation({%g, %g})", lo, hi), { lo = lo, hi = hi })
end

-- hue: h in [0, 0.5] meaning {-h, h}, or {min, max} with -0.5 <= min <= max <= 0.5
local function hue_range(fname, v, level)
  local lo, hi
  if type(v) == "number" then lo, hi = -v, v
  elseif type(v) == "table" and #v == 2 then lo, hi = v[1], v[2] end
  if type(lo) == "number" and type(hi) == "number" and -0.5 <= lo and lo <= hi and hi <= 0.5 then return lo, hi end
  check.fail(fname, "hue", "a number in [0, 0.5] or {min, max} with -0.5 <= min <= max <= 0.5", v, level + 1)
end

-- ColorJitter{brightness =, contrast =, saturation =, hue =} or
-- ColorJitter(b, c, s, h): factors ~ U(max(0, 1 - v), 1 + v), a hue shift
-- ~ U(-h, h) (or U(min, max)) turns, applied in a random order.
function transforms.ColorJitter(b, c, s, h)
  local f = "data.transforms.ColorJitter"
  if type(b) == "table" then
    check.options(f, b, { "brightness", "contrast", "saturation", "hue" }, 2)
    b, c, s, h = b.brightness, b.contrast, b.saturation, b.hue
  end
  b, c, s = b or 0, c or 0, s or 0
  check.number(f, "brightness", b, 2, 0)
  check.number(f, "contrast", c, 2, 0)
  check.number(f, "saturation", s, 2, 0)
  local hue_lo, hue_hi = hue_range(f, h or 0, 2)
  local hue = (hue_lo ~= 0 or hue_hi ~= 0) and string.format(", hue={%g, %g}", hue_lo, hue_hi) or ""
  return transform("jitter", string.format("ColorJitter(brightness=%g, contrast=%g, saturation=%g%s)", b, c, s, hue),
    { brightness = b, contrast = c, saturation = s, hue_lo = hue_lo, hue_hi = hue_hi })
end

function transforms.Grayscale(num_output_channels)
  local n = num_output_channels or 1
  if n ~= 1 and n ~= 3 then check.fail("data.transforms.Grayscale", "num_output_channels", "1 or 3", n, 2) end
  return transform("grayscale", string.format("Grayscale(num_output_channels=%d)", n), { channels = n })
end

function transforms.Compose(list)
  if type(list) ~= "table" then error("data.transforms.Compose: expected a list of transforms", 2) end
  local parts = {}
  for i, t in ipairs(list) do
    if getmetatable(t) ~= Transform then
      error(string.format("data.transforms.Compose: item %d is not a data.transforms object", i), 2)
    end
    parts[i] = t.repr
  end
  return transform("compose", "Compose{" .. table.concat(parts, ", ") .. "}", { list = list })
end

-- ---- specs for the C side ------------------------------------------------------------

local function flat_list(tf, out)
  if tf.kind == "compose" then
    for _, t in ipairs(tf.list) do flat_list(t, out) end
  else
    out[#out + 1] = tf
  end
  return out
end

local function check_transform(tf, level)
  if tf ~= nil and getmetatable(tf) ~= Transform then
    error("data: transform must be a data.transforms object", level + 1)
  end
end

-- Stage of each kind on the fixed path; other kinds need the pipeline.
local stage = { crop = 1, hflip = 1, tofloat = 2, normalize = 3 }

-- The fixed path's spec {scale, mean, std, crop_pad, hflip} for images of
-- h x w and dtype, or nil when the transform needs the pipeline.
function transforms.fixed_spec(tf, h, w, dtype)
  check_transform(tf, 2)
  local spec = { scale = (dtype == nil or dtype == "uint8") and 1 / 255 or nil }
  if tf == nil then return spec end
  local seen, last = {}, 0
  for _, t in ipairs(flat_list(tf, {})) do
    local s = stage[t.kind]
    if not s or s < last or seen[t.kind] or (t.kind == "hflip" and t.p ~= 0.5) or
       (t.kind == "crop" and (t.h ~= h or t.w ~= w)) then
      return nil
    end
    seen[t.kind], last = true, s
    if t.kind == "tofloat" then spec.scale = t.scale
    elseif t.kind == "normalize" then spec.mean, spec.std = t.mean, t.std
    elseif t.kind == "hflip" then spec.hflip = true
    else spec.crop_pad = t.padding end
  end
  return spec
end

local function op_of(t)
  local k = t.kind
  if k == "normalize" then return { kind = "normalize", mean = t.mean, std = t.std } end
  if k == "crop" then return { kind = "random_crop", h = t.h, w = t.w, pad = t.padding } end
  if k == "center_crop" then return { kind = "center_crop", h = t.h, w = t.w } end
  if k == "resize" then return { kind = "resize", h = t.h, w = t.w, antialias = t.antialias and 1 or 0 } end
  if k == "rrc" then
    return { kind = "random_resized_crop", h = t.h, w = t.w, lo = t.lo, hi = t.hi, rlo = t.rlo, rhi = t.rhi,
             antialias = t.antialias and 1 or 0 }
  end
  if k == "hflip" then return { kind = "hflip", p = t.p } end
  if k == "rotation" then return { kind = "rotation", lo = t.lo, hi = t.hi } end
  if k == "jitter" then
    return { kind = "color_jitter", brightness = t.brightness, contrast = t.contrast, saturation = t.saturation,
             hue_lo = t.hue_lo, hue_hi = t.hue_hi }
  end
  if k == "grayscale" then return { kind = "grayscale", channels = t.channels } end
end

-- The pipeline spec {scale, ops} of a transform for images of dtype.
-- ToFloat sets the scale; it may not follow Normalize or ColorJitter (which
-- work on scaled values) nor appear twice.
function transforms.pipeline_spec(tf, dtype)
  check_transform(tf, 2)
  local spec = { scale = (dtype == nil or dtype == "uint8") and 1 / 255 or 1, ops = {} }
  if tf == nil then return spec end
  local scaled, value_op
  for _, t in ipairs(flat_list(tf, {})) do
    if t.kind == "tofloat" then
      if scaled or value_op then
        error("data: " .. t.repr .. " must come before " .. (value_op or "another ToFloat"), 3)
      end
      spec.scale, scaled = t.scale, true
    else
      if t.kind == "normalize" or t.kind == "jitter" then value_op = value_op or t.repr end
      spec.ops[#spec.ops + 1] = op_of(t)
    end
  end
  return spec
end

-- tf(img [, seed]) -> float32 C x H x W: the transform on one image
-- (uint8, float32 or float64 C x H x W), on this thread.
function Transform:__call(img, seed)
  if not cnn.is_tensor(img) then error("data.transforms: " .. self.repr .. " expects an image tensor (C x H x W)", 2) end
  return cnn.io.transform(img, transforms.pipeline_spec(self, img.dtype), seed)
end

return transforms
