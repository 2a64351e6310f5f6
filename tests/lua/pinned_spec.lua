-- pinned_spec.lua -- page-locked batches and non_blocking copies
-- (core/copy.c, gpu/allocator.cu): Tensor:pin_memory / is_pinned, x:cuda{non_blocking = true},
-- x:to(device, {non_blocking = true}), data.DataLoader{pin_memory = true},
-- and train.fit / evaluate moving batches to the model's device.
--
-- CTest runs it twice: lua_pinned_spec (the glob over tests/lua, usually
-- without CUDA: the documented refusals and fallbacks) and lua_pinned_fake
-- (tests/gpu/CMakeLists.txt, CNNSH_CUDA_MODULE = the fake device and
-- CNNSH_FAKE_CUDA_REQUIRED=1: the whole pinned path).  References are
-- independent: the batches of a loader without pin_memory (read back with
-- totable), hand-built values, and a CPU copy of the same model.
-- Run: cd tests/lua && CNNSH_CUDA_MODULE=../../build/tests/gpu/libcnn_fake_cuda.so \
--        ../../build/repl/cnnsh /usr/bin/busted pinned_spec.lua
local H = require("helpers")

local available, why = cnn.cuda.is_available()
if not available and os.getenv("CNNSH_FAKE_CUDA_REQUIRED") then
  io.stderr:write("pinned_spec: cuda is not available: ", tostring(why), "\n")
  os.exit(1)
end

-- n samples of 1 x 3 x 4 uint8 pixels (k * 7 + i) % 256, labels 1..3
local function dataset(n)
  local px, lab = {}, {}
  for k = 1, n do
    local img = {}
    for i = 1, 12 do img[i] = (k * 7 + i) % 256 end
    px[k], lab[k] = img, (k % 3) + 1
  end
  return data.TensorDataset(cnn.tensor(px, "uint8"):view(n, 1, 3, 4), cnn.tensor(lab, "int64"))
end

-- every batch of one epoch as {x = table, y = table, pinned = {bool, bool}}
local function epoch(loader, seed)
  cnn.manual_seed(seed)
  local out = {}
  for x, y in loader do
    out[#out + 1] = { x = x:totable(), y = y:totable(), pinned = { x:is_pinned(), y:is_pinned() } }
  end
  return out
end

local function assert_same_batches(got, want)
  assert.equal(#want, #got)
  for b = 1, #want do
    assert.same(want[b].x, got[b].x)
    assert.same(want[b].y, got[b].y)
  end
end

describe("DataLoader options", function()
  it("pin_memory must be a boolean", function()
    local ok, err = pcall(data.DataLoader, dataset(4), { pin_memory = 1 })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("pin_memory must be a boolean", 1, true))
  end)
end)

if not available then
  describe("without CUDA (" .. tostring(why) .. ")", function()
    it("pin_memory raises with the reason; is_pinned is false", function()
      local x = cnn.randn(3, 4)
      local ok, err = pcall(x.pin_memory, x)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("pin_memory: cuda is not available: " .. why, 1, true))
      assert.is_false(x:is_pinned())
    end)

    it("non_blocking is accepted where nothing moves to a GPU", function()
      local x = cnn.tensor({ { 1, 2 }, { 3, 4 } })
      assert.same({ { 1, 2 }, { 3, 4 } }, x:to("cpu", { non_blocking = true }):totable())
      assert.same({ { 1, 2 }, { 3, 4 } }, x:to({ dtype = "float64", non_blocking = true }):totable())
      local ok, err = pcall(x.cuda, x, { non_blocking = true })
      assert.is_false(ok)
      assert.truthy(tostring(err):find(why, 1, true))
    end)

    it("DataLoader{pin_memory = true} is ignored: field false, same unpinned batches", function()
      local ds = dataset(10)
      local plain = data.DataLoader(ds, { batch_size = 4, shuffle = true })
      local pinned = data.DataLoader(ds, { batch_size = 4, shuffle = true, pin_memory = true })
      assert.is_false(pinned.pin_memory)
      local got, want = epoch(pinned, 3), epoch(plain, 3)
      assert_same_batches(got, want)
      for _, b in ipairs(got) do assert.same({ false, false }, b.pinned) end
    end)
  end)
  return
end

