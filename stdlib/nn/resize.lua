-- nn/resize.lua -- nn.Upsample, nn.PixelShuffle, nn.PixelUnshuffle.
--
-- Parameter-free layers over N x C x H x W input that remember their
-- options and call F.interpolate, F.pixel_shuffle and F.pixel_unshuffle
-- (lua/functional_norm.c).  Upsample takes PyTorch's options in one table:
-- exactly one of size and scale_factor (a number or {h, w}), mode
-- 'nearest' (default) or 'bilinear', align_corners (bilinear only, default
-- false) and recompute_scale_factor; the coordinate rules are PyTorch's
-- (core/resize_math.h).
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local check = require("check")
local fmt = require("fmt")
local doc = cnn.doc or {}

-- ---- Upsample -------------------------------------------------------------------

local Upsample = Module:extend("Upsample")

local function pair_or_number(name, what, v, level, integer)
  if type(v) == "table" then
    if #v ~= 2 then check.fail(name, what, "a number or {h, w}", v, level + 1) end
    return { pair_or_number(name, what, v[1], level + 1, integer), pair_or_number(name, what, v[2], level + 1, integer) }
  end
  if integer then return check.integer(name, what, v, level + 1, 1) end
  local n = check.number(name, what, v, level + 1, 0)
  if n <= 0 then check.fail(name, what, "a positive number", v, level + 1) end
  return n
end

function Upsample:init(opts)
  local name = "nn.Upsample"
  opts = check.options(name, opts, { "size", "scale_factor", "mode", "align_corners", "recompute_scale_factor" }, 3)
  if (opts.size == nil) == (opts.scale_factor == nil) then
    error(name .. ": give exactly one of size and scale_factor, as in nn.Upsample{scale_factor = 2}", 3)
  end
  if opts.size ~= nil then self.size = pair_or_number(name, "size", opts.size, 3, true) end
  if opts.scale_factor ~= nil then self.scale_factor = pair_or_number(name, "scale_factor", opts.scale_factor, 3) end
  self.mode = opts.mode or "nearest"
  if self.mode ~= "nearest" and self.mode ~= "bilinear" then
    check.fail(name, "mode", "'nearest' or 'bilinear'", self.mode, 3)
  end
  self.align_corners = check.boolean(name, "align_corners", opts.align_corners, 3)
  if self.align_corners ~= nil and self.mode == "nearest" then
    error(name .. ": align_corners can only be set with mode 'bilinear'", 3)
  end
  self.recompute_scale_factor = check.boolean(name, "recompute_scale_factor", opts.recompute_scale_factor, 3)
end

function Upsample:forward(x)
  return F.interpolate(x, { size = self.size, scale_factor = self.scale_factor, mode = self.mode,
                            align_corners = self.align_corners,
                            recompute_scale_factor = self.recompute_scale_factor })
end

function Upsample:extra_repr()
  local what = self.size and ("size=" .. fmt.pair(self.size)) or ("scale_factor=" .. fmt.pair(self.scale_factor))
  local s = string.format("%s, mode='%s'", what, self.mode)
  if self.align_corners ~= nil then s = s .. ", align_corners=" .. fmt.bool(self.align_corners) end
  return s
end

doc[Upsample] = [[
nn.Upsample{size = | scale_factor =, mode = 'nearest', align_corners =, recompute_scale_factor =}
Resizes N x C x H x W input to size (a number or {h, w}) or by scale_factor
(output floor(H * s)), as F.interpolate.  mode 'nearest' copies
x[floor(dst * H_in / H_out)]; 'bilinear' mixes the 4 nearest pixels, with
align_corners = false (default: pixel centres, PyTorch's) or true (corner
pixels aligned).  With scale_factor the coordinates use 1 / scale_factor
unless recompute_scale_factor = true.
  up = nn.Upsample{scale_factor = 2, mode = 'bilinear'}   -- 8x3x16x16 -> 8x3x32x32]]

-- ---- PixelShuffle / PixelUnshuffle ----------------------------------------------

local PixelShuffle = Module:extend("PixelShuffle")

function PixelShuffle:init(upscale_factor)
  self.upscale_factor = check.integer("nn.PixelShuffle", "upscale_factor", upscale_factor, 3, 1)
end

function PixelShuffle:forward(x) return F.pixel_shuffle(x, self.upscale_factor) end

function PixelShuffle:extra_repr() return "upscale_factor=" .. self.upscale_factor end

local PixelUnshuffle = Module:extend("PixelUnshuffle")

function PixelUnshuffle:init(downscale_factor)
  self.downscale_factor = check.integer("nn.PixelUnshuffle", "downscale_factor", downscale_factor, 3, 1)
end

function PixelUnshuffle:forward(x) return F.pixel_unshuffle(x, self.downscale_factor) end

function PixelUnshuffle:extra_repr() return "downscale_factor=" .. self.downscale_factor end

doc[PixelShuffle] = [[
nn.PixelShuffle(r)
Rearranges N x C*r*r x H x W into N x C x H*r x W*r (sub-pixel convolution,
ESPCN): y[n, c, h*r + i, w*r + j] = x[n, c*r*r + i*r + j, h, w] (0-based).]]
doc[PixelUnshuffle] = [[
nn.PixelUnshuffle(r)
The inverse of nn.PixelShuffle(r): N x C x H*r x W*r -> N x C*r*r x H x W.]]

return { Upsample = Upsample, PixelShuffle = PixelShuffle, PixelUnshuffle = PixelUnshuffle }
