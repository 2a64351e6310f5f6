-- nn/activation.lua -- activation layers: ReLU, LeakyReLU, ELU, GELU,
-- Sigmoid, Tanh, Softmax, LogSoftmax, Hardtanh, ReLU6, SiLU, Hardswish,
-- Hardsigmoid, Mish, Softplus.
--
-- Each is a parameter-free module that calls the F.* function of the same
-- name with its stored option; the per-element math (and its derivative)
-- lives in C.  Softmax and LogSoftmax take a 1-based dim (default -1, the
-- last; use 2 for the channels of N x C x H x W).  Constructors check their
-- option's type (a finite number, an integer dim) with stdlib/check.lua.
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local fmt = require("fmt")
local check = require("check")
local doc = cnn.doc or {}

local M = {}

-- A layer whose forward is F[fname](x) with no option.
local function simple(name, fname, text)
  local cls = Module:extend(name)
  function cls:forward(x) return F[fname](x) end
  doc[cls] = text
  M[name] = cls
  return cls
end

simple("ReLU", "relu", "nn.ReLU()\nmax(x, 0), elementwise.")
simple("Sigmoid", "sigmoid", "nn.Sigmoid()\n1 / (1 + exp(-x)), elementwise.")
simple("Tanh", "tanh", "nn.Tanh()\ntanh(x), elementwise.")

-- ---- with a parameter ------------------------------------------------------------

