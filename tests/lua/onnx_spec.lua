-- onnx_spec.lua -- cnn.onnx.export and cnn.onnx.load (stdlib/onnx/), and
-- cnn.io.onnx_read / onnx_write (core/io/onnx_*.c).
--
-- Evidence, none comparing a path with itself: every exported file passes
-- the ONNX project's own checker (onnx.checker.check_model with
-- full_check, through Debian's python3-onnx; pending with a message when
-- it is missing); a hand-written model (Gemm, Relu with known weights)
-- gives values computed here by hand; round trips export -> load give the
-- original network's outputs on a batch size other than the example's.
-- The node semantics themselves are checked against the ONNX test data by
-- tests/onnx/conformance.lua.
local H = require("helpers")

local TMP = os.getenv("CNNSH_TEST_TMP") or "/tmp"
local function tmp(name) return TMP .. "/onnx_spec_" .. name .. ".onnx" end

local assert_checked = H.assert_onnx_checked

local function assert_close(a, b, atol)
  local ok, msg = H.compare(a, b, atol or 1e-5, 1e-5)
  assert(ok, msg)
end

local op_types = H.onnx_op_types

local function trained_cnn()
  cnn.manual_seed(7)
  local net = nn.Sequential(
    nn.Conv2d(1, 4, 3, { padding = 1 }), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(4, 6, 3, { stride = 2, padding = { 1, 0 } }), nn.BatchNorm2d(6), nn.LeakyReLU(0.2),
    nn.AvgPool2d(2, { padding = 1 }), nn.Flatten(), nn.Linear(6 * 2 * 2, 12), nn.ELU(0.5), nn.Dropout(0.3),
    nn.Linear(12, 5), nn.LogSoftmax(2))
  net:train()
  for _ = 1, 3 do net(cnn.randn(4, 1, 12, 12)) end -- running statistics away from 0 and 1
  return net:eval()
end

