-- optim/adam.lua -- optim.Adam and optim.AdamW.
--
-- PyTorch's update, per parameter p with gradient g, t = step count:
--   Adam:  g = g + weight_decay * p              (L2 penalty in the gradient)
--   AdamW: p = p * (1 - lr * weight_decay)       (decoupled decay)
--   m = beta1 * m + (1 - beta1) * g
--   v = beta2 * v + (1 - beta2) * g^2
--   vmax = max(vmax, v)                          (amsgrad only; v := vmax)
--   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
-- State: step (a number), exp_avg (m), exp_avg_sq (v), max_exp_avg_sq.
local cnn = _G.cnn
local Optimizer = require("optim.optimizer")
local doc = cnn.doc or {}

-- Types (betas: two finite numbers) and the ranges below are checked by
-- the base class (Optimizer:check_hyper); betas are in [0, 1).
local RANGES = { lr = { 0 }, eps = { 0 }, weight_decay = { 0 } }

local function check_group(self, g)
  local b = g.betas
  if not (b[1] >= 0 and b[1] < 1 and b[2] >= 0 and b[2] < 1) then
    return string.format("betas must be {beta1, beta2} with 0 <= beta < 1, got {%s, %s}", b[1], b[2])
  end
end

local function init_state(p, st, amsgrad)
  st.step = 0
  st.exp_avg = cnn.zeros_like(p)
  st.exp_avg_sq = cnn.zeros_like(p)
  if amsgrad then st.max_exp_avg_sq = cnn.zeros_like(p) end
end

-- The shared update; `decoupled` selects AdamW.  The arithmetic above runs
-- in C, one pass over the parameter (cnn.fused.adam: elementwise_math.h,
-- the same code as the GPU's).
local function adam_update(p, g, st, group, decoupled)
  if st.exp_avg == nil then init_state(p, st, group.amsgrad) end
  st.step = st.step + 1
  if group.maximize then g = -g end
  cnn.fused.adam(p, g, st.exp_avg, st.exp_avg_sq, group.amsgrad and st.max_exp_avg_sq or nil, group.lr,
                 group.betas[1], group.betas[2], group.eps, group.weight_decay, decoupled, st.step)
end

-- A whole group in one call (cnn.fused.adam_many: one pass over all the
-- group's elements, one parallel region), the same arithmetic per element
-- as adam_update above.  items: {p, g, state} per parameter with a gradient.
local function adam_update_group(group, items, decoupled)
  local ps, gs, ms, vs, steps = {}, {}, {}, {}, {}
  local xs = group.amsgrad and {} or nil
  for i, it in ipairs(items) do
    local p, g, st = it[1], it[2], it[3]
    if st.exp_avg == nil then init_state(p, st, group.amsgrad) end
    if xs and st.max_exp_avg_sq == nil then st.max_exp_avg_sq = cnn.zeros_like(p) end
    st.step = st.step + 1
    if group.maximize then g = -g end
    ps[i], gs[i], ms[i], vs[i], steps[i] = p, g, st.exp_avg, st.exp_avg_sq, st.step
    if xs then xs[i] = st.max_exp_avg_sq end
  end
  cnn.fused.adam_many(ps, gs, ms, vs, xs, steps, group.lr, group.betas[1], group.betas[2], group.eps,
                      group.weight_decay, decoupled)
end

local Adam = Optimizer:extend("Adam", { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8,
                                        weight_decay = 0, amsgrad = false, maximize = false }, RANGES)
Adam.check_group = check_group
function Adam:update(p, g, st, group) adam_update(p, g, st, group, false) end
function Adam:update_group(group, items) adam_update_group(group, items, false) end

local AdamW = Optimizer:extend("AdamW", { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8,
                                          weight_decay = 1e-2, amsgrad = false, maximize = false }, RANGES)
AdamW.check_group = check_group
function AdamW:update(p, g, st, group) adam_update(p, g, st, group, true) end
function AdamW:update_group(group, items) adam_update_group(group, items, true) end

doc[Adam] = [[
optim.Adam(params [, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, amsgrad = false}])
Adam with bias correction, as torch.optim.Adam (weight_decay adds
weight_decay * p to the gradient; prefer optim.AdamW for decoupled decay).
  opt = optim.Adam(net:parameters(), {lr = 1e-3})]]
doc[AdamW] = [[
optim.AdamW(params [, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 1e-2, amsgrad = false}])
Adam with decoupled weight decay (p = p * (1 - lr * weight_decay) before the
Adam step), as torch.optim.AdamW.]]

return { Adam = Adam, AdamW = AdamW }
