-- gradcheck.lua -- gradient checks for labs (module "gradcheck"; the shell
-- exposes it as cnn.gradcheck; timing is timeit.lua).
--
--   ok, report = gradcheck(fn, x1, x2, ... [, {eps=, atol=, rtol=, max_elems=}])
--
-- gradcheck design.  fn(inputs...) returns a tensor y.  A non-scalar y is
-- reduced to the scalar L = sum(y * v) with a fixed, non-degenerate weight
-- v = sin(0.7 * k) (k = 1..numel), so every output element matters and no
-- random numbers are drawn (the user's RNG state is untouched).  The
-- analytical gradient dL/dx comes from one backward; the numerical one from
-- central differences (L(x + eps e_i) - L(x - eps e_i)) / (2 eps), element
-- by element, evaluated under no_grad with x perturbed in place and put
-- back exactly.  An element passes when |a - n| <= atol + rtol * |n|.
-- Defaults: float64 eps = 1e-6, atol = 1e-5, rtol = 1e-3; float32 is
-- checked with eps = 1e-3, atol = rtol = 1e-2 and a note to use float64.
-- Only inputs with requires_grad are checked, and at least one must have
-- it; fn must return a tensor that requires grad.  Wrong arguments raise
-- errors naming gradcheck at the caller's line.  The inputs' .grad is
-- restored afterwards.
local cnn = _G.cnn
local check = require("check")
local doc = cnn.doc or {}

local M = {}

local shape_str = require("fmt").shape_str

-- Splits (fn, inputs..., [opts]) -> inputs list, opts.
local function split_args(...)
  local args = table.pack(...)
  local opts = {}
  if args.n > 0 and type(args[args.n]) == "table" and not cnn.is_tensor(args[args.n])
     and #args[args.n] == 0 then
    opts = args[args.n]
    args.n = args.n - 1
  end
  if args.n == 1 and type(args[1]) == "table" and not cnn.is_tensor(args[1]) then
    return args[1], opts
  end
  local inputs = {}
  for i = 1, args.n do inputs[i] = args[i] end
  return inputs, opts
end

-- The scalar L(y) = sum(y * v), v = sin(0.7 k); v is built once per shape.
local function projector(y)
  if y:numel() == 1 then return function(t) return t:sum() end end
  local v = cnn.arange(1, y:numel()):double():mul(0.7):sin():reshape(y.shape):to(y.dtype)
  return function(t) return (t * v):sum() end
end

local function defaults(x, opts)
  local f64 = x.dtype == "float64"
  return opts.eps or (f64 and 1e-6 or 1e-3), opts.atol or (f64 and 1e-5 or 1e-2),
         opts.rtol or (f64 and 1e-3 or 1e-2)
end

local unflatten = require("fmt").unflatten

-- Analytical gradients of L w.r.t. every input (zeros where none flows).
local function analytic(fn, inputs, proj)
  for _, x in ipairs(inputs) do if cnn.is_tensor(x) and x.requires_grad then x.grad = nil end end
  local L = proj(fn(table.unpack(inputs)))
  L:backward()
  local grads = {}
  for i, x in ipairs(inputs) do
    if cnn.is_tensor(x) and x.requires_grad then
      grads[i] = x.grad and x.grad:detach():double():reshape(-1):totable() or false
    end
  end
  return grads
end

-- Central difference of L at flat element i of input x (flat: a view of x).
local function numeric_at(fn, inputs, proj, flat, i, eps)
  local old = flat[i]:item()
  flat[i] = old + eps
  local fp = proj(fn(table.unpack(inputs))):item()
  flat[i] = old - eps
  local fm = proj(fn(table.unpack(inputs))):item()
  flat[i] = old
  return (fp - fm) / (2 * eps)
end

-- Checks input k; updates `worst` with the largest violation seen.
local function check_input(fn, inputs, proj, k, ga, opts, worst)
  local x = inputs[k]
  local eps, atol, rtol = defaults(x, opts)
  local flat = x:detach():reshape(-1)
  assert(flat:is_contiguous(), "gradcheck: input must be contiguous")
  local n = math.min(x:numel(), opts.max_elems or math.huge)
  for i = 1, n do
    local num = cnn.no_grad(numeric_at, fn, inputs, proj, flat, i, eps)
    local a = ga and ga[i] or 0
    local err = math.abs(a - num)
    local excess = err - (atol + rtol * math.abs(num))
    if worst.excess == nil or excess > worst.excess then
      worst.excess, worst.input, worst.index = excess, k, unflatten(i, x.shape)
      worst.analytic, worst.numeric, worst.abs_err = a, num, err
      worst.shape = shape_str(x)
    end
    worst.checked = worst.checked + 1
    if err > atol + rtol * math.abs(num) then worst.failed = worst.failed + 1 end
  end
end

local function report_text(ok, w, notes)
  if w.input == nil then return "gradcheck: nothing checked (the inputs that require grad are empty)" end
  local s = string.format(
    "gradcheck %s: %d elements, %d failed; worst: input %d (%s) at [%s]: analytic %.6g, numeric %.6g, |diff| %.3g",
    ok and "passed" or "FAILED", w.checked, w.failed, w.input, w.shape,
    table.concat(w.index, ", "), w.analytic, w.numeric, w.abs_err)
  if #notes > 0 then s = s .. " (" .. table.concat(notes, "; ") .. ")" end
  return s
end

-- Checks fn, the options and the inputs (errors at the user's line:
-- check_args < gradcheck < caller).
local function check_args(fn, inputs, opts)
  local mt = type(fn) == "table" and getmetatable(fn)
  if not (type(fn) == "function" or (mt and mt.__call)) then
    check.fail("gradcheck", "fn", "a function (or a module)", fn, 3)
  end
  opts = check.options("gradcheck", opts, { "eps", "atol", "rtol", "max_elems" }, 3)
  if opts.eps ~= nil and not (check.number("gradcheck", "eps", opts.eps, 3, 0) > 0) then
    check.fail("gradcheck", "eps", "a positive number", opts.eps, 3)
  end
  if opts.atol ~= nil then check.number("gradcheck", "atol", opts.atol, 3, 0) end
  if opts.rtol ~= nil then check.number("gradcheck", "rtol", opts.rtol, 3, 0) end
  if opts.max_elems ~= nil then opts.max_elems = check.integer("gradcheck", "max_elems", opts.max_elems, 3, 1) end
  local any = false
  for _, x in ipairs(inputs) do
    if cnn.is_tensor(x) and x.requires_grad then any = true end
  end
  if not any then error("gradcheck: no input requires grad (set x.requires_grad = true)", 3) end
  return opts
end

-- fn's output: a tensor that requires grad (errors at the user's line).
local function check_output(y)
  if not cnn.is_tensor(y) then
    error("gradcheck: fn returned " .. (y == nil and "nil" or "a " .. type(y)) .. ", expected a tensor", 3)
  end
  if not y.requires_grad then
    error("gradcheck: fn's output does not require grad (is it computed from the inputs, " ..
          "outside cnn.no_grad?)", 3)
  end
  return y
