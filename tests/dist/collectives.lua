-- collectives.lua -- every collective on every dtype, contiguous,
-- non-contiguous and empty, against sums/extrema computed in plain Lua from
-- the formula each rank used to fill its tensor; then the errors: shapes,
-- dtypes, collectives or arguments that differ between ranks fail on every
-- rank naming both (no hang), and bad arguments fail with the op's name.
-- Run by ctest as `mpirun -np 2 cnnsh collectives.lua`; with `nccl` the
-- tensors live on CUDA (one GPU per rank) and NCCL moves them, with
-- `mpi-cuda` they live on CUDA and MPI moves them through host memory.
-- Those two exit 77 (skipped) without enough GPUs.
local H = dofile(arg[0]:match("^(.*)/[^/]*$") .. "/helpers.lua")
local mode = arg[1] or "mpi"
local device = mode == "mpi" and "cpu" or "cuda"
if device == "cuda" then
  local world_env = tonumber(os.getenv("OMPI_COMM_WORLD_SIZE") or "1")
  if not cnn.cuda.is_available() or cnn.cuda.device_count() < (mode == "nccl" and world_env or 1) then
    print("skipped: needs " .. world_env .. " CUDA device(s)")
    os.exit(77)
  end
end
local rank, world = dist.init{ backend = mode == "nccl" and "nccl" or "mpi" }
H.check(world >= 2 or device == "cuda", "world size %d: run under mpirun -np 2", world)

local DTYPES = { "float32", "float64", "int64", "uint8", "float16", "bfloat16" }
local FLOAT = { float32 = true, float64 = true, float16 = true, bfloat16 = true }

-- the value rank r puts at (row-major) position k; small integers, exact in
-- every dtype; uint8 sums wrap, int64 uses bits beyond a double's 53
local function value(dt, r, k)
  if dt == "uint8" then return (r * 101 + k * 37 + 60) % 256 end
  if dt == "int64" then return (1 << 60) + r * 1000 + k * (r % 2 == 0 and 3 or -5) end
  return (r + 1) * k - 7 * r - 4
end

local function wrap(dt, v) return dt == "uint8" and v % 256 or v end

-- rank r's tensor: contiguous rows x cols, or the same values seen through a
-- transposed view (non-contiguous)
local function make(dt, r, rows, cols, strided)
  local t = {}
  for i = 1, rows do
    t[i] = {}
    for j = 1, cols do t[i][j] = value(dt, r, (i - 1) * cols + j) end
  end
  if not strided then return cnn.tensor(t, dt == "int64" and "int64" or "float64"):to(dt):to(device) end
  local tt = {}
  for j = 1, cols do
    tt[j] = {}
    for i = 1, rows do tt[j][i] = t[i][j] end
  end
  local base = cnn.tensor(tt, dt == "int64" and "int64" or "float64"):to(dt):to(device)
  local v = base:t()
  H.check(not v:is_contiguous(), "view should be strided")
  return v
end

local function reduce(dt, op, n)
  local out = {}
  for k = 1, n do
    local acc = value(dt, 0, k)
    for r = 1, world - 1 do
      local v = value(dt, r, k)
      if op == "sum" or op == "mean" then acc = acc + v
      elseif op == "max" then acc = math.max(acc, v)
      else acc = math.min(acc, v) end
    end
    if op == "mean" then acc = acc / world end
    out[k] = wrap(dt, acc)
  end
  return out
end

local function tol(dt) return (dt == "float16" or dt == "bfloat16") and 1e-3 or 0 end

