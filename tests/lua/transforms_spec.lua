-- transforms_spec.lua -- data.transforms in C (core/io/image_ops.c,
-- pipeline.c) against naive Lua loops written here from the definitions:
-- PIL's bilinear resize as one 2-D weighted sum (not separable passes),
-- centre crops with Python's rounding, every padded window of a random
-- crop, mirrors, a bilinear rotation (and the exact 90-degree case),
-- colour jitter as x -> clamp(f x + (1 - f) m) for one factor per op,
-- the hue shift through the textbook chroma form of HSV (not torchvision's),
-- ITU-R 601 grayscale, per-channel normalise.  Odd sizes throughout.
package.path = "./?.lua;" .. package.path
local H = require("helpers")
local T = data.transforms

-- a float64 C x H x W image of values in [0, 1] as nested tables and a tensor
local function image(c, h, w, seed)
  cnn.manual_seed(seed or 1)
  local t = cnn.rand(c, h, w, "float64")
  return t, t:totable()
end

local function same(got, ref, tol, what)
  H.assert_close(got:double(), ref, tol or 1e-5, 0, what)
end

-- PIL's bilinear weights for output i of n_out from n_in (normalised)
local function weights(n_in, n_out, i, antialias)
  local scale = n_in / n_out
  local fs = (antialias and scale > 1) and scale or 1
  local centre, ws, total = (i - 0.5) * scale, {}, 0 -- i is 1-based
  for j = 0, n_in - 1 do
    local d = math.abs((j - centre + 0.5) / fs)
    local v = d < 1 and 1 - d or 0
    if j >= math.floor(centre - fs + 0.5) and j < math.floor(centre + fs + 0.5) then ws[j + 1] = v; total = total + v end
  end
  for j, v in pairs(ws) do ws[j] = v / total end
  return ws
end

local function resize_ref(img, oh, ow, antialias)
  local c, h, w = #img, #img[1], #img[1][1]
  local out = {}
  for ch = 1, c do
    out[ch] = {}
    for y = 1, oh do
      out[ch][y] = {}
      local wy = weights(h, oh, y, antialias)
      for x = 1, ow do
        local wx, s = weights(w, ow, x, antialias), 0
        for j, a in pairs(wy) do for i, b in pairs(wx) do s = s + a * b * img[ch][j][i] end end
        out[ch][y][x] = s
      end
    end
  end
  return out
end

local function crop_ref(img, top, left, oh, ow) -- 0-based offsets, zero outside
  local out = {}
  for ch = 1, #img do
    out[ch] = {}
    for y = 1, oh do
      out[ch][y] = {}
      for x = 1, ow do
        local r = img[ch][top + y]
        out[ch][y][x] = (r and r[left + x]) or 0
      end
    end
  end
  return out
end

describe("data.transforms against reference loops", function()
  it("Resize: shrinking (antialiased), enlarging, the shorter edge, a constant image", function()
    local t, img = image(3, 13, 17)
    same(T.Resize({ 5, 6 })(t), resize_ref(img, 5, 6, true), 1e-5, "shrink")
    same(T.Resize({ 19, 23 })(t), resize_ref(img, 19, 23, true), 1e-5, "enlarge")
    same(T.Resize({ 5, 6 }, { antialias = false })(t), resize_ref(img, 5, 6, false), 1e-5, "no antialias")
    H.assert_shape(T.Resize(7)(t), { 3, 7, 9 })        -- 17 * 7 / 13 = 9.15 -> 9
    H.assert_shape(T.Resize(7)(cnn.rand(1, 20, 10)), { 1, 14, 7 })
    same(T.Resize({ 4, 9 })(cnn.full({ 2, 11, 7 }, 0.25)), cnn.full({ 2, 4, 9 }, 0.25):totable(), 1e-6, "constant")
    -- uint8 input is scaled to [0, 1] first
    local u = (t * 255):round():to("uint8")
    same(T.Resize({ 5, 6 })(u), resize_ref((u:double() / 255):totable(), 5, 6, true), 1e-5, "uint8")
  end)

  it("CenterCrop: Python's rounding of the offsets, zero padding when larger", function()
    local t, img = image(2, 9, 8)
    same(T.CenterCrop({ 4, 5 })(t), crop_ref(img, 2, 2, 4, 5), 1e-6, "9->4 rows: round(2.5) = 2; 8->5 cols: round(1.5) = 2")
    same(T.CenterCrop(6)(t), crop_ref(img, 2, 1, 6, 6), 1e-6, "offsets 1.5 -> 2, 1")
    same(T.CenterCrop({ 11, 10 })(t), crop_ref(img, -1, -1, 11, 10), 1e-6, "larger: padded")
  end)

  it("RandomCrop: every result is one padded window; several offsets occur; seeded", function()
    local t, img = image(1, 5, 6)
    local tf, seen = T.RandomCrop({ 4, 4 }, { padding = 1 }), {}
    for seed = 1, 40 do
      local got, found = tf(t, seed):totable(), nil
      for top = -1, 5 + 2 - 4 - 1 do for left = -1, 6 + 2 - 4 - 1 do
        if H.compare(got, crop_ref(img, top, left, 4, 4), 1e-6, 0) then found = top .. "," .. left end
      end end
      assert.is_not_nil(found, "seed " .. seed .. ": not a window of the padded image")
      seen[found] = true
    end
    local n = 0
    for _ in pairs(seen) do n = n + 1 end
    assert.is_true(n >= 6, "only " .. n .. " offsets in 40 draws")
    same(tf(t, 7), tf(t, 7):totable(), 0, "same seed, same crop")
    H.raises(function() T.RandomCrop(8)(t) end, "RandomCrop", "5x6")
  end)

  it("RandomHorizontalFlip: p = 1 mirrors, p = 0 keeps", function()
    local t, img = image(3, 4, 7)
    local mirror = crop_ref(img, 0, 0, 4, 7)
    for ch = 1, 3 do for y = 1, 4 do
      local r = {}
      for x = 1, 7 do r[x] = img[ch][y][8 - x] end
      mirror[ch][y] = r
    end end
    same(T.RandomHorizontalFlip(1)(t), mirror, 1e-6, "p = 1")
    same(T.RandomHorizontalFlip(0)(t), img, 1e-6, "p = 0")
  end)

  it("RandomRotation: a bilinear loop, and 90 degrees is an exact transpose + flip", function()
    local t, img = image(2, 7, 9)
    local a = 13
    local ca, sa = math.cos(math.rad(a)), math.sin(math.rad(a))
    local ref = {}
    for ch = 1, 2 do
      ref[ch] = {}
      for y = 1, 7 do
        ref[ch][y] = {}
        for x = 1, 9 do
          local dx, dy = (x - 0.5) - 4.5, (y - 0.5) - 3.5
          local sx, sy = ca * dx - sa * dy + 4.5 - 0.5, sa * dx + ca * dy + 3.5 - 0.5
          local x0, y0, s = math.floor(sx), math.floor(sy), 0
          for j = 0, 1 do for i = 0, 1 do
            local yy, xx = y0 + j, x0 + i
            if yy >= 0 and yy < 7 and xx >= 0 and xx < 9 then
              s = s + (j == 1 and sy - y0 or 1 - (sy - y0)) * (i == 1 and sx - x0 or 1 - (sx - x0)) * img[ch][yy + 1][xx + 1]
            end
          end end
          ref[ch][y][x] = s
        end
      end
    end
    same(T.RandomRotation({ a, a })(t), ref, 1e-5, "13 degrees")
    local sq, sqi = image(1, 5, 5)
    local rot = T.RandomRotation({ 90, 90 })(sq):totable()
    for y = 1, 5 do for x = 1, 5 do
      -- counter-clockwise on screen: output (y, x) comes from source (x, 6 - y)
      assert.is_true(math.abs(rot[1][y][x] - sqi[1][x][6 - y]) < 1e-5, "90 degrees at " .. y .. "," .. x)
    end end
  end)

  it("ColorJitter: one factor per op, clamped; brightness/contrast/saturation formulas", function()
    local t, img = image(3, 6, 5)
    local function gray(ch, y, x) return 0.299 * img[1][y][x] + 0.587 * img[2][y][x] + 0.114 * img[3][y][x] end
    local mean = 0
    for y = 1, 6 do for x = 1, 5 do mean = mean + gray(1, y, x) end end
    mean = mean / 30
    local forms = {
      brightness = function(f, ch, y, x) return f * img[ch][y][x] end,
      contrast = function(f, ch, y, x) return f * img[ch][y][x] + (1 - f) * mean end,
      saturation = function(f, ch, y, x) return f * img[ch][y][x] + (1 - f) * gray(ch, y, x) end,
    }
    for name, form in pairs(forms) do
      for seed = 1, 5 do
        local got = T.ColorJitter{ [name] = 0.5 }(t, seed):totable()
        -- solve for f from a pixel that is not clamped, then check every pixel
        local f
        for y = 1, 6 do for x = 1, 5 do
          local g0, g1 = form(0, 1, y, x), form(1, 1, y, x)
          if not f and got[1][y][x] > 0.01 and got[1][y][x] < 0.99 and math.abs(g1 - g0) > 0.1 then
            f = (got[1][y][x] - g0) / (g1 - g0)
          end
        end end
        assert.is_not_nil(f)
        assert.is_true(f >= 0.5 - 1e-4 and f <= 1.5 + 1e-4, name .. " factor " .. f)
        for ch = 1, 3 do for y = 1, 6 do for x = 1, 5 do
          local want = math.min(1, math.max(0, form(f, ch, y, x)))
          assert.is_true(math.abs(got[ch][y][x] - want) < 1e-4, name .. " at " .. ch .. "," .. y .. "," .. x)
        end end end
      end
    end
  end)

  -- hue: RGB -> (hue in turns, chroma, value) -> hue + shift -> RGB, the
  -- textbook chroma/sector form (Wikipedia's "HSV"), independent of the C code
  local function hue_of(r, g, b)
    local v, m = math.max(r, g, b), math.min(r, g, b)
    local chroma = v - m
    if chroma == 0 then return 0, 0, v end
    local h
    if v == r then h = ((g - b) / chroma) % 6
    elseif v == g then h = (b - r) / chroma + 2
    else h = (r - g) / chroma + 4 end
    return h / 6, chroma, v
  end
  local function shift_hue(r, g, b, shift)
    local h, chroma, v = hue_of(r, g, b)
    local hp = ((h + shift) % 1) * 6
    local x = chroma * (1 - math.abs(hp % 2 - 1))
    local sector = ({ { chroma, x, 0 }, { x, chroma, 0 }, { 0, chroma, x }, { 0, x, chroma }, { x, 0, chroma },
                      { chroma, 0, x } })[math.floor(hp) % 6 + 1]
    local m = v - chroma
    return sector[1] + m, sector[2] + m, sector[3] + m
  end
  local function hue_ref(img, shift)
    local c, h, w = #img, #img[1], #img[1][1]
    local ref = { {}, {}, {} }
    for y = 1, h do
      for ch = 1, c do ref[ch][y] = {} end
      for x = 1, w do
        local rgb = { shift_hue(img[1][y][x], img[2][y][x], img[3][y][x], shift) }
        for ch = 1, 3 do ref[ch][y][x] = rgb[ch] end
      end
    end
    return ref
  end

  it("ColorJitter hue: a fixed shift against the textbook HSV loop; 0 keeps; gray pixels and 1 channel kept", function()
    local t, img = image(3, 5, 7)
    for _, f in ipairs({ 0.1, -0.3, 0.5, -0.5, 0.25, 1e-3 }) do
      same(T.ColorJitter{ hue = { f, f } }(t, 4), hue_ref(img, f), 1e-5, "hue " .. f)
    end
    local as_float = t:float():totable() -- the pipeline works in float32
    same(T.ColorJitter{ hue = 0 }(t, 4), as_float, 0, "hue = 0")
    same(T.ColorJitter{ hue = { 0, 0 } }(t, 4), as_float, 0, "hue = {0, 0}")
    -- gray pixels (r = g = b) among coloured ones come back exactly
    local m = t:totable()
    for y = 1, 5 do for ch = 1, 3 do m[ch][y][3] = 0.37 * y / 5 end end
    local mixed = cnn.tensor(m, "float64")
    local got = T.ColorJitter{ hue = { 0.3, 0.3 } }(mixed, 1):totable()
    for y = 1, 5 do for ch = 1, 3 do
      assert.is_true(math.abs(got[ch][y][3] - m[ch][y][3]) < 1e-7, "gray pixel at row " .. y)
    end end
    same(T.ColorJitter{ hue = { 0.3, 0.3 } }(mixed, 1), hue_ref(m, 0.3), 1e-5, "mixed image")
    local g = image(1, 4, 6)
    same(T.ColorJitter{ hue = 0.5 }(g, 2), g:float():totable(), 0, "one channel")
  end)

  it("ColorJitter hue: the random shift lies in [-h, h] and is the same for every pixel; seeded", function()
    local t, img = image(3, 6, 5, 3)
    local shifts = {}
    for seed = 1, 8 do
      local got = T.ColorJitter{ hue = 0.2 }(t, seed):totable()
      -- the shift from one coloured pixel, then every pixel against the loop with it
      local h0, c0 = hue_of(img[1][1][1], img[2][1][1], img[3][1][1])
      local h1 = hue_of(got[1][1][1], got[2][1][1], got[3][1][1])
      assert.is_true(c0 > 0.05, "a coloured pixel")
      local shift = (h1 - h0 + 0.5) % 1 - 0.5
      assert.is_true(shift >= -0.2 - 1e-5 and shift <= 0.2 + 1e-5, "shift " .. shift)
      same(cnn.tensor(got, "float64"), hue_ref(img, shift), 1e-4, "seed " .. seed)
      shifts[#shifts + 1] = shift
    end
    table.sort(shifts)
    assert.is_true(shifts[#shifts] - shifts[1] > 0.05, "shifts vary with the seed")
    local all = T.ColorJitter{ brightness = 0.3, contrast = 0.3, saturation = 0.3, hue = { -0.2, 0.4 } }
    H.assert_close(all(t, 7), all(t, 7), 0, 0, "same seed, same image")
    assert.is_true(H.max_diff(all(t, 7), all(t, 8)) > 1e-3, "another seed, another image")
    assert.are.equal("ColorJitter(brightness=0.3, contrast=0.3, saturation=0.3, hue={-0.2, 0.4})", tostring(all))
  end)

  it("ColorJitter hue: out of [0, 0.5] or a bad range is an error naming the transform", function()
    for _, bad in ipairs({ 0.6, -0.1, 0 / 0, { 0.3, 0.1 }, { -0.6, 0 }, { 0, 0.7 }, { 0.1 }, "0.1" }) do
      H.raises(function() T.ColorJitter{ hue = bad } end, "ColorJitter", "hue")
    end
    H.raises(function() T.ColorJitter(0, 0, 0, 0.75) end, "ColorJitter", "hue")
    local spec = { scale = 1, ops = { { kind = "color_jitter", hue_lo = -0.7, hue_hi = 0 } } }
    H.raises(function() cnn.io.transform(cnn.rand(3, 2, 2), spec, 1) end, "ColorJitter", "hue")
  end)

  it("Grayscale and Normalize", function()
    local t, img = image(3, 4, 5)
    local ref1, ref3 = { {} }, { {}, {}, {} }
    for y = 1, 4 do
      ref1[1][y] = {}
      for x = 1, 5 do ref1[1][y][x] = 0.299 * img[1][y][x] + 0.587 * img[2][y][x] + 0.114 * img[3][y][x] end
    end
    for ch = 1, 3 do ref3[ch] = ref1[1] end
    same(T.Grayscale()(t), ref1, 1e-6, "1 channel")
    same(T.Grayscale(3)(t), ref3, 1e-6, "3 channels")
    local mean, std = { 0.1, 0.5, 0.9 }, { 0.2, 0.3, 0.4 }
    local ref = {}
    for ch = 1, 3 do
      ref[ch] = {}
      for y = 1, 4 do
        ref[ch][y] = {}
        for x = 1, 5 do ref[ch][y][x] = (img[ch][y][x] - mean[ch]) / std[ch] end
      end
    end
    same(T.Normalize(mean, std)(t), ref, 1e-5, "normalize")
    H.raises(function() T.Normalize({ 0, 0 }, { 1, 1 })(t) end, "Normalize", "3 channels")
  end)

  it("RandomResizedCrop: with the whole image forced it is Resize; sizes and windows otherwise", function()
    local t, img = image(3, 12, 16)
    same(T.RandomResizedCrop({ 6, 5 }, { scale = { 1, 1 }, ratio = { 16 / 12, 16 / 12 } })(t, 3),
         resize_ref(img, 6, 5, true), 1e-5, "whole image")
    for seed = 1, 10 do H.assert_shape(T.RandomResizedCrop(8)(t, seed), { 3, 8, 8 }) end
  end)

  it("Compose runs in the order given; ToFloat sets the scale; errors name the transform", function()
    local u = cnn.tensor({ { { 0, 51 }, { 102, 255 } } }, "uint8")
    same(T.Compose{ T.ToFloat(1), T.Normalize(100, 2) }(u), { { { -50, -24.5 }, { 1, 77.5 } } }, 1e-5, "scale 1")
    same(T.Compose{ T.Normalize(0.5, 0.5), T.RandomHorizontalFlip(1) }(u),
         { { { 2 * 51 / 255 - 1, -1 }, { 1, 2 * 102 / 255 - 1 } } }, 1e-5, "normalize then flip")
    H.raises(function() T.Compose{ T.Normalize(0, 1), T.ToFloat() }(u) end, "ToFloat", "Normalize")
    H.raises(function() T.Resize(0) end, "Resize", "size")
    H.raises(function() T.RandomCrop(3, { pading = 1 }) end, "RandomCrop", "pading")
    H.raises(function() T.ColorJitter{ hue = 0.6 } end, "ColorJitter", "hue")
    H.raises(function() T.RandomHorizontalFlip(2) end, "RandomHorizontalFlip", "p")
    H.raises(function() T.Grayscale(2) end, "Grayscale")
    H.raises(function() T.Grayscale()(cnn.rand(2, 3, 3)) end, "Grayscale", "2")
  end)
end)
