-- viz/plot.lua -- viz.plot: line charts in Braille dots
-- (module "viz.plot"; viz/init.lua puts its functions into viz).
local cnn = _G.cnn
local doc = cnn.doc or {}
local C = require("viz.common")
local P, RESET, check_opts, colour, fg = C.P, C.RESET, C.check_opts, C.colour, C.fg
local finite_range, fmt, pad, values = C.finite_range, C.fmt, C.pad, C.values

local viz = {}

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
  local mode, width = P.mode(opts), P.width(opts)
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

doc[viz.plot] = [[
viz.plot(s1 [, s2, ...] [, {title=, height=12, width=, names={...}}])
A line chart of Lua lists or 1-D tensors in Braille dots (2 x 4 per cell),
for loss curves; x runs over the indices 1..n.]]

return viz
