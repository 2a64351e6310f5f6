-- bench/common.lua -- what the benchmarks share: the median, one JSON line
-- per figure, and the example network they time.
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
