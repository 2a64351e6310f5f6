-- nn/pooling.lua -- nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d.
--
-- Parameter-free layers that remember their options and call F.max_pool2d,
-- F.avg_pool2d and F.adaptive_avg_pool2d.  The stride defaults to the
-- kernel size, as in PyTorch.  Options are stored as given (a number or
-- {h, w}) and printed as PyTorch prints them.  Constructors check each
-- option's type and range (stdlib/check.lua); F checks what depends on the
-- input or on several options together (padding <= kernel / 2).
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local check = require("check")
local doc = cnn.doc or {}

local fmt = require("fmt")
local fmt_pair = fmt.pair

-- ---- MaxPool2d -----------------------------------------------------------------

local MaxPool2d = Module:extend("MaxPool2d")

-- Checks the window options shared by MaxPool2d and AvgPool2d and stores
-- them (errors point at the user's line: check_window < init < construct <
-- caller).  Each is a number or {h, w}; F checks padding <= kernel / 2.
local function check_window(self, kernel_size, opts, known)
  local name = "nn." .. self.__name
  opts = check.options(name, opts, known, 4)
  if kernel_size == nil then error(name .. "(k [, opts]): missing kernel_size (a number or {h, w})", 4) end
  self.kernel_size = check.ints(name, "kernel_size", kernel_size, 4, 1, { 2 })
  self.stride = check.ints(name, "stride", opts.stride or self.kernel_size, 4, 1, { 2 })
  self.padding = check.ints(name, "padding", opts.padding or 0, 4, 0, { 2 })
  self.ceil_mode = check.boolean(name, "ceil_mode", opts.ceil_mode, 4) or false
  return opts
end

function MaxPool2d:init(kernel_size, opts)
  opts = check_window(self, kernel_size, opts,
                      { "stride", "padding", "dilation", "ceil_mode", "return_indices" })
  self.dilation = check.ints("nn.MaxPool2d", "dilation", opts.dilation or 1, 3, 1, { 2 })
  self.return_indices = check.boolean("nn.MaxPool2d", "return_indices", opts.return_indices, 3) or false
end

function MaxPool2d:forward(x)
  local o = { stride = self.stride, padding = self.padding, ceil_mode = self.ceil_mode,
              return_indices = self.return_indices }
  if self.dilation ~= 1 then o.dilation = self.dilation end
  return F.max_pool2d(x, self.kernel_size, o)
end

function MaxPool2d:extra_repr()
  return string.format("kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s",
    fmt_pair(self.kernel_size), fmt_pair(self.stride), fmt_pair(self.padding), fmt_pair(self.dilation),
    fmt.bool(self.ceil_mode))
end

function MaxPool2d:short_repr()
  return "MaxPool2d " .. fmt_pair(self.kernel_size)
end

doc[MaxPool2d] = [[
nn.MaxPool2d(k [, {stride = k, padding = 0, dilation = 1, ceil_mode = false, return_indices = false}])
Maximum over k x k windows of N x C x H x W input; dilation spaces the
window's taps (PyTorch's).  With return_indices the
call returns the output and the (1-based) flat indices of the maxima.
  pool = nn.MaxPool2d(2)   -- halves H and W]]

-- ---- AvgPool2d -----------------------------------------------------------------

local AvgPool2d = Module:extend("AvgPool2d")

function AvgPool2d:init(kernel_size, opts)
  opts = check_window(self, kernel_size, opts, { "stride", "padding", "ceil_mode", "count_include_pad" })
  self.count_include_pad = check.boolean("nn.AvgPool2d", "count_include_pad", opts.count_include_pad, 3) ~= false
end

function AvgPool2d:forward(x)
  return F.avg_pool2d(x, self.kernel_size, { stride = self.stride, padding = self.padding,
    ceil_mode = self.ceil_mode, count_include_pad = self.count_include_pad })
end

function AvgPool2d:extra_repr()
  return string.format("kernel_size=%s, stride=%s, padding=%s", fmt_pair(self.kernel_size),
                       fmt_pair(self.stride), fmt_pair(self.padding))
end

function AvgPool2d:short_repr()
  return "AvgPool2d " .. fmt_pair(self.kernel_size)
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
  self.output_size = check.ints("nn.AdaptiveAvgPool2d", "output_size", output_size, 3, 1, { 2 })
end

function AdaptiveAvgPool2d:forward(x)
  return F.adaptive_avg_pool2d(x, self.output_size)
end

function AdaptiveAvgPool2d:extra_repr()
  return "output_size=" .. fmt_pair(self.output_size)
end

doc[AdaptiveAvgPool2d] = [[
nn.AdaptiveAvgPool2d(size)
Averages N x C x H x W input down to N x C x size x size (size a number or
{h, w}) whatever H and W are; nn.AdaptiveAvgPool2d(1) is global average pooling.]]

return { MaxPool2d = MaxPool2d, AvgPool2d = AvgPool2d, AdaptiveAvgPool2d = AdaptiveAvgPool2d }
