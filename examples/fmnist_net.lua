-- examples/fmnist_net.lua -- the network of examples/fashion_mnist.lua, shared
-- by the examples that load its checkpoint (deploy.lua, predict.lua):
--   local network = dofile(script_dir .. "fmnist_net.lua")
--   net = network(0.25)              -- dropout probability
-- Its state_dict is what fashion_mnist.lua saves under `model`.
return function(dropout)
  return nn.Sequential(
    nn.Conv2d(1, 32, 3, { padding = 1 }), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),  -- 32x14x14
    nn.Conv2d(32, 64, 3, { padding = 1 }), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2), -- 64x7x7
    nn.Flatten(),
    nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(dropout or 0.25),
    nn.Linear(128, 10))
end
