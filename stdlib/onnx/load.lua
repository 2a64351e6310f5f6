-- onnx/load.lua -- cnn.onnx.load(path): an ONNX model as an nn.Module that
-- runs its graph with cnnsh ops (onnx/ops.lua).
--
-- Design.  Each graph node becomes a child module, called in the file's
-- (topological) order by OnnxModel:forward, so summary, trace and profile
-- see one row per node.  Nodes that are plain layers become the nn layer:
-- Conv (2-D, weight an initializer) -> nn.Conv2d, ConvTranspose (2-D,
-- symmetric pads) -> nn.ConvTranspose2d, Gemm with B an
-- initializer and transB = 1 -> nn.Linear, BatchNormalization ->
-- nn.BatchNorm2d (any rank >= 2), LayerNormalization over the last dims
-- with initializers -> nn.LayerNorm, Relu/Sigmoid/Tanh/LeakyRelu/Elu -> the
-- activation layers; their initializers become the layer's parameters and
-- buffers.  Every other node is an OnnxOp module (class named after its
-- op_type) that calls ops[op_type].  Remaining float initializers become
-- parameters of the model (trainable), others buffers, both under their
-- ONNX names.
--
-- Names: a layer that takes initializers "<p>.weight" / "<p>.bias" is the
-- child <p>, so a model exported by cnn.onnx.export has the exporter's
-- state_dict keys again; otherwise the child is named after the node
-- (or "<op_type>_<k>").  The module comes back in eval mode: ONNX graphs
-- describe inference (BatchNormalization with running statistics, Dropout
-- the identity); m:train() trains them as nn layers.
local cnn = _G.cnn
local nn = require("nn")
local Module = nn.Module
local opsmod = require("onnx.ops")
local ops, unsupported, attr = opsmod.ops, opsmod.unsupported, opsmod.attr

local M = {}

-- ---- the node module -------------------------------------------------------------------

local op_classes = {}

local function op_class(op_type)
  local cls = op_classes[op_type]
  if cls then return cls end
  cls = Module:extend(op_type)
  function cls:forward(...) return ops[self.op_type](self, ...) end
  function cls:extra_repr() return self.node_name ~= "" and ("node=" .. self.node_name) or "" end
  op_classes[op_type] = cls
  return cls
end

local function op_module(node, opset)
  local m = op_class(node.op_type)()
  rawset(m, "op_type", node.op_type)
  rawset(m, "attrs", node.attrs)
  rawset(m, "opset", opset)
  rawset(m, "outputs", node.outputs)
  rawset(m, "node_name", node.name)
  return m
end

-- ---- nodes that are nn layers -------------------------------------------------------------

local function prefix_of(name)
  return name:match("^(.*)%.weight$")
end

local function is_init(g, name) return name and name ~= "" and g.inits[name] ~= nil end

local function set_param(m, key, t)
  m:register_parameter(key, t:detach():clone())
end

local function conv_layer(g, node)
  local w = g.inits[node.inputs[2]]
  if w:dim() ~= 4 or attr(node, "auto_pad", "NOTSET") ~= "NOTSET" then return nil end
  local b = node.inputs[3] and g.inits[node.inputs[3]]
  if node.inputs[3] and node.inputs[3] ~= "" and not b then return nil end
  local p = attr(node, "pads", { 0, 0, 0, 0 })
  local groups = attr(node, "group", 1)
  local m = nn.Conv2d(w:size(2) * groups, w:size(1), { w:size(3), w:size(4) }, {
    stride = attr(node, "strides", { 1, 1 }), dilation = attr(node, "dilations", { 1, 1 }),
    padding = { p[1], p[3], p[2], p[4] }, groups = groups, bias = b ~= nil })
  set_param(m, "weight", w)
  if b then set_param(m, "bias", b) end
  return m, 1
end

-- ConvTranspose with symmetric pads and PyTorch's output_padding limits
-- (the form cnn.onnx.export writes) -> nn.ConvTranspose2d
local function conv_transpose_layer(g, node)
  local w = g.inits[node.inputs[2]]
  if w:dim() ~= 4 or attr(node, "auto_pad", "NOTSET") ~= "NOTSET" or attr(node, "output_shape", nil) then return nil end
  local b = node.inputs[3] and node.inputs[3] ~= "" and g.inits[node.inputs[3]]
  if node.inputs[3] and node.inputs[3] ~= "" and not b then return nil end
  local p = attr(node, "pads", { 0, 0, 0, 0 })
  local s, d = attr(node, "strides", { 1, 1 }), attr(node, "dilations", { 1, 1 })
  local op = attr(node, "output_padding", { 0, 0 })
  if p[1] ~= p[3] or p[2] ~= p[4] then return nil end
  for i = 1, 2 do if op[i] >= s[i] and op[i] >= d[i] then return nil end end
  local groups = attr(node, "group", 1)
  local m = nn.ConvTranspose2d(w:size(1), w:size(2) * groups, { w:size(3), w:size(4) }, {
    stride = s, dilation = d, padding = { p[1], p[2] }, output_padding = op, groups = groups, bias = b ~= nil })
  set_param(m, "weight", w)
  if b then set_param(m, "bias", b) end
  return m, 1
