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

return B
