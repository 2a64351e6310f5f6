-- viz.lua -- terminal pictures and PNG images of tensors (the "viz" module).
--
--   viz.show(t)          a 2-D tensor as a heatmap, with a scale and min/max
--   viz.grid(t)          N x C x H x W maps or filters as a labelled montage
--   viz.hist(t)          a histogram of the values
--   viz.plot(s1, s2...)  line chart (Braille dots) of Lua lists or 1-D tensors
--   viz.gradflow(net)    bar chart of the gradient norm of every parameter
--   viz.graph(t)         the autograd graph that produced t, as a tree / DOT
--   viz.save_png(t, p)   a 2-D map, a 3 x H x W RGB image or a montage -> PNG
-- Each drawing function prints; its twin `viz.<name>_str` returns the text.
--
-- Design.  Pixels are fetched once into a flat Lua list (row-major) and
-- drawn in one of three modes:
--   "color"  two pixels per character cell: the half block "▀" with the
--            upper pixel as 24-bit foreground and the lower as background;
--   "grey"   one shade character " ░▒▓█" per pixel (colour off: NO_COLOR
--            set, or stdout not a terminal);
--   "ascii"  the ramp " .:-=+*#%@" per pixel (cnn.ascii, set by --ascii).
-- In the ramp modes a pixel is two characters wide so that it looks square.
-- A value v maps to u = (v - lo) / (hi - lo) in [0, 1] (0.5 when hi == lo)
-- and to ramp level floor(u * (n - 1) + 0.5): lo is always the first
-- character and hi the last; in colour u is quantised to 256 levels whose
-- escape sequences are built once per colour map (a table lookup per
-- pixel keeps a 64-map grid under 0.1 s).  NaN shows as "?" (red in colour).  lo and hi
-- are the minimum and maximum of the finite values unless opts.vmin/vmax.
-- Images wider than the terminal (COLUMNS, else the tty's width, else 80)
-- are shrunk by an integer factor, averaging blocks of pixels.
--
-- Invariant: every line a renderer returns has the same visible width, so
-- tiles can be joined side by side with plain string concatenation.
-- Every public function checks its options first (check_opts: integers
-- where counts are meant, finite numbers, known mode and cmap names), with
-- errors naming it at the user's line.
local cnn = _G.cnn
local doc = cnn.doc or {}

local check = require("check")

local viz = {}

-- ---- options -----------------------------------------------------------------

local THIS_FILE = debug.getinfo(1, "S").source

-- The level, counted as error()'s from the function calling this one, of
-- the first caller outside viz.lua: an error found deep inside viz (show
-- calls show_str calls check_opts) points at the user's line.
local function user_level()
  local k = 1
  while true do
    local info = debug.getinfo(k + 1, "S")
    if info == nil or info.source ~= THIS_FILE then return k end
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
viz.fmt = fmt

local function shape_str(t)
  local s = t.shape
  if #s == 0 then return "scalar" end
  return table.concat(s, "x")
end

-- The drawing mode: opts.mode, else "ascii" under cnn.ascii, "grey" when
-- colour is off (NO_COLOR set and non-empty, or stdout not a terminal),
-- else "color".
function viz.mode(opts)
  if opts and opts.mode then return opts.mode end
  if cnn.ascii then return "ascii" end
  local nc = os.getenv("NO_COLOR")
  if nc ~= nil and nc ~= "" then return "grey" end
  if cnn.viz_isatty and not cnn.viz_isatty(1) then return "grey" end
  return "color"
end

-- Columns available: opts.width, COLUMNS, the terminal's width, or 80.
function viz.width(opts)
  if opts and opts.width then return opts.width end
  local c = tonumber(os.getenv("COLUMNS") or "")
  if c and c >= 10 then return math.floor(c) end
  if cnn.viz_isatty and cnn.viz_isatty(1) and cnn.viz_term_width then
    local w = cnn.viz_term_width()
    if w and w >= 10 then return w end
  end
  return 80
end

-- Values of any tensor as a flat Lua list (row-major), in float64.
local function values(t)
  if t:numel() == 0 then return {} end
  return t:detach():cpu():double():reshape(-1):totable()
end
viz.values = values

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
viz.finite_range = finite_range

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
viz.colour = colour

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
viz.render = render

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

-- ---- show ----------------------------------------------------------------------

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

-- h, w of t when it is a 3 x H x W image (leading size-1 dims dropped), else nil.
local function as_rgb(t, opts)
  if opts.rgb == false then return nil end
  local s = {}
  for _, n in ipairs(t.shape) do s[#s + 1] = n end
  while #s > 3 and s[1] == 1 do table.remove(s, 1) end
  if #s == 3 and s[1] == 3 then return s[2], s[3] end
end

-- The lines of t's picture and its scale line (shrunk by f or enlarged by k).
local function show_lines(t, opts, mode)
  local v, rh, rw = values(t), as_rgb(t, opts)
  local h, w = rh, rw
  if not rh then h, w = as_2d(t, "viz.show") end
  local f = math.max(1, math.ceil(w * pixel_cols(mode) / viz.width(opts)))
  local k = opts.scale or default_scale(h, w, viz.width(opts), mode)
  if rh then
    local lo, hi = rgb_range(t, v, opts)
    local p, sh, sw = resample_rgb(planes_of(v, h, w), h, w, f, k)
    return render_rgb(p, sh, sw, lo, hi, mode), "RGB, channels from " .. fmt(lo) .. " to " .. fmt(hi), f
  end
  local lo, hi = range_of(v, opts)
  local sv, sh, sw = resample(v, h, w, f, k)
  return render(sv, sh, sw, lo, hi, mode, opts.cmap), scale_line(lo, hi, mode, opts.cmap), f
end

function viz.show_str(t, opts)
  assert(cnn.is_tensor(t), "viz.show: expected a tensor")
  opts = check_opts("viz.show", opts)
  local lines, scale, f = show_lines(t, opts, viz.mode(opts))
  if opts.title then table.insert(lines, 1, opts.title) end
  local note = f > 1 and string.format("  (%s shown 1:%d)", shape_str(t), f) or ""
  lines[#lines + 1] = scale .. note
  return table.concat(lines, "\n") .. "\n"
end

function viz.show(t, opts)
  io.write(viz.show_str(t, opts))
end

-- ---- grid ----------------------------------------------------------------------

-- The tiles of t: a list of {label, first} with tiles of h x w values.
local function tile_layout(t)
  local s = t.shape
  if #s == 2 then return 1, 1, s[1], s[2] end
  if #s == 3 then return 1, s[1], s[2], s[3] end
  if #s == 4 then return s[1], s[2], s[3], s[4] end
  error("viz.grid: expected H x W, C x H x W or N x C x H x W, got " .. shape_str(t), 3)
end

local function tile_label(n, c, N, C)
  if N > 1 and C > 1 then return n .. "." .. c end
  if N > 1 then return tostring(n) end
  return tostring(c)
end

-- Pads (or cuts) an ASCII label to `cols` columns.
local function pad(s, cols)
  if #s > cols then return s:sub(1, cols) end
  return s .. string.rep(" ", cols - #s)
end

-- Joins tiles (lists of equal lines, tw visible columns) side by side in
-- slots of `slot` columns, under a row of labels.
local function join_row(tiles, labels, tw, slot)
  local out = { "" }
  for i, lab in ipairs(labels) do
    out[1] = out[1] .. (i > 1 and " " or "") .. pad(lab, slot)
  end
  local fill = string.rep(" ", slot - tw)
  for l = 1, #tiles[1] do
    local parts = {}
    for i, tl in ipairs(tiles) do parts[i] = tl[l] .. (i < #tiles and fill or "") end
    out[#out + 1] = table.concat(parts, " ")
  end
  return out
end

-- Renders every tile of v (count tiles of h x w, or of 3 x h x w when
-- opts.rgb_tiles), `per` per row in slots of `slot` columns.
local function grid_lines(v, count, h, w, labels, per, slot, lo, hi, mode, opts)
  local lines, row, rlabels = {}, {}, {}
  local size = (opts.rgb_tiles and 3 or 1) * h * w
  for k = 1, count do
    local tv = table.move(v, (k - 1) * size + 1, k * size, 1, {})
    local lo_k, hi_k = lo, hi
    if opts.normalize == "each" then lo_k, hi_k = range_of(tv, opts) end
    local sw
    if opts.rgb_tiles then
      local p, sh
      p, sh, sw = resample_rgb(planes_of(tv, h, w), h, w, opts.shrink, opts.enlarge)
      row[#row + 1] = render_rgb(p, sh, sw, lo_k, hi_k, mode)
    else
      local sv, sh
      sv, sh, sw = resample(tv, h, w, opts.shrink, opts.enlarge)
      row[#row + 1] = render(sv, sh, sw, lo_k, hi_k, mode, opts.cmap)
    end
    rlabels[#rlabels + 1] = labels[k]
    if #row == per or k == count then
      local tw = sw * pixel_cols(mode)
      for _, l in ipairs(join_row(row, rlabels, tw, slot)) do lines[#lines + 1] = l end
      row, rlabels = {}, {}
    end
  end
  return lines
end

-- opts: max (tiles shown, 64), normalize ("global" or "each"), shrink (an
-- integer: average k x k pixel blocks; default only what the width needs),
-- scale (an integer: each pixel k x k; default enlarges small maps), rgb
-- (false: one tile per channel even when C = 3), mode, width, cmap, vmin,
-- vmax, title.
function viz.grid_str(t, opts)
  assert(cnn.is_tensor(t), "viz.grid: expected a tensor")
  opts = setmetatable({}, { __index = check_opts("viz.grid", opts) })
  local N, C, h, w = tile_layout(t)
  opts.rgb_tiles = C == 3 and #t.shape >= 3 and opts.rgb ~= false
  if opts.rgb_tiles then C = 1 end
  local total, count = N * C, math.min(N * C, opts.max or 64)
  local flat = t:reshape(total, opts.rgb_tiles and 3 or 1, h, w):narrow(1, 1, count)
  local v = values(flat)
  local mode, width = viz.mode(opts), viz.width(opts)
  opts.shrink = opts.shrink or math.max(1, math.ceil(w * pixel_cols(mode) / width))
  opts.enlarge = opts.shrink > 1 and 1 or (opts.scale or default_scale(h, w, width, mode))
  local tile_w = opts.shrink > 1 and math.ceil(w / opts.shrink) or w * opts.enlarge
  local labels, slot = {}, tile_w * pixel_cols(mode)
  for k = 1, count do
    labels[k] = tile_label((k - 1) // C + 1, (k - 1) % C + 1, N, C)
    slot = math.max(slot, #labels[k])
  end
  local per = math.max(1, math.floor((width + 1) / (slot + 1)))
  local lo, hi
  if opts.rgb_tiles then lo, hi = rgb_range(t, v, opts) else lo, hi = range_of(v, opts) end
  local lines = grid_lines(v, count, h, w, labels, per, slot, lo, hi, mode, opts)
  local head = opts.title or (shape_str(t) .. (count < total and
    string.format(" (first %d of %d maps)", count, total) or ""))
  table.insert(lines, 1, head)
  local scale = opts.normalize == "each" and "each map scaled to its own min..max"
                or opts.rgb_tiles and ("RGB, channels from " .. fmt(lo) .. " to " .. fmt(hi))
                or scale_line(lo, hi, mode, opts.cmap)
  lines[#lines + 1] = scale
  return table.concat(lines, "\n") .. "\n"
end

function viz.grid(t, opts)
  io.write(viz.grid_str(t, opts))
end

-- ---- histogram ------------------------------------------------------------------

-- counts of `bins` equal bins over [lo, hi]; the top bin includes hi.
local function bin_counts(v, lo, hi, bins)
  local counts, bad = {}, 0
  for i = 1, bins do counts[i] = 0 end
  for i = 1, #v do
    local x = v[i]
    if x ~= x or x == math.huge or x == -math.huge then
      bad = bad + 1
    elseif x >= lo and x <= hi then
      local b = hi > lo and math.floor((x - lo) / (hi - lo) * bins) + 1 or 1
      if b > bins then b = bins end
      counts[b] = counts[b] + 1
    end
  end
  return counts, bad
end
viz.bin_counts = bin_counts

-- opts: bins (20), width, mode, vmin, vmax.  Returns the text and the counts.
function viz.hist_str(t, opts)
  opts = check_opts("viz.hist", opts)
  if not cnn.is_tensor(t) and type(t) ~= "table" then
    check.fail("viz.hist", "t", "a tensor or a list of numbers", t, user_level())
  end
  local v = cnn.is_tensor(t) and values(t) or t
  local bins = opts.bins or 20
  local lo, hi = range_of(v, opts)
  local counts, bad = bin_counts(v, lo, hi, bins)
  local mode, width = viz.mode(opts), viz.width(opts)
  local cmax = math.max(1, table.unpack(counts))
  local barw = math.max(10, width - 36)
  local block = mode == "ascii" and "#" or "█"
  local lines = { string.format("histogram of %d values in %d bins", #v, bins) }
  for i = 1, bins do
    local a = lo + (hi - lo) * (i - 1) / bins
    local b = lo + (hi - lo) * i / bins
    local n = math.floor(counts[i] / cmax * barw + 0.5)
    lines[#lines + 1] = string.format("%10s .. %-10s|%s %d", fmt(a), fmt(b),
                                      string.rep(block, n), counts[i])
  end
  if bad > 0 then lines[#lines + 1] = string.format("(%d NaN/Inf values not shown)", bad) end
  return table.concat(lines, "\n") .. "\n", counts
end

function viz.hist(t, opts)
  io.write((viz.hist_str(t, opts)))
end

-- ---- line chart (Braille) ---------------------------------------------------------

-- Braille dot bits for (column 0..1, row 0..3) of a cell.
local DOTS = { [0] = { [0] = 0x01, 0x02, 0x04, 0x40 }, [1] = { [0] = 0x08, 0x10, 0x20, 0x80 } }
local SERIES_COLOURS = { { 86, 180, 233 }, { 230, 159, 0 }, { 0, 158, 115 }, { 204, 121, 167 },
                         { 240, 228, 66 }, { 213, 94, 0 } }
local SERIES_MARKS = { "*", "+", "o", "x", "#", "@" }

-- Splits plot's arguments into series (lists of numbers) and options.
local function plot_args(...)
  local series, opts = {}, {}
  for i = 1, select("#", ...) do
    local a = select(i, ...)
    if cnn.is_tensor(a) then
      series[#series + 1] = values(a)
    elseif type(a) == "table" and #a == 0 and next(a) ~= nil then
      opts = a
    elseif type(a) == "table" then
      series[#series + 1] = a
    end
  end
  return series, opts
end

-- A canvas of W x H cells: cell bits and the series that set them last.
local function canvas(W, H)
  local c = { W = W, H = H, bits = {}, who = {} }
  for i = 1, W * H do c.bits[i], c.who[i] = 0, 0 end
  return c
end

-- Sets dot (px, py) (0-based, py = 0 at the top) for series s.
local function dot(c, px, py, s)
  local cx, cy = px // 2, py // 4
  if cx < 0 or cy < 0 or cx >= c.W or cy >= c.H then return end
  local k = cy * c.W + cx + 1
  c.bits[k] = c.bits[k] | DOTS[px % 2][py % 4]
  c.who[k] = s
end

-- A straight line of dots between two points (DDA).
local function line(c, x0, y0, x1, y1, s)
  local n = math.max(math.abs(x1 - x0), math.abs(y1 - y0), 1)
  for i = 0, n do
    local t = i / n
    dot(c, math.floor(x0 + (x1 - x0) * t + 0.5), math.floor(y0 + (y1 - y0) * t + 0.5), s)
  end
end

local function series_range(series)
  local lo, hi, n = math.huge, -math.huge, 1
  for _, s in ipairs(series) do
    local a, b = finite_range(s)
    if a then lo, hi = math.min(lo, a), math.max(hi, b) end
    n = math.max(n, #s)
  end
  if lo > hi then lo, hi = 0, 1 end
  if lo == hi then lo, hi = lo - 0.5, hi + 0.5 end
  return lo, hi, n
end

-- Draws every series on the canvas over [lo, hi] and n points in x.
local function draw_series(c, series, lo, hi, n)
  local pw, ph = c.W * 2 - 1, c.H * 4 - 1
  for s, vals in ipairs(series) do
    local px, py
    for i, y in ipairs(vals) do
      if y == y and y ~= math.huge and y ~= -math.huge then
        local x1 = n > 1 and math.floor((i - 1) / (n - 1) * pw + 0.5) or 0
        local y1 = math.floor((hi - y) / (hi - lo) * ph + 0.5)
        if px then line(c, px, py, x1, y1, s) else dot(c, x1, y1, s) end
        px, py = x1, y1
      else
        px = nil
      end
    end
  end
end

-- The text of canvas row r in `mode`.
local function canvas_row(c, r, mode)
  local parts = {}
  for x = 1, c.W do
    local k = r * c.W + x
    local bits, s = c.bits[k], c.who[k]
    if bits == 0 then
      parts[x] = " "
    elseif mode == "ascii" then
      parts[x] = SERIES_MARKS[(s - 1) % #SERIES_MARKS + 1]
    elseif mode == "color" then
      local col = SERIES_COLOURS[(s - 1) % #SERIES_COLOURS + 1]
      parts[x] = fg(col[1], col[2], col[3]) .. utf8.char(0x2800 + bits) .. RESET
    else
      parts[x] = utf8.char(0x2800 + bits)
    end
  end
  return table.concat(parts)
end

-- The legend line naming each series by its mark or colour.
local function legend(nseries, names, mode)
  local parts = {}
  for s = 1, nseries do
    local name = names and names[s] or ("series " .. s)
    local mark = SERIES_MARKS[(s - 1) % #SERIES_MARKS + 1]
    if mode == "color" then
      local col = SERIES_COLOURS[(s - 1) % #SERIES_COLOURS + 1]
      mark = fg(col[1], col[2], col[3]) .. "━━" .. RESET
    elseif mode == "grey" then
      mark = "(" .. s .. ")"
    end
    parts[#parts + 1] = mark .. " " .. name
  end
  return "  " .. table.concat(parts, "   ")
end

-- viz.plot(series1, series2, ..., [{title=, height=, width=, names={...}}])
function viz.plot_str(...)
  local series, opts = plot_args(...)
  check_opts("viz.plot", opts)
  assert(#series > 0, "viz.plot: expected at least one series (a list of numbers or a 1-D tensor)")
  local mode, width = viz.mode(opts), viz.width(opts)
  local W, H = math.max(10, width - 12), opts.height or 12
  local lo, hi, n = series_range(series)
  local c = canvas(W, H)
  draw_series(c, series, lo, hi, n)
  local lines = {}
  if opts.title then lines[1] = opts.title end
  for r = 0, H - 1 do
    local label = r == 0 and fmt(hi) or (r == H - 1 and fmt(lo) or "")
    local tick = mode == "ascii" and "|" or "┤"
    lines[#lines + 1] = string.format("%10s ", label) .. tick .. canvas_row(c, r, mode)
  end
  local axis = mode == "ascii" and "+" .. string.rep("-", W) or "└" .. string.rep("─", W)
  lines[#lines + 1] = string.rep(" ", 11) .. axis
  lines[#lines + 1] = string.rep(" ", 12) .. pad("1", W - #tostring(n)) .. n
  if #series > 1 or opts.names then lines[#lines + 1] = legend(#series, opts.names, mode) end
  return table.concat(lines, "\n") .. "\n"
end

function viz.plot(...)
  io.write(viz.plot_str(...))
end

-- ---- gradient flow -------------------------------------------------------------------

local VANISH, EXPLODE = 1e-7, 1e3
viz.VANISHING, viz.EXPLODING = VANISH, EXPLODE

-- {name, shape, norm, mean_abs, flag} per parameter of net (norm nil: no grad).
local function grad_rows(net)
  local rows = {}
  for name, p in net:named_parameters() do
    local g = p.grad
    local r = { name = name, shape = shape_str(p) }
    if g then
      local gd = g:detach():double()
      r.norm = gd:norm():item()
      r.mean_abs = gd:abs():mean():item()
      if r.norm ~= r.norm or r.norm == math.huge then r.flag = "NaN/Inf"
      elseif r.norm < VANISH then r.flag = "vanishing"
      elseif r.norm > EXPLODE then r.flag = "exploding" end
    end
    rows[#rows + 1] = r
  end
  return rows
end
viz.grad_rows = grad_rows

-- A bar of n cells over log10 of the norm between lo and hi (log scale).
local function log_bar(norm, lo, hi, cells, block)
  if not norm or norm <= 0 or norm ~= norm then return "" end
  local a, b = math.log(lo, 10), math.log(hi, 10)
  local u = b > a and (math.log(norm, 10) - a) / (b - a) or 1
  return string.rep(block, math.max(1, math.floor(u * (cells - 1) + 0.5) + 1))
end

-- Bars of gradient norms per parameter on a log scale; returns text, rows.
function viz.gradflow_str(net, opts)
  assert(type(net) == "table" and net.named_parameters, "viz.gradflow: expected a module")
  opts = check_opts("viz.gradflow", opts)
  local rows = grad_rows(net)
  local lo, hi, namew = math.huge, 0, 4
  for _, r in ipairs(rows) do
    if r.norm and r.norm > 0 and r.norm == r.norm and r.norm < math.huge then
      lo, hi = math.min(lo, r.norm), math.max(hi, r.norm)
    end
    namew = math.max(namew, #r.name)
  end
  local mode, width = viz.mode(opts), viz.width(opts)
  local cells = math.max(10, width - namew - 34)
  local block = mode == "ascii" and "#" or "█"
  local lines = { string.format("gradient norm per parameter (log scale, %s .. %s)",
                                lo <= hi and fmt(lo) or "-", lo <= hi and fmt(hi) or "-") }
  for _, r in ipairs(rows) do
    local bar = r.norm and log_bar(r.norm, lo, hi, cells, block) or "(no grad)"
    bar = bar .. string.rep(" ", cells - utf8.len(bar))
    lines[#lines + 1] = string.format("%-" .. namew .. "s %s %10s %s", r.name, bar,
                                      r.norm and fmt(r.norm) or "", r.flag or "")
  end
  return table.concat(lines, "\n") .. "\n", rows
end

function viz.gradflow(net, opts)
  io.write((viz.gradflow_str(net, opts)))
end

-- ---- autograd graph --------------------------------------------------------------------

-- The inputs of the node that made t, or nil (leaf, or no binding to walk).
local function node_inputs(t)
  if not t.grad_fn then return nil end
  if cnn.grad_fn_inputs then return cnn.grad_fn_inputs(t) end
  local ok, r = pcall(function() return t:grad_fn_inputs() end)
  if ok then return r end
  return nil
end

local function node_key(t)
  if cnn.viz_node_key then return cnn.viz_node_key(t) end
  return t
end

-- key -> name for the parameters of a module (to name the leaves).
local function leaf_names(names)
  local map = {}
  if type(names) == "table" and names.named_parameters then
    for name, p in names:named_parameters() do map[node_key(p)] = name end
  elseif type(names) == "table" then
    for name, p in pairs(names) do
      if cnn.is_tensor(p) then map[node_key(p)] = tostring(name) end
    end
  end
  return map
end

local function node_text(t, names)
  if t.grad_fn then return t.grad_fn .. "  " .. shape_str(t) end
  local name = names[node_key(t)]
  local what = t.requires_grad and "leaf" or "constant"
  return (name and (name .. "  ") or "") .. what .. "  " .. shape_str(t)
end

-- The inputs of t's node that carry gradients, and whether the node was
-- freed (an op node always has one such input until backward frees it).
local function kids_of(t)
  local kids = {}
  for _, x in ipairs(node_inputs(t) or {}) do if x then kids[#kids + 1] = x end end
  return kids, t.grad_fn ~= nil and #kids == 0 and cnn.grad_fn_inputs ~= nil
end

local FREED = "  (graph freed by backward)"

-- Appends the tree below t to lines (prefix: the drawing so far).
local function tree(t, prefix, last, lines, st)
  local branch = st.ascii and (last and "`- " or "|- ") or (last and "└─ " or "├─ ")
  local key = node_key(t)
  local seen = st.seen[key]
  local kids, freed = kids_of(t)
  lines[#lines + 1] = prefix .. branch .. node_text(t, st.names) ..
                      (seen and "  (shared, above)" or (freed and FREED or ""))
  if seen then return end
  st.seen[key] = true
  local child = prefix .. (last and "   " or (st.ascii and "|  " or "│  "))
  for i, x in ipairs(kids) do tree(x, child, i == #kids, lines, st) end
end

-- viz.graph_str(t [, {names = net_or_table, mode =}])
function viz.graph_str(t, opts)
  assert(cnn.is_tensor(t), "viz.graph: expected a tensor")
  opts = check_opts("viz.graph", opts)
  local st = { seen = {}, names = leaf_names(opts.names), ascii = viz.mode(opts) == "ascii" }
  if not t.grad_fn then
    return node_text(t, st.names) .. "  (no graph: a leaf, or made under no_grad)\n"
  end
  local kids, freed = kids_of(t)
  local lines = { node_text(t, st.names) .. (freed and FREED or "") }
  st.seen[node_key(t)] = true
  for i, x in ipairs(kids) do tree(x, "", i == #kids, lines, st) end
  if not cnn.grad_fn_inputs then lines[#lines + 1] = "(cnn.grad_fn_inputs is missing: inputs not shown)" end
  return table.concat(lines, "\n") .. "\n"
end

-- Graphviz DOT text of the graph: one node per op or leaf, edges input -> op.
function viz.graph_dot(t, opts)
  opts = opts or {}
  local names, ids, out = leaf_names(opts.names), {}, { "digraph autograd {", "  rankdir=BT;" }
  local count = 0
  local function id(x)
    local k = node_key(x)
    if ids[k] then return ids[k], true end
    count = count + 1
    ids[k] = "n" .. count
    local label = node_text(x, names):gsub('"', "'")
    local shape = x.grad_fn and "box" or "ellipse"
    out[#out + 1] = string.format('  %s [label="%s", shape=%s];', ids[k], label, shape)
    return ids[k], false
  end
  local function visit(x)
    local me, done = id(x)
    if done then return me end
    for _, inp in ipairs(node_inputs(x) or {}) do
      if inp then
        local from = visit(inp)
        out[#out + 1] = string.format("  %s -> %s;", from, me)
      end
    end
    return me
  end
  visit(t)
  out[#out + 1] = "}"
  return table.concat(out, "\n") .. "\n"
end

-- viz.graph(t [, {names = net, dot = "file.dot"}]) prints the tree; with
-- dot = path also writes Graphviz DOT there (render: dot -Tpng file.dot).
function viz.graph(t, opts)
  io.write(viz.graph_str(t, opts))
  if opts and opts.dot then
    local f = assert(io.open(opts.dot, "w"))
    f:write(viz.graph_dot(t, opts))
    f:close()
    io.write("wrote " .. opts.dot .. "\n")
  end
end

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
  cnn.viz_png(img, path)
  return path
end

-- ---- documentation -------------------------------------------------------------------

doc[viz] = [[
viz -- pictures of tensors in the terminal, and PNG files.
viz.show(t), viz.grid(t), viz.hist(t), viz.plot(s1, s2, ...), viz.gradflow(net),
viz.graph(t), viz.save_png(t, path).  Each drawing function prints; its twin
viz.show_str, viz.grid_str, ... returns the text instead.
Colour: 24-bit half blocks (two pixels per character cell) on a terminal;
a grey ramp " ░▒▓█" when NO_COLOR is set or stdout is not a terminal; the
ASCII ramp " .:-=+*#%@" under cnnsh --ascii (cnn.ascii = true).  Options
common to all: {mode = "color"|"grey"|"ascii", width = columns}.]]
doc[viz.show] = [[
viz.show(t [, {vmin=, vmax=, cmap="viridis"|"gray", scale=, rgb=true, mode=, width=, title=}])
Draws a 2-D tensor (leading size-1 dims are dropped) as a heatmap, then a
line with the colour scale, min and max; a 3 x H x W tensor is an RGB image,
drawn in its own colours (rgb = false: refuse it as 3-D).  Wide images are
shrunk to fit; small ones (a 3x3 filter) are enlarged to about 12 pixels a
side, scale = k draws each value k x k.  Unknown options are errors.]]
doc[viz.grid] = [[
viz.grid(t [, {max=64, normalize="global"|"each", shrink=k, scale=k, rgb=true, mode=, width=, cmap=}])
Lays out the maps of an N x C x H x W (or C x H x W) tensor side by side to
fit the terminal, labelled n.c (or by index).  With C = 3 each of the N
tiles is an RGB image in colour (rgb = false: one tile per channel).  One
colour scale for all maps unless normalize = "each"; shrink = 2 averages
2x2 pixel blocks so more maps fit across; small maps (3x3 filters) are
enlarged by default, scale = k sets the factor.  Unknown options are errors.
  viz.grid(net[1].weight)                        -- the filters
  viz.grid(net[1](x[1]:view(1, 1, 28, 28)))      -- feature maps of one image]]
doc[viz.hist] = "viz.hist(t [, {bins=20, vmin=, vmax=}])\nA histogram of t's values (NaN/Inf counted apart)."
doc[viz.plot] = [[
viz.plot(s1 [, s2, ...] [, {title=, height=12, width=, names={...}}])
A line chart of Lua lists or 1-D tensors in Braille dots (2 x 4 per cell),
for loss curves; x runs over the indices 1..n.]]
doc[viz.gradflow] = [[
viz.gradflow(net [, opts])
A bar chart (log scale) of the gradient norm of every parameter after a
backward; flags vanishing (< 1e-7) and exploding (> 1e3) gradients.
viz.gradflow_str returns the text and the rows {name, shape, norm, mean_abs, flag}.]]
doc[viz.graph] = [[
viz.graph(t [, {names = net, dot = "graph.dot"}])
Prints the autograd graph that produced t as an indented tree (op and
shape; leaves named from names = a module's parameters); a node reached
twice is marked "(shared, above)".  dot = path also writes Graphviz DOT.
Call it before backward(), which frees the graph.]]
doc[viz.save_png] = [[
viz.save_png(t, path [, {scale=1, normalize=true, vmin=, vmax=, nrow=, padding=1, pad_value=0}])
Writes H x W (grey), 3 x H x W (RGB) or a montage of N x C x H x W (RGB
tiles when C = 3, else one grey tile per map) as PNG.  Floats are scaled
from [min, max] to 0..255 (normalize = false: v * 255, clamped); uint8 is
kept; scale = k enlarges each pixel to k x k.]]

return viz
