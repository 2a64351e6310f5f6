-- onnx/init.lua -- the "onnx" module, reachable as cnn.onnx: ONNX models
-- out (export.lua, tracing a forward pass) and in (load.lua, a graph run
-- by cnnsh ops from ops.lua).  The protobuf files are read and written by
-- core/io (cnn.io.onnx_read / onnx_write), from code protoc-c generates
-- from Debian's onnx.proto.
local cnn = _G.cnn
local doc = cnn.doc or {}

local onnx = {}

onnx.export = require("onnx.export").export
onnx.load = require("onnx.load").load
onnx.ops = require("onnx.ops").ops

doc[onnx.export] = [[
cnn.onnx.export(net, example_input, path [, {opset = 13, dynamic_batch = false,
                input_name = "input", output_name = "output"}]) -> output
Writes net as an ONNX model (opset 13..17) by running it once on
example_input in eval mode.  nn layers export as their ONNX operators; a
custom module's forward exports through the ops it calls (F.*, tensor
methods and operators); weights become initializers named after the
state_dict.  An op with no ONNX export is an error naming it and the layer.
dynamic_batch = true lets the model take any batch size.
  cnn.onnx.export(net, cnn.randn(1, 1, 28, 28), "model.onnx", {dynamic_batch = true})]]

doc[onnx.load] = [[
cnn.onnx.load(path) -> module
An ONNX model as an nn.Module that runs its graph with cnnsh ops (in eval
mode; m:train() to fine-tune it).  One child per node (Conv -> nn.Conv2d,
Gemm -> nn.Linear, BatchNormalization -> nn.BatchNorm2d, LayerNormalization
-> nn.LayerNorm, ...), so m:summary{...}, m:trace(x), m:profile(x) work.
Operators it runs: cnn.onnx.ops (Conv, ConvTranspose, Gemm, MatMul,
BatchNormalization, LayerNormalization, InstanceNormalization, pools,
activations, Add/Mul/Concat, Flatten/Reshape/Transpose/Slice, Softmax,
Resize, DepthToSpace, SpaceToDepth, Pad, ...).
  m = cnn.onnx.load("model.onnx"); y = m(x)]]

doc[onnx] = [[
cnn.onnx -- ONNX models out and in: cnn.onnx.export(net, x, path [, opts]), cnn.onnx.load(path).]]

return onnx