describe("cnn.onnx.export", function()
  it("writes a model the ONNX checker accepts, with initializers named after the state_dict", function()
    local net = trained_cnn()
    local path = tmp("cnn")
    cnn.onnx.export(net, cnn.randn(2, 1, 12, 12), path, { dynamic_batch = true })
    assert_checked(path)
    local m = cnn.io.onnx_read(path)
    assert.are.equal(13, m.opset)
    local inits = {}
    for _, it in ipairs(m.initializers) do inits[it.name] = it.tensor end
    for _, key in ipairs({ "1.weight", "1.bias", "2.running_mean", "2.running_var", "10.weight", "13.bias" }) do
      assert(inits[key], "initializer " .. key .. " missing")
    end
    assert_close(inits["5.weight"], net[5].weight:detach())
    assert.are.equal("batch", m.inputs[1].shape[1])
    assert.are.equal("Conv,BatchNormalization,Relu,MaxPool,Conv,BatchNormalization,LeakyRelu,AveragePool,"
                     .. "Flatten,Gemm,Elu,Identity,Gemm,LogSoftmax,Identity", op_types(path))
  end)

  it("round-trips: the loaded model gives the network's outputs, at another batch size too", function()
    local net = trained_cnn()
    local path = tmp("roundtrip")
    cnn.onnx.export(net, cnn.randn(2, 1, 12, 12), path, { dynamic_batch = true })
    local m = cnn.onnx.load(path)
    local x = cnn.randn(5, 1, 12, 12)
    assert_close(m(x), net(x))
  end)

  it("exports the other activations, softmax, GELU and global pooling", function()
    local net = nn.Sequential(nn.Conv2d(2, 3, 1), nn.Sigmoid(), nn.Tanh(), nn.GELU(),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Softmax(2)):eval()
    local path = tmp("acts")
    local x = cnn.randn(3, 2, 5, 4)
    cnn.onnx.export(net, x, path, { opset = 17 })
    assert_checked(path)
    assert_close(cnn.onnx.load(path)(x), net(x))
  end)

  it("exports a custom module through the ops its forward records", function()
    local Block = nn.Module:extend("Block")
    function Block:init()
      self.conv1 = nn.Conv2d(3, 3, 3, { padding = 1 })
      self.conv2 = nn.Conv2d(3, 3, 3, { padding = 1 })
      self:register_parameter("scale", cnn.full({ 1, 3, 1, 1 }, 0.5))
      self.fc = nn.Linear(3 * 4 * 4, 2)
    end
    function Block:forward(x)
      local h = F.relu(x + self.conv2(F.relu(self.conv1(x))) * self.scale)
      h = F.max_pool2d(h, 2) - 1
      return F.softmax(self.fc(h:view(h:size(1), -1)), -1)
    end
    cnn.manual_seed(3)
    local net = Block():eval()
    local path = tmp("custom")
    cnn.onnx.export(net, cnn.randn(2, 3, 8, 8), path, { dynamic_batch = true })
    assert_checked(path)
    local inits = {}
    for _, it in ipairs(cnn.io.onnx_read(path).initializers) do inits[it.name] = true end
    assert(inits["scale"] and inits["conv1.weight"] and inits["fc.bias"], "parameters keep their state_dict names")
    local x = cnn.randn(4, 3, 8, 8)
    assert_close(cnn.onnx.load(path)(x), net(x))
  end)

  -- the model zoo's blocks end in cnn.fused.add_relu: Add then Relu in the file
  it("exports the model zoo's ResNet, its blocks' fused add + ReLU as Add, Relu", function()
    cnn.manual_seed(5)
    local net = models.cifar_resnet{ depth = 8 }
    net:train()
    for _ = 1, 2 do net(cnn.randn(4, 3, 16, 16)) end -- running statistics away from 0 and 1
    net:eval()
    local path = tmp("resnet8")
    cnn.onnx.export(net, cnn.randn(2, 3, 16, 16), path, { dynamic_batch = true })
    assert_checked(path)
    local ops = op_types(path)
    local _, adds = ops:gsub("Add,Relu", "")
    assert.are.equal(3, adds, ops) -- one per block
    local x = cnn.randn(3, 3, 16, 16)
    assert_close(cnn.onnx.load(path)(x), net(x), 1e-4)
  end)

  it("names the op and the layer it cannot export", function()
    local Odd = nn.Module:extend("Odd")
    function Odd:init() self.fc = nn.Linear(4, 4) end
    function Odd:forward(x) return self.fc(x):sin() end
    local ok, err = pcall(cnn.onnx.export, Odd(), cnn.randn(2, 4), tmp("odd"))
    assert.is_false(ok)
    assert.matches("op sin in layer (top) has no ONNX export", err, 1, true)
  end)

  it("checks its options", function()
    local net = nn.Linear(2, 2)
    assert.has_error(function() cnn.onnx.export(net, cnn.randn(1, 2), tmp("o"), { opset = 9 }) end,
      "cnn.onnx.export: opset must be an integer from 13 to 17, got 9")
    local ok, err = pcall(cnn.onnx.export, net, cnn.randn(1, 2), tmp("o"), { dynamic = true })
    assert.is_false(ok)
    assert.matches("unknown option 'dynamic'", err, 1, true)
    assert.has_error(function() cnn.onnx.export(net, "x", tmp("o")) end)
  end)

  it("leaves the network as it was (training flags, forward methods)", function()
    local net = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
    net:train()
    cnn.onnx.export(net, cnn.randn(2, 3), tmp("flags"))
    assert.is_true(net.training and net[2].training)
    assert.is_nil(rawget(net[1], "forward"))
  end)
end)

