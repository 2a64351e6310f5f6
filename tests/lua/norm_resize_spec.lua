-- norm_resize_spec.lua -- nn.LayerNorm, nn.GroupNorm, nn.InstanceNorm2d,
-- nn.Upsample, nn.PixelShuffle/PixelUnshuffle, nn.AdaptiveMaxPool2d and
-- their F.* functions, from Lua (issue 13 points 3 and 4).
--
-- Values are compared with references built here from other tensor ops
-- (mean, var, view, permute: never the op under test) or computed by hand
-- from PyTorch's documented formulas; gradients by finite differences in
-- float64 (helpers.gradcheck).  The C tests (test_row_norm, test_resize)
-- cover the kernels in depth; this spec covers the bindings and modules:
-- defaults, options, parameters and buffers, printing, summary MACs, help.
package.path = "./?.lua;" .. package.path
local H = require("helpers")

-- sum(f(...) * r) for a fixed random r: a scalar whose gradient reaches every output
local function weighted(f)
  local r
  return function(...)
    local y = f(...)
    r = r or cnn.randn(table.unpack(H.flat(y.shape))):double()
    return (y * r):sum()
  end
end

-- (x - mean) / sqrt(var + eps) over `dims` (a table of 1-based dims), biased variance
local function normalize(x, dims, eps)
  local m = x:mean(dims, true)
  local v = x:var(dims, { correction = 0, keepdim = true })
  return (x - m) / (v + (eps or 1e-5)):sqrt()
end

