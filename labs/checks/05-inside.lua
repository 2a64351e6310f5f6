-- labs/checks/05-inside.lua -- checks of Lab 5 (looking inside).
-- References: the same layers called through F.* by hand, gradients
-- computed on a copy of the network (load_state_dict) with norms summed in
-- Lua, and the layer counts of the deep networks.

local function small_cnn()
  return nn.Sequential(nn.Conv2d(1, 4, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    nn.Linear(4 * 7 * 7, 10))
end

local function copy_of(net, make)
  local twin = make()
  twin:load_state_dict(net:state_dict())
  return twin
end

local function lua_norm(t)
  local s = 0
  for _, v in ipairs(t:reshape(-1):totable()) do s = s + v * v end
  return math.sqrt(s)
end

local function count(net, name)
  local n = 0
  for _, m in ipairs(net:modules()) do
    if m.__name == name then n = n + 1 end
  end
  return n
end

local function ratio_ref(net, x, y)
  net:zero_grad()
  F.cross_entropy(net(x), y):backward()
  return lua_norm(net[1].weight.grad) / lua_norm(net[#net].weight.grad)
end

return {
  title = "Lab 5: looking inside a network",
  limits = { seconds = 30, memory_mb = 1024 },
  exercises = {
    { name = "feature_maps", run = function(lab, t)
      local net, x = small_cnn(), cnn.randn(2, 1, 14, 14)
      local conv = F.conv2d(x, net[1].weight, net[1].bias, { padding = 1 })
      local f = t.fn(lab, "feature_maps")
      t.tensor(f(net, x, 1), conv, "feature_maps(net, x 2x1x14x14, 1)")
      t.tensor(f(net, x, 3), F.max_pool2d(F.relu(conv), 2), "feature_maps(net, x 2x1x14x14, 3)")
    end },
    { name = "grad_norms", run = function(lab, t)
      local net, x, y = small_cnn(), cnn.randn(3, 1, 14, 14), cnn.tensor({ 2, 7, 10 }, "int64")
      local twin = copy_of(net, small_cnn)
      F.cross_entropy(twin(x), y):backward()
      local norms = t.fn(lab, "grad_norms")(net, x, y)
      t.that(type(norms) == "table" and #norms == #twin:parameters(), string.format(
        "grad_norms should return %d numbers (one per parameter), got %s", #twin:parameters(),
        type(norms) == "table" and #norms .. " values" or type(norms)))
      for i, p in ipairs(twin:parameters()) do
        t.number(norms[i], lua_norm(p.grad), string.format("grad_norms: norm of parameter %d (%s)", i,
          require("fmt").shape_str(p)), { rtol = 1e-4 })
      end
    end },
    { name = "deep_mlp", run = function(lab, t)
      local build = t.fn(lab, "deep_mlp")
      local x, y = cnn.randn(64, 32), cnn.randint(1, 10, { 64 })
      local sig, relu = build("sigmoid", false), build("relu", true)
      for _, case in ipairs({ { sig, "Sigmoid", 8, 0 }, { relu, "ReLU", 8, 8 } }) do
        local net, act, nact, nbn = table.unpack(case)
        t.that(count(net, "Linear") == 9 and count(net, act) == nact and count(net, "BatchNorm1d") == nbn,
          string.format("deep_mlp: expected 9 Linear, %d %s and %d BatchNorm1d layers, got %d, %d and %d",
            nact, act, nbn, count(net, "Linear"), count(net, act), count(net, "BatchNorm1d")))
      end
      local rs, rr = ratio_ref(sig, x, y), ratio_ref(relu, x, y)
      t.that(rs < 1e-3, string.format("deep_mlp('sigmoid', false): first/last gradient ratio %.3g, expected a vanishing one (< 1e-3)", rs))
      t.that(rr > 0.1, string.format("deep_mlp('relu', true): first/last gradient ratio %.3g, expected > 0.1", rr))
      t.note(string.format("gradient reaching layer 1 / layer 9: sigmoid %.2g, relu + batch norm %.2g", rs, rr))
    end },
    { name = "gradient_ratio", run = function(lab, t)
      local make = function()
        return nn.Sequential(nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 10))
      end
      local net, x, y = make(), cnn.randn(16, 32), cnn.randint(1, 10, { 16 })
      local want = ratio_ref(copy_of(net, make), x, y)
      t.number(t.fn(lab, "gradient_ratio")(net, x, y), want, "gradient_ratio(a 3-layer tanh net, x 16x32, y)",
        { rtol = 1e-4 })
    end },
  },
}
