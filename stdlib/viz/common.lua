-- viz/common.lua -- what viz's renderers share (module "viz.common",
-- private): options checking, the drawing mode and width, values and
-- ranges, colour maps, the 2-D and RGB renderers, resampling (shrink and
-- enlarge) and the scale line.  The design of viz is in viz/init.lua.
local cnn = _G.cnn

local check = require("check")
local internal = require("cnn.internal") -- the bindings' private helpers

-- viz's private helpers, out of completion and help: reached by the
-- renderers through this module and by the tests as
-- require("cnn.internal").viz (mode, width, values, render, ...)
local P = {}
internal.viz = P

-- ---- options -----------------------------------------------------------------

-- the chunk names of viz's files share this folder part ("@.../viz/")
local VIZ_DIR = debug.getinfo(1, "S").source:match("^(.*[/\\])") or ""

-- The level, counted as error()'s from the function calling this one, of
-- the first caller outside the viz folder: an error found deep inside viz
-- (show calls show_str calls check_opts) points at the user's line.
local function user_level()
  local k = 1
  while true do
    local info = debug.getinfo(k + 1, "S")
    if info == nil or info.source:sub(1, #VIZ_DIR) ~= VIZ_DIR then return k end
    k = k + 1
  end
end

-- Numeric options: {kind, lo, hi}; and options that take one of a few names.
local NUMERIC = {
  width = { "integer", 1 }, height = { "integer", 1, 1000 }, bins = { "integer", 1, 10000 },
  max = { "integer", 1 }, shrink = { "integer", 1 }, nrow = { "integer", 1 },
  scale = { "integer", 1, 256 }, padding = { "integer", 0 }, pad_value = { "number", 0, 255 },
  vmin = { "number" }, vmax = { "number" },
}
local CHOICES = { mode = { "color", "grey", "ascii" }, cmap = { "viridis", "gray", "grey" } }

-- The options each function takes; any other key is an error.
local KNOWN = {
  ["viz.show"] = { "cmap", "mode", "rgb", "scale", "title", "vmax", "vmin", "width" },
  ["viz.grid"] = { "cmap", "max", "mode", "normalize", "rgb", "scale", "shrink", "title", "vmax", "vmin", "width" },
  ["viz.hist"] = { "bins", "mode", "vmax", "vmin", "width" },
  ["viz.plot"] = { "height", "mode", "names", "title", "width" },
  ["viz.gradflow"] = { "mode", "width" },
  ["viz.graph"] = { "dot", "mode", "names" },
  ["viz.save_png"] = { "normalize", "nrow", "pad_value", "padding", "rgb", "scale", "vmax", "vmin" },
}

-- check_opts(fname, opts) -> opts (or {} for nil), after checking that
-- every key is one fname takes (KNOWN) and the type and range of every
-- option above that it holds.
local function check_opts(fname, opts)
  if opts == nil then return {} end
  local L = user_level()
  if type(opts) ~= "table" or cnn.is_tensor(opts) then check.fail(fname, "the options", "a table", opts, L) end
  check.options(fname, opts, KNOWN[fname], L)
  if opts.rgb ~= nil then check.boolean(fname, "rgb", opts.rgb, L) end
  for k, r in pairs(NUMERIC) do
    local v = opts[k]
    if v ~= nil and r[1] == "integer" then check.integer(fname, k, v, L, r[2], r[3])
    elseif v ~= nil then check.number(fname, k, v, L, r[2], r[3]) end
  end
  for k, names in pairs(CHOICES) do
    local v, ok = opts[k], opts[k] == nil
    for _, n in ipairs(names) do if v == n then ok = true end end
    if not ok then check.fail(fname, k, "one of '" .. table.concat(names, "', '") .. "'", v, L) end
  end
  if opts.vmin and opts.vmax and opts.vmin > opts.vmax then
    error(string.format("%s: vmin (%s) must be <= vmax (%s)", fname, tostring(opts.vmin), tostring(opts.vmax)), L)
  end
  return opts
end

local ASCII_RAMP = { " ", ".", ":", "-", "=", "+", "*", "#", "%", "@" }
local GREY_RAMP = { " ", "░", "▒", "▓", "█" }
local RESET = "\27[0m"

-- ---- small helpers ---------------------------------------------------------

-- "%.4g" without a trailing exponent clutter; integers stay integers.
local function fmt(v)
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" end
  if v == -math.huge then return "-inf" end
  if v == math.floor(v) and math.abs(v) < 1e15 then return string.format("%d", v) end
  return string.format("%.4g", v)
end
P.fmt = fmt

local shape_str = require("fmt").shape_str

-- The drawing mode: opts.mode, else "ascii" under cnn.ascii, "grey" when
-- colour is off (NO_COLOR set and non-empty, or stdout not a terminal),
-- else "color".
function P.mode(opts)
  if opts and opts.mode then return opts.mode end
  if cnn.ascii then return "ascii" end
  local nc = os.getenv("NO_COLOR")
  if nc ~= nil and nc ~= "" then return "grey" end
  if not internal.isatty(1) then return "grey" end
  return "color"
end

-- Columns available: opts.width, COLUMNS, the terminal's width, or 80.
function P.width(opts)
  if opts and opts.width then return opts.width end
  local c = tonumber(os.getenv("COLUMNS") or "")
  if c and c >= 10 then return math.floor(c) end
  if internal.isatty(1) then
    local w = internal.term_width()
    if w and w >= 10 then return w end
  end
  return 80
end

-- Values of any tensor as a flat Lua list (row-major), in float64.
local function values(t)
  if t:numel() == 0 then return {} end
  return t:detach():cpu():double():reshape(-1):totable()
end
P.values = values

-- lo, hi of the finite values of list v (nil, nil if none).
local function finite_range(v)
  local lo, hi = math.huge, -math.huge
  for i = 1, #v do
    local x = v[i]
    if x == x and x ~= math.huge and x ~= -math.huge then
      if x < lo then lo = x end
      if x > hi then hi = x end
    end
  end
  if lo > hi then return nil, nil end
  return lo, hi
end
P.finite_range = finite_range

local function range_of(v, opts)
  local lo, hi = finite_range(v)
  lo, hi = lo or 0, hi or 0
  if opts and opts.vmin then lo = opts.vmin end
  if opts and opts.vmax then hi = opts.vmax end
  return lo, hi
end

-- u in [0, 1] for value x over [lo, hi]; nil for NaN.
local function unit(x, lo, hi)
  if x ~= x then return nil end
  if hi <= lo then return 0.5 end
  local u = (x - lo) / (hi - lo)
  if u < 0 then return 0 elseif u > 1 then return 1 end
  return u
end

-- ---- colours -------------------------------------------------------------------

-- viridis, sampled at 9 points and interpolated linearly
local VIRIDIS = {
  { 68, 1, 84 }, { 71, 44, 122 }, { 59, 81, 139 }, { 44, 113, 142 }, { 33, 144, 141 },
  { 39, 173, 129 }, { 92, 200, 99 }, { 170, 220, 50 }, { 253, 231, 37 },
}

-- r, g, b (0..255) of u under cmap ("viridis" or "gray"); NaN (nil) is red.
local function colour(u, cmap)
  if u == nil then return 255, 0, 0 end
  if cmap == "gray" or cmap == "grey" then
    local g = math.floor(u * 255 + 0.5)
    return g, g, g
  end
  local p = u * (#VIRIDIS - 1)
  local i = math.min(math.floor(p), #VIRIDIS - 2)
  local f = p - i
  local a, b = VIRIDIS[i + 1], VIRIDIS[i + 2]
  local function mix(k) return math.floor(a[k] + (b[k] - a[k]) * f + 0.5) end
  return mix(1), mix(2), mix(3)
end
P.colour = colour

local function fg(r, g, b) return string.format("\27[38;2;%d;%d;%dm", r, g, b) end
local function bg(r, g, b) return string.format("\27[48;2;%d;%d;%dm", r, g, b) end

-- The character of u in a ramp (a list of characters); "?" for NaN.
local function ramp_char(u, ramp)
  if u == nil then return "?" end
  return ramp[math.floor(u * (#ramp - 1) + 0.5) + 1]
end

-- ---- rendering a 2-D list of values -----------------------------------------

-- Shrinks an h x w list by averaging f x f blocks (edge blocks are partial).
local function shrink(v, h, w, f)
  if f <= 1 then return v, h, w end
  local nh, nw = math.ceil(h / f), math.ceil(w / f)
  local out = {}
  for i = 0, nh - 1 do
    for j = 0, nw - 1 do
      local s, n = 0, 0
      for y = i * f, math.min(h, (i + 1) * f) - 1 do
        for x = j * f, math.min(w, (j + 1) * f) - 1 do
          s, n = s + v[y * w + x + 1], n + 1
        end
      end
      out[i * nw + j + 1] = s / n
    end
  end
  return out, nh, nw
end

-- Visible columns of one pixel in a mode.
local function pixel_cols(mode) return mode == "color" and 1 or 2 end

-- Escape sequences of 256 colour levels of a colour map, built once:
-- lut.fg[k], lut.bg[k] for k = 0..255, and lut.fg.nan / lut.bg.nan.
local luts = {}
local function lut_of(cmap)
  local key = cmap or "viridis"
  if luts[key] then return luts[key] end
  local l = { fg = {}, bg = {} }
  for k = 0, 255 do
    local r, g, b = colour(k / 255, cmap)
    l.fg[k], l.bg[k] = fg(r, g, b), bg(r, g, b)
  end
  l.fg.nan, l.bg.nan = fg(255, 0, 0), bg(255, 0, 0)
  luts[key] = l
  return l
end

local function level(u)
  if u == nil then return "nan" end
  return math.floor(u * 255 + 0.5)
end

-- Lines of colour half blocks for an h x w list (ceil(h/2) lines, w columns).
local function render_color(v, h, w, lo, hi, cmap)
  local lut, lines = lut_of(cmap), {}
  for y = 0, h - 1, 2 do
    local parts = {}
    for x = 0, w - 1 do
      local up = lut.fg[level(unit(v[y * w + x + 1], lo, hi))]
      if y + 1 < h then
        parts[#parts + 1] = up .. lut.bg[level(unit(v[(y + 1) * w + x + 1], lo, hi))] .. "▀"
      else
        parts[#parts + 1] = "\27[49m" .. up .. "▀"
      end
    end
    lines[#lines + 1] = table.concat(parts) .. RESET
  end
  return lines
end

-- Lines of ramp characters (h lines, 2w columns).
local function render_ramp(v, h, w, lo, hi, ramp)
  local lines = {}
  for y = 0, h - 1 do
    local parts = {}
    for x = 0, w - 1 do
      local c = ramp_char(unit(v[y * w + x + 1], lo, hi), ramp)
      parts[#parts + 1] = c .. c
    end
    lines[#lines + 1] = table.concat(parts)
  end
  return lines
end

-- Lines drawing the h x w list v over [lo, hi] in `mode`.
local function render(v, h, w, lo, hi, mode, cmap)
  if mode == "color" then return render_color(v, h, w, lo, hi, cmap) end
  return render_ramp(v, h, w, lo, hi, mode == "ascii" and ASCII_RAMP or GREY_RAMP)
end
P.render = render

-- Small maps (a 3x3 filter) are enlarged by default to about LEGIBLE
-- pixels a side, as far as `cols` columns allow; opts.scale overrides.
local LEGIBLE = 12
local function default_scale(h, w, cols, mode)
  local k = LEGIBLE // math.max(h, w, 1)
  local fit = cols // math.max(1, w * pixel_cols(mode))
  return math.max(1, math.min(k, fit))
end

-- Nearest-neighbour enlargement of an h x w list by k (each value k x k).
local function enlarge(v, h, w, k)
  if k <= 1 then return v, h, w end
  local out, W = {}, w * k
  for y = 0, h * k - 1 do
    local row = (y // k) * w
    for x = 0, W - 1 do out[y * W + x + 1] = v[row + x // k + 1] end
  end
  return out, h * k, W
end

-- Shrinks by f (f > 1) or else enlarges by k: the list drawn.
local function resample(v, h, w, f, k)
  if f > 1 then return shrink(v, h, w, f) end
  return enlarge(v, h, w, k)
end

-- The three planes (h x w lists) of an RGB image held in v (3 x h x w).
local function planes_of(v, h, w)
  local n = h * w
  return { table.move(v, 1, n, 1, {}), table.move(v, n + 1, 2 * n, 1, {}), table.move(v, 2 * n + 1, 3 * n, 1, {}) }
end

-- r, g, b (0..255) of pixel i of the planes over [lo, hi]; NaN is red.
local function rgb_at(p, i, lo, hi)
  local r, g, b = unit(p[1][i], lo, hi), unit(p[2][i], lo, hi), unit(p[3][i], lo, hi)
  if not (r and g and b) then return 255, 0, 0 end
  return math.floor(r * 255 + 0.5), math.floor(g * 255 + 0.5), math.floor(b * 255 + 0.5)
end

-- Lines drawing RGB planes (h x w each) over [lo, hi]: true colour half
-- blocks, or the ramp of the luminance (0.299 r + 0.587 g + 0.114 b).
local function render_rgb(p, h, w, lo, hi, mode)
  local lines = {}
  if mode == "color" then
    for y = 0, h - 1, 2 do
      local parts = {}
      for x = 0, w - 1 do
        local up = fg(rgb_at(p, y * w + x + 1, lo, hi))
        parts[#parts + 1] = up .. (y + 1 < h and bg(rgb_at(p, (y + 1) * w + x + 1, lo, hi)) or "\27[49m") .. "▀"
      end
      lines[#lines + 1] = table.concat(parts) .. RESET
    end
    return lines
  end
  local luma = {}
  for i = 1, h * w do
    local r, g, b = p[1][i], p[2][i], p[3][i]
    luma[i] = 0.299 * r + 0.587 * g + 0.114 * b
  end
  return render_ramp(luma, h, w, lo, hi, mode == "ascii" and ASCII_RAMP or GREY_RAMP)
end

-- Resamples the planes by f or k; returns the planes, h, w.
local function resample_rgb(p, h, w, f, k)
  local out, nh, nw = {}, h, w
  for c = 1, 3 do out[c], nh, nw = resample(p[c], h, w, f, k) end
  return out, nh, nw
end

-- lo, hi of an RGB tensor: 0..255 for uint8, else its finite range (or vmin/vmax).
local function rgb_range(t, v, opts)
  if t.dtype == "uint8" then return opts.vmin or 0, opts.vmax or 255 end
  return range_of(v, opts)
end

-- The scale line: the colours (or the ramp) from lo to hi, with the values.
local function scale_line(lo, hi, mode, cmap)
  local bar
  if mode == "color" then
    local parts = {}
    for i = 0, 15 do
      local r, g, b = colour(i / 15, cmap)
      parts[#parts + 1] = bg(r, g, b) .. " "
    end
    bar = table.concat(parts) .. RESET
  else
    bar = "[" .. table.concat(mode == "ascii" and ASCII_RAMP or GREY_RAMP) .. "]"
  end
  return "min " .. fmt(lo) .. " " .. bar .. " max " .. fmt(hi)
end

-- The scale line of an RGB picture: the range its channels were mapped from.
local function rgb_scale_line(lo, hi)
  return "RGB, channels from " .. fmt(lo) .. " to " .. fmt(hi)
end

-- ---- layout helpers --------------------------------------------------------

-- H x W view of t: 2-D as is, 1-D as one row, leading size-1 dims dropped.
local function as_2d(t, fn)
  local s = t.shape
  local keep = {}
  for i, n in ipairs(s) do
    if n ~= 1 or #s - i < 2 then keep[#keep + 1] = n end
  end
  while #keep > 2 and keep[1] == 1 do table.remove(keep, 1) end
  if #keep == 0 then return 1, 1 end
  if #keep == 1 then return 1, keep[1] end
  if #keep == 2 then return keep[1], keep[2] end
  error(fn .. ": expected a 2-D tensor (H x W), got " .. shape_str(t) ..
        "; use viz.grid for N x C x H x W", 3)
end

-- Pads (or cuts) an ASCII label to `cols` columns.
local function pad(s, cols)
  if #s > cols then return s:sub(1, cols) end
  return s .. string.rep(" ", cols - #s)
end

-- ---- exports -------------------------------------------------------------------

local C = { P = P }
C.ASCII_RAMP = ASCII_RAMP
C.GREY_RAMP = GREY_RAMP
C.RESET = RESET
C.as_2d = as_2d
C.bg = bg
C.check_opts = check_opts
C.colour = colour
C.default_scale = default_scale
C.enlarge = enlarge
C.fg = fg
C.finite_range = finite_range
C.fmt = fmt
C.level = level
C.lut_of = lut_of
C.pad = pad
C.pixel_cols = pixel_cols
C.planes_of = planes_of
C.ramp_char = ramp_char
C.range_of = range_of
C.render = render
C.render_color = render_color
C.render_ramp = render_ramp
C.render_rgb = render_rgb
C.resample = resample
C.resample_rgb = resample_rgb
C.rgb_at = rgb_at
C.rgb_range = rgb_range
C.rgb_scale_line = rgb_scale_line
C.scale_line = scale_line
C.shape_str = shape_str
C.shrink = shrink
C.unit = unit
C.user_level = user_level
C.values = values

return C
