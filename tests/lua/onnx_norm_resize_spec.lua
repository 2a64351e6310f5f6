-- onnx_norm_resize_spec.lua -- issue 13's normalisation, resizing, 1-d
-- pooling and Dropout2d layers through cnn.onnx.export and cnn.onnx.load,
-- and the export error for an op with no ONNX mapping (issue 16 point 1).
--
-- Evidence: each file passes onnx.checker.check_model(full_check) from
-- python3-onnx (pending when it is missing); the graph has the operators
-- the exporter documents (onnx/export_norm_resize.lua); the loaded model,
-- which runs those operators through compositions checked against the ONNX
-- project's node tests (tests/onnx/conformance.lua: LayerNormalization,
-- InstanceNormalization, DepthToSpace, SpaceToDepth, Slice, Resize), gives
-- the layer's own outputs (its C kernels) within 1e-5 on another batch size.
local H = require("helpers")

local TMP = os.getenv("CNNSH_TEST_TMP") or "/tmp"
local function tmp(name) return TMP .. "/onnx_nr_spec_" .. name .. ".onnx" end

local op_types = H.onnx_op_types

-- exports net, checks the file and its operators, and compares the loaded
-- model with net on x; returns the loaded model
local function round_trip(net, example, x, name, want_ops, opts)
  local path = tmp(name)
  opts = opts or { dynamic_batch = true }
  cnn.onnx.export(net, example, path, opts)
  H.assert_onnx_checked(path)
  if want_ops then assert.are.equal(want_ops, op_types(path)) end
  local m = cnn.onnx.load(path)
  local ok, msg = H.compare(m(x), net(x), 1e-5, 1e-5)
  assert(ok, name .. ": " .. tostring(msg))
  return m, path
end

local function export_error(net, x)
  local ok, err = pcall(cnn.onnx.export, net, x, tmp("err"))
  assert.is_false(ok)
  return err
end

