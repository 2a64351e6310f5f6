-- viz/graph.lua -- viz.graph: the autograd graph as a tree or Graphviz DOT
-- (module "viz.graph"; viz/init.lua puts its functions into viz).
local cnn = _G.cnn
local doc = cnn.doc or {}
local internal = require("cnn.internal")
local C = require("viz.common")
local P, check_opts, render, shape_str = C.P, C.check_opts, C.render, C.shape_str

local viz = {}

-- ---- autograd graph --------------------------------------------------------------------

-- The inputs of the node that made t, or nil (leaf, or no binding to walk).
local function node_inputs(t)
  if not t.grad_fn then return nil end
  if internal.grad_fn_inputs then return internal.grad_fn_inputs(t) end
  local ok, r = pcall(function() return t:grad_fn_inputs() end)
  if ok then return r end
  return nil
end

local function node_key(t)
  if internal.node_key then return internal.node_key(t) end
  return t
end

-- key -> name for the parameters of a module (to name the leaves).
local function leaf_names(names)
  local map = {}
  if type(names) == "table" and names.named_parameters then
    for name, p in names:named_parameters() do map[node_key(p)] = name end
  elseif type(names) == "table" then
    for name, p in pairs(names) do
      if cnn.is_tensor(p) then map[node_key(p)] = tostring(name) end
    end
  end
  return map
end

local function node_text(t, names)
  if t.grad_fn then return t.grad_fn .. "  " .. shape_str(t) end
  local name = names[node_key(t)]
  local what = t.requires_grad and "leaf" or "constant"
  return (name and (name .. "  ") or "") .. what .. "  " .. shape_str(t)
end

-- The inputs of t's node that carry gradients, and whether the node was
-- freed (an op node always has one such input until backward frees it).
local function kids_of(t)
  local kids = {}
  for _, x in ipairs(node_inputs(t) or {}) do if x then kids[#kids + 1] = x end end
  return kids, t.grad_fn ~= nil and #kids == 0 and internal.grad_fn_inputs ~= nil
end

local FREED = "  (graph freed by backward)"

-- Appends the tree below t to lines (prefix: the drawing so far).
local function tree(t, prefix, last, lines, st)
  local branch = st.ascii and (last and "`- " or "|- ") or (last and "└─ " or "├─ ")
  local key = node_key(t)
  local seen = st.seen[key]
  local kids, freed = kids_of(t)
  lines[#lines + 1] = prefix .. branch .. node_text(t, st.names) ..
                      (seen and "  (shared, above)" or (freed and FREED or ""))
  if seen then return end
  st.seen[key] = true
  local child = prefix .. (last and "   " or (st.ascii and "|  " or "│  "))
  for i, x in ipairs(kids) do tree(x, child, i == #kids, lines, st) end
end

-- viz.graph_str(t [, {names = net_or_table, mode =}])
function viz.graph_str(t, opts)
  assert(cnn.is_tensor(t), "viz.graph: expected a tensor")
  opts = check_opts("viz.graph", opts)
  local st = { seen = {}, names = leaf_names(opts.names), ascii = P.mode(opts) == "ascii" }
  if not t.grad_fn then
    return node_text(t, st.names) .. "  (no graph: a leaf, or made under no_grad)\n"
  end
  local kids, freed = kids_of(t)
  local lines = { node_text(t, st.names) .. (freed and FREED or "") }
  st.seen[node_key(t)] = true
  for i, x in ipairs(kids) do tree(x, "", i == #kids, lines, st) end
  if not internal.grad_fn_inputs then lines[#lines + 1] = "(grad_fn_inputs is missing: inputs not shown)" end
  return table.concat(lines, "\n") .. "\n"
end

-- Graphviz DOT text of the graph: one node per op or leaf, edges input -> op.
function viz.graph_dot(t, opts)
  opts = opts or {}
  local names, ids, out = leaf_names(opts.names), {}, { "digraph autograd {", "  rankdir=BT;" }
  local count = 0
  local function id(x)
    local k = node_key(x)
    if ids[k] then return ids[k], true end
    count = count + 1
    ids[k] = "n" .. count
    local label = node_text(x, names):gsub('"', "'")
    local shape = x.grad_fn and "box" or "ellipse"
    out[#out + 1] = string.format('  %s [label="%s", shape=%s];', ids[k], label, shape)
    return ids[k], false
  end
  local function visit(x)
    local me, done = id(x)
    if done then return me end
    for _, inp in ipairs(node_inputs(x) or {}) do
      if inp then
        local from = visit(inp)
        out[#out + 1] = string.format("  %s -> %s;", from, me)
      end
    end
    return me
  end
  visit(t)
  out[#out + 1] = "}"
  return table.concat(out, "\n") .. "\n"
end

-- viz.graph(t [, {names = net, dot = "file.dot"}]) prints the tree; with
-- dot = path also writes Graphviz DOT there (render: dot -Tpng file.dot).
function viz.graph(t, opts)
  io.write(viz.graph_str(t, opts))
  if opts and opts.dot then
    local f = assert(io.open(opts.dot, "w"))
    f:write(viz.graph_dot(t, opts))
    f:close()
    io.write("wrote " .. opts.dot .. "\n")
  end
end

doc[viz.graph] = [[
viz.graph(t [, {names = net, dot = "graph.dot"}])
Prints the autograd graph that produced t as an indented tree (op and
shape; leaves named from names = a module's parameters); a node reached
twice is marked "(shared, above)".  dot = path also writes Graphviz DOT.
Call it before backward(), which frees the graph.]]

return viz
