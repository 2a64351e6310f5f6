-- losses_spec.lua -- the losses of issue 13 through the bindings: F.* against
-- naive Lua loops over plain tables (PyTorch's definitions), reductions,
-- finite-difference gradients in float64 for input and target, the loss
-- modules and their errors.
package.path = "./?.lua;" .. package.path
local H = require("helpers")
local close, raises = H.assert_close, H.raises

local function f64(t) return cnn.tensor(t, "float64") end
local function sum(xs) local s = 0 for _, v in ipairs(xs) do s = s + v end return s end
local function mean(xs) return sum(xs) / #xs end

-- elementwise reference over two flat lists
local function ew(a, b, f)
  local r = {}
  for i = 1, #a do r[i] = f(a[i], b[i]) end
  return r
end

local x = { -2.5, -1, -0.3, 0, 0.4, 1.2, 3, 0.7 }
local y = { 0.5, -1, 0.2, 0.5, -0.4, 1.2, -1, 2.2 }

describe("regression losses", function()
  local refs = {
    { "l1_loss", {}, function(a, b) return math.abs(a - b) end },
    { "smooth_l1_loss", {}, function(a, b)
        local d = math.abs(a - b) return d < 1 and 0.5 * d * d or d - 0.5 end },
    { "smooth_l1_loss", { beta = 0.5 }, function(a, b)
        local d = math.abs(a - b) return d < 0.5 and 0.5 * d * d / 0.5 or d - 0.25 end },
    { "smooth_l1_loss", { beta = 0 }, function(a, b) return math.abs(a - b) end },
    { "huber_loss", {}, function(a, b)
        local d = math.abs(a - b) return d < 1 and 0.5 * d * d or d - 0.5 end },
    { "huber_loss", { delta = 2 }, function(a, b)
        local d = math.abs(a - b) return d < 2 and 0.5 * d * d or 2 * (d - 1) end },
  }
  for _, r in ipairs(refs) do
    local name, opts, f = r[1], r[2], r[3]
    it(name .. " matches a naive loop in every reduction", function()
      local per = ew(x, y, f)
      local function o(red) local t = { reduction = red } for k, v in pairs(opts) do t[k] = v end return t end
      close(F[name](f64(x), f64(y), o("none")), per, 1e-15, 1e-14)
      close(F[name](f64(x), f64(y), o("sum")), { sum(per) }, 1e-14, 1e-14)
      close(F[name](f64(x), f64(y), o("mean")), { mean(per) }, 1e-14, 1e-14)
      if next(opts) == nil then close(F[name](f64(x), f64(y)), { mean(per) }, 1e-14, 1e-14) end
    end)
    it(name .. " has the gradient of finite differences (input and target)", function()
      local xs = { -2.5, -0.3, 0.4, 1.2, 3 } -- |x - y| away from 0 and from beta/delta
      local ys = { 0.5, 0.2, -0.4, 1.9, -1 }
      H.gradcheck(function(a, b) return F[name](a, b, opts) end, { f64(xs), f64(ys) }, 1e-6)
    end)
  end

  it("broadcasts the target, and the gradient at d = 0 is 0 (sign(0))", function()
    close(F.l1_loss(f64({ { 1, 2 }, { 3, 4 } }), f64({ 1, 1 }), { reduction = "sum" }), { 0 + 1 + 2 + 3 }, 1e-15, 0)
    local a = f64({ 1, 2 }):requires_grad_()
    F.l1_loss(a, f64({ 1, 0 }), { reduction = "sum" }):backward()
    close(a.grad, { 0, 1 }, 0, 0)
  end)
end)

describe("kl_div", function()
  local p = { 0.2, 0.5, 0.3, 0.0, 0.6, 0.4 } -- a zero target counts for nothing
  local q = { 0.1, 0.6, 0.3, 0.5, 0.25, 0.25 }
  local logq = {}
  for i, v in ipairs(q) do logq[i] = math.log(v) end
  local per = {}
  for i = 1, #p do per[i] = p[i] > 0 and p[i] * (math.log(p[i]) - logq[i]) or 0 end

  it("matches a naive loop; batchmean divides by the batch size", function()
    local lq, t = f64(logq):view(2, 3), f64(p):view(2, 3)
    close(F.kl_div(lq, t, { reduction = "none" }), per, 1e-15, 1e-14)
    close(F.kl_div(lq, t, { reduction = "sum" }), { sum(per) }, 1e-14, 1e-14)
    close(F.kl_div(lq, t), { mean(per) }, 1e-14, 1e-14)
    close(F.kl_div(lq, t, { reduction = "batchmean" }), { sum(per) / 2 }, 1e-14, 1e-14)
    local logp = {}
    for i, v in ipairs(p) do logp[i] = v > 0 and math.log(v) or -math.huge end
    local lt = f64({ math.log(0.2), math.log(0.5), math.log(0.3), math.log(0.1), math.log(0.6), math.log(0.3) })
    local ref = 0
    for i = 1, 6 do
      local tv = lt:view(-1)[i]:item()
      ref = ref + math.exp(tv) * (tv - logq[i])
    end
    close(F.kl_div(lq, lt:view(2, 3), { reduction = "sum", log_target = true }), { ref }, 1e-14, 1e-14)
  end)

  it("has the gradient of finite differences", function()
    local pos = { 0.2, 0.5, 0.3, 0.1, 0.6, 0.3 }
    H.gradcheck(function(a, b) return F.kl_div(a, b, { reduction = "batchmean" }) end,
      { f64(logq):view(2, 3), f64(pos):view(2, 3) }, 1e-6)
    H.gradcheck(function(a, b) return F.kl_div(a, b, { log_target = true }) end,
      { f64(logq):view(2, 3), f64(logq):view(2, 3) * 0.5 }, 1e-6)
  end)
end)

describe("binary_cross_entropy", function()
  local pr = { 0.1, 0.5, 0.9, 0.3, 0.999, 0.02 }
  local yt = { 0, 1, 1, 0.3, 0, 1 }
  local w = { 1, 2, 0.5, 1, 1, 3 }
  it("matches a naive loop, with weights", function()
    local per, wper = {}, {}
    for i = 1, #pr do
      per[i] = -(yt[i] * math.log(pr[i]) + (1 - yt[i]) * math.log(1 - pr[i]))
      wper[i] = w[i] * per[i]
    end
    close(F.binary_cross_entropy(f64(pr), f64(yt), { reduction = "none" }), per, 1e-14, 1e-13)
    close(F.binary_cross_entropy(f64(pr), f64(yt)), { mean(per) }, 1e-14, 1e-13)
    close(F.binary_cross_entropy(f64(pr), f64(yt), { weight = f64(w), reduction = "sum" }), { sum(wper) }, 1e-13, 1e-13)
    -- the logs are clamped at -100, as PyTorch's
    close(F.binary_cross_entropy(f64({ 0, 1 }), f64({ 1, 0 }), { reduction = "none" }), { 100, 100 }, 0, 0)
  end)
  it("has the gradient of finite differences", function()
    H.gradcheck(function(a, b) return F.binary_cross_entropy(a, b) end, { f64(pr), f64(yt) }, 1e-6)
  end)
  it("refuses probabilities outside [0, 1]", function()
    raises(function() F.binary_cross_entropy(f64({ 0.5, 1.5 }), f64({ 0, 1 })) end, "binary_cross_entropy", "[0, 1]")
    raises(function() F.binary_cross_entropy(f64({ 0.5, 0 / 0 }), f64({ 0, 1 })) end, "binary_cross_entropy", "[0, 1]")
    raises(function() F.binary_cross_entropy(f64({ 0.5, 0.5 }), f64({ 0, 1, 1 })) end, "binary_cross_entropy", "shape")
  end)
end)

describe("cross_entropy with probability targets", function()
  local logits = { { 1.0, -0.5, 2.0 }, { 0.3, 0.3, -1.0 } }
  local probs = { { 0.2, 0.3, 0.5 }, { 1.0, 0.0, 0.0 } }
  local wc = { 1.0, 2.0, 0.5 }
  local function ref(e, weights)
    local per = {}
    for i = 1, 2 do
      local m, z = -math.huge, 0
      for c = 1, 3 do m = math.max(m, logits[i][c]) end
      for c = 1, 3 do z = z + math.exp(logits[i][c] - m) end
      local s = 0
      for c = 1, 3 do
        local lp = logits[i][c] - m - math.log(z)
        local t = probs[i][c] * (1 - e) + e / 3
        s = s - (weights and weights[c] or 1) * t * lp
      end
      per[i] = s
    end
    return per
  end

  it("matches a naive loop (weights, label smoothing, reductions)", function()
    local x, t = f64(logits), f64(probs)
    close(F.cross_entropy(x, t, { reduction = "none" }), ref(0), 1e-14, 1e-13)
    close(F.cross_entropy(x, t), { mean(ref(0)) }, 1e-14, 1e-13)
    close(F.cross_entropy(x, t, { label_smoothing = 0.1, reduction = "sum" }), { sum(ref(0.1)) }, 1e-14, 1e-13)
    -- the mean divides by N, not by the weights (PyTorch's rule for probabilities)
    close(F.cross_entropy(x, t, { weight = f64(wc) }), { mean(ref(0, wc)) }, 1e-14, 1e-13)
    -- one-hot probabilities give the class-label loss
    local onehot = f64({ { 0, 0, 1 }, { 0, 1, 0 } })
    close(F.cross_entropy(x, onehot), F.cross_entropy(x, cnn.tensor({ 3, 2 }, "int64")), 1e-14, 1e-14)
  end)

  it("takes N x C x H x W inputs (classes at dim 2)", function()
    cnn.manual_seed(3)
    local x4 = cnn.randn(2, 3, 2, 2, "float64")
    local t4 = F.softmax(cnn.randn(2, 3, 2, 2, "float64"), 2)
    local manual = -(F.log_softmax(x4, 2) * t4):sum(2)
    close(F.cross_entropy(x4, t4, { reduction = "none" }), manual, 1e-14, 1e-13)
  end)

  it("has the gradient of finite differences (logits and target)", function()
    H.gradcheck(function(a, b) return F.cross_entropy(a, b, { label_smoothing = 0.2, weight = f64(wc) }) end,
      { f64(logits), f64(probs) }, 1e-6)
  end)

  it("errors", function()
    local x = f64(logits)
    raises(function() F.cross_entropy(x, f64({ 1, 2 })) end, "cross_entropy", "int64", "2x3")
    raises(function() F.cross_entropy(x, f64(probs), { ignore_index = 1 }) end, "cross_entropy", "ignore_index")
    raises(function() F.cross_entropy(x, f64(probs), { weight = f64({ 1, 2 }) }) end, "cross_entropy", "weight")
  end)
end)

describe("loss modules", function()
  local a, b = f64(x):view(2, 4), f64(y):view(2, 4)
  it("call F with their options", function()
    close(nn.MSELoss()(a, b), F.mse_loss(a, b), 0, 0)
    close(nn.L1Loss({ reduction = "sum" })(a, b), F.l1_loss(a, b, { reduction = "sum" }), 0, 0)
    close(nn.SmoothL1Loss({ beta = 0.5 })(a, b), F.smooth_l1_loss(a, b, { beta = 0.5 }), 0, 0)
    close(nn.HuberLoss({ delta = 2, reduction = "none" })(a, b), F.huber_loss(a, b, { delta = 2, reduction = "none" }), 0, 0)
    local lp, t = F.log_softmax(a, 2), F.softmax(b, 2)
    close(nn.KLDivLoss({ reduction = "batchmean" })(lp, t), F.kl_div(lp, t, { reduction = "batchmean" }), 0, 0)
    local labels = cnn.tensor({ 2, 4 }, "int64")
    local w = f64({ 1, 2, 3, 4 })
    close(nn.CrossEntropyLoss({ weight = w, label_smoothing = 0.1 })(a, labels),
      F.cross_entropy(a, labels, { weight = w, label_smoothing = 0.1 }), 0, 0)
    close(nn.CrossEntropyLoss()(a, t), F.cross_entropy(a, t), 0, 0)
    close(nn.NLLLoss({ ignore_index = 2 })(lp, labels), F.nll_loss(lp, labels, { ignore_index = 2 }), 0, 0)
    local p = a:sigmoid()
    close(nn.BCELoss({ weight = w })(p, t), F.binary_cross_entropy(p, t, { weight = w }), 0, 0)
    close(nn.BCEWithLogitsLoss({ pos_weight = w })(a, t), F.binary_cross_entropy_with_logits(a, t, { pos_weight = w }), 0, 0)
  end)
  it("keep tensor options as buffers and print their reduction", function()
    local c = nn.CrossEntropyLoss({ weight = cnn.ones(3) })
    assert.truthy(c:state_dict().weight)
    assert.equals("CrossEntropyLoss(reduction='mean')", tostring(c))
    assert.equals("KLDivLoss(reduction='batchmean')", tostring(nn.KLDivLoss({ reduction = "batchmean" })))
  end)
  it("reject bad options", function()
    raises(function() nn.MSELoss({ reduction = "avg" }) end, "nn.MSELoss", "reduction")
    raises(function() nn.L1Loss({ reduction = "batchmean" }) end, "nn.L1Loss", "reduction")
    raises(function() nn.CrossEntropyLoss({ wieght = 1 }) end, "nn.CrossEntropyLoss", "unknown option 'wieght'")
    raises(function() nn.BCELoss({ weight = 2 }) end, "nn.BCELoss", "weight", "a tensor")
    raises(function() F.huber_loss(a, b, { delta = 0 }) end, "huber_loss", "delta")
    raises(function() F.smooth_l1_loss(a, b, { beta = -1 }) end, "smooth_l1_loss", "beta")
    raises(function() F.kl_div(a, b, { reduction = "avg" }) end, "kl_div", "batchmean")
    raises(function() F.l1_loss(a, f64({ 1, 2, 3 })) end, "l1_loss", "2x4", "3")
    raises(function() F.l1_loss(a, cnn.tensor({ 1, 2, 3, 4 }, "int64")) end, "l1_loss", "int64")
  end)
  it("have help", function()
    for _, f in ipairs({ F.l1_loss, F.smooth_l1_loss, F.huber_loss, F.kl_div, F.binary_cross_entropy,
                         nn.CrossEntropyLoss, nn.NLLLoss, nn.MSELoss, nn.L1Loss, nn.SmoothL1Loss,
                         nn.HuberLoss, nn.KLDivLoss, nn.BCELoss, nn.BCEWithLogitsLoss }) do
      assert.truthy(cnn.doc[f], "missing help")
    end
  end)
end)
