-- nn/adaptive_max_pool.lua -- nn.AdaptiveMaxPool2d.
--
-- The maximum over PyTorch's adaptive bins (rows floor(i*H/out) up to
-- ceil((i+1)*H/out), columns likewise) of N x C x H x W input, through
-- F.adaptive_max_pool2d; return_indices adds the 1-based flat positions of
-- the maxima within each H x W plane, as nn.MaxPool2d's.
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local check = require("check")
local fmt = require("fmt")
local doc = cnn.doc or {}

local AdaptiveMaxPool2d = Module:extend("AdaptiveMaxPool2d")

function AdaptiveMaxPool2d:init(output_size, opts)
  local name = "nn.AdaptiveMaxPool2d"
  if output_size == nil then error(name .. "(size): missing output size (a number or {h, w})", 3) end
  opts = check.options(name, opts, { "return_indices" }, 3)
  self.output_size = check.ints(name, "output_size", output_size, 3, 1, { 2 })
  self.return_indices = check.boolean(name, "return_indices", opts.return_indices, 3) or false
end

function AdaptiveMaxPool2d:forward(x)
  return F.adaptive_max_pool2d(x, self.output_size, { return_indices = self.return_indices })
end

function AdaptiveMaxPool2d:extra_repr()
  return "output_size=" .. fmt.pair(self.output_size)
end

doc[AdaptiveMaxPool2d] = [[
nn.AdaptiveMaxPool2d(size [, {return_indices = false}])
Maximum of N x C x H x W input over size x size (or {h, w}) bins, whatever
H and W are: bin i spans rows floor(i*H/size) .. ceil((i+1)*H/size) - 1
(PyTorch's).  return_indices also returns the 1-based flat positions.]]

return { AdaptiveMaxPool2d = AdaptiveMaxPool2d }
