-- torch_weights_spec.lua -- weights from PyTorch (issue 13 point 9).
--
-- The fixtures in tests/fixtures/ were written BY HAND by
-- make_torch_fixture.py with PyTorch and torchvision (never run here): the
-- state dicts of a LeNet-5, of a small U-Net and of a ResNet-8 built from
-- torchvision's BasicBlock (safetensors' save_file(model.state_dict()): 0-based
-- Sequential indices, 0-d int64 num_batches_tracked), inputs, and
-- PyTorch's outputs.  Loading them into models.lenet5() and
-- models.cifar_resnet{depth = 8} must give PyTorch's outputs; the name
-- mapping (nn/torch_names.lua) is also checked on its own.
local H = require("helpers")

local FIX = "../fixtures/"

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

describe("PyTorch's names", function()
  it("state_dict{torch = true} lowers every container index by one", function()
    local sd = models.lenet5():state_dict{ torch = true }
    assert.same({ "classifier.1.bias", "classifier.1.weight", "classifier.3.bias", "classifier.3.weight",
                  "classifier.5.bias", "classifier.5.weight", "features.0.bias", "features.0.weight",
                  "features.3.bias", "features.3.weight" }, sorted_keys(sd))
    local r = models.cifar_resnet{ depth = 8 }:state_dict{ torch = true }
    assert.is_not_nil(r["layer2.0.downsample.0.weight"])
    assert.is_not_nil(r["layer2.0.downsample.1.num_batches_tracked"])
    assert.is_not_nil(r["bn1.running_var"])
    assert.is_nil(r["layer2.1.downsample.1.weight"])
  end)

  it("only integer child keys are renamed, at any depth", function()
    local inner = nn.Module()
    inner:add_module("3", nn.Linear(2, 2)) -- a string key: kept as "3"
    inner.seq = nn.Sequential(nn.Sequential(nn.Linear(2, 2)))
    local sd = inner:state_dict{ torch = true }
    assert.same({ "3.bias", "3.weight", "seq.0.0.bias", "seq.0.0.weight" }, sorted_keys(sd))
  end)

  it("the same tensors, shared with the model", function()
    local net = models.lenet5()
    local sd = net:state_dict{ torch = true }
    sd["features.0.bias"]:fill_(0.5)
    assert.equal(3, net.features[1].bias:sum():item())
  end)

  it("a torch-named state dict round-trips through cnn.save into a fresh model", function()
    cnn.manual_seed(11)
    local a, b = models.cifar_resnet{ depth = 8 }, models.cifar_resnet{ depth = 8 }
    cnn.no_grad(function() a.bn1.running_mean:fill_(0.25) end)
    local path = os.getenv("CNNSH_TEST_TMP") .. "/torch_names_rt.safetensors"
    cnn.save(path, a:state_dict{ torch = true })
    b:load_state_dict(cnn.load(path), { torch = true })
    os.remove(path)
    a:eval(); b:eval()
    local x = cnn.randn(2, 3, 32, 32)
    H.assert_close(b(x), a(x), 0, 0)
  end)

  it("a mismatch lists every offending key, in PyTorch's names", function()
    local net = models.lenet5()
    local sd = net:state_dict{ torch = true }
    sd["features.0.weight"] = cnn.zeros(6, 3, 5, 5)   -- wrong shape
    sd["classifier.5.bias"] = cnn.zeros(7)            -- wrong shape
    sd["features.3.bias"] = nil                       -- missing
    sd["classifier.7.weight"] = cnn.zeros(1)          -- unexpected
    sd["extra"] = cnn.zeros(1)                        -- unexpected
    local before = net.features[1].weight:clone()
    local err = H.raises(function() net:load_state_dict(sd, { torch = true }) end,
      "size mismatch for features.0.weight: checkpoint 6x3x5x5, model 6x1x5x5",
      "size mismatch for classifier.5.bias: checkpoint 7, model 10",
      "missing keys: features.3.bias", "unexpected keys: classifier.7.weight, extra")
    assert.is_nil(err:find("features.1.weight", 1, true))
    -- nothing was copied
    H.assert_close(net.features[1].weight, before, 0, 0)
  end)

  it("names that are PyTorch's get a hint when torch = true is missing", function()
    local net = models.lenet5()
    H.raises(function() net:load_state_dict(net:state_dict{ torch = true }) end,
      "missing keys", "PyTorch's names", "{torch = true}")
    H.raises(function() net:load_state_dict({}, { torch = 1 }) end, "load_state_dict", "torch")
    H.raises(function() net:state_dict{ names = "torch" } end, "state_dict", "unknown option 'names'")
  end)
end)

describe("a state dict saved by PyTorch", function()
  local io_ = cnn.load(FIX .. "torch_io.safetensors")

  -- Loads FIX/torch_<file>.safetensors into net (strict) and compares the
  -- eval output on io_[key .. "_input"] with PyTorch's.
  local function matches_pytorch(net, file, key)
    local sd = cnn.load(FIX .. "torch_" .. file .. ".safetensors")
    local r = net:load_state_dict(sd, { torch = true })
    assert.same({}, r.missing_keys); assert.same({}, r.unexpected_keys)
    net:eval()
    local out = cnn.no_grad(function() return net(io_[key .. "_input"]) end)
    H.assert_close(out, io_[key .. "_output"], 1e-5, 1e-5, file .. " eval output")
    return sd
  end

  it("loads into models.lenet5 and gives PyTorch's output", function()
    local sd = matches_pytorch(models.lenet5(), "lenet5", "lenet")
    assert.is_not_nil(sd["features.0.weight"]) -- a foreign file loads flat
  end)

  it("loads into a ResNet with BatchNorm statistics and num_batches_tracked", function()
    local net = models.cifar_resnet{ depth = 8 }
    local sd = matches_pytorch(net, "resnet8", "resnet")
    local nbt = sd["layer2.0.downsample.1.num_batches_tracked"]
    assert.equal("int64", nbt.dtype); assert.equal(0, nbt:dim())
    assert.equal(7, net.layer2[1].downsample[2].num_batches_tracked:item())
    -- one training-mode forward: batch statistics, and the running ones move
    -- as PyTorch's did (momentum 0.1, unbiased variance)
    net:train()
    local out = cnn.no_grad(function() return net(io_.resnet_input) end)
    H.assert_close(out, io_.resnet_train_output, 1e-4, 1e-4, "ResNet-8 train output")
    H.assert_close(net.bn1.running_var, io_.resnet_bn1_running_var_after, 1e-5, 1e-5, "bn1.running_var")
    assert.equal(8, net.bn1.num_batches_tracked:item())
  end)

  it("loads into models.unet: transposed convolutions and skip concatenation as PyTorch's", function()
    matches_pytorch(models.unet{ num_classes = 3, base_channels = 4, depth = 2 }, "unet", "unet")
  end)

  it("into the wrong model, every offending key is listed", function()
    local sd = cnn.load(FIX .. "torch_resnet8.safetensors")
    local net = models.resnet20()
    H.raises(function() net:load_state_dict(sd, { torch = true }) end,
      "missing keys: layer1.1.bn1.bias", "layer3.2.conv2.weight")
  end)
end)
