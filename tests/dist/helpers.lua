-- helpers.lua -- shared by the scripts in tests/dist (each runs on every
-- rank under mpirun): checks that raise with the rank in the message (a
-- failing rank stops the job: cnnsh aborts every rank), exact or
-- tolerance comparisons against plain Lua tables computed by hand.
local H = {}

function H.fail(fmt, ...)
  error(string.format("rank %d: " .. fmt, dist.rank(), ...), 2)
end

function H.check(cond, fmt, ...)
  if not cond then error(string.format("rank %d: " .. fmt, dist.rank(), ...), 2) end
end

-- the row-major values of t (any shape) as a flat Lua list
function H.flat(t)
  local out = {}
  local n = t:numel()
  if n == 0 then return out end
  local v = t:contiguous():view(n):double():totable()
  for i = 1, n do out[i] = v[i] end
  return out
end

-- every element of t equals want[k] within tol (absolute + relative)
function H.expect(what, t, want, tol)
  tol = tol or 0
  local got = H.flat(t)
  H.check(#got == #want, "%s: %d elements, expected %d", what, #got, #want)
  for k = 1, #want do
    local d = math.abs(got[k] - want[k])
    if d > tol * (1 + math.abs(want[k])) then
      H.fail("%s: element %d is %.17g, expected %.17g", what, k, got[k], want[k])
    end
  end
end

-- pcall(fn) must fail with a message containing every string of `parts`
function H.expect_error(what, fn, parts)
  local ok, err = pcall(fn)
  H.check(not ok, "%s: no error", what)
  err = tostring(err)
  for _, p in ipairs(parts) do
    H.check(err:find(p, 1, true), "%s: error '%s' lacks '%s'", what, err, p)
  end
end

return H
