-- nn/pooling.lua -- nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d.
--
-- Parameter-free layers that remember their options and call F.max_pool2d,
-- F.avg_pool2d and F.adaptive_avg_pool2d.  The stride defaults to the
-- kernel size, as in PyTorch.  Options are stored as given (a number or
-- {h, w}) and printed as PyTorch prints them.
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local doc = cnn.doc or {}

local fmt = Module.fmt_pair

-- ---- MaxPool2d -----------------------------------------------------------------

local MaxPool2d = Module:extend("MaxPool2d")

function MaxPool2d:init(kernel_size, opts)
  if kernel_size == nil then error("nn.MaxPool2d(k [, opts]): missing kernel size", 3) end
  opts = opts or {}
  self.kernel_size = kernel_size
  self.stride = opts.stride or kernel_size
  self.padding = opts.padding or 0
  self.dilation = opts.dilation or 1
  self.ceil_mode = opts.ceil_mode or false
  self.return_indices = opts.return_indices or false
end

function MaxPool2d:forward(x)
  local o = { stride = self.stride, padding = self.padding, ceil_mode = self.ceil_mode,
              return_indices = self.return_indices }
  if self.dilation ~= 1 then o.dilation = self.dilation end
  return F.max_pool2d(x, self.kernel_size, o)
end

function MaxPool2d:extra_repr()
  return string.format("kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s",
    fmt(self.kernel_size), fmt(self.stride), fmt(self.padding), fmt(self.dilation),
    Module.fmt_bool(self.ceil_mode))
end

function MaxPool2d:short_repr()
  return "MaxPool2d " .. fmt(self.kernel_size)
end

doc[MaxPool2d] = [[
nn.MaxPool2d(k [, {stride = k, padding = 0, ceil_mode = false, return_indices = false}])
Maximum over k x k windows of N x C x H x W input.  With return_indices the
call returns the output and the (1-based) flat indices of the maxima.
  pool = nn.MaxPool2d(2)   -- halves H and W]]

-- ---- AvgPool2d -----------------------------------------------------------------

local AvgPool2d = Module:extend("AvgPool2d")

function AvgPool2d:init(kernel_size, opts)
  if kernel_size == nil then error("nn.AvgPool2d(k [, opts]): missing kernel size", 3) end
  opts = opts or {}
  self.kernel_size = kernel_size
  self.stride = opts.stride or kernel_size
  self.padding = opts.padding or 0
  self.ceil_mode = opts.ceil_mode or false
  self.count_include_pad = opts.count_include_pad ~= false
end

function AvgPool2d:forward(x)
  return F.avg_pool2d(x, self.kernel_size, { stride = self.stride, padding = self.padding,
    ceil_mode = self.ceil_mode, count_include_pad = self.count_include_pad })
end

function AvgPool2d:extra_repr()
  return string.format("kernel_size=%s, stride=%s, padding=%s", fmt(self.kernel_size),
                       fmt(self.stride), fmt(self.padding))
end

function AvgPool2d:short_repr()
  return "AvgPool2d " .. fmt(self.kernel_size)
end

doc[AvgPool2d] = [[
nn.AvgPool2d(k [, {stride = k, padding = 0, ceil_mode = false, count_include_pad = true}])
Mean over k x k windows of N x C x H x W input.]]

-- ---- AdaptiveAvgPool2d ---------------------------------------------------------

local AdaptiveAvgPool2d = Module:extend("AdaptiveAvgPool2d")

function AdaptiveAvgPool2d:init(output_size)
  if output_size == nil then
    error("nn.AdaptiveAvgPool2d(size): missing output size (a number or {h, w})", 3)
  end
  self.output_size = output_size
end

function AdaptiveAvgPool2d:forward(x)
  return F.adaptive_avg_pool2d(x, self.output_size)
end

function AdaptiveAvgPool2d:extra_repr()
  return "output_size=" .. fmt(self.output_size)
end

doc[AdaptiveAvgPool2d] = [[
nn.AdaptiveAvgPool2d(size)
Averages N x C x H x W input down to N x C x size x size (size a number or
{h, w}) whatever H and W are; nn.AdaptiveAvgPool2d(1) is global average pooling.]]

return { MaxPool2d = MaxPool2d, AvgPool2d = AvgPool2d, AdaptiveAvgPool2d = AdaptiveAvgPool2d }
