-- helpers.lua -- shared helpers of the Lua specs (tests/lua/*_spec.lua).
--
-- Independent references only: values are compared with hand-computed
-- numbers or naive Lua loops written here, never with the code under test.
-- Tensors are read back through totable(), so a helper never relies on the
-- op being tested.

local H = {}

-- The op types of an ONNX file's nodes, comma-separated ("Conv,Relu,...").
function H.onnx_op_types(path)
  local ops = {}
  for _, n in ipairs(cnn.io.onnx_read(path).nodes) do ops[#ops + 1] = n.op_type end
  return table.concat(ops, ",")
end

-- Flatten a number, nested table or tensor into a flat Lua list.
function H.flat(v, out)
  out = out or {}
  if cnn.is_tensor(v) then v = v:totable() end
  if type(v) == "table" then
    for _, e in ipairs(v) do H.flat(e, out) end
  else
    out[#out + 1] = v
  end
  return out
end

-- Shape of a nested table (following first elements).
function H.table_shape(t)
  local s = {}
  while type(t) == "table" do
    s[#s + 1] = #t
    t = t[1]
  end
  return s
end

local function shape_str(s)
  if #s == 0 then return "scalar" end
  return table.concat(s, "x")
end
H.shape_str = shape_str

-- Compare got (tensor/table/number) with expected elementwise:
-- |g - e| <= atol + rtol * |e|; NaN matches NaN. Returns ok, message.
function H.compare(got, expected, atol, rtol)
  atol, rtol = atol or 1e-5, rtol or 1e-5
  local g, e = H.flat(got), H.flat(expected)
  if #g ~= #e then
    return false, ("element count %d, expected %d"):format(#g, #e)
  end
  local worst, wi = -1, 0
  for i = 1, #e do
    local a, b = g[i], e[i]
    local bad
    if b ~= b then
      bad = a == a
    else
      bad = not (math.abs(a - b) <= atol + rtol * math.abs(b))
    end
    if bad then
      local d = (a ~= a or b ~= b) and math.huge or math.abs(a - b)
      if d > worst then worst, wi = d, i end
    end
  end
  if wi > 0 then
    return false, ("element %d: got %s, expected %s (worst of %d)"):format(wi, tostring(g[wi]), tostring(e[wi]), #e)
  end
  return true
end

function H.assert_close(got, expected, atol, rtol, what)
  local ok, msg = H.compare(got, expected, atol, rtol)
  assert(ok, (what and (what .. ": ") or "") .. (msg or ""))
end

-- Assert a tensor's shape equals the list s.
function H.assert_shape(t, s)
  local got = t.shape
  assert(shape_str(got) == shape_str(s), ("shape %s, expected %s"):format(shape_str(got), shape_str(s)))
end

-- fn() must raise an error whose message contains every plain string given.
function H.raises(fn, ...)
  local ok, err = pcall(fn)
  assert(not ok, "expected an error, but the call succeeded")
  err = tostring(err)
  for _, p in ipairs({...}) do
    assert(err:find(p, 1, true), ("error %q does not contain %q"):format(err, p))
  end
  return err
end

-- Central finite differences of a scalar function f(x) (a Lua number) with
-- respect to every element of the float64 tensor x (modified and restored
-- through a flat view). Returns a flat list of partials.
function H.fd_grad(f, x, eps)
  eps = eps or 1e-6
  local flat = x:view(-1)
  local g = {}
  for i = 1, flat:numel() do
    local v = flat[i]:item()
    flat[i] = v + eps
    local fp = f(x)
    flat[i] = v - eps
    local fm = f(x)
    flat[i] = v
    g[i] = (fp - fm) / (2 * eps)
  end
  return g
end

-- Naive matrix product of nested tables.
-- Analytic gradients of f(inputs...) (a one-element tensor) against central
-- differences (H.fd_grad) computed on plain copies of the inputs.
function H.gradcheck(f, inputs, tol)
  tol = tol or 1e-6
  local leaves = {}
  for i, x in ipairs(inputs) do leaves[i] = x:clone():detach():requires_grad_() end
  f(table.unpack(leaves)):backward()
  for k = 1, #inputs do
    local plain = {}
    for i, x in ipairs(inputs) do plain[i] = x:clone():detach() end
    local numeric = H.fd_grad(function()
      return cnn.no_grad(function() return f(table.unpack(plain)):item() end)
    end, plain[k])
    assert(leaves[k].grad, "input " .. k .. " got no gradient")
    H.assert_close(leaves[k].grad, numeric, tol, tol, "input " .. k)
  end
end

function H.matmul(a, b)
  local n, k, m = #a, #b, #b[1]
  local c = {}
  for i = 1, n do
    c[i] = {}
    for j = 1, m do
      local s = 0
      for p = 1, k do s = s + a[i][p] * b[p][j] end
      c[i][j] = s
    end
  end
  return c
end

-- The transpose of a nested 2-d table.
function H.transpose(a)
  local t = {}
  for j = 1, #a[1] do
    t[j] = {}
    for i = 1, #a do t[j][i] = a[i][j] end
  end
  return t
end

-- Map a function over a nested table.
function H.map(t, f)
  if type(t) ~= "table" then return f(t) end
  local r = {}
  for i, v in ipairs(t) do r[i] = H.map(v, f) end
  return r
end

-- x rounded to bfloat16 (round to nearest even on the float32 bits)
function H.bf16(x)
  local bits = string.unpack("<I4", string.pack("<f", x))
  bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
  return (string.unpack("<f", string.pack("<I4", bits)))
end

-- naive conv2d, stride 1, zero padding `pad`, over nested tables
function H.conv2d_ref(x, w, b, pad)
  local N, C, H_, W_ = #x, #x[1], #x[1][1], #x[1][1][1]
  local K, R, S = #w, #w[1][1], #w[1][1][1]
  local OH, OW = H_ + 2 * pad - R + 1, W_ + 2 * pad - S + 1
  local y = {}
  for n = 1, N do
    y[n] = {}
    for k = 1, K do
      y[n][k] = {}
      for oh = 1, OH do
        y[n][k][oh] = {}
        for ow = 1, OW do
          local s = b and b[k] or 0
          for c = 1, C do
            for r = 1, R do
              for q = 1, S do
                local ih, iw = oh + r - 1 - pad, ow + q - 1 - pad
                if ih >= 1 and ih <= H_ and iw >= 1 and iw <= W_ then
                  s = s + x[n][c][ih][iw] * w[k][c][r][q]
                end
              end
            end
          end
          y[n][k][oh][ow] = s
        end
      end
    end
  end
  return y
end

-- onnx.checker.check_model(full_check = True), through Debian's python3-onnx,
-- must accept the ONNX file at path; pending (with the reason) without it.
function H.assert_onnx_checked(path)
  local py = "/usr/bin/python3"
  if os.execute(py .. " -c 'import onnx' 2>/dev/null") ~= true then
    pending("python3-onnx is missing: onnx.checker not run (apt install python3-onnx)")
    return
  end
  local p = io.popen(py .. " -c \"import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)\" "
                     .. path .. " 2>&1")
  local out = p:read("a")
  assert(p:close(), "onnx.checker rejected " .. path .. ": " .. out)
end

-- x through a container's children called one by one, each with its own
-- forward: what a fused nn.Sequential block must match.
function H.run_layers(net, x)
  for i = 1, #net do x = net[i](x) end
  return x
end

-- fn() with cnn.set_conv_algo(algo), the previous algorithm restored
-- whatever fn does; fn's error is raised after.
function H.with_conv_algo(algo, fn)
  local prev = cnn.get_conv_algo()
  cnn.set_conv_algo(algo)
  local ok, err = pcall(fn)
  cnn.set_conv_algo(prev)
  assert(ok, err)
end

-- The largest |a - b| over two tensors / nested tables of one size.
function H.max_diff(a, b)
  local fa, fb, m = H.flat(a), H.flat(b), 0
  for i = 1, #fa do m = math.max(m, math.abs(fa[i] - fb[i])) end
  return m
end

-- Busy-wait `seconds` on cnn.clock() (a known time for timing tests).
function H.spin(seconds)
  local t0 = cnn.clock()
  while cnn.clock() - t0 < seconds do end
end

-- A layer that takes `ms` milliseconds in forward, then passes x on.
function H.SpinLayer(ms)
  H.Spin = H.Spin or nn.Module:extend("Spin")
  function H.Spin:init(m) self.ms = m end
  function H.Spin:forward(x)
    H.spin(self.ms * 1e-3)
    return x * 1
  end
  return H.Spin(ms)
end

-- True when no module of net keeps a hook (profile/trace clean up).
function H.no_hooks_left(net)
  for _, m in ipairs(net:modules()) do
    local h = rawget(m, "_hooks")
    if #h.pre + #h.fwd + #h.bwd > 0 then return false end
  end
  return true
end

-- For the specs of the fake CUDA device: exit 77 (skipped) without CUDA, or
-- 1 when CNNSH_FAKE_CUDA_REQUIRED says the module must be there.
function H.need_cuda(spec)
  local available, why = cnn.cuda.is_available()
  if available then return end
  if os.getenv("CNNSH_FAKE_CUDA_REQUIRED") then
    io.stderr:write(spec, ": cuda is not available: ", tostring(why), "\n")
    os.exit(1)
  end
  io.stderr:write(spec, ": no CUDA module (set CNNSH_CUDA_MODULE); skipped\n")
  os.exit(77)
end

-- Trains a small CNN under cnn.autocast(dtype) with a GradScaler on a
-- synthetic task (class: which half of a 6x6 image is brighter) for
-- `steps` SGD steps on `device`; returns the first and last loss and the net.
function H.autocast_training(dtype, device, steps, init_scale)
  cnn.manual_seed(11)
  local n = 64
  local x, y = cnn.randn(n, 1, 6, 6), cnn.zeros(n, "int64")
  for i = 1, n do
    local rows = i % 2 == 0 and { 1, 3 } or { 4, 6 }
    x[i][1][{ rows }]:add_(1.5)
    y[i] = i % 2 == 0 and 2 or 1
  end
  x, y = x:to(device), y:to(device)
  local net = nn.Sequential(nn.Conv2d(1, 4, 3, { padding = 1 }), nn.ReLU(), nn.Flatten(),
                            nn.Linear(4 * 36, 2)):to(device)
  local opt = optim.SGD(net:parameters(), { lr = 0.05, momentum = 0.9 })
  local scaler = optim.GradScaler{ init_scale = init_scale }
  local first, last
  for _ = 1, steps do
    opt:zero_grad()
    local loss = cnn.autocast(dtype, function() return F.cross_entropy(net(x), y) end)
    scaler:scale(loss):backward()
    scaler:step(opt)
    scaler:update()
    first = first or loss:item()
    last = loss:item()
  end
  return first, last, net
end

-- Resident set size of this process in MiB (Linux /proc/self/statm).
-- writes a string of bytes to a file (hand-made, corrupt or truncated inputs)
function H.write_bytes(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

function H.rss_mb()
  local f = assert(io.open("/proc/self/statm"))
  local _, rss = f:read("n", "n")
  f:close()
  return rss * 4096 / 1048576
end

-- True when running under AddressSanitizer (its quarantine holds freed
-- memory, so RSS is not a measure of leaks there).
function H.sanitized()
  local f = io.open("/proc/self/maps")
  if not f then return false end
  local maps = f:read("a")
  f:close()
  return maps:find("libasan", 1, true) ~= nil
end

return H
