-- train_spec.lua -- stdlib/train.lua (fit, evaluate, gradient accumulation)
-- and stdlib/progress.lua.  References: hand-counted confusion matrices, a
-- naive Lua cross-entropy, and for accumulation the update of one batch
-- twice as large (float64).

local progress = require("progress")

-- A capture "file" for output tests.
local function sink()
  local s = { text = {} }
  function s:write(...) for _, v in ipairs({ ... }) do self.text[#self.text + 1] = tostring(v) end end
  function s:flush() end
  function s:str() return table.concat(self.text) end
  return s
end

local function params_flat(net)
  local out = {}
  for _, p in ipairs(net:parameters()) do
    local function go(v) if type(v) == "table" then for _, e in ipairs(v) do go(e) end else out[#out + 1] = v end end
    go(p:totable())
  end
  return out
end

-- A small MLP without batch norm, in float64, identical for the same seed.
local function mlp(seed)
  cnn.manual_seed(seed)
  return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)):double()
end

local function synthetic(n, seed)
  cnn.manual_seed(seed)
  local x = cnn.randn(n, 4, "float64")
  -- class = 1 + (index of the largest of the first 3 features)
  local y = x:narrow(2, 1, 3):argmax(2)
  return x, y
end

describe("train.fit", function()
  it("accumulate = 2 over batches of 8 equals one step over a batch of 16", function()
    local x, y = synthetic(16, 11)
    local ds = data.TensorDataset(x, y)
    local a, b = mlp(5), mlp(5)
    local before = params_flat(a)
    train.fit(a, data.DataLoader(ds, { batch_size = 8 }),
      { epochs = 1, accumulate = 2, optimizer = optim.SGD(a:parameters(), { lr = 0.5 }), progress = false })
    train.fit(b, data.DataLoader(ds, { batch_size = 16 }),
      { epochs = 1, optimizer = optim.SGD(b:parameters(), { lr = 0.5 }), progress = false })
    local pa, pb = params_flat(a), params_flat(b)
    local moved, worst = 0, 0
    for i = 1, #pa do
      worst = math.max(worst, math.abs(pa[i] - pb[i]))
      moved = math.max(moved, math.abs(pa[i] - before[i]))
    end
    assert.is_true(worst < 1e-6, "max difference " .. worst)
    assert.is_true(moved > 1e-3, "the parameters did not move")
  end)

  it("accumulate = 1 over batches of 8 differs from one step of 16 (the test can fail)", function()
    local x, y = synthetic(16, 11)
    local ds = data.TensorDataset(x, y)
    local a, b = mlp(5), mlp(5)
    train.fit(a, data.DataLoader(ds, { batch_size = 8 }),
      { optimizer = optim.SGD(a:parameters(), { lr = 0.5 }), progress = false })
    train.fit(b, data.DataLoader(ds, { batch_size = 16 }),
      { optimizer = optim.SGD(b:parameters(), { lr = 0.5 }), progress = false })
    local pa, pb, worst = params_flat(a), params_flat(b), 0
    for i = 1, #pa do worst = math.max(worst, math.abs(pa[i] - pb[i])) end
    assert.is_true(worst > 1e-6)
  end)

  it("learns a separable task and records history, val and callbacks", function()
    local x, y = synthetic(256, 2)
    local vx, vy = synthetic(128, 3)
    local net = mlp(1)
    local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 32, shuffle = true })
    local val = data.DataLoader(data.TensorDataset(vx, vy), { batch_size = 64 })
    local calls, steps = {}, 0
    local hist = train.fit(net, loader, {
      epochs = 8, optimizer = optim.Adam(net:parameters(), { lr = 0.05 }), val = val, progress = false,
      callbacks = {
        function(info) calls[#calls + 1] = info.epoch end,
        { on_step_end = function(_, info) steps = steps + 1; assert.is_number(info.loss) end },
      } })
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8 }, calls)
    assert.are.equal(8 * 8, steps)
    assert.are.equal(8, #hist.loss)
    assert.is_true(hist.loss[8] < hist.loss[1] / 2, hist.loss[1] .. " -> " .. hist.loss[8])
    assert.is_true(hist.val_accuracy[8] > 0.85, "val accuracy " .. hist.val_accuracy[8])
    assert.is_true(net.training)
  end)

  it("stops when an epoch callback returns false", function()
    local x, y = synthetic(32, 4)
    local net = mlp(1)
    local hist = train.fit(net, data.DataLoader(data.TensorDataset(x, y), { batch_size = 16 }), {
      epochs = 5, optimizer = optim.SGD(net:parameters(), { lr = 0.1 }), progress = false,
      callbacks = { { on_epoch_end = function(_, info) return info.epoch < 2 end } } })
    assert.are.equal(2, #hist.loss)
  end)

  it("checks its options", function()
    local net = mlp(1)
    local loader = data.DataLoader(data.TensorDataset(cnn.zeros(2, 4, "float64"), cnn.ones(2, "int64")))
    assert.has_error(function() train.fit(net, loader, { epochs = 1 }) end)
    assert.has_error(function()
      train.fit(net, loader, { optimizer = optim.SGD(net:parameters(), { lr = 0.1 }), accumulate = 0 })
    end)
    assert.has_error(function()
      train.fit(net, loader, { optimizer = optim.SGD(net:parameters(), { lr = 0.1 }), epoch = 2 })
    end)
  end)
end)

