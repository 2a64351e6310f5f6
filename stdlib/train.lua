-- train.lua -- the "train" module: train.fit and train.evaluate, for users
-- who want Keras-like brevity.  The explicit loop (examples/quickstart.lua,
-- examples/fashion_mnist.lua) stays the documented first way; fit runs the
-- same loop:
--
--   for each epoch: net:train(); for x, y in loader do
--     loss = loss_fn(net(x), y) / accumulate; loss:backward()
--     every `accumulate` steps: optimizer:step(); optimizer:zero_grad()
--   end; scheduler:step(); evaluate on `val`; callbacks
--
-- Gradient accumulation: with accumulate = n the gradients of n consecutive
-- batches are summed, each loss scaled by 1/n, before one optimizer step,
-- so for a model without batch norm n batches of b give the same update as
-- one batch of n*b (mean losses).  A last group of fewer than n batches at
-- the end of an epoch still gets its step (with the same 1/n scale).
--
-- Classification figures (accuracy, confusion) are computed when the
-- output is N x C and the targets are int64 class indices 1..C.
--
-- Several processes (dist): only rank 0 (dist.is_main()) prints progress,
-- validation lines and confusion matrices; a loader with set_epoch (a
-- DataLoader{distributed = true}) gets set_epoch(epoch) before each epoch.
--
-- Batches move to the device of the model's first parameter with
-- non_blocking = true: a pinned batch (DataLoader{pin_memory = true})
-- is copied without waiting, any other synchronously.
local cnn = _G.cnn
local F = cnn.F
local progress = require("progress")
local doc = cnn.doc or {}

local train = {}

local function is_classification(out, y)
  return cnn.is_tensor(y) and out:dim() == 2 and y:dim() == 1 and y.dtype == "int64"
end

-- The device of net's parameters ("cpu" for a model without any).
local function model_device(net)
  local p = net:parameters()[1]
  return p and p.device or "cpu"
end

-- t on `device` (non-tensors, e.g. nil labels, pass through).
local function to_device(t, device)
  if not cnn.is_tensor(t) or t.device == device then return t end
  return t:to(device, { non_blocking = true })
end

-- Number of right predictions: argmax over dim 2 equals the 1-based label,
-- or with k > 1 the label is among the row's k largest outputs (top-k).
function train.correct(out, y, k)
  if k == nil or k == 1 then return out:argmax(2):eq(y):long():sum():item() end
  local _, top = out:topk(math.min(k, out:size(2)), 2)
  return top:eq(y:view(-1, 1)):any(2):long():sum():item()
end

-- ---- evaluate ---------------------------------------------------------------------

local function dataset_classes(loader)
  local ds = loader and loader.dataset
  while type(ds) == "table" do
    local c = rawget(ds, "classes")
    if c then return c end
    ds = rawget(ds, "dataset")
  end
end

local function new_confusion(c)
  local m = {}
  for i = 1, c do
    m[i] = {}
    for j = 1, c do m[i][j] = 0 end
  end
  return m
end

local function add_confusion(m, out, y)
  local pred, truth = out:argmax(2):totable(), y:totable()
  for k = 1, #truth do
    local row = m[truth[k]]
    if row and row[pred[k]] then row[pred[k]] = row[pred[k]] + 1 end
  end
end

