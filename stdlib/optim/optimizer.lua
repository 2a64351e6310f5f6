-- optim/optimizer.lua -- optim.Optimizer, the base class of SGD, Adam, ...
--
-- Design.  An optimizer holds `param_groups`, a list of groups
-- {params = {t1, t2, ...}, lr = ..., <other hyper-parameters>}; options not
-- given in a group come from the constructor's options, and those not given
-- there from the class's `defaults`.  `state[p]` is a table of per-parameter
-- state (step counts, moment tensors), created on the first step.  A
-- subclass defines `defaults` and `update(p, grad, state, group)`, which
-- changes p in place; the base class runs it under no_grad for each
-- parameter that has a gradient.  A subclass may instead define
-- `update_group(group, items)` (items: {p, grad, state} of the group's
-- parameters that have a gradient), which then replaces the calls of
-- update: Adam updates a whole group in one C call that way.  Every group is checked when added (and
-- when a state dict is loaded): parameters are floating point leaf
-- tensors, each option has the type of its default (numbers finite, so
-- NaN is refused) and lies in the class's `ranges`; `check_group(group)`
-- may return a message about options that depend on each other.
--
-- state_dict() is flat so cnn.save can write it: keys are dotted names,
-- values tensors, numbers, booleans or strings --
--   "state.3.exp_avg" = tensor   "state.3.step" = 2     (3 = parameter index,
--   "param_groups.1.lr" = 0.01   "param_groups.1.betas.1" = 0.9    counted
--   "param_groups.1.params.2" = 3                                   over groups)
-- load_state_dict() accepts it flat or nested (as cnn.load rebuilds it).
-- Invariant: each parameter tensor appears in exactly one group, once.
local cnn = _G.cnn
local check = require("check")

local class = require("class")

local Optimizer -- the class, made in "classes" below

local FLOATING = { float32 = true, float64 = true }

-- ---- classes -------------------------------------------------------------------

local function construct(cls, params, opts)
  local self = setmetatable({ param_groups = {}, state = {} }, cls)
  self:setup(params, opts or {})
  return self
end

Optimizer = class.new("Optimizer", construct)
Optimizer.defaults = {}
Optimizer.ranges = {}

-- Optimizer:extend(name, defaults [, ranges]) -> a subclass (stdlib/class.lua);
-- ranges = {lr = {0}, ...} bounds numeric options ({lo [, hi]}, inclusive).
function Optimizer:extend(name, defaults, ranges)
  return class.extend(self, name, { defaults = defaults or {}, ranges = ranges or {} })
end

-- ---- construction ----------------------------------------------------------------

