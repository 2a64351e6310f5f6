-- tests/labs/run_checks.lua -- the tests of the teaching labs and of
-- `cnnsh --check` (run inside cnnsh; it starts cnnsh --check as a child):
--
--   cnnsh run_checks.lua CNNSH LABS_DIR solution NAME
--       labs/solutions/NAME.lua: exit 0, every exercise passed, JSON valid
--   cnnsh run_checks.lua CNNSH LABS_DIR untouched NAME
--       labs/NAME.lua as shipped: exit status = the number of exercises,
--       every one failed with a hint, no traceback anywhere
--   cnnsh run_checks.lua CNNSH TESTS_DIR faults
--       tests/labs/faulty.lua: an endless loop, a SIGSEGV, a memory hog, an
--       absurd allocation, os.exit, a blocked child and an error each fail with the hint
--       that names them; a correct exercise passes, a skipped one skips;
--       a file that does not compile and a lab without checks
--
-- Exercises reported "skipped" (Fashion-MNIST missing) make the test exit
-- 77 (CTest: skipped) after everything else was checked.
local cnnsh, dir, mode, name = arg[1], arg[2], arg[3], arg[4]
assert(cnnsh and dir and mode, "usage: run_checks.lua CNNSH DIR solution|untouched NAME | faults")
package.path = debug.getinfo(1, "S").source:match("^@(.*/)") .. "?.lua;" .. package.path
local json = require("json")

local failures = 0
local function expect(cond, what)
  if not cond then
    failures = failures + 1
    io.stderr:write("FAILED: ", what, "\n")
  end
end

local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- Runs cnnsh --check with args; returns exit status, stdout, stderr.
local function check(args)
  local err = os.tmpname()
  local p = assert(io.popen(string.format("%s --check %s 2>%s", cnnsh, args, err)))
  local out = p:read("a")
  local _, _, code = p:close()
  local stderr = slurp(err)
  os.remove(err)
  return code, out, stderr
end

local function no_traceback(text, what)
  expect(not text:find("stack traceback", 1, true) and not text:find("labcheck.lua", 1, true),
    what .. ": the output shows a traceback or the checker's internals:\n" .. text)
end

local function report_json(args, what)
  local code, out, err = check("--json " .. args)
  no_traceback(out .. err, what)
  local ok, rep = pcall(json.decode, out)
  expect(ok, what .. ": --json printed no valid JSON object: " .. tostring(rep) .. "\n" .. out)
  return code, ok and rep or { exercises = {} }, out
end

local function exercise_count(checks_file) return #dofile(checks_file).exercises end

local function count(rep, status)
  local n = 0
  for _, ex in ipairs(rep.exercises) do
    if ex.status == status then n = n + 1 end
  end
  return n
end

local function run_lab(which)
  local file = which == "solution" and dir .. "/solutions/" .. name .. ".lua" or dir .. "/" .. name .. ".lua"
  local n = exercise_count(dir .. "/checks/" .. name .. ".lua")
  local code, rep, out = report_json(file, file)
  local skipped = count(rep, "skipped")
  local want = which == "solution" and "passed" or "failed"
  expect(#rep.exercises == n, string.format("%s: %d exercises reported, the checks have %d", file, #rep.exercises, n))
  expect(count(rep, want) + skipped == n, string.format("%s: expected every exercise %s:\n%s", file, want, out))
  expect(code == count(rep, "failed") and rep.failed == code,
    string.format("%s: exit status %s, but %d exercises failed", file, tostring(code), count(rep, "failed")))
  for _, ex in ipairs(rep.exercises) do
    if ex.status == "failed" then
      expect(type(ex.hint) == "string" and #ex.hint > 10, file .. ": exercise " .. ex.name .. " failed without a hint")
    end
  end
  if which == "untouched" then -- quick: the text report too (the solutions' work is not repeated)
    local tcode, text = check(file)
    expect(tcode == code, string.format("%s: text mode exited %s, --json %s", file, tostring(tcode), tostring(code)))
    no_traceback(text, file .. " (text)")
  end
  return skipped
end

-- faults: each misbehaving exercise and the hint it must get (limits as
-- in tests/labs/checks/faulty.lua, times CNNSH_CHECK_SCALE).
local SCALE = tonumber(os.getenv("CNNSH_CHECK_SCALE") or "") or 1
local FAULT_HINTS = {
  correct = { "passed" },
  endless_loop = { "failed", string.format("stopped after %g s of CPU time, the time limit", 1 * SCALE) },
  segfault = { "failed", "crashed" },
  memory_hog = { "failed", string.format("more than %g MB of memory", 512 * SCALE) },
  absurd_size = { "failed", "your code raised an error: .*zeros" },
  exits = { "failed", "crashed: the process ended %(exit status 3%)" },
  raises = { "failed", "your code raised an error: .*nil value.*faulty%.lua:36" },
  blocked = { "failed", "stopped after %d+ s without finishing or computing" },
  skipped = { "skipped", "no such device here" },
}

local function run_faults()
  local file = dir .. "/labs/faulty.lua"
  local code, rep, out = report_json(file, file)
  for _, ex in ipairs(rep.exercises) do
    local want = FAULT_HINTS[ex.name]
    expect(want and ex.status == want[1], string.format("%s: %s is %s, expected %s", file, ex.name, ex.status,
      want and want[1]))
    if want and want[2] then
      expect(type(ex.hint) == "string" and ex.hint:find(want[2]) ~= nil,
        string.format("%s: the hint of %s should match %q, got %q", file, ex.name, want[2], tostring(ex.hint)))
    end
  end
  expect(#rep.exercises == 9 and code == 7, string.format("faulty.lua: exit status %s, expected 7 failed\n%s",
    tostring(code), out))
  -- a file that does not compile: every exercise fails with the syntax error
  local bad = os.tmpname() .. "_faulty.lua"
  local f = assert(io.open(bad, "w"))
  f:write("local lab = {\nfunction lab.x() end\nreturn lab\n")
  f:close()
  local bcode, brep = report_json(bad .. " --checks " .. dir .. "/labs/checks/faulty.lua", "syntax error")
  expect(bcode == 9 and count(brep, "failed") == 9 and tostring(brep.exercises[1].hint):find("does not compile"),
    "a file that does not compile: every exercise should fail with the compiler's message")
  os.remove(bad)
  -- no checks for the file: exit 2, the reason on stderr, an error object in JSON
  local ncode, nout, nerr = check("--json " .. dir .. "/labs/run_checks.lua")
  expect(ncode == 2 and nerr:find("no checks for", 1, true) and json.decode(nout).error,
    "a lab without checks: exit 2 with 'no checks for' on stderr and a JSON error object")
  return 0
end

local skipped = mode == "faults" and run_faults() or run_lab(mode)
if failures > 0 then os.exit(1) end
if skipped > 0 then
  print("skipped exercises (missing data): reported to CTest as skipped")
  os.exit(77)
end
print("ok")
