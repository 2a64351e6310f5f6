-- nn/conv.lua -- nn.Conv2d and nn.Conv1d: convolution layers over NCHW
-- images and NCL sequences.
--
-- The layer owns weight (out x in/groups x kh x kw, or out x in/groups x k)
-- and an optional bias (out), initialised as PyTorch does (Kaiming-uniform
-- with a = sqrt(5), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for both), and
-- calls F.conv2d or F.conv1d, where the arithmetic lives (oneDNN, im2col +
-- SGEMM or the naive loop; conv1d is conv2d over a unit height).  Options
-- use PyTorch's names: stride, padding, dilation, groups, bias,
-- padding_mode.  stride/padding/dilation are kept as the user gave them (a
-- number, a table, or for padding 'same'/'valid') and handed to F
-- unchanged; kernel_size is always a table ({kh, kw} or {k}).
-- padding_mode 'reflect', 'replicate' or 'circular' pads explicitly with
-- F.pad first and convolves with padding 0, as PyTorch does.
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
local Conv1d = Module:extend("Conv1d")

local OPTIONS = { "stride", "padding", "dilation", "groups", "bias", "padding_mode" }
local PADDING_MODES = { zeros = true, reflect = true, replicate = true, circular = true }

-- What differs between the two classes: spatial dims, the forms of a
-- "pair" option, the forms padding may take, the functional op.
local SPEC = {
  [Conv2d] = { name = "nn.Conv2d", dims = 2, pair = { 2 }, pad = { 2, 4 }, op = "conv2d",
               kform = "a number or {h, w}" },
  [Conv1d] = { name = "nn.Conv1d", dims = 1, pair = { 1 }, pad = { 1 }, op = "conv1d", kform = "a number" },
}

-- The SPEC of m's class (or of the one it extends).
local function spec_of(m)
  local c = getmetatable(m)
  while c and not SPEC[c] do c = rawget(c, "super") end
  return SPEC[c] or SPEC[Conv2d]
end

-- padding: a number/table as check.ints takes it, or 'same' (stride 1
-- only, as PyTorch) or 'valid'.
local function check_padding(sp, v, stride, L)
  if type(v) ~= "string" then return check.ints(sp.name, "padding", v, L + 1, 0, sp.pad) end
  if v ~= "same" and v ~= "valid" then
    error(string.format("%s: padding must be a number, a table, 'same' or 'valid', got '%s'", sp.name, v), L + 1)
  end
  local strided = type(stride) == "table" and (stride[1] ~= 1 or (stride[2] or 1) ~= 1) or
                  type(stride) ~= "table" and stride ~= 1
  if v == "same" and strided then
    error(sp.name .. ": padding='same' is not supported for strided convolutions", L + 1)
  end
  return v
end

-- Checks every argument (type, NaN, range; errors point at the user's line,
-- 4 levels up: check_args < init < construct < caller) and returns them
-- normalised: kernel_size as a table, the others as the user gave them.
local function check_args(sp, cin, cout, k, opts)
  local L, NAME = 4, sp.name
  opts = check.options(NAME, opts, OPTIONS, L)
  local a = {}
  a.cin = check.integer(NAME, "in_channels", cin, L, 1)
  a.cout = check.integer(NAME, "out_channels", cout, L, 1)
  if k == nil then error(NAME .. "(in, out, k): missing kernel_size (" .. sp.kform .. ")", L) end
  a.k = check.ints(NAME, "kernel_size", k, L, 1, sp.pair)
  if type(a.k) ~= "table" then a.k = sp.dims == 2 and { a.k, a.k } or { a.k } end
  a.stride = check.ints(NAME, "stride", opts.stride or 1, L, 1, sp.pair)
  a.padding = check_padding(sp, opts.padding or 0, a.stride, L)
  a.dilation = check.ints(NAME, "dilation", opts.dilation or 1, L, 1, sp.pair)
  a.groups = check.integer(NAME, "groups", opts.groups or 1, L, 1)
  a.bias = check.boolean(NAME, "bias", opts.bias, L) ~= false
  a.padding_mode = opts.padding_mode or "zeros"
  if not PADDING_MODES[a.padding_mode] then
    error(string.format("%s: padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', got %s",
                        NAME, tostring(a.padding_mode)), L)
  end
  if a.cin % a.groups ~= 0 or a.cout % a.groups ~= 0 then
    error(string.format("%s: in (%d) and out (%d) must be divisible by groups (%d)",
                        NAME, a.cin, a.cout, a.groups), L)
  end
  return a
end