end

local function linear_layer(g, node)
  local w = g.inits[node.inputs[2]]
  local c = node.inputs[3] and node.inputs[3] ~= "" and g.inits[node.inputs[3]]
  if w:dim() ~= 2 or attr(node, "transB", 0) ~= 1 or attr(node, "transA", 0) ~= 0
     or attr(node, "alpha", 1.0) ~= 1 or attr(node, "beta", 1.0) ~= 1 then return nil end
  if node.inputs[3] and node.inputs[3] ~= "" and not (c and c:dim() == 1 and c:size(1) == w:size(1)) then return nil end
  local m = nn.Linear(w:size(2), w:size(1), { bias = c ~= nil })
  set_param(m, "weight", w)
  if c then set_param(m, "bias", c) end
  return m, 1
end

local function batchnorm_layer(g, node)
  for i = 2, 5 do if not is_init(g, node.inputs[i]) then return nil end end
  local w = g.inits[node.inputs[2]]
  local m = nn.BatchNorm2d(w:size(1), { eps = attr(node, "epsilon", 1e-5), momentum = 1 - attr(node, "momentum", 0.9) })
  rawset(m, "accepted_dims", { [2] = true, [3] = true, [4] = true, [5] = true })
  rawset(m, "accepted_text", "2D to 5D")
  set_param(m, "weight", w)
  set_param(m, "bias", g.inits[node.inputs[3]])
  m.running_mean = g.inits[node.inputs[4]]:clone()
  m.running_var = g.inits[node.inputs[5]]:clone()
  return m, 1
end

-- LayerNormalization over the last k dims (axis = -k) with Scale (and B)
-- initializers of k dims, and only Y asked for: nn.LayerNorm
local function layernorm_layer(g, node)
  local scale = is_init(g, node.inputs[2]) and g.inits[node.inputs[2]]
  local has_bias = node.inputs[3] and node.inputs[3] ~= ""
  if not scale or scale:dim() == 0 or (has_bias and not is_init(g, node.inputs[3])) then return nil end
  if attr(node, "axis", -1) ~= -scale:dim() then return nil end
  for i = 2, #node.outputs do if node.outputs[i] ~= "" then return nil end end
  local b = has_bias and g.inits[node.inputs[3]] or nil
  if b and table.concat(b.shape, "x") ~= table.concat(scale.shape, "x") then return nil end
  local m = nn.LayerNorm(scale.shape, { eps = attr(node, "epsilon", 1e-5), bias = b ~= nil })
  set_param(m, "weight", scale)
  if b then set_param(m, "bias", b) end
  return m, 1
end

local ACTIVATIONS = {
  Relu = function() return nn.ReLU() end,
  Sigmoid = function() return nn.Sigmoid() end,
  Tanh = function() return nn.Tanh() end,
  LeakyRelu = function(node) return nn.LeakyReLU(attr(node, "alpha", 0.01)) end,
  Elu = function(node) return nn.ELU(attr(node, "alpha", 1.0)) end,
}

-- The nn layer for a node, and how many of its inputs it takes from the
-- graph (the rest are its parameters); nil when the node is not one.
local function layer_for(g, node)
  if node.op_type == "Conv" and is_init(g, node.inputs[2]) then return conv_layer(g, node) end
  if node.op_type == "Gemm" and is_init(g, node.inputs[2]) then return linear_layer(g, node) end
  if node.op_type == "ConvTranspose" and is_init(g, node.inputs[2]) then return conv_transpose_layer(g, node) end
  if node.op_type == "BatchNormalization" and not unsupported.BatchNormalization(node) then
    return batchnorm_layer(g, node)
  end
  if node.op_type == "LayerNormalization" then return layernorm_layer(g, node) end
  if ACTIVATIONS[node.op_type] then return ACTIVATIONS[node.op_type](node), 1 end
  return nil
end

-- ---- the model ---------------------------------------------------------------------------

local OnnxModel = Module:extend("OnnxModel")

-- the error for a node cnnsh cannot run, or nil
local function node_problem(node)
  if node.domain ~= "" and node.domain ~= "ai.onnx" then
    return string.format("operator %s of domain '%s' is not supported", node.op_type, node.domain)
  end
  if not ops[node.op_type] and not unsupported[node.op_type] then
    return "operator " .. node.op_type .. " is not supported"
  end
  local why = unsupported[node.op_type] and unsupported[node.op_type](node)
  if why then return why end
  for k, v in pairs(node.attrs) do
    if v == false then return string.format("%s: attribute %s holds a graph or another kind cnnsh does not read", node.op_type, k) end
  end
end

