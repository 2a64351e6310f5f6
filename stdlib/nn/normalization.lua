-- nn/normalization.lua -- nn.BatchNorm2d and nn.BatchNorm1d.
--
-- Parameters: weight (gamma, ones) and bias (beta, zeros) of size C when
-- affine.  Buffers when track_running_stats: running_mean (zeros),
-- running_var (ones) and num_batches_tracked (a 1-element int64 tensor).
-- In training mode the batch statistics normalise the input and F.batch_norm
-- updates the running ones in place:
--   running = (1 - momentum) * running + momentum * batch   (var unbiased);
-- with momentum = nil the factor is 1 / num_batches_tracked (a cumulative
-- average), as in PyTorch.  In eval mode the running statistics are used;
-- without running statistics the batch statistics are used in both modes.
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local doc = cnn.doc or {}

local BatchNorm = Module:extend("_BatchNorm")

function BatchNorm:init(num_features, opts)
  if math.type(num_features) ~= "integer" or num_features < 1 then
    error("nn." .. self.__name .. "(C): C must be a positive integer", 3)
  end
  opts = opts or {}
  self.num_features = num_features
  self.eps = opts.eps or 1e-5
  if opts.momentum == nil and opts.cumulative ~= true then self.momentum = 0.1
  else self.momentum = opts.momentum end
  self.affine = opts.affine ~= false
  self.track_running_stats = opts.track_running_stats ~= false
  if self.affine then
    self:register_parameter("weight", cnn.ones(num_features))
    self:register_parameter("bias", cnn.zeros(num_features))
  end
  if self.track_running_stats then
    self:register_buffer("running_mean", cnn.zeros(num_features))
    self:register_buffer("running_var", cnn.ones(num_features))
    self:register_buffer("num_batches_tracked", cnn.zeros({ 1 }, "int64"))
  end
end

function BatchNorm:reset_running_stats()
  if not self.track_running_stats then return end
  cnn.no_grad(function()
    self.running_mean:zero_()
    self.running_var:fill_(1)
    self.num_batches_tracked:zero_()
  end)
end

-- Checks the number of dims (subclasses list the accepted ones).
function BatchNorm:check_input(x)
  local nd = x:dim()
  if not self.accepted_dims[nd] then
    error(string.format("%s: expected %s input (got %dD input, %s)", self.__name,
      self.accepted_text, nd, Module.shape_str(x)), 0)
  end
end

function BatchNorm:forward(x)
  self:check_input(x)
  local momentum = self.momentum
  local use_batch = self.training or not self.track_running_stats
  if self.training and self.track_running_stats then
    cnn.no_grad(function() self.num_batches_tracked:add_(1) end)
    if momentum == nil then momentum = 1 / self.num_batches_tracked:item() end
  end
  local rm, rv -- nil without running statistics: batch statistics only
  if self.track_running_stats then rm, rv = self.running_mean, self.running_var end
  return F.batch_norm(x, rm, rv, self.weight, self.bias,
                      { training = use_batch, momentum = momentum or 0.0, eps = self.eps })
end

function BatchNorm:extra_repr()
  local m = self.momentum == nil and "None" or Module.fmt_num(self.momentum + 0.0)
  return string.format("%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s",
    self.num_features, Module.fmt_num(self.eps + 0.0), m, Module.fmt_bool(self.affine),
    Module.fmt_bool(self.track_running_stats))
end

function BatchNorm:short_repr()
  return self.__name .. " " .. self.num_features
end

local BatchNorm2d = BatchNorm:extend("BatchNorm2d")
BatchNorm2d.accepted_dims = { [4] = true }
BatchNorm2d.accepted_text = "4D"

local BatchNorm1d = BatchNorm:extend("BatchNorm1d")
BatchNorm1d.accepted_dims = { [2] = true, [3] = true }
BatchNorm1d.accepted_text = "2D or 3D"

doc[BatchNorm2d] = [[
nn.BatchNorm2d(C [, {eps = 1e-5, momentum = 0.1, affine = true, track_running_stats = true}])
Normalises each channel of N x C x H x W input: (x - mean) / sqrt(var + eps) * weight + bias.
Training: batch statistics, and running_mean/running_var move by momentum.
Eval (net:eval()): the running statistics.  momentum = nil with
{cumulative = true} gives a cumulative average instead.
Parameters weight (ones), bias (zeros); buffers running_mean, running_var,
num_batches_tracked (saved by state_dict).]]
doc[BatchNorm1d] = [[
nn.BatchNorm1d(C [, {eps = 1e-5, momentum = 0.1, affine = true, track_running_stats = true}])
Batch normalisation of N x C or N x C x L input, per feature C; see nn.BatchNorm2d.]]

return { BatchNorm2d = BatchNorm2d, BatchNorm1d = BatchNorm1d }
