-- optim/lr_scheduler.lua -- learning-rate schedulers: StepLR, MultiStepLR,
-- CosineAnnealingLR, OneCycleLR (as torch.optim.lr_scheduler).
--
-- Design.  A scheduler wraps an optimizer.  Construction records each
-- group's initial_lr (base_lrs) and performs step 0; every later step()
-- increments last_epoch and writes lr_at(last_epoch) -- the closed form of
-- the schedule -- into each group's lr.  StepLR, MultiStepLR and
-- CosineAnnealingLR are stepped once per epoch, OneCycleLR once per batch.
-- Invariant: after each step, group.lr == get_last_lr()[i].
-- Constructors check their options (stdlib/check.lua): numbers finite and
-- in range, counts positive integers, unknown option names refused; errors
-- point at the user's line (level 3 from init: init < construct < caller).
local cnn = _G.cnn
local check = require("check")
local doc = cnn.doc or {}

local class = require("class")

local LRScheduler -- the class, made below (class.new)

local function construct(cls, optimizer, ...)
  if type(optimizer) ~= "table" or optimizer.param_groups == nil then
    error("optim.lr_scheduler." .. cls.__name .. ": the first argument must be an optimizer", 2)
  end
  local self = setmetatable({ optimizer = optimizer }, cls)
  self:init(...)
  for _, g in ipairs(optimizer.param_groups) do
    if g.initial_lr == nil then g.initial_lr = g.lr end
  end
  self.base_lrs = {}
  for i, g in ipairs(optimizer.param_groups) do self.base_lrs[i] = g.initial_lr end
  self.last_epoch = -1
  self:step()
  return self
end

LRScheduler = class.new("LRScheduler", construct)

-- LRScheduler:extend(name) -> a subclass (stdlib/class.lua)
function LRScheduler:extend(name) return class.extend(self, name) end

function LRScheduler:init() end

-- step(): advance one epoch (one batch for OneCycleLR) and set the lrs.
function LRScheduler:step()
  self.last_epoch = self.last_epoch + 1
  self._last_lr = {}
  for i, g in ipairs(self.optimizer.param_groups) do
    local lr = self:lr_at(self.last_epoch, self.base_lrs[i], i)
    g.lr = lr
    self._last_lr[i] = lr
  end
end

-- get_last_lr() -> {lr of group 1, lr of group 2, ...}
function LRScheduler:get_last_lr()
  local out = {}
  for i, v in ipairs(self._last_lr) do out[i] = v end
  return out
end

-- state_dict(): {last_epoch = n, ["base_lrs.1"] = lr, ...} (flat, for cnn.save).
function LRScheduler:state_dict()
  local sd = { last_epoch = self.last_epoch }
  for i, v in ipairs(self.base_lrs) do sd["base_lrs." .. i] = v end
  return sd
end

-- load_state_dict(sd): restores the position; the lrs are recomputed.
function LRScheduler:load_state_dict(sd)
  local name = "optim.lr_scheduler." .. self.__name .. ":load_state_dict"
  if type(sd) ~= "table" or cnn.is_tensor(sd) then
    check.fail(name, "the state dict", "a table (from sched:state_dict() or cnn.load)", sd, 2)
  end
  check.integer(name, "last_epoch", sd.last_epoch or 0, 2, 0)
  local base = sd.base_lrs
  for i = 1, #self.base_lrs do
    local v = sd["base_lrs." .. i] or (base and (base[i] or base[tostring(i)]))
    if v then self.base_lrs[i] = check.number(name, "base_lrs." .. i, v, 2, 0) end
  end
  self.last_epoch = (sd.last_epoch or 0) - 1
  self:step()
end

-- Accepts f(opt, a, {opts}) and f(opt, {name_of_a = a, opts...}); the
-- option names must be in `known` (errors at the user's line: args <
-- init < construct < caller).
local function args(cls, first, opts, name, known)
  local fname = "optim.lr_scheduler." .. cls.__name
  if type(first) == "table" and (first[name] ~= nil or (opts == nil and first[1] == nil)) then
    opts = first
    first = first[name]
  end
  local all = { name }
  for i, k in ipairs(known) do all[i + 1] = k end
  opts = check.options(fname, opts, all, 4)
  return first, opts, fname
end

-- ---- StepLR ---------------------------------------------------------------------

local StepLR = LRScheduler:extend("StepLR")

function StepLR:init(step_size, opts)
  local fname
  step_size, opts, fname = args(StepLR, step_size, opts, "step_size", { "gamma" })
  self.step_size = check.integer(fname, "step_size", step_size, 3, 1)
  self.gamma = check.number(fname, "gamma", opts.gamma or 0.1, 3, 0)
end

