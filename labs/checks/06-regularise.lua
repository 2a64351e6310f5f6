-- labs/checks/06-regularise.lua -- checks of Lab 6 (regularisation).
-- References: dropout's statistics (fraction zeroed, scale of survivors),
-- optim.SGD's own weight decay, a Lua loop for the mirror, a known
-- minimum for early stopping.

local function loop_hflip(x)
  local v = x:totable()
  for _, img in ipairs(v) do
    for _, ch in ipairs(img) do
      for i, row in ipairs(ch) do
        local r = {}
        for j = 1, #row do r[j] = row[#row + 1 - j] end
        ch[i] = r
      end
    end
  end
  return cnn.tensor(v, x.dtype)
end

local function check_dropout_train(t, f)
  local p, x = 0.3, cnn.ones(100, 200)
  local y = f(x, p, true)
  t.that(cnn.is_tensor(y) and y.shape == x.shape, "dropout(x 100x200, 0.3, true) should return a 100x200 tensor")
  local zeros = y:eq(0):sum():item() / x:numel()
  t.that(math.abs(zeros - p) < 0.02, string.format(
    "dropout(x, 0.3, true) zeroed %.1f%% of the elements, expected about 30%%", zeros * 100))
  local kept = y:masked_fill(y:eq(0), 1 / (1 - p))
  t.tensor(kept, cnn.full({ 100, 200 }, 1 / (1 - p)), "dropout(ones, 0.3, true): the kept elements (1/(1-p) each)",
    { atol = 1e-5 })
end

return {
  title = "Lab 6: overfitting and regularisation",
  limits = { seconds = 30, memory_mb = 1024 },
  exercises = {
    { name = "dropout", run = function(lab, t)
      local f, x = t.fn(lab, "dropout"), cnn.randn(4, 5)
      t.tensor(f(x, 0.5, false), x, "dropout(x, 0.5, false) (evaluation: unchanged)", { atol = 0 })
      check_dropout_train(t, f)
    end },
    { name = "sgd_step", run = function(lab, t)
      local w, g = cnn.randn(3, 4), cnn.randn(3, 4)
      local before = w:clone()
      local got = t.fn(lab, "sgd_step")(w, g, 0.1, 0.05)
      local p = w:clone():requires_grad_()
      p.grad = g:clone()
      optim.SGD({ p }, { lr = 0.1, weight_decay = 0.05 }):step()
      t.tensor(w, before, "sgd_step must not change w itself", { atol = 0 })
      t.tensor(got, p:detach(), "sgd_step(w, grad, lr 0.1, weight_decay 0.05) against optim.SGD", { atol = 1e-6 })
    end },
    { name = "hflip", run = function(lab, t)
      local x = cnn.randn(2, 3, 4, 5)
      t.tensor(t.fn(lab, "hflip")(x), loop_hflip(x), "hflip(x 2x3x4x5)", { atol = 0 })
    end },
    { name = "best_epoch", run = function(lab, t)
      local train, test = {}, {}
      for e = 1, 10 do
        train[e] = 2 / e
        test[e] = 1 + (e - 4) ^ 2 / 20 -- lowest at epoch 4
      end
      t.number(t.fn(lab, "best_epoch")(train, test), 4, "best_epoch(a test loss lowest at epoch 4 of 10)",
        { atol = 0 })
    end },
  },
}