end

-- gradcheck(fn, inputs... [, opts]) -> ok, report
function M.gradcheck(fn, ...)
  local inputs, opts = split_args(...)
  opts = check_args(fn, inputs, opts)
  local saved, notes = {}, {}
  for i, x in ipairs(inputs) do
    if cnn.is_tensor(x) then
      saved[i] = x.grad or false
      if x.requires_grad and x.dtype ~= "float64" then
        notes[#notes + 1] = "input " .. i .. " is " .. x.dtype .. ": use :double() for a tight check"
      end
    end
  end
  local proj = projector(check_output(fn(table.unpack(inputs))))
  local grads = analytic(fn, inputs, proj)
  local worst = { checked = 0, failed = 0 }
  for k, x in ipairs(inputs) do
    if cnn.is_tensor(x) and x.requires_grad then check_input(fn, inputs, proj, k, grads[k], opts, worst) end
  end
  for i, g in pairs(saved) do inputs[i].grad = g or nil end
  local ok = worst.failed == 0
  worst.ok, worst.text = ok, report_text(ok, worst, notes)
  return ok, setmetatable(worst, { __tostring = function(r) return r.text end })
end

doc[M.gradcheck] = [[
cnn.gradcheck(fn, x1, x2, ... [, {eps=, atol=, rtol=, max_elems=}]) -> ok, report
Compares the gradient autograd computes for fn(x1, ...) with central finite
differences, element by element, for every input with requires_grad
(use float64: cnn.randn(3, 4, {dtype = 'float64', requires_grad = true})).
A non-scalar output y is reduced to sum(y * v) with a fixed weight v.
report (prints as one line) names the worst element: input, index,
analytic and numeric values; report.failed counts the failing elements.
  ok, r = cnn.gradcheck(function(a, b) return (a * b):tanh() end, a, b)]]
return M