describe("ONNX export of the normalisation layers", function()
  local function ln_net(affine)
    cnn.manual_seed(11)
    local net = nn.Sequential(nn.Conv2d(3, 4, 3, { padding = 1 }), nn.Flatten(3),
                              nn.LayerNorm(16, { elementwise_affine = affine }), nn.LayerNorm({ 4, 16 }, { eps = 1e-3 }))
    if affine then
      cnn.no_grad(function()
        net[3].weight:copy_(cnn.randn(16)); net[3].bias:copy_(cnn.randn(16))
        net[4].weight:copy_(cnn.randn(4, 16))
      end)
    end
    return net:eval()
  end

  it("LayerNorm is LayerNormalization at opset 17 and loads back as nn.LayerNorm", function()
    local m = round_trip(ln_net(true), cnn.randn(2, 3, 4, 4), cnn.randn(3, 3, 4, 4), "ln17",
      "Conv,Reshape,LayerNormalization,LayerNormalization,Identity", { opset = 17, dynamic_batch = true })
    local sd = m:state_dict()
    assert.truthy(sd["3.weight"] and sd["3.bias"] and sd["4.weight"] and sd["4.bias"])
    assert.are.equal("LayerNorm", m["3"].__name)
    round_trip(ln_net(false), cnn.randn(2, 3, 4, 4), cnn.randn(2, 3, 4, 4), "ln17n", nil, { opset = 17 })
  end)

  it("LayerNorm below opset 17 is its definition (ReduceMean, Sub, Mul, Sqrt, Div, Mul, Add)", function()
    round_trip(ln_net(true), cnn.randn(2, 3, 4, 4), cnn.randn(3, 3, 4, 4), "ln13",
      "Conv,Reshape," .. string.rep("ReduceMean,Sub,Mul,ReduceMean,Add,Sqrt,Div,Mul,Add,", 2) .. "Identity")
    round_trip(ln_net(false), cnn.randn(2, 3, 4, 4), cnn.randn(2, 3, 4, 4), "ln13n",
      "Conv,Reshape,ReduceMean,Sub,Mul,ReduceMean,Add,Sqrt,Div,ReduceMean,Sub,Mul,ReduceMean,Add,Sqrt,Div,Mul,Add,Identity",
      { opset = 16 })
  end)

  it("F.layer_norm over ConvNeXt's channels-last permute, in a custom forward", function()
    local Block = nn.Module:extend("LNBlock")
    function Block:init() self.ln = nn.LayerNorm(5) end
    function Block:forward(x)
      return F.layer_norm(x:permute(1, 3, 4, 2), { 5 }, self.ln.weight, self.ln.bias, { eps = 1e-6 }):permute(1, 4, 2, 3)
    end
    cnn.manual_seed(2)
    local net = Block():eval()
    cnn.no_grad(function() net.ln.weight:copy_(cnn.rand(5) + 0.5) end)
    round_trip(net, cnn.randn(1, 5, 3, 2), cnn.randn(4, 5, 3, 2), "lnf", "Transpose,LayerNormalization,Transpose,Identity",
      { opset = 17, dynamic_batch = true })
  end)

  it("GroupNorm as Reshape, InstanceNormalization, Reshape, Mul, Add (GroupNormalization is opset 18)", function()
    cnn.manual_seed(12)
    local net = nn.Sequential(nn.Conv2d(2, 6, 3), nn.GroupNorm(3, 6), nn.ReLU(), nn.GroupNorm(2, 6, { affine = false })):eval()
    cnn.no_grad(function() net[2].weight:copy_(cnn.randn(6)); net[2].bias:copy_(cnn.randn(6)) end)
    round_trip(net, cnn.randn(2, 2, 6, 5), cnn.randn(5, 2, 6, 5), "gn",
      "Conv,Reshape,InstanceNormalization,Reshape,Reshape,Mul,Reshape,Add,Relu,Reshape,InstanceNormalization,Reshape,Identity",
      { opset = 17, dynamic_batch = true })
    -- N x C x L input (GroupNorm after a Conv1d)
    local net1 = nn.Sequential(nn.Conv1d(2, 4, 3), nn.GroupNorm(2, 4)):eval()
    cnn.no_grad(function() net1[2].weight:copy_(cnn.randn(4)) end)
    round_trip(net1, cnn.randn(3, 2, 7), cnn.randn(2, 2, 7), "gn1")
  end)

  it("InstanceNorm2d as InstanceNormalization, or BatchNormalization with running statistics", function()
    cnn.manual_seed(13)
    local plain = nn.Sequential(nn.Conv2d(3, 4, 1), nn.InstanceNorm2d(4)):eval()
    round_trip(plain, cnn.randn(2, 3, 5, 5), cnn.randn(3, 3, 5, 5), "in", "Conv,InstanceNormalization,Identity")
    local affine = nn.InstanceNorm2d(3, { affine = true, eps = 1e-3 })
    cnn.no_grad(function() affine.weight:copy_(cnn.randn(3)); affine.bias:copy_(cnn.randn(3)) end)
    round_trip(affine:eval(), cnn.randn(2, 3, 4, 6), cnn.randn(1, 3, 4, 6), "ina", "InstanceNormalization,Identity")
    local tracked = nn.InstanceNorm2d(3, { track_running_stats = true, affine = true })
    tracked:train()
    for _ = 1, 3 do tracked(cnn.randn(4, 3, 5, 5) * 2 + 1) end -- running statistics away from 0 and 1
    round_trip(tracked:eval(), cnn.randn(2, 3, 5, 5), cnn.randn(3, 3, 5, 5), "inr", "BatchNormalization,Identity")
    -- unbatched C x H x W
    round_trip(nn.InstanceNorm2d(3):eval(), cnn.randn(3, 4, 4), cnn.randn(3, 4, 4), "in3",
      "Unsqueeze,InstanceNormalization,Squeeze,Identity", {})
  end)
end)

