-- linear_block.lua -- what nn.Sequential's Linear -> ReLU -> Dropout
-- block (cnn.fused.linear_relu_dropout, core/ops/nn_linear_block.c: the
-- bias, relu and mask one pass over the product, one node) saves, at the
-- example network's shape (64 x 3136 -> 128, Dropout(0.5)) and with 8
-- input features (the product small, so the passes and calls around it
-- show), timed in one process with the ways alternated round by round:
--   fused   nn.Sequential's one node;
--   layers  Linear, ReLU and Dropout called one by one (what ran before);
--   linear  the Linear alone, so "beyond_linear" = block - linear is what
--           the bias, relu and dropout passes cost on top of the product.
-- Forward + backward in training, float32 and under bfloat16 autocast; then
-- the example network's whole training step (batch 64, Adam) with the block
-- and with its layers ("linear_block_step": the block turned off for
-- alternate steps by making nn.Sequential's call of linear_block.run
-- decline, as a hook would).
--
--   cnnsh bench/linear_block.lua [--quick]    (--quick: batch 4, a smoke run)
--   {"bench":"linear_block","shape":"64x3136x128","dtype":"fp32","fused_ms":...,"layers_ms":...,
--    "speedup":...,"linear_ms":...,"fused_beyond_linear_ms":...,"layers_beyond_linear_ms":...}
--   {"bench":"linear_block_step","net":"fmnist_cnn","batch":64,"dtype":"fp32","fused_ms":...,
--    "layers_ms":...,"speedup":...}
local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")
local quick = arg[1] == "--quick"
if arg[1] and not quick then error("usage: cnnsh bench/linear_block.lua [--quick]", 0) end
local BATCH, WARM, ROUNDS, REPS = 64, 20, 9, 50
if quick then BATCH, WARM, ROUNDS, REPS = 4, 1, 1, 2 end

local function steppers(bf16, features)
  cnn.manual_seed(0)
  local net = nn.Sequential(nn.Linear(features, 128), nn.ReLU(), nn.Dropout(0.5))
  net:train()
  local x = cnn.randn(BATCH, features):requires_grad_()
  local dy = cnn.randn(BATCH, 128)
  local function layers(v)
    for i = 1, #net do v = net[i](v) end
    return v
  end
  local function way(forward)
    local function once()
      forward(x):backward(dy)
      net:zero_grad()
      x.grad = nil
    end
    if bf16 then return function() cnn.autocast("bfloat16", once) end end
    return once
  end
  return { fused = way(net), layers = way(layers), linear = way(net[1]) }
end

for _, features in ipairs({ 3136, 8 }) do
  for _, bf16 in ipairs({ false, true }) do
    local m = B.time_ways(steppers(bf16, features), { "fused", "layers", "linear" }, { WARM, ROUNDS, REPS })
    B.emit({ { "bench", "linear_block" }, { "shape", BATCH .. "x" .. features .. "x128" },
             { "dtype", bf16 and "bf16" or "fp32" }, { "fused_ms", m.fused }, { "layers_ms", m.layers },
             { "speedup", m.layers / m.fused }, { "linear_ms", m.linear },
             { "fused_beyond_linear_ms", m.fused - m.linear }, { "layers_beyond_linear_ms", m.layers - m.linear } })
  end
end

for _, bf16 in ipairs({ false, true }) do
  local m = B.block_step(require("nn.linear_block"), bf16, BATCH, { quick and 1 or 5, ROUNDS, quick and 2 or 5 })
  B.emit({ { "bench", "linear_block_step" }, { "net", "fmnist_cnn" }, { "batch", BATCH },
           { "dtype", bf16 and "bf16" or "fp32" }, { "fused_ms", m.fused }, { "layers_ms", m.layers },
           { "speedup", m.layers / m.fused } })
end
