-- optim_spec.lua -- tests of stdlib/optim: each optimizer's first steps on a
-- 2-element float64 parameter against the update rules of the PyTorch
-- documentation, written out again here per element in plain Lua numbers;
-- parameter groups; state_dict round trips; scheduler lr sequences against
-- their closed forms.
-- Run: cd tests/lua && CNNSH_STDLIB=../../stdlib ../../build/repl/cnnsh /usr/bin/busted optim_spec.lua

local function close(a, b, tol, what)
  tol = tol or 1e-12
  if math.abs(a - b) > tol * (1 + math.abs(b)) then
    error(string.format("%s: got %.15g, expected %.15g", what or "value", a, b), 2)
  end
end

-- The loss sum(C * p + Q * p^2 / 2) has gradient C + Q * p.
local P0, C, Q = { 1.0, -2.0 }, { 0.5, -1.5 }, { 0.3, 0.7 }

local function grad_ref(p)
  return { C[1] + Q[1] * p[1], C[2] + Q[2] * p[2] }
end

local function new_param()
  local p = cnn.tensor(P0, "float64")
  p.requires_grad = true
  return p
end

local c_t, q_t = cnn.tensor(C, "float64"), cnn.tensor(Q, "float64")

local function backward_loss(p)
  ((p * c_t):sum() + (p * p * q_t):sum() / 2):backward()
end

-- Runs `steps` steps of optimizer `make({p})` and returns p as a Lua list.
local function run(make, steps)
  local p = new_param()
  local opt = make({ p })
  for _ = 1, steps do
    opt:zero_grad()
    backward_loss(p)
    opt:step()
  end
  return p:totable(), opt
end

local function check(got, want, what)
  for i = 1, 2 do close(got[i], want[i], 1e-12, what .. "[" .. i .. "]") end
end