local LeakyReLU = Module:extend("LeakyReLU")
-- Options come positionally or in a table; a number must be finite (errors
-- point at the user's line: init < construct < caller).
local function option(cls, v, key, default)
  local fname = "nn." .. cls.__name
  if type(v) == "table" then v = check.options(fname, v, { key }, 4)[key] end
  if v == nil then return default end
  v = check.number(fname, key, v, 4) -- not a tail call: it would shift the level
  return v
end

function LeakyReLU:init(negative_slope)
  self.negative_slope = option(LeakyReLU, negative_slope, "negative_slope", 0.01)
end
function LeakyReLU:forward(x) return F.leaky_relu(x, self.negative_slope) end
function LeakyReLU:extra_repr() return "negative_slope=" .. fmt.num(self.negative_slope) end
doc[LeakyReLU] = "nn.LeakyReLU([negative_slope = 0.01])\nx if x > 0 else negative_slope * x."
M.LeakyReLU = LeakyReLU

local ELU = Module:extend("ELU")
function ELU:init(alpha)
  self.alpha = option(ELU, alpha, "alpha", 1.0)
end
function ELU:forward(x) return F.elu(x, self.alpha) end
function ELU:extra_repr() return "alpha=" .. fmt.num(self.alpha + 0.0) end
doc[ELU] = "nn.ELU([alpha = 1])\nx if x > 0 else alpha * (exp(x) - 1)."
M.ELU = ELU

local function softmax_class(name, fname, text)
  local cls = Module:extend(name)
  function cls:init(dim)
    local cname = "nn." .. name
    if type(dim) == "table" then dim = check.options(cname, dim, { "dim" }, 3).dim end
    -- the range depends on the input: F checks it in forward
    dim = check.integer(cname, "dim", dim == nil and -1 or dim, 3)
    if dim == 0 then check.fail(cname, "dim", "a 1-based dim (1, 2, ... or -1, -2, ...)", dim, 3) end
    self.dim = dim
  end
  function cls:forward(x) return F[fname](x, self.dim) end
  function cls:extra_repr() return "dim=" .. self.dim end
  doc[cls] = text
  M[name] = cls
end

softmax_class("Softmax", "softmax",
  "nn.Softmax([dim = -1])\nexp(x) / sum(exp(x)) along dim (1-based; 2 = channels of NCHW).")
softmax_class("LogSoftmax", "log_softmax",
  "nn.LogSoftmax([dim = -1])\nlog(softmax(x)) along dim, computed stably; pair with F.nll_loss.")

-- ---- activations beyond relu/sigmoid/tanh -------------------------------------------
-- Their options come positionally in PyTorch's order or in one table.
-- `inplace` is accepted so that PyTorch code ports as written, but the
-- output is always a new tensor (autograd needs the input unchanged).

-- options_of(cls, keys, defaults, ...) -> {key = value}: numbers finite,
-- inplace a boolean, strings left to the caller; errors at the user's line.
local function options_of(cls, keys, defaults, ...)
  local fname = "nn." .. cls.__name
  local given, n = {}, select("#", ...)
  if n == 1 and type((...)) == "table" then
    given = check.options(fname, (...), keys, 4)
  elseif n > #keys then
    error(string.format("%s takes at most %d arguments (%s), got %d", fname, #keys,
                        table.concat(keys, ", "), n), 4)
  else
    for i, k in ipairs(keys) do given[k] = (select(i, ...)) end
  end
  local o = {}
  for _, k in ipairs(keys) do
    local v = given[k]
    if v == nil then v = defaults[k] end
    if type(defaults[k]) == "number" then check.number(fname, k, v, 4)
    elseif type(defaults[k]) == "boolean" then check.boolean(fname, k, v, 4) end
    o[k] = v
  end
  return o
end

local function inplace_repr(self) return self.inplace and "inplace=True" or "" end

local Hardtanh = Module:extend("Hardtanh")
function Hardtanh:init(...)
  local o = options_of(Hardtanh, { "min_val", "max_val", "inplace" },
                       { min_val = -1.0, max_val = 1.0, inplace = false }, ...)
  if not (o.max_val > o.min_val) then
    error(string.format("nn.Hardtanh: max_val (%s) must be greater than min_val (%s)",
                        fmt.num(o.max_val), fmt.num(o.min_val)), 3)
  end
  self.min_val, self.max_val, self.inplace = o.min_val, o.max_val, o.inplace
end
function Hardtanh:forward(x) return F.hardtanh(x, self.min_val, self.max_val) end
function Hardtanh:extra_repr()
  local s = "min_val=" .. fmt.num(self.min_val + 0.0) .. ", max_val=" .. fmt.num(self.max_val + 0.0)
  return self.inplace and s .. ", inplace=True" or s
end
doc[Hardtanh] = [=[
nn.Hardtanh([min_val = -1 [, max_val = 1]])   (or {min_val=, max_val=, inplace=})
x clamped to [min_val, max_val]; the gradient is 1 strictly inside, 0 at
the limits and beyond (PyTorch's).  max_val must exceed min_val.]=]
M.Hardtanh = Hardtanh

local ReLU6 = Module:extend("ReLU6")
function ReLU6:init(...)
  self.inplace = options_of(ReLU6, { "inplace" }, { inplace = false }, ...).inplace
end
function ReLU6:forward(x) return F.relu6(x) end
ReLU6.extra_repr = inplace_repr
doc[ReLU6] = [[
nn.ReLU6()   (or {inplace=})
min(max(x, 0), 6), elementwise (MobileNetV2's activation); the gradient is
0 at 0 and at 6, as PyTorch's.]]
M.ReLU6 = ReLU6

-- ReLU's `inplace` option and no other
local function inplace_only(name, fname, text)
  local cls = Module:extend(name)
  function cls:init(...) self.inplace = options_of(cls, { "inplace" }, { inplace = false }, ...).inplace end
  function cls:forward(x) return F[fname](x) end
  cls.extra_repr = inplace_repr
  doc[cls] = text
  M[name] = cls
end

inplace_only("SiLU", "silu", "nn.SiLU()   (or {inplace=})\nx * sigmoid(x), elementwise (swish).")
inplace_only("Hardswish", "hardswish", [[
nn.Hardswish()   (or {inplace=})
x * relu6(x + 3) / 6, elementwise (MobileNetV3); the gradient is x/3 + 1/2
on [-3, 3], 0 below, 1 above (PyTorch's).]])
inplace_only("Hardsigmoid", "hardsigmoid", [[
nn.Hardsigmoid()   (or {inplace=})
relu6(x + 3) / 6, elementwise; the gradient is 1/6 strictly inside (-3, 3),
else 0 (PyTorch's).]])
inplace_only("Mish", "mish", "nn.Mish()   (or {inplace=})\nx * tanh(softplus(x)), elementwise.")

local Softplus = Module:extend("Softplus")
function Softplus:init(...)
  local o = options_of(Softplus, { "beta", "threshold" }, { beta = 1.0, threshold = 20.0 }, ...)
  if o.beta == 0 then check.fail("nn.Softplus", "beta", "a non-zero number", 0, 3) end
  self.beta, self.threshold = o.beta, o.threshold
end
function Softplus:forward(x) return F.softplus(x, self.beta, self.threshold) end
function Softplus:extra_repr()
  return "beta=" .. fmt.num(self.beta + 0.0) .. ", threshold=" .. fmt.num(self.threshold + 0.0)
end
doc[Softplus] = [=[
nn.Softplus([beta = 1 [, threshold = 20]])   (or {beta=, threshold=})
log(1 + exp(beta x)) / beta, elementwise; x itself where beta x > threshold
(PyTorch's, for numerical stability).]=]
M.Softplus = Softplus

local GELU = Module:extend("GELU")
function GELU:init(...)
  self.approximate = options_of(GELU, { "approximate" }, { approximate = "none" }, ...).approximate
  if self.approximate ~= "none" and self.approximate ~= "tanh" then
    check.fail("nn.GELU", "approximate", "'none' or 'tanh'", self.approximate, 3)
  end
end
function GELU:forward(x) return F.gelu(x, { approximate = self.approximate }) end
function GELU:extra_repr()
  return self.approximate == "none" and "" or "approximate='" .. self.approximate .. "'"
end
doc[GELU] = [[
nn.GELU([approximate = 'none'])   (or {approximate=})
x * Phi(x) (Phi the normal CDF), elementwise; approximate = 'tanh' uses
0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).]]
M.GELU = GELU

return M