describe("pinned memory on " .. cnn.cuda.device_count() .. " CUDA device(s)", function()
  it("pin_memory gives a pinned contiguous copy; pinned tensors are returned as is", function()
    local x = cnn.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    local p = x:t():pin_memory()
    assert.is_true(p:is_pinned())
    assert.is_false(x:is_pinned())
    assert.is_true(p:is_contiguous())
    assert.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, p:totable())
    assert.is_true(p:pin_memory():is_pinned())
    assert.same(p:totable(), p:pin_memory():totable())
  end)

  it("every non_blocking call form copies the same values", function()
    local x = cnn.tensor({ { 1.5, -2 }, { 3, 4.25 } })
    local p = x:pin_memory()
    local want = { { 1.5, -2 }, { 3, 4.25 } }
    local forms = {
      p:cuda({ non_blocking = true }), p:cuda(0, { non_blocking = true }),
      p:to("cuda", { non_blocking = true }), p:to({ device = "cuda:0", non_blocking = true }),
      p:to(cnn.zeros(1):cuda(), { non_blocking = true }),
      x:cuda({ non_blocking = true }), -- not pinned: the synchronous path
      p:cuda(), p:to("cuda"),             -- the old forms still work
    }
    for i, g in ipairs(forms) do
      assert.equal("cuda:0", g.device, "form " .. i)
      assert.same(want, g:cpu():totable(), "form " .. i)
    end
  end)

  it("DataLoader{pin_memory = true}: pinned batches equal the unpinned ones", function()
    local ds = dataset(10)
    local plain = data.DataLoader(ds, { batch_size = 4, shuffle = true })
    local pinned = data.DataLoader(ds, { batch_size = 4, shuffle = true, pin_memory = true })
    assert.is_true(pinned.pin_memory)
    local got, want = epoch(pinned, 5), epoch(plain, 5)
    assert_same_batches(got, want)
    for _, b in ipairs(got) do assert.same({ true, true }, b.pinned) end
    for _, b in ipairs(want) do assert.same({ false, false }, b.pinned) end
  end)

  it("a dataset batched in Lua is pinned too", function()
    local Squares = data.Dataset:extend("Squares")
    function Squares:len() return 5 end
    function Squares:get(i) return cnn.tensor({ i, i * i }), i end
    local got = epoch(data.DataLoader(Squares(), { batch_size = 2, pin_memory = true }), 1)
    assert.equal(3, #got)
    assert.same({ { 1, 1 }, { 2, 4 } }, got[1].x)
    assert.same({ 5 }, got[3].y)
    for _, b in ipairs(got) do assert.same({ true, true }, b.pinned) end
  end)

  it("memory stays flat over many pinned batches moved to the device", function()
    local loader = data.DataLoader(dataset(64), { batch_size = 8, shuffle = true, pin_memory = true })
    local function run(epochs)
      for _ = 1, epochs do
        for x, y in loader do
          local gx, gy = x:cuda({ non_blocking = true }), y:cuda({ non_blocking = true })
          assert.equal("cuda:0", gx.device)
          assert.equal("cuda:0", gy.device)
        end
      end
      collectgarbage(); collectgarbage()
      return cnn.memory("cpu").live, cnn.memory("cuda").live
    end
    local cpu1, gpu1 = run(2)
    local cpu2, gpu2 = run(20) -- 160 more pinned batches
    assert.equal(cpu1, cpu2)
    assert.equal(gpu1, gpu2)
  end)

  it("train.fit and evaluate move pinned batches to the model's device", function()
    local function setup(device)
      cnn.manual_seed(11)
      local net = nn.Sequential(nn.Flatten(), nn.Linear(12, 3))
      if device == "cuda" then net:to("cuda") end
      local loader = data.DataLoader(dataset(12), { batch_size = 4, pin_memory = device == "cuda" })
      return net, loader
    end
    local hist, ev = {}, {}
    for _, dev in ipairs({ "cpu", "cuda" }) do
      local net, loader = setup(dev)
      local opt = optim.SGD(net:parameters(), { lr = 0.1 })
      hist[dev] = train.fit(net, loader, { epochs = 2, optimizer = opt, progress = false })
      ev[dev] = train.evaluate(net, loader, { print = false })
    end
    H.assert_close(hist.cuda.loss, hist.cpu.loss, 1e-5, 1e-5, "fit losses")
    H.assert_close(ev.cuda.loss, ev.cpu.loss, 1e-5, 1e-5, "evaluate loss")
    assert.equal(ev.cpu.accuracy, ev.cuda.accuracy)
  end)
end)
