-- macs_spec.lua -- the multiply-adds net:summary and net:profile report for
-- issue 13's layers and activations, against counts written out by hand
-- here from the convention in stdlib/inspect.lua: products with weights
-- (convolutions, linear), one per element for the normalisations (as
-- BatchNorm2d), the 4 taps of bilinear upsampling per output element, and
-- 0 for elementwise activations (as ReLU), pools, nearest upsampling and
-- pixel shuffles.

describe("MACs of issue 13's layers", function()
  -- input 2 x 2 x 8 x 8; each row's output shape in the comment
  local function net()
    return nn.Sequential(
      nn.Conv2d(2, 8, 3, { padding = 1 }),                   -- 2x8x8x8
      nn.SiLU(), nn.Hardswish(), nn.Hardsigmoid(), nn.Mish(), nn.Softplus(), nn.GELU(),
      nn.GELU({ approximate = "tanh" }), nn.ReLU6(),
      nn.LayerNorm({ 8, 8 }),                                -- 2x8x8x8
      nn.GroupNorm(2, 8),
      nn.InstanceNorm2d(8),
      nn.Upsample({ scale_factor = 2 }),                     -- 2x8x16x16
      nn.Upsample({ size = { 20, 24 }, mode = "bilinear" }), -- 2x8x20x24
      nn.PixelUnshuffle(2),                                  -- 2x32x10x12
      nn.PixelShuffle(2),                                    -- 2x8x20x24
      nn.ConvTranspose2d(8, 3, 3, { stride = 2, groups = 1 }), -- 2x3x41x49
      nn.AdaptiveMaxPool2d(4),                               -- 2x3x4x4
      nn.BatchNorm2d(3), nn.ReLU(), nn.Dropout2d(),
      nn.Flatten(), nn.Linear(48, 5))                        -- 2x5
  end

  local hand = {
    2 * 8 * 8 * 8 * (2 * 3 * 3), -- Conv2d: output elements * C_in * k * k
    0, 0, 0, 0, 0, 0, 0, 0,      -- SiLU, Hardswish, Hardsigmoid, Mish, Softplus, GELU x2, ReLU6
    2 * 8 * 8 * 8,               -- LayerNorm: one per element
    2 * 8 * 8 * 8,               -- GroupNorm
    2 * 8 * 8 * 8,               -- InstanceNorm2d
    0,                           -- nearest Upsample
    4 * 2 * 8 * 20 * 24,         -- bilinear: 4 taps per output element
    0, 0,                        -- PixelUnshuffle, PixelShuffle
    2 * 8 * 20 * 24 * (3 * 3 * 3), -- ConvTranspose2d: input elements * C_out * k * k
    0,                           -- AdaptiveMaxPool2d
    2 * 3 * 4 * 4,               -- BatchNorm2d
    0, 0, 0,                     -- ReLU, Dropout2d, Flatten
    2 * 5 * 48,                  -- Linear: output elements * in_features
  }

  it("summary: every row and the total", function()
    local r = net():summary({ 2, 2, 8, 8 }, { print = false })
    assert.are.equal(#hand, #r.rows)
    local total = 0
    for i, want in ipairs(hand) do
      assert.are.equal(want, r.rows[i].macs, "row " .. i .. " (" .. r.rows[i].type .. ")")
      total = total + want
    end
    assert.are.equal(total, r.macs)
    -- the shapes the hand counts assume
    assert.are.same({ 2, 8, 20, 24 }, r.rows[16].shape)
    assert.are.same({ 2, 3, 41, 49 }, r.rows[17].shape)
  end)

  it("profile reports the same MACs per layer", function()
    local p = net():profile(cnn.randn(2, 2, 8, 8), { iters = 1, warmup = 0, backward = false, print = false })
    assert.are.equal(#hand, #p.rows)
    for i, want in ipairs(hand) do assert.are.equal(want, p.rows[i].macs, "row " .. i .. " (" .. p.rows[i].type .. ")") end
  end)
end)

describe("MACs of a model loaded from ONNX", function()
  it("equal the exported network's, layer for layer where the graph keeps the layer", function()
    cnn.manual_seed(21)
    local net = nn.Sequential(nn.Conv2d(2, 4, 3, { padding = 1 }), nn.BatchNorm2d(4), nn.SiLU(),
      nn.ConvTranspose2d(4, 4, 2, { stride = 2 }), nn.GroupNorm(2, 4), nn.InstanceNorm2d(4),
      nn.Upsample({ scale_factor = 2, mode = "bilinear" }), nn.LayerNorm(24), nn.Flatten(), nn.Linear(4 * 24 * 24, 3)):eval()
    local path = (os.getenv("CNNSH_TEST_TMP") or "/tmp") .. "/macs_spec_roundtrip.onnx"
    cnn.onnx.export(net, cnn.randn(1, 2, 6, 6), path, { opset = 17 })
    local want = net:summary({ 1, 2, 6, 6 }, { print = false }).macs
    -- by hand: conv 1x4x6x6 outputs * 2*3*3, BN 144, conv-transpose 1x4x6x6 inputs * 4*2*2, GroupNorm and
    -- InstanceNorm 1x4x12x12, bilinear 4 * 1x4x24x24, LayerNorm 2304, Linear 3 * 2304
    assert.are.equal(144 * 18 + 144 + 144 * 16 + 576 + 576 + 4 * 2304 + 2304 + 3 * 2304, want)
    local m = cnn.onnx.load(path)
    assert.are.equal(want, m:summary({ 1, 2, 6, 6 }, { print = false }).macs)
    assert.are.equal("ConvTranspose2d", m["4"].__name)
  end)
end)
