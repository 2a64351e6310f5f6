-- onnx_conv_transpose_spec.lua -- issue 13's layers through cnn.onnx.export
-- and cnn.onnx.load: ConvTranspose2d (and F.conv_transpose2d) export as
-- ConvTranspose, MaxPool2d with dilation as MaxPool with dilations, a
-- Conv2d with padding = 'same' as Conv with explicit pads, Conv1d as a 1-D
-- Conv, padding_mode reflect/replicate as Pad (reflect/edge) and circular as
-- Slice + Concat before the Conv; each file passes the ONNX checker (python3-onnx; pending when missing) and loads back into
-- a model that gives the network's outputs on another batch size.  The
-- loader's ConvTranspose, MaxPool dilations and Pad modes are checked
-- against the ONNX test data by tests/onnx/conformance.lua.
local H = require("helpers")

local TMP = os.getenv("CNNSH_TEST_TMP") or "/tmp"

local function tmp(name) return TMP .. "/onnx_ct_spec_" .. name .. ".onnx" end

local assert_checked = H.assert_onnx_checked

local op_types = H.onnx_op_types

local function round_trip(net, example, x, name, want_ops)
  local path = tmp(name)
  cnn.onnx.export(net, example, path, { dynamic_batch = true })
  assert_checked(path)
  assert.are.equal(want_ops, op_types(path))
  local ok, msg = H.compare(cnn.onnx.load(path)(x), net(x), 1e-5, 1e-5)
  assert(ok, msg)
end

describe("ONNX export of issue 13's layers", function()
  it("ConvTranspose2d (stride, padding, output_padding, dilation, groups) and a dilated MaxPool2d", function()
    cnn.manual_seed(5)
    local net = nn.Sequential(
      nn.ConvTranspose2d(4, 6, 3, { stride = 2, padding = 1, output_padding = 1, groups = 2 }), nn.ReLU(),
      nn.ConvTranspose2d(6, 3, { 2, 3 }, { stride = { 1, 2 }, dilation = { 2, 1 }, bias = false }),
      nn.MaxPool2d(3, { stride = 1, dilation = 2, padding = 1 })):eval()
    round_trip(net, cnn.randn(2, 4, 5, 4), cnn.randn(3, 4, 5, 4), "ct", "ConvTranspose,Relu,ConvTranspose,MaxPool,Identity")
  end)

  it("F.conv_transpose2d in a custom forward", function()
    local Up = nn.Module:extend("Up")
    function Up:init() self:register_parameter("w", cnn.randn(3, 2, 2, 2)) end
    function Up:forward(x) return F.conv_transpose2d(x, self.w, nil, { stride = 2 }) end
    round_trip(Up():eval(), cnn.randn(1, 3, 4, 4), cnn.randn(2, 3, 4, 4), "fct", "ConvTranspose,Identity")
  end)

  it("Conv2d with padding = 'same' and 'valid'", function()
    local net = nn.Sequential(nn.Conv2d(2, 3, { 4, 3 }, { padding = "same", dilation = { 1, 2 } }),
                              nn.Conv2d(3, 2, 3, { padding = "valid" })):eval()
    round_trip(net, cnn.randn(1, 2, 7, 8), cnn.randn(2, 2, 7, 8), "same", "Conv,Conv,Identity")
  end)

  it("Conv1d (padding 'same', dilation, groups) as a 1-D Conv", function()
    local net = nn.Sequential(nn.Conv1d(4, 6, 4, { padding = "same", dilation = 2, groups = 2 }), nn.ReLU(),
                              nn.Conv1d(6, 2, 3, { stride = 2, padding = 1 })):eval()
    round_trip(net, cnn.randn(1, 4, 11), cnn.randn(3, 4, 11), "c1", "Conv,Relu,Conv,Identity")
  end)

  it("Conv2d and Conv1d with padding_mode reflect, replicate, circular (Pad or Slice + Concat, then Conv)", function()
    cnn.manual_seed(6)
    local net = nn.Sequential(nn.Conv2d(2, 3, 3, { padding = { 1, 2 }, padding_mode = "reflect" }),
                              nn.Conv2d(3, 3, { 2, 3 }, { padding = "same", padding_mode = "replicate" }),
                              nn.Conv2d(3, 2, 3, { padding = { 2, 1 }, padding_mode = "circular", stride = 2 })):eval()
    round_trip(net, cnn.randn(1, 2, 6, 7), cnn.randn(3, 2, 6, 7), "pm2",
      "Pad,Conv,Pad,Conv,Slice,Slice,Concat,Slice,Slice,Concat,Conv,Identity")
    local net1 = nn.Sequential(nn.Conv1d(2, 3, 3, { padding = 2, padding_mode = "circular" }),
                               nn.Conv1d(3, 2, 4, { padding = "same", padding_mode = "reflect" })):eval()
    round_trip(net1, cnn.randn(1, 2, 9), cnn.randn(2, 2, 9), "pm1", "Slice,Slice,Concat,Conv,Pad,Conv,Identity")
  end)
end)