-- Prints the matrix: rows = true class, columns = predicted class, with
-- the class names and each class's recall.
function train.print_confusion(m, classes, out)
  out = out or io.stdout
  local c = #m
  local nw = 4
  for i = 1, c do nw = math.max(nw, #(classes and classes[i] or tostring(i))) end
  local cw = 5
  for i = 1, c do for j = 1, c do cw = math.max(cw, #tostring(m[i][j]) + 1) end end
  out:write("confusion matrix (rows: true class, columns: predicted)\n")
  local head = { string.rep(" ", nw + 4) }
  for j = 1, c do head[#head + 1] = string.format("%" .. cw .. "d", j) end
  head[#head + 1] = "  recall"
  out:write(table.concat(head), "\n")
  for i = 1, c do
    local name = classes and classes[i] or tostring(i)
    local row, total = { string.format("%2d %-" .. nw .. "s ", i, name) }, 0
    for j = 1, c do row[#row + 1] = string.format("%" .. cw .. "d", m[i][j]); total = total + m[i][j] end
    row[#row + 1] = total > 0 and string.format("  %5.1f%%", 100 * m[i][i] / total) or "      -"
    out:write(table.concat(row), "\n")
  end
end

-- evaluate(net, loader [, {classes =, loss = F.cross_entropy, print = true}])
--   -> {accuracy =, loss =, confusion = C x C int64 tensor, n =}
function train.evaluate(net, loader, opts)
  opts = opts or {}
  local loss_fn = opts.loss or F.cross_entropy
  local was_training = net.training
  net:eval()
  local loss_sum, n, correct, correct_k, conf = 0, 0, 0, 0, nil
  local device = model_device(net)
  cnn.no_grad(function()
    for x, y in loader do
      x, y = to_device(x, device), to_device(y, device)
      local out = net(x)
      local b = x:size(1)
      loss_sum = loss_sum + loss_fn(out, y):item() * b
      n = n + b
      if is_classification(out, y) then
        conf = conf or new_confusion(out:size(2))
        correct = correct + train.correct(out, y)
        if opts.topk then correct_k = correct_k + train.correct(out, y, opts.topk) end
        add_confusion(conf, out, y)
      end
    end
  end)
  if was_training ~= false then net:train() end
  local r = { loss = n > 0 and loss_sum / n or 0 / 0, n = n }
  if conf then
    r.accuracy = correct / n
    if opts.topk then r.topk_accuracy = correct_k / n end
    r.confusion = cnn.tensor(conf, "int64")
    if opts.print ~= false and require("dist").is_main() then
      train.print_confusion(conf, opts.classes or dataset_classes(loader))
      print(string.format("accuracy %.2f%% (%d/%d), loss %.4f", 100 * r.accuracy, correct, n, r.loss))
      if opts.topk then print(string.format("top-%d accuracy %.2f%%", opts.topk, 100 * r.topk_accuracy)) end
    end
  elseif opts.print ~= false and require("dist").is_main() then
    print(string.format("loss %.4f over %d samples", r.loss, n))
  end
  return r
end

-- ---- fit ----------------------------------------------------------------------------

local function check_fit_opts(opts)
  local known = { epochs = true, optimizer = true, loss = true, val = true, callbacks = true,
                  accumulate = true, scheduler = true, progress = true, start_epoch = true }
  for k in pairs(opts) do
    if not known[k] then error("train.fit: unknown option '" .. tostring(k) .. "'", 3) end
  end
  if opts.optimizer == nil then error("train.fit: an optimizer is required: {optimizer = optim.Adam(...)}", 3) end
  local acc = opts.accumulate or 1
  if math.type(acc) ~= "integer" or acc < 1 then error("train.fit: accumulate must be a positive integer", 3) end
  return acc
end

-- A callback is a function(info) run at each epoch's end, or a table with
-- any of on_epoch_begin(info), on_step_end(info), on_epoch_end(info).
-- Returning false from on_epoch_end stops training.
local function run_callbacks(callbacks, event, info)
  local go_on = true
  for _, cb in ipairs(callbacks) do
    local fn = type(cb) == "function" and (event == "on_epoch_end" and cb or nil) or
               (type(cb) == "table" and cb[event])
    if fn then
      local r
      if type(cb) == "table" then r = fn(cb, info) else r = fn(info) end
      if r == false then go_on = false end
    end
  end
  return go_on
end

-- One epoch; returns {loss =, accuracy =, seconds =, images_per_s =, steps =}.
local function fit_epoch(net, loader, o, epoch)
  net:train()
  local opt, acc = o.optimizer, o.accumulate
  local bar = progress.new{ total = #loader, title = string.format("epoch %d/%d", epoch, o.last) }
  if o.progress == false or not require("dist").is_main() then bar.quiet = true end
  if loader.set_epoch then loader:set_epoch(epoch) end -- a distributed loader's new order
  local k, device = 0, model_device(net)
  opt:zero_grad()
  for x, y in loader do
    x, y = to_device(x, device), to_device(y, device)
    local out = net(x)
    local loss = o.loss(out, y)
    local scaled = acc > 1 and loss / acc or loss
    scaled:backward()
    k = k + 1
    if k % acc == 0 then opt:step(); opt:zero_grad() end
    local correct = is_classification(out, y) and train.correct(out, y) or nil
    local lv = loss:item()
    bar:update{ loss = lv, correct = correct, n = x:size(1) }
    run_callbacks(o.callbacks, "on_step_end", { epoch = epoch, step = k, loss = lv })
  end
  if k % acc ~= 0 then opt:step(); opt:zero_grad() end
  local s = bar:finish()
  return { loss = s.loss, accuracy = s.accuracy, seconds = s.elapsed,
           images_per_s = s.images_per_s, steps = k }
end

local function record(history, epoch, t, v)
  history.epochs[#history.epochs + 1] = epoch
  history.loss[#history.loss + 1] = t.loss
  history.accuracy[#history.accuracy + 1] = t.accuracy or false
  history.seconds[#history.seconds + 1] = t.seconds
  if v then
    history.val_loss[#history.val_loss + 1] = v.loss
    history.val_accuracy[#history.val_accuracy + 1] = v.accuracy or false
  end
end

-- fit(net, loader, {epochs = 1, optimizer =, loss = F.cross_entropy, val =,
--     callbacks = {}, accumulate = 1, scheduler =, progress = true, start_epoch = 1})
--   -> history {epochs, loss, accuracy, seconds, val_loss, val_accuracy}
function train.fit(net, loader, opts)
  opts = opts or {}
  local o = { optimizer = opts.optimizer, loss = opts.loss or F.cross_entropy,
              callbacks = opts.callbacks or {}, progress = opts.progress }
  o.accumulate = check_fit_opts(opts)
  local first = opts.start_epoch or 1
  o.last = first + (opts.epochs or 1) - 1
  local history = { epochs = {}, loss = {}, accuracy = {}, seconds = {}, val_loss = {}, val_accuracy = {} }
  for epoch = first, o.last do
    run_callbacks(o.callbacks, "on_epoch_begin", { epoch = epoch })
    local t = fit_epoch(net, loader, o, epoch)
    if opts.scheduler then opts.scheduler:step() end
    local v = opts.val and train.evaluate(net, opts.val, { loss = opts.loss, print = false })
    if v and opts.progress ~= false and require("dist").is_main() then
      print(string.format("epoch %d/%d: val loss %.4f%s  (%.1f s)", epoch, o.last, v.loss,
        v.accuracy and string.format("  val acc %.2f%%", 100 * v.accuracy) or "", t.seconds))
    end
    record(history, epoch, t, v)
    local info = { epoch = epoch, train = t, val = v, history = history }
    if not run_callbacks(o.callbacks, "on_epoch_end", info) then break end
  end
  return history
end

doc[train] = [[
train -- fit and evaluate (the explicit loop of examples/fashion_mnist.lua is the first way).
  hist = train.fit(net, loader, {epochs = 3, optimizer = optim.Adam(net:parameters()), val = test})
  r = train.evaluate(net, test)        -- prints the confusion matrix; r.accuracy, r.loss]]
doc[train.fit] = [[
train.fit(net, loader, {epochs = 1, optimizer =, loss = F.cross_entropy, val =, callbacks =,
          accumulate = 1, scheduler =, progress = true}) -> history
Trains with a progress bar per epoch; accumulate = n sums the gradients of n batches
(each loss scaled by 1/n) before one optimizer step.  Callbacks: functions(info) run
at each epoch's end, or tables with on_epoch_begin/on_step_end/on_epoch_end; returning
false from on_epoch_end stops.]]
doc[train.evaluate] = [[
train.evaluate(net, loader [, {classes =, loss = F.cross_entropy, print = true, topk =}])
  -> {accuracy =, loss =, confusion =, n = [, topk_accuracy =]}
Runs net in eval mode without gradients; prints the confusion matrix (rows: true
class, columns: predicted) with the class names of the loader's dataset.  topk = 5
also counts a sample right when its label is among the 5 largest outputs.]]
doc[train.correct] = [[
train.correct(out, y [, k = 1]) -> number
How many rows of the N x C output have their 1-based int64 label y as the largest
output (k = 1), or among the k largest (top-k, through topk).]]

return train
