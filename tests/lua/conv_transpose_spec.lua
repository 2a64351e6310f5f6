-- conv_transpose_spec.lua -- F.conv_transpose2d and nn.ConvTranspose2d from
-- Lua (issue 13): shapes and PyTorch's output-size formula, the weight
-- layout and initialisation bounds, forward(x, output_size), gradients of
-- every parameter, MACs in summary, help.  The arithmetic itself is checked
-- in C (tests/core/test_conv_transpose.c: oracle, finite differences).
package.path = "./?.lua;" .. package.path
local H = require("helpers")

describe("F.conv_transpose2d", function()
  it("gives PyTorch's output size", function()
    local x = cnn.randn(2, 4, 5, 7)
    local w = cnn.randn(4, 3, 3, 2)
    local y = F.conv_transpose2d(x, w, nil, { stride = { 2, 3 }, padding = { 1, 0 }, output_padding = { 1, 2 } })
    -- (5-1)*2 - 2 + 2 + 1 + 1 = 10, (7-1)*3 - 0 + 1 + 2 + 1 = 22
    assert.are.same({ 2, 3, 10, 22 }, H.flat(y.shape))
  end)

  it("computes a small case by hand (stride 2 stamps the kernel)", function()
    local x = cnn.tensor({ { { { 1, 2 }, { 3, 4 } } } })
    local w = cnn.tensor({ { { { 1, 10 }, { 100, 1000 } } } })
    local y = F.conv_transpose2d(x, w, cnn.tensor({ 0.5 }), { stride = 2 })
    local want = { 1, 10, 2, 20, 100, 1000, 200, 2000, 3, 30, 4, 40, 300, 3000, 400, 4000 }
    local got = H.flat(y:view(16))
    for i = 1, 16 do assert.are.equal(want[i] + 0.5, got[i]) end
  end)

  it("is the input-gradient of conv2d with the same weight", function()
    local x, w = cnn.randn(2, 3, 4, 4, "float64"), cnn.randn(3, 2, 3, 3, "float64")
    local opts = { stride = 2, padding = 1, dilation = 1 }
    local yt = F.conv_transpose2d(x, w, nil, { stride = 2, padding = 1, output_padding = 1 })
    local z = cnn.zeros(2, 2, 8, 8, "float64"):requires_grad_()
    F.conv2d(z, w, nil, opts):backward(x)
    assert.is_true((z.grad - yt):abs():max():item() < 1e-12)
  end)
end)

describe("nn.ConvTranspose2d", function()
  it("doubles H and W with kernel 2, stride 2 (a U-Net's up-step)", function()
    local up = nn.ConvTranspose2d(8, 4, 2, { stride = 2 })
    assert.are.same({ 8, 4, 2, 2 }, H.flat(up.weight.shape))
    assert.are.same({ 3, 4, 14, 10 }, H.flat(up(cnn.randn(3, 8, 7, 5)).shape))
  end)

  it("initialises weight and bias within 1/sqrt(fan_in), fan_in = out/groups*kh*kw", function()
    local m = nn.ConvTranspose2d(6, 4, 3, { groups = 2 })
    assert.are.same({ 6, 2, 3, 3 }, H.flat(m.weight.shape))
    local bound = 1 / math.sqrt(2 * 3 * 3)
    assert.is_true(m.weight:abs():max():item() <= bound)
    assert.is_true(m.weight:abs():max():item() > 0.5 * bound)
    assert.is_true(m.bias:abs():max():item() <= bound)
  end)

  it("forward(x, output_size) picks output_padding", function()
    local m = nn.ConvTranspose2d(2, 2, 3, { stride = 2, padding = 1 })
    local x = cnn.randn(1, 2, 4, 4)
    assert.are.same({ 1, 2, 7, 7 }, H.flat(m(x).shape))
    assert.are.same({ 1, 2, 8, 7 }, H.flat(m(x, { 8, 7 }).shape))
    assert.has_error(function() m(x, { 9, 7 }) end)
  end)

  it("back-propagates into x, weight and bias", function()
    local m = nn.ConvTranspose2d(3, 5, { 3, 2 }, { stride = 2, padding = 1, output_padding = 1, dilation = { 1, 2 } })
    local x = cnn.randn(2, 3, 4, 4):requires_grad_()
    m(x):sum():backward()
    assert.are.same(H.flat(x.shape), H.flat(x.grad.shape))
    assert.are.same(H.flat(m.weight.shape), H.flat(m.weight.grad.shape))
    -- d(sum y)/d b[c] = number of output pixels per channel, over the batch
    local y = m(x)
    local per_channel = y:size(1) * y:size(3) * y:size(4)
    assert.is_true((m.bias.grad - per_channel):abs():max():item() < 1e-3)
  end)

  it("prints like PyTorch", function()
    local m = nn.ConvTranspose2d(4, 2, 3, { stride = 2, output_padding = 1, bias = false })
    assert.are.equal("ConvTranspose2d(4, 2, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1), bias=False)",
                     tostring(m))
  end)

  it("counts its MACs in summary: N*in*H*W*(out/groups)*kh*kw", function()
    local net = nn.Sequential(nn.ConvTranspose2d(4, 6, 3, { stride = 2, padding = 1, output_padding = 1, groups = 2 }))
    local r = net:summary({ 2, 4, 5, 5 }, { print = false })
    assert.are.equal(2 * 4 * 5 * 5 * 3 * 9, r.macs)
  end)

  it("has help", function()
    assert.truthy(cnn.doc[nn.ConvTranspose2d]:find("output_padding", 1, true))
    assert.truthy(cnn.doc[F.conv_transpose2d]:find("in x out/groups", 1, true))
  end)
end)
