-- autocast_bf16_spec.lua -- cnn.autocast('bfloat16') on the CPU in bfloat16
-- arithmetic (issue 16 point 5): conv2d and the matrix products, forward
-- and every gradient, against naive float64 loops written here over
-- operands rounded to bfloat16 here (bit arithmetic, H.bf16).
--
-- The arithmetic under test, on either path (cnn.autocast_info()):
--   forward   y  = sum bf16(x) bf16(w) in float32, + b in float32
--   backward  dx = sum bf16(dy) bf16(w),  dw = sum bf16(dy) bf16(x),
--             db = sum bf16(dy) (conv2d's bias pass reads the rounded dy)
-- all float32 tensors.  "onednn" runs oneDNN's bfloat16 kernels (their
-- reorders round), "emulated" rounds float32 copies and runs the float32
-- kernels; both must meet the same references.  ctest also runs this spec
-- with DNNL_MAX_CPU_ISA=AVX2 (lua_autocast_bf16_emulated), so the emulation
-- is checked on a bfloat16 machine too.
--
-- Tolerances.  Every product of two bfloat16 values is exact in float32,
-- so the only error left is float32 summation: at most ~n * 2^-24 of the
-- sum of |terms| for n terms (n <= 144 here, |terms| summing to < 100):
-- well under 1e-4 absolute; atol 1e-4, rtol 1e-4 leaves room for the
-- order of the sums and still fails on any missing or extra rounding,
-- whose effect (2^-9 relative per operand, summed) is asserted to be
-- above 1e-3 each time.
package.path = "./?.lua;" .. package.path
local H = require("helpers")

local bf16, map, max_diff = H.bf16, H.map, H.max_diff
local ATOL, RTOL = 1e-4, 1e-4

-- 4-d nested table of zeros
local function zeros4(a, b, c, d)
  local t = {}
  for i = 1, a do
    t[i] = {}
    for j = 1, b do
      t[i][j] = {}
      for k = 1, c do
        t[i][j][k] = {}
        for l = 1, d do t[i][j][k][l] = 0 end
      end
    end
  end
  return t
end

-- conv2d (stride s, zero padding p, groups 1) and its three gradients for
-- the output gradient g, in float64 over the given tables: one loop nest
-- visits every (output, tap) pair once and adds its product to y, dx, dw.
local function conv_ref(x, w, b, g, s, p)
  local N, C, Hh, W = #x, #x[1], #x[1][1], #x[1][1][1]
  local K, R, S = #w, #w[1][1], #w[1][1][1]
  local OH, OW = (Hh + 2 * p - R) // s + 1, (W + 2 * p - S) // s + 1
  local y, dx, dw = zeros4(N, K, OH, OW), zeros4(N, C, Hh, W), zeros4(K, C, R, S)
  local db = {}
  for k = 1, K do db[k] = 0 end
  for n = 1, N do
    for k = 1, K do
      for oh = 1, OH do
        for ow = 1, OW do
          local acc, gv = b[k], g[n][k][oh][ow]
          db[k] = db[k] + gv
          for c = 1, C do
            for r = 1, R do
              local ih = (oh - 1) * s + r - p
              if ih >= 1 and ih <= Hh then
                for q = 1, S do
                  local iw = (ow - 1) * s + q - p
                  if iw >= 1 and iw <= W then
                    acc = acc + x[n][c][ih][iw] * w[k][c][r][q]
                    dx[n][c][ih][iw] = dx[n][c][ih][iw] + gv * w[k][c][r][q]
                    dw[k][c][r][q] = dw[k][c][r][q] + gv * x[n][c][ih][iw]
                  end
                end
              end
            end
          end
          y[n][k][oh][ow] = acc
        end
      end
    end
  end
  return y, dx, dw, db
end

-- One conv2d under autocast with loss sum(y * g); the tensors' results.
local function run_conv(x, w, b, g, stride, pad)
  local xs, ws, bs = x:clone():requires_grad_(), w:clone():requires_grad_(), b:clone():requires_grad_()
  local y = cnn.autocast("bfloat16", function()
    return F.conv2d(xs, ws, bs, { stride = stride, padding = pad })
  end)
  assert.equal("float32", y.dtype)
  ;(y * g):sum():backward()
  for _, t in ipairs({ xs.grad, ws.grad, bs.grad }) do assert.equal("float32", t.dtype) end
  return y, xs.grad, ws.grad, bs.grad
end