describe("nn.LayerNorm", function()
  it("normalises the last dims and applies weight and bias of that shape", function()
    local ln = nn.LayerNorm({ 3, 4 })
    assert.are.equal("LayerNorm((3, 4), eps=1e-05, elementwise_affine=True)", tostring(ln):match("^[^\n]*"))
    H.assert_shape(ln.weight, { 3, 4 })
    H.assert_shape(ln.bias, { 3, 4 })
    cnn.no_grad(function()
      ln.weight:copy_(cnn.randn(3, 4))
      ln.bias:copy_(cnn.randn(3, 4))
    end)
    local x = cnn.randn(2, 5, 3, 4, "float64")
    local ln64 = ln:to("float64")
    local want = normalize(x, { 3, 4 }) * ln64.weight + ln64.bias
    H.assert_close(ln64(x), want, 1e-10)
  end)

  it("bias = false and elementwise_affine = false leave out the parameters", function()
    local a, b = nn.LayerNorm(4, { bias = false }), nn.LayerNorm(4, { elementwise_affine = false })
    assert.is_not_nil(a.weight)
    assert.is_nil(a.bias)
    assert.is_nil(b.weight)
    local keys = {}
    for k in pairs(a:state_dict()) do keys[#keys + 1] = k end
    assert.are.same({ "weight" }, keys)
    H.assert_close(b(cnn.tensor({ { 1, 2, 3, 4 } })), { { -1.3416, -0.4472, 0.4472, 1.3416 } }, 1e-4)
  end)

  it("channels-last use as in ConvNeXt: permute to N,H,W,C, LayerNorm(C), permute back", function()
    local x = cnn.randn(2, 6, 3, 5, "float64")
    local ln = nn.LayerNorm(6):to("float64")
    local y = ln(x:permute(1, 3, 4, 2)):permute(1, 4, 2, 3)
    H.assert_close(y, normalize(x, { 2 }), 1e-10)
  end)

  it("gradients of x, weight and bias match finite differences", function()
    local x = cnn.randn(3, 4, "float64")
    local w, b = cnn.randn(4, "float64"), cnn.randn(4, "float64")
    H.gradcheck(weighted(function(xx, ww, bb) return F.layer_norm(xx, 4, ww, bb) end), { x, w, b }, 1e-5)
  end)
end)

describe("nn.GroupNorm", function()
  it("normalises groups of channels per sample", function()
    local gn = nn.GroupNorm(3, 6):to("float64")
    assert.are.equal("GroupNorm(3, 6, eps=1e-05, affine=True)", tostring(gn):match("^[^\n]*"))
    cnn.no_grad(function() gn.weight:copy_(cnn.randn(6)); gn.bias:copy_(cnn.randn(6)) end)
    local x = cnn.randn(2, 6, 4, 5, "float64")
    local ref = normalize(x:view(2, 3, 2 * 4 * 5), { 3 }):view(2, 6, 4, 5)
    ref = ref * gn.weight:view(1, 6, 1, 1) + gn.bias:view(1, 6, 1, 1)
    H.assert_close(gn(x), ref, 1e-10)
  end)

  it("affine = false has no parameters; gradients check", function()
    assert.is_nil(nn.GroupNorm(2, 4, { affine = false }).weight)
    local x, w, b = cnn.randn(2, 4, 3, "float64"), cnn.randn(4, "float64"), cnn.randn(4, "float64")
    H.gradcheck(weighted(function(xx, ww, bb) return F.group_norm(xx, 2, ww, bb) end), { x, w, b }, 1e-5)
  end)
end)

describe("nn.InstanceNorm2d", function()
  it("defaults as PyTorch: no affine parameters, no running statistics", function()
    local m = nn.InstanceNorm2d(3)
    assert.is_nil(m.weight)
    assert.is_nil(m.running_mean)
    assert.are.equal("InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=False, track_running_stats=False)",
                     tostring(m):match("^[^\n]*"))
    local x = cnn.randn(2, 3, 4, 5, "float64")
    H.assert_close(m(x), normalize(x, { 3, 4 }), 1e-10)
    H.assert_close(m(x[1]), normalize(x[1], { 2, 3 }), 1e-10) -- unbatched C x H x W
  end)

  it("tracks running statistics in training and uses them in eval", function()
    local m = nn.InstanceNorm2d(2, { track_running_stats = true, momentum = 0.5 }):to("float64")
    local x = cnn.randn(3, 2, 4, 4, "float64")
    m(x)
    local bm = x:mean({ 3, 4 }):mean(1)
    local bv = x:var({ 3, 4 }, { correction = 1 }):mean(1)
    H.assert_close(m.running_mean, bm * 0.5, 1e-12)
    H.assert_close(m.running_var, bv * 0.5 + 0.5, 1e-12)
    assert.are.equal(1, m.num_batches_tracked:item())
    m:eval()
    local want = (x - m.running_mean:view(1, 2, 1, 1)) / (m.running_var:view(1, 2, 1, 1) + 1e-5):sqrt()
    H.assert_close(m(x), want, 1e-10)
  end)
end)

describe("F.interpolate and nn.Upsample", function()
  local x = cnn.tensor({ { { { 1, 2 }, { 3, 4 } } } })

  it("bilinear 2x2 -> 4x4 without align_corners (PyTorch's documented result)", function()
    local up = nn.Upsample({ scale_factor = 2, mode = "bilinear" })
    assert.are.equal("Upsample(scale_factor=2, mode='bilinear')", tostring(up):match("^[^\n]*"))
    H.assert_close(up(x), { { { { 1, 1.25, 1.75, 2 }, { 1.5, 1.75, 2.25, 2.5 }, { 2.5, 2.75, 3.25, 3.5 },
                                { 3, 3.25, 3.75, 4 } } } }, 1e-6)
  end)

  it("align_corners = true keeps the corner pixels", function()
    H.assert_close(F.interpolate(x, { size = 3, mode = "bilinear", align_corners = true }),
                   { { { { 1, 1.5, 2 }, { 2, 2.5, 3 }, { 3, 3.5, 4 } } } }, 1e-6)
  end)

  it("nearest copies floor(dst * in / out); size {h, w}", function()
    local y = F.interpolate(x, { size = { 2, 3 } })
    H.assert_close(y, { { { { 1, 1, 2 }, { 3, 3, 4 } } } }, 0)
    H.assert_shape(nn.Upsample({ scale_factor = { 2, 3 } })(x), { 1, 1, 4, 6 })
  end)

  it("scale_factor sets the coordinates unless recompute_scale_factor", function()
    local row = cnn.tensor({ { { { 0, 1, 2, 3, 4 } } } })
    local a = F.interpolate(row, { scale_factor = { 1, 1.5 }, mode = "bilinear" })
    local b = F.interpolate(row, { scale_factor = { 1, 1.5 }, mode = "bilinear", recompute_scale_factor = true })
    H.assert_close(a, { { { { 0, 0.5, 7 / 6, 11 / 6, 2.5, 19 / 6, 23 / 6 } } } }, 1e-6)
    H.assert_close(b, { { { { 0, 4 / 7, 9 / 7, 2, 19 / 7, 24 / 7, 4 } } } }, 1e-6)
  end)

  it("gradients match finite differences (bilinear and nearest)", function()
    local z = cnn.randn(1, 2, 3, 4, "float64")
    H.gradcheck(weighted(function(t) return F.interpolate(t, { size = { 5, 7 }, mode = "bilinear" }) end), { z }, 1e-5)
    H.gradcheck(weighted(function(t) return F.interpolate(t, { scale_factor = 2 }) end), { z }, 1e-5)
  end)
end)

describe("nn.PixelShuffle, nn.PixelUnshuffle, nn.AdaptiveMaxPool2d", function()
  it("pixel_shuffle places channel c*r*r + i*r + j at (h*r + i, w*r + j)", function()
    local x = cnn.arange(1, 8):float():view(1, 4, 1, 2)
    H.assert_close(nn.PixelShuffle(2)(x), { { { { 1, 3, 2, 4 }, { 5, 7, 6, 8 } } } }, 0)
    H.assert_close(nn.PixelUnshuffle(2)(nn.PixelShuffle(2)(x)), x, 0)
  end)

  it("adaptive max pooling over PyTorch's bins, 1-based indices", function()
    local x = cnn.arange(1, 25):float():view(1, 1, 5, 5)
    local y, idx = nn.AdaptiveMaxPool2d(3, { return_indices = true })(x)
    H.assert_close(y, { { { { 7, 9, 10 }, { 17, 19, 20 }, { 22, 24, 25 } } } }, 0)
    H.assert_close(idx, { { { { 7, 9, 10 }, { 17, 19, 20 }, { 22, 24, 25 } } } }, 0) -- x[i] = i
    local z = cnn.randn(1, 2, 5, 4, "float64")
    H.gradcheck(weighted(function(t) return F.adaptive_max_pool2d(t, { 2, 3 }) end), { z }, 1e-5)
  end)
end)

describe("summary, help", function()
  it("summary counts MACs of the new layers", function()
    local net = nn.Sequential(nn.GroupNorm(2, 4), nn.Upsample({ scale_factor = 2, mode = "bilinear" }),
                              nn.LayerNorm(8), nn.Upsample({ scale_factor = 2 }))
    local r = net:summary({ 2, 4, 4, 4 }, { print = false })
    assert.are.equal(2 * 4 * 4 * 4, r.rows[1].macs)
    assert.are.equal(4 * 2 * 4 * 8 * 8, r.rows[2].macs)
    assert.are.equal(2 * 4 * 8 * 8, r.rows[3].macs)
    assert.are.equal(0, r.rows[4].macs)
  end)

  it("every new class and function has a help text", function()
    for _, name in ipairs({ "LayerNorm", "GroupNorm", "InstanceNorm2d", "Upsample", "PixelShuffle", "PixelUnshuffle",
                            "AdaptiveMaxPool2d" }) do
      assert.is_string(cnn.doc[nn[name]], name)
    end
    for _, name in ipairs({ "layer_norm", "group_norm", "instance_norm", "interpolate", "pixel_shuffle",
                            "pixel_unshuffle", "adaptive_max_pool2d" }) do
      assert.is_string(cnn.doc[F[name]], name)
    end
  end)
end)
