-- nn/norm_layers.lua -- nn.LayerNorm, nn.GroupNorm, nn.InstanceNorm2d.
--
-- Per-sample normalisation (no batch statistics, so it works at batch size
-- 1): each layer calls its F.* op, which normalises rows of values by their
-- own mean and biased variance in C (core/ops/nn_row_norm.c), then applies
-- weight (ones) and bias (zeros) when affine, as PyTorch:
--   LayerNorm(shape): over the last #shape dims; weight/bias have `shape`.
--     Channels-last use as in ConvNeXt: x:permute(1, 3, 4, 2) to N,H,W,C,
--     then LayerNorm(C), then permute back.
--   GroupNorm(G, C): over each group of C/G channels (and all positions) of
--     N x C x ... input; weight/bias C values.
--   InstanceNorm2d(C): over each channel of each sample (C x H x W or
--     N x C x H x W); affine and track_running_stats default to false, as
--     PyTorch.  With running statistics, training moves them by momentum
--     (unbiased variance, averaged over the batch) and eval uses them.
local cnn = _G.cnn
local F = cnn.F
local Module = require("nn.module")
local fmt = require("fmt")
local check = require("check")
local doc = cnn.doc or {}

local function check_eps(name, opts, level)
  local eps = check.number(name, "eps", opts.eps or 1e-5, level + 1, 0)
  if eps <= 0 then check.fail(name, "eps", "a positive number", eps, level + 1) end
  return eps
end

-- ---- LayerNorm -------------------------------------------------------------------

local LayerNorm = Module:extend("LayerNorm")

function LayerNorm:init(normalized_shape, opts)
  local name = "nn.LayerNorm"
  opts = check.options(name, opts, { "eps", "elementwise_affine", "bias" }, 3)
  if normalized_shape == nil then error(name .. "(shape): missing normalized_shape (a size or a table of sizes)", 3) end
  local shape = type(normalized_shape) == "table" and normalized_shape or { normalized_shape }
  if #shape < 1 then check.fail(name, "normalized_shape", "a size or a non-empty table of sizes", normalized_shape, 3) end
  self.normalized_shape = {}
  for i, n in ipairs(shape) do self.normalized_shape[i] = check.integer(name, "normalized_shape", n, 3, 0) end
  self.eps = check_eps(name, opts, 3)
  self.elementwise_affine = check.boolean(name, "elementwise_affine", opts.elementwise_affine, 3) ~= false
  local bias = check.boolean(name, "bias", opts.bias, 3) ~= false
  if self.elementwise_affine then
    self:register_parameter("weight", check.call(name, 3, cnn.ones, self.normalized_shape))
    if bias then self:register_parameter("bias", cnn.zeros(self.normalized_shape)) end
  end
end

function LayerNorm:forward(x)
  return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, { eps = self.eps })
end

