-- optim/init.lua -- the "optim" module: optimizers and lr schedulers.
--
-- Each optimizer lives in its own file and follows PyTorch's update
-- formulas exactly (written at the top of each file); optim.Optimizer
-- (optim/optimizer.lua) holds the parameter groups, the per-parameter state
-- and the state dict.  Schedulers are in optim.lr_scheduler, and also
-- reachable as optim.StepLR and so on.
local cnn = _G.cnn
local doc = cnn.doc or {}

local optim = {}

optim.Optimizer = require("optim.optimizer")
optim.SGD = require("optim.sgd")
local adam = require("optim.adam")
optim.Adam, optim.AdamW = adam.Adam, adam.AdamW
optim.RMSprop = require("optim.rmsprop")
optim.GradScaler = require("optim.grad_scaler")

optim.lr_scheduler = require("optim.lr_scheduler")
for _, name in ipairs({ "StepLR", "MultiStepLR", "CosineAnnealingLR", "OneCycleLR", "ReduceLROnPlateau" }) do
  optim[name] = optim.lr_scheduler[name]
end

doc[optim] = [[
optim -- optimizers (as torch.optim): SGD, Adam, AdamW, RMSprop.
  opt = optim.SGD(net:parameters(), {lr = 0.1, momentum = 0.9, weight_decay = 5e-4})
  for x, y in loader do
    opt:zero_grad(); F.cross_entropy(net(x), y):backward(); opt:step()
  end
Parameter groups: optim.Adam({{params = a, lr = 1e-3}, {params = b}}, {lr = 1e-4}).
Checkpoints: cnn.save(path, opt:state_dict()); opt:load_state_dict(cnn.load(path)).
Schedulers (optim.lr_scheduler): StepLR, MultiStepLR, CosineAnnealingLR, OneCycleLR,
ReduceLROnPlateau:
  sched = optim.lr_scheduler.StepLR(opt, 30, {gamma = 0.1}); ... sched:step() per epoch
  plateau = optim.lr_scheduler.ReduceLROnPlateau(opt, {patience = 2}); plateau:step(val_loss)]]
doc[optim.lr_scheduler] = [[
optim.lr_scheduler -- StepLR(opt, step_size [, {gamma}]), MultiStepLR(opt, milestones [, {gamma}]),
CosineAnnealingLR(opt, T_max [, {eta_min}]), OneCycleLR(opt, {max_lr =, total_steps =, ...}),
ReduceLROnPlateau(opt [, {mode, factor, patience, threshold, threshold_mode, cooldown, min_lr, eps}]).
sched:step() advances one epoch (one batch for OneCycleLR; ReduceLROnPlateau: sched:step(metric));
sched:get_last_lr() -> {lr, ...}.]]

return optim
