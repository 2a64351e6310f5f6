-- conv_block_spec.lua -- nn.Sequential's fused training block Conv2d ->
-- BatchNorm2d -> ReLU -> MaxPool2d (cnn.fused.conv_bn_relu_pool, oneDNN's
-- blocked layouts on the CPU; core/ops/nn_conv_block.c).
--
-- Every fused result is compared with the same layers run one by one (the
-- unfused ops, each tested elsewhere) and with a float64 oracle: the
-- layers in float64 with the naive convolution loop (cnn.set_conv_algo
-- 'naive'), our batch norm and pool -- no oneDNN on that side.  Values,
-- the five gradients, the running statistics and num_batches_tracked.
local H = require("helpers")

local BLOCK = "ConvBnReluPoolBackward"

-- a Sequential of the four layers (opts: conv options, bn options, pool k, pool opts)
local function block(C, K, o)
  o = o or {}
  return nn.Sequential(nn.Conv2d(C, K, o.k or 3, o.conv or { padding = 1 }), nn.BatchNorm2d(K, o.bn),
                       nn.ReLU(), nn.MaxPool2d(o.pool or 2, o.pool_opts))
end

-- a copy of net with the same parameters and buffers
local function twin(net, C, K, o, dtype)
  local t = block(C, K, o)
  t:load_state_dict(net:state_dict())
  if dtype then t:to(dtype) end
  return t
end

-- the layers called one by one (nothing fused)
local unfused = H.run_layers

-- the oracle's forward: float64, naive convolution loop
local function oracle(net, x)
  local prev = cnn.get_conv_algo()
  cnn.set_conv_algo("naive")
  local ok, y = pcall(unfused, net, x)
  cnn.set_conv_algo(prev)
  assert(ok, y)
  return y
end

-- largest |a - b| over largest |b|
local function rel(a, b)
  local scale = b:abs():max():item()
  return (a:double() - b:double()):abs():max():item() / (scale > 0 and scale or 1)
end

-- the gradients and statistics to compare, by name
local function state_of(net, x)
  local conv, bn = net[1], net[2]
  return {
    dx = x.grad, dw = conv.weight.grad, db = conv.bias and conv.bias.grad,
    dgamma = bn.weight and bn.weight.grad, dbeta = bn.bias and bn.bias.grad,
    running_mean = bn.running_mean, running_var = bn.running_var,
  }
end

-- forward + backward of net on x with output gradient g; the output
local function step(net, x, g, run)
  local y = run(net, x)
  y:backward(g)
  return y
end

