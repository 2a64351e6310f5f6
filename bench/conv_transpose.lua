-- bench/conv_transpose.lua -- ConvTranspose2d forward + backward as a ratio
-- of the same-shape Conv2d in the same run (issue 13 point 13, goal >= 0.8).
--
-- "Same shape": the convolution whose input-gradient the transposed one is
-- -- input the transposed output's shape, output its input's, the same
-- weight, stride, padding and dilation -- so both do the same multiply-adds.
-- Each layer (the up-steps of a small U-Net and a GAN generator, batch 16)
-- prints one JSON line: the median fwd+bwd time of each over 15 steps, the
-- two alternating step by step (the backward covers x, weight and bias),
-- and ratio = conv time / transposed time
-- (1.0: as fast as the convolution).  One line per CPU algorithm (oneDNN,
-- im2col); on a CUDA machine `--cuda` times the GPU instead.
-- Usage: cnnsh bench/conv_transpose.lua [--quick] [--cuda]

local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local quick, cuda = false, false
for _, a in ipairs(arg) do
  if a == "--quick" then quick = true elseif a == "--cuda" then cuda = true end
end
local reps = quick and 2 or 15
local device = cuda and "cuda" or "cpu"
local batch = quick and 2 or 16

local layers = {
  { name = "unet_up_64x32_k2s2_16", cin = 64, cout = 32, k = 2, s = 2, p = 0, op = 0, hw = 16 },
  { name = "unet_up_128x64_k2s2_8", cin = 128, cout = 64, k = 2, s = 2, p = 0, op = 0, hw = 8 },
  { name = "gan_128x64_k4s2p1_8", cin = 128, cout = 64, k = 4, s = 2, p = 1, op = 0, hw = 8 },
  { name = "dec_32x16_k3s2p1op1_14", cin = 32, cout = 16, k = 3, s = 2, p = 1, op = 1, hw = 14 },
}

local function sync()
  if cuda then cnn.cuda.synchronize() end
end

-- a step of forward + backward (from a fixed dy) of f(x, w, b)
local function fwd_bwd_step(f, x, w, b)
  x.requires_grad, w.requires_grad, b.requires_grad = true, true, true
  local y = f(x, w, b)
  local dy = cnn.randn(table.unpack(y.shape)):to(device)
  local function step()
    local out <close> = f(x, w, b)
    out:backward(dy)
    x.grad:release(); w.grad:release(); b.grad:release()
    x.grad, w.grad, b.grad = nil, nil, nil
  end
  step() -- warm-up: primitive creation, first touch of buffers
  return step
end

local function time_once(step)
  sync()
  local t0 = cnn.clock()
  step()
  sync()
  return cnn.clock() - t0
end

-- median seconds of each step, the two alternating rep by rep so that a
-- drift of the machine's load hits both
local function time_pair(a, b)
  local ta, tb = {}, {}
  for i = 1, reps do ta[i], tb[i] = time_once(a), time_once(b) end
  return B.median(ta), B.median(tb)
end

local function bench_layer(L, algo)
  local x = cnn.randn(batch, L.cin, L.hw, L.hw):to(device)
  local w = (cnn.randn(L.cin, L.cout, L.k, L.k) * 0.1):to(device)
  local tr_opts = { stride = L.s, padding = L.p, output_padding = L.op }
  local y = F.conv_transpose2d(x, w, nil, tr_opts)
  local z = cnn.randn(table.unpack(y.shape)):to(device)
  local tr = fwd_bwd_step(function(a, b2, c) return F.conv_transpose2d(a, b2, c, tr_opts) end,
                          x, w, cnn.zeros(L.cout):to(device))
  local conv = fwd_bwd_step(function(a, b2, c) return F.conv2d(a, b2, c, { stride = L.s, padding = L.p }) end,
                            z, w, cnn.zeros(L.cin):to(device))
  local t_tr, t_conv = time_pair(tr, conv)
  local macs = batch * L.cin * L.hw * L.hw * L.cout * L.k * L.k
  B.emit({ { "bench", "conv_transpose2d" }, { "layer", L.name }, { "device", device }, { "algo", algo },
           { "batch", batch }, { "transposed_ms", t_tr * 1e3 }, { "conv_ms", t_conv * 1e3 },
           { "gflops", 6 * macs / t_tr / 1e9 }, { "ratio", t_conv / t_tr } })
end

for _, algo in ipairs(cuda and { "auto" } or { "onednn", "im2col" }) do
  cnn.set_conv_algo(algo)
  for _, L in ipairs(layers) do bench_layer(L, algo) end
end
cnn.set_conv_algo("auto")
