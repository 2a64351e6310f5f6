-- autocast_spec.lua -- cnn.autocast on the CPU (bfloat16: oneDNN's kernels
-- or emulated, cnn.autocast_info()): the products and convolutions against
-- naive Lua loops over operands rounded to bfloat16 here (bit arithmetic,
-- independent of the tensor casts), the gradients' arithmetic and dtype,
-- which ops stay float32, the mode's scope (function, <close> guard,
-- errors, nesting), refusals, and a small network that learns under
-- autocast with a GradScaler.  autocast_bf16_spec.lua checks every
-- gradient of conv2d and the products in depth.
package.path = "./?.lua;" .. package.path
local H = require("helpers")

local bf16, map, conv_ref = H.bf16, H.map, H.conv2d_ref

local transpose = H.transpose

local max_diff = H.max_diff

describe("cnn.autocast('bfloat16') on the CPU", function()
  it("runs conv2d on bfloat16-rounded operands with float32 accumulation", function()
    cnn.manual_seed(3)
    local x, w, b = cnn.randn(2, 3, 6, 6), cnn.randn(4, 3, 3, 3), cnn.randn(4)
    local y = cnn.autocast("bfloat16", function() return F.conv2d(x, w, b, { padding = 1 }) end)
    assert.equal("float32", y.dtype)
    local xt, wt, bt = x:totable(), w:totable(), b:totable()
    -- the bias is added in float32 (as linear's)
    local rounded = conv_ref(map(xt, bf16), map(wt, bf16), bt, 1)
    H.assert_close(y, rounded, 1e-5, 1e-5, "conv2d vs rounded reference")
    -- and the rounding mattered: the float32 result is measurably different
    assert.is_true(max_diff(conv_ref(xt, wt, bt, 1), rounded) > 1e-3)
    H.assert_close(F.conv2d(x, w, b, { padding = 1 }), conv_ref(xt, wt, bt, 1), 1e-4, 1e-5,
                   "outside autocast conv2d is float32 again")
  end)

  it("runs matmul and linear on rounded operands", function()
    cnn.manual_seed(4)
    local a, bm = cnn.randn(5, 7), cnn.randn(7, 3)
    local ra, rb = map(a:totable(), bf16), map(bm:totable(), bf16)
    cnn.autocast("bfloat16", function()
      H.assert_close(a:matmul(bm), H.matmul(ra, rb), 1e-5, 1e-5, "matmul")
      H.assert_close(cnn.mm(a, bm), H.matmul(ra, rb), 1e-5, 1e-5, "mm")
      local lin = F.linear(a, bm:t())            -- x w^T with w = bm^T
      H.assert_close(lin, H.matmul(ra, rb), 1e-5, 1e-5, "linear")
      assert.equal("float32", lin.dtype)
      -- with a bias: the product is rounded, the bias is added in float32
      local bias = cnn.tensor({ 1 + 2 ^ -20, -3 + 2 ^ -19, 0.1 })
      local expected = H.matmul(ra, rb)
      for i = 1, #expected do
        for j = 1, 3 do expected[i][j] = expected[i][j] + bias[j]:item() end
      end
      H.assert_close(F.linear(a, bm:t(), bias), expected, 1e-5, 1e-6, "linear with bias")
    end)
    assert.is_true(max_diff(H.matmul(a:totable(), bm:totable()), H.matmul(ra, rb)) > 1e-3)
  end)

  it("gives float32 leaves float32 gradients, from the same bfloat16 arithmetic", function()
    cnn.manual_seed(5)
    local x = cnn.randn(4, 6):requires_grad_()
    local w = cnn.randn(6, 3):requires_grad_()
    local r = cnn.randn(4, 3)
    -- backward inside autocast too: backward ops run in the forward's arithmetic
    cnn.autocast("bfloat16", function() (x:matmul(w) * r):sum():backward() end)
    assert.equal("float32", w.grad.dtype)
    assert.equal("float32", x.grad.dtype)
    -- dW = x_r^T r_r, dX = r_r w_r^T: the backward products round their
    -- operands, the output gradient r included, and sum in float32 (6 or 3
    -- exact products: float32 summation error < 1e-5)
    local xr, wr, rr = map(x:totable(), bf16), map(w:totable(), bf16), map(r:totable(), bf16)
    H.assert_close(w.grad, H.matmul(transpose(xr), rr), 1e-5, 1e-5, "dW")
    H.assert_close(x.grad, H.matmul(rr, transpose(wr)), 1e-5, 1e-5, "dX")
  end)

  it("leaves every other op, and non-float32 operands, alone", function()
    local v = 1 + 2 ^ -20                       -- not representable in bfloat16
    local t = cnn.tensor({ v, -v })
    cnn.autocast("bfloat16", function()
      H.assert_close((t:relu() + t):totable(), { 2 * v, -v }, 0, 0, "elementwise stays float32")
      local d = cnn.tensor({ { v } }, "float64")
      local p = d:matmul(d)
      assert.equal("float64", p.dtype)
      assert.equal(v * v, p:item())                -- float64 product, no rounding
    end)
  end)

  it("is scoped: function form, <close> guard, nesting, errors", function()
    assert.is_false((cnn.is_autocast_enabled()))
    local on, dt = cnn.autocast("bfloat16", function() return cnn.is_autocast_enabled() end)
    assert.is_true(on)
    local _, name = cnn.autocast("bf16", function() return cnn.is_autocast_enabled() end)
    assert.equal("bfloat16", name)
    assert.is_false((cnn.is_autocast_enabled()))
    do
      local guard <close> = cnn.autocast("bfloat16")
      assert.is_true((cnn.is_autocast_enabled()))
      assert.is_false((cnn.autocast(false, function() return cnn.is_autocast_enabled() end)))
      assert.is_true((cnn.is_autocast_enabled()))
    end
    assert.is_false((cnn.is_autocast_enabled()))
    H.raises(function() cnn.autocast("bfloat16", function() error("boom") end) end, "boom")
    assert.is_false((cnn.is_autocast_enabled()))
    local a = cnn.ones(2, 2)
    local p = cnn.autocast("bfloat16", function() return a:matmul(a) end)
    H.assert_close(p, { { 2, 2 }, { 2, 2 } }, 0, 0)
    assert.equal("bfloat16", dt)
  end)

  it("refuses float16 on the CPU and unknown dtypes", function()
    local cuda_ok = cnn.cuda.is_available()
    if not cuda_ok then
      H.raises(function() cnn.autocast("float16", function() end) end,
               "autocast: float16 needs a CUDA device", "on the CPU use bfloat16")
    end
    H.raises(function() cnn.autocast("int64", function() end) end,
             "autocast: dtype int64 is not supported")
    H.raises(function() cnn.autocast("float32x", function() end) end, "float32x")
    H.raises(function() F.conv2d(cnn.randn(1, 1, 3, 3):to("bfloat16"), cnn.randn(1, 1, 2, 2):to("bfloat16")) end,
             "conv2d: bfloat16 convolutions run on a CUDA device only")
    H.raises(function() cnn.ones(2, 2):to("bfloat16"):matmul(cnn.ones(2, 2):to("bfloat16")) end,
             "matmul: bfloat16 not supported")
    assert.is_false((cnn.is_autocast_enabled()))
  end)

  it("trains a small network with a GradScaler", function()
    local first, last, net = H.autocast_training("bfloat16", "cpu", 40, 256)
    for _, p in ipairs(net:parameters()) do assert.equal("float32", p.dtype) end
    assert.is_true(last < 0.2 * first, ("loss %g -> %g"):format(first, last))
  end)
end)