describe("ONNX export of the resizing layers", function()
  it("Upsample nearest as Resize (asymmetric, floor), by scale_factor and by size", function()
    local x = cnn.randn(2, 2, 5, 6)
    round_trip(nn.Upsample({ scale_factor = 2 }):eval(), x, cnn.randn(3, 2, 5, 6), "up2", "Resize,Identity")
    round_trip(nn.Upsample({ scale_factor = { 1.5, 3 } }):eval(), x, cnn.randn(1, 2, 5, 6), "up15")
    round_trip(nn.Upsample({ scale_factor = 0.5 }):eval(), cnn.randn(1, 2, 8, 6), cnn.randn(2, 2, 8, 6), "down")
    -- sizes that are no whole factor, both ways; dynamic batch reads N, C from the input's Shape
    round_trip(nn.Upsample({ size = { 7, 4 } }):eval(), x, cnn.randn(3, 2, 5, 6), "upsz",
      "Shape,Slice,Concat,Resize,Identity")
    round_trip(nn.Upsample({ size = 9 }):eval(), x, x, "upszs", "Resize,Identity", {})
    round_trip(nn.Upsample({ scale_factor = 1.7, recompute_scale_factor = true }):eval(), x, x, "uprc", nil, {})
  end)

  it("Upsample bilinear as Resize linear: align_corners, else half_pixel (PyTorch's, also for size 1)", function()
    local x = cnn.randn(2, 3, 4, 5)
    local function check(opts, name)
      opts.mode = "bilinear"
      local _, path = round_trip(nn.Upsample(opts):eval(), x, cnn.randn(3, 3, 4, 5), name)
      local attrs = cnn.io.onnx_read(path).nodes
      for _, n in ipairs(attrs) do
        if n.op_type == "Resize" then
          assert.are.equal("linear", n.attrs.mode)
          assert.are.equal(opts.align_corners and "align_corners" or "half_pixel", n.attrs.coordinate_transformation_mode)
        end
      end
    end
    check({ scale_factor = 2 }, "bl2")
    check({ scale_factor = 2, align_corners = true }, "bl2a")
    check({ size = { 3, 8 } }, "blsz")
    check({ size = { 7, 3 }, align_corners = true }, "blsza")
    check({ scale_factor = { 0.6, 1.5 } }, "blfrac")
    -- 5 * 1.4 = 7 in PyTorch but floor(5 * float32(1.4)) = 6 in ONNX: sizes, as 1.4 = 7 / 5 on both axes
    local x5 = cnn.randn(1, 1, 5, 5)
    local _, path = round_trip(nn.Upsample({ scale_factor = 1.4, mode = "bilinear" }):eval(), x5, x5, "bl14", nil, {})
    assert.truthy(cnn.io.onnx_read(path).nodes[1].inputs[4] ~= "", "sizes given")
    local err = export_error(nn.Upsample({ scale_factor = { 0.6, 1.4 } }), cnn.randn(1, 1, 4, 5))
    assert.truthy(err:find("scale_factor {0.6, 1.4} from 4x5 gives 2x7", 1, true), err)
    check({ size = 1 }, "bl1") -- x = (0 + 0.5) * 4 - 0.5 = 1.5: rows 2 and 3 mixed, not row 1
  end)

  it("F.interpolate, F.pixel_shuffle and F.pixel_unshuffle in a custom forward", function()
    local Up = nn.Module:extend("UpBlock")
    function Up:init() self.conv = nn.Conv2d(2, 8, 1) end
    function Up:forward(x)
      local y = F.pixel_shuffle(self.conv(x), 2)
      y = F.interpolate(y, { scale_factor = 2, mode = "bilinear", align_corners = true })
      return F.pixel_unshuffle(y, 4)
    end
    cnn.manual_seed(4)
    round_trip(Up():eval(), cnn.randn(1, 2, 3, 4), cnn.randn(2, 2, 3, 4), "fup",
      "Conv,DepthToSpace,Resize,Reshape,Transpose,Reshape,Identity")
  end)

  it("PixelShuffle as DepthToSpace (CRD), PixelUnshuffle as Reshape + Transpose + Reshape", function()
    -- a hand case first: channel c*r*r + i*r + j of x goes to (c, h*r + i, w*r + j)
    local x = cnn.tensor({ 0, 1, 2, 3, 4, 5, 6, 7 }):view(1, 8, 1, 1)
    local net = nn.Sequential(nn.PixelShuffle(2)):eval()
    local m = round_trip(net, x, x, "ps_hand", "DepthToSpace,Identity")
    assert.are.same({ { { { 0, 1 }, { 2, 3 } }, { { 4, 5 }, { 6, 7 } } } }, m(x):totable())
    round_trip(nn.Sequential(nn.PixelShuffle(3), nn.PixelUnshuffle(3)):eval(), cnn.randn(2, 18, 2, 3),
      cnn.randn(3, 18, 2, 3), "psu", "DepthToSpace,Reshape,Transpose,Reshape,Identity")
    round_trip(nn.PixelUnshuffle(2):eval(), cnn.randn(1, 3, 4, 6), cnn.randn(2, 3, 4, 6), "pu")
  end)

  it("AdaptiveMaxPool2d: GlobalMaxPool for 1x1, MaxPool when the bins divide, else an error naming the layer", function()
    local net = nn.Sequential(nn.Conv2d(1, 3, 1), nn.AdaptiveMaxPool2d({ 2, 3 }), nn.AdaptiveMaxPool2d(1)):eval()
    round_trip(net, cnn.randn(2, 1, 8, 9), cnn.randn(3, 1, 8, 9), "amp", "Conv,MaxPool,GlobalMaxPool,Identity")
    local err = export_error(nn.Sequential(nn.Identity(), nn.AdaptiveMaxPool2d(3)), cnn.randn(1, 1, 8, 8))
    assert.truthy(err:find("layer 2: AdaptiveMaxPool2d from 8x8 to 3x3 (not a whole factor) has no ONNX operator", 1, true), err)
    err = export_error(nn.AdaptiveMaxPool2d(1, { return_indices = true }), cnn.randn(1, 1, 4, 4))
    assert.truthy(err:find("return_indices", 1, true), err)
  end)
end)

