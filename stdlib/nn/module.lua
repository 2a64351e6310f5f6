-- nn/module.lua -- nn.Module, the base class of every layer and network.
--
-- Design.  A class is a plain Lua table that is also the metatable of its
-- instances: `__index = class` finds methods, and the class's own metatable
-- (`__index = parent`, `__call = constructor`) gives inheritance and
-- `Class(...)`.  `Module:extend("Name")` makes a subclass; calling it makes
-- an instance with the bookkeeping fields below and runs `init(...)`.
--
-- Children, parameters and buffers are stored as *raw* fields of the
-- instance (`self.conv1`, `self.weight`, `net[1]`), so reading them costs a
-- plain table access and the prompt's completion sees them.  Their names are
-- also recorded, in insertion order, in three lists:
--   _children  names of fields holding modules      (registered by __newindex)
--   _params    names of fields holding parameters   (register_parameter, or
--              a leaf tensor with requires_grad assigned to a new field)
--   _buffers   names of fields holding buffers      (register_buffer)
-- Invariant: every name in a list is a raw field of the instance; iteration
-- reads the field's *current* value and skips names whose value was set to
-- nil, so `self.fc = other_module` replaces a child in place.
--
-- Calling an instance runs forward pre-hooks, `forward`, forward hooks and
-- attaches backward hooks to the output; it returns exactly the values
-- forward returned (one for a layer).  A failing forward is re-raised
-- with the dotted path of the failing layer and its short description, e.g.
-- "features.5 (Linear 9216->128): linear: input has 1600 features ...":
-- each enclosing module adds its child's name on the way up (see
-- `annotate_error`); the original message is kept at the end.
local cnn = _G.cnn
local doc = cnn.doc or {}

local Module -- the class, made in "classes" below

local function is_module(v)
  return type(v) == "table" and rawget(v, "_children") ~= nil
end

local function is_tensor(v)
  return cnn.is_tensor(v)
end

local shape_str = require("fmt").shape_str
local check = require("check")
local torch_names = require("nn.torch_names")

-- ---- classes ---------------------------------------------------------------

local class = require("class")

local function construct(cls, ...)
  local self = setmetatable({}, cls)
  rawset(self, "_children", {})
  rawset(self, "_params", {})
  rawset(self, "_buffers", {})
  rawset(self, "_hooks", { pre = {}, fwd = {}, bwd = {} })
  rawset(self, "training", true)
  self:init(...)
  return self
end

Module = class.new("Module", construct, "nn.")

-- Module:extend(name) -> a new class inheriting from self (stdlib/class.lua).
function Module:extend(name) return class.extend(self, name) end

-- Whether `obj` is an instance of `cls` (or of a subclass).
function Module.is_instance(obj, cls)
  return is_module(obj) and class.is_instance(obj, cls)
end

function Module:init() end

function Module:forward()
  error("forward() is not implemented (define " .. self.__name .. ":forward(x) in your class)", 0)
end

-- ---- registration ----------------------------------------------------------

