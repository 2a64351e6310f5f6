-- dist/init.lua -- the "dist" module: several processes training one model.
--
-- Design.  Each process (a "rank", 0-based as in MPI) runs the same script
-- on its own share of the data; collectives combine tensors across ranks.
-- The collectives are C (lua/dist.c over core/dist.h); the engines are
-- shared modules loaded by dist.init(): Open MPI for CPU tensors and
-- between machines (libcnn_mpi.so), NCCL for CUDA tensors
-- (libcnn_nccl.so; NCCL needs MPI to start).  Launch the ranks with
-- `mpirun -np 2 cnnsh train.lua` or `cnnsh --nproc 2 train.lua`.
--
-- Every collective checks first that every rank made the same call with
-- the same dtype and shape: a mismatch is an error on every rank naming
-- both shapes, never a hang.  Tensors may be non-contiguous or empty.
-- Reductions: 'sum', 'mean' (floating dtypes), 'max', 'min'; uint8 and
-- int64 sums wrap as C's unsigned/two's-complement arithmetic does.
--
-- Failure: when a rank's script fails (an error, Ctrl-C, os.exit with a
-- non-zero code), cnnsh prints "rank R of N failed" and calls MPI_Abort,
-- and mpirun stops every other rank; a rank that is killed is noticed by
-- mpirun, which stops the others.  os.exit is wrapped after init so that
-- os.exit(0) finalizes MPI first and any other code stops every rank.
--
-- Also here: DataLoader sharding (data.DistributedSampler, dist/sampler.lua)
-- and nn.DistributedDataParallel / nn.SyncBatchNorm (nn/distributed.lua).
local cnn = _G.cnn
local C = cnn.dist
local doc = cnn.doc or {}

local dist = {}

local function init_options(opts)
  if opts == nil then return {} end
  if type(opts) == "string" then return { backend = opts } end
  if type(opts) ~= "table" then error("dist.init: expected an options table", 3) end
  for k in pairs(opts) do
    if k ~= "backend" and k ~= "device" then
      error("dist.init: unknown option '" .. tostring(k) .. "' (options: backend, device)", 3)
    end
  end
  return opts
end

-- The default engine: nccl when the tensors will live on CUDA.
local function default_backend(opts)
  local dev = opts.device
  if dev ~= nil and type(dev) ~= "string" then error("dist.init: device must be a string", 3) end
  if dev and dev:match("^cuda") then return "nccl" end
  return "mpi"
end

-- os.exit after init: 0/true finalizes, anything else stops every rank.
local function wrap_exit()
  local exit = os.exit
  os.exit = function(code, close)
    local status = (code == nil or code == true) and 0 or (code == false and 1 or code)
    io.stdout:flush()
    if status == 0 then collectgarbage() end -- forgotten works finish while MPI runs
    status = C.shutdown(math.tointeger(status) or 1)
    return exit(status, close)
  end
end

function dist.init(opts)
  opts = init_options(opts)
  local backend = opts.backend or default_backend(opts)
  if backend ~= "mpi" and backend ~= "nccl" then
    error("dist.init: unknown backend '" .. tostring(backend) .. "' (expected 'mpi' or 'nccl')", 2)
  end
  local first = not C.is_initialized()
  C.init(backend)
  if first then wrap_exit() end
  return dist.rank(), dist.world_size()
end

function dist.is_initialized() return C.is_initialized() end
function dist.backend() return C.backend() end

-- Before init these answer as a single process would (rank 0 of 1), so a
-- script written for several ranks also runs alone.
function dist.rank() return (C.info()) end
function dist.world_size() return select(2, C.info()) end
function dist.local_rank() return select(3, C.info()) end
function dist.local_world_size() return select(4, C.info()) end
function dist.is_main() return dist.rank() == 0 end

dist.all_reduce = C.all_reduce
dist.all_reduce_async = C.all_reduce_async
dist.broadcast = C.broadcast
dist.all_gather = C.all_gather
dist.reduce_scatter = C.reduce_scatter
dist.barrier = C.barrier
dist.abort = C.abort

-- dist.print(...): print on rank 0 only.
function dist.print(...)
  if dist.rank() == 0 then print(...) end
end

doc[dist] = [[
dist -- data-parallel training over several processes (Open MPI, NCCL).
  mpirun -np 2 cnnsh train.lua        or    cnnsh --nproc 2 train.lua
  dist.init()                          -- {backend = 'mpi' | 'nccl'}
  model = nn.DistributedDataParallel(net)
  loader = data.DataLoader(ds, {batch_size = 64, shuffle = true, distributed = true})
  if dist.is_main() then cnn.save("ckpt.safetensors", net:state_dict()) end
rank() (0-based), world_size(), local_rank(), is_main(), is_initialized(), barrier().
Collectives (every rank calls them alike; shapes must agree):
  all_reduce(t, 'sum'|'mean'|'max'|'min') -> t, broadcast(t, root) -> t,
  all_gather(t) -> world x t's shape, reduce_scatter(t, op) -> t:size(1)/world x ...,
  all_reduce_async(t, op) -> work (work:wait() -> t).]]
doc[dist.init] = "dist.init{backend = 'mpi' | 'nccl', device =} -> rank, world_size\nStarts MPI (and NCCL); 'nccl' is the default when device is 'cuda'."
doc[dist.all_reduce] = "dist.all_reduce(t [, op = 'sum']) -> t\nIn place: t becomes the reduction over every rank's t (sum, mean, max, min)."
doc[dist.broadcast] = "dist.broadcast(t [, root = 0]) -> t\nIn place: every rank's t becomes root's t."
doc[dist.all_gather] = "dist.all_gather(t) -> tensor\nworld x t's shape: row r+1 is rank r's t."
doc[dist.reduce_scatter] = "dist.reduce_scatter(t [, op = 'sum']) -> tensor\nt's first dimension is world * k; rank r gets block r+1 (k rows) of the reduction."
doc[dist.all_reduce_async] = "dist.all_reduce_async(t [, op]) -> work\nStarts an all-reduce without waiting; work:wait() finishes it and returns t."
doc[dist.barrier] = "dist.barrier()\nWaits until every rank gets here."
doc[dist.is_main] = "dist.is_main() -> boolean\nTrue on rank 0 (and without dist): the rank that prints and saves."

return dist
