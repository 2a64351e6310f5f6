-- nn/weight_init.lua -- nn.init (this file, not nn/init.lua: that one is the "nn"
-- package itself): in-place weight initialisers, as torch.nn.init.
--
-- Each function fills a tensor in place (under no_grad, so it works on
-- parameters that require grad) and returns it.  Random draws come from the
-- global generator (cnn.manual_seed), via rand_like / randn_like so dtype and
-- device follow the tensor.  Fan computation follows PyTorch: for a weight
-- out x in x k1 x k2..., fan_in = in * k1 * k2 ..., fan_out = out * k1 * k2 ...
-- (Exposed as nn.init; the file is not nn/init.lua because that one is the
-- "nn" module itself.)
local cnn = _G.cnn
local doc = cnn.doc or {}

local check = require("check")

local init = {}

-- The checks of the public functions below; errors point at the user's
-- line (`level` as error()'s, counted from the public function).
local function tensor_arg(fname, t, level)
  if not cnn.is_tensor(t) then check.fail(fname, "the first argument", "a tensor", t, level + 1) end
end

local function fill_from(t, src)
  cnn.no_grad(function() t:copy_(src) end)
  return t
end

-- calculate_fan_in_and_fan_out(t) -> fan_in, fan_out (t has >= 2 dims).
function init.calculate_fan_in_and_fan_out(t)
  tensor_arg("nn.init.calculate_fan_in_and_fan_out", t, 2)
  local s = t.shape
  if #s < 2 then
    error("nn.init: fan in and fan out need a tensor of 2 or more dims, got " .. #s, 3)
  end
  local field = 1
  for i = 3, #s do field = field * s[i] end
  return s[2] * field, s[1] * field
end

-- calculate_gain(nonlinearity [, param]) as PyTorch's table.
function init.calculate_gain(nonlinearity, param)
  local linear = { linear = true, conv1d = true, conv2d = true, conv3d = true,
                   conv_transpose2d = true, sigmoid = true }
  if linear[nonlinearity] then return 1 end
  if nonlinearity == "tanh" then return 5 / 3 end
  if nonlinearity == "relu" then return math.sqrt(2) end
  if nonlinearity == "selu" then return 3 / 4 end
  if nonlinearity == "leaky_relu" then
    local slope = check.number("nn.init.calculate_gain", "param", param or 0.01, 2)
    return math.sqrt(2 / (1 + slope * slope))
  end
  error("nn.init.calculate_gain: unsupported nonlinearity " .. tostring(nonlinearity), 2)
end

function init.uniform_(t, a, b)
  tensor_arg("nn.init.uniform_", t, 2)
  a = check.number("nn.init.uniform_", "a", a or 0, 2)
  b = check.number("nn.init.uniform_", "b", b or 1, 2)
  if a > b then error(string.format("nn.init.uniform_: a (%s) must be <= b (%s)", a, b), 2) end
  return fill_from(t, cnn.rand_like(t) * (b - a) + a)
end

function init.normal_(t, mean, std)
  tensor_arg("nn.init.normal_", t, 2)
  mean = check.number("nn.init.normal_", "mean", mean or 0, 2)
  std = check.number("nn.init.normal_", "std", std or 1, 2, 0)
  return fill_from(t, cnn.randn_like(t) * std + mean)
end

function init.constant_(t, v)
  tensor_arg("nn.init.constant_", t, 2)
  if type(v) ~= "number" then check.fail("nn.init.constant_", "v", "a number", v, 2) end
  cnn.no_grad(function() t:fill_(v) end)
  return t
end

function init.zeros_(t) return init.constant_(t, 0) end
function init.ones_(t) return init.constant_(t, 1) end

-- Options of the kaiming functions: a number (a) or {a=, mode=, nonlinearity=}.
local function kaiming_std(t, opts, fname)
  if type(opts) == "number" then opts = { a = opts } end
  opts = opts or {}
  opts = check.options(fname, opts, { "a", "mode", "nonlinearity" }, 3)
  tensor_arg(fname, t, 3)
  local a = check.number(fname, "a", opts.a or 0, 3)
  local mode = opts.mode or "fan_in"
  local fan_in, fan_out = init.calculate_fan_in_and_fan_out(t)
  local fan
  if mode == "fan_in" then fan = fan_in
  elseif mode == "fan_out" then fan = fan_out
  else error(fname .. ": mode must be 'fan_in' or 'fan_out', got " .. tostring(mode), 3) end
  local gain = init.calculate_gain(opts.nonlinearity or "leaky_relu", a)
  return gain / math.sqrt(fan)
end

-- kaiming_uniform_(t [, {a = 0, mode = 'fan_in', nonlinearity = 'leaky_relu'}]):
-- U(-b, b) with b = gain * sqrt(3 / fan).
function init.kaiming_uniform_(t, opts)
  local bound = math.sqrt(3) * kaiming_std(t, opts, "nn.init.kaiming_uniform_")
  return init.uniform_(t, -bound, bound)
end

function init.kaiming_normal_(t, opts)
  return init.normal_(t, 0, kaiming_std(t, opts, "nn.init.kaiming_normal_"))
end

-- xavier_uniform_(t [, gain = 1]): U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)).
function init.xavier_uniform_(t, gain)
  tensor_arg("nn.init.xavier_uniform_", t, 2)
  gain = check.number("nn.init.xavier_uniform_", "gain", gain or 1, 2)
  local fan_in, fan_out = init.calculate_fan_in_and_fan_out(t)
  local bound = (gain or 1) * math.sqrt(6 / (fan_in + fan_out))
  return init.uniform_(t, -bound, bound)
