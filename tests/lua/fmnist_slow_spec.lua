-- fmnist_slow_spec.lua -- end to end on real data: the
-- example's network trained for one epoch on a 5,000-image subset of
-- Fashion-MNIST's training set must exceed 75% accuracy on the full
-- 10,000-image test set.  About a minute on two cores (label: slow).
-- Exits 77 (CTest: skipped) when the dataset is not installed.

local ok, train_set = pcall(data.FashionMNIST, { train = true })
if not ok then
  io.stderr:write("fmnist_slow_spec: Fashion-MNIST not installed; skipped\n")
  os.exit(77)
end

describe("Fashion-MNIST end to end", function()
  it("one epoch on 5,000 images reaches > 75% test accuracy", function()
    cnn.manual_seed(0)
    local norm = data.transforms.Normalize(0.2860, 0.3530)
    train_set.transform = norm
    local subset = data.Subset(train_set, table.move(data.randperm(#train_set), 1, 5000, 1, {}))
    local test_set = data.FashionMNIST{ train = false, transform = norm }
    local loader = data.DataLoader(subset, { batch_size = 64, shuffle = true })
    assert.are.equal(79, #loader)

    local net = nn.Sequential(
      nn.Conv2d(1, 32, 3, { padding = 1 }), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
      nn.Conv2d(32, 64, 3, { padding = 1 }), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
      nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    local opt = optim.Adam(net:parameters(), { lr = 2e-3 })
    local t0 = cnn.clock()
    local hist = train.fit(net, loader, { epochs = 1, optimizer = opt, progress = false })
    local r = train.evaluate(net, data.DataLoader(test_set, { batch_size = 1000 }), { print = false })
    io.stderr:write(string.format("fmnist_slow_spec: train loss %.4f, test accuracy %.2f%%, %.1f s\n",
      hist.loss[1], 100 * r.accuracy, cnn.clock() - t0))
    assert.are.equal(10000, r.n)
    assert.is_true(r.accuracy > 0.75, "test accuracy " .. r.accuracy)
    -- the confusion matrix accounts for every test image
    assert.are.equal(10000, r.confusion:sum():item())
  end)
end)