function LayerNorm:extra_repr()
  local shape = table.concat(self.normalized_shape, ", ") .. (#self.normalized_shape == 1 and "," or "")
  return string.format("(%s), eps=%s, elementwise_affine=%s", shape,
    fmt.num(self.eps + 0.0), fmt.bool(self.elementwise_affine))
end

doc[LayerNorm] = [[
nn.LayerNorm(shape [, {eps = 1e-5, elementwise_affine = true, bias = true}])
Normalises over the last #shape dims (shape a size or {sizes}) of each
sample: (x - mean) / sqrt(var + eps) * weight + bias, biased variance.
weight (ones) and bias (zeros) have `shape`.  ConvNeXt's channels-last use:
  ln = nn.LayerNorm(64)
  y = ln(x:permute(1, 3, 4, 2)):permute(1, 4, 2, 3)   -- over C of N x C x H x W]]

-- ---- GroupNorm -------------------------------------------------------------------

local GroupNorm = Module:extend("GroupNorm")

function GroupNorm:init(num_groups, num_channels, opts)
  local name = "nn.GroupNorm"
  opts = check.options(name, opts, { "eps", "affine" }, 3)
  self.num_groups = check.integer(name, "num_groups", num_groups, 3, 1)
  self.num_channels = check.integer(name, "num_channels", num_channels, 3, 0)
  if self.num_channels % self.num_groups ~= 0 then
    error(string.format("%s: num_channels (%d) must be divisible by num_groups (%d)", name, self.num_channels,
                        self.num_groups), 3)
  end
  self.eps = check_eps(name, opts, 3)
  self.affine = check.boolean(name, "affine", opts.affine, 3) ~= false
  if self.affine then
    self:register_parameter("weight", check.call(name, 3, cnn.ones, self.num_channels))
    self:register_parameter("bias", cnn.zeros(self.num_channels))
  end
end

function GroupNorm:forward(x)
  return F.group_norm(x, self.num_groups, self.weight, self.bias, { eps = self.eps })
end

function GroupNorm:extra_repr()
  return string.format("%d, %d, eps=%s, affine=%s", self.num_groups, self.num_channels, fmt.num(self.eps + 0.0),
                       fmt.bool(self.affine))
end

doc[GroupNorm] = [[
nn.GroupNorm(G, C [, {eps = 1e-5, affine = true}])
Splits the C channels of N x C x ... input into G groups and normalises
each group of each sample over its channels and positions; weight (ones)
and bias (zeros) of C values.  GroupNorm(1, C) normalises whole samples,
GroupNorm(C, C) each channel (instance norm with affine parameters).]]

-- ---- InstanceNorm2d --------------------------------------------------------------

local InstanceNorm2d = Module:extend("InstanceNorm2d")

function InstanceNorm2d:init(num_features, opts)
  local name = "nn.InstanceNorm2d"
  opts = check.options(name, opts, { "eps", "momentum", "affine", "track_running_stats" }, 3)
  self.num_features = check.integer(name, "num_features", num_features, 3, 1)
  self.eps = check_eps(name, opts, 3)
  self.momentum = check.number(name, "momentum", opts.momentum or 0.1, 3, 0, 1)
  self.affine = check.boolean(name, "affine", opts.affine, 3) == true
  self.track_running_stats = check.boolean(name, "track_running_stats", opts.track_running_stats, 3) == true
  local C = self.num_features
  if self.affine then
    self:register_parameter("weight", check.call(name, 3, cnn.ones, C))
    self:register_parameter("bias", cnn.zeros(C))
  end
  if self.track_running_stats then
    self:register_buffer("running_mean", cnn.zeros(C))
    self:register_buffer("running_var", cnn.ones(C))
    self:register_buffer("num_batches_tracked", cnn.tensor(0, "int64"))
  end
end

function InstanceNorm2d:forward(x)
  local nd = x:dim()
  if nd ~= 3 and nd ~= 4 then
    error(string.format("InstanceNorm2d: expected 3D or 4D input (got %dD input, %s)", nd, fmt.shape_str(x)), 0)
  end
  local unbatched = nd == 3
  if unbatched then x = x:unsqueeze(1) end
  if x:size(2) ~= self.num_features then
    error(string.format("InstanceNorm2d: expected input with %d channels, got %s", self.num_features,
                        fmt.shape_str(x)), 0)
  end
  local use_input = self.training or not self.track_running_stats
  if self.training and self.track_running_stats then
    cnn.no_grad(function() self.num_batches_tracked:add_(1) end)
  end
  local y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            { use_input_stats = use_input, momentum = self.momentum, eps = self.eps })
  return unbatched and y:squeeze(1) or y
end

function InstanceNorm2d:extra_repr()
  return string.format("%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s", self.num_features,
    fmt.num(self.eps + 0.0), fmt.num(self.momentum + 0.0), fmt.bool(self.affine), fmt.bool(self.track_running_stats))
end

doc[InstanceNorm2d] = [[
nn.InstanceNorm2d(C [, {eps = 1e-5, momentum = 0.1, affine = false, track_running_stats = false}])
Normalises each channel of each sample of N x C x H x W (or C x H x W)
input over its H x W positions.  affine adds weight (ones) and bias
(zeros); track_running_stats keeps running_mean/running_var (moved by
momentum in training, used in eval), as PyTorch.]]

return { LayerNorm = LayerNorm, GroupNorm = GroupNorm, InstanceNorm2d = InstanceNorm2d }
