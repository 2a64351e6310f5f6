-- bench/conv_block.lua -- a conv -> batch norm -> ReLU -> max-pool block of
-- the example network (examples/fashion_mnist.lua), forward and backward in
-- training, as cnnsh runs it: float32 plain tensors, oneDNN's convolution
-- with a reorder around it, our batch norm (+ ReLU, fused by nn.Sequential)
-- and max pooling; and the same under cnn.autocast('bfloat16').  Its
-- counterpart bench/onednn_block.c times the block kept in oneDNN's blocked
-- layout end to end; run both alternately and read the ratio.
--
--   cnnsh bench/conv_block.lua   -- one JSON line per block and dtype:
--   {"bench":"conv_block","impl":"cnnsh","block":"32x64_14","dtype":"bf16","ms":...}
local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local function block_ms(cin, cout, hw, bf16, need_dx)
  cnn.manual_seed(0)
  local net = nn.Sequential(nn.Conv2d(cin, cout, 3, { padding = 1 }), nn.BatchNorm2d(cout), nn.ReLU(),
                            nn.MaxPool2d(2))
  net:train()
  local x = cnn.randn(64, cin, hw, hw)
  x.requires_grad = need_dx
  local dy = cnn.randn(64, cout, hw // 2, hw // 2)
  local function step()
    local y = bf16 and cnn.autocast("bfloat16", function() return net(x) end) or net(x)
    y:backward(dy)
    net:zero_grad()
    x.grad = nil
  end
  for _ = 1, 5 do step() end
  local t = {}
  for i = 1, 31 do
    local t0 = cnn.clock()
    step()
    t[i] = (cnn.clock() - t0) * 1e3
  end
  return B.median(t)
end

for _, bf16 in ipairs({ false, true }) do
  for _, blk in ipairs({ { "1x32_28", 1, 32, 28, false }, { "32x64_14", 32, 64, 14, true } }) do
    B.emit({ { "bench", "conv_block" }, { "impl", "cnnsh" }, { "block", blk[1] },
             { "dtype", bf16 and "bf16" or "fp32" },
             { "ms", block_ms(blk[2], blk[3], blk[4], bf16, blk[5]) } })
  end
end
