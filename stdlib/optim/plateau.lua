-- optim/plateau.lua -- optim.lr_scheduler.ReduceLROnPlateau: lowers the
-- learning rates when a metric stops improving (as torch.optim's).
--
-- Unlike the closed-form schedulers (optim/lr_scheduler.lua) it reacts to
-- what it is told: sched:step(metric) once per epoch with the validation
-- loss (mode 'min') or accuracy (mode 'max').  PyTorch's rules, exactly:
--   better(a, best)   rel/min: a < best * (1 - threshold)
--                     abs/min: a < best - threshold
--                     rel/max: a > best * (1 + threshold)
--                     abs/max: a > best + threshold
--   step(metric)      last_epoch += 1
--                     better -> best = metric, num_bad_epochs = 0
--                     else   -> num_bad_epochs += 1
--                     in cooldown (cooldown_counter > 0): cooldown_counter -= 1,
--                       num_bad_epochs = 0
--                     num_bad_epochs > patience -> every group's lr becomes
--                       max(lr * factor, min_lr[i]) unless that changes it by
--                       eps or less; cooldown_counter = cooldown,
--                       num_bad_epochs = 0
-- best starts at +inf (min) or -inf (max).  The lrs are read from the groups
-- at every step, so another scheduler or the user may change them too.
local cnn = _G.cnn
local check = require("check")
local class = require("class")
local doc = cnn.doc or {}

local NAME = "optim.lr_scheduler.ReduceLROnPlateau"
local OPTIONS = { "mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "eps" }

-- min_lr: one number for every group, or a list with one per group.
local function min_lrs(v, n, level)
  local out = {}
  if type(v) == "table" then
    if #v ~= n then
      error(string.format("%s: min_lr has %d entries but the optimizer has %d parameter groups",
        NAME, #v, n), level + 1)
    end
    for i = 1, n do out[i] = check.number(NAME, "min_lr[" .. i .. "]", v[i], level + 1, 0) end
  else
    local x = check.number(NAME, "min_lr", v, level + 1, 0)
    for i = 1, n do out[i] = x end
  end
  return out
end

local function check_choice(what, v, a, b, level)
  if v ~= a and v ~= b then check.fail(NAME, what, string.format("'%s' or '%s'", a, b), v, level + 1) end
  return v
end

-- Checks the options and sets the fields (errors at the user's line:
-- setup < construct < caller).
local function setup(self, o)
  local L = 3
  self.mode = check_choice("mode", o.mode or "min", "min", "max", L)
  self.factor = check.number(NAME, "factor", o.factor or 0.1, L, 0)
  if self.factor >= 1 then check.fail(NAME, "factor", "a number < 1", self.factor, L) end
  self.patience = check.integer(NAME, "patience", o.patience or 10, L, 0)
  self.threshold = check.number(NAME, "threshold", o.threshold or 1e-4, L, 0)
  self.threshold_mode = check_choice("threshold_mode", o.threshold_mode or "rel", "rel", "abs", L)
  self.cooldown = check.integer(NAME, "cooldown", o.cooldown or 0, L, 0)
  self.min_lrs = min_lrs(o.min_lr or 0, #self.optimizer.param_groups, L)
  self.eps = check.number(NAME, "eps", o.eps or 1e-8, L, 0)
end

local function construct(cls, optimizer, opts)
  if type(optimizer) ~= "table" or optimizer.param_groups == nil then
    error(NAME .. ": the first argument must be an optimizer", 2)
  end
  local self = setmetatable({ optimizer = optimizer }, cls)
  setup(self, check.options(NAME, opts, OPTIONS, 2))
  self.last_epoch = 0
  self.best = self.mode == "min" and math.huge or -math.huge
  self.num_bad_epochs, self.cooldown_counter = 0, 0
  self._last_lr = {}
  for i, g in ipairs(optimizer.param_groups) do self._last_lr[i] = g.lr end
  return self
end

local ReduceLROnPlateau = class.new("ReduceLROnPlateau", construct)

function ReduceLROnPlateau:is_better(a, best)
  local t = self.threshold
  if self.mode == "min" then
    if self.threshold_mode == "rel" then return a < best * (1 - t) end
    return a < best - t
  end
  if self.threshold_mode == "rel" then return a > best * (1 + t) end
  return a > best + t
end

function ReduceLROnPlateau:reduce_lr()
  for i, g in ipairs(self.optimizer.param_groups) do
    local new_lr = math.max(g.lr * self.factor, self.min_lrs[i])
    if g.lr - new_lr > self.eps then g.lr = new_lr end
  end
end

-- step(metric): one epoch's value of the watched metric (a number or a
-- one-element tensor).
function ReduceLROnPlateau:step(metric)
  if cnn.is_tensor(metric) then metric = metric:item() end
  -- NaN never improves (it fails every comparison), as in PyTorch
  if type(metric) ~= "number" then check.fail(NAME .. ":step", "metric", "a number", metric, 2) end
  self.last_epoch = self.last_epoch + 1
  if self:is_better(metric, self.best) then
    self.best, self.num_bad_epochs = metric, 0
  else
    self.num_bad_epochs = self.num_bad_epochs + 1
  end
  if self.cooldown_counter > 0 then
    self.cooldown_counter = self.cooldown_counter - 1
    self.num_bad_epochs = 0
  end
  if self.num_bad_epochs > self.patience then
    self:reduce_lr()
    self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
  end
  for i, g in ipairs(self.optimizer.param_groups) do self._last_lr[i] = g.lr end
end

-- get_last_lr() -> {lr of group 1, ...} after the last step.
function ReduceLROnPlateau:get_last_lr()
  return table.move(self._last_lr, 1, #self._last_lr, 1, {})
end

local STATE = { "best", "num_bad_epochs", "cooldown_counter", "last_epoch" }

-- state_dict() -> flat table (best, num_bad_epochs, cooldown_counter,
-- last_epoch), for cnn.save; the options stay those of the constructor.
function ReduceLROnPlateau:state_dict()
  local sd = {}
  for _, k in ipairs(STATE) do sd[k] = self[k] end
  return sd
end

function ReduceLROnPlateau:load_state_dict(sd)
  local fname = NAME .. ":load_state_dict"
  if type(sd) ~= "table" or cnn.is_tensor(sd) then
    check.fail(fname, "the state dict", "a table (from sched:state_dict() or cnn.load)", sd, 2)
  end
  local best = sd.best
  if type(best) ~= "number" or best ~= best then check.fail(fname, "best", "a number", best, 2) end
  local counts = {}
  for _, k in ipairs({ "num_bad_epochs", "cooldown_counter", "last_epoch" }) do
    counts[k] = check.integer(fname, k, sd[k], 2, 0)
  end
  self.best = best
  for k, v in pairs(counts) do self[k] = v end
end

doc[ReduceLROnPlateau] = [[
optim.lr_scheduler.ReduceLROnPlateau(opt [, {mode = 'min', factor = 0.1, patience = 10,
  threshold = 1e-4, threshold_mode = 'rel', cooldown = 0, min_lr = 0, eps = 1e-8}])
Multiplies every group's lr by factor when the metric has not improved for
more than patience epochs (improved: below best * (1 - threshold) in 'min'
mode with 'rel'; best - threshold with 'abs'; 'max' mirrors), then waits
cooldown epochs; never below min_lr (a number or one per group); a change
smaller than eps is skipped.  Call sched:step(val_loss) once per epoch.
  sched = optim.lr_scheduler.ReduceLROnPlateau(opt, {patience = 2})]]
doc[ReduceLROnPlateau.step] = "sched:step(metric)\nOne epoch's value of the watched metric (validation loss, accuracy)."

return ReduceLROnPlateau
