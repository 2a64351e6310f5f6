-- channels_last_spec.lua -- 4-d tensors in the channels-last layout
-- (x:contiguous('channels_last'), PyTorch's torch.channels_last;
-- core/memory_format.c) and the ops that run it natively: convolution
-- (oneDNN's nhwc kernels, or NCHW copies on the other paths), batch norm
-- (float32 rows, core/cpu/batch_norm_rows.c), elementwise ops (outputs
-- follow the layout, loops in the output's memory order), the global
-- average pool.  Every result is compared with a float64 oracle computed on
-- NCHW tensors by other code (the naive convolution loop, batch norm's
-- formula in tensor ops, a mean), and every other op must read a
-- channels-last input as it reads a contiguous one.
local H = require("helpers")

local function is_cl(t) return t:is_contiguous("channels_last") and not t:is_contiguous() end

local function f64(t) return t:detach():to("float64") end

-- max |a - b| / (1 + max |b|)
local function rel(a, b)
  return (f64(a) - f64(b)):abs():max():item() / (1 + f64(b):abs():max():item())
end

local with_algo = H.with_conv_algo

describe("the channels-last layout", function()
  it("keeps the shape, sets PyTorch's strides and tells the two layouts apart", function()
    local x = cnn.randn(2, 3, 4, 5)
    local c = x:contiguous("channels_last")
    assert.same({ 2, 3, 4, 5 }, c.shape)
    assert.same({ 60, 1, 15, 3 }, c:stride())
    assert.is_true(c:is_contiguous("channels_last"))
    assert.is_true(c:is_contiguous({ memory_format = "channels_last" }))
    assert.is_false(c:is_contiguous())
    assert.is_false(x:is_contiguous("channels_last"))
    assert.equal(0, (c - x):abs():max():item())
    -- back to NCHW, and to() with memory_format
    local back = c:contiguous()
    assert.is_true(back:is_contiguous())
    assert.equal(0, (back - x):abs():max():item())
    local d = x:to({ dtype = "float64", memory_format = "channels_last" })
    assert.equal("float64", d.dtype)
    assert.is_true(is_cl(d))
    assert.is_true(c:to({ memory_format = "contiguous_format" }):is_contiguous())
    -- a dtype conversion keeps the layout (preserve_format), and the values
    local c64 = c:double()
    assert.is_true(is_cl(c64))
    assert.is_true(is_cl(c:to("float64")))
    assert.equal(0, (c64 - x:double()):abs():max():item())
    assert.equal(0, (c64:float() - x):abs():max():item())
    assert.is_true(is_cl(c:to({ memory_format = "preserve_format" })))
    -- C = 1 or H = W = 1: both layouts at once
    assert.is_true(cnn.randn(2, 1, 3, 3):is_contiguous("channels_last"))
    assert.is_true(cnn.randn(2, 5, 1, 1):is_contiguous("channels_last"))
  end)

  it("converts between the layouts element for element (tiled transposes, both dtypes)", function()
    for _, dt in ipairs({ "float32", "float64" }) do
      local x = cnn.randn(3, 17, 9, 11):to(dt)
      local ref = x:totable() -- nested N, C, H, W
      local c = x:contiguous("channels_last")
      local nhwc = x:permute(1, 3, 4, 2):contiguous() -- the NHWC array itself
      local back = c:contiguous()
      local t_c, t_nhwc, t_back = c:totable(), nhwc:totable(), back:totable()
      for n = 1, 3 do
        for ch = 1, 17 do
          for h = 1, 9 do
            for w = 1, 11 do
              local v = ref[n][ch][h][w]
              assert(t_c[n][ch][h][w] == v and t_back[n][ch][h][w] == v and t_nhwc[n][h][w][ch] == v,
                     ("%s element %d,%d,%d,%d"):format(dt, n, ch, h, w))
            end
          end
        end
      end
      -- copy_ into a channels-last tensor, and out of one
      local dst = cnn.zeros(3, 17, 9, 11):to(dt):contiguous("channels_last")
      cnn.no_grad(function() dst:copy_(x) end)
      assert.equal(0, (dst - x):abs():max():item())
      assert.is_true(is_cl(dst))
    end
  end)

  it("refuses what it does not know, naming the op", function()
    local x = cnn.randn(2, 3, 4, 5)
    H.raises(function() x:contiguous("nhwc") end, "contiguous", "unknown memory_format 'nhwc'")
    H.raises(function() x:contiguous({ format = "channels_last" }) end, "contiguous",
             "unknown option 'format'")
    H.raises(function() x:is_contiguous("preserve_format") end, "is_contiguous", "preserve_format")
    H.raises(function() cnn.randn(3, 4):clone("channels_last") end, "channels_last", "4-d")
    H.raises(function() x:clone({ memory_format = "nhwc" }) end, "clone", "unknown memory_format")
    H.raises(function() cnn.randn(3, 4):contiguous("channels_last") end, "channels_last",
             "4-d", "3x4")
    H.raises(function() x:to({ memory_format = "nchw" }) end, "to", "unknown memory_format")
    H.raises(function() x:to({ dtyp = "float64" }) end, "to", "unknown option 'dtyp'")
    H.raises(function() nn.Conv2d(3, 4, 3):to({ memory_format = "channels_last" }) end,
             "Module:to", "memory_format", "x:contiguous('channels_last')")
  end)

  it("gradients flow through the conversion", function()
    local x = cnn.randn(2, 3, 4, 5, { requires_grad = true })
    local g = cnn.randn(2, 3, 4, 5)
    x:contiguous("channels_last"):backward(g)
    assert.equal(0, (x.grad - g):abs():max():item())
  end)
end)

describe("elementwise ops on channels-last tensors", function()
  it("write channels-last outputs with the contiguous ops' values", function()
    local a, b = cnn.randn(3, 8, 5, 6), cnn.randn(3, 8, 5, 6)
    local ac, bc = a:contiguous("channels_last"), b:contiguous("channels_last")
    local bias = cnn.randn(1, 8, 1, 1)
    local cases = {
      { "add", ac + bc, a + b },
      { "mixed layouts", ac * b, a * b },
      { "broadcast", ac + bias, a + bias },
      { "relu", ac:relu(), a:relu() },
      { "sigmoid", ac:sigmoid(), a:sigmoid() },
      { "where", cnn.where(ac:gt(0), ac, bc), cnn.where(a:gt(0), a, b) },
    }
    for _, c in ipairs(cases) do
      assert(is_cl(c[2]), c[1] .. ": output not channels-last")
      assert.equal(0, (c[2] - c[3]):abs():max():item(), c[1])
    end
    -- in place on a channels-last tensor, from either layout
    local t = ac:clone()
    assert.is_true(is_cl(t))
    assert.is_true(ac:clone("contiguous_format"):is_contiguous())
    assert.is_true(is_cl(a:clone({ memory_format = "channels_last" })))
    t:add_(b)
    assert.equal(0, (t - (a + b)):abs():max():item())
    assert.is_true(is_cl(t))
    -- a transposed (neither layout) output in place
    local m = cnn.zeros(4, 3)
    local mt = m:t()
    mt:add_(cnn.tensor({ { 0, 1, 2, 3 }, { 4, 5, 6, 7 }, { 8, 9, 10, 11 } }))
    assert.same({ { 0, 4, 8 }, { 1, 5, 9 }, { 2, 6, 10 }, { 3, 7, 11 } }, m:totable())
  end)

  it("backward of a relu and a sum keeps the layout and the values", function()
    local x = cnn.randn(2, 8, 3, 4, { requires_grad = true })
    local xc = x:contiguous("channels_last")
    xc:retain_grad()
    local y = (xc + xc):relu()
    local g = cnn.randn(2, 8, 3, 4):contiguous("channels_last")
    y:backward(g)
    local expected = cnn.where(x:detach():gt(0), g * 2, cnn.zeros(2, 8, 3, 4))
    assert.is_true(is_cl(xc.grad))
    assert.equal(0, (x.grad - expected):abs():max():item())
  end)
end)

-- conv2d(x, w, b) in float64 with the naive loop, on NCHW tensors
local function conv_oracle(x, w, b, opts)
  local out
  with_algo("naive", function() out = F.conv2d(f64(x):contiguous(), f64(w), b and f64(b), opts) end)
  return out
end

describe("conv2d on a channels-last input", function()
  local shapes = {
    { C = 3, K = 16, H = 12, opts = { padding = 1 } },
    { C = 16, K = 32, H = 9, opts = { stride = 2, padding = 1 } },
    { C = 16, K = 32, H = 8, k = 1, opts = { stride = 2 } },
    { C = 32, K = 32, H = 8, opts = { padding = 1 } }, -- Winograd's shapes under 'auto'
    { C = 6, K = 4, H = 7, opts = { padding = 2, dilation = 2, groups = 2 } },
    { C = 5, K = 7, H = 6, k = 2, opts = { padding = { 1, 0 } }, nobias = true },
  }
  for _, algo in ipairs({ "auto", "onednn", "im2col", "naive" }) do
    it("matches the naive float64 loop, output and gradients channels-last (" .. algo .. ")", function()
      with_algo(algo, function()
        for _, s in ipairs(shapes) do
          local k, groups = s.k or 3, s.opts.groups or 1
          local x = cnn.randn(3, s.C, s.H, s.H + 1):contiguous("channels_last")
          x.requires_grad = true
          local w = cnn.randn(s.K, s.C // groups, k, k, { requires_grad = true })
          local b = not s.nobias and cnn.randn(s.K, { requires_grad = true }) or nil
          local y = F.conv2d(x, w, b, s.opts)
          local what = ("%s C=%d K=%d"):format(algo, s.C, s.K)
          assert(is_cl(y), what .. ": output not channels-last")
          -- the oracle and its gradients (float64, naive, NCHW)
          local x64 = f64(x):contiguous()
          x64.requires_grad = true
          local w64, b64 = f64(w), b and f64(b)
          w64.requires_grad = true
          if b64 then b64.requires_grad = true end
          local y64
          with_algo("naive", function() y64 = F.conv2d(x64, w64, b64, s.opts) end)
          assert(rel(y, y64) < 1e-5, what .. (": y off by %g"):format(rel(y, y64)))
          local g = cnn.randn(table.unpack(y.shape))
          y:backward(g:contiguous("channels_last"))
          with_algo("naive", function() y64:backward(f64(g)) end)
          assert(rel(x.grad, x64.grad) < 1e-5, what .. ": dx")
          assert(rel(w.grad, w64.grad) < 1e-5, what .. ": dw")
          if b then assert(rel(b.grad, b64.grad) < 1e-5, what .. ": db") end
        end
      end)
    end)
  end

  it("runs in float64 and under bfloat16 autocast with the NCHW path's values", function()
    local x = cnn.randn(2, 8, 6, 6)
    local w = cnn.randn(16, 8, 3, 3)
    local y = F.conv2d(x:to("float64"):contiguous("channels_last"), w:to("float64"), nil, { padding = 1 })
    assert.is_true(is_cl(y))
    assert(rel(y, conv_oracle(x, w, nil, { padding = 1 })) < 1e-12)
    local ya = cnn.autocast("bfloat16", function() return F.conv2d(x, w, nil, { padding = 1 }) end)
    local yb = cnn.autocast("bfloat16", function()
      return F.conv2d(x:contiguous("channels_last"), w, nil, { padding = 1 })
    end)
    assert(rel(yb, ya) < 1e-6, ("bf16: %g"):format(rel(yb, ya)))
  end)

  it("net:fuse()'s convolution + activation takes it too", function()
    local net = nn.Sequential(nn.Conv2d(4, 8, 3, { padding = 1 }), nn.ReLU()):eval()
    local x = cnn.randn(2, 4, 5, 5)
    local expected = cnn.no_grad(function() return net(x) end)
    net:fuse()
    local y = cnn.no_grad(function() return net(x:contiguous("channels_last")) end)
    assert.is_true(is_cl(y))
    assert(rel(y, expected) < 1e-6, ("off by %g"):format(rel(y, expected)))
  end)
end)

-- batch norm's formula in float64 tensor ops over an NCHW x (training:
-- batch statistics; eval: the given ones)
local function bn_oracle(x, gamma, beta, mean, var, eps)
  local x64 = f64(x):contiguous()
  local C = x64.shape[2]
  if not mean then
    mean = x64:mean({ 1, 3, 4 }, true)
    var = ((x64 - mean) ^ 2):mean({ 1, 3, 4 }, true)
  else
    mean, var = f64(mean):view(1, C, 1, 1), f64(var):view(1, C, 1, 1)
  end
  return (x64 - mean) / (var + eps):sqrt() * f64(gamma):view(1, C, 1, 1) + f64(beta):view(1, C, 1, 1)
end

describe("batch norm on a channels-last input", function()
  for _, C in ipairs({ 16, 24, 5 }) do -- chunks of 32 channels, a short chunk, no vectors
    it(("matches its float64 formula, training and eval, with and without relu (C=%d)"):format(C), function()
      for _, relu in ipairs({ false, true }) do
        for _, training in ipairs({ true, false }) do
          local bn = nn.BatchNorm2d(C)
          cnn.no_grad(function()
            bn.weight:copy_(cnn.randn(C))
            bn.bias:copy_(cnn.randn(C))
            bn.running_mean:copy_(cnn.randn(C))
            bn.running_var:copy_(cnn.rand(C) + 0.5)
          end)
          if not training then bn:eval() end
          local x = (cnn.randn(6, C, 9, 7) * 3 + 40):contiguous("channels_last") -- |mean| >> std
          x.requires_grad = true
          local rm0, rv0 = bn.running_mean:clone(), bn.running_var:clone()
          local y = relu and bn:forward_relu(x) or bn(x)
          local what = ("C=%d relu=%s training=%s"):format(C, tostring(relu), tostring(training))
          assert(is_cl(y), what .. ": y not channels-last")
          local ref = bn_oracle(x, bn.weight, bn.bias, not training and rm0, not training and rv0, bn.eps)
          if relu then ref = ref:relu() end
          assert(rel(y, ref) < 1e-5, what .. (": y off by %g"):format(rel(y, ref)))
          if training then -- running statistics (unbiased variance)
            local x64 = f64(x):contiguous()
            local m = x64:mean({ 1, 3, 4 })
            local M = 6 * 9 * 7
            local v = ((x64 - m:view(1, C, 1, 1)) ^ 2):sum({ 1, 3, 4 }) / (M - 1)
            assert(rel(bn.running_mean, f64(rm0) * 0.9 + m * 0.1) < 1e-5, what .. ": running_mean")
            assert(rel(bn.running_var, f64(rv0) * 0.9 + v * 0.1) < 1e-5, what .. ": running_var")
          end
          -- gradients against the float64 NCHW path (batch_norm.c's channel loops)
          local g = cnn.randn(6, C, 9, 7)
          y:backward(g:contiguous("channels_last"))
          local b64 = nn.BatchNorm2d(C):to("float64")
          cnn.no_grad(function()
            b64.weight:copy_(bn.weight); b64.bias:copy_(bn.bias)
            b64.running_mean:copy_(rm0); b64.running_var:copy_(rv0)
          end)
          if not training then b64:eval() end
          local x64 = f64(x):contiguous()
          x64.requires_grad = true
          local y64 = b64(x64)
          if relu then y64 = y64:relu() end
          y64:backward(f64(g))
          assert(rel(x.grad, x64.grad) < 1e-4, what .. (": dx off by %g"):format(rel(x.grad, x64.grad)))
          assert(rel(bn.weight.grad, b64.weight.grad) < 1e-5, what .. ": dgamma")
          assert(rel(bn.bias.grad, b64.bias.grad) < 1e-5, what .. ": dbeta")
        end
      end
    end)
  end

  it("BatchNorm1d's N x C input runs the same rows", function()
    local bn = nn.BatchNorm1d(40)
    local x = cnn.randn(300, 40, { requires_grad = true })
    local y = bn(x)
    local x64 = f64(x)
    local m = x64:mean(1, true)
    local ref = (x64 - m) / (((x64 - m) ^ 2):mean(1, true) + bn.eps):sqrt()
    assert(rel(y, ref) < 1e-5)
    local g = cnn.randn(300, 40)
    y:backward(g)
    local b64 = nn.BatchNorm1d(40):to("float64")
    local xx = f64(x)
    xx.requires_grad = true
    b64(xx):backward(f64(g))
    assert(rel(x.grad, xx.grad) < 1e-4)
  end)
end)

describe("the global average pool on a channels-last input", function()
  it("is the mean over H and W, its gradient channels-last", function()
    for _, dt in ipairs({ "float32", "float64" }) do
      local x = cnn.randn(5, 24, 7, 6):to(dt):contiguous("channels_last")
      x.requires_grad = true
      local y = F.adaptive_avg_pool2d(x, { 1, 1 })
      H.assert_shape(y, { 5, 24, 1, 1 })
      assert(rel(y, f64(x):mean({ 3, 4 }, true)) < 1e-6, dt)
      local g = cnn.randn(5, 24, 1, 1):to(dt)
      y:backward(g)
      assert(is_cl(x.grad), dt .. ": dx not channels-last")
      assert(rel(x.grad, f64(g):expand(5, 24, 7, 6) / 42) < 1e-7, dt .. ": dx")
    end
  end)
end)

describe("max pooling on a channels-last input", function()
  it("gives the NCHW pool's values, gradients and NaN rule, channels-last", function()
    local cases = {
      { k = 2, o = {} },
      { k = 3, o = { stride = 2, padding = 1 } },
      { k = 3, o = { stride = 2, ceil_mode = true } },
      { k = 2, o = { dilation = 2, padding = 1 } },
      { k = { 3, 2 }, o = { stride = { 1, 2 } } },
    }
    for _, dt in ipairs({ "float32", "float64" }) do
      for i, c in ipairs(cases) do
        local x = cnn.randn(3, 19, 9, 8):to(dt)
        -- ties and NaNs: the first maximum, and the NaN wins
        cnn.no_grad(function()
          x[{ 1, 1, 1, 1 }] = 5; x[{ 1, 1, 1, 2 }] = 5
          x[{ 2, 3, 4, 4 }] = 0 / 0
        end)
        x.requires_grad = true
        local y1 = F.max_pool2d(x, c.k, c.o)
        local xc = x:contiguous("channels_last")
        local y2 = F.max_pool2d(xc, c.k, c.o)
        local what = ("%s case %d"):format(dt, i)
        assert(is_cl(y2), what .. ": not channels-last")
        H.assert_close(y2, y1, 0, 0, what)
        local g = cnn.randn(table.unpack(y1.shape)):to(dt)
        xc:retain_grad()
        y1:backward(g)
        local gx1 = x.grad:clone()
        x.grad = nil
        y2:backward(g:contiguous("channels_last"))
        assert(is_cl(xc.grad), what .. ": dx not channels-last")
        H.assert_close(x.grad, gx1, 0, 0, what .. ": dx")
      end
    end
  end)

  it("hands out NCHW indices when asked for them", function()
    local x = cnn.randn(2, 5, 6, 6)
    local _, i1 = F.max_pool2d(x, 2, { return_indices = true })
    local y2, i2 = F.max_pool2d(x:contiguous("channels_last"), 2, { return_indices = true })
    assert.is_true(i2:is_contiguous())
    assert.same(i1:totable(), i2:totable())
    assert.is_true(y2:is_contiguous())
  end)
end)

describe("other ops read channels-last inputs as contiguous ones", function()
  it("pools, softmax, reductions, joins, resizes, transposed convolutions, views", function()
    local x = cnn.randn(2, 6, 8, 10)
    local c = x:contiguous("channels_last")
    local w = cnn.randn(6, 3, 3, 3)
    local ops = {
      avg_pool = function(t) return F.avg_pool2d(t, 3, { stride = 2, padding = 1 }) end,
      adaptive_2x3 = function(t) return F.adaptive_avg_pool2d(t, { 2, 3 }) end,
      softmax = function(t) return F.softmax(t, 2) end,
      sum = function(t) return t:sum({ 2, 4 }) end,
      cat = function(t) return cnn.cat({ t, t * 2 }, 3) end,
      interpolate = function(t) return F.interpolate(t, { scale_factor = 2, mode = "bilinear" }) end,
      conv_transpose = function(t) return F.conv_transpose2d(t, w, nil, { stride = 2 }) end,
      flatten = function(t) return t:flatten(2) end,
      narrow = function(t) return t:narrow(3, 2, 4):contiguous() end,
    }
    for name, op in pairs(ops) do
      local got, expected = op(c), op(x)
      H.assert_shape(got, expected.shape)
      assert(rel(got, expected) < 1e-6, name .. (": off by %g"):format(rel(got, expected)))
    end
  end)

  it("the fused training block (Conv2d, BatchNorm2d, ReLU, MaxPool2d) matches its NCHW run", function()
    cnn.manual_seed(3)
    local net = nn.Sequential(nn.Conv2d(3, 8, 3, { padding = 1 }), nn.BatchNorm2d(8), nn.ReLU(),
                              nn.MaxPool2d(2))
    local twin = nn.Sequential(nn.Conv2d(3, 8, 3, { padding = 1 }), nn.BatchNorm2d(8), nn.ReLU(),
                               nn.MaxPool2d(2))
    twin:load_state_dict(net:state_dict())
    local x = cnn.randn(4, 3, 10, 10)
    local y1, y2 = net(x), twin(x:contiguous("channels_last"))
    assert(rel(y2, y1) < 1e-5)
    local g = cnn.randn(table.unpack(y1.shape))
    y1:backward(g)
    y2:backward(g)
    assert(rel(twin[1].weight.grad, net[1].weight.grad) < 1e-4)
  end)
end)

describe("ResNet-20 fed a channels-last batch", function()
  it("stays channels-last and trains as the NCHW run does", function()
    cnn.manual_seed(7)
    local a = models.resnet20({ num_classes = 10 })
    local b = models.resnet20({ num_classes = 10 })
    b:load_state_dict(a:state_dict())
    local x = cnn.randn(8, 3, 16, 16)
    local labels = cnn.randint(1, 10, { 8 })
    -- the layout inside: the first block's output
    local inner
    local h = b.layer1:register_forward_hook(function(_, _, out) inner = out end)
    local la = F.cross_entropy(a(x), labels)
    local lb = F.cross_entropy(b(x:contiguous("channels_last")), labels)
    h:remove()
    assert.is_true(is_cl(inner))
    assert(math.abs(la:item() - lb:item()) < 1e-5 * (1 + math.abs(la:item())))
    la:backward()
    lb:backward()
    local pb = {}
    for name, p in b:named_parameters() do pb[name] = p end
    for name, p in a:named_parameters() do
      assert(rel(pb[name].grad, p.grad) < 1e-3, name .. (": grad off by %g"):format(rel(pb[name].grad, p.grad)))
    end
    local sa, sb = a:state_dict(), b:state_dict()
    for name, t in pairs(sa) do
      if t.dtype == "float32" then assert(rel(sb[name], t) < 1e-5, name) end
    end
  end)
  it("trains under bfloat16 autocast as the NCHW run does", function()
    cnn.manual_seed(11)
    local a = models.resnet20({ num_classes = 10 })
    local b = models.resnet20({ num_classes = 10 })
    local ref = models.resnet20({ num_classes = 10 })
    b:load_state_dict(a:state_dict())
    ref:load_state_dict(a:state_dict())
    local x, labels = cnn.randn(8, 3, 16, 16), cnn.randint(1, 10, { 8 })
    local function loss(net, inp)
      return cnn.autocast("bfloat16", function() return F.cross_entropy(net(inp), labels) end)
    end
    local la, lb = loss(a, x), loss(b, x:contiguous("channels_last"))
    -- The two runs agree to bfloat16's precision, not float32's: where the
    -- float32 sums before a rounding are ordered differently (oneDNN's AVX2
    -- kernels emulate bf16; the NCHW and NHWC ones sum in different orders),
    -- a value at a rounding boundary lands one bf16 step (2^-8) apart, and
    -- 20 layers carry that on.  Seen on an AVX2 Zen 3: logits 3e-3 apart,
    -- the loss 1.1e-4, conv1's weight gradient 4-6e-2 -- as far as either
    -- run is from float32; bit-close on a Xeon with native bf16.  So each
    -- run is held to the float32 run: the channels-last one no farther
    -- from it than the NCHW one (a layout mix-up moves things by their
    -- own size).
    local za, zb
    cnn.autocast("bfloat16", function() za, zb = a(x), b(x:contiguous("channels_last")) end)
    assert(rel(zb, za) < 2e-2, ("logits off by %g"):format(rel(zb, za)))
    assert(math.abs(la:item() - lb:item()) < 2e-3 * (1 + math.abs(la:item())),
           ("loss %.6f vs %.6f"):format(la:item(), lb:item()))
    F.cross_entropy(ref(x), labels):backward()
    la:backward()
    lb:backward()
    for _, name in ipairs({ "fc", "conv1" }) do
      local want = ref[name].weight.grad
      local err_nchw, err_cl = rel(a[name].weight.grad, want), rel(b[name].weight.grad, want)
      assert(err_nchw < 0.2, ("%s: the NCHW bf16 run is %g from float32"):format(name, err_nchw))
      assert(err_cl <= 2 * err_nchw + 2e-3,
             ("%s: channels-last %g from float32, NCHW %g"):format(name, err_cl, err_nchw))
    end
  end)
end)
