-- lazy_load.lua -- one process, no mpirun: Open MPI is mapped only after
-- dist.init (start-up and `require 'dist'` leave it alone); before init the
-- rank facts answer as a single process and collectives ask for init;
-- after init (MPI's singleton mode) a world of 1 reduces to itself.
local H = dofile(arg[0]:match("^(.*)/[^/]*$") .. "/helpers.lua")

local function mpi_mapped()
  local f = assert(io.open("/proc/self/maps"))
  local maps = f:read("a")
  f:close()
  return maps:find("libmpi", 1, true) ~= nil
end

H.check(not mpi_mapped(), "libmpi is mapped at start-up")
H.check(dist.rank() == 0 and dist.world_size() == 1 and dist.is_main(), "before init: rank 0 of 1")
H.check(not dist.is_initialized(), "initialised before init")
H.check(not mpi_mapped(), "requiring dist maps libmpi")
H.expect_error("before init", function() dist.all_reduce(cnn.ones(2)) end,
  { "all_reduce: call dist.init() first" })
H.expect_error("bad backend", function() dist.init{ backend = "gloo" } end,
  { "dist.init: unknown backend 'gloo'" })
H.expect_error("bad option", function() dist.init{ world = 2 } end, { "unknown option 'world'" })
if not cnn.cuda.is_available() then
  H.expect_error("nccl without CUDA", function() dist.init{ backend = "nccl" } end,
    { "dist.init{backend = 'nccl'}: cuda is not available" })
end
H.check(not mpi_mapped(), "failed init maps libmpi")

local r, w = dist.init()
H.check(r == 0 and w == 1 and dist.is_initialized() and dist.backend() == "mpi", "singleton init")
H.check(mpi_mapped(), "libmpi not mapped after init")
H.check(dist.init() == 0, "init twice is harmless")
local t = cnn.tensor({ 1.5, -2, 3 })
dist.all_reduce(t, "mean")
H.expect("world of one", t, { 1.5, -2, 3 }, 0)
H.check(dist.all_gather(t):size(1) == 1, "all_gather of one")
print("lazy_load: ok")
