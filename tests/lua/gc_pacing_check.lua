-- gc_pacing_check.lua -- how often Lua's collector runs a full cycle for
-- tensor memory (lua/memory.c).  Run in a fresh process (`cnnsh
-- tests/lua/gc_pacing_check.lua`, CTest's lua_gc_pacing), where Lua's heap
-- is the start-up one: while that heap is small, tensor bytes are
-- reported to the collector scaled so that a full cycle comes about once
-- per 4 MB of tensors (unscaled: one per ~0.2-0.65 MB, 70 % of an op on a
-- 64x128 tensor).  Counted, not timed: a finalizer that re-arms itself
-- runs once per cycle.  Fails (a Lua error) on too many cycles, on too few
-- (garbage never freed), or on live memory growing past 16 MB; then the
-- same with 100 MB of tensors alive, where the pace follows them.
local cycles, mt = 0, {}
mt.__gc = function() cycles = cycles + 1; setmetatable({}, mt) end
setmetatable({}, mt)

local MB = 1 << 20
local x = cnn.randn(64, 128) -- 32 KB
collectgarbage()
local live0, c0, max_live = cnn.memory().live, cycles, 0
for _ = 1, 1024 do -- 1024 results of 32 KB: 32 MB of tensors, all garbage at once
  local y = x:relu()
  max_live = math.max(max_live, cnn.memory().live - live0)
  y = nil
end
local n = cycles - c0
print(string.format("gc_pacing: %d full cycles over 32 MB of 32 KB tensors (Lua heap %.0f KB), "
                    .. "live grew by at most %.1f MB", n, collectgarbage("count"), max_live / MB))
assert(n >= 2, "only " .. n .. " full cycles over 32 MB of tensors: garbage is not being freed")
assert(n <= 16, n .. " full cycles over 32 MB of tensors: expected about one per 4 MB")
assert(max_live < 16 * MB, string.format("live memory grew by %.1f MB", max_live / MB))

-- With many tensor bytes alive (a training step's activations), a full
-- cycle comes about once per a quarter of them instead: 100 MB held, then
-- 256 MB of 256 KB tensors made and dropped.  A flat 4 MB pace ran ~64
-- cycles here (36 a ResNet-20 step, freeing almost nothing).
local held = {}
for i = 1, 25 do held[i] = cnn.empty(1 << 20) end -- 25 x 4 MB, never touched
collectgarbage()
local live1, c1, max_garbage = cnn.memory().live, cycles, 0
for _ = 1, 1024 do
  local g = cnn.empty(1 << 16) -- 256 KB
  max_garbage = math.max(max_garbage, cnn.memory().live - live1)
  g = nil
end
local n2 = cycles - c1
print(string.format("gc_pacing: %d full cycles over 256 MB of 256 KB tensors with %.0f MB alive, "
                    .. "garbage reached %.1f MB", n2, live1 / MB, max_garbage / MB))
assert(n2 >= 2, "only " .. n2 .. " full cycles over 256 MB of tensors: garbage is not being freed")
assert(n2 <= 24, n2 .. " full cycles over 256 MB with 100 MB alive: expected about one per 25 MB")
assert(max_garbage < 48 * MB, string.format("garbage grew to %.1f MB", max_garbage / MB))
