-- timeit.lua -- timing a function for labs and the prompt (module
-- "timeit"; the shell exposes it as cnn.timeit).
--
--   stats = timeit(fn [, n | {n=, device=}])
local cnn = _G.cnn
local check = require("check")
local doc = cnn.doc or {}

local M = {}

-- The median of a list of numbers (0 for an empty list); inspect's
-- profile uses it too.
local function median(v)
  if #v == 0 then return 0 end
  local s = table.move(v, 1, #v, 1, {})
  table.sort(s)
  local m = #s // 2
  if #s % 2 == 1 then return s[m + 1] end
  return (s[m] + s[m + 1]) / 2
end

M.median = median

local function ms(s)
  if s >= 1 then return string.format("%.3f s", s) end
  if s >= 1e-3 then return string.format("%.3f ms", s * 1e3) end
  return string.format("%.2f us", s * 1e6)
end

-- Timing: a cnn.timer on the device (DESIGN.md "Timing").  Each run lies
-- between two marks: clock readings on the CPU, CUDA events on a GPU, which
-- are recorded without waiting and read in chunks of CHUNK runs (one
-- synchronization per chunk, outside the runs), so the times are the
-- device's own and runs are not serialised with the host.
local CHUNK = 256

-- Seconds of k runs of fn, appended to times from index i + 1.
local function run_chunk(fn, tm, k, times, i)
  tm:reset()
  for _ = 1, k do
    tm:mark()
    fn()
    tm:mark()
  end
  local T = tm:times()
  for j = 1, k do times[i + j] = T[2 * j] - T[2 * j - 1] end
end

-- The number of runs to fill about half a second (at least 3).
local function auto_count(fn, tm)
  local t = {}
  run_chunk(fn, tm, 1, t, 0)
  local once = math.max(t[1], 1e-7)
  return math.max(3, math.min(100000, math.floor(0.5 / once)))
end

-- The device timeit times on: opts.device, else cuda when available.
local function timeit_device(opts)
  if opts.device ~= nil then return opts.device end
  local c = cnn.cuda
  if type(c) == "table" and c.is_available and c.is_available() then return "cuda" end
  return "cpu"
end

-- timeit(fn [, n | {n=, device=}]) -> {median=, min=, max=, mean=, n=}
-- (seconds); tostring gives "median 1.234 ms, min 1.100 ms (10 runs)".
function M.timeit(fn, n)
  if type(fn) ~= "function" then check.fail("timeit", "fn", "a function", fn, 2) end
  local opts = {}
  if type(n) == "table" then
    opts = check.options("timeit", n, { "n", "device" }, 2)
    n = opts.n
  end
  if n ~= nil then n = check.integer("timeit", "n", n, 2, 1) end
  local ok, tm = pcall(cnn.timer, timeit_device(opts))
  if not ok then error("timeit: " .. (tostring(tm):gsub("^[^\n]-:%d+: ", "")), 2) end
  local _ <close> = tm
  n = n or auto_count(fn, tm)
  local times, sum = {}, 0
  fn() -- warm-up
  for i = 0, n - 1, CHUNK do run_chunk(fn, tm, math.min(CHUNK, n - i), times, i) end
  for i = 1, n do sum = sum + times[i] end
  local r = { median = median(times), min = math.min(table.unpack(times, 1, math.min(n, 4000))),
              max = math.max(table.unpack(times, 1, math.min(n, 4000))), mean = sum / n, n = n, times = times }
  for i = 4001, n do r.min, r.max = math.min(r.min, times[i]), math.max(r.max, times[i]) end
  r.text = string.format("median %s, min %s (%d runs)", ms(r.median), ms(r.min), n)
  return setmetatable(r, { __tostring = function(x) return x.text end })
end

doc[M.timeit] = [[
cnn.timeit(fn [, n | {n=, device=}]) -> stats
Runs fn() once to warm up, then n times (by default as many as fit in
about half a second, at least 3) and returns {median, min, max, mean, n}
in seconds; prints as "median 1.234 ms, min 1.100 ms (10 runs)".  Each
run is timed by a cnn.timer on `device` ('cuda' when CUDA is available,
else 'cpu'): on a GPU by CUDA events recorded around each run without
waiting, read every 256 runs, so the times are the device's own.]]

return M
