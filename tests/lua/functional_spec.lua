-- functional_spec.lua -- F.* through the bindings against naive Lua loops
-- (conv2d, pooling, linear, activations, softmax, dropout, batch_norm,
-- flatten, pad, losses), option parsing and its errors, 1-based targets and
-- indices, and finite-difference gradients in float64.
package.path = "./?.lua;" .. package.path
local H = require("helpers")
local close, raises, shape = H.assert_close, H.raises, H.assert_shape

-- ---- naive references over nested tables --------------------------------

local function zeros4(n, c, h, w)
  local r = {}
  for a = 1, n do r[a] = {} for b = 1, c do r[a][b] = {} for i = 1, h do
    r[a][b][i] = {} for j = 1, w do r[a][b][i][j] = 0 end end end end
  return r
end

-- x: N x C x H x W, w: O x C/g x kh x kw; pad = {top, bottom, left, right}
local function conv2d_ref(x, w, b, stride, pad, dil, groups)
  local N, C, Hh, W = #x, #x[1], #x[1][1], #x[1][1][1]
  local O, Cg, kh, kw = #w, #w[1], #w[1][1], #w[1][1][1]
  local Ho = (Hh + pad[1] + pad[2] - dil[1] * (kh - 1) - 1) // stride[1] + 1
  local Wo = (W + pad[3] + pad[4] - dil[2] * (kw - 1) - 1) // stride[2] + 1
  local y = zeros4(N, O, Ho, Wo)
  local opg = O // groups
  for n = 1, N do for o = 1, O do
    local g = (o - 1) // opg
    for i = 1, Ho do for j = 1, Wo do
      local s = b and b[o] or 0
      for c = 1, Cg do for p = 1, kh do for q = 1, kw do
        local hi = (i - 1) * stride[1] - pad[1] + (p - 1) * dil[1] + 1
        local wi = (j - 1) * stride[2] - pad[3] + (q - 1) * dil[2] + 1
        if hi >= 1 and hi <= Hh and wi >= 1 and wi <= W then
          s = s + x[n][g * Cg + c][hi][wi] * w[o][c][p][q]
        end
      end end end
      y[n][o][i][j] = s
    end end
  end end
  return y
end

-- pooling over N x C x H x W; mode "max" or "avg"
local function pool_ref(x, k, s, pad, mode, ceil_mode, include_pad, dil)
  local N, C, Hh, W = #x, #x[1], #x[1][1], #x[1][1][1]
  dil = dil or {1, 1}
  local function out(n, kk, ss, pp, dd)
    local o, span = nil, n + 2 * pp - dd * (kk - 1) - 1
    if ceil_mode then
      o = math.ceil(span / ss) + 1
      if (o - 1) * ss >= n + pp then o = o - 1 end
    else
      o = span // ss + 1
    end
    return o
  end
  local Ho, Wo = out(Hh, k[1], s[1], pad[1], dil[1]), out(W, k[2], s[2], pad[2], dil[2])
  local y, idx = zeros4(N, C, Ho, Wo), zeros4(N, C, Ho, Wo)
  for n = 1, N do for c = 1, C do for i = 1, Ho do for j = 1, Wo do
    local best, bi, sum, cnt = -math.huge, 0, 0, 0
    local h0, w0 = (i - 1) * s[1] - pad[1], (j - 1) * s[2] - pad[2]
    for p = 1, k[1] do for q = 1, k[2] do
      local hi, wi = h0 + 1 + (p - 1) * dil[1], w0 + 1 + (q - 1) * dil[2]
      local inside = hi >= 1 and hi <= Hh and wi >= 1 and wi <= W
      local in_padded = hi >= 1 - pad[1] and hi <= Hh + pad[1] and wi >= 1 - pad[2] and wi <= W + pad[2]
      if inside then
        local v = x[n][c][hi][wi]
        if v > best then best, bi = v, (hi - 1) * W + wi end
        sum, cnt = sum + v, cnt + 1
      elseif in_padded and include_pad then
        cnt = cnt + 1
      end
    end end
    y[n][c][i][j] = mode == "max" and best or sum / cnt
    idx[n][c][i][j] = bi
  end end end end
  return y, idx