describe("ONNX export of the 1-d pools and Dropout2d", function()
  it("MaxPool1d, AvgPool1d, AdaptiveAvgPool1d as 1-D MaxPool, AveragePool, GlobalAveragePool", function()
    local net = nn.Sequential(nn.Conv1d(2, 3, 3), nn.MaxPool1d(3, { stride = 2, padding = 1, dilation = 1, ceil_mode = true }),
                              nn.AvgPool1d(2, { padding = 1, count_include_pad = false }), nn.AdaptiveAvgPool1d(2),
                              nn.AdaptiveAvgPool1d(1)):eval()
    round_trip(net, cnn.randn(2, 2, 15), cnn.randn(3, 2, 15), "pool1",
      "Conv,MaxPool,AveragePool,AveragePool,GlobalAveragePool,Identity")
    round_trip(nn.MaxPool1d(2, { dilation = 2 }):eval(), cnn.randn(3, 9), cnn.randn(3, 9), "pool1u",
      "Unsqueeze,MaxPool,Squeeze,Identity", {})
  end)

  it("the F.* forms in a custom forward: activations, conv1d, 1-d pools, group_norm, adaptive_max_pool2d", function()
    local Mixed = nn.Module:extend("Mixed")
    function Mixed:init()
      self:register_parameter("w1", cnn.randn(3, 2, 3))
      self:register_parameter("gw", cnn.rand(3) + 0.5)
    end
    function Mixed:forward(x) -- x: N x 2 x 16
      local h = F.conv1d(x, self.w1, nil, { padding = 1 })
      h = F.softplus(F.mish(F.silu(h)), 2) + F.hardtanh(h, -0.5, 0.5) + F.gelu(h, { approximate = "tanh" })
      h = F.max_pool1d(F.dropout2d(h, 0.5, false), 2, 2)            -- positional stride
      h = F.group_norm(F.avg_pool1d(h, 2, { ceil_mode = true }), 3, self.gw)
      return F.adaptive_max_pool2d(h:unsqueeze(3), { 1, 2 }):flatten(2)
    end
    cnn.manual_seed(8)
    round_trip(Mixed():eval(), cnn.randn(2, 2, 16), cnn.randn(3, 2, 16), "fmixed")
  end)

  it("Dropout2d is the identity (export is inference)", function()
    local net = nn.Sequential(nn.Conv2d(1, 2, 1), nn.Dropout2d(0.5)):train()
    local path = tmp("d2")
    cnn.onnx.export(net, cnn.randn(1, 1, 3, 3), path)
    H.assert_onnx_checked(path)
    assert.are.equal("Conv,Identity,Identity", op_types(path))
    assert.is_true(net.training, "the training flag is restored")
    local x = cnn.randn(1, 1, 3, 3)
    local ok, msg = H.compare(cnn.onnx.load(path)(x), net:eval()(x), 1e-5, 1e-5)
    assert(ok, msg)
  end)
end)

