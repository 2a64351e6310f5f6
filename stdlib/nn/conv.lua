-- nn/conv.lua -- nn.Conv2d: a 2-D convolution layer over NCHW tensors.
--
-- The layer owns weight (out x in/groups x kh x kw) and an optional bias
-- (out), initialised as PyTorch does (Kaiming-uniform with a = sqrt(5),
-- i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for both), and calls F.conv2d,
-- where the arithmetic lives (oneDNN, im2col + SGEMM or the naive loop).
-- Options use PyTorch's names: stride, padding, dilation, groups, bias.
-- stride/padding/dilation are kept as the user gave them (a number or a
-- table) and handed to F.conv2d unchanged; kernel_size is always {kh, kw}.
-- The constructor checks every argument (stdlib/check.lua), so a layer that
-- exists has sane options and prints.
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local fmt = require("fmt")
local init = require("nn.weight_init")
local check = require("check")
local doc = cnn.doc or {}

local Conv2d = Module:extend("Conv2d")

local NAME = "nn.Conv2d"
local OPTIONS = { "stride", "padding", "dilation", "groups", "bias" }

-- Checks every argument (type, NaN, range; errors point at the user's line,
-- 4 levels up: check_args < init < construct < caller) and returns them
-- normalised: kernel_size as {kh, kw}, the others as the user gave them.
local function check_args(cin, cout, k, opts)
  local L = 4
  opts = check.options(NAME, opts, OPTIONS, L)
  local a = {}
  a.cin = check.integer(NAME, "in_channels", cin, L, 1)
  a.cout = check.integer(NAME, "out_channels", cout, L, 1)
  if k == nil then error(NAME .. "(in, out, k): missing kernel_size (a number or {h, w})", L) end
  a.k = check.ints(NAME, "kernel_size", k, L, 1, { 2 })
  if type(a.k) ~= "table" then a.k = { a.k, a.k } end
  a.stride = check.ints(NAME, "stride", opts.stride or 1, L, 1, { 2 })
  a.padding = check.ints(NAME, "padding", opts.padding or 0, L, 0, { 2, 4 })
  a.dilation = check.ints(NAME, "dilation", opts.dilation or 1, L, 1, { 2 })
  a.groups = check.integer(NAME, "groups", opts.groups or 1, L, 1)
  a.bias = check.boolean(NAME, "bias", opts.bias, L) ~= false
  if a.cin % a.groups ~= 0 or a.cout % a.groups ~= 0 then
    error(string.format("%s: in (%d) and out (%d) must be divisible by groups (%d)",
                        NAME, a.cin, a.cout, a.groups), L)
  end
  return a
end

function Conv2d:init(in_channels, out_channels, kernel_size, opts)
  local a = check_args(in_channels, out_channels, kernel_size, opts)
  self.in_channels, self.out_channels = a.cin, a.cout
  self.kernel_size = a.k
  self.stride, self.padding, self.dilation, self.groups = a.stride, a.padding, a.dilation, a.groups
  local k = self.kernel_size
  -- a size too large to allocate is reported as nn.Conv2d's error
  self:register_parameter("weight", check.call(NAME, 3, cnn.empty, a.cout, a.cin // a.groups, k[1], k[2]))
  if a.bias then
    self:register_parameter("bias", cnn.empty(a.cout))
  else
    self:register_parameter("bias", nil)
  end
  self:reset_parameters()
end

-- PyTorch's default initialisation.
function Conv2d:reset_parameters()
  init.kaiming_uniform_(self.weight, { a = math.sqrt(5) })
  if self.bias then
    local fan_in = init.calculate_fan_in_and_fan_out(self.weight)
    local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
    init.uniform_(self.bias, -bound, bound)
  end
end

function Conv2d:forward(x)
  return F.conv2d(x, self.weight, self.bias, {
    stride = self.stride, padding = self.padding,
    dilation = self.dilation, groups = self.groups })
end

local function is_default(v, d)
  if type(v) == "number" then return v == d end
  for _, e in ipairs(v) do if e ~= d then return false end end
  return true
end

local function as_pair(v)
  return fmt.pair(type(v) == "number" and { v, v } or v)
end

function Conv2d:extra_repr()
  local s = string.format("%d, %d, kernel_size=%s, stride=%s", self.in_channels,
    self.out_channels, fmt.pair(self.kernel_size), as_pair(self.stride))
  if not is_default(self.padding, 0) then s = s .. ", padding=" .. as_pair(self.padding) end
  -- output_padding: nn.ConvTranspose2d shares this method
  if self.output_padding and not is_default(self.output_padding, 0) then
    s = s .. ", output_padding=" .. as_pair(self.output_padding)
  end
  if not is_default(self.dilation, 1) then s = s .. ", dilation=" .. as_pair(self.dilation) end
  if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
  if not self.bias then s = s .. ", bias=False" end
  return s
end

function Conv2d:short_repr()
  return string.format("%s %d->%d %dx%d", self.__name, self.in_channels, self.out_channels,
                       self.kernel_size[1], self.kernel_size[2])
end

doc[Conv2d] = [[
nn.Conv2d(in, out, k [, {stride = 1, padding = 0, dilation = 1, groups = 1, bias = true}])
A 2-D convolution over N x in x H x W input, giving N x out x H' x W' with
H' = floor((H + 2*padding - dilation*(k-1) - 1) / stride) + 1.
k, stride, dilation: a number or {h, w}; padding also {top, bottom, left, right}.
Fields: weight (out x in/groups x kh x kw), bias (out, or nil with bias = false).
Initialised as PyTorch: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in/groups*kh*kw.
  conv = nn.Conv2d(3, 16, 3, {stride = 2, padding = 1})]]

return { Conv2d = Conv2d }
