-- labs/checks/02-autograd.lua -- checks of Lab 2 (autograd by hand).
-- References: autograd's own gradients for the hand-written rules (the
-- student computes without autograd), a known closed form for the
-- numerical gradient, cnn.gradcheck for the differentiable function.

-- Autograd's gradients of sum(fn(inputs) * grad_out) for each input.
local function autograd_grads(fn, inputs, grad_out)
  local leaves = {}
  for i, x in ipairs(inputs) do leaves[i] = x:detach():clone():requires_grad_() end
  (fn(table.unpack(leaves)) * grad_out):sum():backward()
  local grads = {}
  for i, x in ipairs(leaves) do grads[i] = x.grad end
  return grads
end

local function softsign_ref(x)
  local v = x:totable()
  for i = 1, #v do v[i] = v[i] / (1 + math.abs(v[i])) end
  return cnn.tensor(v, "float64")
end

return {
  title = "Lab 2: autograd by hand",
  limits = { seconds = 30, memory_mb = 1024 },
  exercises = {
    { name = "sigmoid_backward", run = function(lab, t)
      local x, g = cnn.randn(3, 5):double(), cnn.randn(3, 5):double()
      local want = autograd_grads(function(a) return a:sigmoid() end, { x }, g)[1]
      t.tensor(t.fn(lab, "sigmoid_backward")(x, g), want, "sigmoid_backward(x 3x5, grad_out)", { atol = 1e-10 })
    end },
    { name = "linear_backward", run = function(lab, t)
      local x, w, b = cnn.randn(4, 3):double(), cnn.randn(5, 3):double(), cnn.randn(5):double()
      local g = cnn.randn(4, 5):double()
      local want = autograd_grads(F.linear, { x, w, b }, g)
      local gx, gw, gb = t.fn(lab, "linear_backward")(x, w, b, g)
      t.grads({ gx, gw, gb }, want, { "x", "w", "b" }, "linear_backward(x 4x3, w 5x3, b 5, grad_out 4x5)",
        { atol = 1e-10 })
    end },
    { name = "numeric_grad", run = function(lab, t)
      local x = cnn.randn(2, 3):double()
      local before = x:clone()
      local f = function(v) return (v:pow(3)):sum():item() end -- d/dx sum(x^3) = 3x^2
      local got = t.fn(lab, "numeric_grad")(f, x, 1e-5)
      t.tensor(x, before, "x after numeric_grad (it must be put back exactly)", { atol = 0, rtol = 0 })
      t.tensor(got, before:square():mul(3), "numeric_grad(sum of x^3, x 2x3)", { atol = 1e-6, rtol = 1e-6 })
    end },
    { name = "softsign", run = function(lab, t)
      local x = (cnn.rand(7):double() + 0.2) * cnn.tensor({ 1, -1, 1, -1, 1, -1, 1 }, "float64")
      local f = t.fn(lab, "softsign")
      t.tensor(f(x), softsign_ref(x), "softsign(x)", { atol = 1e-12 })
      local ok, report = cnn.gradcheck(f, x:clone():requires_grad_())
      t.that(ok, "softsign's gradient disagrees with finite differences: " .. tostring(report))
    end },
  },
}
