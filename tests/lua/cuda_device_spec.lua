-- cuda_device_spec.lua -- the TOUR's promise on a CUDA device, in CI the
-- fake one (tests/gpu/fake_cuda.h: the whole backend table as host loops
-- behind a protected arena): the same training script on 'cpu' and on 'cuda'
-- (net:to('cuda'), x:cuda()) gives the same losses; moving back with
-- :cpu(); mixing devices is an error naming both; state_dict save/load
-- from cuda tensors.
--
-- CTest runs it as lua_fake_device (tests/gpu/CMakeLists.txt, with
-- CNNSH_CUDA_MODULE=libcnn_fake_cuda.so and CNNSH_FAKE_CUDA_REQUIRED=1: it
-- must run) and as gpu_lua_cuda_device_spec (label gpu: the real module;
-- exits 77, skipped, without a device).
-- Run: cd tests/lua && CNNSH_CUDA_MODULE=../../build/tests/gpu/libcnn_fake_cuda.so \
--        ../../build/repl/cnnsh /usr/bin/busted cuda_device_spec.lua

package.path = "./?.lua;" .. package.path
local H = require("helpers")
H.need_cuda("cuda_device_spec")

-- a small CNN: conv, batchnorm, relu, maxpool, linear; dropout present but off
local function make_net()
  cnn.manual_seed(1234)
  return nn.Sequential(
    nn.Conv2d(1, 4, 3, { padding = 1 }), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(4, 6, 3, { stride = 2, padding = 1 }), nn.BatchNorm2d(6), nn.ReLU(),
    nn.Flatten(), nn.Dropout(0), nn.Linear(6 * 3 * 3, 5))
end

local function batch()
  cnn.manual_seed(99)
  return cnn.randn(6, 1, 12, 12), cnn.randint(1, 5, { 6 })
end

-- losses of `steps` steps of optimizer `make_opt` on `device`; `setup`
-- (optional) gives the net and the batch instead of make_net() and batch()
local function train(device, make_opt, steps, setup)
  local net, x, y
  if setup then
    net, x, y = setup(device)
  else
    net, x, y = make_net():to(device), batch()
  end
  x, y = x:to(device), y:to(device)
  local opt = make_opt(net:parameters())
  local losses = {}
  net:train()
  for s = 1, steps do
    opt:zero_grad()
    local loss = F.cross_entropy(net(x), y)
    loss:backward()
    opt:step()
    losses[s] = loss:item()
  end
  return losses, net
end

local function same_losses(make_opt)
  local lc = train("cpu", make_opt, 5)
  local lg, net = train("cuda", make_opt, 5)
  for s = 1, 5 do
    if math.abs(lc[s] - lg[s]) > 1e-4 then
      error(string.format("step %d: cpu loss %.7f, cuda loss %.7f", s, lc[s], lg[s]))
    end
  end
  assert.is_true(lc[5] < lc[1], "the loss went down")
  return net
end

