-- nn/flatten.lua -- nn.Flatten and nn.Identity, the shape-only layers.
-- Flatten's dims are 1-based and inclusive: the default start_dim = 2 keeps
-- the batch dim (PyTorch's start_dim=1 counted from 0), end_dim = -1 the last.
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local check = require("check")
local doc = cnn.doc or {}

local Flatten = Module:extend("Flatten")

-- A 1-based dim, negative from the end; its range depends on the input
-- (F.flatten checks it).  Errors point at the user's line (level 4).
local function dim_arg(what, d, default)
  if d == nil then return default end
  d = check.integer("nn.Flatten", what, d, 4)
  if d == 0 then check.fail("nn.Flatten", what, "a 1-based dim (1, 2, ... or -1, -2, ...)", d, 4) end
  return d
end

function Flatten:init(start_dim, end_dim)
  if type(start_dim) == "table" then
    local o = check.options("nn.Flatten", start_dim, { "start_dim", "end_dim" }, 3)
    start_dim, end_dim = o.start_dim, o.end_dim
  end
  self.start_dim = dim_arg("start_dim", start_dim, 2)
  self.end_dim = dim_arg("end_dim", end_dim, -1)
end

function Flatten:forward(x)
  return F.flatten(x, self.start_dim, self.end_dim)
end

function Flatten:extra_repr()
  return string.format("start_dim=%d, end_dim=%d", self.start_dim, self.end_dim)
end

doc[Flatten] = [==[
nn.Flatten([start_dim = 2 [, end_dim = -1]])
Merges dims start_dim..end_dim (1-based, inclusive): N x C x H x W -> N x (C*H*W).]==]

local Identity = Module:extend("Identity")

function Identity:forward(x) return x end

doc[Identity] = "nn.Identity()\nReturns its input unchanged (a placeholder, e.g. to remove a layer)."

return { Flatten = Flatten, Identity = Identity }
