-- viz/hist.lua -- viz.hist: a histogram of the values
-- (module "viz.hist"; viz/init.lua puts its functions into viz).
local cnn = _G.cnn
local doc = cnn.doc or {}
local check = require("check")
local C = require("viz.common")
local P, check_opts, fmt, range_of, user_level = C.P, C.check_opts, C.fmt, C.range_of, C.user_level
local values = C.values

local viz = {}

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
P.bin_counts = bin_counts

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
  local mode, width = P.mode(opts), P.width(opts)
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

doc[viz.hist] = "viz.hist(t [, {bins=20, vmin=, vmax=}])\nA histogram of t's values (NaN/Inf counted apart)."

return viz
