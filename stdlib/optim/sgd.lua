-- optim/sgd.lua -- optim.SGD: stochastic gradient descent with momentum.
--
-- PyTorch's update, per parameter p with gradient g (all in place):
--   g = g + weight_decay * p                       (if weight_decay ~= 0)
--   buf = g                       on the first step (if momentum ~= 0)
--   buf = momentum * buf + (1 - dampening) * g     afterwards
--   g = nesterov and g + momentum * buf or buf
--   p = p - lr * g
-- State: momentum_buffer (a tensor like p), only when momentum ~= 0.
local cnn = _G.cnn
local Optimizer = require("optim.optimizer")
local doc = cnn.doc or {}

local SGD = Optimizer:extend("SGD", { lr = 1e-3, momentum = 0, dampening = 0,
                                      weight_decay = 0, nesterov = false, maximize = false },
                              { lr = { 0 }, momentum = { 0 }, weight_decay = { 0 } })

-- Types and ranges are checked by the base class (Optimizer:check_hyper).
function SGD:check_group(g)
  if g.nesterov and (g.momentum <= 0 or g.dampening ~= 0) then
    return "nesterov momentum requires a momentum and zero dampening"
  end
end

-- The arithmetic above runs in C, one pass over the parameter
-- (cnn.fused.sgd: elementwise_math.h, the same code as the GPU's).
function SGD:update(p, g, st, group)
  if group.maximize then g = -g end
  local mom = group.momentum
  local first = mom ~= 0 and st.momentum_buffer == nil
  if first then st.momentum_buffer = cnn.zeros_like(p) end
  cnn.fused.sgd(p, g, st.momentum_buffer, group.lr, mom, group.dampening, group.weight_decay,
                group.nesterov, first)
end

doc[SGD] = [[
optim.SGD(params [, {lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false, maximize = false}])
Stochastic gradient descent, as torch.optim.SGD:
  buf = momentum * buf + (1 - dampening) * (g + weight_decay * p);  p = p - lr * buf
params: net:parameters(), or groups {{params = ..., lr = ...}, ...}.
  opt = optim.SGD(net:parameters(), {lr = 0.1, momentum = 0.9})
  opt:zero_grad(); loss:backward(); opt:step()]]

return SGD
