-- labcheck.lua -- the checker of the teaching labs (module "labcheck"):
-- `cnnsh --check labs/03-conv.lua` runs labs/checks/03-conv.lua against
-- the student's file and prints, per exercise, passed or failed with a
-- hint.  labs/README.md is the teacher's side; this is the machinery.
--
-- A checks file returns
--   { title = "...", limits = {seconds =, memory_mb =},
--     exercises = { {name = "im2col", run = function(lab, t) ... end,
--                    seconds =, memory_mb =}, ... } }
-- where `lab` is the table the student's file returns and `t` this
-- module's assertions (t.fn, t.tensor, t.number, t.that, t.fail, t.note,
-- t.skip).  A failed assertion raises a hint that says what is wrong: the
-- shape expected and got, the value off by how much and where, the
-- gradient of which input.  An error in the student's code becomes "your
-- code raised an error: <message> (at file:line)"; one whose message holds
-- "TODO" becomes "not done yet: ...".  Never a raw traceback.
--
-- Design.  The parent process only reads files and prints: it never runs
-- a tensor op, so it may fork safely.  Each exercise runs in a child
-- (repl/check.c's `isolate`, under the exercise's time and memory limits)
-- that loads the student's file afresh, seeds the generator with 0, runs
-- the exercise and answers one line of status and a hint.  So exercises
-- are independent (one that crashes, loops or eats memory fails alone) and
-- deterministic.  The exit status is the number of failed exercises;
-- skipped ones (a GPU part without a GPU) do not count.
local cnn = _G.cnn
local fmt = require("fmt")

local M = {}

local DEFAULT_LIMITS = { seconds = 60, memory_mb = 2048 }

-- ---- assertions for checks files ---------------------------------------------------------

-- A failed check raises this table; anything else raised is an error.
local Failure = {}
Failure.__index = Failure

local function raise(kind, text) error(setmetatable({ kind = kind, text = text }, Failure), 0) end

--- t.fail(hint): the exercise fails with this hint.
function M.fail(hint) raise("fail", hint) end

--- t.skip(why): the exercise cannot run here (no GPU): reported, not failed.
function M.skip(why) raise("skip", why) end

--- t.that(cond, hint): fails with hint unless cond.
function M.that(cond, hint)
  if not cond then raise("fail", hint) end
end

