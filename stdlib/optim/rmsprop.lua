-- optim/rmsprop.lua -- optim.RMSprop.
--
-- PyTorch's update, per parameter p with gradient g:
--   g = g + weight_decay * p
--   sq = alpha * sq + (1 - alpha) * g^2
--   centered:  ga = alpha * ga + (1 - alpha) * g;  avg = sqrt(sq - ga^2) + eps
--   otherwise: avg = sqrt(sq) + eps
--   momentum > 0: buf = momentum * buf + g / avg;  p = p - lr * buf
--   otherwise:    p = p - lr * g / avg
-- State: step, square_avg, momentum_buffer (momentum > 0), grad_avg (centered).
local cnn = _G.cnn
local Optimizer = require("optim.optimizer")
local doc = cnn.doc or {}

-- Types and these ranges are checked by the base class (Optimizer:check_hyper).
local RMSprop = Optimizer:extend("RMSprop", { lr = 1e-2, alpha = 0.99, eps = 1e-8,
  weight_decay = 0, momentum = 0, centered = false, maximize = false },
  { lr = { 0 }, alpha = { 0 }, momentum = { 0 }, eps = { 0 }, weight_decay = { 0 } })

local function init_state(p, st, group)
  st.step = 0
  st.square_avg = cnn.zeros_like(p)
  if group.momentum > 0 then st.momentum_buffer = cnn.zeros_like(p) end
  if group.centered then st.grad_avg = cnn.zeros_like(p) end
end

function RMSprop:update(p, g, st, group)
  if st.square_avg == nil then init_state(p, st, group) end
  st.step = st.step + 1
  if group.maximize then g = -g end
  if group.weight_decay ~= 0 then g = g + p * group.weight_decay end
  local alpha, sq = group.alpha, st.square_avg
  sq:mul_(alpha)
  sq:add_(g * g * (1 - alpha))
  local avg
  if group.centered then
    local ga = st.grad_avg
    ga:mul_(alpha)
    ga:add_(g * (1 - alpha))
    avg = (sq - ga * ga):sqrt() + group.eps
  else
    avg = sq:sqrt() + group.eps
  end
  if group.momentum > 0 then
    local buf = st.momentum_buffer
    buf:mul_(group.momentum)
    buf:add_(g / avg)
    p:add_(buf * -group.lr)
  else
    p:add_(g / avg * -group.lr)
  end
end

doc[RMSprop] = [[
optim.RMSprop(params [, {lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0, centered = false}])
Divides the gradient by a running root-mean-square of recent gradients, as
torch.optim.RMSprop (centered: by the running standard deviation).]]

return RMSprop
