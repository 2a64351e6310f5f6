-- resume_spec.lua -- stopping and resuming training gives the same losses
-- as an uninterrupted run (checkpointed model, optimizer and generator).
--
-- A tiny float64 network with dropout (so training draws from the RNG),
-- Adam (so the optimizer has per-parameter state and a step count) and a
-- shuffling loader (the order comes from the RNG): 2 steps per epoch.
-- Reference: 2 epochs (4 steps) in one go.  Resumed: 1 epoch, save model +
-- optimizer + epoch + RNG state with cnn.save, then a fresh network built
-- from another seed loads everything with cnn.load and trains epoch 2.

local function tmpfile(name)
  return (os.getenv("CNNSH_TEST_TMP") or "/tmp") .. "/resume_spec_" .. name .. ".safetensors"
end

local function make(seed)
  cnn.manual_seed(seed)
  local net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.3), nn.Linear(8, 3)):double()
  local opt = optim.Adam(net:parameters(), { lr = 0.05 })
  -- fixed data, whatever the seed above
  cnn.manual_seed(77)
  local x = cnn.randn(8, 4, "float64")
  local y = cnn.randint(1, 3, { 8 })
  local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 4, shuffle = true })
  return net, opt, loader
end

local function train_epoch(net, opt, loader, losses)
  net:train()
  for x, y in loader do
    opt:zero_grad()
    local loss = F.cross_entropy(net(x), y)
    loss:backward()
    opt:step()
    losses[#losses + 1] = loss:item()
  end
end

local function reference_losses()
  local net, opt, loader = make(1)
  cnn.manual_seed(5) -- the training run's seed
  local losses = {}
  train_epoch(net, opt, loader, losses)
  train_epoch(net, opt, loader, losses)
  return losses
end

-- Trains epoch 1, saves, rebuilds from scratch (other seed), loads, trains
-- epoch 2.  restore_rng = false leaves the generator as the fresh run set it.
local function resumed_losses(path, restore_rng)
  local net, opt, loader = make(1)
  cnn.manual_seed(5)
  local losses = {}
  train_epoch(net, opt, loader, losses)
  cnn.save(path, { model = net:state_dict(), optimizer = opt:state_dict(), epoch = 1,
                   rng = cnn.get_rng_state() })
  net, opt, loader = nil, nil, nil
  collectgarbage()

  local net2, opt2, loader2 = make(999) -- different initial weights
  cnn.manual_seed(12345)
  local ck = cnn.load(path)
  net2:load_state_dict(ck.model)
  opt2:load_state_dict(ck.optimizer)
  if restore_rng then cnn.set_rng_state(ck.rng) end
  assert.are.equal(1, ck.epoch)
  train_epoch(net2, opt2, loader2, losses)
  return losses
end

describe("resume", function()
  it("save + load mid-run gives the uninterrupted run's losses", function()
    local want = reference_losses()
    local got = resumed_losses(tmpfile("a"), true)
    assert.are.equal(4, #want)
    assert.are.equal(4, #got)
    for i = 1, 4 do
      assert.is_true(math.abs(got[i] - want[i]) <= 1e-12,
        string.format("step %d: resumed %.17g, uninterrupted %.17g", i, got[i], want[i]))
    end
    os.remove(tmpfile("a"))
  end)

  it("without the RNG state the resumed run differs (the test can fail)", function()
    local want = reference_losses()
    local got = resumed_losses(tmpfile("b"), false)
    local differs = false
    for i = 3, 4 do if math.abs(got[i] - want[i]) > 1e-9 then differs = true end end
    assert.is_true(differs)
    os.remove(tmpfile("b"))
  end)

  it("the RNG state round-trips exactly through a checkpoint", function()
    cnn.manual_seed(42)
    cnn.randn(3) -- leave a cached normal, if the generator keeps one
    local st = cnn.get_rng_state()
    cnn.save(tmpfile("c"), { rng = st })
    local back = cnn.load(tmpfile("c")).rng
    assert.are.same(st, back)
    local a = cnn.randn(5):totable()
    cnn.set_rng_state(back)
    assert.are.same(a, cnn.randn(5):totable())
    os.remove(tmpfile("c"))
  end)
end)
