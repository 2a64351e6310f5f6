-- optim/grad_scaler.lua -- optim.GradScaler: loss scaling for mixed precision.
--
-- As torch.amp.GradScaler: in float16 small gradients underflow to zero, so
-- the loss is multiplied by a large `scale` before backward, the gradients
-- are divided by it again before the optimizer step, and a step whose
-- gradients hold an Inf or NaN (the scale was too large) is skipped:
--   scaler:scale(loss):backward()
--   scaler:step(opt)       -- unscale_ (if not done), then opt:step() unless Inf/NaN
--   scaler:update()        -- Inf/NaN seen: scale *= backoff_factor;
--                          -- growth_interval clean steps in a row: scale *= growth_factor
-- It works on any device (the arithmetic is ordinary tensor ops), so it is
-- tested on the CPU; it pays off with float16 activations on a GPU.
local cnn = _G.cnn
local check = require("check")
local doc = cnn.doc or {}

local GradScaler = {}
GradScaler.__index = GradScaler

local NAME = "optim.GradScaler"

local function new(_, opts)
  opts = opts or {}
  check.options(NAME, opts, { "init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled" }, 2)
  local self = setmetatable({}, GradScaler)
  self._scale = check.number(NAME, "init_scale", opts.init_scale or 2.0 ^ 16, 2, 0)
  self.growth_factor = check.number(NAME, "growth_factor", opts.growth_factor or 2.0, 2, 1)
  self.backoff_factor = check.number(NAME, "backoff_factor", opts.backoff_factor or 0.5, 2, 0, 1)
  self.growth_interval = check.integer(NAME, "growth_interval", opts.growth_interval or 2000, 2, 1)
  self.enabled = opts.enabled ~= false
  self._growth_tracker = 0
  self._per_optimizer = {} -- optimizer -> {unscaled =, found_inf =}
  return self
end
setmetatable(GradScaler, { __call = new })

-- scaler:scale(loss) -> loss * scale (the loss itself when disabled).
function GradScaler:scale(loss)
  if not self.enabled then return loss end
  return loss * self._scale
end

local function params_with_grad(opt)
  local list = {}
  for _, group in ipairs(opt.param_groups) do
    for _, p in ipairs(group.params) do
      if p.grad then list[#list + 1] = p end
    end
  end
  return list
end

-- scaler:unscale_(opt): divides opt's gradients by the scale (once per step)
-- and notes whether any of them holds an Inf or NaN.
function GradScaler:unscale_(opt)
  if not self.enabled then return end
  local st = self._per_optimizer[opt] or {}
  if st.unscaled then error(NAME .. ": unscale_() was already called on this optimizer since the last update()", 2) end
  local inv, found_inf = 1 / self._scale, false
  cnn.no_grad(function()
    for _, p in ipairs(params_with_grad(opt)) do
      p.grad:mul_(inv)
      -- NaN is the value that differs from itself; Inf the one whose |g| is math.huge
      if not found_inf and (p.grad:ne(p.grad):sum():item() > 0 or p.grad:abs():eq(math.huge):sum():item() > 0) then
        found_inf = true
      end
    end
  end)
  st.unscaled, st.found_inf = true, found_inf
  self._per_optimizer[opt] = st
end

-- scaler:step(opt [, ...]) -> opt:step(...)'s result, or nil when skipped.
function GradScaler:step(opt, ...)
  if not self.enabled then return opt:step(...) end
  local st = self._per_optimizer[opt]
  if not (st and st.unscaled) then self:unscale_(opt) end
  if self._per_optimizer[opt].found_inf then return nil end
  return opt:step(...)
end

-- scaler:update([new_scale]): adjusts the scale after the step (see the top).
function GradScaler:update(new_scale)
  if not self.enabled then return end
  if new_scale then
    self._scale = check.number(NAME .. ":update", "new_scale", new_scale, 2, 0)
  else
    local found_inf = false
    for _, st in pairs(self._per_optimizer) do found_inf = found_inf or st.found_inf end
    if found_inf then
      self._scale = self._scale * self.backoff_factor
      self._growth_tracker = 0
    else
      self._growth_tracker = self._growth_tracker + 1
      if self._growth_tracker == self.growth_interval then
        self._scale = self._scale * self.growth_factor
        self._growth_tracker = 0
      end
    end
  end
  self._per_optimizer = {}
end

function GradScaler:get_scale() return self.enabled and self._scale or 1.0 end

function GradScaler:state_dict()
  return { scale = self._scale, growth_factor = self.growth_factor, backoff_factor = self.backoff_factor,
           growth_interval = self.growth_interval, growth_tracker = self._growth_tracker }
end

function GradScaler:load_state_dict(sd)
  if type(sd) ~= "table" then check.fail(NAME .. ":load_state_dict", "state", "a table", sd, 2) end
  self._scale = check.number(NAME, "scale", sd.scale, 2, 0)
  self.growth_factor = sd.growth_factor or self.growth_factor
  self.backoff_factor = sd.backoff_factor or self.backoff_factor
  self.growth_interval = sd.growth_interval or self.growth_interval
  self._growth_tracker = sd.growth_tracker or 0
end

GradScaler.__tostring = function(self)
  return string.format("GradScaler(scale=%g, growth_factor=%g, backoff_factor=%g, growth_interval=%d)",
                       self._scale, self.growth_factor, self.backoff_factor, self.growth_interval)
end

doc[GradScaler] = [[
optim.GradScaler([{init_scale = 65536, growth_factor = 2, backoff_factor = 0.5, growth_interval = 2000, enabled = true}])
Loss scaling for mixed precision, as torch.amp.GradScaler: skips steps whose gradients hold Inf/NaN.
  scaler:scale(loss):backward(); scaler:step(opt); scaler:update()]]

return GradScaler
