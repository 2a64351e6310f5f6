-- viz/gradflow.lua -- viz.gradflow: the gradient norm of every parameter
-- (module "viz.gradflow"; viz/init.lua puts its functions into viz).
local cnn = _G.cnn
local doc = cnn.doc or {}
local C = require("viz.common")
local P, check_opts, fmt, shape_str = C.P, C.check_opts, C.fmt, C.shape_str

local viz = {}

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
P.grad_rows = grad_rows

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
  local mode, width = P.mode(opts), P.width(opts)
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

doc[viz.gradflow] = [[
viz.gradflow(net [, opts])
A bar chart (log scale) of the gradient norm of every parameter after a
backward; flags vanishing (< 1e-7) and exploding (> 1e3) gradients.
viz.gradflow_str returns the text and the rows {name, shape, norm, mean_abs, flag}.]]

return viz
