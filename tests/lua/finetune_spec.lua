-- finetune_spec.lua -- what fine-tuning needs (issue 13 point 10):
-- requires_grad_ / freeze / unfreeze on modules, replacing a head,
-- parameter groups with their own learning rates (in the updates, the
-- schedulers and the optimizer's state dict) and ReduceLROnPlateau, whose
-- schedules are worked out by hand below from PyTorch's rules.
local H = require("helpers")

local function close(a, b, what)
  assert(math.abs(a - b) <= 1e-12 * math.max(1, math.abs(b)), ("%s: got %.17g, expected %.17g"):format(what, a, b))
end

describe("freezing", function()
  it("requires_grad_(false) / freeze / unfreeze set every parameter and return the module", function()
    local net = models.lenet5()
    assert.equal(net, net:requires_grad_(false))
    for name, p in net:named_parameters() do assert.is_false(p.requires_grad, name) end
    assert.equal(net, net:unfreeze())
    for name, p in net:named_parameters() do assert.is_true(p.requires_grad, name) end
    assert.equal(net.features, net.features:freeze())
    assert.is_false(net.features[1].weight.requires_grad)
    assert.is_true(net.classifier[2].weight.requires_grad)
    net:requires_grad_() -- no argument: true, as PyTorch
    assert.is_true(net.features[1].weight.requires_grad)
    H.raises(function() net:requires_grad_("no") end, "requires_grad_", "flag")
  end)

  it("a frozen backbone gets no gradient and an optimizer changes only the new head", function()
    cnn.manual_seed(5)
    local net = models.resnet20()
    net:freeze()
    net.fc = nn.Linear(64, 3) -- replaces the head in place (same name)
    local count = 0
    for name in net:named_children() do if name == "fc" then count = count + 1 end end
    assert.equal(1, count)
    H.assert_shape(net:state_dict()["fc.weight"], { 3, 64 })
    local before = net.conv1.weight:clone()
    local head_before = net.fc.weight:clone()
    local opt = optim.SGD(net:parameters(), { lr = 0.1 })
    local loss = F.cross_entropy(net(cnn.randn(4, 3, 32, 32)), cnn.tensor({ 1, 2, 3, 1 }, "int64"))
    loss:backward()
    assert.is_nil(net.conv1.weight.grad)
    assert.is_nil(net.layer3[3].bn2.weight.grad)
    assert.is_not_nil(net.fc.weight.grad)
    opt:step()
    assert.equal(0, (net.conv1.weight - before):abs():sum():item())
    -- SGD: head = head_before - 0.1 * grad
    H.assert_close(net.fc.weight, head_before - net.fc.weight.grad * 0.1, 1e-6, 1e-6)
  end)

  it("a head under a new name registers as a child", function()
    local net = models.resnet20()
    net.head = nn.Linear(10, 2)
    local names = {}
    for name in net:named_parameters() do names[name] = true end
    assert.is_true(names["head.weight"])
    assert.equal(272474 + 22, models.count_parameters(net))
  end)
end)

describe("parameter groups", function()
  local function leaf(v)
    local t = cnn.tensor({ v, v })
    t.requires_grad = true
    return t
  end

  it("each group steps with its own lr; left-out options come from the defaults", function()
    local a, b = leaf(1), leaf(1)
    local opt = optim.SGD({ { params = { a }, lr = 0.1 }, { params = { b } } }, { lr = 0.01, momentum = 0 })
    assert.equal(0.1, opt.param_groups[1].lr)
    assert.equal(0.01, opt.param_groups[2].lr)
    a.grad = cnn.tensor({ 1, 2 }); b.grad = cnn.tensor({ 1, 2 })
    opt:step()
    -- a = 1 - 0.1 * {1, 2}; b = 1 - 0.01 * {1, 2}
    H.assert_close(a, { 0.9, 0.8 }, 1e-7, 0)
    H.assert_close(b, { 0.99, 0.98 }, 1e-7, 0)
  end)

  it("schedulers scale each group's own lr, and state dicts keep them", function()
    local a, b = leaf(1), leaf(1)
    local opt = optim.SGD({ { params = { a }, lr = 0.1 }, { params = { b }, lr = 0.02 } }, { lr = 1 })
    local sched = optim.lr_scheduler.StepLR(opt, 2, { gamma = 0.5 })
    local expect = { { 0.1, 0.02 }, { 0.05, 0.01 }, { 0.05, 0.01 }, { 0.025, 0.005 } }
    for epoch = 1, 4 do
      sched:step() -- epochs 1..4: lr = base * 0.5 ^ floor(epoch / 2)
      local lrs = sched:get_last_lr()
      close(lrs[1], expect[epoch][1], "group 1 epoch " .. epoch)
      close(lrs[2], expect[epoch][2], "group 2 epoch " .. epoch)
      close(opt.param_groups[2].lr, expect[epoch][2], "group 2's lr")
    end
    local sd = opt:state_dict()
    close(sd["param_groups.1.lr"], 0.025, "saved lr 1")
    close(sd["param_groups.2.lr"], 0.005, "saved lr 2")
    local path = os.getenv("CNNSH_TEST_TMP") .. "/finetune_groups.safetensors"
    cnn.save(path, sd)
    local opt2 = optim.SGD({ { params = { leaf(0) } }, { params = { leaf(0) } } }, { lr = 1 })
    opt2:load_state_dict(cnn.load(path))
    close(opt2.param_groups[1].lr, 0.025, "loaded lr 1")
    close(opt2.param_groups[2].lr, 0.005, "loaded lr 2")
    os.remove(path)
  end)
end)

describe("ReduceLROnPlateau", function()
  local function opt_with(lrs)
    local groups = {}
    for i, lr in ipairs(lrs) do
      local t = cnn.zeros(1); t.requires_grad = true
      groups[i] = { params = { t }, lr = lr }
    end
    return optim.SGD(groups, { lr = 1 })
  end

  local function run(sched, opt, metrics, expect, group)
    for i, m in ipairs(metrics) do
      sched:step(m)
      close(opt.param_groups[group or 1].lr, expect[i], "after step " .. i)
      close(sched:get_last_lr()[group or 1], expect[i], "get_last_lr after step " .. i)
    end
  end

  it("min mode, relative threshold: halves after more than patience bad epochs", function()
    local opt = opt_with({ 1 })
    local sched = optim.lr_scheduler.ReduceLROnPlateau(opt, { factor = 0.5, patience = 2 })
    -- 10 best; 9 < 10 * (1 - 1e-4) best; 9.5, 9.2, 9.1 bad 1, 2, 3 > 2 -> 0.5;
    -- 8 best; 8.5 x3 bad 1, 2, 3 -> 0.25
    run(sched, opt, { 10, 9, 9.5, 9.2, 9.1, 8, 8.5, 8.5, 8.5 },
        { 1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25 })
    assert.equal(9, sched.last_epoch)
    assert.equal(8, sched.best)
  end)

  it("a relative threshold ignores tiny improvements", function()
    local opt = opt_with({ 1 })
    local sched = optim.lr_scheduler.ReduceLROnPlateau(opt, { patience = 1, threshold = 0.1 })
    -- 10 best; 9.5 is not < 10 * 0.9 = 9: bad 1; 9.2 bad 2 > 1 -> 0.1
    run(sched, opt, { 10, 9.5, 9.2 }, { 1, 1, 0.1 })
  end)

  it("max mode, absolute threshold, cooldown and min_lr", function()
    local opt = opt_with({ 1 })
    local sched = optim.lr_scheduler.ReduceLROnPlateau(opt, { mode = "max", factor = 0.5, patience = 0,
      threshold = 0.1, threshold_mode = "abs", cooldown = 2, min_lr = 0.3 })
    -- 1 best.  1.05 not > 1.1: bad 1 > 0 -> 0.5, cooldown 2.
    -- 1.2 best; cooldown 2 -> 1.  1.2 not > 1.3: bad, but cooldown 1 -> 0 clears it.
    -- 1.2 bad 1 > 0 -> max(0.25, 0.3) = 0.3, cooldown 2.  Two steps in cooldown,
    -- then 1.2 bad -> max(0.15, 0.3) = 0.3: no change (0 <= eps).
    run(sched, opt, { 1, 1.05, 1.2, 1.2, 1.2, 1.2, 1.2, 1.2 },
        { 1, 0.5, 0.5, 0.5, 0.3, 0.3, 0.3, 0.3 })
    assert.equal(2, sched.cooldown_counter)
  end)

  it("min_lr per group, and eps skips tiny changes", function()
    local opt = opt_with({ 1, 0.1, 1e-9 })
    local sched = optim.lr_scheduler.ReduceLROnPlateau(opt, { factor = 0.5, patience = 0, min_lr = { 0, 0.08, 0 } })
    sched:step(5)
    sched:step(5) -- bad 1 > 0: 0.5; max(0.05, 0.08) = 0.08; 1e-9 - 5e-10 <= 1e-8: kept
    local lrs = sched:get_last_lr()
    close(lrs[1], 0.5, "group 1"); close(lrs[2], 0.08, "group 2"); close(lrs[3], 1e-9, "group 3")
    sched:step(5)
    lrs = sched:get_last_lr()
    close(lrs[1], 0.25, "group 1"); close(lrs[2], 0.08, "group 2")
  end)

  it("state_dict round-trips through cnn.save, best = inf included", function()
    local opt = opt_with({ 1 })
    local sched = optim.lr_scheduler.ReduceLROnPlateau(opt, { patience = 3 })
    local path = os.getenv("CNNSH_TEST_TMP") .. "/plateau.safetensors"
    cnn.save(path, sched:state_dict())
    local fresh = optim.lr_scheduler.ReduceLROnPlateau(opt, { patience = 3 })
    fresh:load_state_dict(cnn.load(path))
    assert.equal(math.huge, fresh.best)
    sched:step(3); sched:step(4); sched:step(4)
    cnn.save(path, sched:state_dict())
    fresh:load_state_dict(cnn.load(path))
    assert.equal(3, fresh.best); assert.equal(2, fresh.num_bad_epochs); assert.equal(3, fresh.last_epoch)
    os.remove(path)
  end)

  it("rejects bad options and metrics", function()
    local opt = opt_with({ 1, 1 })
    local P = optim.lr_scheduler.ReduceLROnPlateau
    assert.equal(P, optim.ReduceLROnPlateau)
    H.raises(function() P(opt, { factor = 1 }) end, "ReduceLROnPlateau", "factor")
    H.raises(function() P(opt, { mode = "up" }) end, "ReduceLROnPlateau", "mode", "'min' or 'max'")
    H.raises(function() P(opt, { threshold_mode = "x" }) end, "threshold_mode")
    H.raises(function() P(opt, { patience = -1 }) end, "patience")
    H.raises(function() P(opt, { min_lr = { 0 } }) end, "min_lr has 1 entries", "2 parameter groups")
    H.raises(function() P(opt, { verbose = true }) end, "unknown option 'verbose'")
    H.raises(function() P({}, {}) end, "optimizer")
    H.raises(function() P(opt):step("x") end, "metric")
  end)
end)