local function check_conv(shape, stride, pad, what)
  local N, C, Hh, W, K, R = table.unpack(shape)
  local x, w = cnn.randn(N, C, Hh, W), cnn.randn(K, C, R, R):mul(0.5)
  local b, g = cnn.randn(K), nil
  local y, dx, dw, db
  local OH = (Hh + 2 * pad - R) // stride + 1
  local OW = (W + 2 * pad - R) // stride + 1
  g = cnn.randn(N, K, OH, OW)
  y, dx, dw, db = run_conv(x, w, b, g, stride, pad)
  local xt, wt, bt, gt = x:totable(), w:totable(), b:totable(), g:totable()
  local ry, rdx, rdw, rdb = conv_ref(map(xt, bf16), map(wt, bf16), bt, map(gt, bf16), stride, pad)
  H.assert_close(y, ry, ATOL, RTOL, what .. ": forward")
  H.assert_close(dx, rdx, ATOL, RTOL, what .. ": dx")
  H.assert_close(dw, rdw, ATOL, RTOL, what .. ": dw")
  H.assert_close(db, rdb, ATOL, RTOL, what .. ": db")
  -- the roundings mattered: float64 on the unrounded operands is far off
  local fy, fdx, fdw = conv_ref(xt, wt, bt, gt, stride, pad)
  assert.is_true(max_diff(fy, ry) > 1e-3, what .. ": x, w rounding invisible")
  assert.is_true(max_diff(fdx, rdx) > 1e-3, what .. ": dy rounding invisible in dx")
  assert.is_true(max_diff(fdw, rdw) > 1e-3, what .. ": dy rounding invisible in dw")
  local _, gdx = conv_ref(map(xt, bf16), map(wt, bf16), bt, gt, stride, pad)
  assert.is_true(max_diff(gdx, rdx) > 1e-3, what .. ": dy not rounded")
end

local T = H.transpose

local function bmatmul(a, b, f)   -- batched over the first dim (same count), operands mapped by f
  local out = {}
  for i = 1, #a do out[i] = H.matmul(map(a[i], f), map(b[i], f)) end
  return out
end

