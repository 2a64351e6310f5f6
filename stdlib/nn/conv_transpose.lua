-- nn/conv_transpose.lua -- nn.ConvTranspose2d: the transposed 2-D convolution
-- (the upsampling layer of autoencoders, U-Nets and GAN generators).
--
-- The layer owns weight (in x out/groups x kh x kw: PyTorch's layout, the
-- transpose of Conv2d's) and an optional bias (out), initialised as PyTorch
-- does: Kaiming-uniform with a = sqrt(5), where fan_in is computed from the
-- weight's dim 2 (out/groups * kh * kw), exactly as PyTorch computes it.  It
-- calls F.conv_transpose2d, where the arithmetic lives: the input-gradient
-- of a convolution (oneDNN on the CPU, cuDNN's backward-data on a GPU).
-- Options use PyTorch's names: stride, padding, output_padding, dilation,
-- groups, bias, padding_mode (only 'zeros', as PyTorch).  forward(x,
-- output_size) picks output_padding so the output has that size, as
-- PyTorch's forward(input, output_size) does.
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local Conv2d = require("nn.conv").Conv2d
local check = require("check")
local doc = cnn.doc or {}

local ConvTranspose2d = Module:extend("ConvTranspose2d")

local NAME = "nn.ConvTranspose2d"
local OPTIONS = { "stride", "padding", "output_padding", "dilation", "groups", "bias", "padding_mode" }

local function pair(v)
  if type(v) == "table" then return { v[1], v[2] or v[1] } end
  return { v, v }
end

-- Checks every argument and returns them normalised to pairs {h, w}
-- (errors point at the user's line, 4 levels up).
local function check_args(cin, cout, k, opts)
  local L = 4
  opts = check.options(NAME, opts, OPTIONS, L)
  local a = {}
  a.cin = check.integer(NAME, "in_channels", cin, L, 1)
  a.cout = check.integer(NAME, "out_channels", cout, L, 1)
  if k == nil then error(NAME .. "(in, out, k): missing kernel_size (a number or {h, w})", L) end
  a.k = pair(check.ints(NAME, "kernel_size", k, L, 1, { 2 }))
  a.stride = pair(check.ints(NAME, "stride", opts.stride or 1, L, 1, { 2 }))
  a.padding = pair(check.ints(NAME, "padding", opts.padding or 0, L, 0, { 2 }))
  a.output_padding = pair(check.ints(NAME, "output_padding", opts.output_padding or 0, L, 0, { 2 }))
  a.dilation = pair(check.ints(NAME, "dilation", opts.dilation or 1, L, 1, { 2 }))
  a.groups = check.integer(NAME, "groups", opts.groups or 1, L, 1)
  a.bias = check.boolean(NAME, "bias", opts.bias, L) ~= false
  local mode = opts.padding_mode or "zeros"
  if mode ~= "zeros" then
    error(string.format("%s: only padding_mode = 'zeros' is supported (as in PyTorch), got %s",
                        NAME, tostring(mode)), L)
  end
  if a.cin % a.groups ~= 0 or a.cout % a.groups ~= 0 then
    error(string.format("%s: in (%d) and out (%d) must be divisible by groups (%d)",
                        NAME, a.cin, a.cout, a.groups), L)
  end
  for i = 1, 2 do
    if a.output_padding[i] >= a.stride[i] and a.output_padding[i] >= a.dilation[i] then
      error(string.format("%s: output_padding (%d) must be smaller than either stride (%d) or dilation (%d)",
                          NAME, a.output_padding[i], a.stride[i], a.dilation[i]), L)
    end
  end
  return a
end

function ConvTranspose2d:init(in_channels, out_channels, kernel_size, opts)
  local a = check_args(in_channels, out_channels, kernel_size, opts)
  self.in_channels, self.out_channels, self.kernel_size = a.cin, a.cout, a.k
  self.stride, self.padding, self.output_padding = a.stride, a.padding, a.output_padding
  self.dilation, self.groups = a.dilation, a.groups
  local k = self.kernel_size
  self:register_parameter("weight", check.call(NAME, 3, cnn.empty, a.cin, a.cout // a.groups, k[1], k[2]))
  self:register_parameter("bias", a.bias and cnn.empty(a.cout) or nil)
  self:reset_parameters()
end

-- PyTorch's default initialisation: Conv2d's own (Kaiming-uniform, a =
-- sqrt(5); the bias within 1/sqrt(fan_in)), fan_in from the weight's dim 2.
ConvTranspose2d.reset_parameters = Conv2d.reset_parameters

-- The smallest output size along spatial dim i (1: height, 2: width) for
-- an input of size n: the formula with output_padding 0.
function ConvTranspose2d:min_output_size(n, i)
  return (n - 1) * self.stride[i] - 2 * self.padding[i] + self.dilation[i] * (self.kernel_size[i] - 1) + 1
end

-- output_padding giving output_size {h, w} (PyTorch's _output_padding):
-- each size must lie in [min, min + max(stride, dilation) - 1].
function ConvTranspose2d:output_padding_for(x, output_size)
  local size = pair(check.ints(NAME, "output_size", output_size, 4, 1, { 2 }))
  local op = {}
  for i = 1, 2 do
    local lo = self:min_output_size(x:size(x:dim() - 2 + i), i)
    local hi = lo + math.max(self.stride[i], self.dilation[i]) - 1
    if size[i] < lo or size[i] > hi then
      error(string.format("%s: requested output size %d (dim %d) is not in the valid range %d..%d for input %s",
                          NAME, size[i], i, lo, hi, table.concat(x.shape, "x")), 3)
    end
    op[i] = size[i] - lo
  end
  return op
end

function ConvTranspose2d:forward(x, output_size)
  local op = self.output_padding
  if output_size ~= nil and cnn.is_tensor(x) and x:dim() >= 2 then op = self:output_padding_for(x, output_size) end
  return F.conv_transpose2d(x, self.weight, self.bias, {
    stride = self.stride, padding = self.padding, output_padding = op,
    dilation = self.dilation, groups = self.groups })
end

-- Input height/width that gives an output of oh x ow (for MACs in summary).
function ConvTranspose2d:input_size_for(oh, ow)
  local function inv(o, i)
    return (o - 1 + 2 * self.padding[i] - self.dilation[i] * (self.kernel_size[i] - 1) - self.output_padding[i])
           // self.stride[i] + 1
  end
  return inv(oh, 1), inv(ow, 2)
end

-- Printing as PyTorch does: Conv2d's methods (they print output_padding too).
ConvTranspose2d.extra_repr = Conv2d.extra_repr
ConvTranspose2d.short_repr = Conv2d.short_repr

doc[ConvTranspose2d] = [[
nn.ConvTranspose2d(in, out, k [, {stride = 1, padding = 0, output_padding = 0, dilation = 1,
                                  groups = 1, bias = true, padding_mode = 'zeros'}])
The transposed 2-D convolution (PyTorch's): N x in x H x W gives N x out x H' x W' with
H' = (H-1)*stride - 2*padding + dilation*(k-1) + output_padding + 1.
k, stride, padding, output_padding, dilation: a number or {h, w}; output_padding must
be smaller than stride or dilation.  m(x, {h, w}) picks output_padding for that size.
Fields: weight (in x out/groups x kh x kw), bias (out, or nil with bias = false).
Initialised as PyTorch: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = out/groups*kh*kw.
  up = nn.ConvTranspose2d(64, 32, 2, {stride = 2})   -- doubles H and W]]

return { ConvTranspose2d = ConvTranspose2d }