function StepLR:lr_at(epoch, base)
  return base * self.gamma ^ (epoch // self.step_size)
end

doc[StepLR] = [[
optim.lr_scheduler.StepLR(opt, step_size [, {gamma = 0.1}])
lr = base_lr * gamma ^ floor(epoch / step_size); call sched:step() once per epoch.]]

-- ---- MultiStepLR ------------------------------------------------------------------

local MultiStepLR = LRScheduler:extend("MultiStepLR")

function MultiStepLR:init(milestones, opts)
  local fname
  milestones, opts, fname = args(MultiStepLR, milestones, opts, "milestones", { "gamma" })
  if type(milestones) ~= "table" then
    check.fail(fname, "milestones", "a list of epochs, e.g. {30, 80}", milestones, 3)
  end
  self.milestones = {}
  for i, m in ipairs(milestones) do
    self.milestones[i] = check.integer(fname, "milestones[" .. i .. "]", m, 3, 0)
  end
  table.sort(self.milestones)
  self.gamma = check.number(fname, "gamma", opts.gamma or 0.1, 3, 0)
end

function MultiStepLR:lr_at(epoch, base)
  local passed = 0
  for _, m in ipairs(self.milestones) do if m <= epoch then passed = passed + 1 end end
  return base * self.gamma ^ passed
end

doc[MultiStepLR] = [[
optim.lr_scheduler.MultiStepLR(opt, milestones [, {gamma = 0.1}])
lr = base_lr * gamma ^ (number of milestones <= epoch), e.g. milestones = {30, 80}.]]

-- ---- CosineAnnealingLR -------------------------------------------------------------

local CosineAnnealingLR = LRScheduler:extend("CosineAnnealingLR")

function CosineAnnealingLR:init(T_max, opts)
  local fname
  T_max, opts, fname = args(CosineAnnealingLR, T_max, opts, "T_max", { "eta_min" })
  self.T_max = check.number(fname, "T_max", T_max, 3, 0)
  if self.T_max <= 0 then check.fail(fname, "T_max", "a positive number", T_max, 3) end
  self.eta_min = check.number(fname, "eta_min", opts.eta_min or 0, 3, 0)
end

function CosineAnnealingLR:lr_at(epoch, base)
  return self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2
end

doc[CosineAnnealingLR] = [[
optim.lr_scheduler.CosineAnnealingLR(opt, T_max [, {eta_min = 0}])
lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2.]]

-- ---- OneCycleLR ----------------------------------------------------------------------

local OneCycleLR = LRScheduler:extend("OneCycleLR")

local ONECYCLE_OPTIONS = { "total_steps", "epochs", "steps_per_epoch", "pct_start", "anneal_strategy",
  "div_factor", "final_div_factor", "three_phase", "cycle_momentum", "base_momentum", "max_momentum" }

-- max_lr: a number, or one per group (errors at the user's line: per_group
-- < setup_groups < init < construct < caller).
local function per_group(v, n, what)
  local out = {}
  for i = 1, n do
    out[i] = type(v) == "table" and v[i] or v
    check.number("optim.lr_scheduler.OneCycleLR", type(v) == "table" and what .. "[" .. i .. "]" or what,
                 out[i], 5, 0)
  end
  return out
end

-- The number of steps, from total_steps or epochs * steps_per_epoch.
local function total_steps_of(fname, o)
  if o.total_steps ~= nil then
    local n = check.integer(fname, "total_steps", o.total_steps, 4, 1)
    return n
  end
  if o.epochs ~= nil and o.steps_per_epoch ~= nil then
    return check.integer(fname, "epochs", o.epochs, 4, 1) * check.integer(fname, "steps_per_epoch", o.steps_per_epoch, 4, 1)
  end
  error(fname .. ": give total_steps, or epochs and steps_per_epoch", 4)
end

-- The other options: ranges and types (errors at the user's line).
local function check_onecycle(fname, o)
  check.number(fname, "pct_start", o.pct_start or 0.3, 4, 0, 1)
  for _, k in ipairs({ "div_factor", "final_div_factor" }) do
    local v = check.number(fname, k, o[k] or 1, 4, 0)
    if v <= 0 then check.fail(fname, k, "a positive number", v, 4) end
  end
  check.number(fname, "base_momentum", o.base_momentum or 0.85, 4, 0, 1)
  check.number(fname, "max_momentum", o.max_momentum or 0.95, 4, 0, 1)
  check.boolean(fname, "three_phase", o.three_phase, 4)
  check.boolean(fname, "cycle_momentum", o.cycle_momentum, 4)
  local a = o.anneal_strategy or "cos"
  if a ~= "cos" and a ~= "linear" then check.fail(fname, "anneal_strategy", "'cos' or 'linear'", a, 4) end
end

local function make_phases(self, o)
  local T, pct = self.total_steps, o.pct_start or 0.3
  if o.three_phase then
    return {
      { end_step = pct * T - 1, lr = { "initial_lr", "max_lr" }, mom = { "max_momentum", "base_momentum" } },
      { end_step = 2 * pct * T - 2, lr = { "max_lr", "initial_lr" }, mom = { "base_momentum", "max_momentum" } },
      { end_step = T - 1, lr = { "initial_lr", "min_lr" }, mom = { "max_momentum", "max_momentum" } },
    }
  end
  return {
    { end_step = pct * T - 1, lr = { "initial_lr", "max_lr" }, mom = { "max_momentum", "base_momentum" } },
    { end_step = T - 1, lr = { "max_lr", "min_lr" }, mom = { "base_momentum", "max_momentum" } },
  }
end

-- Writes the cycle's bounds into each group (as PyTorch does).
local function setup_groups(self, o)
  local groups = self.optimizer.param_groups
  local max_lrs = per_group(o.max_lr, #groups, "max_lr")
  local div, final_div = o.div_factor or 25, o.final_div_factor or 1e4
  self.use_beta1 = groups[1].betas ~= nil
  if self.cycle_momentum and groups[1].momentum == nil and not self.use_beta1 then
    error("optim.lr_scheduler.OneCycleLR: the optimizer has no momentum nor betas; use {cycle_momentum = false}", 4)
  end
  for i, g in ipairs(groups) do
    g.initial_lr = max_lrs[i] / div
    g.max_lr = max_lrs[i]
    g.min_lr = g.initial_lr / final_div
    if self.cycle_momentum then
      g.max_momentum, g.base_momentum = o.max_momentum or 0.95, o.base_momentum or 0.85
    end
  end
end

function OneCycleLR:init(max_lr, opts)
  local fname
  max_lr, opts, fname = args(OneCycleLR, max_lr, opts, "max_lr", ONECYCLE_OPTIONS)
  self.total_steps = total_steps_of(fname, opts)
  if max_lr == nil then error(fname .. ": max_lr is required (a number or one per group)", 3) end
  check_onecycle(fname, opts)
  opts.max_lr = max_lr
  self.anneal = opts.anneal_strategy or "cos"
  self.cycle_momentum = opts.cycle_momentum ~= false
  self.phases = make_phases(self, opts)
  setup_groups(self, opts)
end

local function anneal(kind, a, b, pct)
  if kind == "linear" then return (b - a) * pct + a end
  return b + (a - b) / 2 * (math.cos(math.pi * pct) + 1)
end

-- Where step `s` falls: returns the phase and the fraction done in it.
local function phase_of(self, s)
  local start = 0
  for i, ph in ipairs(self.phases) do
    if s <= ph.end_step or i == #self.phases then
      return ph, (s - start) / (ph.end_step - start)
    end
    start = ph.end_step
  end
end

function OneCycleLR:lr_at(s, _, gi)
  if s > self.total_steps then
    error(string.format("OneCycleLR: tried to step %d times; total_steps is %d", s, self.total_steps), 3)
  end
  local g = self.optimizer.param_groups[gi]
  local ph, pct = phase_of(self, s)
  if self.cycle_momentum then
    local m = anneal(self.anneal, g[ph.mom[1]], g[ph.mom[2]], pct)
    if self.use_beta1 then g.betas = { m, g.betas[2] } else g.momentum = m end
  end
  return anneal(self.anneal, g[ph.lr[1]], g[ph.lr[2]], pct)
end

doc[OneCycleLR] = [[
optim.lr_scheduler.OneCycleLR(opt, {max_lr =, total_steps = | epochs =, steps_per_epoch =,
  pct_start = 0.3, anneal_strategy = 'cos', div_factor = 25, final_div_factor = 1e4,
  three_phase = false, cycle_momentum = true, base_momentum = 0.85, max_momentum = 0.95})
The 1cycle policy: lr rises from max_lr/div_factor to max_lr over pct_start
of the steps, then falls to max_lr/div_factor/final_div_factor; momentum (or
Adam's beta1) moves the opposite way.  Call sched:step() after every batch.]]

doc[LRScheduler.step] = "sched:step()\nAdvances one epoch (one batch for OneCycleLR) and sets each group's lr."
doc[LRScheduler.get_last_lr] = "sched:get_last_lr() -> {lr of group 1, ...}"

return { LRScheduler = LRScheduler, StepLR = StepLR, MultiStepLR = MultiStepLR,
         CosineAnnealingLR = CosineAnnealingLR, OneCycleLR = OneCycleLR,
         ReduceLROnPlateau = require("optim.plateau") } -- driven by a metric: its own file
