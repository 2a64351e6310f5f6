-- cuda_half_spec.lua -- float16 inference on a CUDA device (issue 16 point
-- 6): net:half() and net:to('cuda', 'float16') on the example network
-- (bench/common.lua's fmnist_cnn) and ResNet-18, in eval mode, against the
-- float32 network on the CPU; each op float16 admits, on its own, against
-- float32; and the errors: float16 on the CPU, batch norm training and
-- backward in float16.  In CI the device is the fake one
-- (tests/gpu/fake_cuda_*.c: its own float16 loops, loading as float and
-- rounding each result to float16, as gpu/*.cu do).
--
-- Tolerances.  float16 keeps 11 significant bits: one rounding is within
-- 2^-11 (about 5e-4) of the value.  An op checked on its own gets inputs
-- already rounded to float16 on both sides, so only its result's rounding
-- (and float arithmetic inside) differs: 2e-3 relative.  A whole network
-- rounds every activation and weight, ten to twenty layers deep, and
-- the errors add up: its logits are compared within 1e-2 of the largest
-- logit (PyTorch's own half-precision tests use 1e-2 to 1e-1; on the fake
-- device the worst differences were 1.5e-4 for fmnist_cnn and 1.4e-3 for
-- ResNet-18), and each network must also differ from float32 somewhere
-- (so it really ran in float16).
--
-- Run by tests/gpu/CMakeLists.txt as lua_fake_half (CNNSH_CUDA_MODULE =
-- libcnn_fake_cuda.so) and gpu_lua_cuda_half_spec (label gpu: the real
-- module; exits 77, skipped, without a device).

package.path = "./?.lua;" .. package.path
local H = require("helpers")
H.need_cuda("cuda_half_spec")
local B = dofile("../../bench/common.lua")
local models = require("models")

-- a network with batch-norm statistics and affine parameters that are not
-- the identity (a fresh BatchNorm in eval mode passes x through)
local function randomise_bn(net)
  cnn.no_grad(function()
    for _, m in ipairs(net:modules()) do
      if m.running_mean then
        local c = m.running_mean.shape[1]
        m.running_mean:copy_(cnn.randn(c) * 0.1)
        m.running_var:copy_(cnn.rand(c) + 0.5)
        m.weight:copy_(cnn.rand(c) + 0.5)
        m.bias:copy_(cnn.randn(c) * 0.1)
      end
    end
  end)
  return net:eval()
end

-- a float32 CPU copy of net, with the same parameters and buffers
local function copy_of(make, net)
  local c = make()
  c:load_state_dict(net:state_dict())
  return c:eval()
end

local function check_half_net(name, make, x)
  cnn.manual_seed(5)
  local net = randomise_bn(make())
  local ref = cnn.no_grad(function() return net(x) end)
  local scale = math.max(1, ref:abs():max():item())
  for _, how in ipairs({ "half", "to" }) do
    local h = copy_of(make, net)
    if how == "half" then h:half():cuda() else h:to("cuda", "float16") end
    for k, t in pairs(h:state_dict()) do
      local want = k:match("num_batches_tracked$") and "int64" or "float16"
      assert.equal(want, t.dtype, k)
      assert.equal("cuda:0", tostring(t.device), k)
    end
    local y = cnn.no_grad(function() return h(x:to("cuda", "float16")) end)
    assert.equal("float16", y.dtype)
    assert.equal("cuda:0", tostring(y.device))
    local got = y:float():cpu()
    H.assert_close(got, ref, 1e-2 * scale, 0, name .. " via " .. how)
    assert.is_true(H.max_diff(got:totable(), ref:totable()) > 0, name .. ": no float16 rounding seen")
  end
end

describe("float16 inference on cuda", function()
  it("runs the example network (fmnist_cnn) converted with half() and to('cuda', 'float16')", function()
    check_half_net("fmnist_cnn", B.fmnist_cnn, cnn.randn(4, 1, 28, 28))
  end)

  it("runs ResNet-18 (BasicBlocks, residual adds, global pooling) at 32x32", function()
    check_half_net("resnet18", function() return models.resnet18 { num_classes = 10 } end,
      cnn.randn(2, 3, 32, 32))
  end)

  it("predicts with argmax and max along a dimension, and softmax sums to 1", function()
    cnn.manual_seed(6)
    local logits = cnn.randn(5, 10)
    local h = logits:to("cuda", "float16")
    local r = h:float():cpu() -- the same numbers, in float32
    assert.same(r:argmax(2):totable(), h:argmax(2):cpu():totable())
    local v, i = h:max(2)
    assert.equal("float16", v.dtype)
    assert.equal("int64", i.dtype)
    local rv, ri = r:max(2)
    assert.same(ri:totable(), i:cpu():totable())
    H.assert_close(v:float():cpu(), rv, 0, 0, "max values")
    local p = F.softmax(h, 2)
    assert.equal("float16", p.dtype)
    H.assert_close(p:float():cpu(), F.softmax(r, 2), 1e-3, 2e-3, "softmax")
    H.assert_close(F.log_softmax(h, 2):float():cpu(), F.log_softmax(r, 2), 2e-3, 2e-3,
      "log_softmax")
  end)

  -- each op on its own: float16 on cuda against float32 on the CPU over the
  -- same (float16-rounded) inputs
  local function rounded(t) return t:half():float() end
  local function op_close(what, f, inputs, atol, rtol)
    local ref_in, dev_in = {}, {}
    for i, t in ipairs(inputs) do
      ref_in[i] = rounded(t)
      dev_in[i] = t:to("cuda", "float16")
    end
    local y = f(table.unpack(dev_in))
    assert.equal("float16", y.dtype, what)
    H.assert_close(y:float():cpu(), f(table.unpack(ref_in)), atol, rtol, what)
  end

  it("runs each inference op in float16 within one rounding of float32", function()
    cnn.manual_seed(7)
    local x, row, col = cnn.randn(3, 4, 7, 5), cnn.randn(5), cnn.randn(3, 4, 7, 1)
    for _, act in ipairs({ "relu", "sigmoid", "tanh", "gelu", "elu", "leaky_relu", "silu", "hardtanh" }) do
      op_close(act, F[act], { x }, 1e-4, 2e-3)
    end
    op_close("add (broadcast)", function(a, b) return a + b end, { x, row }, 1e-4, 2e-3)
    op_close("mul (broadcast)", function(a, b) return a * b end, { x, col }, 1e-4, 2e-3)
    op_close("add scalar", function(a) return a * 0.5 + 1 end, { x }, 1e-4, 2e-3)
    op_close("max_pool2d", function(a) return F.max_pool2d(a, 2) end, { x }, 0, 0)
    op_close("avg_pool2d", function(a) return F.avg_pool2d(a, 3, 2, { padding = 1 }) end,
      { x }, 1e-4, 2e-3)
    op_close("adaptive_avg_pool2d", function(a) return F.adaptive_avg_pool2d(a, 1) end, { x }, 1e-4, 2e-3)
    local c = 4
    op_close("batch_norm (eval)", function(a, rm, rv, w, b)
      return F.batch_norm(a, rm, rv, w, b, { training = false })
    end, { x, cnn.randn(c) * 0.1, cnn.rand(c) + 0.5, cnn.randn(c), cnn.randn(c) }, 1e-3, 2e-3)
    op_close("linear", F.linear, { cnn.randn(6, 7), cnn.randn(4, 7), cnn.randn(4) }, 1e-3, 2e-3)
    op_close("flatten + view", function(a) return a:flatten(2):view(3, 4, 35) end, { x }, 0, 0)
    op_close("dropout (eval)", function(a) return F.dropout(a, 0.3, false) end, { x }, 0, 0)
    op_close("mean over H, W", function(a) return a:mean({ 3, 4 }) end, { x }, 1e-3, 2e-3)
  end)

  it("casts between float16 and float32 both ways on cuda", function()
    local x = cnn.randn(4, 5)
    local h = x:cuda():half()
    assert.equal("float16", h.dtype)
    assert.equal("float32", h:float().dtype)
    H.assert_close(h:float():cpu(), x:half():float(), 0, 0, "cuda cast = cpu cast")
  end)

  it("keeps refusing float16 on the CPU, naming the op", function()
    local x = cnn.randn(2, 3, 4, 4):half()
    H.raises(function() return F.relu(x) end, "relu", "float16")
    H.raises(function() return x + x end, "add", "float16")
    H.raises(function() return F.max_pool2d(x, 2) end, "max_pool2d", "float16")
    H.raises(function() return F.softmax(x, 2) end, "softmax", "float16")
    H.raises(function() return x:sum() end, "sum", "float16")
    H.raises(function() return F.linear(x:view(2, 48), cnn.randn(3, 48):half()) end, "linear", "float16")
    local bn = nn.BatchNorm2d(3):half():eval()
    H.raises(function() return bn(x) end, "batch_norm", "float16")
    local net = B.fmnist_cnn():half():eval()
    H.raises(function() return net(cnn.randn(1, 1, 28, 28):half()) end, "float16")
  end)

  it("refuses batch norm training and backward in float16 with a clear message", function()
    local bn = nn.BatchNorm2d(3):to("cuda", "float16")
    local x = cnn.randn(2, 3, 4, 4):to("cuda", "float16")
    H.raises(function() return bn(x) end, "batch_norm", "training", "float16", "eval")
    bn:eval()
    local y = bn(x:detach():requires_grad_())
    assert.equal("float16", y.dtype)
    H.raises(function() y:float():sum():backward() end, "batch_norm", "backward", "float16")
  end)

  it("checks Module:to's arguments", function()
    local net = nn.Linear(2, 2)
    H.raises(function() net:to("cuda", "int64") end, "Module:to", "argument 2", "floating dtype")
    H.raises(function() net:to("float16", "cuda") end, "Module:to", "argument 1", "device")
    H.raises(function() net:to("bogus") end, "Module:to", "argument 1")
    H.raises(function() net:to("cuda", "float16", {}) end, "Module:to", "argument 3")
    H.raises(function() net:to(3) end, "Module:to", "argument 1")
    -- back to float32 on the CPU: every floating tensor, from float16 too
    net:to("cuda", "half"):to("cpu", "float32")
    assert.equal("float32", net.weight.dtype)
    assert.equal("cpu", tostring(net.weight.device))
  end)
end)