local notes = {}
--- t.note(text): a remark printed after "passed" (a measurement, a skipped part).
function M.note(text) notes[#notes + 1] = text end

--- t.fn(lab, name): the student's function lab[name], or a failure naming it.
function M.fn(lab, name)
  local f = lab[name]
  if type(f) ~= "function" then
    raise("fail", string.format("lab.%s is %s, expected a function (was it renamed or removed?)",
      name, f == nil and "missing" or "a " .. type(f)))
  end
  return f
end

local function index_str(flat, shape)
  return "[" .. table.concat(fmt.unflatten(flat, shape), ",") .. "]"
end

local function check_shape(got, want, what)
  if not cnn.is_tensor(got) then
    raise("fail", string.format("%s: expected a tensor of shape %s, got %s", what,
      fmt.shape_str(want), got == nil and "nil" or "a " .. type(got)))
  end
  if fmt.shape_str(got) ~= fmt.shape_str(want) then
    raise("fail", string.format("%s: shape expected %s, got %s", what, fmt.shape_str(want),
      fmt.shape_str(got)))
  end
end

-- The first position where got is NaN and want is not, or nil.
local function first_nan(g, w)
  local mask = g:ne(g):double() - w:ne(w):double()
  if mask:numel() == 0 or mask:max():item() <= 0 then return nil end
  local _, i = mask:reshape(-1):max(1)
  return i:item()
end

--- t.tensor(got, want, what [, {atol =, rtol =}]): shape, then values within
--- |got - want| <= atol + rtol * |want| (defaults 1e-5, 1e-4), else a hint
--- naming the worst element, by how much, and how many are off.
function M.tensor(got, want, what, tol)
  tol = tol or {}
  check_shape(got, want, what)
  local g, w = got:detach():double(), want:detach():double()
  local bad_nan = first_nan(g, w)
  if bad_nan then
    raise("fail", string.format("%s: got NaN at %s (expected %.6g)", what,
      index_str(bad_nan, got.shape), w:reshape(-1)[bad_nan]:item()))
  end
  local atol, rtol = tol.atol or 1e-5, tol.rtol or 1e-4
  local excess = (g - w):abs() - w:abs():mul(rtol):add(atol)
  if excess:numel() == 0 or excess:max():item() <= 0 then return end
  local nbad = excess:gt(0):sum():item()
  local diff = (g - w):abs():reshape(-1)
  local worst, i = diff:max(1)
  i = i:item()
  raise("fail", string.format("%s: value off by %.3g at %s (got %.6g, expected %.6g); %d of %d elements are off",
    what, worst:item(), index_str(i, got.shape), g:reshape(-1)[i]:item(), w:reshape(-1)[i]:item(),
    nbad, got:numel()))
end

--- t.number(got, want, what [, {atol =, rtol =}]): a number close to want.
function M.number(got, want, what, tol)
  tol = tol or {}
  if cnn.is_tensor(got) and got:numel() == 1 then got = got:item() end
  if type(got) ~= "number" then
    raise("fail", string.format("%s: expected a number near %.6g, got %s", what, want,
      got == nil and "nil" or "a " .. type(got)))
  end
  local atol, rtol = tol.atol or 1e-6, tol.rtol or 1e-4
  if not (math.abs(got - want) <= atol + rtol * math.abs(want)) then
    raise("fail", string.format("%s: expected %.6g, got %.6g (off by %.3g)", what, want, got,
      math.abs(got - want)))
  end
end

--- t.grads(got, want, names, what [, tol]): each gradient of a list against
--- the reference; a failure says which input's gradient is wrong.
function M.grads(got, want, names, what, tol)
  if type(got) ~= "table" or cnn.is_tensor(got) then
    raise("fail", string.format("%s: expected a list of %d gradients {%s}, got %s", what,
      #names, table.concat(names, ", "), got == nil and "nil" or "a " .. type(got)))
  end
  for i, name in ipairs(names) do
    M.tensor(got[i], want[i], string.format("%s: gradient with respect to %s (input %d)", what, name, i), tol)
  end
end

-- ---- the child: one exercise ---------------------------------------------------------------

-- The innermost line of the student's file on the stack, or nil.
local function student_line(path)
  for level = 4, 200 do
    local info = debug.getinfo(level, "Sl")
    if info == nil then return nil end
    if info.source == "@" .. path and info.currentline > 0 then return info.currentline end
  end
end

-- An error raised by the student's code, as a hint with its place:
-- "not done yet: <what> (TODO at file:12)" for a TODO still there, else
-- "your code raised an error: <message> (at file:12)".
local function error_hint(err, path)
  local msg = tostring(err)
  local file, line, text = msg:match("^(.-):(%d+): (.*)$")
  if file ~= path then file, line, text = path, student_line(path), msg end
  local todo = text:match("^TODO:? ?(.*)$")
  if todo then return string.format("not done yet: %s (TODO at %s:%s)", todo, path, line or "?") end
  local where = line and string.format(" (at %s:%s)", path, line) or ""
  return "your code raised an error: " .. text .. where
end

local function handler(path)
  return function(err)
    if getmetatable(err) == Failure then return err end
    return { kind = "fail", text = error_hint(err, path) }
  end
end

local function load_lab(path)
  local chunk, err = loadfile(path)
  if not chunk then raise("fail", "your file does not compile: " .. err) end
  local lab = chunk()
  if type(lab) ~= "table" then
    raise("fail", "your file must end with `return lab` (it returned " .. type(lab) .. ")")
  end
  return lab
end

-- Runs exercise ex against the file at path; the answer for the parent.
local function run_exercise(path, ex)
  cnn.manual_seed(0)
  local ok, res = xpcall(function()
    ex.run(load_lab(path), M)
  end, handler(path))
  if ok then return "PASS\n" .. table.concat(notes, "; ") end
  return (res.kind == "skip" and "SKIP\n" or "FAIL\n") .. res.text
end

-- ---- the parent: finding, running, reporting --------------------------------------------

local function readable(path)
  local f = io.open(path, "r")
  if f == nil then return false end
  local ok = f:read(0) ~= nil or f:read("a") == ""
  f:close()
  return ok
end

local function dirname(path)
  return path:match("^(.*)/[^/]*$") or "."
end

-- The checks file for the lab file `file`: --checks (a file, or a folder
-- holding one of the same name), checks/ beside the file or one folder
-- up (labs/solutions/x.lua -> labs/checks/x.lua), then the source tree's.
local function find_checks(opts)
  local base = opts.file:match("[^/]*$")
  local tries = {}
  if opts.checks then
    tries[1] = opts.checks:match("%.lua$") and opts.checks or opts.checks .. "/" .. base
  else
    local dir = dirname(opts.file)
    tries = { dir .. "/checks/" .. base, dir .. "/../checks/" .. base, opts.default_checks .. "/" .. base }
  end
  for _, p in ipairs(tries) do
    if readable(p) then return (p:gsub("[^/]+/%.%./", "")) end
  end
  return nil, string.format("no checks for %s (looked for %s)", opts.file, table.concat(tries, ", "))
end

local function load_spec(path)
  local spec = dofile(path)
  assert(type(spec) == "table" and type(spec.exercises) == "table",
    path .. ": a checks file returns {exercises = {...}}")
  for i, ex in ipairs(spec.exercises) do
    assert(type(ex.name) == "string" and type(ex.run) == "function",
      string.format("%s: exercise %d needs a name and a run function", path, i))
  end
  return spec
end

-- An exercise's limit: its own, else its lab's, else the default; times
-- CNNSH_CHECK_SCALE (for slow machines and sanitizer builds).
local function limit(spec, ex, key)
  local scale = tonumber(os.getenv("CNNSH_CHECK_SCALE") or "") or 1
  return (ex[key] or (spec.limits or {})[key] or DEFAULT_LIMITS[key]) * scale
end

-- The child's answer (or its death) as {status = "passed" | "failed" |
-- "skipped", hint =, seconds =}.
local function verdict(answer, info, spec, ex)
  local status, text = answer:match("^(%u+)\n(.*)$")
  local r = { seconds = info.seconds, cpu_seconds = info.cpu_seconds }
  if info.outcome == "ok" and status then
    r.status = ({ PASS = "passed", SKIP = "skipped" })[status] or "failed"
    r.hint = text ~= "" and text or nil
  elseif info.outcome == "time" then
    r.status, r.hint = "failed", string.format(
      "stopped after %g s of CPU time, the time limit (an endless loop, or far too much work?)",
      limit(spec, ex, "seconds"))
  elseif info.outcome == "wall" then
    r.status, r.hint = "failed", string.format(
      "stopped after %.0f s without finishing or computing (waiting for input?)", info.seconds)
  elseif info.outcome == "memory" then
    r.status, r.hint = "failed", string.format(
      "stopped: it used more than %g MB of memory, the limit (a huge tensor, or a table that never stops growing?)",
      limit(spec, ex, "memory_mb"))
  elseif info.outcome == "signal" then
    r.status, r.hint = "failed", "crashed (" .. tostring(info.signal) .. ")"
  else
    r.status, r.hint = "failed", string.format(
      "crashed: the process ended (exit status %s) before the exercise finished (os.exit?)",
      tostring(info.exit_status))
  end
  return r
end

local function run_all(opts, spec, compile_error)
  local results = {}
  for i, ex in ipairs(spec.exercises) do
    if compile_error then
      results[i] = { status = "failed", hint = "your file does not compile: " .. compile_error, seconds = 0,
                     cpu_seconds = 0 }
    else
      local answer, info = opts.isolate(function() return run_exercise(opts.file, ex) end,
        { seconds = limit(spec, ex, "seconds"), memory_mb = limit(spec, ex, "memory_mb"), quiet = opts.json })
      results[i] = verdict(answer, info, spec, ex)
    end
    results[i].name = ex.name
    if not opts.json then M.print_result(i, results[i]) end
  end
  return results
end

local function json_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    local named = { ['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\t'] = '\\t', ['\r'] = '\\r' }
    return named[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end
M.json_string = json_string

local function json_report(opts, checks, results, failed, err)
  local items = {}
  for i, r in ipairs(results) do
    items[i] = string.format('{"name":%s,"status":%s,"hint":%s,"seconds":%.3f,"cpu_seconds":%.3f}',
      json_string(r.name), json_string(r.status), r.hint and json_string(r.hint) or "null", r.seconds, r.cpu_seconds)
  end
  local head = string.format('{"file":%s,"checks":%s', json_string(opts.file),
    checks and json_string(checks) or "null")
  if err then return head .. ',"error":' .. json_string(err) .. "}" end
  return string.format('%s,"passed":%d,"failed":%d,"exercises":[%s]}', head,
    #results - failed - M.count(results, "skipped"), failed, table.concat(items, ","))
end

function M.count(results, status)
  local n = 0
  for _, r in ipairs(results) do
    if r.status == status then n = n + 1 end
  end
  return n
end

function M.print_result(i, r)
  local mark = ({ passed = "passed", skipped = "skipped", failed = "FAILED" })[r.status]
  local line = string.format("%2d %-22s %s (%.1f s)", i, r.name, mark, r.seconds)
  if r.hint then line = line .. "\n     " .. r.hint:gsub("\n", "\n     ") end
  print(line)
  io.stdout:flush()
end

local function compile_error(path)
  local chunk, err = loadfile(path)
  if chunk then return nil end
  return err
end

--- labcheck.main{file =, checks =, json =, default_checks =, isolate =}
--- runs the checks and returns the number of failed exercises (2 when
--- they cannot run: no checks file, the student's file unreadable).
function M.main(opts)
  local checks, err = find_checks(opts)
  if checks and not readable(opts.file) then checks, err = nil, "cannot read " .. opts.file end
  if not checks then
    if opts.json then print(json_report(opts, nil, {}, 0, err)) end
    io.stderr:write("cnnsh --check: ", err, "\n")
    return 2
  end
  local spec = load_spec(checks)
  if not opts.json then print(string.format("%s: %s (checks: %s)", opts.file, spec.title or "", checks)) end
  local results = run_all(opts, spec, compile_error(opts.file))
  local failed = M.count(results, "failed")
  if opts.json then
    print(json_report(opts, checks, results, failed))
  else
    print(string.format("%d of %d exercises passed%s", #results - failed - M.count(results, "skipped"),
      #results, failed > 0 and string.format(", %d failed", failed) or ""))
  end
  return failed
end

return M
