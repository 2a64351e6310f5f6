-- nn/container.lua -- nn.Sequential and nn.ModuleList.
--
-- Both keep their children at integer keys 1..n of the instance (raw
-- fields), so `net[1]`, `#net` and `ipairs(net)` work as on a Lua list and
-- named_parameters() reports "1.weight", "features.3.bias", ...  The
-- children lists of nn.Module hold those integers in order.
-- Invariant: the integer keys are exactly 1..#self, all modules.
local Module = require("nn.module")
local doc = _G.cnn.doc or {}

-- Accepts f(m1, m2, ...) and f{m1, m2, ...}.
local function module_list_args(name, ...)
  local args = table.pack(...)
  if args.n == 1 and type(args[1]) == "table" and not Module.is_module(args[1]) then
    local t = args[1]
    args = { n = #t }
    for i = 1, #t do args[i] = t[i] end
  end
  for i = 1, args.n do
    if not Module.is_module(args[i]) then
      -- level 4: module_list_args <- init <- construct <- the user's call
      error(string.format("%s: argument %d is a %s, not a module", name, i, type(args[i])), 4)
    end
  end
  return args
end

-- ---- Sequential ----------------------------------------------------------------

local Sequential = Module:extend("Sequential")

function Sequential:init(...)
  local args = module_list_args("nn.Sequential", ...)
  for i = 1, args.n do self[i] = args[i] end
end

-- append(m): adds m at the end; returns self (so calls chain).
function Sequential:append(m)
  if not Module.is_module(m) then error("Sequential:append: expected a module", 2) end
  self[#self + 1] = m
  return self
end
Sequential.add = Sequential.append

local ReLU -- nn.activation's, loaded on first use (it requires this file's siblings)

-- Whether children m, r run as one op: a batch norm whose forward is
-- nn.BatchNorm's, then exactly a ReLU, neither with hooks (a hook would see
-- or replace the tensor between them, which the fused op never makes).
function Sequential.fuses_bn_relu(m, r)
  ReLU = ReLU or require("nn.activation").ReLU
  return m.fuses_relu ~= nil and m:fuses_relu() and not m:has_hooks() and Module.is_plain(r, ReLU)
end

-- ---- the blocks Conv2d -> BatchNorm2d -> ReLU -> MaxPool2d, Linear -> ReLU -> Dropout ----

local conv_block = require("nn.conv_block")
local linear_block = require("nn.linear_block")

-- Each child is called in order; a child's error comes back naming it
-- (nn.Module's __call adds the dotted path).  Runs of children become
-- one op where nothing can tell the difference (no hooks, the layers' own
-- forwards; same values and gradients up to rounding):
--  * Conv2d, BatchNorm2d (training), ReLU, MaxPool2d: one node whose
--    activations stay in oneDNN's blocked layouts (nn/conv_block.lua);
--  * Linear, ReLU and a Dropout after them (or none): one node, the bias,
--    relu and mask one pass over the product (nn/linear_block.lua);
--  * a BatchNorm followed by a ReLU: one pass each way
--    (BatchNorm:forward_relu) where fuses_bn_relu allows.
function Sequential:forward(x)
  local i, n = 1, #self
  while i <= n do
    local m = self[i]
    local y = i + 3 <= n and conv_block.run(self, i, x)
    local count
    if not y then y, count = linear_block.run(self, i, x) end
    if y then
      x = y
      i = i + (count or 4)
    elseif i < n and Sequential.fuses_bn_relu(m, self[i + 1]) then
      x = m:call_unhooked(m.forward_relu, x)
      i = i + 2
    else
      x = m(x)
      i = i + 1
    end
  end
  return x
end

doc[Sequential] = [[
nn.Sequential(m1, m2, ...) or nn.Sequential{m1, m2, ...}
Calls its children in order: net(x) = mN(...m2(m1(x))).  net[i] is the i-th
child (1-based), #net their number, net:append(m) adds one.  Parameters are
named "1.weight", "2.bias", ...  An error in a child names it:
"3 (Linear 9216->128): linear: input has ...".
In training, Conv2d, BatchNorm2d, ReLU, MaxPool2d in a row run as one op
(oneDNN's blocked layouts on the CPU; grad_fn ConvBnReluPoolBackward);
Linear, ReLU and a Dropout after them (or none) as one op on the CPU
(grad_fn LinearReluDropoutBackward or LinearReluBackward; the same mask
for one seed), and a BatchNorm followed by a ReLU as one pass, where no
hook is set on them: same values and gradients up to rounding.  A hook
turns this off.]]

-- ---- ModuleList ------------------------------------------------------------------

local ModuleList = Module:extend("ModuleList")

function ModuleList:init(...)
  local args = module_list_args("nn.ModuleList", ...)
  for i = 1, args.n do self[i] = args[i] end
end

function ModuleList:append(m)
  if not Module.is_module(m) then error("ModuleList:append: expected a module", 2) end
  self[#self + 1] = m
  return self
end

-- extend(list): appends every module of a Lua list (or another ModuleList).
function ModuleList:extend_with(list)
  for i = 1, #list do self:append(list[i]) end
  return self
end

function ModuleList:forward()
  error("ModuleList has no forward(): iterate over it in your module's forward", 2)
end

doc[ModuleList] = [[
nn.ModuleList(m1, m2, ...) or nn.ModuleList{m1, m2, ...}
A list of modules whose parameters belong to the enclosing module; it has
no forward.  Use l[i], #l, ipairs(l), l:append(m), l:extend_with{...}:
  function Net:forward(x)
    for _, block in ipairs(self.blocks) do x = block(x) end
    return x
  end]]

return { Sequential = Sequential, ModuleList = ModuleList }
