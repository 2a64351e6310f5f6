-- faults.lua -- the rank side of tests/dist/faults.sh.  Modes:
--   error      rank 1 raises an error while rank 0 waits in an all-reduce
--   kill       rank 1 kills itself (SIGKILL) while rank 0 waits
--   sigint     rank 1 gets a SIGINT (Ctrl-C) in a loop of all-reduces
--   loop DIR   every rank all-reduces forever; rank 0 writes DIR/running
--              once both are in the loop (the driver then sends Ctrl-C)
local mode, dir = arg[1], arg[2]
local rank = dist.init()
dist.barrier()
local function own_pid()
  local f = assert(io.open("/proc/self/stat"))
  local pid = f:read("n")
  f:close()
  return math.tointeger(pid)
end

if mode == "error" then
  if rank == 1 then error("a deliberate failure on rank 1") end
  dist.all_reduce(cnn.ones(4)) -- never completes: rank 1 is gone
elseif mode == "kill" then
  if rank == 1 then os.execute("kill -9 " .. own_pid()) end
  dist.all_reduce(cnn.ones(4))
elseif mode == "sigint" then
  local t = cnn.ones(16)
  -- (io.popen, not os.execute: system() ignores SIGINT in the caller)
  if rank == 1 then io.popen("kill -INT " .. own_pid()):close() end
  while true do dist.all_reduce(t, "max") end
elseif mode == "loop" then
  local t = cnn.ones(16)
  dist.all_reduce(t)
  if rank == 0 then
    local f = assert(io.open(dir .. "/running", "w"))
    f:write("running\n")
    f:close()
  end
  while true do dist.all_reduce(t, "max") end
end
error("faults.lua: unknown mode " .. tostring(mode))
