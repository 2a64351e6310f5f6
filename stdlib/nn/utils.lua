-- nn/utils.lua -- nn.utils: gradient clipping.
--
-- clip_grad_norm(params, max_norm [, norm_type = 2]) treats the gradients
-- of all parameters as one long vector: total = (sum_i ||g_i||_p^p)^(1/p)
-- (max_i max|g_i| for norm_type = math.huge), and when total > max_norm
-- scales every gradient in place by max_norm / (total + 1e-6), as PyTorch.
-- Parameters without a gradient are skipped.  Returns total (a number).
-- max_norm and clip must be numbers >= 0 (NaN is an error, not a no-op).
local cnn = _G.cnn
local doc = cnn.doc or {}

local check = require("check")

local utils = {}

-- params: a list of tensors, one tensor, or a module.  Errors point at the
-- user's line (param_list < clip function < caller).
local function param_list(params, fname)
  if cnn.is_tensor(params) then return { params } end
  if type(params) == "table" and type(params.parameters) == "function" then
    return params:parameters()
  end
  if type(params) ~= "table" then
    check.fail(fname, "params", "a list of tensors, a tensor or a module", params, 3)
  end
  for i, t in ipairs(params) do
    if not cnn.is_tensor(t) then check.fail(fname, "params[" .. i .. "]", "a tensor", t, 3) end
  end
  return params
end

local function total_norm(grads, p)
  if p == math.huge then
    local m = 0
    for _, g in ipairs(grads) do m = math.max(m, g:abs():max():item()) end
    return m
  end
  local s = 0
  for _, g in ipairs(grads) do s = s + g:norm(p):item() ^ p end
  return s ^ (1 / p)
end

function utils.clip_grad_norm(params, max_norm, norm_type)
  local fname = "nn.utils.clip_grad_norm"
  max_norm = check.number(fname, "max_norm", max_norm, 2, 0)
  local p = norm_type or 2
  if p ~= math.huge then p = check.number(fname, "norm_type", p, 2, 0) end
  if p <= 0 then check.fail(fname, "norm_type", "a positive number or math.huge", p, 2) end
  local grads = {}
  for _, t in ipairs(param_list(params, fname)) do
    if t.grad ~= nil then grads[#grads + 1] = t.grad end
  end
  if #grads == 0 then return 0.0 end
  local total = total_norm(grads, p)
  local coef = max_norm / (total + 1e-6)
  if coef < 1 then
    cnn.no_grad(function()
      for _, g in ipairs(grads) do g:mul_(coef) end
    end)
  end
  return total
end
utils.clip_grad_norm_ = utils.clip_grad_norm

-- clip_grad_value(params, clip): clamps every gradient to [-clip, clip].
function utils.clip_grad_value(params, clip)
  clip = check.number("nn.utils.clip_grad_value", "clip", clip, 2, 0)
  local list = param_list(params, "nn.utils.clip_grad_value")
  cnn.no_grad(function()
    for _, t in ipairs(list) do
      if t.grad ~= nil then t.grad:clamp_(-clip, clip) end
    end
  end)
end
utils.clip_grad_value_ = utils.clip_grad_value

doc[utils] = "nn.utils -- clip_grad_norm(params, max_norm [, norm_type]), clip_grad_value(params, clip)"
doc[utils.clip_grad_norm] = [[
nn.utils.clip_grad_norm(params, max_norm [, norm_type = 2]) -> total_norm
Norm of all gradients together; if above max_norm, scales them all in place
so that it becomes max_norm.  params: a list, a tensor or a module.
Call between loss:backward() and opt:step().  norm_type = math.huge: max |g|.]]
doc[utils.clip_grad_value] = [[
nn.utils.clip_grad_value(params, clip)
Clamps every gradient element into [-clip, clip], in place.]]

return utils