describe("cnn.onnx.load", function()
  -- y = relu(x W^T + b) with W = {{1, -1}, {2, 0.5}}, b = {0.5, -3}, written by hand
  local function gemm_model(path, extra_node)
    local nodes = { { op_type = "Gemm", inputs = { "x", "W", "b" }, outputs = { "h" }, attrs = { transB = 1 } },
                    { op_type = "Relu", inputs = { "h" }, outputs = { "y" } } }
    if extra_node then nodes[#nodes + 1] = extra_node end
    cnn.io.onnx_write(path, {
      opset = 13, nodes = nodes,
      initializers = { { name = "W", tensor = cnn.tensor({ { 1, -1 }, { 2, 0.5 } }) },
                       { name = "b", tensor = cnn.tensor({ 0.5, -3 }) } },
      inputs = { { name = "x", elem_type = 1, shape = { "n", 2 } } },
      outputs = { { name = extra_node and extra_node.outputs[1] or "y", elem_type = 1, shape = { "n", 2 } } } })
  end

  it("runs a hand-written graph: values computed by hand", function()
    local path = tmp("gemm")
    gemm_model(path)
    assert_checked(path)
    local m = cnn.onnx.load(path)
    -- x = {3, 1}: h = {3 - 1 + 0.5, 6 + 0.5 - 3} = {2.5, 3.5}; x = {-1, 2}: h = {-2.5, -5}
    assert_close(m(cnn.tensor({ { 3, 1 }, { -1, 2 } })), { { 2.5, 3.5 }, { 0, 0 } })
  end)

  it("is a module: trainable, with summary", function()
    local path = tmp("gemm")
    gemm_model(path)
    local m = cnn.onnx.load(path)
    local x = cnn.tensor({ { 3, 1 } })
    m(x):sum():backward()
    local w = nil
    for name, p in m:named_parameters() do if name:match("weight$") then w = p end end
    -- d/dW of sum(relu(Wx + b)) = x for each active row: both rows active
    assert_close(w.grad, { { 3, 1 }, { 3, 1 } })
    local s = m:summary({ 1, 2 }, { print = false })
    assert.matches("Linear", s.text)
  end)

  it("works with trace and profile, and trains", function()
    local net = trained_cnn()
    local path = tmp("train")
    cnn.onnx.export(net, cnn.randn(2, 1, 12, 12), path)
    local m = cnn.onnx.load(path)
    local x, y = cnn.randn(4, 1, 12, 12), cnn.tensor({ 1, 2, 3, 4 }, "int64")
    assert.are.equal(15, #m:trace(x, y, { print = false }).rows) -- 14 layers + the output Identity
    assert.are.equal(15, #m:profile(x, { print = false }).rows)
    m:train()
    local opt = optim.SGD(m:parameters(), { lr = 0.05 })
    local first, last
    for i = 1, 8 do
      opt:zero_grad()
      local loss = F.nll_loss(m(x), y)
      loss:backward()
      opt:step()
      first, last = first or loss:item(), loss:item()
    end
    assert(last < first, string.format("loss went from %g to %g", first, last))
  end)

  it("names an unsupported operator", function()
    local path = tmp("unsupported")
    gemm_model(path, { op_type = "Hardmax", inputs = { "y" }, outputs = { "z" } })
    local ok, err = pcall(cnn.onnx.load, path)
    assert.is_false(ok)
    assert.matches("operator Hardmax is not supported", err, 1, true)
  end)

  it("refuses malformed files with a clear error", function()
    local path = tmp("garbage")
    local f = assert(io.open(path, "wb"))
    f:write("\255\255\255\255 this is not protobuf")
    f:close()
    local ok, err = pcall(cnn.onnx.load, path)
    assert.is_false(ok)
    assert.matches("not a valid ONNX model", err, 1, true)
    ok, err = pcall(cnn.onnx.load, TMP .. "/no_such_file.onnx")
    assert.is_false(ok)
    assert.matches("cannot open", err, 1, true)
    -- a valid model cut short
    gemm_model(tmp("gemm"))
    local g = assert(io.open(tmp("gemm"), "rb"))
    local bytes = g:read("a")
    g:close()
    f = assert(io.open(path, "wb"))
    f:write(bytes:sub(1, #bytes - 7))
    f:close()
    ok, err = pcall(cnn.onnx.load, path)
    assert.is_false(ok)
    assert.matches("onnx", err, 1, true)
  end)
end)