describe("the fake CUDA device", function()
  it("is available and names itself", function()
    assert.is_true((cnn.cuda.is_available()))
    assert.equal(1, cnn.cuda.device_count())
    if os.getenv("CNNSH_FAKE_CUDA_REQUIRED") then -- the fake one names itself
      assert.truthy(cnn.version_info():find("fake CUDA device", 1, true))
    end
  end)

  it("trains a channels-last batch as the CPU does (its ops run NCHW copies there)", function()
    local function resnet_channels_last(device)
      cnn.manual_seed(5)
      local net = models.resnet20({ num_classes = 4 }):to(device)
      cnn.manual_seed(6)
      local x = cnn.randn(4, 3, 8, 8):to(device):contiguous("channels_last")
      assert.is_true(x:is_contiguous("channels_last"))
      return net, x, cnn.randint(1, 4, { 4 })
    end
    local function sgd(p) return optim.SGD(p, { lr = 0.05 }) end
    local lc = train("cpu", sgd, 3, resnet_channels_last)
    local lg = train("cuda", sgd, 3, resnet_channels_last)
    for s = 1, 3 do
      assert(math.abs(lc[s] - lg[s]) < 1e-4 * (1 + math.abs(lc[s])),
             ("step %d: cpu %.7f, cuda %.7f"):format(s, lc[s], lg[s]))
    end
  end)

  it("moves tensors there and back", function()
    local x = cnn.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    local g = x:cuda()
    assert.equal("cuda:0", g.device)
    local back = (g * 2 + 1):cpu()
    assert.equal("cpu", back.device)
    assert.same({ { 3, 5, 7 }, { 9, 11, 13 } }, back:totable())
    assert.same({ 3, 2 }, g:t():contiguous():cpu().shape)
    assert.same({ 1, 4, 2, 5, 3, 6 }, H.flat(g:t():contiguous():cpu()))
  end)

  it("trains the same with SGD (momentum) on cpu and cuda", function()
    same_losses(function(ps) return optim.SGD(ps, { lr = 0.1, momentum = 0.9 }) end)
  end)

  it("trains the same with Adam on cpu and cuda", function()
    local net = same_losses(function(ps) return optim.Adam(ps, { lr = 1e-2 }) end)
    for _, p in ipairs(net:parameters()) do assert.equal("cuda:0", p.device) end
    net:cpu()
    for _, p in ipairs(net:parameters()) do assert.equal("cpu", p.device) end
    net:eval()
    local x = batch()
    assert.same({ 6, 5 }, net(x).shape)
  end)

  it("refuses to mix devices and names both", function()
    local a, b = cnn.ones(3), cnn.ones(3):cuda()
    local ok, err = pcall(function() return a + b end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("cpu", 1, true), err)
    assert.truthy(tostring(err):find("cuda:0", 1, true), err)
    local net = make_net():cuda()
    ok, err = pcall(function() return net(cnn.randn(2, 1, 12, 12)) end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("cpu", 1, true) and tostring(err):find("cuda:0", 1, true), err)
  end)

  it("saves and loads a state_dict of cuda tensors", function()
    local _, net = train("cuda", function(ps) return optim.SGD(ps, { lr = 0.1 }) end, 2)
    local path = (os.getenv("CNNSH_TEST_TMP") or "/tmp") .. "/cuda_device_spec.safetensors"
    cnn.save(path, net:state_dict())
    local fresh = make_net()
    fresh:load_state_dict(cnn.load(path))
    os.remove(path)
    local want = net:state_dict()
    for name, t in pairs(fresh:state_dict()) do
      assert.equal("cuda:0", want[name].device)
      local ok, msg = H.compare(t, want[name]:cpu(), 0, 0)
      assert(ok, name .. ": " .. tostring(msg))
    end
    -- and back into a model on the device
    local dev = make_net():cuda()
    dev:load_state_dict(net:state_dict())
    local x = batch()
    net:eval()
    dev:eval()
    local ok, msg = H.compare(dev(x:cuda()):cpu(), net(x:cuda()):cpu(), 0, 0)
    assert(ok, msg)
  end)

  it("reports its memory", function()
    local m = cnn.cuda.memory()
    assert.is_true(m.total > 0)
    local x <close> = cnn.zeros(1000):cuda()
    assert.is_true(cnn.memory("cuda").live >= 4000)
    cnn.cuda.synchronize()
    cnn.cuda.empty_cache()
  end)

  it("moves a model in place: an optimizer built on the CPU trains it on cuda", function()
    cnn.manual_seed(5)
    local lin = nn.Linear(3, 2)
    local opt = optim.SGD(lin:parameters(), { lr = 0.5 })
    local w = lin.weight
    lin:to("cuda")
    assert.is_true(rawequal(w, lin.weight))
    assert.are.equal("cuda:0", tostring(w.device))
    local before = w:cpu():totable()
    lin(cnn.ones(1, 3):cuda()):sum():backward()    -- dL/dW = 1 everywhere
    opt:step()
    H.assert_close(w:cpu(), H.map(before, function(v) return v - 0.5 end), 1e-6, 0)
  end)

  -- issue 16: net:fuse() on the device runs F.conv2d_act (cuDNN's
  -- convolution + bias + ReLU on a GPU; the fake device's own loop here)
  it("runs a fused net (folded batch norm, conv + bias + ReLU in one call) as the unfused CPU net", function()
    local function eval_net()
      local net = make_net():eval()
      cnn.manual_seed(7) -- running statistics that are not the defaults
      for _, m in ipairs(net:modules()) do
        if m.running_mean then m.running_mean:copy_(cnn.randn(m.num_features) * 0.3) end
        if m.running_var then m.running_var:copy_(cnn.rand(m.num_features) + 0.5) end
      end
      return net
    end
    local x = batch()
    local want = cnn.no_grad(function() return eval_net()(x) end)
    local fused = eval_net():fuse():to("cuda")
    assert.are.equal("Fused", fused[1].__name)
    local got = cnn.no_grad(function() return fused(x:cuda()) end)
    assert.are.equal("cuda:0", tostring(got.device))
    H.assert_close(got:cpu(), want, 1e-4, 1e-4)
    local traced = fused(x:cuda()) -- with grad recorded: conv2d, then relu
    H.assert_close(traced:cpu(), want, 1e-4, 1e-4)
  end)
end)