describe("cnn.onnx.export on an op with no ONNX mapping", function()
  -- a custom module inside a Sequential, so the error names its path ("2")
  local function wrapped(forward)
    local Odd = nn.Module:extend("Odd")
    function Odd:init() self.fc = nn.Linear(4, 4) end
    Odd.forward = forward
    return nn.Sequential(nn.Linear(4, 4), Odd())
  end

  local cases = {
    { "cumsum", function(self, x) return self.fc(x):cumsum(2) end },
    { "sort", function(self, x) return (self.fc(x):sort(2)) end },
    { "sort", function(self, x) local _, idx = self.fc(x):sort(2); return idx:float() end }, -- indices: no grad_fn
    { "topk", function(self, x) return (self.fc(x):topk(2, 2)) end },
    { "scatter", function(self, x)
        return self.fc(x):scatter(2, cnn.tensor({ { 1 }, { 2 } }, "int64"), 0.0)
      end },
    { "argmax", function(self, x) return self.fc(x):argmax(2):float() end },
    { "cnn.stack", function(self, x) return cnn.stack({ self.fc(x), x }, 1) end },
    { "F.mse_loss", function(self, x) return F.mse_loss(self.fc(x), x) end },
  }
  for _, c in ipairs(cases) do
    it("names " .. c[1] .. " and the layer", function()
      local err = export_error(wrapped(c[2]), cnn.randn(2, 4))
      assert.truthy(err:find("op " .. c[1] .. " in layer 2 has no ONNX export", 1, true), err)
    end)
  end

  it("refuses an in-place change of a traced tensor", function()
    local err = export_error(wrapped(function(self, x) local y = self.fc(x); y:add_(1); return y end), cnn.randn(2, 4))
    assert.truthy(err:find("op add_ in layer 2 has no ONNX export (it changes a traced tensor in place)", 1, true), err)
  end)

  it("still exports the ops it records, and leaves every function as it was", function()
    local before = { F.silu, cnn.stack, getmetatable(cnn.zeros(1)).__methods.cumsum }
    local net = wrapped(function(self, x) return F.silu(self.fc(x)):narrow(2, 2, 2):float() * x:size(2) end)
    round_trip(net, cnn.randn(2, 4), cnn.randn(3, 4), "ok", "Gemm,Gemm,Sigmoid,Mul,Slice,Mul,Identity")
    assert.are.equal(before[1], F.silu)
    assert.are.equal(before[2], cnn.stack)
    assert.are.equal(before[3], getmetatable(cnn.zeros(1)).__methods.cumsum)
  end)
end)

describe("cnn.onnx.load of the layout and norm operators", function()
  -- a one-node model on x: 1 x 4 x 2 x 2
  local function run(op, attrs, inputs, x)
    local path = tmp("one_" .. op)
    cnn.io.onnx_write(path, { opset = 17, initializers = {},
      nodes = { { op_type = op, inputs = inputs or { "x" }, outputs = { "y" }, attrs = attrs } },
      inputs = { { name = "x", elem_type = 1, shape = x.shape } }, outputs = { { name = "y", elem_type = 1 } } })
    local ok, m = pcall(cnn.onnx.load, path)
    if not ok then return false, m end
    return pcall(m, x)
  end

  it("DCR and CRD DepthToSpace differ as the ONNX spec says (hand values), SpaceToDepth inverts DCR", function()
    local x = cnn.tensor({ 0, 1, 2, 3 }):view(1, 4, 1, 1)
    local ok, y = run("DepthToSpace", { blocksize = 2 }, nil, x)
    assert(ok, y)
    assert.are.same({ { { { 0, 1 }, { 2, 3 } } } }, y:totable())
    local x2 = cnn.tensor({ 0, 1, 2, 3, 4, 5, 6, 7 }):view(1, 8, 1, 1)
    -- DCR: channel (i*2 + j)*2 + c -> (c, i, j); CRD: channel c*4 + i*2 + j
    ok, y = run("DepthToSpace", { blocksize = 2, mode = "DCR" }, nil, x2)
    assert.are.same({ { { { 0, 2 }, { 4, 6 } }, { { 1, 3 }, { 5, 7 } } } }, y:totable())
    ok, y = run("DepthToSpace", { blocksize = 2, mode = "CRD" }, nil, x2)
    assert.are.same({ { { { 0, 1 }, { 2, 3 } }, { { 4, 5 }, { 6, 7 } } } }, y:totable())
    local z = cnn.randn(2, 3, 4, 6)
    local ok1, s2d = run("SpaceToDepth", { blocksize = 2 }, nil, z)
    assert(ok1, s2d)
    local ok2, back = run("DepthToSpace", { blocksize = 2 }, nil, s2d)
    assert(ok2, back)
    assert.are.equal(0, (back - z):abs():max():item())
  end)

  it("refuses malformed nodes with the operator's name", function()
    local x = cnn.randn(1, 4, 2, 2)
    local ok, err = run("DepthToSpace", { blocksize = 0 }, nil, x)
    assert.is_false(ok)
    assert.truthy(err:find("onnx DepthToSpace: blocksize must be a positive integer, got 0", 1, true), err)
    ok, err = run("SpaceToDepth", { blocksize = 3 }, nil, x)
    assert.is_false(ok)
    assert.truthy(err:find("onnx SpaceToDepth: 2x2 does not divide by blocksize 3", 1, true), err)
    ok, err = run("LayerNormalization", {}, nil, x)
    assert.is_false(ok)
    assert.truthy(err:find("onnx LayerNormalization: the Scale input is required", 1, true), err)
    ok, err = run("Slice", {}, { "x" }, x)
    assert.is_false(ok)
    assert.truthy(err:find("onnx Slice: starts and ends must be given", 1, true), err)
  end)
end)
