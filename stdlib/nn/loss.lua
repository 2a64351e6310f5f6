-- nn/loss.lua -- the loss modules: CrossEntropyLoss, NLLLoss, MSELoss,
-- L1Loss, SmoothL1Loss, HuberLoss, KLDivLoss, BCELoss, BCEWithLogitsLoss.
--
-- Each is a module whose forward(input, target) calls the F.* loss of the
-- same meaning with the options given at construction (PyTorch's names and
-- defaults, in one table: nn.CrossEntropyLoss{label_smoothing = 0.1}).
-- Tensor options (weight, pos_weight) are buffers, so net:to('cuda') and
-- state_dict carry them as PyTorch's modules do.  Class targets are 1..C.
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local check = require("check")
local doc = cnn.doc or {}

local M = {}

local REDUCTIONS = { mean = true, sum = true, none = true }

-- loss_class(name, fname, keys, tensors, text[, reductions]): a module
-- calling F[fname](input, target, opts) with the options `keys` (those in
-- `tensors` are tensor buffers).
local function loss_class(name, fname, keys, tensors, text, reductions)
  local cls = Module:extend(name)
  local cname = "nn." .. name
  reductions = reductions or REDUCTIONS
  function cls:init(opts)
    opts = check.options(cname, opts, keys, 3)
    local r = opts.reduction == nil and "mean" or opts.reduction
    if not reductions[r] then check.fail(cname, "reduction", "one of the reductions of " .. fname, r, 3) end
    self.opts = {}
    for _, k in ipairs(keys) do
      local v = opts[k]
      if tensors[k] and v ~= nil then
        if not cnn.is_tensor(v) then check.fail(cname, k, "a tensor", v, 3) end
        self:register_buffer(k, v)
      else
        self.opts[k] = v
      end
    end
    self.opts.reduction = r
  end
  function cls:forward(input, target)
    local o = {}
    for k, v in pairs(self.opts) do o[k] = v end
    for k in pairs(tensors) do o[k] = self[k] end
    return F[fname](input, target, o)
  end
  function cls:extra_repr() return "reduction='" .. self.opts.reduction .. "'" end
  doc[cls] = text
  M[name] = cls
  return cls
end

loss_class("CrossEntropyLoss", "cross_entropy", { "weight", "ignore_index", "reduction", "label_smoothing" },
  { weight = true }, [[
nn.CrossEntropyLoss([{weight=, ignore_index=, reduction='mean', label_smoothing=0}])
loss(logits, target): softmax cross-entropy against int64 class labels 1..C,
or against float class probabilities of the logits' shape (F.cross_entropy).]])
loss_class("NLLLoss", "nll_loss", { "weight", "ignore_index", "reduction" }, { weight = true }, [[
nn.NLLLoss([{weight=, ignore_index=, reduction='mean'}])
loss(logp, target): negative log-likelihood of log-probabilities (pair with
nn.LogSoftmax(2)) against int64 class labels 1..C (F.nll_loss).]])
loss_class("MSELoss", "mse_loss", { "reduction" }, {}, [[
nn.MSELoss([{reduction='mean'}])
loss(x, y): mean squared error (F.mse_loss).]])
loss_class("L1Loss", "l1_loss", { "reduction" }, {}, [[
nn.L1Loss([{reduction='mean'}])
loss(x, y): mean absolute error (F.l1_loss).]])
loss_class("SmoothL1Loss", "smooth_l1_loss", { "reduction", "beta" }, {}, [[
nn.SmoothL1Loss([{reduction='mean', beta=1}])
loss(x, y): quadratic below beta, linear above (F.smooth_l1_loss).]])
loss_class("HuberLoss", "huber_loss", { "reduction", "delta" }, {}, [[
nn.HuberLoss([{reduction='mean', delta=1}])
loss(x, y): quadratic below delta, delta-sloped linear above (F.huber_loss).]])
loss_class("KLDivLoss", "kl_div", { "reduction", "log_target" }, {}, [[
nn.KLDivLoss([{reduction='mean', log_target=false}])
loss(logp, target): KL divergence of log-probabilities logp from target;
reduction 'batchmean' gives the true KL per sample (F.kl_div).]],
  { mean = true, batchmean = true, sum = true, none = true })
loss_class("BCELoss", "binary_cross_entropy", { "weight", "reduction" }, { weight = true }, [[
nn.BCELoss([{weight=, reduction='mean'}])
loss(p, y): binary cross-entropy of probabilities p in [0, 1] (pair with
nn.Sigmoid(), or better use nn.BCEWithLogitsLoss) (F.binary_cross_entropy).]])
loss_class("BCEWithLogitsLoss", "binary_cross_entropy_with_logits", { "weight", "reduction", "pos_weight" },
  { weight = true, pos_weight = true }, [[
nn.BCEWithLogitsLoss([{weight=, reduction='mean', pos_weight=}])
loss(x, y): sigmoid + binary cross-entropy, computed stably; pos_weight
weighs the positive term (F.binary_cross_entropy_with_logits).]])

return M
