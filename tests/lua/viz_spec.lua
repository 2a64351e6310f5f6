-- viz_spec.lua -- terminal pictures and PNG output of stdlib/viz/ (one renderer a file).
--
-- Pictures are compared with strings worked out by hand from the documented
-- mapping (level = floor(u * (n - 1) + 0.5) over the ramp), PNG files are
-- decoded again with the private png_read (libpng) and compared with pixel
-- values computed here from round(255 * (v - min) / (max - min)).
local viz = require("viz")
local internal = require("cnn.internal") -- the private helpers (issue 20, point 7)
package.path = "./?.lua;" .. package.path

local tmpdir = os.getenv("CNNSH_TEST_TMP") or "/tmp"
local function tmpfile(name)
  return tmpdir .. "/viz_spec_" .. name
end

-- Flat list of a tensor's values (through totable only).
local flat = require("helpers").flat -- a tensor or nested table as a flat list

describe("viz.show", function()
  it("draws a known 2x2 tensor in ASCII", function()
    local t = cnn.tensor{{0, 1}, {2, 3}}
    -- u = 0, 1/3, 2/3, 1 -> levels 0, 3, 6, 9 of " .:-=+*#%@", two columns each
    assert.are.equal("  --\n**@@\nmin 0 [ .:-=+*#%@] max 3\n", viz.show_str(t, { mode = "ascii", scale = 1 }))
  end)

  it("draws the grey ramp with vmin/vmax and a 1-D tensor as a row", function()
    local t = cnn.tensor{ -1, 0, 0.5, 1, 5 }
    -- over [0, 1] with 5 shades: clamp(-1) -> 0, 0 -> 0, 0.5 -> level 2, 1 -> 4, 5 -> 4
    local s = viz.show_str(t, { mode = "grey", vmin = 0, vmax = 1, scale = 1 })
    assert.are.equal("    ▒▒████\nmin 0 [ ░▒▓█] max 1\n", s)
  end)

  it("uses 24-bit half blocks: upper pixel as foreground, lower as background", function()
    local t = cnn.tensor{{0}, {1}}
    local s = viz.show_str(t, { mode = "color", scale = 1 })
    local first = s:match("^[^\n]*")
    -- viridis ends: (68, 1, 84) at 0 and (253, 231, 37) at 1
    assert.are.equal("\27[38;2;68;1;84m\27[48;2;253;231;37m▀\27[0m", first)
    local last = s:match("\n([^\n]*)\n$")
    assert.truthy(last:find("^min 0 "))
    assert.truthy(last:find(" max 1$"))
  end)

  it("marks NaN with ?", function()
    local t = cnn.tensor{{0, 0 / 0, 1}}
    assert.are.equal("  ??@@\nmin 0 [ .:-=+*#%@] max 1\n", viz.show_str(t, { mode = "ascii", scale = 1 }))
  end)

  it("shrinks images wider than the terminal", function()
    local s = viz.show_str(cnn.zeros(4, 100), { mode = "ascii", width = 50 })
    local first = s:match("^[^\n]*")
    assert.is_true(#first <= 50)
    assert.truthy(s:find("shown 1:4", 1, true))
  end)

  it("picks the mode from cnn.ascii and NO_COLOR", function()
    local saved = cnn.ascii
    cnn.ascii = true
    assert.are.equal("ascii", internal.viz.mode())
    cnn.ascii = saved
    local nc = os.getenv("NO_COLOR")
    if nc and nc ~= "" then assert.are.equal("grey", internal.viz.mode()) end
    assert.are.equal("color", internal.viz.mode({ mode = "color" }))
  end)

  it("refuses 4-D input and points at viz.grid", function()
    local ok, err = pcall(viz.show_str, cnn.zeros(2, 3, 4, 4))
    assert.is_false(ok)
    assert.truthy(tostring(err):find("viz.grid", 1, true))
  end)
end)

describe("viz.grid", function()
  local t = cnn.arange(0, 15):float():reshape(4, 1, 2, 2)

  it("lays out labelled tiles on one shared scale", function()
    -- values 0..15 over [0, 15]: level = floor(v / 15 * 9 + 0.5)
    local expected = table.concat({
      "4x1x2x2",
      "1    2    3    4   ",
      "  .. ::-- ++++ ##%%",
      "..:: ==== **## %%@@",
      "min 0 [ .:-=+*#%@] max 15", "" }, "\n")
    assert.are.equal(expected, viz.grid_str(t, { mode = "ascii", width = 20, scale = 1 }))
  end)

  it("wraps to the width", function()
    local s = viz.grid_str(t, { mode = "ascii", width = 10, scale = 1 })
    local lines = {}
    for l in s:gmatch("[^\n]*\n") do lines[#lines + 1] = l end
    -- title, 2 x (labels + 2 rows), scale
    assert.are.equal(8, #lines)
    assert.are.equal("3    4   \n", lines[5])
  end)

  it("labels n.c when both N and C exceed 1, and limits the count", function()
    local s = viz.grid_str(cnn.zeros(3, 2, 2, 2), { mode = "ascii", width = 80, max = 4, scale = 1 })
    assert.truthy(s:find("1.1  1.2  2.1  2.2", 1, true))
    assert.truthy(s:find("first 4 of 6 maps", 1, true))
  end)
end)

describe("viz.hist", function()
  it("counts values into equal bins (top bin closed)", function()
    local text, counts = viz.hist_str(cnn.tensor{ 1, 1, 2, 3, 3, 3, 0 / 0 }, { bins = 2, mode = "ascii" })
    assert.are.same({ 2, 4 }, counts)
    assert.truthy(text:find("7 values", 1, true))
    assert.truthy(text:find("1 NaN/Inf", 1, true))
  end)

  it("matches a naive count on random data", function()
    local x = cnn.randn(500)
    local v = flat(x)
    local lo, hi = math.huge, -math.huge
    for _, e in ipairs(v) do lo, hi = math.min(lo, e), math.max(hi, e) end
    local naive = {}
    for i = 1, 10 do naive[i] = 0 end
    for _, e in ipairs(v) do
      local b = math.min(10, math.floor((e - lo) / (hi - lo) * 10) + 1)
      naive[b] = naive[b] + 1
    end
    local _, counts = viz.hist_str(x, { bins = 10 })
    assert.are.same(naive, counts)
  end)
end)

describe("viz.plot", function()
  it("draws a rising line in Braille from bottom-left to top-right", function()
    local s = viz.plot_str({ 0, 1 }, { mode = "grey", width = 22, height = 1 })
    local row = s:match("┤([^\n]*)")
    local cps = {}
    for _, c in utf8.codes(row) do cps[#cps + 1] = c end
    assert.are.equal(10, #cps)
    for _, c in ipairs(cps) do assert.is_true(c >= 0x2800 and c <= 0x28FF) end
    -- first cell: lowest-left dot (bit 0x40); last cell: top-right dot (0x08)
    assert.are.equal(0x40, (cps[1] - 0x2800) & 0x40)
    assert.are.equal(0x08, (cps[10] - 0x2800) & 0x08)
    assert.truthy(s:find("         1 ┤", 1, true))
  end)

  it("accepts tensors and marks series in ASCII", function()
    local s = viz.plot_str(cnn.tensor{ 3, 2, 1 }, { 1, 2, 3 }, { mode = "ascii", width = 30, height = 4 })
    assert.truthy(s:find("*", 1, true))
    assert.truthy(s:find("+", 1, true))
    assert.truthy(s:find("series 2", 1, true))
  end)
end)

describe("viz.gradflow", function()
  local function net_with_input(scale)
    local net = nn.Linear(2, 1)
    net(cnn.tensor{{ 3 * scale, 4 * scale }}):sum():backward()
    return net
  end

  it("reports the gradient norm of each parameter", function()
    -- d sum(W x + b) / dW = x = (3, 4): norm 5; / db = 1
    local text, rows = viz.gradflow_str(net_with_input(1), { mode = "ascii" })
    assert.are.equal("weight", rows[1].name)
    assert.is_true(math.abs(rows[1].norm - 5) < 1e-5)
    assert.is_true(math.abs(rows[1].mean_abs - 3.5) < 1e-5)
    assert.is_true(math.abs(rows[2].norm - 1) < 1e-6)
    assert.is_nil(rows[1].flag)
    assert.truthy(text:find("weight", 1, true))
  end)

  it("flags vanishing and exploding gradients", function()
    local _, rows = viz.gradflow_str(net_with_input(1e-9))
    assert.are.equal("vanishing", rows[1].flag)
    local _, rows2 = viz.gradflow_str(net_with_input(1e4))
    assert.are.equal("exploding", rows2[1].flag)
  end)

  it("says when a parameter has no gradient", function()
    local text = viz.gradflow_str(nn.Linear(2, 1), { mode = "ascii" })
    assert.truthy(text:find("(no grad)", 1, true))
  end)
end)

describe("viz.graph", function()
  it("prints the autograd graph as a tree, shared nodes once", function()
    local w = cnn.randn(2, 2, { requires_grad = true })
    local m = w * w
    local y = m:sum()
    local expected = y.grad_fn .. "  scalar\n" ..
                     "└─ " .. m.grad_fn .. "  2x2\n" ..
                     "   ├─ w  leaf  2x2\n" ..
                     "   └─ w  leaf  2x2  (shared, above)\n"
    assert.are.equal(expected, viz.graph_str(y, { names = { w = w }, mode = "grey" }))
  end)

  it("writes Graphviz DOT with one edge per input", function()
    local w = cnn.randn(2, 2, { requires_grad = true })
    local dot = viz.graph_dot((w * w):sum())
    assert.truthy(dot:find("^digraph"))
    local _, edges = dot:gsub("%->", "")
    assert.are.equal(3, edges)
    local path = tmpfile("graph.dot")
    viz.graph((w * w):sum(), { dot = path, mode = "ascii" })
    local f = assert(io.open(path))
    assert.truthy(f:read("a"):find("digraph", 1, true))
    f:close()
    os.remove(path)
  end)

  it("says when backward has freed the graph", function()
    local w = cnn.randn(2, 2, { requires_grad = true })
    local y = (w * w):sum()
    y:backward()
    assert.truthy(viz.graph_str(y):find("graph freed by backward", 1, true))
  end)

  it("says so for a leaf", function()
    assert.truthy(viz.graph_str(cnn.zeros(2)):find("no graph", 1, true))
  end)
end)

describe("colour images, enlargement and options (issue 20, point 18)", function()
  -- the picture at scale 1, every character pair repeated k times across
  -- and every line k times down: the oracle of the enlargement
  local function enlarged(small, k)
    local out = {}
    for line in small:gmatch("[^\n]+") do
      if line:find("^min ") then break end
      local wide = line:gsub("(..)", function(pair) return pair:rep(k) end)
      for _ = 1, k do out[#out + 1] = wide end
    end
    return out
  end
  local function picture_lines(s)
    local out = {}
    for line in s:gmatch("[^\n]+") do if not line:find("^min ") then out[#out + 1] = line end end
    return out
  end
  local f3 = cnn.tensor{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}}

  it("enlarges a 3x3 filter to 12x12 by default; scale sets the factor", function()
    local one = viz.show_str(f3, { mode = "ascii", scale = 1 })
    assert.are.same(enlarged(one, 4), picture_lines(viz.show_str(f3, { mode = "ascii" })))
    assert.are.same(enlarged(one, 2), picture_lines(viz.show_str(f3, { mode = "ascii", scale = 2 })))
    -- a 28x28 map stays as it is; the width still limits the enlargement
    assert.are.equal(28, #picture_lines(viz.show_str(cnn.zeros(28, 28), { mode = "ascii" })))
    assert.are.same(enlarged(one, 2), picture_lines(viz.show_str(f3, { mode = "ascii", width = 13 })))
  end)

  it("enlarges small grid tiles too", function()
    local filters = cnn.arange(0, 17):float():reshape(2, 1, 3, 3)
    local s = viz.grid_str(filters, { mode = "ascii", width = 80 })
    local lines = {}
    for l in s:gmatch("[^\n]*") do lines[#lines + 1] = l end
    assert.are.equal(24 + 1 + 24, #lines[3]) -- two 12-pixel tiles, two columns a pixel, one space
    assert.are.equal(1 + 1 + 12, #picture_lines(s)) -- title, labels, 12 rows (the scale line left out)
  end)

  it("draws a 3 x H x W image in its own colours", function()
    -- uint8 RGB: top pixel red, bottom pixel blue
    local img = cnn.tensor({ { { 255 }, { 0 } }, { { 0 }, { 0 } }, { { 0 }, { 255 } } }, "uint8")
    local s = viz.show_str(img, { mode = "color", scale = 1 })
    assert.are.equal("\27[38;2;255;0;0m\27[48;2;0;0;255m▀\27[0m", s:match("^[^\n]*"))
    assert.truthy(s:find("RGB, channels from 0 to 255", 1, true))
    -- float images over their range; grey mode draws the luminance
    local g = viz.show_str(cnn.ones(3, 1, 2), { mode = "grey", scale = 1, vmin = 0, vmax = 1 })
    assert.are.equal("████", g:match("^[^\n]*"))
    -- rgb = false: a 3-D tensor is refused as before
    local ok, err = pcall(viz.show_str, img, { rgb = false })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("viz.grid", 1, true))
  end)

  it("grid draws N x 3 x H x W as N colour tiles (rgb = false: one per channel)", function()
    local imgs = cnn.rand(2, 3, 4, 4)
    local s = viz.grid_str(imgs, { mode = "color", scale = 1, width = 80 })
    assert.truthy(s:find("1    2", 1, true))
    assert.truthy(s:find("RGB, channels", 1, true))
    local r, g, b = imgs[{ 1, 1, 1, 1 }]:item(), imgs[{ 1, 2, 1, 1 }]:item(), imgs[{ 1, 3, 1, 1 }]:item()
    local lo, hi = imgs:min():item(), imgs:max():item()
    local function byte(v) return math.floor((v - lo) / (hi - lo) * 255 + 0.5) end
    local first_tile = s:match("\n[^\n]*\n([^\n]*)")
    assert.truthy(first_tile:find(string.format("\27[38;2;%d;%d;%dm", byte(r), byte(g), byte(b)), 1, true))
    local per_channel = viz.grid_str(imgs, { mode = "ascii", scale = 1, rgb = false, width = 200 })
    assert.truthy(per_channel:find("1.1", 1, true) and per_channel:find("2.3", 1, true))
  end)

  it("unknown options are errors listing the known ones", function()
    for name, call in pairs({
      show = function(o) return viz.show_str(f3, o) end,
      grid = function(o) return viz.grid_str(f3, o) end,
      hist = function(o) return viz.hist_str(f3, o) end,
      plot = function(o) return viz.plot_str({ 1, 2 }, o) end,
      save_png = function(o) return viz.save_png(f3, os.tmpname(), o) end,
    }) do
      local ok, err = pcall(call, { scael = 2 })
      assert.is_false(ok, name)
      assert.truthy(tostring(err):find("viz." .. name .. ": unknown option 'scael' (options:", 1, true), err)
    end
    local ok, err = pcall(viz.show_str, f3, { scale = 0 })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("scale", 1, true))
  end)
end)

describe("viz.save_png", function()
  it("writes a 2-D map normalised to 0..255", function()
    local path = tmpfile("map.png")
    viz.save_png(cnn.tensor{{ 0, 1, 2 }, { 3, 4, 5 }}, path)
    local h, w, c, img = internal.png_read(path)
    assert.are.same({ 2, 3, 1 }, { h, w, c })
    local expected = {}
    for v = 0, 5 do expected[#expected + 1] = math.floor(255 * v / 5 + 0.5) end
    assert.are.same(expected, flat(img))
    os.remove(path)
  end)

  it("writes a 3 x H x W RGB image, channels last in the file", function()
    local path = tmpfile("rgb.png")
    local t = cnn.tensor{ {{ 0, 1 }}, {{ 0.5, 0 }}, {{ 1, 0.2 }} } -- 3 x 1 x 2
    viz.save_png(t, path, { normalize = false })
    local h, w, c, img = internal.png_read(path)
    assert.are.same({ 1, 2, 3 }, { h, w, c })
    -- pixel 1 = (0, 0.5, 1) * 255, pixel 2 = (1, 0, 0.2) * 255, rounded
    assert.are.same({ 0, 128, 255, 255, 0, 51 }, flat(img))
    os.remove(path)
  end)

  it("writes a montage of N x C x H x W with 1-pixel padding", function()
    local path = tmpfile("montage.png")
    local t = cnn.tensor{ {{{ 0, 0 }, { 0, 0 }}}, {{{ 1, 1 }, { 1, 1 }}} } -- 2x1x2x2
    viz.save_png(t, path)
    local h, w, c, img = internal.png_read(path)
    assert.are.same({ 4, 7, 1 }, { h, w, c })
    local v = flat(img)
    local function px(y, x) return v[(y - 1) * 7 + x] end
    assert.are.equal(0, px(2, 2))     -- tile 1 (value 0 -> 0)
    assert.are.equal(255, px(2, 5))   -- tile 2 (value 1 -> 255)
    assert.are.equal(255, px(3, 6))
    assert.are.equal(0, px(1, 5))     -- padding
    assert.are.equal(0, px(2, 4))
  end)

  it("enlarges pixels with scale", function()
    local path = tmpfile("scale.png")
    viz.save_png(cnn.tensor{{ 0, 1 }}, path, { scale = 3 })
    local h, w, _, img = internal.png_read(path)
    assert.are.same({ 3, 6 }, { h, w })
    local v = flat(img)
    assert.are.same({ 0, 0, 0, 255, 255, 255 }, { table.unpack(v, 13, 18) })
    os.remove(path)
  end)

  it("round-trips uint8 through the private write_png", function()
    local path = tmpfile("u8.png")
    local t = cnn.tensor({ {{ 1, 2, 3 }, { 4, 5, 6 }} }, "uint8") -- 1 x 2 x 3 (H x W x C)
    internal.write_png(t, path)
    local h, w, c, img = internal.png_read(path)
    assert.are.same({ 1, 2, 3 }, { h, w, c })
    assert.are.same({ 1, 2, 3, 4, 5, 6 }, flat(img))
    os.remove(path)
  end)

  it("raises clear errors", function()
    local ok, err = pcall(internal.write_png, cnn.zeros(2, 2), tmpfile("x.png"))
    assert.is_false(ok)
    assert.truthy(tostring(err):find("write_png", 1, true))
    assert.truthy(tostring(err):find("uint8", 1, true))
    ok, err = pcall(internal.write_png, cnn.zeros({ 2, 2, 5 }, "uint8"), tmpfile("x.png"))
    assert.is_false(ok)
    assert.truthy(tostring(err):find("channels", 1, true))
    ok = pcall(internal.png_read, tmpfile("does_not_exist.png"))
    assert.is_false(ok)
  end)
end)

describe("internal helpers are private (issue 20, point 7)", function()
  it("are not in the public tables but stdlib reaches them", function()
    for _, k in ipairs({ "viz_isatty", "viz_node_key", "grad_fn_inputs", "viz_png", "png_read", "viz_term_width" }) do
      assert.is_nil(cnn[k], "cnn." .. k)
    end
    for _, k in ipairs({ "bin_counts", "colour", "finite_range", "fmt", "grad_rows", "render", "values", "mode", "width" }) do
      assert.is_nil(viz[k], "viz." .. k)
      assert.is_function(internal.viz[k], "internal.viz." .. k)
    end
    local net = nn.Linear(2, 2)
    for _, k in ipairs({ "fmt_bool", "fmt_num", "fmt_pair", "shape_str" }) do
      assert.is_nil(net[k], "net:" .. k)
      assert.is_nil(nn.Module[k], "nn.Module." .. k)
    end
    assert.is_nil(data.transform_spec)
    for _, k in ipairs({ "grad_fn_inputs", "node_key", "write_png", "png_read", "isatty", "term_width" }) do
      assert.is_function(internal[k], "internal." .. k)
    end
    -- every public function of viz is documented: nothing undocumented is left
    for k, v in pairs(viz) do
      if type(v) == "function" and not k:find("_str$") and k ~= "graph_dot" then
        assert.is_string(cnn.doc[v], "viz." .. k .. " is public but has no help")
      end
    end
  end)
end)

describe("viz docs", function()
  it("documents every public function", function()
    for _, name in ipairs({ "show", "grid", "hist", "plot", "gradflow", "graph", "save_png" }) do
      assert.is_string(cnn.doc[viz[name]], name)
    end
  end)
end)