-- Raises at `level` (counted from check_options' caller's caller) on an
-- option name the class does not know (a typo such as "moment").
local function check_options(self, opts, where, level)
  for k in pairs(opts) do
    if k ~= "params" and self.defaults[k] == nil then
      local names = {}
      for n in pairs(self.defaults) do names[#names + 1] = n end
      table.sort(names)
      error(string.format("optim.%s: unknown option '%s' in %s (options: %s)", self.__name,
        tostring(k), where, table.concat(names, ", ")), level + 1)
    end
  end
end

local function is_group_list(params)
  return type(params) == "table" and type(params[1]) == "table"
     and not cnn.is_tensor(params[1]) and params[1].params ~= nil
end

function Optimizer:setup(params, opts)
  if type(params) == "table" and type(params.parameters) == "function" then
    params = params:parameters() -- a module
  end
  if type(params) ~= "table" or params[1] == nil then
    error("optim." .. self.__name .. ": expected a non-empty list of parameters or of groups", 3)
  end
  if type(opts) ~= "table" then check.fail("optim." .. self.__name, "the options", "a table {lr = ...}", opts, 3) end
  check_options(self, opts, "the options", 3)
  self.options = {}
  for k, v in pairs(self.defaults) do self.options[k] = v end
  for k, v in pairs(opts) do self.options[k] = v end
  if self.options.lr == nil then
    error("optim." .. self.__name .. ": the learning rate is required: {lr = ...}", 3)
  end
  -- errors in a group point at the constructor's caller: 3 levels up
  if is_group_list(params) then
    for _, g in ipairs(params) do self:add_param_group(g, 4) end
  else
    self:add_param_group({ params = params }, 4)
  end
end

-- Hyper-parameter tables (betas) are copied so that groups never share one.
local function copy_value(v)
  if type(v) ~= "table" then return v end
  local c = {}
  for i, e in ipairs(v) do c[i] = e end
  return c
end

-- Checks the hyper-parameters of `group` (errors at `level`, counted as
-- error()'s from the caller): each option takes the type of its default --
-- a finite number, a boolean, a list of numbers -- then the class's ranges
-- (`ranges = {lr = {0}, ...}`: {lo [, hi]}) and its own check_group.
function Optimizer:check_hyper(group, level)
  local name = "optim." .. self.__name
  for k, d in pairs(self.defaults) do
    local v = group[k]
    if type(d) == "number" then
      check.number(name, k, v, level + 1, (self.ranges[k] or {})[1], (self.ranges[k] or {})[2])
    elseif type(d) == "boolean" then
      if type(v) ~= "boolean" then check.fail(name, k, "true or false", v, level + 1) end
    elseif type(d) == "table" then
      if type(v) ~= "table" or #v ~= #d then check.fail(name, k, "a list of " .. #d .. " numbers", v, level + 1) end
      for i = 1, #d do check.number(name, k .. "[" .. i .. "]", v[i], level + 1) end
    end
  end
  local problem = self.check_group and self:check_group(group)
  if problem then error(name .. ": " .. problem, level + 1) end
end

-- The parameters of a group as a list: tensors, floating point, leaves,
-- each once over all groups (errors at `level` from the caller).
local function collect_params(self, params, level)
  local name = "optim." .. self.__name
  local seen, out = {}, {}
  for _, other in ipairs(self.param_groups) do
    for _, p in ipairs(other.params) do seen[p] = true end
  end
  local list = cnn.is_tensor(params) and { params } or params
  if type(list) ~= "table" then check.fail(name, "params", "a list of tensors", list, level + 1) end
  for i, p in ipairs(list) do
    if not cnn.is_tensor(p) then
      error(string.format("%s: parameter %d is a %s, not a tensor", name, i, type(p)), level + 1)
    end
    if not FLOATING[p.dtype] then
      error(string.format("%s: parameter %d is %s; only floating point tensors (float32, float64) " ..
                          "can be optimized", name, i, p.dtype), level + 1)
    end
    if not p.is_leaf then
      error(string.format("%s: parameter %d is computed from other tensors (not a leaf); " ..
                          "optimize the leaf, or p:detach():requires_grad_()", name, i), level + 1)
    end
    if seen[p] then error(name .. ": a parameter appears twice", level + 1) end
    seen[p] = true
    out[#out + 1] = p
  end
  return out
end

-- add_param_group{params = {...}, lr = ..., ...}: one more group; options it
-- leaves out take the optimizer's values.  (`level`: internal, where errors
-- point; by default the caller.)
function Optimizer:add_param_group(g, level)
  level = level or 2
  if type(g) ~= "table" or cnn.is_tensor(g) then
    check.fail("optim." .. self.__name .. ":add_param_group", "the group", "a table {params = ..., ...}", g, level)
  end
  check_options(self, g, "a parameter group", level + 1)
  local group = { params = collect_params(self, g.params, level) }
  for k, v in pairs(self.options) do group[k] = copy_value(v) end
  for k, v in pairs(g) do if k ~= "params" then group[k] = copy_value(v) end end
  self:check_hyper(group, level)
  self.param_groups[#self.param_groups + 1] = group
end

-- ---- stepping ----------------------------------------------------------------------

-- the state table of parameter p (made on its first step)
local function state_of(self, p)
  local st = self.state[p]
  if not st then st = {}; self.state[p] = st end
  return st
end

-- one update_group call for the parameters of group that have a gradient
local function step_group(self, group)
  local items = {}
  for _, p in ipairs(group.params) do
    local g = p.grad
    if g ~= nil then items[#items + 1] = { p, g, state_of(self, p) } end
  end
  if #items > 0 then self:update_group(group, items) end
end

-- step([closure]): one update of every parameter that has a gradient.  The
-- closure, if given, recomputes the loss (with gradients) and its value is
-- returned.
function Optimizer:step(closure)
  if type(self) ~= "table" or self.param_groups == nil then
    error("optim: step is a method: call opt:step() (with a colon)", 2)
  end
  if closure ~= nil and type(closure) ~= "function" then
    check.fail("optim." .. self.__name .. ":step", "closure", "a function", closure, 2)
  end
  local loss
  if closure then loss = closure() end
  cnn.no_grad(function()
    for _, group in ipairs(self.param_groups) do
      if self.update_group then
        step_group(self, group)
      else
        for _, p in ipairs(group.params) do
          local g = p.grad
          if g ~= nil then self:update(p, g, state_of(self, p), group) end
        end
      end
    end
  end)
  return loss
end

-- zero_grad(): p.grad = nil for every parameter (the next backward
-- allocates fresh gradients).
function Optimizer:zero_grad()
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do p.grad = nil end
  end
end

function Optimizer:__tostring()
  local lines = { self.__name .. " (" }
  for i, g in ipairs(self.param_groups) do
    lines[#lines + 1] = string.format("Parameter Group %d (%d tensors)", i, #g.params)
    local keys = {}
    for k in pairs(g) do if k ~= "params" then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v = g[k]
      if type(v) == "table" then v = "{" .. table.concat(v, ", ") .. "}" end
      lines[#lines + 1] = string.format("    %s: %s", k, tostring(v))
    end
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

-- ---- state dicts -----------------------------------------------------------------------

-- flatten({a = {b = 1}}) -> {["a.b"] = 1}; tensors are leaves.
local function flatten(t, prefix, out)
  out = out or {}
  for k, v in pairs(t) do
    local name = prefix and prefix .. "." .. tostring(k) or tostring(k)
    if type(v) == "table" and not cnn.is_tensor(v) then flatten(v, name, out)
    else out[name] = v end
  end
  return out
end
Optimizer.flatten = flatten

function Optimizer:state_dict()
  local sd, index = {}, 0
  for gi, group in ipairs(self.param_groups) do
    local gp = "param_groups." .. gi .. "."
    for k, v in pairs(group) do
      if k ~= "params" then
        if type(v) == "table" then
          for i, e in ipairs(v) do sd[gp .. k .. "." .. i] = e end
        else
          sd[gp .. k] = v
        end
      end
    end
    for j, p in ipairs(group.params) do
      index = index + 1
      sd[gp .. "params." .. j] = index
      for k, v in pairs(self.state[p] or {}) do sd["state." .. index .. "." .. k] = v end
    end
  end
  return sd
end

-- Parses a flattened state dict into groups[gi] = {hyper = {...}, n = count}
-- and state[index] = {key = value}.
local function parse_state(flat)
  local groups, state = {}, {}
  for key, v in pairs(flat) do
    local gi, rest = key:match("^param_groups%.(%d+)%.(.+)$")
    local si, sk = key:match("^state%.(%d+)%.(.+)$")
    if gi then
      gi = tonumber(gi)
      groups[gi] = groups[gi] or { hyper = {}, n = 0 }
      local name, sub = rest:match("^([^.]+)%.(%d+)$")
      if name == "params" then
        groups[gi].n = groups[gi].n + 1
      elseif name then
        groups[gi].hyper[name] = groups[gi].hyper[name] or {}
        groups[gi].hyper[name][tonumber(sub)] = v
      else
        groups[gi].hyper[rest] = v
      end
    elseif si then
      si = tonumber(si)
      state[si] = state[si] or {}
      state[si][sk] = v
    end
  end
  return groups, state
end

local function check_layout(self, groups)
  if #groups ~= #self.param_groups then
    error(string.format("load_state_dict: the checkpoint has %d parameter groups, this optimizer %d",
      #groups, #self.param_groups), 3)
  end
  for gi, g in ipairs(self.param_groups) do
    if groups[gi].n ~= #g.params then
      error(string.format("load_state_dict: group %d has %d parameters in the checkpoint, %d here",
        gi, groups[gi].n, #g.params), 3)
    end
  end
end

-- A state tensor moved to p's device (and floating dtype), owned by us.
local function adopt(v, p)
  if not cnn.is_tensor(v) then return v end
  if v.device ~= p.device then v = v:to(p.device) end
  if v.dtype ~= p.dtype and (v.dtype == "float32" or v.dtype == "float64") then v = v:to(p.dtype) end
  return v:clone()
end

-- load_state_dict(sd): restores hyper-parameters and per-parameter state;
-- the parameters are matched by position (group by group).  Everything is
-- checked (layout, hyper-parameter types and ranges) before anything changes.
function Optimizer:load_state_dict(sd)
  if type(sd) ~= "table" or cnn.is_tensor(sd) then
    check.fail("load_state_dict", "the state dict", "a table (from opt:state_dict() or cnn.load)", sd, 2)
  end
  local groups, state = parse_state(flatten(sd))
  check_layout(self, groups)
  local merged = {}
  for gi, g in ipairs(self.param_groups) do
    merged[gi] = {}
    for k, v in pairs(g) do merged[gi][k] = v end
    for k, v in pairs(groups[gi].hyper) do merged[gi][k] = v end
    self:check_hyper(merged[gi], 2)
  end
  local index = 0
  self.state = {}
  for gi, g in ipairs(self.param_groups) do
    for k, v in pairs(merged[gi]) do g[k] = v end
    for _, p in ipairs(g.params) do
      index = index + 1
      if state[index] then
        local st = {}
        for k, v in pairs(state[index]) do st[k] = adopt(v, p) end
        self.state[p] = st
      end
    end
  end
end

local doc = cnn.doc or {}
doc[Optimizer] = [[
optim.Optimizer -- the base class of SGD, Adam, AdamW, RMSprop.
opt:step([closure]), opt:zero_grad(), opt:add_param_group{params = ..., lr = ...},
opt:state_dict(), opt:load_state_dict(sd), opt.param_groups[i].lr (settable).
A new optimizer: local My = optim.Optimizer:extend("My", {lr = 0.1}) and
function My:update(p, grad, state, group) ... end (in place on p).]]
doc[Optimizer.step] = "opt:step([closure]) -> loss\nUpdates every parameter that has a gradient (under no_grad)."
doc[Optimizer.zero_grad] = "opt:zero_grad()\nSets .grad = nil on every parameter of every group."
doc[Optimizer.add_param_group] = "opt:add_param_group{params = {...}, lr = ..., ...}\nAdds a group; options it leaves out take the optimizer's values."
doc[Optimizer.state_dict] = "opt:state_dict() -> flat table\nHyper-parameters and per-parameter state (\"state.3.exp_avg\"), ready for cnn.save."
doc[Optimizer.load_state_dict] = "opt:load_state_dict(sd)\nRestores a state dict (flat, or nested as cnn.load returns it); parameters match by position."

return Optimizer