local function add_name(list, name)
  for _, n in ipairs(list) do if n == name then return end end
  list[#list + 1] = name
end

function Module:__newindex(k, v)
  if is_module(v) then
    add_name(rawget(self, "_children"), k)
  elseif is_tensor(v) and v.requires_grad and v.is_leaf then
    add_name(rawget(self, "_params"), k)
  end
  rawset(self, k, v)
end

-- register_parameter(name, t): t (or nil, e.g. bias=false) is a parameter.
function Module:register_parameter(name, t)
  if t ~= nil and not t.is_leaf then
    error("register_parameter: " .. tostring(name) ..
          " is computed from other tensors; register t:detach() instead", 2)
  end
  if t ~= nil and not t.requires_grad then t.requires_grad = true end
  add_name(rawget(self, "_params"), name)
  rawset(self, name, t)
  return t
end

-- register_buffer(name, t): state saved in state_dict but not trained.
function Module:register_buffer(name, t)
  add_name(rawget(self, "_buffers"), name)
  rawset(self, name, t)
  return t
end

-- add_module(name, m): register a child under an explicit name.
function Module:add_module(name, m)
  assert(is_module(m), "add_module: " .. tostring(name) .. " is not a module")
  add_name(rawget(self, "_children"), name)
  rawset(self, name, m)
  return m
end

-- ---- traversal -------------------------------------------------------------

-- Ordered iterator over (name, value) of the names in `list` whose current
-- value passes `keep`.
local function iter_fields(self, list, keep)
  local i = 0
  return function()
    while true do
      i = i + 1
      local name = list[i]
      if name == nil then return nil end
      local v = rawget(self, name)
      if v ~= nil and keep(v) then return name, v end
    end
  end
end

function Module:named_children()
  return iter_fields(self, rawget(self, "_children"), is_module)
end

function Module:children()
  local out = {}
  for _, m in self:named_children() do out[#out + 1] = m end
  return out
end

-- Depth-first, parents before children; each module once.
local function walk(m, prefix, seen, out)
  if seen[m] then return end
  seen[m] = true
  out[#out + 1] = { prefix, m }
  for name, c in m:named_children() do
    walk(c, prefix == "" and tostring(name) or prefix .. "." .. tostring(name), seen, out)
  end
end

local function list_iter(list)
  local i = 0
  return function()
    i = i + 1
    local e = list[i]
    if e then return e[1], e[2] end
  end
end

function Module:named_modules()
  local out = {}
  walk(self, "", {}, out)
  return list_iter(out)
end

function Module:modules()
  local out = {}
  for _, m in self:named_modules() do out[#out + 1] = m end
  return out
end

local function named_tensors(self, listname)
  local out, seen = {}, {}
  for prefix, m in self:named_modules() do
    for name, t in iter_fields(m, rawget(m, listname), is_tensor) do
      if not seen[t] then
        seen[t] = true
        local full = prefix == "" and tostring(name) or prefix .. "." .. tostring(name)
        out[#out + 1] = { full, t }
      end
    end
  end
  return out
end

-- for name, p in net:named_parameters() do ... end  (dotted names)
function Module:named_parameters()
  return list_iter(named_tensors(self, "_params"))
end

-- A list of the parameter tensors (each once), for the optimizers.
function Module:parameters()
  local out = {}
  for _, e in ipairs(named_tensors(self, "_params")) do out[#out + 1] = e[2] end
  return out
end

function Module:named_buffers()
  return list_iter(named_tensors(self, "_buffers"))
end

function Module:buffers()
  local out = {}
  for _, e in ipairs(named_tensors(self, "_buffers")) do out[#out + 1] = e[2] end
  return out
end

-- apply(fn): fn(m) on every module, children first (as PyTorch).
function Module:apply(fn)
  for _, c in ipairs(self:children()) do c:apply(fn) end
  fn(self)
  return self
end

-- ---- modes, gradients, devices -------------------------------------------

function Module:train(mode)
  if mode == nil then mode = true end
  for _, m in ipairs(self:modules()) do rawset(m, "training", mode and true or false) end
  return self
end

function Module:eval()
  return self:train(false)
end

function Module:zero_grad()
  for _, p in ipairs(self:parameters()) do p.grad = nil end
end

local function is_device(s)
  return s:match("^cpu") or s:match("^cuda")
end

-- the floating dtypes a module converts to, by every name core knows
-- (core/dtype.c): canonical name
local float_dtypes = {
  float32 = "float32", float = "float32", float64 = "float64", double = "float64",
  float16 = "float16", half = "float16", bfloat16 = "bfloat16", bf16 = "bfloat16",
}

-- Converts every parameter and buffer of every module with `conv(t)` in
-- place (t:set_), as PyTorch's Module.to: the tensors keep their identity,
-- so an optimizer built before the move still holds the model's
-- parameters; parameters stay trainable leaves.
local function convert_tensors(self, conv)
  cnn.no_grad(function()
    for _, m in ipairs(self:modules()) do
      for _, listname in ipairs({ "_params", "_buffers" }) do
        for _, t in iter_fields(m, rawget(m, listname), is_tensor) do
          local nt = conv(t)
          if not rawequal(nt, t) then t:set_(nt) end
        end
      end
    end
  end)
  return self
end

-- (device, dtype) of Module:to's arguments: to(device), to(dtype) or
-- to(device, dtype), as PyTorch's net.to('cuda', torch.float16); anything
-- else is an error naming the argument
local function to_args(a, b, extra)
  local fname = "Module:to"
  if extra ~= nil then check.fail(fname, "argument 3", "nothing", extra, 3) end
  if type(a) == "table" and a.memory_format ~= nil then
    error("Module:to: memory_format is not offered for modules (convolution weights stay "
          .. "K x C x R x S; oneDNN reorders them itself): feed the network "
          .. "x:contiguous('channels_last') instead", 3)
  end
  if type(a) ~= "string" then check.fail(fname, "argument 1", "a device or dtype name", a, 3) end
  if b == nil then
    if is_device(a) then return a, nil end
    if float_dtypes[a] then return nil, float_dtypes[a] end
    check.fail(fname, "argument 1",
      "a device ('cpu', 'cuda', 'cuda:N') or a floating dtype (float32, float64, float16, bfloat16)",
      a, 3)
  end
  if not is_device(a) then check.fail(fname, "argument 1", "a device ('cpu', 'cuda', 'cuda:N')", a, 3) end
  if type(b) ~= "string" or not float_dtypes[b] then
    check.fail(fname, "argument 2", "a floating dtype (float32, float64, float16, bfloat16)", b, 3)
  end
  return a, float_dtypes[b]
end

-- to(device [, dtype]) or to(dtype): device 'cpu', 'cuda', 'cuda:0';
-- dtype a floating one ('float32', 'float64', 'float16' = 'half',
-- 'bfloat16'), given to floating parameters and buffers (integer buffers
-- keep their dtype), as PyTorch's Module.to: net:to('cuda', 'float16') is
-- net.to('cuda', torch.float16).  Parameters change in place (an optimizer
-- made before keeps working; a .grad that no longer matches is dropped;
-- optimizer state made before the move stays where it was: build
-- optimizers after moving, as in PyTorch).  float16 is for inference on a
-- GPU (net:eval()); the CPU stores float16 but runs no op on it.
function Module:to(what, dtype, extra)
  local device, dt = to_args(what, dtype, extra)
  return convert_tensors(self, function(t)
    local r = device and t:to(device) or t
    if dt and float_dtypes[r.dtype] then r = r:to(dt) end
    return r
  end)
end

function Module:cuda() return self:to("cuda") end
function Module:cpu() return self:to("cpu") end
function Module:float() return self:to("float32") end
function Module:double() return self:to("float64") end
-- half() -> self: to('float16') (PyTorch's Module.half(): parameters and
-- floating buffers, BatchNorm's running statistics too); for inference on
-- a GPU, in eval mode.
function Module:half() return self:to("float16") end

-- requires_grad_([flag = true]) -> self: sets requires_grad on every
-- parameter below self (as PyTorch's Module.requires_grad_).  Frozen
-- parameters get no gradient, so optimizers leave them alone.
function Module:requires_grad_(flag)
  if flag == nil then flag = true end
  check.boolean("requires_grad_", "flag", flag, 2)
  for _, p in ipairs(self:parameters()) do p.requires_grad = flag end
  return self
end

-- freeze() / unfreeze() -> self: requires_grad_(false) / requires_grad_(true).
-- BatchNorm layers of a frozen part still update their running statistics
-- in training mode: call :eval() on that part too to keep them.
function Module:freeze() return self:requires_grad_(false) end
function Module:unfreeze() return self:requires_grad_(true) end

-- ---- state dicts -------------------------------------------------------------

-- state_dict([{torch = false}]) -> flat table "features.1.weight" -> tensor
-- (parameters and buffers, detached; they share memory with the model).
-- With torch = true the names are PyTorch's ("features.0.weight"; see
-- nn/torch_names.lua), so PyTorch's load_state_dict(strict=True) takes
-- cnn.save's file.
function Module:state_dict(opts)
  opts = check.options("state_dict", opts, { "torch" }, 2)
  check.boolean("state_dict", "torch", opts.torch, 2)
  local sd = {}
  for name, t in self:named_parameters() do sd[name] = t:detach() end
  for name, t in self:named_buffers() do sd[name] = t:detach() end
  if opts.torch then sd = torch_names.rename(sd, torch_names.name_map(self)) end
  return sd
end

local function same_shape(a, b)
  local sa, sb = a.shape, b.shape
  if #sa ~= #sb then return a:numel() == 1 and b:numel() == 1 end
  for i = 1, #sa do if sa[i] ~= sb[i] then return false end end
  return true
end

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

-- Compares the model's tensors with `sd`; returns the problems found.
local function diff_state(own, sd)
  local missing, unexpected, mismatch = {}, {}, {}
  for _, name in ipairs(sorted_keys(own)) do
    local v = sd[name]
    if v == nil then
      missing[#missing + 1] = name
    elseif not is_tensor(v) then
      mismatch[#mismatch + 1] = "for " .. name .. ": checkpoint holds a " .. type(v) .. ", not a tensor"
    elseif not same_shape(v, own[name]) then
      mismatch[#mismatch + 1] = string.format("size mismatch for %s: checkpoint %s, model %s",
        name, shape_str(v), shape_str(own[name]))
    end
  end
  for _, name in ipairs(sorted_keys(sd)) do
    if own[name] == nil then unexpected[#unexpected + 1] = name end
  end
  return missing, unexpected, mismatch
end

local function load_error(missing, unexpected, mismatch, strict)
  local parts = {}
  for _, m in ipairs(mismatch) do parts[#parts + 1] = m end
  if strict and #missing > 0 then
    parts[#parts + 1] = "missing keys: " .. table.concat(missing, ", ")
  end
  if strict and #unexpected > 0 then
    parts[#parts + 1] = "unexpected keys: " .. table.concat(unexpected, ", ")
  end
  if #parts == 0 then return nil end
  return "load_state_dict: " .. table.concat(parts, "; ")
end

-- {features = {[1] = {weight = t}}} -> {["features.1.weight"] = t}, the form
-- cnn.load rebuilds from a file; a flat table is returned as it is.
local function flatten(t, prefix, out)
  out = out or {}
  for k, v in pairs(t) do
    local name = prefix and prefix .. "." .. tostring(k) or tostring(k)
    if type(v) == "table" and not is_tensor(v) then flatten(v, name, out) else out[name] = v end
  end
  return out
end

-- load_state_dict(sd [, {strict = true, torch = false}]): copies sd's
-- tensors into the model (converting dtype/device).  sd may be flat or
-- nested.  With torch = true sd's names are PyTorch's (0-based container
-- indices, nn/torch_names.lua), and so are the names in the messages.
-- Checks everything before copying anything; every offending key is listed.
-- Returns {missing_keys = {...}, unexpected_keys = {...}}.
function Module:load_state_dict(sd, opts)
  if type(sd) ~= "table" then error("load_state_dict: expected a table name -> tensor", 2) end
  opts = check.options("load_state_dict", opts, { "strict", "torch" }, 2)
  check.boolean("load_state_dict", "strict", opts.strict, 2)
  check.boolean("load_state_dict", "torch", opts.torch, 2)
  sd = flatten(sd)
  local strict = opts.strict ~= false
  local own = {}
  for name, t in self:named_parameters() do own[name] = t end
  for name, t in self:named_buffers() do own[name] = t end
  if opts.torch then own = torch_names.rename(own, torch_names.name_map(self)) end
  local missing, unexpected, mismatch = diff_state(own, sd)
  local msg = load_error(missing, unexpected, mismatch, strict)
  if msg and not opts.torch then
    local m2, u2, s2 = diff_state(torch_names.rename(own, torch_names.name_map(self)), sd)
    if #m2 + #u2 + #s2 == 0 then
      msg = msg .. " (these are PyTorch's names, with 0-based Sequential indices: " ..
            "load_state_dict(sd, {torch = true}) maps them)"
    end
  end
  if msg then error(msg, 2) end
  cnn.no_grad(function()
    for name, t in pairs(own) do
      local v = sd[name]
      if v ~= nil then
        if #v.shape ~= #t.shape then v = v:reshape(t.shape) end
        t:copy_(v)
      end
    end
  end)
  return { missing_keys = missing, unexpected_keys = unexpected }
end

-- ---- hooks -------------------------------------------------------------------

local Handle = {}
Handle.__index = Handle
local next_hook_id = 0

local function add_hook(self, kind, fn)
  assert(type(fn) == "function", "register hook: expected a function")
  next_hook_id = next_hook_id + 1
  local list = rawget(self, "_hooks")[kind]
  list[#list + 1] = { id = next_hook_id, fn = fn }
  return setmetatable({ list = list, id = next_hook_id }, Handle)
end

-- handle:remove(): the hook is not called any more (idempotent).
function Handle:remove()
  for i, h in ipairs(self.list) do
    if h.id == self.id then table.remove(self.list, i) return end
  end
end

-- fn(module, input) before forward; a non-nil result replaces the input.
function Module:register_forward_pre_hook(fn) return add_hook(self, "pre", fn) end
-- fn(module, input, output) after forward; a non-nil result replaces output.
function Module:register_forward_hook(fn) return add_hook(self, "fwd", fn) end
-- fn(module, grad_output) when the gradient of the output is computed;
-- a non-nil result replaces that gradient.
function Module:register_full_backward_hook(fn) return add_hook(self, "bwd", fn) end

local function snapshot(list)
  local copy = {}
  for i, h in ipairs(list) do copy[i] = h end
  return copy
end

local function attach_backward_hooks(self, out)
  if not (is_tensor(out) and out.requires_grad) then return end
  out:register_hook(function(grad)
    for _, h in ipairs(snapshot(rawget(self, "_hooks").bwd)) do
      local r = h.fn(self, grad)
      if r ~= nil then grad = r end
    end
    return grad
  end)
end

-- ---- calling, with errors that name the layer ---------------------------------

-- The last error this module system decorated: {msg, origin, path, desc,
-- orig}.  A string error equal to `msg` is ours, and came up from `origin`.
local last_err = nil

-- The dotted path of `child` below `parent` (a child, or deeper when the
-- parent called a grandchild directly, e.g. through a ModuleList).
local function child_name(parent, child)
  for name, c in parent:named_modules() do
    if c == child and name ~= "" then return name end
  end
  return nil
end

-- The folder of the nn/*.lua files, as it appears in error positions
-- ("stdlib/nn/" when embedded, the full path under CNNSH_STDLIB).
local NN_DIR = debug.getinfo(1, "S").source:gsub("^@", ""):gsub("module%.lua$", "")

-- A C op's message carries the position of its caller; inside nn/ that
-- position ("stdlib/nn/linear.lua:40: ") says nothing to the user: drop it.
local function strip_own_position(msg)
  if msg:sub(1, #NN_DIR) == NN_DIR then
    return (msg:gsub("^[^:\n]*:%d+: ", "", 1))
  end
  return msg
end

local function annotate_error(self, err)
  if type(err) ~= "string" then return err end
  local info = last_err
  if info and info.msg == err then
    local name = child_name(self, info.origin)
    if name then table.insert(info.path, 1, name) end
  else
    info = { path = {}, desc = self:short_repr(), orig = strip_own_position(err) }
  end
  info.origin = self
  if #info.path > 0 then
    info.msg = table.concat(info.path, ".") .. " (" .. info.desc .. "): " .. info.orig
  else
    info.msg = info.desc .. ": " .. info.orig
  end
  last_err = info
  return info.msg
end

-- pcall's results as a table.pack: true, then as many values as forward
-- returned (one for a layer; two for MaxPool2d with return_indices).
local function run_forward(self, ...)
  local r = table.pack(pcall(self.forward, self, ...))
  if not r[1] then error(annotate_error(self, r[2]), 0) end
  return r
end

-- Whether any forward pre-, forward or backward hook is registered.
function Module:has_hooks()
  local h = rawget(self, "_hooks")
  return #h.pre > 0 or #h.fwd > 0 or #h.bwd > 0
end

-- Module.is_plain(m, cls): m is an instance of cls (or of a subclass)
-- running cls's own forward, with no hook -- a layer that a container may
-- run fused with its neighbours, since nothing could tell the difference
-- (nn.Sequential's blocks; nn/conv_block.lua, nn/linear_block.lua).
function Module.is_plain(m, cls)
  return Module.is_instance(m, cls) and m.forward == cls.forward and not m:has_hooks()
end

-- m:call_unhooked(fn, ...): fn(m, ...) with __call's error naming and no
-- hooks: for a container that runs a child fused with its neighbour after
-- checking that neither has hooks (nn.Sequential: BatchNorm then ReLU).
function Module:call_unhooked(fn, ...)
  local r = table.pack(pcall(fn, self, ...))
  if not r[1] then error(annotate_error(self, r[2]), 0) end
  return table.unpack(r, 2, r.n)
end

function Module:__call(x, ...)
  local hooks = rawget(self, "_hooks")
  if #hooks.pre > 0 then
    for _, h in ipairs(snapshot(hooks.pre)) do
      local r = h.fn(self, x)
      if r ~= nil then x = r end
    end
  end
  local res = run_forward(self, x, ...)
  if #hooks.fwd > 0 then
    for _, h in ipairs(snapshot(hooks.fwd)) do
      local r = h.fn(self, x, res[2])
      if r ~= nil then res[2] = r end
    end
  end
  if #hooks.bwd > 0 then attach_backward_hooks(self, res[2]) end
  return table.unpack(res, 2, res.n) -- exactly forward's values, no trailing nils
end

-- ---- printing ----------------------------------------------------------------

-- extra_repr(): the text inside the parentheses of this layer's line.
function Module:extra_repr() return "" end

-- short_repr(): a few words naming the layer in error messages.
function Module:short_repr() return self.__name end

local function indent(s)
  return (s:gsub("\n", "\n  "))
end

function Module:__tostring()
  local lines = {}
  local extra = self:extra_repr()
  if extra ~= "" then
    for line in (extra .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = line end
  end
  for name, c in self:named_children() do
    lines[#lines + 1] = "(" .. tostring(name) .. "): " .. indent(tostring(c))
  end
  if #lines == 0 then return self.__name .. "()" end
  if #lines == 1 and extra ~= "" then return self.__name .. "(" .. extra .. ")" end
  return self.__name .. "(\n  " .. table.concat(lines, "\n  ") .. "\n)"
end

-- ---- helpers shared by the layer files -----------------------------------------

Module.is_module = is_module

doc[Module] = [[
nn.Module -- the base class of layers and networks.
Subclass it with nn.Module:extend("Name"), then define init(...) and
forward(x):
  local Residual = nn.Module:extend("Residual")
  function Residual:init(c)
    self.conv1 = nn.Conv2d(c, c, 3, {padding = 1})  -- becomes a child
    self.conv2 = nn.Conv2d(c, c, 3, {padding = 1})
  end
  function Residual:forward(x)
    return F.relu(x + self.conv2(F.relu(self.conv1(x))))
  end
  r = Residual(16); y = r(cnn.randn(2, 16, 8, 8))
Modules assigned to fields become children (in assignment order); trainable
tensors are registered with self:register_parameter(name, t) (or by
assigning a leaf tensor with requires_grad = true), state with
self:register_buffer(name, t).
Methods: parameters(), named_parameters() (an iterator of dotted names),
children(), named_children(), modules(), named_modules(), buffers(),
train([mode]), eval(), zero_grad(), to(device_or_dtype), to(device, dtype),
cuda(), cpu(), float(), double(), half(),
requires_grad_([flag]), freeze(), unfreeze(), state_dict([{torch = false}]),
load_state_dict(sd [, {strict = true, torch = false}]), apply(fn),
register_forward_pre_hook(fn(m, x)), register_forward_hook(fn(m, x, out)),
register_full_backward_hook(fn(m, grad_out)) (each returns a handle with
:remove()), extra_repr().]]

local method_docs = {
  parameters = "m:parameters() -> {tensor, ...}\nEvery trainable tensor of m and its descendants, each once (for the optimizers).",
  named_parameters = "m:named_parameters() -> iterator\nfor name, p in net:named_parameters() do ... end; names are dotted paths: \"features.1.weight\".",
  buffers = "m:buffers() -> {tensor, ...}\nThe non-trained state (BatchNorm's running_mean, running_var, num_batches_tracked).",
  named_buffers = "m:named_buffers() -> iterator of (dotted name, tensor)",
  children = "m:children() -> {module, ...}\nThe direct children, in the order they were assigned.",
  named_children = "m:named_children() -> iterator of (name, module)",
  modules = "m:modules() -> {module, ...}\nm and all its descendants, parents first.",
  named_modules = "m:named_modules() -> iterator of (dotted name, module); m itself is named \"\".",
  train = "m:train([mode = true]) -> m\nTraining mode for m and its descendants (Dropout drops, BatchNorm uses batch statistics).",
  eval = "m:eval() -> m\nEvaluation mode (m:train(false)): Dropout is the identity, BatchNorm uses running statistics.",
  zero_grad = "m:zero_grad()\nSets .grad = nil on every parameter.",
  to = "m:to(device_or_dtype) -> m, m:to(device, dtype) -> m\n'cpu', 'cuda', 'cuda:0'; 'float32', 'float64', 'float16' (= 'half'), 'bfloat16' for floating\nparameters and buffers.  m:to('cuda', 'float16') is PyTorch's net.to('cuda', torch.float16):\nfloat16 inference on a GPU (m:eval()).  Parameters change in place: create the optimizer\nafter moving the model.",
  half = "m:half() -> m\nm:to('float16'): parameters and floating buffers (BatchNorm's running statistics) in\nfloat16, as PyTorch's Module.half(); then m:cuda() and m:eval() for float16 inference.",
  state_dict = "m:state_dict([{torch = false}]) -> {name = tensor, ...}\nParameters and buffers under dotted names (sharing memory with m).\ncnn.save(path, net:state_dict()) writes a checkpoint; with torch = true the names are\nPyTorch's (0-based Sequential indices), for torch's load_state_dict(strict=True).",
  load_state_dict = "m:load_state_dict(sd [, {strict = true, torch = false}]) -> {missing_keys =, unexpected_keys =}\nCopies a state dict (flat, or nested as cnn.load returns it) into m.  Size mismatches\nare errors; with strict (the default) so are missing and unexpected names; every\noffending key is listed.  Nothing is copied unless everything matches.\ntorch = true: sd has PyTorch's names (a file saved by safetensors' save_file(model.state_dict())).",
  requires_grad_ = "m:requires_grad_([flag = true]) -> m\nSets requires_grad on every parameter of m: m:requires_grad_(false) freezes m.",
  freeze = "m:freeze() -> m\nm:requires_grad_(false): m's parameters get no gradients (fine-tuning a new head).\nCall m:eval() too to keep its BatchNorm statistics.",
  unfreeze = "m:unfreeze() -> m\nm:requires_grad_(true).",
  register_forward_pre_hook = "m:register_forward_pre_hook(fn) -> handle\nfn(module, input) runs before forward; a non-nil result replaces the input.\nhandle:remove() detaches it.",
  register_forward_hook = "m:register_forward_hook(fn) -> handle\nfn(module, input, output) runs after forward; a non-nil result replaces the output.",
  register_full_backward_hook = "m:register_full_backward_hook(fn) -> handle\nfn(module, grad_output) runs when the gradient of m's output is computed;\na non-nil result replaces that gradient.",
  register_parameter = "m:register_parameter(name, t)\nMakes t (a leaf tensor, or nil) a trained parameter m[name]; sets requires_grad.",
  register_buffer = "m:register_buffer(name, t)\nMakes t state saved in state_dict() but not trained (m[name]).",
  add_module = "m:add_module(name, child)\nRegisters child under name (same as m[name] = child).",
  apply = "m:apply(fn) -> m\nCalls fn(module) on every descendant, then on m: custom initialisation.",
  extend = "Module:extend(name) -> class\nA subclass; define class:init(...) and class:forward(x).  See help(nn.Module).",
}
for name, text in pairs(method_docs) do doc[Module[name]] = text end

return Module
