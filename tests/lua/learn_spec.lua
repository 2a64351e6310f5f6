-- learn_spec.lua -- end-to-end: a small CNN (conv, batch norm, pooling,
-- linear) trained with Adam on a synthetic task learns it: the training loss
-- falls at least 10x.  The task: 8x8 single-channel noisy images holding a
-- horizontal bar (class 1), a vertical bar (class 2) or a diagonal (class 3)
-- at a random position.  Seeded, so the run is the same every time.  It
-- must also classify fresh images of the same kind (>= 90% right).

local function make_data(n)
  local imgs, labels = {}, {}
  for k = 1, n do
    local cls = (k - 1) % 3 + 1
    local pos = math.random(2, 7)
    local img = {}
    for i = 1, 8 do
      img[i] = {}
      for j = 1, 8 do
        local on = (cls == 1 and i == pos) or (cls == 2 and j == pos) or (cls == 3 and i == j)
        img[i][j] = (on and 1 or 0) + (math.random() - 0.5) * 0.4
      end
    end
    imgs[k], labels[k] = { img }, cls
  end
  return cnn.tensor(imgs), cnn.tensor(labels, "int64")
end

describe("learning", function()
  it("a small CNN drives the loss down 10x", function()
    cnn.manual_seed(7)
    math.randomseed(7)
    local x, y = make_data(96)
    local net = nn.Sequential(
      nn.Conv2d(1, 8, 3, { padding = 1 }), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
      nn.Conv2d(8, 16, 3, { padding = 1 }), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
      nn.Flatten(), nn.Linear(16, 3))
    local opt = optim.Adam(net:parameters(), { lr = 0.02 })
    local first, last
    for step = 1, 60 do
      opt:zero_grad()
      local loss = F.cross_entropy(net(x), y)
      loss:backward()
      opt:step()
      if step == 1 then first = loss:item() end
      last = loss:item()
    end
    assert.is_true(last < first / 10, string.format("loss %.4f -> %.4f", first, last))
    -- it generalises: fresh images (new positions and noise), eval mode
    net:eval()
    local xt, yt = make_data(60)
    local _, pred = net(xt):max(2)
    local correct = pred:eq(yt):sum():item()
    assert.is_true(correct >= 54, "held-out accuracy " .. correct .. "/60")
  end)
end)
