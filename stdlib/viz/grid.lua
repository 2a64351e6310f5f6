-- viz/grid.lua -- viz.grid: the maps of N x C x H x W as a labelled montage
-- (module "viz.grid"; viz/init.lua puts its functions into viz).
local cnn = _G.cnn
local doc = cnn.doc or {}
local C = require("viz.common")
local rgb_scale_line = C.rgb_scale_line
local P, check_opts, default_scale, pad = C.P, C.check_opts, C.default_scale, C.pad
local pixel_cols, planes_of, range_of, render, render_rgb = C.pixel_cols, C.planes_of, C.range_of, C.render, C.render_rgb
local resample, resample_rgb, rgb_range, scale_line, shape_str = C.resample, C.resample_rgb, C.rgb_range, C.scale_line, C.shape_str
local shrink, values = C.shrink, C.values

local viz = {}

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
  local mode, width = P.mode(opts), P.width(opts)
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
                or opts.rgb_tiles and rgb_scale_line(lo, hi)
                or scale_line(lo, hi, mode, opts.cmap)
  lines[#lines + 1] = scale
  return table.concat(lines, "\n") .. "\n"
end

function viz.grid(t, opts)
  io.write(viz.grid_str(t, opts))
end

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

return viz