-- Conv2d:init and Conv1d:init (errors point 4 levels up: see check_args).
local function conv_init(self, in_channels, out_channels, kernel_size, opts)
  local sp = spec_of(self)
  local a = check_args(sp, in_channels, out_channels, kernel_size, opts)
  self.in_channels, self.out_channels = a.cin, a.cout
  self.kernel_size = a.k
  self.stride, self.padding, self.dilation, self.groups = a.stride, a.padding, a.dilation, a.groups
  self.padding_mode = a.padding_mode
  local k = self.kernel_size
  -- a size too large to allocate is reported as the layer's error
  self:register_parameter("weight", check.call(sp.name, 3, cnn.empty, a.cout, a.cin // a.groups, table.unpack(k)))
  self:register_parameter("bias", a.bias and cnn.empty(a.cout) or nil)
  self:reset_parameters()
end

Conv2d.init = conv_init

-- PyTorch's default initialisation.
function Conv2d:reset_parameters()
  init.kaiming_uniform_(self.weight, { a = math.sqrt(5) })
  if self.bias then
    local fan_in = init.calculate_fan_in_and_fan_out(self.weight)
    local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
    init.uniform_(self.bias, -bound, bound)
  end
end

-- The explicit pads {left, right [, top, bottom]} of a padding_mode other
-- than 'zeros' (F.pad's order): PyTorch's split for 'same' (the odd pixel
-- to the right/bottom), {top, bottom, left, right} for a table of 4.
local function explicit_pads(self)
  local p, k, d = self.padding, self.kernel_size, self.dilation
  local dims = #k
  local per_dim = {} -- {lo, hi} per spatial dim, in order (h, w) or (l)
  for i = 1, dims do
    local di = type(d) == "table" and d[i] or d
    if p == "same" then
      local total = di * (k[i] - 1)
      per_dim[i] = { total // 2, total - total // 2 }
    elseif p == "valid" then
      per_dim[i] = { 0, 0 }
    elseif type(p) == "table" and #p == 4 then
      per_dim[i] = { p[2 * i - 1], p[2 * i] }
    else
      local pi = type(p) == "table" and p[i] or p
      per_dim[i] = { pi, pi }
    end
  end
  local pads = {}
  for i = dims, 1, -1 do pads[#pads + 1] = per_dim[i][1]; pads[#pads + 1] = per_dim[i][2] end
  return pads
end

-- the ONNX exporter pads as forward does (stdlib/onnx/export_layers.lua)
Conv2d.explicit_pads = explicit_pads

function Conv2d:forward(x)
  local sp = spec_of(self)
  local padding = self.padding
  if self.padding_mode ~= "zeros" then
    x = F.pad(x, explicit_pads(self), self.padding_mode)
    padding = 0
  end
  return F[sp.op](x, self.weight, self.bias, {
    stride = self.stride, padding = padding,
    dilation = self.dilation, groups = self.groups })
end

local function is_default(v, d)
  if type(v) ~= "table" then return v == d end
  for _, e in ipairs(v) do if e ~= d then return false end end
  return true
end

local function as_pair(v, dims)
  if type(v) == "string" then return v end
  if type(v) == "number" then v = dims == 1 and { v } or { v, v } end
  return fmt.pair(v)
end

function Conv2d:extra_repr()
  local dims = #self.kernel_size
  local s = string.format("%d, %d, kernel_size=%s, stride=%s", self.in_channels,
    self.out_channels, fmt.pair(self.kernel_size), as_pair(self.stride, dims))
  if not is_default(self.padding, 0) then s = s .. ", padding=" .. as_pair(self.padding, dims) end
  -- output_padding: nn.ConvTranspose2d shares this method
  if self.output_padding and not is_default(self.output_padding, 0) then
    s = s .. ", output_padding=" .. as_pair(self.output_padding, dims)
  end
  if not is_default(self.dilation, 1) then s = s .. ", dilation=" .. as_pair(self.dilation, dims) end
  if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
  if not self.bias then s = s .. ", bias=False" end
  if self.padding_mode and self.padding_mode ~= "zeros" then s = s .. ", padding_mode=" .. self.padding_mode end
  return s
end

function Conv2d:short_repr()
  return string.format("%s %d->%d %s", self.__name, self.in_channels, self.out_channels,
                       table.concat(self.kernel_size, "x"))
end

doc[Conv2d] = [[
nn.Conv2d(in, out, k [, {stride = 1, padding = 0, dilation = 1, groups = 1, bias = true,
                         padding_mode = 'zeros'}])
A 2-D convolution over N x in x H x W input, giving N x out x H' x W' with
H' = floor((H + 2*padding - dilation*(k-1) - 1) / stride) + 1.
k, stride, dilation: a number or {h, w}; padding also {top, bottom, left, right},
'valid' (none) or 'same' (stride 1; H' = H, the odd pixel to the bottom/right).
padding_mode 'reflect', 'replicate' or 'circular' pads with F.pad, then convolves.
Fields: weight (out x in/groups x kh x kw), bias (out, or nil with bias = false).
Initialised as PyTorch: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in/groups*kh*kw.
  conv = nn.Conv2d(3, 16, 3, {stride = 2, padding = 1})]]

-- ---- Conv1d: the same layer over N x in x L ------------------------

Conv1d.init = conv_init
Conv1d.reset_parameters = Conv2d.reset_parameters
Conv1d.forward = Conv2d.forward
Conv1d.explicit_pads = explicit_pads
Conv1d.extra_repr = Conv2d.extra_repr
Conv1d.short_repr = Conv2d.short_repr

doc[Conv1d] = [[
nn.Conv1d(in, out, k [, {stride = 1, padding = 0, dilation = 1, groups = 1, bias = true,
                         padding_mode = 'zeros'}])
A 1-D convolution over N x in x L input, giving N x out x L' with
L' = floor((L + 2*padding - dilation*(k-1) - 1) / stride) + 1; runs as Conv2d
over a unit height.  padding: a number, 'valid' or 'same' (stride 1; L' = L, the
odd element to the right); padding_mode as nn.Conv2d.
Fields: weight (out x in/groups x k), bias (out, or nil with bias = false).
  conv = nn.Conv1d(16, 32, 5, {padding = 'same'})]]

return { Conv2d = Conv2d, Conv1d = Conv1d }