local function unique_name(self, want)
  local name, k = want, 1
  while rawget(self, name) ~= nil do k = k + 1; name = want .. "_" .. k end
  return name
end

local function child_name(self, g, node, layer)
  local p = layer and prefix_of(node.inputs[2] or "")
  if p and p ~= "" and rawget(self, p) == nil then return p end
  local want = node.name ~= "" and node.name or (node.op_type .. "_" .. (#self._steps + 1))
  return unique_name(self, want)
end

-- Adds one node: its module, and the step forward runs.
local function add_node(self, g, node, path)
  local problem = node_problem(node)
  if problem then error(string.format("cnn.onnx.load: %s: node %s: %s", path, node.name ~= "" and node.name or "#" .. (#self._steps + 1), problem), 0) end
  local layer, ninputs = layer_for(g, node)
  local name = child_name(self, g, node, layer)
  self:add_module(name, layer or op_module(node, g.opset))
  local inputs = {}
  for i = 1, (layer and ninputs or #node.inputs) do inputs[i] = node.inputs[i] end
  self._steps[#self._steps + 1] = { child = name, inputs = inputs, outputs = node.outputs }
  if not layer then
    for _, n in ipairs(inputs) do g.used[n] = true end
  end
end

-- Initializers not taken by a layer: parameters (float) or buffers, under
-- their ONNX names.
local function add_initializers(self, g)
  for _, it in ipairs(g.list) do
    if g.used[it.name] then
      local t = it.tensor
      if (t.dtype == "float32" or t.dtype == "float64") and rawget(self, it.name) == nil then
        self:register_parameter(it.name, t:clone())
      else
        self:register_buffer(it.name, t)
      end
      self._init_names[#self._init_names + 1] = it.name
    end
  end
end

local function check_values(values, what, path)
  for _, v in ipairs(values) do
    if v.elem_type == -1 then
      error(string.format("cnn.onnx.load: %s: graph %s %s is not a tensor (sequences, maps and optionals are not supported)",
        path, what, v.name), 0)
    end
  end
end

function OnnxModel:init(model, path)
  check_values(model.inputs, "input", path)
  check_values(model.outputs, "output", path)
  rawset(self, "_steps", {})
  rawset(self, "_init_names", {})
  local g = { inits = {}, list = model.initializers, used = {}, opset = model.opset }
  for _, it in ipairs(model.initializers) do g.inits[it.name] = it.tensor end
  for _, node in ipairs(model.nodes) do add_node(self, g, node, path) end
  add_initializers(self, g)
  local ins = {}
  for _, v in ipairs(model.inputs) do
    if not g.inits[v.name] then ins[#ins + 1] = v end
  end
  rawset(self, "graph_inputs", ins)
  rawset(self, "graph_outputs", model.outputs)
  rawset(self, "opset", model.opset)
  rawset(self, "path", path)
end

-- env[name] = value for the inputs given to forward
local function bind_inputs(self, args)
  local env = {}
  while args.n > 0 and args[args.n] == nil do args.n = args.n - 1 end -- __call passes x = nil
  if args.n ~= #self.graph_inputs then
    error(string.format("OnnxModel: the graph takes %d input(s) (%s), got %d", #self.graph_inputs,
      table.concat((function() local t = {} for i, v in ipairs(self.graph_inputs) do t[i] = v.name end return t end)(), ", "),
      args.n), 0)
  end
  for i, v in ipairs(self.graph_inputs) do env[v.name] = args[i] end
  for _, name in ipairs(self._init_names) do env[name] = rawget(self, name) end
  return env
end

local function run_step(self, env, step)
  local args = { n = #step.inputs }
  for i, name in ipairs(step.inputs) do
    if name ~= "" then
      args[i] = env[name]
      if args[i] == nil then error(string.format("OnnxModel: value '%s' is used before it is computed", name), 0) end
    end
  end
  local outs = table.pack(self[step.child](table.unpack(args, 1, args.n)))
  for i, name in ipairs(step.outputs) do
    if name ~= "" then env[name] = outs[i] end
  end
end

function OnnxModel:forward(...)
  local env = bind_inputs(self, table.pack(...))
  for _, step in ipairs(self._steps) do run_step(self, env, step) end
  local outs = {}
  for i, v in ipairs(self.graph_outputs) do outs[i] = env[v.name] end
  return table.unpack(outs, 1, #self.graph_outputs)
end

function OnnxModel:extra_repr()
  return string.format("opset=%d, nodes=%d", self.opset, #self._steps)
end

-- ---- entry point ------------------------------------------------------------------------------

function M.load(path)
  if type(path) ~= "string" then error("cnn.onnx.load(path): path must be a string, got " .. type(path), 2) end
  local model = cnn.io.onnx_read(path)
  local ok, m = pcall(OnnxModel, model, path)
  if not ok then error(m, 2) end
  return m:eval()
end

M.OnnxModel = OnnxModel
return M