describe("cnn.autocast('bfloat16') on the CPU: bfloat16 arithmetic", function()
  local path, detail = cnn.autocast_info()

  it("says which path runs, and takes the kernels where the CPU has them", function()
    assert.is_true(path == "onednn" or path == "emulated", tostring(path))
    assert.truthy(detail:find("ISA", 1, true), detail)
    assert.truthy(cnn.version_info():find("bfloat16 autocast on cpu: " .. path, 1, true))
    local f = io.open("/proc/cpuinfo")
    local flags = f and f:read("a") or ""
    if f then f:close() end
    local forced = os.getenv("DNNL_MAX_CPU_ISA")
    if flags:find("avx512_bf16", 1, true) and not forced then
      assert.equal("onednn", path, "the CPU has AVX512-BF16 but: " .. detail)
    else
      pending(("bfloat16 runs %s here (%s; DNNL_MAX_CPU_ISA=%s): the kernel path is not "
               .. "checked on this machine"):format(path, detail, tostring(forced)))
    end
  end)

  it("conv2d: forward, dx, dw, db against the rounded float64 reference", function()
    cnn.manual_seed(21)
    check_conv({ 2, 16, 7, 6, 32, 3 }, 1, 1, "16->32 3x3 pad 1")
    check_conv({ 3, 1, 9, 8, 8, 3 }, 1, 1, "first layer 1->8")
    check_conv({ 2, 5, 9, 7, 6, 3 }, 2, 1, "5->6 stride 2 (odd channels)")
    check_conv({ 2, 8, 5, 5, 4, 1 }, 1, 0, "1x1")
  end)

  it("conv2d: the same arithmetic on every conv algorithm (im2col, naive: emulated)", function()
    cnn.manual_seed(22)
    local was = cnn.backends.conv
    for _, algo in ipairs({ "im2col", "naive", "onednn" }) do
      cnn.backends.conv = algo
      local ok, err = pcall(check_conv, { 2, 4, 6, 5, 3, 3 }, 1, 1, "algo " .. algo)
      cnn.backends.conv = was
      assert(ok, err)
    end
  end)

  it("conv2d backward inside autocast and under no_grad forward agree", function()
    cnn.manual_seed(23)
    local x, w = cnn.randn(2, 3, 5, 5), cnn.randn(4, 3, 3, 3)
    local ref = conv_ref(map(x:totable(), bf16), map(w:totable(), bf16), { 0, 0, 0, 0 },
                         zeros4(2, 4, 5, 5), 1, 1)
    local y = cnn.no_grad(function()
      return cnn.autocast("bfloat16", function() return F.conv2d(x, w, nil, { padding = 1 }) end)
    end)
    H.assert_close(y, ref, ATOL, RTOL, "no_grad forward")
    -- a batch large enough to be sliced by the forward (> 16 MiB of input and output)
    local big = cnn.randn(600, 3, 32, 32)
    local yb = cnn.no_grad(function()
      return cnn.autocast("bfloat16", function() return F.conv2d(big, w, nil, { padding = 1 }) end)
    end)
    local last = conv_ref(map({ big[600]:totable() }, bf16), map(w:totable(), bf16),
                          { 0, 0, 0, 0 }, zeros4(1, 4, 32, 32), 1, 1)
    H.assert_close(yb[600], last[1], ATOL, RTOL, "sliced forward, last image")
  end)

  it("mm, matmul on transposed views, 1-d dot: forward and both gradients", function()
    cnn.manual_seed(24)
    local cases = {
      { "mm 5x7 . 7x3", cnn.randn(5, 7), cnn.randn(7, 3) },
      { "a^T . b^T views", cnn.randn(9, 6):t(), cnn.randn(4, 9):t() },
      { "big 64x300 . 300x40", cnn.randn(64, 300), cnn.randn(300, 40):mul(0.1) },
    }
    for _, c in ipairs(cases) do
      local what, a0, b0 = c[1], c[2], c[3]
      local a, b = a0:clone():requires_grad_(), b0:clone():requires_grad_()
      local y = cnn.autocast("bfloat16", function() return a:matmul(b) end)
      local g = cnn.randn(y.shape[1], y.shape[2])
      ;(y * g):sum():backward()
      local at, bt, gt = a0:totable(), b0:totable(), g:totable()
      local ra, rb, rg = map(at, bf16), map(bt, bf16), map(gt, bf16)
      local tol = what:find("big") and 1e-3 or ATOL   -- 300 terms: summation error ~300 ulp
      H.assert_close(y, H.matmul(ra, rb), tol, RTOL, what .. ": forward")
      H.assert_close(a.grad, H.matmul(rg, T(rb)), tol, RTOL, what .. ": dA")
      H.assert_close(b.grad, H.matmul(T(ra), rg), tol, RTOL, what .. ": dB")
      assert.is_true(max_diff(H.matmul(at, bt), H.matmul(ra, rb)) > 1e-3, what .. ": rounding invisible")
      assert.is_true(max_diff(H.matmul(gt, T(rb)), H.matmul(rg, T(rb))) > 1e-3, what .. ": dy not rounded")
    end
    local u, v = cnn.randn(11), cnn.randn(11)
    local dot = cnn.autocast("bfloat16", function() return u:matmul(v) end)
    local s = 0
    for i = 1, 11 do s = s + bf16(u[i]:item()) * bf16(v[i]:item()) end
    H.assert_close(dot, s, ATOL, RTOL, "1-d dot")
  end)

  it("bmm and broadcast matmul: forward and gradients", function()
    cnn.manual_seed(25)
    local a, b = cnn.randn(3, 4, 6):requires_grad_(), cnn.randn(3, 6, 5):requires_grad_()
    local y = cnn.autocast("bfloat16", function() return cnn.bmm(a, b) end)
    local g = cnn.randn(3, 4, 5)
    ;(y * g):sum():backward()
    local at, bt, gt = a:detach():totable(), b:detach():totable(), g:totable()
    H.assert_close(y, bmatmul(at, bt, bf16), ATOL, RTOL, "bmm forward")
    local dA, dB = {}, {}
    for i = 1, 3 do
      dA[i] = H.matmul(map(gt[i], bf16), T(map(bt[i], bf16)))
      dB[i] = H.matmul(T(map(at[i], bf16)), map(gt[i], bf16))
    end
    H.assert_close(a.grad, dA, ATOL, RTOL, "bmm dA")
    H.assert_close(b.grad, dB, ATOL, RTOL, "bmm dB")

    -- a batch of matrices times one matrix (B broadcast, stride 0), and
    -- one matrix times a batch (A broadcast); dB sums over the batch
    local m, w = cnn.randn(2, 3, 4, 6), cnn.randn(6, 5):requires_grad_()
    local p = cnn.autocast("bfloat16", function() return m:matmul(w) end)
    local gp = cnn.randn(2, 3, 4, 5)
    ;(p * gp):sum():backward()
    local wr, dw = map(w:detach():totable(), bf16), nil
    for i = 1, 2 do
      for j = 1, 3 do
        local mij, gij = map(m[i][j]:totable(), bf16), map(gp[i][j]:totable(), bf16)
        H.assert_close(p[i][j], H.matmul(mij, wr), ATOL, RTOL, "broadcast B forward")
        local part = H.matmul(T(mij), gij)
        if dw then
          for r = 1, #dw do for c = 1, #dw[1] do dw[r][c] = dw[r][c] + part[r][c] end end
        else
          dw = part
        end
      end
    end
    H.assert_close(w.grad, dw, ATOL, RTOL, "broadcast B: dB summed over the batch")
    local one, many = cnn.randn(4, 6), cnn.randn(3, 6, 2)
    local q = cnn.autocast("bfloat16", function() return one:matmul(many) end)
    for i = 1, 3 do
      H.assert_close(q[i], H.matmul(map(one:totable(), bf16), map(many[i]:totable(), bf16)),
                     ATOL, RTOL, "broadcast A forward")
    end
  end)

  it("linear: rounded product, float32 bias, gradients", function()
    cnn.manual_seed(26)
    local x, w, b = cnn.randn(6, 10):requires_grad_(), cnn.randn(4, 10):requires_grad_(),
                    cnn.randn(4):requires_grad_()
    local y = cnn.autocast("bfloat16", function() return F.linear(x, w, b) end)
    local g = cnn.randn(6, 4)
    ;(y * g):sum():backward()
    local xr, wr = map(x:detach():totable(), bf16), map(w:detach():totable(), bf16)
    local gt, bt = g:totable(), b:detach():totable()
    local ref = H.matmul(xr, T(wr))
    for i = 1, 6 do for j = 1, 4 do ref[i][j] = ref[i][j] + bt[j] end end
    H.assert_close(y, ref, ATOL, RTOL, "linear forward")
    H.assert_close(x.grad, H.matmul(map(gt, bf16), wr), ATOL, RTOL, "linear dx")
    H.assert_close(w.grad, H.matmul(T(map(gt, bf16)), xr), ATOL, RTOL, "linear dw")
    local db = { 0, 0, 0, 0 }       -- the bias add is float32: its gradient is the unrounded g
    for i = 1, 6 do for j = 1, 4 do db[j] = db[j] + gt[i][j] end end
    H.assert_close(b.grad, db, 1e-5, 1e-5, "linear db")
    -- one node, as in float32 (it was matmul's node with a transposed
    -- weight gradient, copied element by element into w.grad)
    assert.are.equal("LinearBackward", y.grad_fn)
    assert.is_true(w.grad:is_contiguous())
  end)

  it("linear over a batch of matrices: the same rows as 2-D", function()
    cnn.manual_seed(28)
    local x = cnn.randn(2, 3, 10):requires_grad_()
    local w, b = cnn.randn(4, 10):requires_grad_(), cnn.randn(4):requires_grad_()
    local g = cnn.randn(2, 3, 4)
    local y = cnn.autocast("bfloat16", function() return F.linear(x, w, b) end)
    ;(y * g):sum():backward()
    local x2 = x:detach():reshape(6, 10):requires_grad_()
    local w2, b2 = w:detach():clone():requires_grad_(), b:detach():clone():requires_grad_()
    local y2 = cnn.autocast("bfloat16", function() return F.linear(x2, w2, b2) end)
    ;(y2 * g:reshape(6, 4)):sum():backward()
    assert.are.same({ 2, 3, 4 }, y.shape)
    H.assert_close(y:reshape(6, 4), y2:totable(), 1e-6, 1e-6, "3-D forward")
    H.assert_close(x.grad:reshape(6, 10), x2.grad:totable(), 1e-6, 1e-6, "3-D dx")
    H.assert_close(w.grad, w2.grad:totable(), 1e-5, 1e-5, "3-D dw")
    H.assert_close(b.grad, b2.grad:totable(), 1e-5, 1e-5, "3-D db")
  end)

  it("the example network's layers train and give float32 gradients", function()
    cnn.manual_seed(27)
    local net = nn.Sequential(nn.Conv2d(1, 8, 3, { padding = 1 }), nn.BatchNorm2d(8), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 7 * 7, 10))
    local x, y = cnn.randn(32, 1, 14, 14), cnn.randint(1, 10, { 32 })
    local opt = optim.Adam(net:parameters(), { lr = 1e-2 })
    local first, last
    for _ = 1, 30 do
      opt:zero_grad()
      local loss = cnn.autocast("bfloat16", function() return F.cross_entropy(net(x), y) end)
      loss:backward()
      opt:step()
      first = first or loss:item()
      last = loss:item()
    end
    for _, p in ipairs(net:parameters()) do
      assert.equal("float32", p.dtype)
      assert.equal("float32", p.grad.dtype)
    end
    assert.is_true(last < 0.3 * first, ("loss %g -> %g"):format(first, last))
  end)
end)