for _, dt in ipairs(DTYPES) do
  for _, strided in ipairs({ false, true }) do
    local what = dt .. (strided and " strided" or "")
    for _, op in ipairs({ "sum", "mean", "max", "min" }) do
      if op ~= "mean" or FLOAT[dt] then
        local t = make(dt, rank, 3, 5, strided)
        local r = dist.all_reduce(t, op)
        H.check(r == t, "all_reduce returns its tensor")
        H.check(t.dtype == dt and t.device:sub(1, #device) == device, "all_reduce keeps dtype and device")
        H.expect("all_reduce " .. op .. " " .. what, t, reduce(dt, op, 15), tol(dt))
      end
    end
    -- started without waiting, finished by wait()
    local a = make(dt, rank, 3, 5, strided)
    local work = dist.all_reduce_async(a, "max")
    H.check(work:wait() == a, "work:wait() returns the tensor")
    H.expect("all_reduce_async max " .. what, a, reduce(dt, "max", 15), tol(dt))

    local b = make(dt, rank, 3, 5, strided)
    dist.broadcast(b, world - 1)
    local want = {}
    for k = 1, 15 do want[k] = value(dt, world - 1, k) end
    H.expect("broadcast " .. what, b, want, 0)

    local g = dist.all_gather(make(dt, rank, 3, 5, strided))
    H.check(g:dim() == 3 and g:size(1) == world and g:size(2) == 3 and g:size(3) == 5,
            "all_gather shape %s", table.concat(g.shape, "x"))
    want = {}
    for r = 0, world - 1 do
      for k = 1, 15 do want[#want + 1] = value(dt, r, k) end
    end
    H.expect("all_gather " .. what, g, want, 0)

    -- reduce_scatter: world * 3 rows of 5; this rank gets rows 3r+1..3r+3
    for _, op in ipairs({ "sum", "min" }) do
      local s = dist.reduce_scatter(make(dt, rank, 3 * world, 5, strided), op)
      H.check(s:size(1) == 3 and s:size(2) == 5 and s.dtype == dt, "reduce_scatter shape")
      local full = reduce(dt, op, 15 * world)
      want = {}
      for k = 1, 15 do want[k] = full[rank * 15 + k] end
      H.expect("reduce_scatter " .. op .. " " .. what, s, want, tol(dt))
    end
  end
  -- empty tensors: nothing moves, shapes come back right
  local e = cnn.zeros({ 0, 4 }, dt):to(device)
  H.check(dist.all_reduce(e, "max"):numel() == 0, "empty all_reduce")
  dist.broadcast(e, 0)
  local ge = dist.all_gather(e)
  H.check(ge:dim() == 3 and ge:size(1) == world and ge:numel() == 0, "empty all_gather")
  local se = dist.reduce_scatter(cnn.zeros({ 0, 3 }, dt):to(device))
  H.check(se:size(1) == 0 and se:size(2) == 3, "empty reduce_scatter")
end

-- a 0-d tensor and a mean of floats that do not divide exactly
local s = cnn.tensor(rank + 0.25, "float64"):to(device)
dist.all_reduce(s, "mean")
local m = 0
for r = 0, world - 1 do m = m + r + 0.25 end
H.expect("0-d mean", s, { m / world }, 1e-15)

if world < 2 then -- one GPU: the disagreements need two ranks
  if rank == 0 then print("collectives (" .. mode .. "): ok on 1 rank") end
  return
end
-- ---- disagreements: every rank gets the error, and the job goes on ------------------
H.expect_error("shapes differ", function()
  dist.all_reduce(rank == 0 and cnn.zeros(3, 4) or cnn.zeros(4, 3))
end, { "all_reduce: tensors differ between ranks", "rank 0 has 3x4 float32",
       "rank 1 has 4x3 float32" })
H.expect_error("dtypes differ", function()
  dist.all_gather(cnn.zeros({ 2 }, rank == 0 and "float32" or "int64"))
end, { "all_gather: tensors differ", "rank 0 has 2 float32", "rank 1 has 2 int64" })
H.expect_error("collectives differ", function()
  if rank == 0 then dist.all_reduce(cnn.zeros(2)) else dist.broadcast(cnn.zeros(2), 0) end
end, { "ranks call different collectives", "rank 0 calls all_reduce", "rank 1 calls broadcast" })
H.expect_error("roots differ", function() dist.broadcast(cnn.zeros(2), rank) end,
  { "broadcast: ranks disagree", "rank 0 passes root 0", "rank 1 passes root 1" })
H.expect_error("ops differ", function() dist.all_reduce(cnn.zeros(2), rank == 0 and "sum" or "max") end,
  { "rank 0 passes 'sum'", "rank 1 passes 'max'" })
H.expect_error("barrier against a collective", function()
  if rank == 0 then dist.barrier() else dist.all_reduce(cnn.zeros(1)) end
end, { "ranks call different collectives" })

-- ---- bad arguments --------------------------------------------------------------------
H.expect_error("mean of int64", function() dist.all_reduce(cnn.zeros({ 2 }, "int64"), "mean") end,
  { "all_reduce: 'mean' needs a floating dtype, got int64" })
H.expect_error("unknown op", function() dist.all_reduce(cnn.zeros(2), "prod") end, { "prod" })
H.expect_error("root out of range", function() dist.broadcast(cnn.zeros(2), world) end,
  { "broadcast: root " .. world .. " out of range" })
H.expect_error("scatter rows", function() dist.reduce_scatter(cnn.zeros(2 * world + 1, 2)) end,
  { "reduce_scatter: the first dimension of " .. (2 * world + 1) .. "x2", "multiple of the world size" })
H.expect_error("not a tensor", function() dist.all_reduce({}) end, { "cnn.Tensor expected" })

-- after all that, collectives still line up
local ok = cnn.ones(4)
dist.all_reduce(ok)
H.expect("after errors", ok, { world, world, world, world }, 0)
dist.barrier()
-- a started all-reduce never waited for: finished when Lua closes, before
-- MPI is finalized (the job must still exit 0)
forgotten_work = dist.all_reduce_async(cnn.ones(8))
if rank == 0 then print("collectives (" .. mode .. "): ok on " .. world .. " ranks") end
