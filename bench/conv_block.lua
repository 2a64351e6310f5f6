-- bench/conv_block.lua -- a conv -> batch norm -> ReLU -> max-pool block of
-- the example network (examples/fashion_mnist.lua), forward and backward in
-- training, as cnnsh runs it: float32 plain tensors, oneDNN's convolution
-- with a reorder around it, our batch norm (+ ReLU, fused by nn.Sequential)
-- and max pooling; and the same under cnn.autocast('bfloat16').  Its
-- counterpart bench/onednn_block.c times the block kept in oneDNN's blocked
-- layout end to end; run both alternately and read the ratio.
--
--   cnnsh bench/conv_block.lua [--quick]   -- one JSON line per block and dtype
--   (--quick: batch 4, a few steps, a smoke run):
--   {"bench":"conv_block","impl":"cnnsh","block":"32x64_14","dtype":"bf16","ms":...}
local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")
local quick = arg[1] == "--quick"
if arg[1] and not quick then error("usage: cnnsh bench/conv_block.lua [--quick]", 0) end
local BATCH, WARM, REPS = 64, 5, 31
if quick then BATCH, WARM, REPS = 4, 1, 3 end

local function block_ms(cin, cout, hw, bf16, need_dx)
  cnn.manual_seed(0)
  local net = nn.Sequential(nn.Conv2d(cin, cout, 3, { padding = 1 }), nn.BatchNorm2d(cout), nn.ReLU(),
                            nn.MaxPool2d(2))
  net:train()
  local x = cnn.randn(BATCH, cin, hw, hw)
  x.requires_grad = need_dx
  local dy = cnn.randn(BATCH, cout, hw // 2, hw // 2)
  local function step()
    local y = bf16 and cnn.autocast("bfloat16", function() return net(x) end) or net(x)
    y:backward(dy)
    net:zero_grad()
    x.grad = nil
  end
  for _ = 1, WARM do step() end
  local t = {}
  for i = 1, REPS do
    local t0 = cnn.clock()
    step()
    t[i] = (cnn.clock() - t0) * 1e3
  end
  return B.median(t)
end

for _, bf16 in ipairs({ false, true }) do
  for _, blk in ipairs({ { "1x32_28", 1, 32, 28, false }, { "32x64_14", 32, 64, 14, true } }) do
    B.emit({ { "bench", "conv_block" }, { "impl", "cnnsh" }, { "block", blk[1] }, { "batch", BATCH },
             { "dtype", bf16 and "bf16" or "fp32" },
             { "ms", block_ms(blk[2], blk[3], blk[4], bf16, blk[5]) } })
  end
end
