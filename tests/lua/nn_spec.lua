-- nn_spec.lua -- tests of stdlib/nn: the module system (names, printing,
-- modes, state dicts, hooks, errors that name the layer, user modules) and
-- each layer's forward against references computed here in plain Lua loops
-- or from closed forms, never with the code under test.
-- Run: cd tests/lua && CNNSH_STDLIB=../../stdlib ../../build/repl/cnnsh /usr/bin/busted nn_spec.lua
package.path = "./?.lua;" .. package.path

local function close(a, b, tol, what)
  tol = tol or 1e-5
  if math.abs(a - b) > tol * (1 + math.abs(b)) then
    error(string.format("%s: got %.9g, expected %.9g", what or "value", a, b), 2)
  end
end

local flat = require("helpers").flat -- a tensor or nested table as a flat list
local H = require("helpers")

local function all_close(t, ref, tol, what)
  local a = flat(t)
  assert.are.equal(#ref, #a, (what or "tensor") .. ": element count")
  for i = 1, #ref do close(a[i], ref[i], tol, (what or "tensor") .. "[" .. i .. "]") end
end

local function names_of(iter)
  local out = {}
  for name in iter do out[#out + 1] = name end
  return out
end

local function err_of(fn, ...)
  local ok, e = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

describe("nn.Module system", function()
  it("builds Sequential from varargs and from a table, indexable", function()
    local a = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    local b = nn.Sequential { nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2) }
    for _, net in ipairs({ a, b }) do
      assert.are.equal(3, #net)
      assert.are.same({ 3, 4 }, net[1].weight.shape)
      assert.are.equal("ReLU", net[2].__name)
      assert.are.same({ 5, 2 }, net(cnn.randn(5, 4)).shape)
    end
    a:append(nn.Sigmoid())
    assert.are.equal(4, #a)
  end)

  it("prints the module tree like PyTorch", function()
    local net = nn.Sequential(nn.Conv2d(1, 32, 3, { padding = 1 }), nn.ReLU())
    assert.are.equal([[
Sequential(
  (1): Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
  (2): ReLU()
)]], tostring(net))
    local Net = nn.Module:extend("Net")
    function Net:init()
      self.features = nn.Sequential(nn.Conv2d(3, 8, 5, { stride = 2, bias = false }),
                                    nn.BatchNorm2d(8), nn.MaxPool2d(2))
      self.fc = nn.Linear(8, 10)
    end
    assert.are.equal([[
Net(
  (features): Sequential(
    (1): Conv2d(3, 8, kernel_size=(5, 5), stride=(2, 2), bias=False)
    (2): BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)
    (3): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
  )
  (fc): Linear(in_features=8, out_features=10, bias=True)
)]], tostring(Net()))
    assert.are.equal("Dropout(p=0.5, inplace=False)", tostring(nn.Dropout()))
    assert.are.equal("LeakyReLU(negative_slope=0.2)", tostring(nn.LeakyReLU(0.2)))
    assert.are.equal("Flatten(start_dim=2, end_dim=-1)", tostring(nn.Flatten()))
    assert.are.equal("AdaptiveAvgPool2d(output_size=(1, 1))", tostring(nn.AdaptiveAvgPool2d({ 1, 1 })))
  end)

  it("names parameters with dotted paths in registration order", function()
    local Net = nn.Module:extend("Net")
    function Net:init()
      self.features = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
      self.head = nn.Linear(4, 2)
    end
    local net = Net()
    assert.are.same({ "features.1.weight", "features.1.bias", "features.2.weight",
                      "features.2.bias", "head.weight", "head.bias" }, names_of(net:named_parameters()))
    assert.are.same({ "features.2.running_mean", "features.2.running_var",
                      "features.2.num_batches_tracked" }, names_of(net:named_buffers()))
    assert.are.same({ "features", "head" }, names_of(net:named_children()))
    assert.are.same({ "", "features", "features.1", "features.2", "features.3", "head" },
                    names_of(net:named_modules()))
    assert.are.equal(6, #net:parameters())
    assert.are.equal(2, #net:children())
    assert.are.equal(6, #net:modules())
  end)

  it("counts a shared layer once", function()
    local lin = nn.Linear(3, 3)
    local net = nn.Sequential(lin, nn.ReLU(), lin)
    assert.are.equal(2, #net:parameters())
  end)

  it("switches train/eval recursively and zeroes gradients", function()
    local net = nn.Sequential(nn.Linear(3, 3), nn.Sequential(nn.Dropout(0.5), nn.Linear(3, 1)))
    assert.is_true(net[2][1].training)
    net:eval()
    for _, m in ipairs(net:modules()) do assert.is_false(m.training) end
    net:train()
    for _, m in ipairs(net:modules()) do assert.is_true(m.training) end
    net(cnn.randn(2, 3)):sum():backward()
    assert.is_not_nil(net[1].weight.grad)
    net:zero_grad()
    for _, p in ipairs(net:parameters()) do assert.is_nil(p.grad) end
  end)

  it("has a doc string for every public class", function()
    for _, name in ipairs({ "Module", "Sequential", "ModuleList", "Conv2d", "Linear", "MaxPool2d",
        "AvgPool2d", "AdaptiveAvgPool2d", "ReLU", "LeakyReLU", "ELU", "GELU", "Sigmoid", "Tanh",
        "Softmax", "LogSoftmax", "Dropout", "BatchNorm2d", "BatchNorm1d", "Flatten", "Identity" }) do
      local d = cnn.doc[nn[name]]
      assert.is_string(d, "doc of nn." .. name)
    end
    assert.is_string(cnn.doc[nn.init.kaiming_uniform_])
    assert.is_string(cnn.doc[nn.utils.clip_grad_norm])
  end)
end)

describe("state dicts", function()
  local function make()
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 3))
  end

  it("holds parameters and buffers, and round-trips", function()
    local a, b = make(), make()
    local sd = a:state_dict()
    local keys = {}
    for k in pairs(sd) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.are.same({ "1.bias", "1.weight", "2.bias", "2.num_batches_tracked", "2.running_mean",
                      "2.running_var", "2.weight", "4.bias", "4.weight" }, keys)
    assert.are.equal("int64", sd["2.num_batches_tracked"].dtype)
    a(cnn.randn(4, 1, 4, 4)) -- moves a's running statistics
    b:load_state_dict(a:state_dict())
    for name, t in pairs(a:state_dict()) do
      all_close(b:state_dict()[name], flat(t), 0, name)
    end
    a:eval(); b:eval()
    local x = cnn.randn(2, 1, 4, 4)
    all_close(b(x), flat(a(x)), 1e-6, "outputs")
    assert.is_true(b[1].weight.requires_grad)
  end)

  it("accepts the nested table that cnn.load rebuilds", function()
    local a, b = make(), make()
    local nested = {}
    for name, t in pairs(a:state_dict()) do
      local i, rest = name:match("^(%d+)%.(.+)$")
      nested[i] = nested[i] or {}
      nested[i][rest] = t
    end
    b:load_state_dict(nested)
    all_close(b[4].weight, flat(a[4].weight), 0, "4.weight")
  end)

  it("survives cnn.save / cnn.load", function()
    if not (cnn.save and cnn.load) then pending("cnn.save is not bound yet") return end
    local a, b = make(), make()
    a(cnn.randn(4, 1, 4, 4))
    local path = os.tmpname()
    cnn.save(path, a:state_dict())
    b:load_state_dict(cnn.load(path))
    os.remove(path)
    for name, t in pairs(a:state_dict()) do
      all_close(b:state_dict()[name], flat(t), 0, name)
    end
  end)

  it("explains size mismatches, missing and unexpected keys", function()
    local small = nn.Sequential(nn.Conv2d(1, 16, 3))
    local big = nn.Sequential(nn.Conv2d(1, 32, 3))
    local e = err_of(small.load_state_dict, small, big:state_dict())
    assert.truthy(e:find("^load_state_dict: "), e)
    assert.truthy(e:find("size mismatch for 1.weight: checkpoint 32x1x3x3, model 16x1x3x3", 1, true), e)
    local sd = small:state_dict()
    local before = flat(small[1].weight)
    sd["1.bias"] = nil
    sd["2.weight"] = cnn.zeros(3)
    e = err_of(small.load_state_dict, small, sd)
    assert.truthy(e:find("missing keys: 1.bias", 1, true), e)
    assert.truthy(e:find("unexpected keys: 2.weight", 1, true), e)
    all_close(small[1].weight, before, 0, "untouched after a failed load")
    local r = small:load_state_dict(sd, { strict = false })
    assert.are.same({ "1.bias" }, r.missing_keys)
    assert.are.same({ "2.weight" }, r.unexpected_keys)
  end)

  it("moves to float64 keeping trainable leaves and int64 buffers", function()
    local net = make():to("float64")
    for _, p in ipairs(net:parameters()) do
      assert.are.equal("float64", p.dtype)
      assert.is_true(p.requires_grad)
      assert.is_true(p.is_leaf)
    end
    assert.are.equal("float64", net[2].running_mean.dtype)
    assert.are.equal("int64", net[2].num_batches_tracked.dtype)
    assert.are.equal("float64", net(cnn.randn(2, 1, 4, 4, "float64")).dtype)
  end)

  it("converts in place: an optimizer built before the move still trains the model", function()
    local lin = nn.Linear(3, 2)
    local w = lin.weight
    local opt = optim.SGD(lin:parameters(), { lr = 0.5 })
    lin:to("float64")
    assert.is_true(rawequal(w, lin.weight))           -- the same tensor object
    assert.are.equal("float64", w.dtype)
    local before = w:totable()
    lin(cnn.ones(1, 3, "float64")):sum():backward()   -- dL/dW = 1 everywhere
    opt:step()
    H.assert_close(w, H.map(before, function(v) return v - 0.5 end), 1e-12, 0)
  end)

  it("set_ refuses non-leaves and trainable leaves outside no_grad", function()
    local a = cnn.ones(2):requires_grad_()
    H.raises(function() (a * 2):set_(cnn.zeros(3)) end, "set_: only a leaf tensor")
    H.raises(function() a:set_(cnn.zeros(3)) end, "set_: a leaf tensor that requires grad", "cnn.no_grad")
    a:sum():backward()
    cnn.no_grad(function() a:set_(cnn.zeros(3, "float64")) end)
    H.assert_shape(a, { 3 })
    assert.are.equal("float64", a.dtype)
    assert.is_nil(a.grad)                              -- the old 2-element grad no longer fits
    local b = cnn.zeros(2)
    b:set_(cnn.tensor({ 5, 6 }))
    H.assert_close(b, { 5, 6 }, 0, 0)
  end)
end)

describe("hooks", function()
  it("run pre-hook, forward, forward hook in order, and can be removed", function()
    local log = {}
    local lin = nn.Linear(2, 2)
    local h1 = lin:register_forward_pre_hook(function(m, x) log[#log + 1] = "pre" end)
    local h2 = lin:register_forward_hook(function(m, x, out)
      assert.are.equal(lin, m)
      log[#log + 1] = "fwd " .. table.concat(out.shape, "x")
    end)
    lin(cnn.randn(3, 2))
    assert.are.same({ "pre", "fwd 3x2" }, log)
    h1:remove(); h2:remove()
    lin(cnn.randn(3, 2))
    assert.are.equal(2, #log)
  end)

  it("a call returns exactly forward's values, even with hooks", function()
    local m = nn.Sequential(nn.ReLU())
    assert.are.equal(1, select("#", m(cnn.randn(2))))
    local lin = nn.Linear(2, 2)
    lin:register_forward_hook(function() end)
    assert.are.equal(1, select("#", lin(cnn.randn(3, 2))))
    local pool = nn.MaxPool2d(2, { return_indices = true })
    local n, y, idx = select("#", pool(cnn.randn(1, 1, 4, 4))), pool(cnn.randn(1, 1, 4, 4))
    assert.are.equal(2, n)
    assert.are.same({ 1, 1, 2, 2 }, { table.unpack(idx.shape) })
    assert.are.same({ 1, 1, 2, 2 }, { table.unpack(y.shape) })
  end)

  it("let hooks replace the input and the output", function()
    local id = nn.Identity()
    id:register_forward_pre_hook(function(m, x) return x * 2 end)
    id:register_forward_hook(function(m, x, out) return out + 1 end)
    all_close(id(cnn.tensor({ 1, 2 })), { 3, 5 }, 0)
  end)

  it("give backward hooks the gradient of the output", function()
    local lin = nn.Linear(3, 2)
    local seen
    local h = lin:register_full_backward_hook(function(m, g) seen = g:clone() end)
    local y = lin(cnn.randn(4, 3))
    local loss = (y * 3):sum()
    loss:backward()
    all_close(seen, { 3, 3, 3, 3, 3, 3, 3, 3 }, 0, "grad_output")
    h:remove()
    seen = nil
    lin(cnn.randn(4, 3)):sum():backward()
    assert.is_nil(seen)
  end)

  it("let a backward hook scale the gradient", function()
    local lin = nn.Linear(1, 1, { bias = false })
    lin:register_full_backward_hook(function(m, g) return g * 10 end)
    local x = cnn.tensor({ { 2.0 } })
    lin(x):sum():backward()
    close(lin.weight.grad:item(), 20, 1e-6, "dL/dw")
  end)
end)

describe("nn.Sequential fuses BatchNorm + ReLU", function()
  -- the same network twice (same weights), one of them run as separate ops
  local function pair(training)
    cnn.manual_seed(3)
    local a = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten())
    local b = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten())
    b:load_state_dict(a:state_dict())
    for _, n in ipairs({ a, b }) do
      cnn.no_grad(function()
        n[2].weight:copy_(cnn.tensor({ 0.5, -1.5, 2 })); n[2].bias:copy_(cnn.tensor({ 0.1, 0.3, -0.2 }))
      end)
      if training then n:train() else n:eval() end
    end
    return a, b
  end
  -- b's unfused result: its layers called one by one
  local function unfused(b, x) return b[4](b[3](b[2](b[1](x)))) end

  for _, training in ipairs({ true, false }) do
    it("gives the unfused values and gradients, " .. (training and "training" or "eval"), function()
      local a, b = pair(training)
      local x = cnn.randn(4, 2, 6, 5)
      local dy = cnn.randn(4, 3 * 4 * 3)
      local ya, yb = a(x), unfused(b, x)
      all_close(ya, flat(yb), 1e-6, "y")
      ya:backward(dy); yb:backward(dy)
      all_close(a[2].weight.grad, flat(b[2].weight.grad), 1e-5, "dgamma")
      all_close(a[2].bias.grad, flat(b[2].bias.grad), 1e-5, "dbeta")
      all_close(a[1].weight.grad, flat(b[1].weight.grad), 1e-5, "conv weight grad")
      all_close(a[2].running_mean, flat(b[2].running_mean), 1e-6, "running_mean")
      all_close(a[2].running_var, flat(b[2].running_var), 1e-6, "running_var")
      assert.are.equal(b[2].num_batches_tracked:item(), a[2].num_batches_tracked:item())
    end)
  end

  it("runs the fused op only without hooks; a hook sees batch norm's own output", function()
    local bn, relu = nn.BatchNorm2d(2), nn.ReLU()
    local net = nn.Sequential(bn, relu)
    local x = cnn.randn(3, 2, 4, 4)
    assert.are.equal("BatchNormReluBackward", tostring(net(x).grad_fn))
    local seen
    local h = relu:register_forward_hook(function(_, input) seen = input end)
    local y = net(x)
    h:remove()
    assert.are.equal("ReluBackward", tostring(y.grad_fn))
    assert.is_true(seen:min():item() < 0) -- the normalised values before relu
    h = bn:register_forward_pre_hook(function() end)
    assert.are.equal("ReluBackward", tostring(net(x).grad_fn))
    h:remove()
    assert.are.equal("BatchNormReluBackward", tostring(net(x).grad_fn))
  end)

  it("relu passes the gradient where its input is NaN (PyTorch's threshold_backward), as the fused op", function()
    for _, dt in ipairs({ "float32", "float64" }) do
      local x = cnn.tensor({ 0 / 0, -1, 2 }, dt):requires_grad_()
      F.relu(x):sum():backward()
      assert.are.same({ 1, 0, 1 }, flat(x.grad), dt)
    end
  end)

  it("names the batch norm in an error", function()
    local e = err_of(nn.Sequential(nn.BatchNorm2d(3), nn.ReLU()), cnn.randn(2, 3))
    assert.matches("1 (BatchNorm2d 3): BatchNorm2d: expected 4D input", e, 1, true)
  end)
end)

describe("errors name the layer", function()
  it("prefixes the dotted path and the layer", function()
    local Net = nn.Module:extend("Net")
    function Net:init()
      self.features = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 26 * 26, 8))
    end
    function Net:forward(x) return self.features(x) end
    local net = Net()
    assert.are.same({ 2, 8 }, net(cnn.randn(2, 1, 28, 28)).shape)
    local e = err_of(net, cnn.randn(2, 1, 20, 20))
    assert.truthy(e:find("^features%.4 %(Linear 2704%->8%): "), e)
    assert.truthy(e:find("linear", 20, true), e) -- F.linear's own message is kept
    assert.falsy(e:find(".lua:", 1, true), e) -- no position prefixes in the middle
    -- a direct call names the layer
    e = err_of(nn.Linear(5, 3), cnn.randn(2, 4))
    assert.truthy(e:find("^Linear 5%->3: "), e)
    -- and the module still works afterwards
    assert.are.same({ 2, 8 }, net(cnn.randn(2, 1, 28, 28)).shape)
  end)

  it("names layers inside a ModuleList", function()
    local Net = nn.Module:extend("Net")
    function Net:init() self.blocks = nn.ModuleList(nn.Linear(4, 4), nn.Linear(5, 4)) end
    function Net:forward(x)
      for _, b in ipairs(self.blocks) do x = b(x) end
      return x
    end
    local e = err_of(Net(), cnn.randn(1, 4))
    assert.truthy(e:find("^blocks%.2 %(Linear 5%->4%): "), e)
  end)

  it("checks BatchNorm2d's input rank", function()
    local e = err_of(nn.BatchNorm2d(3), cnn.randn(2, 3))
    assert.truthy(e:find("expected 4D input (got 2D input", 1, true), e)
  end)
end)

describe("user-defined modules", function()
  local Residual = nn.Module:extend("Residual")
  function Residual:init(c)
    self.conv1 = nn.Conv2d(c, c, 3, { padding = 1 })
    self.conv2 = nn.Conv2d(c, c, 3, { padding = 1 })
  end
  function Residual:forward(x)
    return F.relu(x + self.conv2(F.relu(self.conv1(x))))
  end

  it("compute a residual block and backpropagate into both convs", function()
    local r = Residual(2)
    assert.are.same({ "conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias" },
                    names_of(r:named_parameters()))
    local x = cnn.randn(1, 2, 5, 5)
    local y = r(x)
    local ref = F.relu(x + r.conv2(F.relu(r.conv1(x))))
    all_close(y, flat(ref), 1e-6, "residual")
    -- with zero second conv the block is relu(x)
    cnn.no_grad(function() r.conv2.weight:zero_(); r.conv2.bias:zero_() end)
    local xs = flat(x)
    local relu = {}
    for i, v in ipairs(xs) do relu[i] = math.max(v, 0) end
    all_close(r(x), relu, 1e-6, "relu(x)")
    r = Residual(2)
    r(x):sum():backward()
    assert.is_not_nil(r.conv1.weight.grad)
    assert.is_not_nil(r.conv2.weight.grad)
  end)

  it("register extra parameters and buffers", function()
    local Scale = nn.Module:extend("Scale")
    function Scale:init(n)
      self:register_parameter("gain", cnn.ones(n))
      self:register_buffer("count", cnn.zeros(1))
      local alpha = cnn.full({ n }, 2.0)
      alpha.requires_grad = true
      self.alpha = alpha -- a trainable leaf assigned to a field: a parameter too
    end
    function Scale:forward(x) return x * self.gain * self.alpha end
    local s = Scale(3)
    assert.are.same({ "gain", "alpha" }, names_of(s:named_parameters()))
    assert.are.same({ "count" }, names_of(s:named_buffers()))
    s(cnn.ones(3)):sum():backward()
    all_close(s.gain.grad, { 2, 2, 2 }, 0)
  end)

  it("inherit from user classes", function()
    local Base = nn.Module:extend("Base")
    function Base:init() self.fc = nn.Linear(2, 2) end
    function Base:forward(x) return self.fc(x) end
    local Derived = Base:extend("Derived")
    function Derived:init() Base.init(self); self.extra = nn.Linear(2, 1) end
    function Derived:forward(x) return self.extra(Base.forward(self, x)) end
    local d = Derived()
    assert.are.same({ 4, 1 }, d(cnn.randn(4, 2)).shape)
    assert.are.equal(4, #d:parameters())
    assert.is_true(nn.Module.is_instance(d, Base))
    assert.is_false(nn.Module.is_instance(nn.ReLU(), Base))
  end)
end)

describe("layers against references", function()
  it("Linear is x W^T + b", function()
    local lin = nn.Linear(3, 2)
    local x = cnn.randn(4, 3)
    local W, b, X = lin.weight:totable(), lin.bias:totable(), x:totable()
    local ref = {}
    for n = 1, 4 do
      for o = 1, 2 do
        local s = b[o]
        for i = 1, 3 do s = s + X[n][i] * W[o][i] end
        ref[#ref + 1] = s
      end
    end
    all_close(lin(x), ref, 1e-5, "linear")
    assert.is_nil(nn.Linear(3, 2, { bias = false }).bias)
  end)

  it("Conv2d matches a direct loop (stride 2, padding 1, groups 2)", function()
    local conv = nn.Conv2d(4, 6, 3, { stride = 2, padding = 1, groups = 2 })
    assert.are.same({ 6, 2, 3, 3 }, conv.weight.shape)
    local x = cnn.randn(2, 4, 5, 6)
    local X, W, B = x:totable(), conv.weight:totable(), conv.bias:totable()
    local ref = {}
    local Ho, Wo = 3, 3 -- floor((5 + 2 - 3) / 2) + 1, floor((6 + 2 - 3) / 2) + 1
    for n = 1, 2 do
      for o = 1, 6 do
        local g = (o - 1) // 3
        for i = 1, Ho do
          for j = 1, Wo do
            local s = B[o]
            for c = 1, 2 do
              for ki = 1, 3 do
                for kj = 1, 3 do
                  local yi, xj = (i - 1) * 2 - 1 + ki, (j - 1) * 2 - 1 + kj
                  if yi >= 1 and yi <= 5 and xj >= 1 and xj <= 6 then
                    s = s + X[n][g * 2 + c][yi][xj] * W[o][c][ki][kj]
                  end
                end
              end
            end
            ref[#ref + 1] = s
          end
        end
      end
    end
    local y = conv(x)
    assert.are.same({ 2, 6, 3, 3 }, y.shape)
    all_close(y, ref, 1e-4, "conv")
  end)

  it("initialises like PyTorch: U(-1/sqrt(fan_in), 1/sqrt(fan_in))", function()
    cnn.manual_seed(1)
    local conv = nn.Conv2d(16, 64, 3)
    local bound = 1 / math.sqrt(16 * 9)
    local w = flat(conv.weight)
    local mx, sum2 = 0, 0
    for _, v in ipairs(w) do
      mx = math.max(mx, math.abs(v))
      sum2 = sum2 + v * v
    end
    assert.is_true(mx <= bound * (1 + 1e-6), "inside the bound")
    assert.is_true(mx > 0.95 * bound, "fills the range")
    close(math.sqrt(sum2 / #w), bound / math.sqrt(3), 0.03, "std of U(-b, b)")
    for _, v in ipairs(flat(conv.bias)) do assert.is_true(math.abs(v) <= bound * (1 + 1e-6)) end
    local bn = nn.BatchNorm2d(3)
    all_close(bn.weight, { 1, 1, 1 }, 0)
    all_close(bn.bias, { 0, 0, 0 }, 0)
  end)

  it("activations follow their formulas", function()
    local xs = { -2, -0.5, 0, 0.5, 3 }
    local x = cnn.tensor(xs)
    local function ref(f)
      local out = {}
      for i, v in ipairs(xs) do out[i] = f(v) end
      return out
    end
    all_close(nn.ReLU()(x), ref(function(v) return math.max(v, 0) end))
    all_close(nn.LeakyReLU(0.1)(x), ref(function(v) return v > 0 and v or 0.1 * v end))
    all_close(nn.ELU(2)(x), ref(function(v) return v > 0 and v or 2 * (math.exp(v) - 1) end))
    all_close(nn.Sigmoid()(x), ref(function(v) return 1 / (1 + math.exp(-v)) end))
    all_close(nn.Tanh()(x), ref(function(v)
      return (math.exp(v) - math.exp(-v)) / (math.exp(v) + math.exp(-v)) end))
    -- GELU, exact form x * Phi(x); Phi from a series of erf (accurate here)
    local function erf(z)
      local s, term, n = 0, z, 0
      repeat
        s = s + term / (2 * n + 1)
        n = n + 1
        term = -term * z * z / n
      until math.abs(term) < 1e-12
      return 2 / math.sqrt(math.pi) * s
    end
    all_close(nn.GELU()(x), ref(function(v) return v * 0.5 * (1 + erf(v / math.sqrt(2))) end), 1e-4)
    local sum = 0
    for _, v in ipairs(xs) do sum = sum + math.exp(v) end
    all_close(nn.Softmax(1)(x), ref(function(v) return math.exp(v) / sum end))
    all_close(nn.LogSoftmax()(x), ref(function(v) return v - math.log(sum) end))
  end)

  it("pools over windows", function()
    local x = cnn.arange(1, 16):float():view(1, 1, 4, 4)
    all_close(nn.MaxPool2d(2)(x), { 6, 8, 14, 16 }, 0)
    all_close(nn.AvgPool2d(2)(x), { 3.5, 5.5, 11.5, 13.5 })
    all_close(nn.AdaptiveAvgPool2d(1)(x), { 8.5 })
    all_close(nn.MaxPool2d(3, { stride = 1 })(x), { 11, 12, 15, 16 }, 0)
  end)

  it("Flatten, Identity and Dropout", function()
    local x = cnn.randn(2, 3, 4, 5)
    assert.are.same({ 2, 60 }, nn.Flatten()(x).shape)
    assert.are.same({ 2, 12, 5 }, nn.Flatten(2, 3)(x).shape)
    assert.are.equal(x, nn.Identity()(x))
    local d = nn.Dropout(0.25)
    local ones = cnn.ones(10000)
    local y = flat(d(ones))
    local zeros = 0
    for _, v in ipairs(y) do
      if v == 0 then zeros = zeros + 1 else close(v, 1 / 0.75, 1e-6, "kept value") end
    end
    close(zeros / 10000, 0.25, 0.1, "dropped fraction")
    d:eval()
    all_close(d(cnn.ones(5)), { 1, 1, 1, 1, 1 }, 0)
  end)

  it("BatchNorm2d: batch statistics in training, running ones in eval", function()
    local bn = nn.BatchNorm2d(2, { momentum = 0.1 })
    local x = cnn.randn(3, 2, 2, 2) * 2 + 1
    local X = x:totable()
    local mean, var, uvar = {}, {}, {}
    for c = 1, 2 do
      local vals = {}
      for n = 1, 3 do for i = 1, 2 do for j = 1, 2 do vals[#vals + 1] = X[n][c][i][j] end end end
      local s = 0
      for _, v in ipairs(vals) do s = s + v end
      mean[c] = s / #vals
      local q = 0
      for _, v in ipairs(vals) do q = q + (v - mean[c]) ^ 2 end
      var[c], uvar[c] = q / #vals, q / (#vals - 1)
    end
    local y = bn(x):totable()
    for n = 1, 3 do
      for c = 1, 2 do
        for i = 1, 2 do
          for j = 1, 2 do
            close(y[n][c][i][j], (X[n][c][i][j] - mean[c]) / math.sqrt(var[c] + 1e-5), 1e-4, "train bn")
          end
        end
      end
    end
    all_close(bn.running_mean, { 0.1 * mean[1], 0.1 * mean[2] }, 1e-5, "running_mean")
    all_close(bn.running_var, { 0.9 + 0.1 * uvar[1], 0.9 + 0.1 * uvar[2] }, 1e-5, "running_var")
    assert.are.equal(1, bn.num_batches_tracked:item())
    assert.are.equal(0, bn.num_batches_tracked:dim()) -- 0-d int64, as PyTorch
    assert.are.equal("int64", bn.num_batches_tracked.dtype)
    bn:eval()
    local rm, rv = bn.running_mean:totable(), bn.running_var:totable()
    local z = bn(x):totable()
    close(z[2][1][1][2], (X[2][1][1][2] - rm[1]) / math.sqrt(rv[1] + 1e-5), 1e-4, "eval bn")
    close(z[3][2][2][1], (X[3][2][2][1] - rm[2]) / math.sqrt(rv[2] + 1e-5), 1e-4, "eval bn")
    assert.are.equal(1, bn.num_batches_tracked:item())
    -- a checkpoint from before (num_batches_tracked of shape {1}) still loads
    local old = bn:state_dict()
    old.num_batches_tracked = cnn.tensor({ 7 }, "int64")
    bn:load_state_dict(old)
    assert.are.equal(7, bn.num_batches_tracked:item())
    assert.are.equal(0, bn.num_batches_tracked:dim())
    -- BatchNorm1d on N x C
    local bn1 = nn.BatchNorm1d(2, { affine = false })
    local y1 = flat(bn1(cnn.tensor({ { 1, 10 }, { 3, 20 } })))
    all_close(y1, { -1, -1, 1, 1 }, 1e-3, "bn1d")
  end)
end)

describe("nn.utils.clip_grad_norm", function()
  it("returns the total norm and scales the gradients", function()
    local a = cnn.tensor({ 3.0, 0.0 }, "float64"); a.requires_grad = true
    local b = cnn.tensor({ 0.0, 4.0 }, "float64"); b.requires_grad = true
    ((a * a):sum() / 2 + (b * b):sum() / 2):backward() -- grads = a, b
    local total = nn.utils.clip_grad_norm({ a, b }, 1.0)
    close(total, 5, 1e-9, "total norm")
    all_close(a.grad, { 0.6, 0 }, 1e-5)
    all_close(b.grad, { 0, 0.8 }, 1e-5)
    -- below the limit nothing changes
    total = nn.utils.clip_grad_norm({ a, b }, 10)
    close(total, 1, 1e-5, "after clipping")
    all_close(a.grad, { 0.6, 0 }, 1e-5)
    close(nn.utils.clip_grad_norm({ a, b }, 10, math.huge), 0.8, 1e-5, "inf norm")
  end)
end)