end

local function softmax_rows(rows, log)
  local r = {}
  for i, row in ipairs(rows) do
    local m = -math.huge
    for _, v in ipairs(row) do m = math.max(m, v) end
    local s = 0
    for _, v in ipairs(row) do s = s + math.exp(v - m) end
    r[i] = {}
    for j, v in ipairs(row) do
      r[i][j] = log and (v - m - math.log(s)) or math.exp(v - m) / s
    end
  end
  return r
end

local gradcheck = H.gradcheck

-- ---- specs -------------------------------------------------------------------

describe("F.conv2d", function()
  cnn.manual_seed(5)
  local x = cnn.randn(2, 4, 7, 6, "float64")
  local w = cnn.randn(6, 4, 3, 3, "float64")
  local wg = cnn.randn(6, 2, 3, 3, "float64")
  local b = cnn.randn(6, "float64")
  local xt = x:totable()

  local cases = {
    {"plain", w, {}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
    {"stride 2, padding 1", w, {stride = 2, padding = 1}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1},
    {"pair options", w, {stride = {1, 2}, padding = {2, 1}}, {1, 2}, {2, 2, 1, 1}, {1, 1}, 1},
    {"per-side padding", w, {padding = {1, 0, 2, 1}}, {1, 1}, {1, 0, 2, 1}, {1, 1}, 1},
    {"dilation 2", w, {dilation = 2, padding = 2}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1},
    {"groups 2", wg, {groups = 2, padding = 1, stride = 2}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 2},
  }
  for _, c in ipairs(cases) do
    it("matches the naive loop: " .. c[1], function()
      local ref = conv2d_ref(xt, c[2]:totable(), b:totable(), c[4], c[5], c[6], c[7])
      close(F.conv2d(x, c[2], b, c[3]), ref, 1e-9, 1e-9)
    end)
  end

  it("works without bias, options in third position, and every backend", function()
    local ref = conv2d_ref(xt, w:totable(), nil, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1)
    close(F.conv2d(x, w, nil, {padding = 1}), ref, 1e-9, 1e-9)
    close(F.conv2d(x, w, {padding = 1}), ref, 1e-9, 1e-9)
    local old = cnn.get_conv_algo()
    local xf, wf = x:float(), w:float()
    for _, algo in ipairs({"naive", "im2col", "onednn", "auto"}) do
      cnn.set_conv_algo(algo)
      close(F.conv2d(xf, wf, nil, {padding = 1}), ref, 1e-3, 1e-3, algo)
    end
    cnn.set_conv_algo(old)
  end)

  it("rejects bad options and shapes with named errors", function()
    raises(function() return F.conv2d(x, w, b, {stride = 0}) end, "conv2d", "stride")
    raises(function() return F.conv2d(x, w, b, {padding = -1}) end, "conv2d", "padding")
    raises(function() return F.conv2d(x, w, b, {padding = {1, 2, 3}}) end, "conv2d", "padding")
    raises(function() return F.conv2d(x, w, b, {groups = 0}) end, "conv2d", "groups")
    raises(function() return F.conv2d(x, w, b, {stride = "x"}) end, "conv2d", "stride")
    raises(function() return F.conv2d(x, wg) end, "conv2d", "2x4x7x6")
  end)

  it("has correct gradients (stride, padding, dilation, groups)", function()
    local xs = cnn.randn(1, 2, 5, 4, "float64")
    local ws = cnn.randn(2, 1, 3, 2, "float64")
    local bs = cnn.randn(2, "float64")
    gradcheck(function(a, k, c)
      return F.conv2d(a, k, c, {stride = {2, 1}, padding = {1, 0, 1, 1}, dilation = {1, 2}, groups = 2}):square():sum()
    end, {xs, ws, bs})
  end)
end)

describe("F.linear", function()
  it("matches x w^T + b and has gradients", function()
    cnn.manual_seed(2)
    local x, w, b = cnn.randn(3, 4, "float64"), cnn.randn(5, 4, "float64"), cnn.randn(5, "float64")
    local ref = H.matmul(x:totable(), w:t():totable())
    local bt = b:totable()
    for i = 1, 3 do for j = 1, 5 do ref[i][j] = ref[i][j] + bt[j] end end
    close(F.linear(x, w, b), ref, 1e-12)
    close(F.linear(x, w), H.matmul(x:totable(), w:t():totable()), 1e-12)
    raises(function() return F.linear(x, cnn.randn(5, 3, "float64")) end, "linear", "3x4", "5x3")
    gradcheck(function(a, k, c) return F.linear(a, k, c):square():sum() end, {x, w, b})
  end)
end)

describe("pooling", function()
  cnn.manual_seed(9)
  local x = cnn.randn(2, 3, 7, 6, "float64")
  local xt = x:totable()

  it("max_pool2d matches the naive loop; indices are 1-based", function()
    local ref = pool_ref(xt, {2, 2}, {2, 2}, {0, 0}, "max")
    close(F.max_pool2d(x, 2), ref)
    local ref3, idx3 = pool_ref(xt, {3, 3}, {2, 2}, {1, 1}, "max")
    local y, idx = F.max_pool2d(x, 3, {stride = 2, padding = 1, return_indices = true})
    close(y, ref3)
    assert.equal("int64", idx.dtype)
    close(idx, idx3)
    close(F.max_pool2d(x, {3, 2}, 2), (pool_ref(xt, {3, 2}, {2, 2}, {0, 0}, "max")))
    local refc = pool_ref(xt, {2, 2}, {2, 2}, {0, 0}, "max", true)
    close(F.max_pool2d(x, 2, {ceil_mode = true}), refc)
    shape(F.max_pool2d(x, 2, {ceil_mode = true}), {2, 3, 4, 3})
  end)

  it("max_pool2d honours dilation (F and nn.MaxPool2d), as PyTorch", function()
    -- 3x3 taps spaced 2 apart span 5x5: 7x6 -> 3x2 at stride 1
    local refd, idxd = pool_ref(xt, {3, 3}, {1, 1}, {0, 0}, "max", false, false, {2, 2})
    local y, idx = F.max_pool2d(x, 3, {stride = 1, dilation = 2, return_indices = true})
    shape(y, {2, 3, 3, 2})
    close(y, refd)
    close(idx, idxd)
    local refp = pool_ref(xt, {2, 3}, {2, 1}, {1, 1}, "max", true, false, {3, 2})
    close(F.max_pool2d(x, {2, 3}, {stride = {2, 1}, padding = 1, dilation = {3, 2}, ceil_mode = true}), refp)
    local m = nn.MaxPool2d(3, {stride = 1, dilation = 2})
    close(m(x), refd)
    assert.truthy(tostring(m):find("dilation=2", 1, true))
    raises(function() return F.max_pool2d(x, 3, {dilation = 0}) end, "max_pool2d", "dilation")
    -- the dilated window (5 wide) must fit the padded input
    raises(function() return F.max_pool2d(cnn.randn(1, 1, 4, 4), 3, {dilation = 2}) end, "max_pool2d", "dilated")
  end)

  it("avg_pool2d with and without counting the padding", function()
    close(F.avg_pool2d(x, 2), (pool_ref(xt, {2, 2}, {2, 2}, {0, 0}, "avg")), 1e-12)
    close(F.avg_pool2d(x, 3, {stride = 2, padding = 1}),
          (pool_ref(xt, {3, 3}, {2, 2}, {1, 1}, "avg", false, true)), 1e-12)
    close(F.avg_pool2d(x, 3, {stride = 2, padding = 1, count_include_pad = false}),
          (pool_ref(xt, {3, 3}, {2, 2}, {1, 1}, "avg", false, false)), 1e-12)
  end)

  it("adaptive_avg_pool2d", function()
    close(F.adaptive_avg_pool2d(x, 1), H.map(x:mean({3, 4}, true):totable(), function(v) return v end), 1e-12)
    -- 7 -> 3 bins: rows [1,3], [3,5], [5,7]; 6 -> 2 bins: cols [1,3], [4,6]
    local y = F.adaptive_avg_pool2d(x, {3, 2})
    shape(y, {2, 3, 3, 2})
    local s, n = 0, 0
    for i = 3, 5 do for j = 4, 6 do s = s + xt[2][3][i][j]; n = n + 1 end end
    close(y[{2, 3, 2, 2}], s / n, 1e-12)
  end)

  it("checks its arguments", function()
    raises(function() return F.max_pool2d(x) end, "max_pool2d", "kernel")
    raises(function() return F.max_pool2d(x, 0) end, "max_pool2d", "kernel_size")
    raises(function() return F.max_pool2d(x, 2, {padding = -1}) end, "max_pool2d", "padding")
    raises(function() return F.avg_pool2d(cnn.zeros(3, 3), 2) end, "avg_pool2d")
    raises(function() return F.adaptive_avg_pool2d(x, 0) end, "adaptive_avg_pool2d")
  end)

  it("has correct gradients", function()
    local xs = cnn.randn(1, 2, 5, 5, "float64")
    gradcheck(function(a) return (F.max_pool2d(a, 3, {stride = 2, padding = 1}) ^ 2):sum() end, {xs})
    gradcheck(function(a) return (F.max_pool2d(a, 2, {stride = 1, padding = 1, dilation = 2}) ^ 2):sum() end, {xs})
    gradcheck(function(a) return (F.avg_pool2d(a, 2, {ceil_mode = true}) ^ 2):sum() end, {xs})
    gradcheck(function(a) return (F.adaptive_avg_pool2d(a, {2, 3}) ^ 2):sum() end, {xs})
  end)
end)

describe("activations and softmax", function()
  local v = {-2, -0.5, 0, 0.3, 1.7}
  local x = cnn.tensor(v, "float64")
  local function map(f) local r = {} for i, e in ipairs(v) do r[i] = f(e) end return r end
  it("elementwise activations", function()
    close(F.relu(x), map(function(e) return math.max(0, e) end))
    close(F.leaky_relu(x), map(function(e) return e > 0 and e or 0.01 * e end), 1e-12)
    close(F.leaky_relu(x, 0.2), map(function(e) return e > 0 and e or 0.2 * e end), 1e-12)
    close(F.elu(x, 0.5), map(function(e) return e > 0 and e or 0.5 * (math.exp(e) - 1) end), 1e-12)
    close(F.sigmoid(x), map(function(e) return 1 / (1 + math.exp(-e)) end), 1e-12)
    close(F.tanh(x), map(function(e) return (math.exp(2 * e) - 1) / (math.exp(2 * e) + 1) end), 1e-12)
    close(F.gelu(cnn.tensor({0, 1, -1}, "float64")), {0, 0.8413447460685429, -0.15865525393145707}, 1e-6)
  end)

  it("softmax and log_softmax along a dim", function()
    cnn.manual_seed(4)
    local m = cnn.randn(3, 5, "float64") * 4
    local mt = m:totable()
    close(F.softmax(m, 2), softmax_rows(mt), 1e-12)
    close(F.log_softmax(m, -1), softmax_rows(mt, true), 1e-12)
    local cols = softmax_rows(m:t():totable())
    close(F.softmax(m, 1):t(), cols, 1e-12)
    close(F.softmax(m), softmax_rows(mt), 1e-12)
    gradcheck(function(a) return (F.log_softmax(a, 2) * cnn.arange(1, 15, "float64"):view(3, 5)):sum() end, {m})
  end)
end)

describe("F.dropout", function()
  it("zeroes or scales by 1/(1-p) in training, identity otherwise", function()
    cnn.manual_seed(8)
    local x = cnn.ones(10000)
    local y = H.flat(F.dropout(x, 0.25))
    local zeros = 0
    for _, e in ipairs(y) do
      assert.is_true(e == 0 or math.abs(e - 1 / 0.75) < 1e-6, tostring(e))
      if e == 0 then zeros = zeros + 1 end
    end
    assert.is_true(math.abs(zeros / 10000 - 0.25) < 0.03, "dropped " .. zeros)
    close(F.dropout(x, 0.5, false), H.flat(x))
    close(F.dropout(x, 0), H.flat(x))
    close(F.dropout(x, 1), H.flat(cnn.zeros(10000)))
    raises(function() return F.dropout(x, 1.5) end, "dropout", "p")
  end)
end)

describe("F.batch_norm", function()
  cnn.manual_seed(6)
  local x = cnn.randn(4, 3, 2, 2, "float64")
  local weight, bias = cnn.randn(3, "float64"), cnn.randn(3, "float64")
  -- naive per-channel statistics
  local xt = x:totable()
  local mean, var_b, var_u = {}, {}, {}
  for c = 1, 3 do
    local vals = {}
    for n = 1, 4 do for i = 1, 2 do for j = 1, 2 do vals[#vals + 1] = xt[n][c][i][j] end end end
    local m = 0
    for _, e in ipairs(vals) do m = m + e end
    m = m / #vals
    local s = 0
    for _, e in ipairs(vals) do s = s + (e - m) ^ 2 end
    mean[c], var_b[c], var_u[c] = m, s / #vals, s / (#vals - 1)
  end
  local function ref(mu, var, eps)
    local wt, bt = weight:totable(), bias:totable()
    local r = zeros4(4, 3, 2, 2)
    for n = 1, 4 do for c = 1, 3 do for i = 1, 2 do for j = 1, 2 do
      r[n][c][i][j] = (xt[n][c][i][j] - mu[c]) / math.sqrt(var[c] + eps) * wt[c] + bt[c]
    end end end end
    return r
  end

  it("training: batch statistics, running stats updated with momentum", function()
    local rm, rv = cnn.zeros(3, "float64"), cnn.ones(3, "float64")
    local y = F.batch_norm(x, rm, rv, weight, bias, {training = true, momentum = 0.1, eps = 1e-5})
    close(y, ref(mean, var_b, 1e-5), 1e-9)
    local erm, erv = {}, {}
    for c = 1, 3 do erm[c] = 0.9 * 0 + 0.1 * mean[c]; erv[c] = 0.9 * 1 + 0.1 * var_u[c] end
    close(rm, erm, 1e-12)
    close(rv, erv, 1e-12)
  end)

  it("evaluation: running statistics", function()
    local rm, rv = cnn.tensor({0.1, -0.2, 0.3}, "float64"), cnn.tensor({1.5, 0.5, 2}, "float64")
    local y = F.batch_norm(x, rm, rv, weight, bias)
    close(y, ref({0.1, -0.2, 0.3}, {1.5, 0.5, 2}, 1e-5), 1e-9)
    close(rm, {0.1, -0.2, 0.3})
    local y2 = F.batch_norm(x, rm, rv, nil, nil, {eps = 1e-3})
    shape(y2, {4, 3, 2, 2})
    raises(function() return F.batch_norm(x, rm, rv, weight, bias, {eps = 0}) end, "batch_norm", "eps")
  end)

  it("has correct gradients in both modes", function()
    local xs = cnn.randn(3, 2, 2, 1, "float64")
    local ws, bs = cnn.randn(2, "float64"), cnn.randn(2, "float64")
    local k = cnn.arange(1, 12, "float64"):view(3, 2, 2, 1)
    gradcheck(function(a, w, b)
      return (F.batch_norm(a, nil, nil, w, b, {training = true}) * k):sum()
    end, {xs, ws, bs})
    local rm, rv = cnn.tensor({0.2, -0.1}, "float64"), cnn.tensor({1.3, 0.7}, "float64")
    gradcheck(function(a, w, b) return (F.batch_norm(a, rm, rv, w, b) * k):sum() end, {xs, ws, bs})
  end)
end)

describe("shape functions", function()
  it("flatten keeps the batch dim by default", function()
    shape(F.flatten(cnn.zeros(2, 3, 4, 5)), {2, 60})
    shape(F.flatten(cnn.zeros(2, 3, 4, 5), 1), {120})
    shape(F.flatten(cnn.zeros(2, 3, 4, 5), 2, 3), {2, 12, 5})
    shape(F.flatten(cnn.zeros(7)), {7})
  end)

  it("pad in PyTorch's order", function()
    local x = cnn.tensor({{1, 2}, {3, 4}})
    close(F.pad(x, {1, 0}), {{0, 1, 2}, {0, 3, 4}})
    close(F.pad(x, {0, 1, 1, 0}, 9), {{9, 9, 9}, {1, 2, 9}, {3, 4, 9}})
    raises(function() return F.pad(x, {1}) end, "pad")
    raises(function() return F.pad(x, {1, 1, 1, 1, 1, 1}) end, "pad")
  end)

  it("cat and stack live in F too", function()
    shape(F.stack({cnn.zeros(2), cnn.zeros(2)}), {2, 2})
  end)
end)

describe("losses", function()
  cnn.manual_seed(12)
  local logits = cnn.randn(4, 3, "float64")
  local target = cnn.tensor({3, 1, 2, 3}, "int64")
  local lt, tt = logits:totable(), target:totable()
  local logp = softmax_rows(lt, true)

  it("cross_entropy with 1-based labels, reductions and weights", function()
    local per = {}
    for i = 1, 4 do per[i] = -logp[i][tt[i]] end
    local s = per[1] + per[2] + per[3] + per[4]
    close(F.cross_entropy(logits, target), s / 4, 1e-12)
    close(F.cross_entropy(logits, target, {reduction = "sum"}), s, 1e-12)
    close(F.cross_entropy(logits, target, {reduction = "none"}), per, 1e-12)
    local w = {0.5, 2, 1}
    local num, den = 0, 0
    for i = 1, 4 do num = num + w[tt[i]] * per[i]; den = den + w[tt[i]] end
    close(F.cross_entropy(logits, target, {weight = cnn.tensor(w, "float64")}), num / den, 1e-12)
  end)

  it("cross_entropy with label smoothing and ignore_index", function()
    local eps = 0.1
    local s = 0
    for i = 1, 4 do
      local l = 0
      for c = 1, 3 do
        local q = (c == tt[i] and (1 - eps) or 0) + eps / 3
        l = l - q * logp[i][c]
      end
      s = s + l
    end
    close(F.cross_entropy(logits, target, {label_smoothing = eps}), s / 4, 1e-12)
    -- ignore the samples labelled 3 (rows 1 and 4)
    local m = (-logp[2][1] - logp[3][2]) / 2
    close(F.cross_entropy(logits, target, {ignore_index = 3}), m, 1e-12)
    local t2 = cnn.tensor({-100, 1, 2, -100}, "int64")
    close(F.cross_entropy(logits, t2, {ignore_index = -100}), m, 1e-12)
  end)

  it("rejects labels outside 1..C in 1-based words", function()
    raises(function() return F.cross_entropy(logits, cnn.tensor({0, 1, 2, 3}, "int64")) end,
           "cross_entropy", "target 0 out of range 1..3")
    raises(function() return F.cross_entropy(logits, cnn.tensor({4, 1, 2, 3}, "int64")) end, "target 4")
    raises(function() return F.cross_entropy(logits, cnn.tensor({1, 1, 2, 3})) end, "int64")
    raises(function() return F.cross_entropy(logits, target, {reduction = "avg"}) end, "reduction")
    raises(function() return F.nll_loss(logits, cnn.tensor({1, 2}, "int64")) end, "nll_loss")
  end)

  it("nll_loss on log-probabilities", function()
    local lp = F.log_softmax(logits, 2)
    local s = 0
    for i = 1, 4 do s = s - logp[i][tt[i]] end
    close(F.nll_loss(lp, target), s / 4, 1e-12)
    close(F.nll_loss(lp, target, {reduction = "sum"}), s, 1e-12)
  end)

  it("mse_loss and binary_cross_entropy_with_logits", function()
    local a = cnn.tensor({1, 2, 3}, "float64")
    local b = cnn.tensor({1.5, 2, 1}, "float64")
    close(F.mse_loss(a, b), (0.25 + 0 + 4) / 3, 1e-12)
    close(F.mse_loss(a, b, {reduction = "sum"}), 4.25, 1e-12)
    close(F.mse_loss(a, b, {reduction = "none"}), {0.25, 0, 4}, 1e-12)
    local z = cnn.tensor({-1, 0.5, 2}, "float64")
    local y = cnn.tensor({0, 1, 1}, "float64")
    local function sig(v) return 1 / (1 + math.exp(-v)) end
    local ref = -(math.log(1 - sig(-1)) + math.log(sig(0.5)) + math.log(sig(2))) / 3
    close(F.binary_cross_entropy_with_logits(z, y), ref, 1e-12)
    local pw = 3
    local refw = -(math.log(1 - sig(-1)) + pw * math.log(sig(0.5)) + pw * math.log(sig(2))) / 3
    close(F.binary_cross_entropy_with_logits(z, y, {pos_weight = cnn.tensor({pw}, "float64")}), refw, 1e-12)
    -- weight rescales each element's loss (PyTorch), with pos_weight, any reduction
    local w = {0.5, 2, 0}
    local terms = {-math.log(1 - sig(-1)), -pw * math.log(sig(0.5)), -pw * math.log(sig(2))}
    local opts = {weight = cnn.tensor(w, "float64"), pos_weight = cnn.tensor({pw}, "float64"), reduction = "none"}
    close(F.binary_cross_entropy_with_logits(z, y, opts), {w[1] * terms[1], w[2] * terms[2], 0}, 1e-12)
    opts.reduction = "sum"
    close(F.binary_cross_entropy_with_logits(z, y, opts), w[1] * terms[1] + w[2] * terms[2], 1e-12)
    -- a 2x1 weight broadcasts over the columns of a 2x3 input
    local z2, y2 = cnn.stack({z, -z}), cnn.stack({y, y})
    local l = F.binary_cross_entropy_with_logits(z2, y2, {weight = cnn.tensor({{1}, {3}}, "float64"), reduction = "none"})
    local plain = F.binary_cross_entropy_with_logits(z2, y2, {reduction = "none"}):totable()
    close(l, {plain[1], H.map(plain[2], function(v) return 3 * v end)}, 1e-12)
    raises(function() return F.binary_cross_entropy_with_logits(z, y, {weight = cnn.ones(2, "float64")}) end,
           "binary_cross_entropy_with_logits", "weight 2 cannot be broadcast to input 3")
  end)

  it("have correct gradients", function()
    gradcheck(function(a) return F.cross_entropy(a, target, {label_smoothing = 0.2}) end, {logits})
    gradcheck(function(a) return F.nll_loss(F.log_softmax(a, 2), target, {reduction = "sum"}) end, {logits})
    local a, b = cnn.randn(5, "float64"), cnn.randn(5, "float64")
    gradcheck(function(p, q) return F.mse_loss(p, q) end, {a, b})
    local y = cnn.tensor({0, 1, 1, 0, 1}, "float64")
    gradcheck(function(p) return F.binary_cross_entropy_with_logits(p, y) end, {a})
    local pw, w = cnn.rand(5, "float64") + 0.5, cnn.rand(5, "float64") + 0.1
    gradcheck(function(p, q, r) return F.binary_cross_entropy_with_logits(p, y, {pos_weight = q, weight = r}) end,
              {a, pw, w})
  end)
end)