describe("train.evaluate", function()
  -- An identity "network": the logits are the inputs, so the prediction
  -- is the index of each row's largest entry.
  local function identity_net()
    local net = nn.Linear(3, 3):double()
    cnn.no_grad(function()
      net.weight:copy_(cnn.eye(3, "float64"))
      net.bias:zero_()
    end)
    return net
  end

  local rows = { { 3, 1, 0 }, { 0, 2, 1 }, { 0, 5, 1 }, { 1, 0, 4 }, { 2, 0, 1 }, { 0, 0, 9 } }
  local labels = { 1, 2, 3, 3, 3, 1 }
  -- predictions:    1, 2, 2, 3, 1, 3
  local want_conf = { { 1, 0, 1 }, { 0, 1, 0 }, { 1, 1, 1 } }

  local function naive_ce()
    local sum = 0
    for i, r in ipairs(rows) do
      local z = 0
      for _, v in ipairs(r) do z = z + math.exp(v) end
      sum = sum - (r[labels[i]] - math.log(z))
    end
    return sum / #rows
  end

  it("gives accuracy, mean loss and the confusion matrix", function()
    local net = identity_net()
    local loader = data.DataLoader(data.TensorDataset(cnn.tensor(rows, "float64"), cnn.tensor(labels, "int64")),
      { batch_size = 4 })
    local r = train.evaluate(net, loader, { print = false })
    assert.are.equal(6, r.n)
    assert.is_true(math.abs(r.accuracy - 3 / 6) < 1e-12)
    assert.is_true(math.abs(r.loss - naive_ce()) < 1e-9, r.loss .. " vs " .. naive_ce())
    assert.are.same(want_conf, r.confusion:totable())
    assert.are.equal("int64", r.confusion.dtype)
  end)

  it("counts top-k accuracy (topk): the label among the k largest outputs", function()
    local net = identity_net()
    local loader = data.DataLoader(data.TensorDataset(cnn.tensor(rows, "float64"), cnn.tensor(labels, "int64")),
      { batch_size = 4 })
    -- by hand: every label is among its row's 2 largest (row 6 {0, 0, 9}: the
    -- tie of 0s keeps position 1 first), none but rows 1, 2, 4 has it largest
    local r = train.evaluate(net, loader, { print = false, topk = 2 })
    assert.is_true(math.abs(r.accuracy - 3 / 6) < 1e-12)
    assert.is_true(math.abs(r.topk_accuracy - 6 / 6) < 1e-12)
    local out, y = cnn.tensor(rows, "float64"), cnn.tensor(labels, "int64")
    assert.are.equal(3, train.correct(out, y))
    assert.are.equal(6, train.correct(out, y, 2))
    assert.are.equal(6, train.correct(out, y, 5)) -- k above C counts every row
    assert.are.equal(2, train.correct(out, cnn.tensor({ 2, 3, 1, 2, 2, 2 }, "int64"), 2)) -- rows 1, 2
  end)

  it("restores the training mode and records no graph", function()
    local net = identity_net()
    net:train()
    local loader = data.DataLoader(data.TensorDataset(cnn.tensor(rows, "float64"), cnn.tensor(labels, "int64")))
    train.evaluate(net, loader, { print = false })
    assert.is_true(net.training)
    assert.is_nil(net.weight.grad)
  end)

  it("prints the confusion matrix with class names", function()
    local out = sink()
    train.print_confusion(want_conf, { "cat", "dog", "Ankle boot" }, out)
    local s = out:str()
    assert.matches("rows: true class", s)
    assert.matches(" 3 Ankle boot +1 +1 +1 +33%.3%%", s)
    assert.matches(" 1 cat +1 +0 +1 +50%.0%%", s)
  end)
end)

describe("progress", function()
  it("prints plain lines every total/10 steps when not on a terminal", function()
    local out = sink()
    local bar = progress.new{ total = 20, title = "epoch 1/1", out = out, tty = false }
    for i = 1, 20 do bar:update{ loss = 1 / i, correct = 5, n = 10 } end
    local s = bar:finish()
    local text = out:str()
    local lines = 0
    for _ in text:gmatch("\n") do lines = lines + 1 end
    assert.are.equal(10, lines) -- steps 2, 4, ..., 18 and the final line
    assert.is_nil(text:find("\r", 1, true))
    assert.matches("epoch 1/1  20/20  loss 0%.%d+  acc 50%.00%%", text)
    assert.matches("img/s", text)
    assert.are.equal(200, math.floor(s.images_per_s * s.elapsed + 0.5))
    assert.is_true(math.abs(s.accuracy - 0.5) < 1e-12)
  end)

  it("redraws one line on a terminal", function()
    local out = sink()
    local bar = progress.new{ total = 4, out = out, tty = true, interval = 0 }
    for _ = 1, 4 do bar:update{ loss = 0.5, n = 2 } end
    bar:finish()
    local text = out:str()
    local _, returns = text:gsub("\r", "")
    local _, newlines = text:gsub("\n", "")
    assert.are.equal(5, returns)
    assert.are.equal(1, newlines)
    assert.matches("ETA", text)
    assert.matches("%[=+%]", text)
  end)

  it("formats times", function()
    assert.are.equal("0:05", progress.format_time(5))
    assert.are.equal("2:05", progress.format_time(125))
    assert.are.equal("1:00:01", progress.format_time(3601))
  end)
end)