-- compare a fused run with the unfused and the float64 oracle; returns the fused output
local function check_block(C, K, H_, W_, o, tol)
  tol = tol or 2e-5
  cnn.manual_seed(7)
  local net = block(C, K, o)
  local ref, plain = twin(net, C, K, o, "float64"), twin(net, C, K, o)
  local x0 = cnn.randn(3, C, H_, W_)
  local x, xp, x64 = x0:clone(), x0:clone(), x0:double()
  if not o or not o.frozen_input then -- frozen: no dx wanted (a network's first block)
    x, xp, x64 = x:requires_grad_(), xp:requires_grad_(), x64:requires_grad_()
  end
  for _ = 1, 2 do -- two steps: the running statistics move twice
    local y = net(x)
    assert.are.equal(BLOCK, tostring(y.grad_fn))
    local g = cnn.randn(table.unpack(y.shape))
    step(plain, xp, g, unfused)
    local y64 = step(ref, x64, g:double(), oracle)
    y:backward(g)
    assert.is_true(rel(y, y64) < tol, "y vs float64: " .. rel(y, y64))
  end
  local got, want, want64 = state_of(net, x), state_of(plain, xp), state_of(ref, x64)
  for name, t in pairs(want64) do
    if name == "db" then
      -- batch norm cancels the bias: its gradient is rounding noise around 0
      assert.is_true(got.db:abs():max():item() < 1e-3 * got.dw:abs():max():item() + 1e-6, "db")
    else
      assert.is_true(rel(got[name], t) < tol, name .. " vs float64: " .. rel(got[name], t))
      assert.is_true(rel(got[name], want[name]) < tol, name .. " vs unfused: " .. rel(got[name], want[name]))
    end
  end
  assert.are.equal(plain[2].num_batches_tracked:item(), net[2].num_batches_tracked:item())
  assert.are.equal(2, net[2].num_batches_tracked:item())
  return net
end

describe("the fused Conv2d -> BatchNorm2d -> ReLU -> MaxPool2d block", function()
  it("matches the layers one by one and a float64 naive oracle (example network's first block)", function()
    check_block(1, 32, 28, 28)
  end)

  it("matches them when the input wants no gradient (batch norm's input gradient straight into dw)", function()
    -- the example network's first block, 27 taps, 5x5, and 2 x 3x2 without padding
    check_block(1, 32, 28, 28, { frozen_input = true })
    check_block(3, 32, 10, 10, { frozen_input = true })
    check_block(1, 16, 12, 12, { frozen_input = true, k = 5, conv = { padding = 2 } })
    check_block(2, 16, 9, 8, { frozen_input = true, k = { 3, 2 }, conv = { padding = 0, bias = false } })
  end)

  it("matches them with 32 -> 64 channels (example network's second block)", function()
    check_block(32, 64, 14, 14)
  end)

  it("matches them when oneDNN's Winograd kernels take the convolution (3x3, 64 -> 64, 147 tiles)", function()
    check_block(64, 64, 28, 28) -- core/cpu/conv_winograd.c's rule: batch 3 x 7 x 7 tiles of 4x4
  end)

  it("matches them with whole channel blocks and odd sizes (our pool pass on nChw16c or nChw8c)", function()
    check_block(3, 16, 9, 11) -- pooled 4x5: the last row and column of the conv output in no window
    check_block(2, 48, 7, 6)
    check_block(2, 16, 8, 8, { bn = { affine = false }, conv = { padding = 1, bias = false } })
    -- 24 channels: whole 8-channel blocks, not 16 (the AVX2 pass takes them,
    -- AVX-512 CPUs keep oneDNN's primitives), with the NCHW edge's part runs
    check_block(2, 24, 10, 10)
    check_block(1, 24, 14, 14, { frozen_input = true })
  end)

  it("matches them for odd sizes, stride, asymmetric options, no conv bias, pool 3 stride 2", function()
    check_block(3, 8, 11, 9, { k = { 3, 5 }, conv = { padding = { 1, 2 }, stride = { 1, 2 }, bias = false },
                               pool = 3, pool_opts = { stride = 2 } })
    check_block(5, 16, 10, 10, { conv = { padding = 2, dilation = 2 }, pool = { 2, 3 } })
  end)

  it("matches them without affine parameters, without running statistics, with cumulative momentum", function()
    check_block(2, 4, 8, 8, { bn = { affine = false } })
    local net = check_block(2, 4, 8, 8, { bn = { momentum = nil, cumulative = true } })
    assert.is_nil(net[2].momentum)
    net = block(2, 4, { bn = { track_running_stats = false } })
    local x = cnn.randn(2, 2, 8, 8)
    local y = net(x)
    assert.are.equal(BLOCK, tostring(y.grad_fn))
    H.assert_close(y, unfused(net, x), 1e-5, 1e-5, "no running statistics")
  end)

  it("runs in bfloat16 under cnn.autocast: close to the float64 oracle, not float32's bits", function()
    if cnn.autocast_info() ~= "onednn" then
      pending("no AVX512-BF16 here: bfloat16 autocast is emulated and the block declines it")
      return
    end
    for _, case in ipairs({ { 8, 16, 12, 12 }, { 8, 32, 9, 11 } }) do -- the second: odd sizes, 2 blocks
    cnn.manual_seed(11)
    local C, K, H_, W_ = table.unpack(case)
    local net = block(C, K)
    local ref, f32 = twin(net, C, K, nil, "float64"), twin(net, C, K)
    local x0 = cnn.randn(4, C, H_, W_)
    local x, x32, x64 = x0:clone():requires_grad_(), x0:clone():requires_grad_(), x0:double():requires_grad_()
    local y = cnn.autocast("bfloat16", function() return net(x) end)
    assert.are.equal(BLOCK, tostring(y.grad_fn))
    assert.are.equal("float32", y.dtype)
    local g = cnn.randn(table.unpack(y.shape))
    y:backward(g)
    local y32 = step(f32, x32, g, function(m, v) return m(v) end)
    local y64 = step(ref, x64, g:double(), oracle)
    -- bfloat16 keeps 8 bits: ~0.4% per rounding, a few roundings deep
    assert.is_true(rel(y, y64) < 3e-2, "y: " .. rel(y, y64))
    assert.is_true(rel(y, y32) > 1e-4, "bfloat16 output equals float32's: autocast not applied")
    local got, want = state_of(net, x), state_of(ref, x64)
    for _, name in ipairs({ "dx", "dw", "dgamma", "dbeta", "running_mean", "running_var" }) do
      assert.is_true(rel(got[name], want[name]) < 5e-2, name .. ": " .. rel(got[name], want[name]))
    end
    end
  end)

  it("runs a bfloat16 block of at most 3 input channels in float32 on x and w rounded to bfloat16", function()
    -- core/cpu/conv_block_onednn.c's rounds_in_float32: oneDNN's bfloat16
    -- convolution is slower there, so the block rounds x and w (H.bf16's
    -- rounding, done here bit by bit) and runs in float32; everything
    -- after the rounding equals the float32 block on the rounded operands
    if cnn.autocast_info() ~= "onednn" then
      pending("no AVX512-BF16 here: bfloat16 autocast is emulated and the block declines it")
      return
    end
    local function rounded(t) return cnn.tensor(H.map(t:totable(), H.bf16)) end
    for _, case in ipairs({ { 1, 32, 28, 28 }, { 3, 16, 9, 11 } }) do -- the example network's first block; odd sizes
      cnn.manual_seed(5)
      local C, K, H_, W_ = table.unpack(case)
      local net = block(C, K)
      local f32, plain = twin(net, C, K), twin(net, C, K)
      cnn.no_grad(function() f32[1].weight:copy_(rounded(net[1].weight)) end)
      local x0 = cnn.randn(4, C, H_, W_)
      local x, xr = x0:clone():requires_grad_(), rounded(x0):requires_grad_()
      local y = cnn.autocast("bfloat16", function() return net(x) end)
      assert.are.equal(BLOCK, tostring(y.grad_fn))
      local g = cnn.randn(table.unpack(y.shape))
      y:backward(g)
      local yr = f32(xr)
      assert.are.equal(BLOCK, tostring(yr.grad_fn))
      yr:backward(g)
      assert.is_true(rel(y, yr) < 2e-5, "y vs float32 on rounded operands: " .. rel(y, yr))
      local got, want = state_of(net, x), state_of(f32, xr)
      for _, name in ipairs({ "dx", "dw", "dgamma", "dbeta", "running_mean", "running_var" }) do
        assert.is_true(rel(got[name], want[name]) < 2e-5, name .. ": " .. rel(got[name], want[name]))
      end
      -- the rounding is there: the float32 block on the operands as they are differs
      assert.is_true(rel(y, plain(x0)) > 1e-4, "bfloat16 output equals float32's: operands not rounded")
      -- x wanting no gradient: the weight gradient from batch norm's input
      -- gradient and the rounded x, against the run above (oneDNN's)
      local frozen = twin(net, C, K)
      local yf = cnn.autocast("bfloat16", function() return frozen(x0) end)
      yf:backward(g)
      for _, name in ipairs({ "dw", "dgamma", "dbeta" }) do
        local a, b = state_of(frozen, x0)[name], want[name]
        assert.is_true(rel(a, b) < 2e-5, "frozen input, " .. name .. ": " .. rel(a, b))
      end
    end
  end)

  it("is not used in eval mode, with hooks, for float64, groups, padding modes, ceil mode, a forced algorithm", function()
    local x = cnn.randn(2, 4, 8, 8)
    local function name_of(net, v) return tostring(net(v or x).grad_fn) end
    local net = block(4, 8)
    assert.are.equal(BLOCK, name_of(net))
    net:eval()
    local rm = net[2].running_mean:clone()
    assert.are_not.equal(BLOCK, name_of(net))
    H.assert_close(net[2].running_mean, rm, 0, 0, "eval keeps the running mean")
    net:train()
    for i = 1, 4 do
      local seen
      local h = net[i]:register_forward_hook(function(_, _, out) seen = out end)
      assert.are_not.equal(BLOCK, name_of(net), "hook on layer " .. i)
      assert.is_not_nil(seen, "the hook on layer " .. i .. " ran")
      h:remove()
    end
    assert.are.equal(BLOCK, name_of(net))
    assert.are_not.equal(BLOCK, name_of(twin(net, 4, 8, nil, "float64"), x:double()))
    assert.are_not.equal(BLOCK, name_of(block(4, 8, { conv = { padding = 1, groups = 2 } })))
    assert.are_not.equal(BLOCK, name_of(block(4, 8, { conv = { padding = 1, padding_mode = "reflect" } })))
    assert.are_not.equal(BLOCK, name_of(block(4, 8, { pool_opts = { ceil_mode = true } })))
    assert.are_not.equal(BLOCK, name_of(block(4, 8, { pool_opts = { padding = 1 } })))
    cnn.set_conv_algo("im2col")
    local ok, name = pcall(name_of, net)
    cnn.set_conv_algo("auto")
    assert(ok, name)
    assert.are_not.equal(BLOCK, name)
  end)

  it("keeps the layers' messages for bad input, naming the layer", function()
    local net = block(3, 8)
    H.raises(function() net(cnn.randn(2, 4, 8, 8)) end, "1 (Conv2d 3->8 3x3): conv2d: input 2x4x8x8 has 4 channels")
    H.raises(function() net(cnn.randn(2, 3, 8)) end, "1 (Conv2d")
  end)

  it("validates its own arguments", function()
    local x, w = cnn.randn(2, 3, 8, 8), cnn.randn(4, 3, 3, 3)
    local c, p = { 1, 1, 1, 1, 1, 1, 1, 1 }, { 2, 2, 2, 2 }
    local v4, v5 = cnn.zeros(4), cnn.zeros(5)
    local f = cnn.fused.conv_bn_relu_pool
    H.raises(function() f(x, w, nil, c, v5, v4, nil, nil, 0.1, 1e-5, p) end,
             "conv_bn_relu_pool: running_mean 5", "4 output channels")
    H.raises(function() f(x, w, nil, c, v4, v4, cnn.zeros(4, "float64"), nil, 0.1, 1e-5, p) end,
             "conv_bn_relu_pool: weight", "float64")
    H.raises(function() f(x, w, nil, { 1, 1 }, v4, v4, nil, nil, 0.1, 1e-5, p) end, "list of 8 integers")
    H.raises(function() f(x, w, nil, c, v4, v4, nil, nil, 1.5, 1e-5, p) end, "momentum must be in [0, 1]")
    H.raises(function() f(x, w, nil, c, v4, v4, nil, nil, 0.1, 0, p) end, "eps must be positive")
    H.raises(function() f(x, w, nil, c, v4, v4, nil, nil, 0.1, 1e-5, { 0, 2, 2, 2 }) end,
             "pool kernel 0x2")
    H.raises(function() f(x, cnn.randn(4, 2, 3, 3), nil, c, v4, v4, nil, nil, 0.1, 1e-5, p) end,
             "conv_bn_relu_pool")
    -- declined, not an error: float64 operands (the layers run them)
    assert.is_nil(f(x:double(), w:double(), nil, c, nil, nil, nil, nil, 0.1, 1e-5, p))
  end)

  it("refuses a backward after its input changed in place, or a second backward", function()
    local net = block(2, 4)
    local x = cnn.randn(2, 2, 8, 8):requires_grad_()
    local xin = x * 1
    local y = net(xin)
    assert.are.equal(BLOCK, tostring(y.grad_fn))
    cnn.no_grad(function() xin:add_(1) end)
    H.raises(function() y:sum():backward() end, "modified in place")
    y = net(x)
    y:sum():backward()
    H.raises(function() y:sum():backward() end, "second time")
  end)

  it("gives the same gradients when its cached plan was evicted between forward and backward", function()
    -- 20 shapes (the CPU keeps 16 plans): the first ones' backward rebuilds them
    local ys, xs, nets = {}, {}, {}
    for i = 1, 20 do
      nets[i] = block(2, 4)
      xs[i] = cnn.randn(2, 2, 6 + i, 6 + i):requires_grad_()
      ys[i] = nets[i](xs[i])
      assert.are.equal(BLOCK, tostring(ys[i].grad_fn))
    end
    for i = 1, 20 do ys[i]:sum():backward() end
    for _, i in ipairs({ 1, 20 }) do
      local plain = twin(nets[i], 2, 4)
      local xp = xs[i]:detach():clone():requires_grad_()
      unfused(plain, xp):sum():backward()
      assert.is_true(rel(xs[i].grad, xp.grad) < 2e-5, "dx, shape " .. i .. ": " .. rel(xs[i].grad, xp.grad))
      assert.is_true(rel(nets[i][1].weight.grad, plain[1].weight.grad) < 2e-5, "dw, shape " .. i)
    end
  end)

  it("moves the running statistics without grad mode, and records nothing", function()
    local net = block(2, 4)
    local y = cnn.no_grad(function() return net(cnn.randn(2, 2, 8, 8) + 3) end)
    assert.is_nil(y.grad_fn)
    assert.is_true(net[2].running_mean:min():item() ~= 0)
    assert.are.equal(1, net[2].num_batches_tracked:item())
  end)
end)
