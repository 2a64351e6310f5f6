-- nn/linear.lua -- nn.Linear: y = x W^T + b over the last dimension.
--
-- Owns weight (out x in) and an optional bias (out), initialised as
-- PyTorch (Kaiming-uniform with a = sqrt(5): U(-1/sqrt(in), 1/sqrt(in)) for
-- both).  The product is F.linear (OpenBLAS); a wrong input size raises
-- F.linear's message, which nn.Module prefixes with the layer's path.
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local fmt = require("fmt")
local init = require("nn.weight_init")
local check = require("check")
local doc = cnn.doc or {}

local Linear = Module:extend("Linear")

local NAME = "nn.Linear"

function Linear:init(in_features, out_features, opts)
  -- errors point at the user's line: init < construct < caller
  opts = check.options(NAME, opts, { "bias" }, 3)
  in_features = check.integer(NAME, "in_features", in_features, 3, 1)
  out_features = check.integer(NAME, "out_features", out_features, 3, 1)
  local bias = check.boolean(NAME, "bias", opts.bias, 3) ~= false
  self.in_features, self.out_features = in_features, out_features
  self:register_parameter("weight", check.call(NAME, 3, cnn.empty, out_features, in_features))
  if bias then
    self:register_parameter("bias", cnn.empty(out_features))
  else
    self:register_parameter("bias", nil)
  end
  self:reset_parameters()
end

function Linear:reset_parameters()
  init.kaiming_uniform_(self.weight, { a = math.sqrt(5) })
  if self.bias then
    local bound = 1 / math.sqrt(self.in_features)
    init.uniform_(self.bias, -bound, bound)
  end
end

function Linear:forward(x)
  return F.linear(x, self.weight, self.bias)
end

function Linear:extra_repr()
  return string.format("in_features=%d, out_features=%d, bias=%s",
    self.in_features, self.out_features, fmt.bool(self.bias ~= nil))
end

function Linear:short_repr()
  return string.format("Linear %d->%d", self.in_features, self.out_features)
end

doc[Linear] = [[
nn.Linear(in, out [, {bias = true}])
y = x W^T + b over the last dim: input ... x in, output ... x out.
Fields: weight (out x in), bias (out, or nil with bias = false).
Initialised as PyTorch: U(-1/sqrt(in), 1/sqrt(in)).
  fc = nn.Linear(64 * 7 * 7, 128)]]

return { Linear = Linear }
