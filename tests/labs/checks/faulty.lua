-- tests/labs/checks/faulty.lua -- checks for tests/labs/faulty.lua: each
-- exercise calls one misbehaving function; run_checks.lua asserts the
-- hint each one must get.  Short limits keep the test fast.
local function call(name)
  return function(lab, t) lab[name]() end
end

return {
  title = "the checker's fault handling",
  limits = { seconds = 3, memory_mb = 512 },
  exercises = {
    { name = "correct", run = function(lab, t)
      t.tensor(lab.correct(), cnn.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }), "correct()")
    end },
    { name = "endless_loop", run = call("endless_loop"), seconds = 1 },
    { name = "segfault", run = call("segfault") },
    { name = "memory_hog", run = call("memory_hog"), seconds = 30 },
    { name = "absurd_size", run = call("absurd_size") },
    { name = "exits", run = call("exits") },
    { name = "blocked", run = call("blocked"), seconds = 0.1 },
    { name = "raises", run = call("raises") },
    { name = "skipped", run = function(lab, t) t.skip("no such device here") end },
  },
}
