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
-- al. section 4.2): models.resnet20 when the model zoo has it, else built
-- here from nn layers.  The ReLUs of a block are nn.ReLU modules, so a
-- per-layer profile sees them; the residual addition is the one op outside
-- the layers.
function B.resnet20(num_classes)
  local models = rawget(_G, "models")
  if models and models.resnet20 then return models.resnet20{ num_classes = num_classes or 10 } end
  local Block = nn.Module:extend("BasicBlock")
  function Block:init(cin, cout, stride)
    self.conv1 = nn.Conv2d(cin, cout, 3, { stride = stride, padding = 1, bias = false })
    self.bn1, self.relu1 = nn.BatchNorm2d(cout), nn.ReLU()
    self.conv2 = nn.Conv2d(cout, cout, 3, { padding = 1, bias = false })
    self.bn2, self.relu2 = nn.BatchNorm2d(cout), nn.ReLU()
    if stride ~= 1 or cin ~= cout then
      self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, { stride = stride, bias = false }), nn.BatchNorm2d(cout))
    end
  end
  function Block:forward(x)
    local out = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
    return self.relu2(out + (self.shortcut and self.shortcut(x) or x))
  end
  local layers, cin = { nn.Conv2d(3, 16, 3, { padding = 1, bias = false }), nn.BatchNorm2d(16), nn.ReLU() }, 16
  for stage, cout in ipairs({ 16, 32, 64 }) do
    for b = 1, 3 do
      layers[#layers + 1] = Block(cin, cout, (stage > 1 and b == 1) and 2 or 1)
      cin = cout
    end
  end
  layers[#layers + 1] = nn.AdaptiveAvgPool2d(1)
  layers[#layers + 1] = nn.Flatten()
  layers[#layers + 1] = nn.Linear(64, num_classes or 10)
  return nn.Sequential(table.unpack(layers))
end

return B
