-- viz/show.lua -- viz.show: a 2-D tensor as a heatmap, a 3 x H x W one as a colour image
-- (module "viz.show"; viz/init.lua puts its functions into viz).
local cnn = _G.cnn
local doc = cnn.doc or {}
local C = require("viz.common")
local rgb_scale_line = C.rgb_scale_line
local P, as_2d, check_opts, default_scale = C.P, C.as_2d, C.check_opts, C.default_scale
local pixel_cols, planes_of, range_of, render, render_rgb = C.pixel_cols, C.planes_of, C.range_of, C.render, C.render_rgb
local resample, resample_rgb, rgb_range, scale_line, shape_str = C.resample, C.resample_rgb, C.rgb_range, C.scale_line, C.shape_str
local values = C.values

local viz = {}

-- ---- show ----------------------------------------------------------------------

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
  local f = math.max(1, math.ceil(w * pixel_cols(mode) / P.width(opts)))
  local k = opts.scale or default_scale(h, w, P.width(opts), mode)
  if rh then
    local lo, hi = rgb_range(t, v, opts)
    local p, sh, sw = resample_rgb(planes_of(v, h, w), h, w, f, k)
    return render_rgb(p, sh, sw, lo, hi, mode), rgb_scale_line(lo, hi), f
  end
  local lo, hi = range_of(v, opts)
  local sv, sh, sw = resample(v, h, w, f, k)
  return render(sv, sh, sw, lo, hi, mode, opts.cmap), scale_line(lo, hi, mode, opts.cmap), f
end

function viz.show_str(t, opts)
  assert(cnn.is_tensor(t), "viz.show: expected a tensor")
  opts = check_opts("viz.show", opts)
  local lines, scale, f = show_lines(t, opts, P.mode(opts))
  if opts.title then table.insert(lines, 1, opts.title) end
  local note = f > 1 and string.format("  (%s shown 1:%d)", shape_str(t), f) or ""
  lines[#lines + 1] = scale .. note
  return table.concat(lines, "\n") .. "\n"
end

function viz.show(t, opts)
  io.write(viz.show_str(t, opts))
end

doc[viz.show] = [[
viz.show(t [, {vmin=, vmax=, cmap="viridis"|"gray", scale=, rgb=true, mode=, width=, title=}])
Draws a 2-D tensor (leading size-1 dims are dropped) as a heatmap, then a
line with the colour scale, min and max; a 3 x H x W tensor is an RGB image,
drawn in its own colours (rgb = false: refuse it as 3-D).  Wide images are
shrunk to fit; small ones (a 3x3 filter) are enlarged to about 12 pixels a
side, scale = k draws each value k x k.  Unknown options are errors.]]

return viz
