-- conv1d_padding_spec.lua -- issue 13 point 2 from Lua: F.conv1d/nn.Conv1d,
-- the 1-d pools, padding = 'same'/'valid', padding_mode for the conv
-- layers and F.pad's modes.  Values are worked out by hand or by a loop
-- written here (never the path under test); gradients by finite
-- differences (helpers.gradcheck, float64).
package.path = "./?.lua;" .. package.path
local H = require("helpers")

-- finite differences of sum(f(...) * r) for a fixed random r
local function gradcheck(f, inputs)
  local r
  H.gradcheck(function(...)
    local y = f(...)
    if not r then
      local s = H.flat(y.shape)
      s[#s + 1] = y.dtype
      r = cnn.randn(table.unpack(s))
    end
    return (y * r):sum()
  end, inputs)
end

local function seq(t, dtype) return cnn.tensor({ { t } }, dtype) end -- 1 x 1 x L

local function close(got, want, tol)
  local g = H.flat(got)
  assert.are.equal(#want, #g)
  for i = 1, #want do
    assert(math.abs(g[i] - want[i]) <= (tol or 1e-6), ("element %d: got %g, want %g"):format(i, g[i], want[i]))
  end
end

-- y[n, k, i] = b[k] + sum_c sum_j x[n, c, i*s - p + j*d] w[k, c, j] (zeros outside), groups 1
local function conv1d_loop(x, w, b, s, p, d)
  local N, C, L = x:size(1), x:size(2), x:size(3)
  local K, k = w:size(1), w:size(3)
  local OL = (L + 2 * p - d * (k - 1) - 1) // s + 1
  local out = {}
  for n = 1, N do
    for o = 1, K do
      for i = 0, OL - 1 do
        local acc = b and b[o]:item() or 0
        for c = 1, C do
          for j = 0, k - 1 do
            local pos = i * s - p + j * d
            if pos >= 0 and pos < L then acc = acc + x[n][c][pos + 1]:item() * w[o][c][j + 1]:item() end
          end
        end
        out[#out + 1] = acc
      end
    end
  end
  return out, OL
end

describe("F.conv1d", function()
  it("matches a loop from the definition (stride, padding, dilation, bias)", function()
    local x, w, b = cnn.randn(2, 3, 11, "float64"), cnn.randn(4, 3, 3, "float64"), cnn.randn(4, "float64")
    local want, OL = conv1d_loop(x, w, b, 2, 1, 2)
    local y = F.conv1d(x, w, b, { stride = 2, padding = 1, dilation = 2 })
    assert.are.same({ 2, 4, OL }, H.flat(y.shape))
    close(y, want, 1e-12)
  end)

  it("has gradients for x, w and b (finite differences)", function()
    local x, w, b = cnn.randn(2, 4, 7, "float64"), cnn.randn(6, 2, 3, "float64"), cnn.randn(6, "float64")
    gradcheck(function(a, c, d) return F.conv1d(a, c, d, { groups = 2, padding = 2, stride = 2 }) end, { x, w, b })
  end)

  it("padding 'same' keeps L (odd element to the right) and 'valid' is none", function()
    -- k = 2: total padding 1 -> 0 left, 1 right: y[i] = x[i] + 10 x[i+1]
    local y = F.conv1d(seq({ 1, 2, 3, 4, 5 }), cnn.tensor({ { { 1, 10 } } }), nil, { padding = "same" })
    close(y, { 21, 32, 43, 54, 5 })
    local v = F.conv1d(seq({ 1, 2, 3, 4, 5 }), cnn.tensor({ { { 1, 10 } } }), nil, { padding = "valid" })
    close(v, { 21, 32, 43, 54 })
    -- k = 3, dilation 2: total 4 -> 2 and 2
    assert.are.same({ 1, 1, 6 }, H.flat(F.conv1d(cnn.randn(1, 1, 6), cnn.randn(1, 1, 3), nil,
                                                  { padding = "same", dilation = 2 }).shape))
  end)
end)

describe("F.conv2d padding strings", function()
  it("'same' pads kH-1 and kW-1 with the odd pixel at the bottom/right", function()
    local x, w = cnn.randn(2, 3, 6, 5, "float64"), cnn.randn(4, 3, 4, 3, "float64")
    local y = F.conv2d(x, w, nil, { padding = "same" })
    assert.are.same({ 2, 4, 6, 5 }, H.flat(y.shape))
    local ref = F.conv2d(x, w, nil, { padding = { 1, 2, 1, 1 } }) -- {top, bottom, left, right}
    assert.is_true((y - ref):abs():max():item() == 0)
    assert.has_error(function() F.conv2d(x, w, nil, { padding = "same", stride = 2 }) end,
                     "conv2d: padding='same' is not supported for strided convolutions")
  end)
end)

describe("nn.Conv1d", function()
  it("builds PyTorch's weight and output shapes", function()
    local m = nn.Conv1d(4, 6, 3, { stride = 2, groups = 2 })
    assert.are.same({ 6, 2, 3 }, H.flat(m.weight.shape))
    assert.are.same({ 5, 6, 7 }, H.flat(m(cnn.randn(5, 4, 15)).shape))
    assert.are.equal("Conv1d(4, 6, kernel_size=(3), stride=(2), groups=2)", tostring(m))
  end)

  it("counts MACs in summary: N*K*OL*(C/groups)*k", function()
    local r = nn.Sequential(nn.Conv1d(4, 6, 3, { groups = 2 })):summary({ 2, 4, 10 }, { print = false })
    assert.are.equal(2 * 6 * 8 * 2 * 3, r.macs)
  end)

  it("pads by padding_mode before convolving (values by hand)", function()
    local x = seq({ 1, 2, 3, 4 })
    local want = { zeros = { 3, 6, 9, 7 }, reflect = { 5, 6, 9, 10 }, replicate = { 4, 6, 9, 11 },
                   circular = { 7, 6, 9, 8 } }
    for mode, w in pairs(want) do
      local m = nn.Conv1d(1, 1, 3, { padding = 1, padding_mode = mode, bias = false })
      cnn.no_grad(function() m.weight:fill_(1) end)
      close(m(x), w)
    end
  end)

  it("takes padding = 'same' with a padding_mode", function()
    local m = nn.Conv1d(1, 1, 2, { padding = "same", padding_mode = "replicate", bias = false })
    cnn.no_grad(function() m.weight:copy_(cnn.tensor({ { { 1, 10 } } })) end)
    close(m(seq({ 1, 2, 3 })), { 21, 32, 33 }) -- padded 1 2 3 | 3
  end)
end)

describe("nn.Conv2d padding_mode", function()
  it("equals F.pad then a convolution without padding", function()
    local m = nn.Conv2d(2, 3, { 3, 2 }, { padding = { 1, 2 }, padding_mode = "circular" })
    local x = cnn.randn(2, 2, 5, 6)
    local ref = F.conv2d(F.pad(x, { 2, 2, 1, 1 }, "circular"), m.weight, m.bias)
    assert.is_true((m(x) - ref):abs():max():item() < 1e-6)
    assert.truthy(tostring(m):find("padding_mode=circular", 1, true))
  end)

  it("back-propagates through the padding", function()
    local m = nn.Conv2d(1, 1, 3, { padding = 1, padding_mode = "reflect" }):to("float64")
    local x = cnn.randn(1, 1, 4, 4, "float64")
    gradcheck(function(a) return m(a) end, { x })
  end)
end)

describe("F.pad modes", function()
  it("reflect, replicate and circular by hand", function()
    local x = seq({ 1, 2, 3, 4 })
    close(F.pad(x, { 2, 1 }, "reflect"), { 3, 2, 1, 2, 3, 4, 3 })
    close(F.pad(x, { 2, 1 }, "replicate"), { 1, 1, 1, 2, 3, 4, 4 })
    close(F.pad(x, { 2, 1 }, "circular"), { 3, 4, 1, 2, 3, 4, 1 })
    close(F.pad(x, { 1, 1 }, "constant", 9), { 9, 1, 2, 3, 4, 9 })
    close(F.pad(x, { 1, 1 }, 7), { 7, 1, 2, 3, 4, 7 }) -- a number is the value
  end)

  it("adds the gradient of positions read twice", function()
    local x = cnn.tensor({ { { 1, 2, 3 } } }, "float64"):requires_grad_()
    F.pad(x, { 1, 1 }, "reflect"):sum():backward() -- reads 2 1 2 3 2
    close(x.grad, { 1, 3, 1 })
    gradcheck(function(a) return F.pad(a, { 1, 2, 2, 1 }, "replicate") end, { cnn.randn(1, 2, 3, 4, "float64") })
  end)
end)

describe("1-d pools", function()
  it("max, average and adaptive average by hand", function()
    local x = seq({ 1, 3, 2, 5, 4 })
    close(F.max_pool1d(x, 2), { 3, 5 })
    local y, idx = F.max_pool1d(x, 2, { return_indices = true })
    close(idx, { 2, 4 })
    close(F.avg_pool1d(x, 2), { 2, 3.5 })
    close(F.avg_pool1d(x, 3, 1, { padding = 1, count_include_pad = false }), { 2, 2, 10 / 3, 11 / 3, 4.5 })
    close(F.adaptive_avg_pool1d(seq({ 1, 2, 3, 4 }), 2), { 1.5, 3.5 })
    close(F.max_pool1d(x, 2, { dilation = 2, stride = 1 }), { 2, 5, 4 })
  end)

  it("takes unbatched C x L input", function()
    assert.are.same({ 3, 4 }, H.flat(F.max_pool1d(cnn.randn(3, 8), 2).shape))
    assert.are.same({ 3, 2 }, H.flat(nn.AdaptiveAvgPool1d(2)(cnn.randn(3, 8)).shape))
  end)

  it("modules print and back-propagate", function()
    assert.are.equal("MaxPool1d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)",
                     tostring(nn.MaxPool1d(2)))
    assert.are.equal("AvgPool1d(kernel_size=3, stride=1, padding=1)", tostring(nn.AvgPool1d(3, { stride = 1, padding = 1 })))
    local x = cnn.randn(2, 3, 9, "float64")
    gradcheck(function(a) return nn.AvgPool1d(3, { stride = 2, padding = 1 })(a) end, { x })
    gradcheck(function(a) return nn.AdaptiveAvgPool1d(4)(a) end, { x })
    gradcheck(function(a) return nn.MaxPool1d(2)(a) end, { x })
  end)

  it("have help", function()
    for _, f in ipairs({ F.conv1d, F.max_pool1d, F.avg_pool1d, F.adaptive_avg_pool1d, nn.Conv1d, nn.MaxPool1d,
                         nn.AvgPool1d, nn.AdaptiveAvgPool1d }) do
      assert.truthy(cnn.doc[f])
    end
  end)
end)
