-- bench/gpu.lua -- the CUDA backend's speed, as ratios measured in one run.
--
-- One JSON line per figure; every time is the median of several runs read
-- from CUDA events (cnn.timer('cuda')), so queued work is counted, not the
-- launch alone.  The reference is this GPU's float32 GEMM rate (cuBLAS,
-- n x n x n) measured first:
--   sgemm           TFLOP/s of the reference
--   hgemm           float16 GEMM under cnn.autocast, ratio to sgemm
--   conv            per layer: cuDNN forward / backward GFLOP/s and ratio to
--                   sgemm; the teaching kernel (cnn.backends.conv =
--                   'direct') forward, ratio to cuDNN; autocast float16
--                   forward, speed-up over float32
--   copy            host to device GB/s: pageable, pinned, pinned non_blocking
--   train           images/s of the example network (float32, and under
--                   autocast float16 with a GradScaler)
-- Without a usable CUDA device it prints one line {"bench":"gpu","skipped":...}
-- and exits 0.  --quick: small sizes (for the fake device of the tests).
-- Usage: cnnsh bench/gpu.lua [--quick]

local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local quick = arg and arg[1] == "--quick"
local ok, why = cnn.cuda.is_available()
if not ok then
  print(string.format('{"bench":"gpu","skipped":%q}', tostring(why)))
  return
end

-- which device (a fake one in the tests reports itself here: its figures mean nothing)
local device = cnn.version_info():match("\n(cuda:0[^\n]*)") or "cuda:0"
print(string.format('{"bench":"gpu","device":%q}', device))

local reps = quick and 2 or 10
local timer <close> = cnn.timer("cuda")

local emit = B.emit

local median = B.median

-- median seconds of fn() between two events (after one warm-up call)
local function time_median(fn)
  fn()
  local times = {}
  for i = 1, reps do
    timer:reset()
    timer:mark()
    fn()
    timer:mark()
    times[i] = timer:elapsed(1, 2)
  end
  return median(times)
end

-- ---- GEMM -----------------------------------------------------------------------

local n = quick and 64 or 4096
local a, b = cnn.randn(n, n):cuda(), cnn.randn(n, n):cuda()
local gemm_flops = 2 * n * n * n
local sgemm = gemm_flops / time_median(function() local c <close> = a:mm(b) end)
emit({ { "bench", "sgemm" }, { "n", n }, { "tflops", sgemm / 1e12 } })
local hgemm = gemm_flops / time_median(function()
  local c <close> = cnn.autocast("float16", function() return a:mm(b) end)
end)
emit({ { "bench", "hgemm" }, { "n", n }, { "tflops", hgemm / 1e12 }, { "vs_sgemm", hgemm / sgemm } })

-- ---- convolution ----------------------------------------------------------------------

local layers = {
  { name = "conv2_32x64_14", c = 32, k = 64, hw = 14 },
  { name = "conv3_64x128_16", c = 64, k = 128, hw = 16 },
  { name = "conv4_128x256_8", c = 128, k = 256, hw = 8 },
}
local batch = quick and 2 or 256

local function conv_layer(L)
  local x = cnn.randn(batch, L.c, L.hw, L.hw):cuda()
  local w = (cnn.randn(L.k, L.c, 3, 3) * 0.1):cuda()
  local bias = cnn.zeros(L.k):cuda()
  local flops = 2 * batch * L.k * L.c * 9 * L.hw * L.hw
  local function fwd() local y <close> = F.conv2d(x, w, bias, { padding = 1 }) end
  local t_fwd = time_median(fwd)
  local t_half = time_median(function() cnn.autocast("float16", fwd) end)
  cnn.backends.conv = "direct"
  local t_direct = time_median(fwd)
  cnn.backends.conv = "auto"
  x.requires_grad, w.requires_grad, bias.requires_grad = true, true, true
  local t_bwd = time_median(function()
    local y <close> = F.conv2d(x, w, bias, { padding = 1 })
    y:sum():backward()
  end) - t_fwd
  x.requires_grad, w.requires_grad, bias.requires_grad = false, false, false
  emit({ { "bench", "conv" }, { "layer", L.name }, { "batch", batch },
         { "fwd_gflops", flops / t_fwd / 1e9 }, { "fwd_vs_sgemm", flops / t_fwd / sgemm },
         { "bwd_gflops", 2 * flops / t_bwd / 1e9 }, { "bwd_vs_sgemm", 2 * flops / t_bwd / sgemm },
         { "direct_vs_cudnn", t_fwd / t_direct }, { "fp16_speedup", t_fwd / t_half } })
end

cnn.cuda.benchmark(true)
for _, L in ipairs(layers) do conv_layer(L) end

-- ---- host to device copies ----------------------------------------------------------------

local elems = quick and 4096 or 64 * 1024 * 1024 / 4
local host = cnn.randn(elems)
local pinned = host:pin_memory()
local bytes = elems * 4
local function rate(fn) return bytes / time_median(fn) / 1e9 end
emit({ { "bench", "copy" }, { "bytes", bytes },
       { "pageable_gbs", rate(function() local d <close> = host:cuda() end) },
       { "pinned_gbs", rate(function() local d <close> = pinned:cuda() end) },
       { "pinned_async_gbs", rate(function() local d <close> = pinned:cuda{ non_blocking = true } end) } })

-- ---- the example network ---------------------------------------------------------------------

local function train_rate(autocast_dtype)
  cnn.manual_seed(0)
  local net = B.fmnist_cnn():to("cuda")
  local opt = optim.Adam(net:parameters(), { lr = 1e-3 })
  local scaler = optim.GradScaler{ enabled = autocast_dtype ~= nil }
  local nb = quick and 4 or 256
  local x, y = cnn.randn(nb, 1, 28, 28):cuda(), cnn.randint(1, 10, { nb }):cuda()
  local function loss_of()
    return F.cross_entropy(net(x), y)
  end
  local t = time_median(function()
    opt:zero_grad()
    local loss = autocast_dtype and cnn.autocast(autocast_dtype, loss_of) or loss_of()
    scaler:scale(loss):backward()
    scaler:step(opt)
    scaler:update()
  end)
  return nb / t
end

local f32 = train_rate(nil)
local f16 = train_rate("float16")
emit({ { "bench", "train" }, { "net", "fmnist_cnn" }, { "batch", quick and 4 or 256 },
       { "images_per_s", f32 }, { "fp16_images_per_s", f16 }, { "fp16_speedup", f16 / f32 } })
