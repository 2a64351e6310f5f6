-- nn/activation.lua -- activation layers: ReLU, LeakyReLU, ELU, GELU,
-- Sigmoid, Tanh, Softmax, LogSoftmax.
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
simple("GELU", "gelu", "nn.GELU()\nx * Phi(x) (Phi the normal CDF), elementwise.")
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

return M