end

function init.xavier_normal_(t, gain)
  tensor_arg("nn.init.xavier_normal_", t, 2)
  gain = check.number("nn.init.xavier_normal_", "gain", gain or 1, 2)
  local fan_in, fan_out = init.calculate_fan_in_and_fan_out(t)
  return init.normal_(t, 0, (gain or 1) * math.sqrt(2 / (fan_in + fan_out)))
end

doc[init] = [[
nn.init -- in-place initialisers (as torch.nn.init); each returns its tensor.
  uniform_(t [, a = 0, b = 1])            normal_(t [, mean = 0, std = 1])
  constant_(t, v)  zeros_(t)  ones_(t)
  kaiming_uniform_(t [, {a = 0, mode = 'fan_in', nonlinearity = 'leaky_relu'}])
  kaiming_normal_(t [, same options])
  xavier_uniform_(t [, gain = 1])         xavier_normal_(t [, gain = 1])
  calculate_gain(nonlinearity [, param])  calculate_fan_in_and_fan_out(t)
Example: net:apply(function(m) if m.weight then nn.init.kaiming_normal_(m.weight) end end)]]
doc[init.uniform_] = "nn.init.uniform_(t [, a = 0, b = 1]) -> t\nFills t with U(a, b)."
doc[init.normal_] = "nn.init.normal_(t [, mean = 0, std = 1]) -> t\nFills t with N(mean, std^2)."
doc[init.constant_] = "nn.init.constant_(t, v) -> t\nFills t with v."
doc[init.zeros_] = "nn.init.zeros_(t) -> t"
doc[init.ones_] = "nn.init.ones_(t) -> t"
doc[init.kaiming_uniform_] = [[
nn.init.kaiming_uniform_(t [, {a = 0, mode = 'fan_in', nonlinearity = 'leaky_relu'}]) -> t
He initialisation: U(-b, b), b = gain * sqrt(3 / fan).  Conv2d and Linear use
a = sqrt(5), which gives b = 1 / sqrt(fan_in).]]
doc[init.kaiming_normal_] = [[
nn.init.kaiming_normal_(t [, {a = 0, mode = 'fan_in', nonlinearity = 'leaky_relu'}]) -> t
N(0, std^2) with std = gain / sqrt(fan).]]
doc[init.xavier_uniform_] = "nn.init.xavier_uniform_(t [, gain = 1]) -> t\nU(-b, b), b = gain * sqrt(6 / (fan_in + fan_out))."
doc[init.xavier_normal_] = "nn.init.xavier_normal_(t [, gain = 1]) -> t\nN(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out))."
doc[init.calculate_gain] = "nn.init.calculate_gain(nonlinearity [, param]) -> number\nThe recommended gain: relu sqrt(2), tanh 5/3, leaky_relu sqrt(2/(1+slope^2)), ..."
doc[init.calculate_fan_in_and_fan_out] = "nn.init.calculate_fan_in_and_fan_out(t) -> fan_in, fan_out"

return init
