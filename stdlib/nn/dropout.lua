-- nn/dropout.lua -- nn.Dropout: zeroes elements with probability p while
-- training and scales the rest by 1/(1-p); the identity in eval mode.
-- The mask is drawn by F.dropout from the global generator (cnn.manual_seed).
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local fmt = require("fmt")
local check = require("check")
local doc = cnn.doc or {}

local Dropout = Module:extend("Dropout")

function Dropout:init(p)
  if type(p) == "table" then p = check.options("nn.Dropout", p, { "p" }, 3).p end
  -- a probability in [0, 1]; NaN fails (errors point at the user's line)
  self.p = check.number("nn.Dropout", "p", p == nil and 0.5 or p, 3, 0, 1)
end

function Dropout:forward(x)
  return F.dropout(x, self.p, self.training)
end

function Dropout:extra_repr()
  return "p=" .. fmt.num(self.p + 0.0) .. ", inplace=False"
end

doc[Dropout] = [[
nn.Dropout([p = 0.5])
Training: each element is zeroed with probability p, the others multiplied
by 1/(1-p), so the expected value is unchanged.  Eval: the identity.]]

-- nn.Dropout2d: whole channels, F.dropout2d
local Dropout2d = Module:extend("Dropout2d")
function Dropout2d:init(p)
  if type(p) == "table" then p = check.options("nn.Dropout2d", p, { "p" }, 3).p end
  self.p = check.number("nn.Dropout2d", "p", p == nil and 0.5 or p, 3, 0, 1)
end
function Dropout2d:forward(x) return F.dropout2d(x, self.p, self.training) end
Dropout2d.extra_repr = Dropout.extra_repr
doc[Dropout2d] = [[
nn.Dropout2d([p = 0.5])
Training: each channel of N x C x H x W input is zeroed with probability p,
the others multiplied by 1/(1-p).  Eval: the identity.]]

return { Dropout = Dropout, Dropout2d = Dropout2d }
