-- check.lua -- argument checks shared by the stdlib's constructors (module
-- "check"): nn layers, optimizers, schedulers, gradcheck.
--
-- Design.  Each check takes the name of the public function ("nn.Conv2d"),
-- the name of the argument ("kernel_size"), the value and `level`, and
-- either returns the value (integral floats such as 2^10 become integers)
-- or raises one message in one form:
--   "nn.Conv2d: kernel_size must be a positive integer, got 0"
-- `level` counts as error()'s does, from the function that calls the
-- check: 1 = that function, 2 = its caller, ... so a constructor passes the
-- level of the user's line.  (Never `return check.x(...)`: a tail call
-- removes a frame and shifts the level.)
-- Invariants: NaN never passes a numeric check (every comparison is
-- written `not (lo <= v)`, which NaN fails), nor does +-inf unless a bound
-- is itself infinite; nothing here raises a message that does not start
-- with the function's name.
local check = {}

-- How a bad value reads in a message: numbers as Lua prints them (NaN as
-- "nan"), strings quoted, anything else by its type.
local function show(v)
  if type(v) == "number" then
    if v ~= v then return "nan" end
    return tostring(v)
  end
  if type(v) == "string" then return string.format("%q", #v > 40 and v:sub(1, 40) .. "..." or v) end
  return type(v)
end
check.show = show

-- fail(fname, what, rule, v, level): raises "fname: what must be rule, got v".
function check.fail(fname, what, rule, v, level)
  error(string.format("%s: %s must be %s, got %s", fname, what, rule, show(v)), (level or 1) + 1)
end

local function range_text(kind, lo, hi)
  if lo == 1 and hi == nil and kind == "integer" then return "a positive integer" end
  if lo and hi then return string.format("%s in [%s, %s]", kind == "integer" and "an integer" or "a number", lo, hi) end
  if lo then return string.format("%s >= %s", kind == "integer" and "an integer" or "a number", lo) end
  if hi then return string.format("%s <= %s", kind == "integer" and "an integer" or "a number", hi) end
  return kind == "integer" and "an integer" or "a finite number"
end

-- Whether v lies in [lo, hi] (either bound may be nil); false for NaN.
local function within(v, lo, hi)
  return v == v and not (lo and not (v >= lo)) and not (hi and not (v <= hi))
end

-- integer(fname, what, v, level [, lo [, hi]]) -> v as an integer in [lo, hi].
function check.integer(fname, what, v, level, lo, hi)
  local i = type(v) == "number" and math.tointeger(v) or nil
  if i == nil or not within(i, lo, hi) then
    check.fail(fname, what, range_text("integer", lo, hi), v, level + 1)
  end
  return i
end

-- number(fname, what, v, level [, lo [, hi]]) -> v, a number in [lo, hi];
-- without bounds it must be finite.
function check.number(fname, what, v, level, lo, hi)
  local ok = type(v) == "number" and within(v, lo, hi)
  if ok and lo == nil and hi == nil then ok = v > -math.huge and v < math.huge end
  if ok and lo ~= nil and hi == nil then ok = v < math.huge end
  if ok and hi ~= nil and lo == nil then ok = v > -math.huge end
  if not ok then check.fail(fname, what, range_text("number", lo, hi), v, level + 1) end
  return v
end

-- ints(fname, what, v, level, lo, sizes) -> v: an integer >= lo, or a list
-- of them whose length is in `sizes` (e.g. {2} for {h, w}, {2, 4} for
-- padding); the form the user gave is kept (integral floats converted).
function check.ints(fname, what, v, level, lo, sizes)
  if type(v) ~= "table" then
    local i = check.integer(fname, what, v, level + 1, lo)
    return i
  end
  local n_ok = false
  for _, n in ipairs(sizes) do if #v == n then n_ok = true end end
  local forms = {}
  for _, n in ipairs(sizes) do forms[#forms + 1] = n == 2 and "{h, w}" or ("a list of " .. n) end
  if not n_ok then
    error(string.format("%s: %s must be a number or %s, got a table of %d", fname, what,
                        table.concat(forms, " or "), #v), level + 1)
  end
  local out = {}
  for i = 1, #v do out[i] = check.integer(fname, what .. "[" .. i .. "]", v[i], level + 1, lo) end
  return out
end

-- boolean(fname, what, v, level) -> v (nil or a boolean).
function check.boolean(fname, what, v, level)
  if v ~= nil and type(v) ~= "boolean" then check.fail(fname, what, "true or false", v, level + 1) end
  return v
end

-- options(fname, opts, known, level) -> opts (or {} for nil): a table whose
-- keys are all in the list `known` (a typo such as `pading` is an error).
function check.options(fname, opts, known, level)
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    if (type(opts) == "number" or type(opts) == "boolean") and known[1] then -- nn.MaxPool2d(2, 2)
      error(string.format("%s: the options must be a table, got %s: PyTorch's extra positional " ..
                          "arguments are named options here, as in %s(..., {%s = %s})", fname,
                          show(opts), fname, known[1], tostring(opts)), level + 1)
    end
    check.fail(fname, "the options", "a table", opts, level + 1)
  end
  local set = {}
  for _, k in ipairs(known) do set[k] = true end
  for k in pairs(opts) do
    if not set[k] then
      local names = table.move(known, 1, #known, 1, {})
      table.sort(names)
      error(string.format("%s: unknown option '%s' (options: %s)", fname, tostring(k),
                          table.concat(names, ", ")), level + 1)
    end
  end
  return opts
end

-- call(fname, level, f, ...) -> f(...), but an error of f (an allocation
-- too large, say) is raised again as "fname: <message>" at `level`.
function check.call(fname, level, f, ...)
  local r = table.pack(pcall(f, ...))
  if not r[1] then
    local msg = tostring(r[2]):gsub("^[^:\n]*:%d+: ", "", 1)
    error(fname .. ": " .. msg, level + 1)
  end
  return table.unpack(r, 2, r.n)
end

return check
