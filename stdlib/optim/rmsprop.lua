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

-- The arithmetic above runs in C, one pass over the parameter
-- (cnn.fused.rmsprop: elementwise_math.h, the same code as the GPU's).
function RMSprop:update(p, g, st, group)
  if st.square_avg == nil then init_state(p, st, group) end
  st.step = st.step + 1
  if group.maximize then g = -g end
  cnn.fused.rmsprop(p, g, st.square_avg, st.grad_avg, st.momentum_buffer, group.lr, group.alpha,
                    group.eps, group.weight_decay, group.momentum, group.centered)
end

doc[RMSprop] = [[
optim.RMSprop(params [, {lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0, centered = false}])
Divides the gradient by a running root-mean-square of recent gradients, as
torch.optim.RMSprop (centered: by the running standard deviation).]]

return RMSprop
