-- tests/labs/faulty.lua -- a "student file" that misbehaves in every way
-- the checker must survive (tests/labs/checks/faulty.lua runs each
-- function as one exercise).  Never run it by hand: it loops forever,
-- crashes and eats memory on purpose.
local lab = {}

function lab.correct() return cnn.arange(1, 6):view(2, 3) end

function lab.endless_loop()
  local n = 0
  while true do n = n + 1 end
end

-- A real SIGSEGV delivered to this process (the shell's parent is cnnsh).
function lab.segfault()
  os.execute("kill -SEGV $PPID")
  while true do end -- the signal arrives asynchronously
end

-- Tensors of 64 MB kept forever: resident memory grows until the limit.
function lab.memory_hog()
  local keep = {}
  while true do keep[#keep + 1] = cnn.ones(16, 1024, 1024) end
end

-- One absurd request: core refuses it up front, an ordinary error.
function lab.absurd_size() return cnn.zeros(1000000, 1000000, 1000) end

function lab.exits() os.exit(3) end

-- Blocked without burning CPU: only the wall-clock backstop stops it.
function lab.blocked() os.execute("sleep 30") end

function lab.raises()
  local t = nil
  return t.shape -- line 36: attempt to index a nil value
end

return lab
