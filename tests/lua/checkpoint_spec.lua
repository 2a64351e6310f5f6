-- checkpoint_spec.lua -- cnn.save / cnn.load give back what was saved
-- (issue 20, point 10): nested stays nested, a flat dotted state_dict stays
-- flat, integer and string keys keep their type, a file from another
-- program loads as it is, a module is refused, and a save leaves no
-- temporary behind.  (Killing a save: tests/crash.)  Files go to
-- $CNNSH_TEST_TMP or /tmp.
package.path = "./?.lua;" .. package.path
local H = require("helpers")

local TMP = os.getenv("CNNSH_TEST_TMP") or "/tmp"
local function tmp(name) return ("%s/cnnsh_ckpt_%d_%s"):format(TMP, math.random(1 << 30), name) end

local function roundtrip(tbl, opts)
  local p = tmp("rt.safetensors")
  cnn.save(p, tbl)
  local back = cnn.load(p, opts)
  os.remove(p)
  return back
end

-- the keys of a table, sorted, with their types ("s:x" or "i:1")
local function keys_of(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = (math.type(k) == "integer" and "i:" or "s:") .. tostring(k) end
  table.sort(ks)
  return ks
end

local function same_tree(a, b, path)
  path = path or "root"
  assert.are.same(keys_of(a), keys_of(b), path)
  for k, v in pairs(a) do
    if cnn.is_tensor(v) then
      assert.is_true(cnn.is_tensor(b[k]), path .. "." .. tostring(k))
      assert.are.same(v:totable(), b[k]:totable(), path .. "." .. tostring(k))
      assert.are.equal(v.dtype, b[k].dtype)
    elseif type(v) == "table" then
      same_tree(v, b[k], path .. "." .. tostring(k))
    else
      assert.are.equal(v, b[k], path .. "." .. tostring(k))
      assert.are.equal(math.type(v), math.type(b[k]), path .. "." .. tostring(k))
    end
  end
end

describe("cnn.load gives back what cnn.save was given", function()
  local net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))

  it("a flat state_dict inside a nested table stays flat (the issue's case)", function()
    local sd = net:state_dict()
    local back = roundtrip({ model = sd, epoch = 3, lr = 0.1, tag = "run", best = true })
    assert.is_true(cnn.is_tensor(back.model["1.weight"]))
    assert.is_nil(back.model[1])
    same_tree({ model = sd, epoch = 3, lr = 0.1, tag = "run", best = true }, back)
    net:load_state_dict(back.model)
  end)

  it("a flat dotted state_dict stays flat", function()
    local sd = net:state_dict()
    same_tree(sd, roundtrip(sd))
  end)

  it("nested tables, integer keys and string keys keep their shape and types", function()
    local t = {
      layers = { [1] = cnn.tensor({ 1, 2 }), [2] = { weight = cnn.tensor({ 3 }, "int64") } },
      ["1"] = cnn.tensor({ 4 }),              -- a string key that looks like a number
      ["a.b"] = 5, a = { c = 6 },             -- a dotted key beside a nested table
      deep = { x = { y = { z = { cnn.tensor({ 7 }, "float64") } } } },
      big = math.maxinteger, neg = -0.5, empty = "",
    }
    local back = roundtrip(t)
    same_tree(t, back)
    assert.is_nil(back[1])
    assert.are.equal(5, back["a.b"])
  end)

  it("flat = true gives the dotted names", function()
    local back = roundtrip({ model = { ["1.weight"] = cnn.ones(2) }, layers = { cnn.zeros(1) }, epoch = 2 },
                           { flat = true })
    assert.are.same({ "s:epoch", "s:layers.1", "s:model.1.weight" }, keys_of(back))
  end)

  it("a file written by another program loads as it is", function()
    -- safetensors by hand, as PyTorch's writer lays it out
    local hdr = '{"__metadata__":{"format":"pt","i:x":"i:3"},' ..
                '"features.0.weight":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},' ..
                '"features.0.bias":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}'
    hdr = hdr .. string.rep(" ", (8 - #hdr % 8) % 8)
    local p = tmp("foreign.safetensors")
    local f = assert(io.open(p, "wb"))
    f:write(string.pack("<I8", #hdr), hdr, string.pack("<fff", 1.5, -2, 0.25))
    f:close()
    local back = cnn.load(p)
    os.remove(p)
    assert.are.same({ "s:features.0.bias", "s:features.0.weight", "s:format", "s:i:x" }, keys_of(back))
    assert.are.same({ 1.5, -2 }, back["features.0.weight"]:totable())
    assert.are.equal("pt", back.format)
  end)

  it("a corrupt key record is an error naming load", function()
    local p = tmp("corrupt.safetensors")
    local hdr = '{"__metadata__":{"__cnnsh_keys__":"2s5:model"},' ..
                '"model.w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    hdr = hdr .. string.rep(" ", (8 - #hdr % 8) % 8)
    local f = assert(io.open(p, "wb"))
    f:write(string.pack("<I8", #hdr), hdr, string.pack("<f", 1))
    f:close()
    local ok, err = pcall(cnn.load, p)
    os.remove(p)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("load: corrupt __cnnsh_keys__ record", 1, true), err)
  end)

  -- (models helper) a scheduler's best = inf must come back a number
  it("infinities and NaN come back as numbers", function()
    local back = roundtrip({ best = math.huge, worst = -math.huge, none = 0 / 0 })
    assert.equal(math.huge, back.best)
    assert.equal(-math.huge, back.worst)
    assert.equal("number", type(back.none))
    assert.is_true(back.none ~= back.none)
  end)
end)

describe("cnn.save refuses what it cannot give back", function()
  local net = nn.Sequential(nn.Linear(2, 2))

  it("a module is an error that says to save net:state_dict()", function()
    local p = tmp("module.safetensors")
    local ok, err = pcall(cnn.save, p, net)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("net:state_dict()", 1, true), err)
    ok, err = pcall(cnn.save, p, { model = net })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("'model' is a Sequential", 1, true), err)
    ok, err = pcall(cnn.save, p, { opt = optim.SGD(net:parameters(), { lr = 0.1 }) })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("state_dict", 1, true), err)
    assert.is_nil(io.open(p, "rb"))
  end)

  it("two entries with one dotted name, and the reserved name, are errors", function()
    local p = tmp("clash.safetensors")
    local ok, err = pcall(cnn.save, p, { a = { b = 1 }, ["a.b"] = 2 })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("'a.b'", 1, true), err)
    ok, err = pcall(cnn.save, p, { __cnnsh_keys__ = "x" })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("reserved", 1, true), err)
  end)
end)

describe("a save leaves nothing behind", function()
  it("no temporary beside the target after saves and a failed save", function()
    local dir = tmp("dir")
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    local p = dir .. "/ck.safetensors"
    for i = 1, 3 do cnn.save(p, { w = cnn.full({ 4 }, i), step = i }) end
    pcall(cnn.save, p, { w = cnn.zeros(2), bad = print })
    -- a temporary a killed writer left behind (its process is gone) goes on the next save
    local stale = p .. ".tmp.999999999.ABCDEF"
    assert(io.open(stale, "wb")):close()
    cnn.save(p, { w = cnn.ones(1) })
    local listing = io.popen("ls -A '" .. dir .. "'"):read("a")
    assert.are.equal("ck.safetensors\n", listing)
    os.remove(p)
    os.remove(dir)
  end)
end)
