-- help.lua -- help(obj) and the topics of :help (module "help"; the global
-- `help` is this function, loaded on first use).
--
--   help()               commands, topics, how to ask about a name
--   help("tensors")      a topic (see TOPICS below)
--   help(F.relu)         signature and description, from cnn.doc
--   help("F.relu")       the same, by name; "Tensor:sum" for a method
--   help(nn.Conv2d)      a class; help(net[1]) finds the class of a layer
--   help(nn), help(F)    the doc of the module, then one line per member
--   help(x)              a tensor: what it is, and its methods
--
-- Design: docs live in cnn.doc (weak keys: function or table -> text whose
-- first line is the signature), filled by the C bindings and by each
-- stdlib module.  Nothing here is required at start-up.  Output goes
-- through io.write, looked up at call time (tests capture it).
-- Invariant: help never raises on any argument; it prints what it can.

local WIDTH = 78

local TOPICS = {}
local TOPIC_ORDER = {}

local function topic(name, summary, text)
  TOPICS[name] = { summary = summary, text = text }
  TOPIC_ORDER[#TOPIC_ORDER + 1] = name
end

topic("commands", "the :commands and keys of the prompt", [[
:help [topic]   this overview, or a topic, or help on a name (:help F.relu)
:time <expr>    run <expr> repeatedly; min, median and max time (a
                statement runs as often, and its effects stay)
:mem            live and peak tensor memory (cnn.memory())
:bt             the full traceback of the last error
:load file.lua  run a file in this session
:reset          start over with a fresh Lua state (history stays)
:quit           leave cnnsh (Ctrl-D works too)

Keys: Tab completes names, fields, methods (x:su<Tab>), :commands and file
names inside a string.  Ctrl-C stops running code (variables are kept) or
clears the line; Up/Down walk the history (saved across sessions);
Ctrl-R searches it.

Typing: a bare expression prints its value, and so does the expression
after a line's last ";" (out = net(x); out.shape).  Only an open block,
bracket or long string, or a trailing operator, continues on ">>"; other
syntax errors are reported at once.  A top-level `local` lives on:
"local q = 5", then "q" prints 5.  It becomes a session variable, shared by
every later line and every function defined at the prompt, but not a
global: scripts, :load and dofile do not see it (scripts keep Lua's
rules).  A `local x <close>` is closed when its line ends.  `_` holds the
last printed value.  An error shows its message and the line of your own
code it came from; :bt shows the whole traceback.]])

topic("tensors", "creating tensors, dtypes, devices, math", [[
> x = cnn.randn(4, 3, 32, 32)      -- float32 on the CPU; sizes or a table
> t = cnn.tensor{{1, 2}, {3, 4}}   -- from nested tables
> x.shape, x:size(2), t:double():sum()
cnn.zeros, ones, full, empty, rand, randn, randint(lo, hi, sizes),
arange(a, b [, step]) (b included), linspace, eye, *_like
dtypes: 'float32' (default) 'float64' 'int64' 'uint8';  x:to('float64'),
x:double(), x:float(), x:long(), x:byte();  devices: 'cpu', 'cuda'
fields: x.shape x.dtype x.device x.ndim x.requires_grad x.grad
x.shape and x:size() print as {4, 3, 32, 32}; x.shape[1], #x.shape and
x.shape == {4, 3, 32, 32} work.
math: + - * / ^ and methods (add, exp, relu, clamp, ...) with NumPy
broadcasting; comparisons x:gt(0), x:eq(y) give uint8 masks (Lua's < >
on tensors are errors; x == y asks whether x and y are the same tensor);
reductions x:sum(dim [, keepdim]), mean, max (values, indices), argmax...
> (t + cnn.tensor{10, 20}):sum(1)  -- broadcasting, then a sum over dim 1
> t:gt(2), t:max(2)                -- a uint8 mask; values and 1-based indices
help(x) lists a tensor's methods; help('Tensor:sum') explains one.]])

topic("indexing", "1-based indices, slices, views", [[
Indices and dims are 1-based; negatives count from the end; ranges are
inclusive, as in Lua and Torch7.
> x = cnn.arange(1, 12):view(3, 4)
> x[1]                -- first slice along dim 1 (a view)
> x[-1]               -- the last one
> x[{2, 3}]           -- element (2, 3): a 0-d tensor (:item() gives a number)
> x[{ {}, {2, 3} }]   -- all rows, columns 2..3
> x[{ {1, -2}, 1 }]   -- rows 1..n-1 of column 1
> x[{ {}, 2 }] = 0    -- assignment into a view (number or broadcastable tensor)
views share memory: view/reshape, transpose, permute, narrow(d, start, len),
select(d, i), squeeze, unsqueeze, expand, flatten; :contiguous() copies.]])

topic("autograd", "gradients, backward, no_grad, hooks", [[
> w = cnn.randn(3, 3); w.requires_grad = true
> y = (w * w):sum(); y:backward()
> w.grad               -- 2 * w
> h = w:matmul(w); h:retain_grad()   -- keep an intermediate's gradient
> w:register_hook(function(g) return g * 0.5 end)  -- see or change gradients
> cnn.no_grad(function() return w * 2 end)   -- no graph is recorded inside
w.grad = nil (or w:zero_grad()) before the next backward.]])

topic("nn", "layers, networks, custom modules", [[
> net = nn.Sequential(nn.Conv2d(1, 32, 3, {padding = 1}), nn.ReLU(),
>>                   nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32*14*14, 10))
> net                    -- prints the tree;  net[1] is the first layer
> out = net(cnn.randn(8, 1, 28, 28)); out.shape   -- forward: {8, 10}
net:parameters(), net:named_parameters(), net:state_dict(),
net:load_state_dict(sd), net:train(), net:eval(), net:to('cuda')
A custom module:
> local Block = nn.Module:extend("Block")
> function Block:init(c) self.conv = nn.Conv2d(c, c, 3, {padding = 1}) end
> function Block:forward(x) return F.relu(x + self.conv(x)) end
> Block(4)(cnn.randn(2, 4, 8, 8)).shape
help(nn) lists the layers; help(nn.Conv2d) explains one.]])

topic("training", "optimizers, data, a training loop, checkpoints", [[
> cnn.manual_seed(42)               -- runs are reproducible
> opt = optim.Adam(net:parameters(), {lr = 1e-3})
> train_set = data.FashionMNIST{train = true}   -- 60,000 images; a part of them:
> part = data.Subset(train_set, table.move(data.randperm(#train_set), 1, 2000, 1, {}))
> loader = data.DataLoader(part, {batch_size = 100, shuffle = true})
> for x, y in loader do              -- y: int64 labels 1..10
>>   opt:zero_grad()
>>   local loss = F.cross_entropy(net(x), y)
>>   loss:backward(); opt:step()
>> end
> cnn.save("net.safetensors", net:state_dict())   -- atomic; PyTorch-readable
> net:load_state_dict(cnn.load("net.safetensors"))
train.fit(net, loader, {epochs = 3}) runs such a loop with a progress bar.]])

-- (models helper) the model zoo, PyTorch weights, fine-tuning
topic("models", "the model zoo, PyTorch weights, fine-tuning", [[
> r20 = models.resnet20()            -- also lenet5, vgg11/16_bn, resnet18/34/50, mobilenet_v2, unet
> models.count_parameters(r20)       -- 272474, as published
> sd = r20:state_dict{torch = true}  -- PyTorch's names: "layer1.0.conv1.weight"
> r20:load_state_dict(sd, {torch = true})
> r20:freeze(); r20.fc = nn.Linear(64, 5)   -- a new head, the only trained layer
> head_opt = optim.SGD(r20.fc:parameters(), {lr = 0.01, momentum = 0.9})
> plateau = optim.lr_scheduler.ReduceLROnPlateau(head_opt, {patience = 2})
A file saved by PyTorch (safetensors' save_file(model.state_dict())) loads with
net:load_state_dict(cnn.load(path), {torch = true}); examples/finetune.lua
fine-tunes a ResNet-18 that way.  help(models) lists the models.]])

topic("labels", "class labels are 1..C (not 0-based)", [[
Class labels follow Lua: 1..C.  The targets of cross_entropy and nll_loss,
the indices returned by max, min and argmax, and the labels the data
loaders hand out (they add 1 to the 0-based labels stored in IDX/CIFAR
files) are all 1-based, so pred:eq(labels) just works.  PyTorch users:
subtract nothing, add nothing.]])

topic("memory", "tensor memory and the garbage collector", [[
:mem or cnn.memory() -> {live =, peak =, count =} (bytes held by tensors),
cached (freed blocks kept for reuse; cnn.empty_cache() gives them back) and
collector_time (seconds Lua's collector has run for tensor memory).
The collector is told about tensor memory, so loops stay flat without
collectgarbage().  To free at once, a <close> variable is released at `end`
(using it later is an error):
> do local big <close> = cnn.zeros(4096, 4096); print(big:sum():item()) end
> cnn.memory().live]])

topic("gpu", "CUDA", [[
> cnn.cuda.is_available()   -- true, or false and the reason
x = x:cuda(); net:to('cuda')    -- the same code runs on the GPU
The CUDA backend loads on first use, so CPU-only work starts fast.]])

-- ---- finding docs and names ----------------------------------------------

local function write(...) io.write(...) end

local function cnn_mod() return rawget(_G, "cnn") end

local function docs()
  local c = cnn_mod()
  return type(c) == "table" and type(rawget(c, "doc")) == "table" and c.doc or {}
end

local function is_tensor(v)
  local c = cnn_mod()
  return type(c) == "table" and type(c.is_tensor) == "function" and c.is_tensor(v)
end

-- the doc of v, of its class (layers: the metatable, then `super`s)
local function doc_of(v)
  local d = docs()
  if d[v] then return d[v] end
  if type(v) ~= "table" then return nil end
  local cls, seen = getmetatable(v), 0
  while type(cls) == "table" and seen < 16 do
    if d[cls] then return d[cls], cls end
    cls, seen = rawget(cls, "super"), seen + 1
  end
  return nil
end

-- roots searched for the name of a value; only modules already loaded
local function roots()
  local list = {}
  local function add(name, t, lua)
    if type(t) == "table" then list[#list + 1] = { name, t, lua } end
  end
  add("cnn", cnn_mod())
  add("F", rawget(_G, "F"))
  for _, m in ipairs({ "nn", "optim", "data", "train", "viz", "models" }) do
    add(m, package.loaded[m])
  end
  for _, m in ipairs({ "string", "table", "math", "io", "os", "coroutine", "utf8" }) do
    add(m, rawget(_G, m), true)
  end
  return list
end

local LUA_BASE = { "assert", "collectgarbage", "dofile", "error", "getmetatable", "ipairs",
  "load", "loadfile", "next", "pairs", "pcall", "print", "rawequal", "rawget", "rawlen",
  "rawset", "require", "select", "setmetatable", "tonumber", "tostring", "type", "xpcall" }

-- "F.relu" for F.relu: a breadth-first walk over the roots, two levels
-- deep; the second result says whether it is part of Lua itself
local function name_of(v)
  for _, k in ipairs(LUA_BASE) do
    if rawequal(rawget(_G, k), v) then return k, true end
  end
  local queue, seen = roots(), {}
  local head = 1
  while queue[head] do
    local prefix, t, lua = queue[head][1], queue[head][2], queue[head][3]
    head = head + 1
    if not seen[t] then
      seen[t] = true
      local keys = {}
      for k in pairs(t) do if type(k) == "string" then keys[#keys + 1] = k end end
      table.sort(keys)
      for _, k in ipairs(keys) do
        local x = rawget(t, k)
        if rawequal(x, v) then return prefix .. "." .. k, lua end
        if type(x) == "table" and not prefix:find("%.") and k ~= "doc" then
          queue[#queue + 1] = { prefix .. "." .. k, x, lua }
        end
      end
    end
  end
  return nil
end

local function tensor_methods()
  local mt = debug.getregistry()["cnn.Tensor"]
  return type(mt) == "table" and type(rawget(mt, "__methods")) == "table" and mt.__methods or {}
end

-- the value a string names: "F.relu", "nn.Conv2d", "Tensor:sum", "math.floor"
local function resolve(s)
  local method = s:match("^Tensor[:.]([%w_]+)$")
  if method then return tensor_methods()[method] end
  if not s:match("^[%a_][%w_]*[%w_.:]*$") then return nil end
  local ok, v = pcall(function()
    local cur = _G
    for part in s:gmatch("[^.:]+") do
      if type(cur) ~= "table" then return nil end
      cur = cur[part]
    end
    return cur
  end)
  return ok and v or nil
end

-- ---- printing -------------------------------------------------------------

local function print_doc(text)
  local first, rest = text:match("^([^\n]*)\n?(.*)$")
  write(first, "\n")
  for line in rest:gmatch("[^\n]+") do write("  ", line, "\n") end
end

-- words wrapped to WIDTH, each line indented
local function wrap(words, indent)
  local line = indent
  for _, w in ipairs(words) do
    if #line + #w + 1 > WIDTH and line ~= indent then
      write(line, "\n")
      line = indent
    end
    line = line .. (line == indent and "" or " ") .. w
  end
  if line ~= indent then write(line, "\n") end
end

local function overview()
  write("cnnsh: Lua 5.4 with tensors (cnn, F) and networks (nn, optim, data, train, viz).\n\n")
  print_doc("Commands:\n" .. TOPICS.commands.text:match("^(.-)\n\n"))
  write("\nTopics (:help <topic> or help('<topic>'); lines starting with \"> \" are\n",
        "examples to type at the prompt, in order):\n")
  for _, name in ipairs(TOPIC_ORDER) do
    write(string.format("  %-10s %s\n", name, TOPICS[name].summary))
  end
  write("\nhelp(obj) or :help name explains a function, module or layer:\n",
        "  help(F.conv2d)   help(nn.Linear)   help(net[1])   :help Tensor:sum\n")
end

local function help_tensor(x)
  local lines = {}
  for line in tostring(x):gmatch("[^\n]+") do lines[#lines + 1] = line end
  write("a tensor: ", lines[#lines] or "", "   (:help tensors, :help indexing)\n")
  local names = {}
  for k, v in pairs(tensor_methods()) do
    if type(k) == "string" and type(v) == "function" and k:sub(1, 1) ~= "_" then
      names[#names + 1] = k
    end
  end
  table.sort(names)
  write("methods:\n")
  wrap(names, "  ")
  write("help(x.sum) or :help Tensor:sum explains one.\n")
end

-- a table of functions/classes (nn, F, optim): one line per documented member
local function help_members(t)
  local rows = {}
  for k, v in pairs(t) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" then
      local d = docs()[v]
      if d then rows[#rows + 1] = { k, (d:match("^[^\n]*")) } end
    end
  end
  table.sort(rows, function(a, b) return a[1] < b[1] end)
  for _, r in ipairs(rows) do write("  ", r[2], "\n") end
  return #rows
end

local function help_value(v)
  if is_tensor(v) then return help_tensor(v) end
  local d, cls = doc_of(v)
  if d then
    if cls and cls ~= v then
      local first = tostring(v):match("^[^\n]*")
      write("an instance: ", first, "\n")
    end
    print_doc(d)
    if type(v) == "table" and not cls and getmetatable(v) == nil then help_members(v) end
    return
  end
  if type(v) == "table" and getmetatable(v) == nil and help_members(v) > 0 then return end
  local name, lua = name_of(v)
  write(name or tostring(v), ": ", type(v), " (no documentation",
        lua and "; see the Lua 5.4 manual" or "", ")\n")
end

local function help(obj, ...)
  if select("#", ...) > 0 then
    write("help takes one argument\n")
  end
  if obj == nil then return overview() end
  if type(obj) == "string" then
    local name = obj:match("^%s*(.-)%s*$")
    if TOPICS[name] then
      write(TOPICS[name].text, "\n")
      return
    end
    local v = resolve(name)
    if v == nil then
      write("no help for '", name, "': not a topic, and no value by that name.\n",
            "topics: ", table.concat(TOPIC_ORDER, ", "), "\n")
      return
    end
    return help_value(v)
  end
  return help_value(obj)
end

local d = docs()
d[help] = "help([obj | name | topic])\nHelp on a function, module, layer, tensor or topic; help() lists the topics."
return help