-- ---- references (PyTorch docs' algorithms, per element) ------------------------

local function sgd_ref(o, steps)
  local p, buf = { P0[1], P0[2] }, {}
  for t = 1, steps do
    local g = grad_ref(p)
    for i = 1, 2 do
      local gi = g[i]
      if o.maximize then gi = -gi end
      gi = gi + (o.weight_decay or 0) * p[i]
      local mu = o.momentum or 0
      if mu ~= 0 then
        if t == 1 then buf[i] = gi else buf[i] = mu * buf[i] + (1 - (o.dampening or 0)) * gi end
        if o.nesterov then gi = gi + mu * buf[i] else gi = buf[i] end
      end
      p[i] = p[i] - o.lr * gi
    end
  end
  return p
end

local function adam_ref(o, steps, decoupled)
  local b1, b2 = o.betas and o.betas[1] or 0.9, o.betas and o.betas[2] or 0.999
  local eps, lr = o.eps or 1e-8, o.lr
  local wd = o.weight_decay or (decoupled and 1e-2 or 0)
  local p, m, v, vmax = { P0[1], P0[2] }, { 0, 0 }, { 0, 0 }, { 0, 0 }
  for t = 1, steps do
    local g = grad_ref(p)
    for i = 1, 2 do
      local gi = g[i]
      if decoupled then p[i] = p[i] - lr * wd * p[i] else gi = gi + wd * p[i] end
      m[i] = b1 * m[i] + (1 - b1) * gi
      v[i] = b2 * v[i] + (1 - b2) * gi * gi
      local mhat = m[i] / (1 - b1 ^ t)
      local vhat
      if o.amsgrad then
        vmax[i] = math.max(vmax[i], v[i])
        vhat = vmax[i] / (1 - b2 ^ t)
      else
        vhat = v[i] / (1 - b2 ^ t)
      end
      p[i] = p[i] - lr * mhat / (math.sqrt(vhat) + eps)
    end
  end
  return p
end

local function rmsprop_ref(o, steps)
  local alpha, eps, mu = o.alpha or 0.99, o.eps or 1e-8, o.momentum or 0
  local p, v, gave, buf = { P0[1], P0[2] }, { 0, 0 }, { 0, 0 }, { 0, 0 }
  for _ = 1, steps do
    local g = grad_ref(p)
    for i = 1, 2 do
      local gi = g[i] + (o.weight_decay or 0) * p[i]
      v[i] = alpha * v[i] + (1 - alpha) * gi * gi
      local vt = v[i]
      if o.centered then
        gave[i] = alpha * gave[i] + (1 - alpha) * gi
        vt = vt - gave[i] * gave[i]
      end
      if mu > 0 then
        buf[i] = mu * buf[i] + gi / (math.sqrt(vt) + eps)
        p[i] = p[i] - o.lr * buf[i]
      else
        p[i] = p[i] - o.lr * gi / (math.sqrt(vt) + eps)
      end
    end
  end
  return p
end

describe("optimizer updates match the published formulas", function()
  local sgd_cases = {
    { lr = 0.1 },
    { lr = 0.1, momentum = 0.9 },
    { lr = 0.05, momentum = 0.8, dampening = 0.3, weight_decay = 0.1 },
    { lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.01 },
    { lr = 0.1, maximize = true },
  }
  for k, o in ipairs(sgd_cases) do
    it("SGD case " .. k, function()
      check(run(function(ps) return optim.SGD(ps, o) end, 3), sgd_ref(o, 3), "SGD " .. k)
    end)
  end

  local adam_cases = {
    { lr = 0.1 },
    { lr = 0.05, betas = { 0.8, 0.9 }, eps = 1e-6, weight_decay = 0.1 },
    { lr = 0.1, amsgrad = true },
  }
  for k, o in ipairs(adam_cases) do
    it("Adam case " .. k, function()
      check(run(function(ps) return optim.Adam(ps, o) end, 3), adam_ref(o, 3, false), "Adam " .. k)
    end)
    it("AdamW case " .. k, function()
      check(run(function(ps) return optim.AdamW(ps, o) end, 3), adam_ref(o, 3, true), "AdamW " .. k)
    end)
  end

  local rms_cases = {
    { lr = 0.01 },
    { lr = 0.01, alpha = 0.9, momentum = 0.5, weight_decay = 0.1 },
    { lr = 0.01, centered = true, momentum = 0.9 },
  }
  for k, o in ipairs(rms_cases) do
    it("RMSprop case " .. k, function()
      check(run(function(ps) return optim.RMSprop(ps, o) end, 3), rmsprop_ref(o, 3), "RMSprop " .. k)
    end)
  end

  it("skips parameters without a gradient", function()
    local p = new_param()
    local opt = optim.Adam({ p }, { lr = 0.1 })
    opt:step()
    check(p:totable(), P0, "untouched")
  end)
end)

describe("optimizer groups and options", function()
  it("uses per-group options over the defaults", function()
    local a, b = new_param(), new_param()
    local opt = optim.SGD({ { params = { a }, lr = 0.1 }, { params = { b } } }, { lr = 0.01, momentum = 0.9 })
    assert.are.equal(0.1, opt.param_groups[1].lr)
    assert.are.equal(0.01, opt.param_groups[2].lr)
    assert.are.equal(0.9, opt.param_groups[2].momentum)
    for _ = 1, 3 do
      opt:zero_grad()
      backward_loss(a)
      backward_loss(b)
      opt:step()
    end
    check(a:totable(), sgd_ref({ lr = 0.1, momentum = 0.9 }, 3), "group 1")
    check(b:totable(), sgd_ref({ lr = 0.01, momentum = 0.9 }, 3), "group 2")
  end)

  it("takes a module's parameters and clears gradients", function()
    local net = nn.Linear(2, 1)
    local opt = optim.SGD(net, { lr = 0.1 })
    net(cnn.randn(3, 2)):sum():backward()
    opt:zero_grad()
    assert.is_nil(net.weight.grad)
  end)

  it("rejects unknown options and bad values", function()
    local ok, e = pcall(optim.SGD, { new_param() }, { lr = 0.1, moment = 0.9 })
    assert.is_false(ok)
    assert.truthy(tostring(e):find("unknown option 'moment'", 1, true), e)
    ok, e = pcall(optim.SGD, { new_param() }, { lr = 0.1, nesterov = true })
    assert.is_false(ok)
    assert.truthy(tostring(e):find("nesterov", 1, true), e)
    ok = pcall(optim.Adam, { new_param() }, { lr = -1 })
    assert.is_false(ok)
    local p = new_param()
    ok = pcall(optim.SGD, { p, p }, { lr = 0.1 })
    assert.is_false(ok)
  end)
end)

describe("optimizer state dicts", function()
  local function trained(make, steps)
    local p = new_param()
    local opt = make({ p })
    for _ = 1, steps do
      opt:zero_grad(); backward_loss(p); opt:step()
    end
    return p, opt
  end

  local makers = {
    SGD = function(ps) return optim.SGD(ps, { lr = 0.1, momentum = 0.9 }) end,
    Adam = function(ps) return optim.Adam(ps, { lr = 0.1, amsgrad = true }) end,
    AdamW = function(ps) return optim.AdamW(ps, { lr = 0.1 }) end,
    RMSprop = function(ps) return optim.RMSprop(ps, { lr = 0.01, centered = true, momentum = 0.5 }) end,
  }

  for name, make in pairs(makers) do
    it(name .. " resumes exactly from its state dict", function()
      local pa, oa = trained(make, 2)
      local sd = oa:state_dict()
      for k, v in pairs(sd) do
        local tv = type(v)
        assert.is_true(cnn.is_tensor(v) or tv == "number" or tv == "boolean" or tv == "string",
                       "flat value " .. k)
      end
      -- a fresh optimizer with other settings, on a copy of the parameter
      local pb = pa:detach():clone()
      pb.requires_grad = true
      local ob = make({ pb })
      ob.param_groups[1].lr = 123
      ob:load_state_dict(sd)
      assert.are.equal(oa.param_groups[1].lr, ob.param_groups[1].lr)
      for _, pair in ipairs({ { pa, oa }, { pb, ob } }) do
        pair[2]:zero_grad(); backward_loss(pair[1]); pair[2]:step()
      end
      check(pb:totable(), pa:totable(), name .. " after resume")
    end)
  end

  it("survives cnn.save / cnn.load", function()
    if not (cnn.save and cnn.load) then pending("cnn.save is not bound yet") return end
    local pa, oa = trained(makers.Adam, 2)
    local path = os.tmpname()
    cnn.save(path, oa:state_dict())
    local loaded = cnn.load(path)
    os.remove(path)
    local pb = pa:detach():clone()
    pb.requires_grad = true
    local ob = makers.Adam({ pb })
    ob:load_state_dict(loaded)
    for _, pair in ipairs({ { pa, oa }, { pb, ob } }) do
      pair[2]:zero_grad(); backward_loss(pair[1]); pair[2]:step()
    end
    check(pb:totable(), pa:totable(), "after cnn.load")
  end)

  it("rejects a state dict of another layout", function()
    local _, oa = trained(makers.SGD, 1)
    local ob = optim.SGD({ new_param(), new_param() }, { lr = 0.1 })
    local ok, e = pcall(ob.load_state_dict, ob, oa:state_dict())
    assert.is_false(ok)
    assert.truthy(tostring(e):find("parameters", 1, true), e)
  end)
end)

describe("learning-rate schedulers", function()
  local function sgd(lr) return optim.SGD({ new_param() }, { lr = lr, momentum = 0.9 }) end

  -- Checks lr(epoch) for epochs 0..n-1, stepping in between.
  local function sequence(sched, opt, n, want)
    for epoch = 0, n - 1 do
      close(opt.param_groups[1].lr, want(epoch), 1e-12, "lr at epoch " .. epoch)
      close(sched:get_last_lr()[1], want(epoch), 1e-12, "get_last_lr at epoch " .. epoch)
      sched:step()
    end
  end

  it("StepLR", function()
    local opt = sgd(0.1)
    local s = optim.lr_scheduler.StepLR(opt, 3, { gamma = 0.5 })
    sequence(s, opt, 10, function(e) return 0.1 * 0.5 ^ math.floor(e / 3) end)
  end)

  it("MultiStepLR", function()
    local opt = sgd(1.0)
    local s = optim.lr_scheduler.MultiStepLR(opt, { 5, 2 }, { gamma = 0.1 })
    local want = { 1, 1, 0.1, 0.1, 0.1, 0.01, 0.01, 0.01 }
    sequence(s, opt, 8, function(e) return want[e + 1] end)
  end)

  it("CosineAnnealingLR", function()
    local opt = sgd(0.1)
    local s = optim.CosineAnnealingLR(opt, 10, { eta_min = 0.001 })
    sequence(s, opt, 10, function(e)
      return 0.001 + (0.1 - 0.001) * (1 + math.cos(math.pi * e / 10)) / 2
    end)
    close(opt.param_groups[1].lr, 0.001, 1e-12, "at T_max")
  end)

  it("OneCycleLR: lr and momentum over the cycle", function()
    local opt = sgd(0.5)
    local s = optim.lr_scheduler.OneCycleLR(opt, { max_lr = 1.0, total_steps = 10 })
    -- initial 1/25 = 0.04, minimum 0.04/1e4; warm-up ends at step 0.3*10-1 = 2
    local function cosine(a, b, pct) return b + (a - b) / 2 * (1 + math.cos(math.pi * pct)) end
    local function lr(st)
      if st <= 2 then return cosine(0.04, 1.0, st / 2) end
      return cosine(1.0, 4e-6, (st - 2) / 7)
    end
    local function mom(st)
      if st <= 2 then return cosine(0.95, 0.85, st / 2) end
      return cosine(0.85, 0.95, (st - 2) / 7)
    end
    for st = 0, 10 do
      close(opt.param_groups[1].lr, lr(st), 1e-12, "lr at step " .. st)
      close(opt.param_groups[1].momentum, mom(st), 1e-12, "momentum at step " .. st)
      if st < 10 then s:step() end
    end
    assert.is_false(pcall(s.step, s)) -- step 11 of 10
  end)

  it("OneCycleLR cycles Adam's beta1, linear annealing", function()
    local opt = optim.Adam({ new_param() }, { lr = 0.1 })
    local s = optim.OneCycleLR(opt, { max_lr = 0.1, epochs = 2, steps_per_epoch = 5,
                                      anneal_strategy = "linear", pct_start = 0.4 })
    -- warm-up ends at step 0.4*10-1 = 3
    for st = 0, 9 do
      local lr, b1
      if st <= 3 then
        lr, b1 = 0.004 + (0.1 - 0.004) * st / 3, 0.95 + (0.85 - 0.95) * st / 3
      else
        lr, b1 = 0.1 + (0.004 / 1e4 - 0.1) * (st - 3) / 6, 0.85 + (0.95 - 0.85) * (st - 3) / 6
      end
      close(opt.param_groups[1].lr, lr, 1e-12, "lr at step " .. st)
      close(opt.param_groups[1].betas[1], b1, 1e-12, "beta1 at step " .. st)
      close(opt.param_groups[1].betas[2], 0.999, 0, "beta2")
      s:step()
    end
    assert.are.equal(0.9, optim.Adam.defaults.betas[1]) -- defaults untouched
  end)

  it("scheduler state round-trips", function()
    local opt = sgd(0.1)
    local s = optim.StepLR(opt, 2, { gamma = 0.5 })
    for _ = 1, 5 do s:step() end
    local opt2 = sgd(0.1)
    local s2 = optim.StepLR(opt2, 2, { gamma = 0.5 })
    s2:load_state_dict(s:state_dict())
    close(s2:get_last_lr()[1], s:get_last_lr()[1], 0, "lr")
    close(opt2.param_groups[1].lr, 0.1 * 0.25, 1e-12, "lr at epoch 5")
  end)
end)

-- ---- Adam over a whole group in one call (speed work, issue 19) ----------------
-- cnn.fused.adam_many splits the concatenated elements of all parameters
-- between threads (a split may fall inside a tensor): it must give exactly
-- what cnn.fused.adam gives tensor by tensor, which the formulas above check.
describe("cnn.fused.adam_many", function()
  local SIZES = { 7, 40000, 13, 25001, 1 } -- > the parallel threshold in all, odd splits

  local function tensors(dtype)
    local t = {}
    for i, n in ipairs(SIZES) do
      t[i] = { p = cnn.randn(n):to(dtype), g = cnn.randn(n):to(dtype), m = cnn.randn(n):to(dtype) * 0.1,
               v = cnn.rand(n):to(dtype) * 0.01, x = cnn.rand(n):to(dtype) * 0.02 }
    end
    return t
  end

  local function clone_all(t)
    local c = {}
    for i, e in ipairs(t) do
      c[i] = { p = e.p:clone(), g = e.g:clone(), m = e.m:clone(), v = e.v:clone(), x = e.x:clone() }
    end
    return c
  end

  local function lists(t, ams)
    local ps, gs, ms, vs, xs, steps = {}, {}, {}, {}, ams and {} or nil, {}
    for i, e in ipairs(t) do
      ps[i], gs[i], ms[i], vs[i], steps[i] = e.p, e.g, e.m, e.v, i + 2 -- steps differ per tensor
      if xs then xs[i] = e.x end
    end
    return ps, gs, ms, vs, xs, steps
  end

  local function same(a, b, what)
    assert.equal(0, (a - b):abs():max():item(), what)
  end

  for _, c in ipairs({ { "float32", false, 0, false }, { "float32", true, 0.1, false },
                       { "float32", false, 0.05, true }, { "float64", true, 0.1, true } }) do
    local dtype, ams, wd, decoupled = c[1], c[2], c[3], c[4]
    it(("equals the per-tensor update bit for bit (%s, amsgrad %s, weight_decay %g, decoupled %s)")
      :format(dtype, ams, wd, decoupled), function()
      cnn.manual_seed(5)
      local a = tensors(dtype)
      local b = clone_all(a)
      local ps, gs, ms, vs, xs, steps = lists(a, ams)
      cnn.fused.adam_many(ps, gs, ms, vs, xs, steps, 1e-3, 0.9, 0.999, 1e-8, wd, decoupled)
      for i, e in ipairs(b) do
        cnn.fused.adam(e.p, e.g, e.m, e.v, ams and e.x or nil, 1e-3, 0.9, 0.999, 1e-8, wd, decoupled, i + 2)
      end
      for i = 1, #a do
        for _, k in ipairs({ "p", "m", "v", "x" }) do same(a[i][k], b[i][k], k .. i) end
      end
    end)
  end

  it("matches the formula per element in float32 (first, split and last elements)", function()
    cnn.manual_seed(6)
    local a = tensors("float32")
    local b = clone_all(a)
    local ps, gs, ms, vs, _, steps = lists(a, false)
    cnn.fused.adam_many(ps, gs, ms, vs, nil, steps, 1e-2, 0.9, 0.999, 1e-8, 0, false)
    for i, n in ipairs(SIZES) do
      for _, j in ipairs({ 1, (n + 1) // 2, n }) do
        local g, m, v, p = b[i].g[j]:item(), b[i].m[j]:item(), b[i].v[j]:item(), b[i].p[j]:item()
        local t = i + 2
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        local want = p - 1e-2 / (1 - 0.9 ^ t) * m / (math.sqrt(v) / math.sqrt(1 - 0.999 ^ t) + 1e-8)
        close(a[i].p[j]:item(), want, 1e-5, ("p%d[%d]"):format(i, j))
      end
    end
  end)

  it("falls back to one call per tensor for mixed dtypes, with the same result", function()
    cnn.manual_seed(7)
    local a32, a64 = tensors("float32")[2], tensors("float64")[1]
    local b32, b64 = clone_all({ a32 })[1], clone_all({ a64 })[1]
    cnn.fused.adam_many({ a32.p, a64.p }, { a32.g, a64.g }, { a32.m, a64.m }, { a32.v, a64.v }, nil, { 1, 1 },
                        1e-3, 0.9, 0.999, 1e-8, 0, false)
    cnn.fused.adam(b32.p, b32.g, b32.m, b32.v, nil, 1e-3, 0.9, 0.999, 1e-8, 0, false, 1)
    cnn.fused.adam(b64.p, b64.g, b64.m, b64.v, nil, 1e-3, 0.9, 0.999, 1e-8, 0, false, 1)
    same(a32.p, b32.p, "float32 p")
    same(a64.p, b64.p, "float64 p")
  end)

  it("validates every tensor before updating any", function()
    local p1, p2 = cnn.zeros(3), cnn.zeros(4)
    local z = function(n) return cnn.zeros(n) end
    assert.error_matches(function()
      cnn.fused.adam_many({ p1, p2 }, { cnn.ones(3), cnn.ones(5) }, { z(3), z(4) }, { z(3), z(4) }, nil, { 1, 1 },
                          0.1, 0.9, 0.999, 1e-8, 0, false)
    end, "adam_update: gradient 5 does not match the parameter 4")
    assert.equal(0, p1:abs():sum():item()) -- the first, valid parameter was left alone
    assert.error_matches(function()
      cnn.fused.adam_many({ p1 }, { cnn.ones(3) }, { z(3) }, { z(3) }, nil, { 0 }, 0.1, 0.9, 0.999, 1e-8, 0, false)
    end, "step must be >= 1")
    assert.error_matches(function()
      cnn.fused.adam_many({ p1, p2 }, { cnn.ones(3) }, { z(3) }, { z(3) }, nil, { 1 }, 0.1, 0.9, 0.999, 1e-8, 0, false)
    end, "adam_many: grads has 1 entries, params 2")
    assert.error_matches(function()
      cnn.fused.adam_many({ p1 }, { "g" }, { z(3) }, { z(3) }, nil, { 1 }, 0.1, 0.9, 0.999, 1e-8, 0, false)
    end, "adam_many: grads%[1%] is not a tensor")
    assert.error_matches(function()
      cnn.fused.adam_many(nil, {}, {}, {}, nil, {}, 0.1, 0.9, 0.999, 1e-8, 0, false)
    end, "adam_many")
    assert.error_matches(function()
      cnn.fused.adam_many({ p1 }, { cnn.ones(3) }, { z(3) }, { z(3) }, nil, { 1.5 }, 0.1, 0.9, 0.999, 1e-8, 0, false)
    end, "adam_many: steps%[1%] is not an integer")
    assert.error_matches(function()
      cnn.fused.adam_many({ p1 }, { cnn.ones(3) }, { z(3) }, { z(3) }, { z(4) }, { 1 }, 0.1, 0.9, 0.999, 1e-8, 0, false)
    end, "max_exp_avg_sq")
    assert.equal(0, p1:abs():sum():item())
  end)

  it("is what optim.Adam runs: a group steps in one call", function()
    local calls, saved = 0, cnn.fused.adam_many
    cnn.fused.adam_many = function(...) calls = calls + 1; return saved(...) end
    local ok, err = pcall(function()
      local net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
      local opt = optim.Adam(net:parameters(), { lr = 1e-3 })
      net(cnn.randn(5, 3)):sum():backward()
      opt:step()
    end)
    cnn.fused.adam_many = saved
    assert(ok, err)
    assert.equal(1, calls)
  end)
end)
