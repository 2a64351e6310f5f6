-- progress.lua -- the "progress" module: a one-line progress bar for
-- training loops (step/total, loss, accuracy, images/s, ETA).
--
--   local bar = progress.new{total = #loader, title = "epoch 1/5"}
--   for x, y in loader do
--     ...
--     bar:update{loss = loss:item(), correct = c, n = x:size(1)}
--   end
--   bar:finish()            -- final line, returns the epoch's figures
--
-- Design.  On a terminal the bar redraws one line in place ("\r" + text +
-- clear-to-end-of-line), at most every `interval` seconds (0.1) and at the
-- end; elsewhere (a pipe, a log file, CI) it prints a plain line every
-- `every` steps (a tenth of the epoch by default) and at the end, so logs
-- stay readable.  Whether the output is a terminal comes from
-- cnn.io.isatty (or cnn.isatty); without either, from $TERM (set, not
-- "dumb").  The option tty = true/false overrides, and NO_PROGRESS=1 in
-- the environment silences the bar (figures are still returned).
-- Loss and accuracy shown are the running means over the steps so far.
local cnn = _G.cnn
local doc = cnn.doc or {}

local progress = {}

local Bar = {}
Bar.__index = Bar

local function clock()
  return cnn.clock and cnn.clock() or os.clock()
end

local function detect_tty(out)
  local isatty = (cnn.io and cnn.io.isatty) or cnn.isatty
  if isatty then
    local ok, r = pcall(isatty, out)
    if ok then return r end
  end
  local term = os.getenv("TERM")
  return term ~= nil and term ~= "" and term ~= "dumb"
end

-- progress.new{total =, title = "", out = io.stdout, tty =, every =, interval = 0.1, width = 24}
function progress.new(opts)
  opts = opts or {}
  local out = opts.out or io.stdout
  local self = setmetatable({
    total = opts.total or 0, title = opts.title or "", out = out,
    width = opts.width or 24, interval = opts.interval or 0.1,
    step = 0, images = 0, loss_sum = 0, loss_n = 0, correct = 0, counted = 0,
    start = clock(), last_draw = -math.huge, quiet = os.getenv("NO_PROGRESS") == "1",
  }, Bar)
  if opts.tty == nil then self.tty = detect_tty(out) else self.tty = opts.tty end
  self.every = opts.every or math.max(1, (self.total or 0) // 10)
  return self
end

-- "1:05" / "1:02:03"
function progress.format_time(s)
  if s ~= s or s == math.huge or s < 0 then return "--:--" end
  s = math.floor(s + 0.5)
  local h, m, sec = s // 3600, (s % 3600) // 60, s % 60
  if h > 0 then return string.format("%d:%02d:%02d", h, m, sec) end
  return string.format("%d:%02d", m, sec)
end

-- The figures so far: {step, total, loss, accuracy, images_per_s, elapsed, eta}.
function Bar:stats()
  local elapsed = clock() - self.start
  local rate = elapsed > 0 and self.step / elapsed or 0
  local remaining = self.total > self.step and (self.total - self.step) / math.max(rate, 1e-9) or 0
  return {
    step = self.step, total = self.total, elapsed = elapsed, eta = remaining,
    loss = self.loss_n > 0 and self.loss_sum / self.loss_n or nil,
    accuracy = self.counted > 0 and self.correct / self.counted or nil,
    images_per_s = elapsed > 0 and self.images / elapsed or 0,
  }
end

function Bar:line(final)
  local s = self:stats()
  local parts = {}
  if self.title ~= "" then parts[#parts + 1] = self.title end
  if self.tty and self.total > 0 then
    local filled = math.floor(self.width * math.min(s.step / self.total, 1))
    parts[#parts + 1] = "[" .. string.rep("=", filled) .. string.rep(" ", self.width - filled) .. "]"
  end
  parts[#parts + 1] = self.total > 0 and string.format("%d/%d", s.step, s.total) or tostring(s.step)
  if s.loss then parts[#parts + 1] = string.format("loss %.4f", s.loss) end
  if s.accuracy then parts[#parts + 1] = string.format("acc %.2f%%", 100 * s.accuracy) end
  parts[#parts + 1] = string.format("%.0f img/s", s.images_per_s)
  if final then
    parts[#parts + 1] = string.format("%.1fs", s.elapsed)
  else
    parts[#parts + 1] = "ETA " .. progress.format_time(s.eta)
  end
  return table.concat(parts, "  ")
end

function Bar:draw(final)
  if self.quiet then return end
  if self.tty then
    self.out:write("\r", self:line(final), "\27[K", final and "\n" or "")
  else
    self.out:write(self:line(final), "\n")
  end
  self.out:flush()
end

-- update{loss =, correct =, n =, counted = n}: one step done.  loss is the
-- step's mean loss, correct the number of right predictions among
-- `counted` samples (default n), n the number of images in the step.
function Bar:update(t)
  t = t or {}
  self.step = self.step + 1
  local n = t.n or 0
  self.images = self.images + n
  if t.loss then self.loss_sum, self.loss_n = self.loss_sum + t.loss, self.loss_n + 1 end
  if t.correct then self.correct, self.counted = self.correct + t.correct, self.counted + (t.counted or n) end
  local now = clock()
  if self.tty then
    if now - self.last_draw >= self.interval then self:draw(false); self.last_draw = now end
  elseif self.step % self.every == 0 and self.step < self.total then
    self:draw(false)
  end
end

-- finish(): the final line; returns stats().
function Bar:finish()
  self:draw(true)
  return self:stats()
end

doc[progress] = [[
progress -- a progress bar for training loops.
  bar = progress.new{total = #loader, title = "epoch 1"}
  bar:update{loss = l, correct = c, n = batch}   -- per step
  bar:finish()                                   -- prints the last line, returns figures
Redraws one line on a terminal, prints plain lines every total/10 steps otherwise.]]
doc[progress.new] = "progress.new{total =, title =, out = io.stdout, tty =, every =} -> bar\nA bar with :update{loss =, correct =, n =} and :finish()."

return progress
