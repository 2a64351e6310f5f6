-- labs/01-tensors.lua -- Lab 1: tensors, views and broadcasting (30 min).
--
-- A tensor is a block of numbers with a shape.  Most operations that change
-- the shape copy nothing: a *view* (t:view, t:transpose, t:narrow,
-- t:select, t[{...}]) shares its numbers with the tensor it came from, so
-- writing into the view writes into the original.  Arithmetic between
-- tensors of different shapes *broadcasts*: sizes are compared from the
-- last dimension backwards, a size of 1 is stretched to match, a missing
-- dimension counts as 1.  So a 3x4 matrix minus a 3x1 column subtracts the
-- column from every column, and a 3x1x2 minus a 1x4x2 gives 3x4x2.
--
-- Remember: indices and dimensions count from 1 in cnnsh (as in Lua), and
-- ranges are inclusive: t[{ {}, {2, 3} }] is every row, columns 2 and 3.
--
-- How to work.  Fill in each TODO block (delete the TODO line), then run
--     cnnsh --check labs/01-tensors.lua
-- It runs one check per exercise and says what is still wrong.
--
-- Try this at the prompt first (cnnsh, then type each line):
--   > t = cnn.arange(1, 6):view(2, 3)      -- 1..6 as 2 rows of 3
--   > t:t()                                -- the transpose: a view, 3x2
--   > t:t():is_contiguous()                --> false: strides, not a copy
--   > t[{ {}, 2 }]                         -- column 2 (a view)
--   > t + cnn.tensor{10, 20, 30}           -- broadcast over the rows
--   > t:view(2, 1, 3) - t:view(1, 2, 3)    -- 2x2x3: every row minus every row
--   > lab = dofile("labs/01-tensors.lua"); lab.make_grid()
local lab = {}

local function TODO(what) error("TODO: " .. what, 2) end

-- Exercise 1. Return a 3x4 tensor holding 1, 2, ..., 12 row by row:
--   {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}}  (any dtype).
-- Hint: cnn.arange(a, b) includes both ends; view() changes the shape.
function lab.make_grid()
  -- TODO: reshape the numbers into 3 rows of 4
  return cnn.arange(1, 12)
end

-- Exercise 2. Return column j of the matrix m *as a view*: writing into
-- the result must change m.  (m:select(2, j), or m[{ {}, j }].)
function lab.column(m, j)
  -- TODO: a view of column j, not a copy
  return m:clone()
end

-- Exercise 3. Centre each row of m: subtract the row's mean from every
-- element of that row, using broadcasting (no loop).  m is N x D float.
-- Hint: m:mean(2, true) keeps the reduced dimension: N x 1.
function lab.center_rows(m)
  -- TODO: m minus its row means
  return m
end

-- Exercise 4. Squared Euclidean distances between every row of a (N x D)
-- and every row of b (M x D): an N x M tensor d with
--   d[i][j] = sum over k of (a[i][k] - b[j][k])^2.
-- Use broadcasting: view a as N x 1 x D and b as 1 x M x D, subtract,
-- square, then sum over dimension 3.  No Lua loop.
function lab.pairwise_sq_dist(a, b)
  TODO("broadcast a (N x 1 x D) against b (1 x M x D)")
end

return lab
