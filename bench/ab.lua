-- bench/ab.lua -- two builds of cnnsh, one run: bench/ops.lua's elementwise
-- rows under an old and a new binary, alternated (old, new, old, new, ...)
-- so that both see the same machine load, then per op the median GB/s of
-- each and speedup = new / old (= old time / new time).  One JSON line per op:
--   {"bench":"ab","op":"gelu","old_gbps":...,"new_gbps":...,"speedup":...}
-- Usage: cnnsh bench/ab.lua OLD_CNNSH NEW_CNNSH [pattern [pairs [rounds]]]
--   pattern: which ops (a Lua pattern, as bench/ops.lua's); pairs: how many
--   alternations (default 3); rounds: bench/ops.lua's rounds (default 5).
-- Example (issue 19 point 4: main before the activations moved to vector
-- kernels against the branch after):
--   flock /tmp/cnnsh-bench.lock build/repl/cnnsh bench/ab.lua \
--     /tmp/cnnsh-main build/repl/cnnsh '^[gems][eilo][lufs]' 3

local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")
local old, new = arg[1], arg[2]
local pattern, pairs_n, rounds = arg[3] or ".", tonumber(arg[4]) or 3, tonumber(arg[5]) or 5
if not old or not new then error("usage: cnnsh bench/ab.lua OLD_CNNSH NEW_CNNSH [pattern [pairs [rounds]]]") end
local ops_lua = (arg[0]:match("^(.*)/") or ".") .. "/ops.lua"

-- runs one binary over ops.lua; appends each op's GB/s to into[op]
local function run(bin, into, order)
  local cmd = string.format("%q %q %d %q", bin, ops_lua, rounds, pattern)
  local p = assert(io.popen(cmd))
  for line in p:lines() do
    local op, gbps = line:match('"op":"([^"]+)","gbps":([%d.]+)')
    if op then
      if not into[op] then into[op] = {}; order[#order + 1] = op end
      table.insert(into[op], tonumber(gbps))
    end
  end
  assert(p:close(), cmd .. " failed")
end

local got_old, got_new, order = {}, {}, {}
for _ = 1, pairs_n do
  run(old, got_old, order)
  run(new, got_new, {})
end
for _, op in ipairs(order) do
  local o, n = B.median(got_old[op]), B.median(got_new[op] or { 0 })
  B.emit({ { "bench", "ab" }, { "op", op }, { "old_gbps", o }, { "new_gbps", n }, { "speedup", n / o } })
end
