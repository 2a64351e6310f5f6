-- fmt.lua -- text helpers shared by stdlib (private: require("fmt"), not a
-- global, so completion and help do not list it).
--
--   fmt.shape_str(t)  "2x3" for a 2 x 3 tensor, "scalar" for 0-d, "-" for
--                     anything that is not a tensor
--   fmt.num(v)        a number as Python prints it in reprs: 3, 1.0, 0.1, 1e-05
--   fmt.pair(p)       a number, or a list as Python's tuple repr: "(3, 3)"
--   fmt.bool(b)       "True" / "False", as PyTorch's reprs
--   fmt.unflatten(i, shape)  the 1-based multi-index of flat position i
local cnn = _G.cnn

local fmt = {}

function fmt.shape_str(t)
  if not cnn.is_tensor(t) then return "-" end
  local s = t.shape
  if #s == 0 then return "scalar" end
  return table.concat(s, "x")
end

function fmt.num(v)
  if math.type(v) == "integer" then return tostring(v) end
  if v == math.floor(v) and math.abs(v) < 1e15 then return string.format("%.1f", v) end
  return string.format("%g", v)
end

function fmt.pair(p)
  if type(p) == "table" then
    local parts = {}
    for i, v in ipairs(p) do parts[i] = fmt.num(v) end
    return "(" .. table.concat(parts, ", ") .. ")"
  end
  return fmt.num(p)
end

function fmt.bool(b)
  return b and "True" or "False"
end

-- 1-based multi-index of the flat 1-based position i in shape s
-- (gradcheck's and labcheck's reports).
function fmt.unflatten(i, s)
  local idx, r = {}, i - 1
  for d = #s, 1, -1 do
    idx[d] = r % s[d] + 1
    r = r // s[d]
  end
  return idx
end

return fmt
