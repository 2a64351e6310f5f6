-- labs/solutions/06-regularise.lua -- reference answers of Lab 6 (the
-- explanations and the demo are in labs/06-regularise.lua).
local lab = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/../06-regularise.lua")

function lab.dropout(x, p, training)
  if not training or p == 0 then return x end
  local keep = cnn.rand_like(x):ge(p):to(x.dtype)
  return x * keep / (1 - p)
end

function lab.sgd_step(w, grad, lr, weight_decay)
  return w - (grad + w * weight_decay) * lr
end

function lab.hflip(x)
  local W = x:size(4)
  return x:index_select(4, cnn.arange(W, 1, -1))
end

function lab.best_epoch(train_losses, test_losses)
  print(viz.plot(train_losses, test_losses, { title = "loss per epoch", names = { "train", "test" } }))
  local best = 1
  for e, v in ipairs(test_losses) do
    if v < test_losses[best] then best = e end
  end
  return best
end

return lab
