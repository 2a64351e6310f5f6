-- checkpoint.lua -- a checkpoint written by rank 0 of a 2-rank run resumes
-- in one process: `save DIR` (2 ranks, global batch 64 as 2 x 32) trains 10
-- Adam steps, rank 0 writes the model and optimizer after step 5 and the
-- final parameters after step 10 (only rank 0 writes: the test checks no
-- other file appears); `resume DIR` (1 process, batch 64) loads the step-5
-- checkpoint, trains steps 6..10 and must land within 1e-5 of the 2-rank
-- run's final parameters.
local H = dofile(arg[0]:match("^(.*)/[^/]*$") .. "/helpers.lua")
local mode, dir = arg[1], arg[2]
H.check(mode == "save" or mode == "resume", "usage: checkpoint.lua save|resume DIR")
local rank, world = dist.init()

cnn.manual_seed(3)
local X, Y = cnn.randn(10, 64, 12), cnn.randint(1, 4, { 10, 64 })
local net = nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 4))
local opt = optim.Adam(net:parameters(), { lr = 1e-2 })
local per = 64 // world
local function batch(t, s) return t[s]:narrow(1, rank * per + 1, per) end

local first = 1
if mode == "resume" then
  local ck = cnn.load(dir .. "/step5.safetensors")
  net:load_state_dict(ck.model)
  opt:load_state_dict(ck.optimizer)
  first = 6
end
local model = nn.DistributedDataParallel(net)
for s = first, 10 do
  opt:zero_grad()
  F.cross_entropy(model(batch(X, s)), batch(Y, s)):backward()
  opt:step()
  if s == 5 and mode == "save" and dist.is_main() then
    cnn.save(dir .. "/step5.safetensors", { model = net:state_dict(), optimizer = opt:state_dict() })
  end
end
if mode == "save" then
  if dist.is_main() then cnn.save(dir .. "/final.safetensors", net:state_dict()) end
  return
end
local want = nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 4))
want:load_state_dict(cnn.load(dir .. "/final.safetensors"))
local wp = want:parameters()
for k, p in ipairs(net:parameters()) do
  local d = (p - wp[k]):abs():max():item()
  H.check(d <= 1e-5, "parameter %d differs from the 2-rank run by %g", k, d)
end
print("checkpoint: resumed on " .. world .. " rank(s) after a 2-rank run")
