-- labs/02-autograd.lua -- Lab 2: autograd by hand (45 min).
--
-- Training needs the gradient of the loss with respect to every weight.
-- cnnsh records each operation on tensors that require a gradient and
-- y:backward() walks that record backwards, applying the chain rule: each
-- op turns the gradient of its output (grad_out, same shape as the output)
-- into gradients of its inputs.  Here you write those backward rules
-- yourself, then compare them with what autograd computes, and with
-- finite differences, the definition of a derivative:
--     df/dx_i ~ (f(x + eps e_i) - f(x - eps e_i)) / (2 eps)
-- cnn.gradcheck(fn, x) does exactly that comparison for every element of x
-- (use float64: float32 has too few digits for small eps).
--
-- How to work.  Fill in each TODO block, then run
--     cnnsh --check labs/02-autograd.lua
--
-- Try this at the prompt:
--   > x = cnn.randn(3):double(); x.requires_grad = true
--   > y = x:sigmoid():sum(); y:backward(); x.grad      -- autograd's answer
--   > s = x:detach():sigmoid(); s * (1 - s)            -- the rule by hand
--   > lab = dofile("labs/02-autograd.lua")
--   > cnn.gradcheck(lab.softsign, x)                   --> true when right
--   > w = cnn.randn(4, 3):double(); w.requires_grad = true
--   > cnn.gradcheck(function(x, w) return F.linear(x, w) end, cnn.randn(2, 3):double():requires_grad_(), w)
local lab = {}

local function TODO(what) error("TODO: " .. what, 2) end

-- Exercise 1. The backward of y = sigmoid(x), elementwise:
--   dL/dx = dL/dy * s * (1 - s)   where s = sigmoid(x).
-- Return dL/dx given x and grad_out = dL/dy (same shape).
function lab.sigmoid_backward(x, grad_out)
  -- TODO: use x:sigmoid(); no autograd here (x does not require grad)
  return grad_out
end

-- Exercise 2. The backward of a linear layer y = x w^T + b, where x is
-- N x I, w is O x I, b has O elements, y and grad_out are N x O.
-- Return three tensors, in this order:
--   grad_x = grad_out w          (N x I)
--   grad_w = grad_out^T x        (O x I)
--   grad_b = grad_out summed over the batch (dimension 1)   (O)
function lab.linear_backward(x, w, b, grad_out)
  -- TODO: three matrix products / sums; check each shape on paper first
  return grad_out, grad_out, grad_out
end

-- Exercise 3. Numerical gradient by central differences: f takes a tensor
-- and returns a number (a Lua number); x is a float64 tensor.  Return a
-- tensor g of x's shape with g[i] = (f(x + eps e_i) - f(x - eps e_i)) / (2 eps).
-- Change one element at a time in a flat view (x:view(-1)), and put it
-- back exactly afterwards.
function lab.numeric_grad(f, x, eps)
  eps = eps or 1e-6
  local g = cnn.zeros_like(x)
  TODO("loop over the elements of x:view(-1) and fill g:view(-1)")
  return g
end

-- Exercise 4. softsign(x) = x / (1 + |x|), built from tensor ops so that
-- autograd can differentiate it.  The checker verifies it with
-- cnn.gradcheck, in float64, at points away from 0.
function lab.softsign(x)
  TODO("x divided by 1 plus its absolute value")
end

return lab
