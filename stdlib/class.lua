-- class.lua -- the one class helper of stdlib: nn.Module, optim.Optimizer,
-- optim.lr_scheduler.LRScheduler, data's datasets, data.DataLoader and
-- data.DistributedSampler are built with it
-- (module "class", private: not a global).
--
--   local Base = class.new("Base", construct [, prefix])   a root class
--   local Sub = class.extend(Base, "Sub" [, fields])       a subclass
--   class.is_instance(obj, cls)                            walks `super`
--
-- A class is a plain table of methods with __name, super (its parent) and
-- __index = itself (fields may set another __index, as data's datasets
-- do), under a metatable {__index = parent, __call = construct}: calling
-- any class of a family runs the family's constructor construct(cls, ...),
-- which subclasses inherit.  Lua looks metamethods up raw in an
-- instance's metatable, never through __index, so extend copies the
-- parent's metamethods (METAMETHODS) into the subclass unless fields
-- define their own.  With a prefix ("nn."), tostring of a class reads
-- "class nn.Name".
local class = {}

local METAMETHODS = { "__call", "__tostring", "__newindex", "__len", "__close" }

-- The metatable of a class: methods from the parent, calls construct.
local function class_meta(parent, construct, prefix, name)
  return { __index = parent, __call = construct, prefix = prefix,
           __tostring = prefix and function() return "class " .. prefix .. name end or nil }
end

function class.new(name, construct, prefix)
  local cls = { __name = name }
  cls.__index = cls
  return setmetatable(cls, class_meta(nil, construct, prefix, name))
end

function class.extend(parent, name, fields)
  assert(type(name) == "string", "extend: the class needs a name (a string)")
  local cls = fields or {}
  for _, k in ipairs(METAMETHODS) do
    if cls[k] == nil then cls[k] = rawget(parent, k) end
  end
  if cls.__index == nil then cls.__index = cls end
  cls.__name, cls.super = name, parent
  local pm = getmetatable(parent)
  return setmetatable(cls, class_meta(parent, pm.__call, pm.prefix, name))
end

function class.is_instance(obj, cls)
  local c = type(obj) == "table" and getmetatable(obj) or nil
  while c do
    if c == cls then return true end
    c = rawget(c, "super")
  end
  return false
end

return class
