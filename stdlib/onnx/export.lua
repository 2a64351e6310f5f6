-- onnx/export.lua -- cnn.onnx.export(net, example_input, path, opts): a
-- network as an ONNX model, by tracing one forward pass.
--
-- Design.  Export runs net(example_input) once in eval mode and records
-- what it computes:
--   * every module's forward is wrapped for the call (a raw field that
--     shadows the class's method, removed afterwards); a layer with an
--     exporter (LAYERS, onnx/export_layers.lua) emits its ONNX nodes and
--     runs its own forward unrecorded; any other module (Sequential, a
--     user's class) just runs, so the ops of its forward are recorded;
--   * the F.* functions and the tensor methods and operators a custom
--     forward uses (export_ops.lua) are wrapped for the call: each call
--     whose tensors come from the input emits its node(s).
-- Tensors are named as they are produced (a weak table); a parameter or
-- buffer becomes an initializer named after its state_dict key; any other
-- tensor an op meets is a constant (an initializer "const_<k>").  The
-- example input is a copy that requires grad, so a tensor computed from it
-- by an op nobody recorded has a grad_fn: meeting one is the error "op
-- <grad_fn> in layer <path> has no ONNX export".  Everything patched is
-- restored, also on error, and the net's training flags too.
--
-- dynamic_batch = true names the first dim of the input and output "batch";
-- reshapes recorded from a custom forward then write 0 ("keep the input's
-- size") where the example's batch size stood in dim 1.
local cnn = _G.cnn
local Module = require("nn.module")

local M = {}

local OPTIONS = { opset = true, dynamic_batch = true, input_name = true, output_name = true }

-- ---- the graph being built -------------------------------------------------------------

local Graph = {}
Graph.__index = Graph

local function new_graph(net, opts)
  local g = setmetatable({ nodes = {}, inits = {}, init_by_name = {}, names = setmetatable({}, { __mode = "k" }),
                           params = {}, counter = 0, opset = opts.opset, dynamic = opts.dynamic_batch,
                           path = {}, quiet = 0, node_names = {} }, Graph)
  for name, t in net:named_parameters() do g.params[t] = name end
  for name, t in net:named_buffers() do g.params[t] = name end
  return g
end

function Graph:fresh(prefix)
  self.counter = self.counter + 1
  return (prefix or "t") .. self.counter
end

function Graph:layer_path()
  return #self.path > 0 and self.path[#self.path] or "(top)"
end

function Graph:fail(fmt, ...)
  error(string.format("cnn.onnx.export: " .. fmt, ...), 0)
end

function Graph:add_init(name, t)
  if not self.init_by_name[name] then
    self.init_by_name[name] = true
    self.inits[#self.inits + 1] = { name = name, tensor = t:detach():contiguous() }
  end
  return name
end

-- A constant as an initializer (numbers take the dtype of `like`).
function Graph:const(v, dtype)
  if not cnn.is_tensor(v) then v = cnn.tensor(v, dtype or "float32") end
  return self:add_init(self:fresh("const_"), v)
end

function Graph:ints(list) return self:const(list, "int64") end

-- The ONNX name of a tensor an op reads.
function Graph:name_of(t, what)
  if not cnn.is_tensor(t) then return self:const(t) end
  local n = self.names[t]
  if n then return n end
  local p = self.params[t]
  if p then return self:add_init(p, t) end
  if t.grad_fn then
    self:fail("op %s in layer %s has no ONNX export (a %s made a tensor this export did not record)",
      t.grad_fn, self:layer_path(), what or "function")
  end
  local name = self:const(t)
  self.names[t] = name
  return name
end

-- node(op_type, {inputs}, attrs [, n_outputs]) -> the name of its first output
function Graph:node(op, inputs, attrs, nout)
  local outs = {}
  for i = 1, nout or 1 do outs[i] = self:fresh() end
  local name = self:layer_path()
  if self.node_names[name] then name = name .. "/" .. op .. "_" .. (#self.nodes + 1) end
  self.node_names[name] = true
  self.nodes[#self.nodes + 1] = { op_type = op, name = name, inputs = inputs, outputs = outs, attrs = attrs or {} }
  return outs[1]
end

-- A Reshape target for a result of shape `shape` made from x: with
-- dynamic_batch, 0 (keep the input's size) where x's batch size stands
-- first, so the graph takes any batch.
function Graph:batch_shape(shape, x)
  local s = { table.unpack(shape) }
  if self.dynamic and #s > 0 and x:dim() > 0 and s[1] == x:size(1) then s[1] = 0 end
  return s
end

-- Gives tensor t the name of a node's output.
function Graph:bind(t, name)
  if cnn.is_tensor(t) then self.names[t] = name end
  return t
end

-- ---- patching -------------------------------------------------------------------------------

-- Replaces tbl[key] by wrap(orig) and remembers how to undo it.
local function patch(undo, tbl, key, wrap)
  local orig = rawget(tbl, key)
  if orig == nil then return end
  rawset(tbl, key, wrap(orig))
  undo[#undo + 1] = function() rawset(tbl, key, orig) end
end

-- Wraps each module's forward: layers with an exporter emit nodes, the
-- others record the path for messages.
local function patch_modules(g, net, undo, layers)
  for path, m in net:named_modules() do
    local name = path == "" and "(top)" or path
    local exporter = layers[getmetatable(m)]
    local cls_forward = getmetatable(m).forward
    local function wrapped(self, ...)
      if g.quiet > 0 then return cls_forward(self, ...) end
      g.path[#g.path + 1] = name
      local res
      if exporter then
        g.quiet = g.quiet + 1
        local ok, out = pcall(cls_forward, self, ...)
        g.quiet = g.quiet - 1
        if not ok then error(out, 0) end
        res = table.pack(out)
        g.quiet = g.quiet + 1 -- the exporter's own tensor calls are not the network's
        ok, out = pcall(exporter, g, self, out, ...)
        g.quiet = g.quiet - 1
        if not ok then error(out, 0) end
      else
        res = table.pack(cls_forward(self, ...))
      end
      g.path[#g.path] = nil
      return table.unpack(res, 1, res.n)
    end
    rawset(m, "forward", wrapped)
    undo[#undo + 1] = function() rawset(m, "forward", nil) end
  end
end

-- ---- options and entry point ----------------------------------------------------------------

local function check_opts(opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("cnn.onnx.export: opts must be a table", 3) end
  for k in pairs(opts) do
    if not OPTIONS[k] then error("cnn.onnx.export: unknown option '" .. tostring(k) .. "' (opset, dynamic_batch, input_name, output_name)", 3) end
  end
  local o = { opset = opts.opset or 13, dynamic_batch = opts.dynamic_batch == true,
              input_name = opts.input_name or "input", output_name = opts.output_name or "output" }
  if math.type(o.opset) ~= "integer" or o.opset < 13 or o.opset > 17 then
    error("cnn.onnx.export: opset must be an integer from 13 to 17, got " .. tostring(opts.opset), 3)
  end
  return o
end

local function value_info(name, t, dynamic)
  local shape = t.shape
  if dynamic and #shape > 0 then shape[1] = "batch" end
  local types = { float32 = 1, uint8 = 2, int64 = 7, float16 = 10, float64 = 11, bfloat16 = 16 }
  return { name = name, elem_type = types[t.dtype], shape = shape }
end

-- Runs the traced forward; returns the output tensor.
local function trace(g, net, x, o)
  local undo = {}
  local ok, out = pcall(function()
    local by_class, nn = {}, require("nn")
    for name, fn in pairs(require("onnx.export_layers")) do
      if nn[name] then by_class[nn[name]] = fn end
    end
    patch_modules(g, net, undo, by_class)
    require("onnx.export_ops").patch(g, undo, patch)
    return cnn.enable_grad(function() return net(x) end)
  end)
  for i = #undo, 1, -1 do undo[i]() end
  if not ok then error(out, 0) end
  if not cnn.is_tensor(out) then g:fail("the network must return one tensor, got %s", type(out)) end
  return out
end

function M.export(net, example, path, opts)
  if not Module.is_module(net) then error("cnn.onnx.export(net, x, path): net must be a module", 2) end
  if not cnn.is_tensor(example) then error("cnn.onnx.export(net, x, path): x must be a tensor (an example input)", 2) end
  if type(path) ~= "string" then error("cnn.onnx.export(net, x, path): path must be a string", 2) end
  local o = check_opts(opts)
  local g = new_graph(net, o)
  local x = example:detach():clone()
  x.requires_grad = true
  g.names[x] = o.input_name
  local flags = {}
  for _, m in ipairs(net:modules()) do flags[m] = m.training end
  net:eval()
  local ok, out = pcall(trace, g, net, x, o)
  for m, f in pairs(flags) do rawset(m, "training", f) end
  if not ok then error(out, 2) end
  local oname = g:name_of(out, "the output")
  g.nodes[#g.nodes + 1] = { op_type = "Identity", name = "output", inputs = { oname }, outputs = { o.output_name }, attrs = {} }
  cnn.io.onnx_write(path, {
    ir_version = 8, opset = o.opset, producer_name = "cnnsh", graph_name = net.__name,
    nodes = g.nodes, initializers = g.inits,
    inputs = { value_info(o.input_name, x, o.dynamic_batch) },
    outputs = { value_info(o.output_name, out, o.dynamic_batch) } })
  return out:detach()
end

M.Graph = Graph
return M
