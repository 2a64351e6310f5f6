-- bench/conv_block.lua -- a conv -> batch norm -> ReLU -> max-pool block of
-- the example network (examples/fashion_mnist.lua), forward and backward in
-- training, three ways, alternated within each round so the machine's
-- drift hits all three:
--   fused   nn.Sequential's one node (cnn.fused.conv_bn_relu_pool: the
--           block kept in oneDNN's blocked layouts, core/cpu/conv_block_onednn.c);
--   layers  the four layers called one by one (float32 plain tensors,
--           oneDNN's convolution with a reorder around it, our batch norm +
--           ReLU and max pooling) -- what nn.Sequential ran before the block;
--   conv    the convolution alone, so "beyond_conv" = block - conv is what
--           batch norm, ReLU and the pool (and the reorders) cost.
-- The same under cnn.autocast('bfloat16'); then the example network's whole
-- training step (batch 64, Adam) with the block and with its layers one by
-- one, in one process, alternated ("conv_block_step").  bench/onednn_block.c (built by
-- hand) times the block in oneDNN alone, outside cnnsh.
--
--   cnnsh bench/conv_block.lua [--quick]   -- one JSON line per block and dtype
--   (--quick: batch 4, a few steps, a smoke run):
--   {"bench":"conv_block","block":"32x64_14","batch":64,"dtype":"bf16","fused_ms":...,
--    "layers_ms":...,"speedup":...,"conv_ms":...,"fused_beyond_conv_ms":...,"layers_beyond_conv_ms":...}
--   {"bench":"conv_block_step","net":"fmnist_cnn","batch":64,"dtype":"fp32","fused_ms":...,
--    "layers_ms":...,"speedup":...}
local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")
local quick = arg[1] == "--quick"
if arg[1] and not quick then error("usage: cnnsh bench/conv_block.lua [--quick]", 0) end
local BATCH, WARM, ROUNDS, REPS = 64, 5, 7, 5
if quick then BATCH, WARM, ROUNDS, REPS = 4, 1, 1, 2 end

-- one fwd+bwd step of each way for block (cin -> cout at hw x hw)
local function steppers(cin, cout, hw, bf16, need_dx)
  cnn.manual_seed(0)
  local net = nn.Sequential(nn.Conv2d(cin, cout, 3, { padding = 1 }), nn.BatchNorm2d(cout), nn.ReLU(),
                            nn.MaxPool2d(2))
  net:train()
  local x = cnn.randn(BATCH, cin, hw, hw)
  x.requires_grad = need_dx
  local dy = cnn.randn(BATCH, cout, hw // 2, hw // 2)
  local dconv = cnn.randn(BATCH, cout, hw, hw)
  local function layers(v)
    for i = 1, #net do v = net[i](v) end
    return v
  end
  local function way(forward, g)
    local function once()
      local y = forward(x)
      y:backward(g)
      net:zero_grad()
      x.grad = nil
    end
    if bf16 then return function() cnn.autocast("bfloat16", once) end end
    return once
  end
  return { fused = way(net, dy), layers = way(layers, dy), conv = way(net[1], dconv) }
end

for _, bf16 in ipairs({ false, true }) do
  for _, blk in ipairs({ { "1x32_28", 1, 32, 28, false }, { "32x64_14", 32, 64, 14, true } }) do
    local m = B.time_ways(steppers(blk[2], blk[3], blk[4], bf16, blk[5]), { "fused", "layers", "conv" },
                         { WARM, ROUNDS, REPS })
    B.emit({ { "bench", "conv_block" }, { "block", blk[1] }, { "batch", BATCH },
             { "dtype", bf16 and "bf16" or "fp32" }, { "fused_ms", m.fused }, { "layers_ms", m.layers },
             { "speedup", m.layers / m.fused }, { "conv_ms", m.conv },
             { "fused_beyond_conv_ms", m.fused - m.conv }, { "layers_beyond_conv_ms", m.layers - m.conv } })
  end
end

-- ---- the example network's training step with and without the block ---------------
-- The same net and optimizer in one process, steps alternated round by
-- round; "layers" turns the block off for the step by making
-- nn.Sequential's call of conv_block.run decline (what a hook would do).
for _, bf16 in ipairs({ false, true }) do
  local m = B.block_step(require("nn.conv_block"), bf16, BATCH, { WARM, ROUNDS, REPS })
  B.emit({ { "bench", "conv_block_step" }, { "net", "fmnist_cnn" }, { "batch", BATCH },
           { "dtype", bf16 and "bf16" or "fp32" }, { "fused_ms", m.fused }, { "layers_ms", m.layers },
           { "speedup", m.layers / m.fused } })
end
