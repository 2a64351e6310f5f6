-- viz/png.lua -- viz.save_png: maps, RGB images and montages as PNG files
-- (module "viz.png"; viz/init.lua puts its functions into viz).
local cnn = _G.cnn
local doc = cnn.doc or {}
local internal = require("cnn.internal")
local C = require("viz.common")
local as_2d, check_opts, finite_range, values = C.as_2d, C.check_opts, C.finite_range, C.values

local viz = {}

-- ---- PNG --------------------------------------------------------------------------------

-- Float values -> uint8 0..255: min..max normalised (opts.normalize ~= false),
-- else v * 255 clamped; NaN becomes 0.  uint8 input is kept as it is.
local function to_bytes(t, lo, hi, opts)
  if t.dtype == "uint8" then return t end
  local x = t:detach():double()
  if x.masked_fill then x = x:masked_fill(x:ne(x), 0) end
  if opts.normalize == false then
    x = x * 255
  elseif hi > lo then
    x = (x - lo) * (255 / (hi - lo))
  else
    x = x * 0 + 128
  end
  return x:round():clamp(0, 255):byte()
end

local function tensor_range(t, opts)
  local lo, hi = opts.vmin, opts.vmax
  if t.dtype ~= "uint8" and (lo == nil or hi == nil) then
    local a, b = finite_range(values(t))
    lo, hi = lo or a or 0, hi or b or 0
  end
  return lo, hi
end

-- Nearest-neighbour upscaling of an H x W x C uint8 tensor by s.
local function upscale(img, s)
  if s <= 1 then return img end
  local h, w, c = img:size(1), img:size(2), img:size(3)
  return img:reshape(h, 1, w, 1, c):expand(h, s, w, s, c):reshape(h * s, w * s, c)
end

-- A montage (H x W x C uint8) of the tiles of an N x C x H x W tensor.
local function montage(t, opts)
  local s = t.shape
  local rgb = s[2] == 3 and opts.rgb ~= false
  local n = rgb and s[1] or s[1] * s[2]
  local ch, h, w = rgb and 3 or 1, s[3], s[4]
  local tiles = rgb and t:permute(1, 3, 4, 2) or t:reshape(n, h, w, 1)
  local lo, hi = tensor_range(t, opts)
  local bytes = to_bytes(tiles, lo, hi, opts)
  local cols = opts.nrow or math.ceil(math.sqrt(n))
  local rows, p = math.ceil(n / cols), opts.padding or 1
  local canvas = cnn.zeros({ rows * (h + p) + p, cols * (w + p) + p, ch }, "uint8")
  if opts.pad_value then canvas:fill_(opts.pad_value) end
  for k = 1, n do
    local r, c = (k - 1) // cols, (k - 1) % cols
    local y, x = r * (h + p) + p + 1, c * (w + p) + p + 1
    canvas[{ { y, y + h - 1 }, { x, x + w - 1 } }] = bytes[k]
  end
  return canvas
end

-- The H x W x C uint8 image of t for save_png.
local function png_image(t, opts)
  local s = t.shape
  if #s == 4 then return montage(t, opts) end
  if #s == 3 and (s[1] == 3 or s[1] == 4) then
    local lo, hi = tensor_range(t, opts)
    return to_bytes(t:permute(2, 3, 1), lo, hi, opts)
  end
  local h, w = as_2d(t, "viz.save_png")
  local lo, hi = tensor_range(t, opts)
  return to_bytes(t:reshape(h, w, 1), lo, hi, opts)
end

-- viz.save_png(t, path [, {scale=1, normalize=true, vmin=, vmax=, nrow=, padding=1, pad_value=0}])
function viz.save_png(t, path, opts)
  assert(cnn.is_tensor(t), "viz.save_png: expected a tensor")
  assert(type(path) == "string", "viz.save_png: expected a file name")
  opts = check_opts("viz.save_png", opts)
  local img = upscale(png_image(t, opts), opts.scale or 1):contiguous()
  if img:size(3) == 1 then img = img:reshape(img:size(1), img:size(2)) end
  internal.write_png(img, path)
  return path
end

doc[viz.save_png] = [[
viz.save_png(t, path [, {scale=1, normalize=true, vmin=, vmax=, nrow=, padding=1, pad_value=0}])
Writes H x W (grey), 3 x H x W (RGB) or a montage of N x C x H x W (RGB
tiles when C = 3, else one grey tile per map) as PNG.  Floats are scaled
from [min, max] to 0..255 (normalize = false: v * 255, clamped); uint8 is
kept; scale = k enlarges each pixel to k x k.]]

return viz
