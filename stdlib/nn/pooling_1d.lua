-- nn/pooling_1d.lua -- nn.MaxPool1d, nn.AvgPool1d, nn.AdaptiveAvgPool1d
-- pooling over N x C x L (or unbatched C x L) sequences.
--
-- Parameter-free layers that remember their options and call F.max_pool1d,
-- F.avg_pool1d and F.adaptive_avg_pool1d, which run the 2-d pools on a
-- unit-height view (one code path).  Options are integers (or {n}), with
-- PyTorch's names and defaults (stride = kernel_size); constructors check
-- them, F checks what depends on the input (padding <= kernel / 2).
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local check = require("check")
local fmt = require("fmt")
local doc = cnn.doc or {}

-- A number, or the one element of {n}.
local function one(v)
  return type(v) == "table" and v[1] or v
end

-- Checks the window options shared by MaxPool1d and AvgPool1d and stores
-- them (errors point at the user's line, 4 levels up).
local function check_window(self, kernel_size, opts, known)
  local name = "nn." .. self.__name
  opts = check.options(name, opts, known, 4)
  if kernel_size == nil then error(name .. "(k [, opts]): missing kernel_size (a number)", 4) end
  self.kernel_size = one(check.ints(name, "kernel_size", kernel_size, 4, 1, { 1 }))
  self.stride = one(check.ints(name, "stride", opts.stride or self.kernel_size, 4, 1, { 1 }))
  self.padding = one(check.ints(name, "padding", opts.padding or 0, 4, 0, { 1 }))
  self.ceil_mode = check.boolean(name, "ceil_mode", opts.ceil_mode, 4) or false
  return opts
end

-- ---- MaxPool1d ---------------------------------------------------------------

local MaxPool1d = Module:extend("MaxPool1d")

function MaxPool1d:init(kernel_size, opts)
  opts = check_window(self, kernel_size, opts, { "stride", "padding", "dilation", "ceil_mode", "return_indices" })
  self.dilation = one(check.ints("nn.MaxPool1d", "dilation", opts.dilation or 1, 3, 1, { 1 }))
  self.return_indices = check.boolean("nn.MaxPool1d", "return_indices", opts.return_indices, 3) or false
end

function MaxPool1d:forward(x)
  return F.max_pool1d(x, self.kernel_size, { stride = self.stride, padding = self.padding,
    dilation = self.dilation, ceil_mode = self.ceil_mode, return_indices = self.return_indices })
end

function MaxPool1d:extra_repr()
  return string.format("kernel_size=%d, stride=%d, padding=%d, dilation=%d, ceil_mode=%s", self.kernel_size,
                       self.stride, self.padding, self.dilation, fmt.bool(self.ceil_mode))
end

doc[MaxPool1d] = [[
nn.MaxPool1d(k [, {stride = k, padding = 0, dilation = 1, ceil_mode = false, return_indices = false}])
Maximum over windows of k of N x C x L (or C x L) input; L' = floor((L + 2*padding -
dilation*(k-1) - 1) / stride) + 1 (ceil with ceil_mode).  With return_indices the
call returns the output and the 1-based positions of the maxima.
  pool = nn.MaxPool1d(2)   -- halves L]]

-- ---- AvgPool1d ---------------------------------------------------------------

local AvgPool1d = Module:extend("AvgPool1d")

function AvgPool1d:init(kernel_size, opts)
  opts = check_window(self, kernel_size, opts, { "stride", "padding", "ceil_mode", "count_include_pad" })
  self.count_include_pad = check.boolean("nn.AvgPool1d", "count_include_pad", opts.count_include_pad, 3) ~= false
end

function AvgPool1d:forward(x)
  return F.avg_pool1d(x, self.kernel_size, { stride = self.stride, padding = self.padding,
    ceil_mode = self.ceil_mode, count_include_pad = self.count_include_pad })
end

function AvgPool1d:extra_repr()
  return string.format("kernel_size=%d, stride=%d, padding=%d", self.kernel_size, self.stride, self.padding)
end

doc[AvgPool1d] = [[
nn.AvgPool1d(k [, {stride = k, padding = 0, ceil_mode = false, count_include_pad = true}])
Mean over windows of k of N x C x L (or C x L) input.]]

-- ---- AdaptiveAvgPool1d -------------------------------------------------------

local AdaptiveAvgPool1d = Module:extend("AdaptiveAvgPool1d")

function AdaptiveAvgPool1d:init(output_size)
  if output_size == nil then error("nn.AdaptiveAvgPool1d(size): missing output size (a number)", 3) end
  self.output_size = one(check.ints("nn.AdaptiveAvgPool1d", "output_size", output_size, 3, 1, { 1 }))
end

function AdaptiveAvgPool1d:forward(x)
  return F.adaptive_avg_pool1d(x, self.output_size)
end

function AdaptiveAvgPool1d:extra_repr()
  return "output_size=" .. self.output_size
end

doc[AdaptiveAvgPool1d] = [[
nn.AdaptiveAvgPool1d(size)
Averages N x C x L (or C x L) input down to length size whatever L is;
nn.AdaptiveAvgPool1d(1) is global average pooling over the sequence.]]

return { MaxPool1d = MaxPool1d, AvgPool1d = AvgPool1d, AdaptiveAvgPool1d = AdaptiveAvgPool1d }
