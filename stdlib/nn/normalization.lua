-- nn/normalization.lua -- nn.BatchNorm2d and nn.BatchNorm1d.
--
-- Parameters: weight (gamma, ones) and bias (beta, zeros) of size C when
-- affine.  Buffers when track_running_stats: running_mean (zeros),
-- running_var (ones) and num_batches_tracked (a 0-d int64 tensor, as PyTorch).
-- In training mode the batch statistics normalise the input and F.batch_norm
-- updates the running ones in place:
--   running = (1 - momentum) * running + momentum * batch   (var unbiased);
-- with momentum = nil the factor is 1 / num_batches_tracked (a cumulative
-- average), as in PyTorch.  In eval mode the running statistics are used;
-- without running statistics the batch statistics are used in both modes.
-- The constructor checks its options (stdlib/check.lua): eps > 0, momentum
-- in [0, 1] or nil (with cumulative = true), booleans for the flags.
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local fmt = require("fmt")
local check = require("check")
local doc = cnn.doc or {}

local BatchNorm = Module:extend("_BatchNorm")

local OPTIONS = { "eps", "momentum", "affine", "track_running_stats", "cumulative" }

-- Checks the options (errors point at the user's line: check_opts < init <
-- construct < caller) and sets the fields.
local function check_opts(self, num_features, opts)
  local name = "nn." .. self.__name
  opts = check.options(name, opts, OPTIONS, 4)
  self.num_features = check.integer(name, "num_features", num_features, 4, 1)
  self.eps = check.number(name, "eps", opts.eps or 1e-5, 4, 0)
  if self.eps <= 0 then check.fail(name, "eps", "a positive number", self.eps, 4) end
  check.boolean(name, "cumulative", opts.cumulative, 4)
  if opts.momentum == nil and opts.cumulative ~= true then self.momentum = 0.1
  elseif opts.momentum ~= nil then self.momentum = check.number(name, "momentum", opts.momentum, 4, 0, 1) end
  self.affine = check.boolean(name, "affine", opts.affine, 4) ~= false
  self.track_running_stats = check.boolean(name, "track_running_stats", opts.track_running_stats, 4) ~= false
end

function BatchNorm:init(num_features, opts)
  check_opts(self, num_features, opts)
  num_features = self.num_features
  if self.affine then
    self:register_parameter("weight", check.call("nn." .. self.__name, 3, cnn.ones, num_features))
    self:register_parameter("bias", cnn.zeros(num_features))
  end
  if self.track_running_stats then
    self:register_buffer("running_mean", cnn.zeros(num_features))
    self:register_buffer("running_var", cnn.ones(num_features))
    self:register_buffer("num_batches_tracked", cnn.tensor(0, "int64")) -- 0-d, as PyTorch
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
      self.accepted_text, nd, fmt.shape_str(x)), 0)
  end
end

-- forward's bookkeeping (the input checked, num_batches_tracked counted)
-- and F.batch_norm's arguments after x: running_mean, running_var, options.
function BatchNorm:batch_norm_args(x)
  self:check_input(x)
  local momentum = self.momentum
  local use_batch = self.training or not self.track_running_stats
  if self.training and self.track_running_stats then
    cnn.no_grad(function() self.num_batches_tracked:add_(1) end)
    if momentum == nil then momentum = 1 / self.num_batches_tracked:item() end
  end
  local rm, rv -- nil without running statistics: batch statistics only
  if self.track_running_stats then rm, rv = self.running_mean, self.running_var end
  return rm, rv, { training = use_batch, momentum = momentum or 0.0, eps = self.eps }
end

function BatchNorm:forward(x)
  local rm, rv, o = self:batch_norm_args(x)
  return F.batch_norm(x, rm, rv, self.weight, self.bias, o)
end

-- F.relu(self:forward(x)) as one op (cnn.fused.batch_norm_relu: one pass
-- each way on the CPU); nn.Sequential runs it for this layer followed by a
-- ReLU when neither has hooks (stdlib/nn/container.lua).
function BatchNorm:forward_relu(x)
  local rm, rv, o = self:batch_norm_args(x)
  return cnn.fused.batch_norm_relu(x, rm, rv, self.weight, self.bias, o.training, o.momentum,
                                   o.eps)
end

-- F.relu(self:forward(x) + residual) as one op
-- (cnn.fused.batch_norm_add_relu: one pass forward on the CPU); the model
-- zoo's residual blocks end with it (stdlib/models/resnet.lua).
function BatchNorm:forward_add_relu(x, residual)
  local rm, rv, o = self:batch_norm_args(x)
  return cnn.fused.batch_norm_add_relu(x, residual, rm, rv, self.weight, self.bias, o.training,
                                       o.momentum, o.eps)
end

-- Whether forward is this file's (a subclass with its own forward, such as
-- nn.SyncBatchNorm, is never fused).
function BatchNorm:fuses_relu() return self.forward == BatchNorm.forward end

function BatchNorm:extra_repr()
  local m = self.momentum == nil and "None" or fmt.num(self.momentum + 0.0)
  return string.format("%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s",
    self.num_features, fmt.num(self.eps + 0.0), m, fmt.bool(self.affine),
    fmt.bool(self.track_running_stats))
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
