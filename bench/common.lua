-- bench/common.lua -- what the benchmarks share: the median, one JSON line
-- per figure, alternated timing of several ways, and the networks they time.
--   local B = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local B = {}

function B.median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end

-- fields: an ordered list of {key, value}; strings are quoted, numbers %.4g
function B.emit(fields)
  local parts = {}
  for _, kv in ipairs(fields) do
    local v = kv[2]
    parts[#parts + 1] = string.format("%q:%s", kv[1], type(v) == "string" and string.format("%q", v)
      or string.format("%.4g", v))
  end
  print("{" .. table.concat(parts, ",") .. "}")
  io.flush()
end

-- Median ms per call of each way (ways: name -> function, names: their
-- order), the ways alternated round by round so that a slow minute falls on
-- all of them alike; t = {warm-up calls, rounds, calls a round}.
function B.time_ways(ways, names, t)
  local warm, rounds, reps = t[1], t[2], t[3]
  local ms = {}
  for _, n in ipairs(names) do
    ms[n] = {}
    for _ = 1, warm do ways[n]() end
  end
  for r = 1, rounds do
    for k = 1, #names do
      local n = names[(k + r) % #names + 1]
      local t0 = cnn.clock()
      for _ = 1, reps do ways[n]() end
      ms[n][r] = (cnn.clock() - t0) * 1e3 / reps
    end
  end
  local m = {}
  for _, n in ipairs(names) do m[n] = B.median(ms[n]) end
  return m
end

-- The example network's training step (Adam, cross-entropy; under bf16
-- autocast when asked) with one of nn.Sequential's fused blocks and with
-- its layers one by one, in one process: lib is the block's module
-- (nn.conv_block, nn.linear_block), turned off for alternate steps by
-- making its run() decline, as a hook would.  B.time_ways's medians,
-- {fused = ms, layers = ms}.
function B.block_step(lib, bf16, batch, t)
  cnn.manual_seed(0)
  local x, y = cnn.randn(batch, 1, 28, 28), cnn.randint(1, 10, { batch })
  local net = B.fmnist_cnn()
  local opt = optim.Adam(net:parameters(), { lr = 1e-3 })
  local function loss_of() return F.cross_entropy(net(x), y) end
  local function train_step()
    opt:zero_grad()
    local l = bf16 and cnn.autocast("bfloat16", loss_of) or loss_of()
    l:backward()
    opt:step()
  end
  local run_block = lib.run
  local function with(fused)
    return function()
      lib.run = fused and run_block or function() return nil end
      train_step()
      lib.run = run_block
    end
  end
  return B.time_ways({ fused = with(true), layers = with(false) }, { "fused", "layers" }, t)
end

-- the network of examples/fashion_mnist.lua
function B.fmnist_cnn()
  return nn.Sequential(
    nn.Conv2d(1, 32, 3, { padding = 1 }), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, { padding = 1 }), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.3), nn.Linear(128, 10))
end

-- ResNet-20 for 32x32 inputs (examples/cifar10_resnet.lua's network; He et
-- al. section 4.2): models.resnet20 from the model zoo
-- (stdlib/models/resnet.lua).  Its ReLUs are nn.ReLU modules, so a
-- per-layer profile sees them, except the one after each residual addition
-- (F.relu, so that net:fuse() can fuse the block's first ReLU): those and
-- the additions are the ops outside the layers.
function B.resnet20(num_classes)
  return models.resnet20{ num_classes = num_classes or 10 }
end

return B
