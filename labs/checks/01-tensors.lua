-- labs/checks/01-tensors.lua -- checks of Lab 1 (tensors, views,
-- broadcasting).  References are written independently of the student's
-- path: plain Lua loops over small tables.
local function loop_grid()
  local rows = {}
  for i = 1, 3 do
    rows[i] = {}
    for j = 1, 4 do rows[i][j] = (i - 1) * 4 + j end
  end
  return cnn.tensor(rows, "float64")
end

local function loop_center(m)
  local rows = m:totable()
  for _, row in ipairs(rows) do
    local s = 0
    for _, v in ipairs(row) do s = s + v end
    for k = 1, #row do row[k] = row[k] - s / #row end
  end
  return cnn.tensor(rows, "float64")
end

local function loop_dist(a, b)
  local A, B, d = a:totable(), b:totable(), {}
  for i = 1, #A do
    d[i] = {}
    for j = 1, #B do
      local s = 0
      for k = 1, #A[i] do s = s + (A[i][k] - B[j][k]) ^ 2 end
      d[i][j] = s
    end
  end
  return cnn.tensor(d, "float64")
end

return {
  title = "Lab 1: tensors, views and broadcasting",
  limits = { seconds = 30, memory_mb = 1024 },
  exercises = {
    { name = "make_grid", run = function(lab, t)
      t.tensor(t.fn(lab, "make_grid")(), loop_grid(), "make_grid()")
    end },
    { name = "column", run = function(lab, t)
      local m = cnn.randn(4, 5)
      local expect = cnn.tensor(m:totable()):select(2, 3):clone()
      local col = t.fn(lab, "column")(m, 3)
      t.tensor(col, expect, "column(m, 3) for a 4x5 m")
      col:fill_(7)
      t.that(m[{ 2, 3 }]:item() == 7,
        "column(m, 3) returned a copy: writing into it left m unchanged (return a view: m:select(2, j))")
    end },
    { name = "center_rows", run = function(lab, t)
      local m = cnn.randn(5, 3):double()
      t.tensor(t.fn(lab, "center_rows")(m), loop_center(m), "center_rows(m) for a 5x3 m", { atol = 1e-6 })
    end },
    { name = "pairwise_sq_dist", run = function(lab, t)
      local a, b = cnn.randn(4, 3):double(), cnn.randn(6, 3):double()
      t.tensor(t.fn(lab, "pairwise_sq_dist")(a, b), loop_dist(a, b), "pairwise_sq_dist(a 4x3, b 6x3)",
        { atol = 1e-6 })
    end },
  },
}
