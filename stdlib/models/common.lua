-- models/common.lua -- what the model files share (module "models.common",
-- private): option checking and torchvision's weight initialisation.
--
-- Every constructor of the zoo takes one options table with PyTorch's
-- names (num_classes, in_channels, ...); `options` checks it against the
-- list of known names (an unknown name is an error, as everywhere in cnnsh)
-- and fills in defaults.  `init_torchvision` initialises a whole network as
-- torchvision's ResNet, VGG and MobileNetV2 constructors do, after the
-- layers' own default initialisation:
--   Conv2d      kaiming_normal_(mode = 'fan_out', nonlinearity = 'relu'), bias 0
--   BatchNorm   weight 1, bias 0
--   Linear      normal(0, 0.01), bias 0   (only when linear_normal is set:
--               torchvision's ResNet keeps the Linear default)
local cnn = _G.cnn
local check = require("check")
local Module = require("nn.module")

local common = {}

-- options(fname, opts, defaults, level [, ranges]) -> a copy of defaults
-- overridden by opts; unknown names and ill-typed values are errors at
-- `level`.  Integer options are >= 1 and other numbers (probabilities) in
-- [0, 1] unless ranges[name] = {lo [, hi]} says otherwise.
function common.options(fname, opts, defaults, level, ranges)
  local known = {}
  for k in pairs(defaults) do known[#known + 1] = k end
  opts = check.options(fname, opts, known, level + 1)
  local out = {}
  for k, d in pairs(defaults) do
    local v = opts[k]
    if v == nil then v = d end
    local r = ranges and ranges[k]
    if type(d) == "number" and math.type(d) == "integer" then
      out[k] = check.integer(fname, k, v, level + 1, r and r[1] or 1, r and r[2])
    elseif type(d) == "number" then
      out[k] = check.number(fname, k, v, level + 1, r and r[1] or 0, r and r[2] or 1)
    elseif type(d) == "boolean" then
      out[k] = check.boolean(fname, k, v, level + 1)
    else
      out[k] = v
    end
  end
  return out
end

local function is_a(m, cls)
  return cls ~= nil and Module.is_instance(m, cls)
end

-- init_torchvision(net, linear_normal): see the header.
function common.init_torchvision(net, linear_normal)
  local nn = require("nn")
  local init = nn.init
  cnn.no_grad(function()
    for _, m in ipairs(net:modules()) do
      if is_a(m, nn.Conv2d) then
        init.kaiming_normal_(m.weight, { mode = "fan_out", nonlinearity = "relu" })
        if m.bias then init.zeros_(m.bias) end
      elseif is_a(m, nn.BatchNorm2d) then
        init.ones_(m.weight)
        init.zeros_(m.bias)
      elseif linear_normal and is_a(m, nn.Linear) then
        init.normal_(m.weight, 0, 0.01)
        if m.bias then init.zeros_(m.bias) end
      end
    end
  end)
  return net
end

-- The number of parameter elements of a module (each tensor once).
function common.count_parameters(net)
  local n = 0
  for _, p in ipairs(net:parameters()) do n = n + p:numel() end
  return n
end

return common
