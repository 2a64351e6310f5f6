-- tensor_ops_spec.lua -- the tensor ops of issue 13 point 7 against naive
-- Lua oracles (table.sort, loops), their PyTorch edge cases (ties, NaN,
-- empty tensors, negative dims, uneven chunks), finite-difference
-- gradients in float64, and their errors.
package.path = "./?.lua;" .. package.path
local H = require("helpers")
local close, raises, shape = H.assert_close, H.raises, H.assert_shape

local nan = 0 / 0

-- ---- oracles over nested tables -------------------------------------------------

-- PyTorch's order: NaN after every number; equal values by position
local function sort_ref(list, descending)
  local pairs_ = {}
  for i, v in ipairs(list) do pairs_[i] = { v = v, i = i } end
  local function key_less(a, b) -- a strictly before b ignoring positions
    if a ~= a then return false end
    if b ~= b then return true end
    return a < b
  end
  table.sort(pairs_, function(p, q)
    local before = descending and key_less(q.v, p.v) or (not descending and key_less(p.v, q.v))
    local after = descending and key_less(p.v, q.v) or (not descending and key_less(q.v, p.v))
    if before then return true end
    if after then return false end
    return p.i < q.i
  end)
  local vals, idx = {}, {}
  for k, p in ipairs(pairs_) do vals[k], idx[k] = p.v, p.i end
  return vals, idx
end

-- rows of a 2-D table along dim 2 (or columns when dim 1)
local function lines(t, dim)
  if dim == 2 then return t end
  local cols = {}
  for j = 1, #t[1] do cols[j] = {} for i = 1, #t do cols[j][i] = t[i][j] end end
  return cols
end

local function exact(got, expected, what)
  local g, e = H.flat(got), H.flat(expected)
  assert(#g == #e, ("%s: %d entries, expected %d"):format(what or "", #g, #e))
  for i = 1, #e do
    local same = (g[i] ~= g[i] and e[i] ~= e[i]) or g[i] == e[i]
    assert(same, ("%s: entry %d is %s, expected %s"):format(what or "", i, tostring(g[i]), tostring(e[i])))
  end
end

local function weights(n)
  local w = {}
  for i = 1, n do w[i] = math.sin(0.7 * i) end
  return w
end

-- ---- sort and topk -----------------------------------------------------------------

describe("sort", function()
  it("matches table.sort along each dim, ties stable and NaN largest", function()
    local data = { { 3, 1, nan, 1, -0.0, 0, 2, 3 }, { 5, nan, nan, -1, 4, 4, -math.huge, math.huge } }
    for _, dtype in ipairs({ "float32", "float64" }) do
      local x = cnn.tensor(data, dtype)
      for _, desc in ipairs({ false, true }) do
        for _, dim in ipairs({ 1, 2, -1 }) do
          local d = dim < 0 and 2 or dim
          local v, i = x:sort(dim, desc)
          assert.are.equal("int64", i.dtype)
          local vt, it_ = v:totable(), i:totable()
          for r, line in ipairs(lines(data, d)) do
            local ev, ei = sort_ref(line, desc)
            local gv, gi = lines(vt, d)[r], lines(it_, d)[r]
            exact(gv, ev, ("%s desc=%s dim=%d line %d values"):format(dtype, tostring(desc), dim, r))
            exact(gi, ei, ("%s desc=%s dim=%d line %d indices"):format(dtype, tostring(desc), dim, r))
          end
        end
      end
    end
  end)

  it("sorts int64 exactly beyond 2^53 and uint8", function()
    local big = 1 << 62
    local v, i = cnn.tensor({ big + 1, big, -big, big + 1, 7 }, "int64"):sort()
    exact(v, { -big, 7, big, big + 1, big + 1 }, "int64 values")
    exact(i, { 3, 5, 2, 1, 4 }, "int64 indices")
    v, i = cnn.tensor({ 200, 3, 255, 3 }, "uint8"):sort({ descending = true })
    exact(v, { 255, 200, 3, 3 }, "uint8 values")
    exact(i, { 3, 1, 2, 4 }, "uint8 indices")
  end)

  it("takes options, and handles empty and 0-d tensors", function()
    local x = cnn.tensor({ { 2, 1 }, { 0, 3 } })
    local v = x:sort{ dim = 1, descending = true, stable = true }
    exact(v, { { 2, 3 }, { 0, 1 } })
    v = cnn.sort(x, 2, { descending = true })
    exact(v, { { 2, 1 }, { 3, 0 } })
    local ev, ei = cnn.zeros(3, 0):sort(2)
    shape(ev, { 3, 0 }); shape(ei, { 3, 0 })
    local sv, si = cnn.tensor(4.5):sort()
    assert.are.equal(4.5, sv:item()); assert.are.equal(1, si:item())
    raises(function() x:sort(3) end, "sort", "dim 3")
    raises(function() x:sort(1, { descending = true, bogus = 1 }) end, "unknown option 'bogus'")
    raises(function() x:sort("a") end, "integer dim or options table")
  end)

  it("passes gradients back to the sorted positions (float64 finite differences)", function()
    cnn.manual_seed(3)
    local x = cnn.randn(4, 5, "float64")
    local w = cnn.tensor({ weights(5) }, "float64")
    H.gradcheck(function(a) return (a:sort(2, true) * w):sum() end, { x })
    H.gradcheck(function(a) return (a:sort(1) * w):sum() end, { x })
    assert.are.equal("SortBackward", (x:clone():requires_grad_():sort()).grad_fn)
  end)
end)

describe("topk", function()
  it("gives the first k of the sorted order", function()
    cnn.manual_seed(5)
    local data = cnn.randint(1, 6, { 4, 9 }):double():totable() -- many ties
    data[2][3] = nan
    local x = cnn.tensor(data, "float64")
    for _, largest in ipairs({ true, false }) do
      for _, k in ipairs({ 0, 1, 4, 9 }) do
        local v, i = x:topk(k, 2, largest)
        shape(v, { 4, k }); shape(i, { 4, k })
        for r = 1, 4 do
          local ev, ei = sort_ref(data[r], largest)
          local gv, gi = v:totable()[r], i:totable()[r]
          for j = 1, k do
            exact({ gv[j] }, { ev[j] }, ("largest=%s k=%d row %d"):format(tostring(largest), k, r))
            exact({ gi[j] }, { ei[j] }, ("largest=%s k=%d row %d index"):format(tostring(largest), k, r))
          end
        end
      end
    end
    local v = x:topk(2, 1, { largest = false, sorted = false })
    shape(v, { 2, 9 })
    local dv = x:topk(3) -- dim -1 by default
    shape(dv, { 4, 3 })
  end)

  it("refuses k out of range and has a gradient", function()
    local x = cnn.randn(3, 4, "float64")
    raises(function() x:topk(5, 2) end, "topk", "k = 5", "size 4", "3x4")
    raises(function() x:topk(-1) end, "topk", "k = -1")
    raises(function() x:topk(2, 2, { biggest = true }) end, "unknown option 'biggest'")
    H.gradcheck(function(a) return (a:topk(2, 2) * cnn.tensor({ { 0.3, -1.1 } }, "float64")):sum() end, { x })
  end)
end)

-- ---- cumsum, cumprod -----------------------------------------------------------------

local function cum_ref(list, prod)
  local out, acc = {}, prod and 1 or 0
  for i, v in ipairs(list) do acc = prod and acc * v or acc + v; out[i] = acc end
  return out
end

describe("cumsum and cumprod", function()
  it("match a loop along each dim", function()
    local data = { { 1, 2, 0, -3 }, { 0.5, 4, 2, 1 }, { -1, -1, 3, 0 } }
    local x = cnn.tensor(data, "float64")
    for _, prod in ipairs({ false, true }) do
      local op = prod and "cumprod" or "cumsum"
      local r2 = x[op](x, 2):totable()
      for r = 1, 3 do close(r2[r], cum_ref(data[r], prod), 1e-12, 1e-12, op .. " dim 2") end
      local r1 = lines(x[op](x, -2):totable(), 1)
      for c, col in ipairs(lines(data, 1)) do close(r1[c], cum_ref(col, prod), 1e-12, 1e-12, op .. " dim 1") end
    end
  end)

  it("give int64 for integer input, keep float dtypes, accept 0-d and empty tensors", function()
    local u = cnn.tensor({ 200, 100, 50 }, "uint8"):cumsum(1)
    assert.are.equal("int64", u.dtype)
    exact(u, { 200, 300, 350 })
    local p = cnn.tensor({ 3, -2, 5 }, "int64"):cumprod(1)
    exact(p, { 3, -6, -30 })
    assert.are.equal("float32", cnn.ones(2, 3):cumsum(1).dtype)
    assert.are.equal(2.5, cnn.tensor(2.5):cumsum(1):item())
    shape(cnn.zeros(0, 3):cumprod(1), { 0, 3 })
    raises(function() cnn.ones(2):cumsum(2) end, "cumsum", "dim 2")
    raises(function() cnn.ones(2):cumsum() end, "integer expected")
  end)

  it("have gradients, cumprod's exact with zeros (float64 finite differences)", function()
    cnn.manual_seed(7)
    local x = cnn.randn(3, 5, "float64")
    H.gradcheck(function(a) return (a:cumsum(2) * cnn.tensor({ weights(5) }, "float64")):sum() end, { x })
    H.gradcheck(function(a) return (a:cumprod(1) * cnn.tensor({ weights(5) }, "float64")):sum() end, { x })
    local z = cnn.tensor({ { 2, 0, 3, 0.5, -1 }, { 0, 1.5, 0, 2, 3 }, { 1, 2, 3, 0, 4 } }, "float64")
    H.gradcheck(function(a) return (a:cumprod(2) * cnn.tensor({ weights(5) }, "float64")):sum() end, { z })
    -- one zero: d/dx2 of x1*x2*x3 at x2 = 0 is x1*x3, which y / x cannot give
    local a = cnn.tensor({ 2, 0, 3 }, "float64"):requires_grad_()
    a:cumprod(1):sum():backward()
    exact(a.grad, { 1 + 0 + 0, 2 + 6, 0 })
  end)
end)

-- ---- any, all ----------------------------------------------------------------------------

describe("any and all", function()
  it("give uint8 masks, NaN counting as non-zero", function()
    local x = cnn.tensor({ { 0, 0, 0 }, { 0, nan, 0 }, { 1, 2, -3 } })
    local a, l = x:any(2), x:all(2)
    assert.are.equal("uint8", a.dtype)
    exact(a, { 0, 1, 1 }); exact(l, { 0, 0, 1 })
    exact(x:any(1), { 1, 1, 1 }); exact(x:all(1), { 0, 0, 0 })
    assert.are.equal(1, x:any():item()); assert.are.equal(0, x:all():item())
    shape(x:any(2, true), { 3, 1 })
    exact(x:all({ 1, 2 }), 0)
    exact(cnn.tensor({ 1, 0 }, "int64"):any(), 1)
  end)

  it("over no entries: any 0, all 1", function()
    local e = cnn.zeros(2, 0)
    exact(e:any(2), { 0, 0 }); exact(e:all(2), { 1, 1 })
    assert.are.equal(0, e:any():item()); assert.are.equal(1, e:all():item())
  end)
end)

-- ---- scatter, one_hot -----------------------------------------------------------------------

-- out = copy of x; along dim (1 or 2) out[.., idx[i][j], ..] (op)= src[i][j]
local function scatter_ref(x, dim, idx, src, add)
  local out = {}
  for i, row in ipairs(x) do out[i] = {} for j, v in ipairs(row) do out[i][j] = v end end
  for i, row in ipairs(idx) do
    for j, k in ipairs(row) do
      local a, b = i, j
      if dim == 1 then a = k else b = k end
      local s = type(src) == "table" and src[i][j] or src
      out[a][b] = add and out[a][b] + s or s
    end
  end
  return out
end

describe("scatter", function()
  local x = { { 1, 2, 3, 4 }, { 5, 6, 7, 8 }, { 9, 10, 11, 12 } }
  local src = { { 0.5, 1.5, 2.5 }, { 3.5, 4.5, 5.5 } }
  local idx2 = { { 4, 1 }, { 2, 2 } }      -- along dim 2 (a repeat in row 2)
  local idx1 = { { 3, 1, 2 }, { 1, 3, 3 } } -- along dim 1

  it("matches a loop, src larger than index, a value, in place", function()
    local tx, ts = cnn.tensor(x, "float64"), cnn.tensor(src, "float64")
    close(tx:scatter(1, cnn.tensor({ idx1[1] }, "int64"), ts), scatter_ref(x, 1, { idx1[1] }, src), 0, 0)
    close(tx:scatter(2, cnn.tensor({ { 4, 1 } }, "int64"), ts), scatter_ref(x, 2, { { 4, 1 } }, src), 0, 0)
    close(tx:scatter(2, cnn.tensor(idx2, "int64"), -1), scatter_ref(x, 2, idx2, -1), 0, 0)
    close(tx:scatter_add(1, cnn.tensor(idx1, "int64"), ts), scatter_ref(x, 1, idx1, src, true), 0, 0)
    close(tx:scatter_add(2, cnn.tensor(idx2, "int64"), ts), scatter_ref(x, 2, idx2, src, true), 0, 0)
    local y = tx:clone()
    assert.are.equal(y, y:scatter_(2, cnn.tensor(idx2, "int64"), 0))
    close(y, scatter_ref(x, 2, idx2, 0), 0, 0)
    local t = cnn.tensor(x, "float64"):t() -- non-contiguous target
    t:scatter_add_(1, cnn.tensor({ { 1, 1, 4 } }, "int64"), cnn.ones(1, 3, "float64"))
    close(t, scatter_ref(lines(x, 1), 1, { { 1, 1, 4 } }, 1, true), 0, 0)
    close(tx, x, 0, 0) -- out of place left x alone
    exact(cnn.zeros(2, 2, "int64"):scatter(1, cnn.tensor({ { 2, 1 } }, "int64"), 7), { { 0, 7 }, { 7, 0 } })
  end)

  it("adds integers exactly and wraps them as PyTorch does", function()
    -- 2^53 + 1 is not a double: a sum through double would come out 2^53 + 2 or + 4
    local big = cnn.tensor({ 9007199254740993, math.maxinteger }, "int64")
    local r = big:scatter_add(1, cnn.tensor({ 1, 2 }, "int64"), cnn.tensor({ 2, 1 }, "int64"))
    assert.are.equal(9007199254740995, r[1]:item())
    assert.are.equal(math.mininteger, r[2]:item()) -- int64 wraps (modulo 2^64)
    local u = cnn.tensor({ 250, 3 }, "uint8"):scatter_add(1, cnn.tensor({ 1, 1 }, "int64"),
                                                          cnn.tensor({ 10, 1 }, "uint8"))
    assert.are.same({ 5, 3 }, { u[1]:item(), u[2]:item() }) -- 261 modulo 256
  end)

  it("has PyTorch's gradients for x and src (float64 finite differences)", function()
    local tx, ts = cnn.tensor(x, "float64"), cnn.tensor(src, "float64")
    local i1, i2 = cnn.tensor({ { 3, 1, 2 } }, "int64"), cnn.tensor(idx2, "int64")
    local w = cnn.tensor({ weights(4), weights(4), weights(4) }, "float64")
    H.gradcheck(function(a, s) return (a:scatter(1, i1, s) * w):sum() end, { tx, ts })
    H.gradcheck(function(a, s) return (a:scatter_add(2, i2, s) * w):sum() end, { tx, ts })
    H.gradcheck(function(a) return (a:scatter(2, i2, 2.5) * w):sum() end, { tx })
    local a = cnn.tensor(x, "float64"):requires_grad_()
    a:scatter(2, i2, 0):sum():backward()
    exact(a.grad, { { 0, 1, 1, 0 }, { 1, 0, 1, 1 }, { 1, 1, 1, 1 } })
  end)

  it("refuses bad input with the op and the shapes", function()
    local tx = cnn.zeros(3, 4)
    raises(function() tx:scatter(2, cnn.tensor({ { 5 } }, "int64"), 1) end, "scatter", "index 5 out of range 1..4")
    raises(function() tx:scatter(2, cnn.tensor({ 1 }, "int64"), 1) end, "scatter", "rank", "3x4")
    raises(function() tx:scatter(2, cnn.tensor({ { 1, 2 } }, "int64"), cnn.zeros(1, 1)) end, "src (1x1)")
    raises(function() tx:scatter(2, cnn.tensor({ { 1 } }, "int64"), cnn.zeros(1, 1, "float64")) end, "src is float64")
    raises(function() tx:scatter(2, cnn.tensor({ { 1 } }), 1) end, "indices must be int64")
    raises(function() tx:scatter_add(2, cnn.tensor({ { 1 } }, "int64"), 1) end, "cnn.Tensor expected")
    raises(function() tx:scatter(2, cnn.tensor({ { 1 } }, "int64"), 1, "add") end, "reduce argument is not supported")
    local leaf = cnn.zeros(3, 4):requires_grad_()
    raises(function() leaf:scatter_(1, cnn.tensor({ { 1 } }, "int64"), 1) end, "scatter_", "leaf")
  end)
end)

describe("F.one_hot", function()
  it("puts a 1 at each 1-based label", function()
    local oh = F.one_hot(cnn.tensor({ 3, 1, 2, 3 }, "int64"))
    assert.are.equal("int64", oh.dtype)
    exact(oh, { { 0, 0, 1 }, { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } })
    local o2 = F.one_hot(cnn.tensor({ { 2 }, { 5 } }, "int64"), 6)
    shape(o2, { 2, 1, 6 })
    exact(o2, { { { 0, 1, 0, 0, 0, 0 } }, { { 0, 0, 0, 0, 1, 0 } } })
    shape(F.one_hot(cnn.zeros(0, "int64"), 4), { 0, 4 })
  end)

  it("refuses labels outside 1..C and non-integer labels", function()
    raises(function() F.one_hot(cnn.tensor({ 0, 1 }, "int64")) end, "one_hot", "out of range")
    raises(function() F.one_hot(cnn.tensor({ 4 }, "int64"), 3) end, "one_hot", "index 4 out of range 1..3")
    raises(function() F.one_hot(cnn.tensor({ 1 })) end, "one_hot", "int64")
    raises(function() F.one_hot(cnn.zeros(0, "int64")) end, "one_hot", "empty")
  end)
end)

-- ---- repeat, tile, flip, roll ----------------------------------------------------------------

describe("repeat, tile, flip, roll", function()
  local data = { { 1, 2, 3 }, { 4, 5, 6 } }

  it("repeat and tile match a loop", function()
    local x = cnn.tensor(data)
    local r = x["repeat"](x, 2, 2, 1)
    shape(r, { 2, 4, 3 })
    local expect = {}
    for a = 1, 2 do expect[a] = {} for i = 1, 4 do expect[a][i] = {}
      for j = 1, 3 do expect[a][i][j] = data[(i - 1) % 2 + 1][j] end end end
    exact(r, expect)
    exact(x:repeat_tensor({ 1, 2 }), { { 1, 2, 3, 1, 2, 3 }, { 4, 5, 6, 4, 5, 6 } })
    exact(x:tile(2), { { 1, 2, 3, 1, 2, 3 }, { 4, 5, 6, 4, 5, 6 } })
    shape(x:repeat_tensor(0, 1), { 0, 3 })
    raises(function() x:repeat_tensor(2) end, "repeat", "1 counts", "2x3")
    raises(function() x:repeat_tensor(-1, 1) end, "repeat", "negative")
  end)

  it("flip and roll match a loop", function()
    local x = cnn.tensor(data)
    exact(x:flip(2), { { 3, 2, 1 }, { 6, 5, 4 } })
    exact(x:flip(1, 2), { { 6, 5, 4 }, { 3, 2, 1 } })
    exact(x:flip{ -1 }, { { 3, 2, 1 }, { 6, 5, 4 } })
    exact(x:roll(1, 2), { { 3, 1, 2 }, { 6, 4, 5 } })
    exact(x:roll(-4, 2), { { 2, 3, 1 }, { 5, 6, 4 } })
    exact(x:roll({ 1, 1 }, { 1, 2 }), { { 6, 4, 5 }, { 3, 1, 2 } })
    exact(x:roll(2), { { 5, 6, 1 }, { 2, 3, 4 } }) -- flattened
    exact(x:roll(math.mininteger), { { 3, 4, 5 }, { 6, 1, 2 } }) -- -2^63 = 4 (mod 6), no overflow
    exact(x:roll(math.maxinteger, 2), x:roll(1, 2))
    shape(cnn.zeros(0, 2):roll(1, 1), { 0, 2 })
    raises(function() x:flip(1, 1) end, "flip", "more than once")
    raises(function() x:flip(3) end, "flip", "dim 3")
    raises(function() x:roll({ 1, 2 }, 1) end, "roll", "2 shifts for 1 dimensions")
    raises(function() x:roll({ 1, 2 }) end, "roll", "2 shifts for 0 dimensions")
  end)

  it("have gradients (float64 finite differences)", function()
    cnn.manual_seed(11)
    local x = cnn.randn(2, 3, "float64")
    local w3 = cnn.tensor({ { weights(6), weights(6) }, { weights(6), weights(6) } }, "float64")
    H.gradcheck(function(a) return (a:repeat_tensor(2, 1, 2) * w3):sum() end, { x })
    local w = cnn.tensor({ weights(3), weights(3) }, "float64") * cnn.tensor({ { 1 }, { -2 } }, "float64")
    H.gradcheck(function(a) return (a:flip(1, 2) * w):sum() end, { x })
    H.gradcheck(function(a) return (a:roll({ 1, -1 }, { 1, 2 }) * w):sum() end, { x })
    H.gradcheck(function(a) return (a:roll(4) * w):sum() end, { x })
  end)
end)

-- ---- chunk, split, unbind, tolist --------------------------------------------------------------

local function sizes_along(pieces, dim)
  local s = {}
  for i, p in ipairs(pieces) do s[i] = p:size(dim) end
  return s
end

describe("chunk, split, unbind", function()
  it("follow PyTorch's sizes", function()
    local x = cnn.tensor({ 0, 1, 2, 3, 4 }):view(5, 1)
    exact(sizes_along(x:chunk(4), 1), { 2, 2, 1 })      -- fewer than asked
    exact(sizes_along(x:chunk(2), 1), { 3, 2 })
    exact(sizes_along(x:chunk(7), 1), { 1, 1, 1, 1, 1 })
    exact(sizes_along(cnn.zeros(0, 2):chunk(3), 1), { 0, 0, 0 })
    exact(sizes_along(x:split(2), 1), { 2, 2, 1 })
    exact(sizes_along(x:split({ 1, 0, 4 }), 1), { 1, 0, 4 })
    exact(sizes_along(cnn.zeros(0, 2):split(3), 1), { 0 })
    exact(sizes_along(cnn.zeros(2, 6):chunk(3, -1), 2), { 2, 2, 2 })
    local parts = x:split({ 2, 3 })
    exact(parts[2], { { 2 }, { 3 }, { 4 } })
    local rows = cnn.tensor({ { 1, 2 }, { 3, 4 } }):unbind(2)
    assert.are.equal(2, #rows)
    exact(rows[1], { 1, 3 }); exact(rows[2], { 2, 4 })
    shape(rows[1], { 2 })
  end)

  it("give views that share storage and carry gradients", function()
    local x = cnn.zeros(4, 2)
    local a = x:chunk(2)[2]
    a:fill_(1)
    exact(x, { { 0, 0 }, { 0, 0 }, { 1, 1 }, { 1, 1 } })
    cnn.manual_seed(13)
    local y = cnn.randn(5, 3, "float64")
    H.gradcheck(function(t)
      local p = t:split({ 2, 3 })
      return (p[1]:square():sum() * 2) + (p[2] * 3):sum()
    end, { y })
    H.gradcheck(function(t)
      local r = t:unbind(2)
      return (r[1] * r[3]):sum() + r[2]:sum()
    end, { y })
    H.gradcheck(function(t)
      local c = t:chunk(2, 1)
      return c[1]:sum() - (c[2] ^ 2):sum()
    end, { y })
  end)

  it("refuse bad sizes and 0-d input", function()
    local x = cnn.zeros(5, 2)
    raises(function() x:chunk(0) end, "chunk", "0 chunks")
    raises(function() x:split(0) end, "split", "split size 0")
    raises(function() x:split({ 2, 2 }) end, "split", "add up to 4", "5x2", "has 5")
    raises(function() x:split({ 6, -1 }) end, "split", "non-negative")
    raises(function() cnn.tensor(1):unbind() end, "unbind", "0-d")
    raises(function() x:unbind(3) end, "unbind", "dim 3")
  end)
end)

describe("tolist", function()
  it("is totable", function()
    local x = cnn.tensor({ { 1, 2 }, { 3, 4 } }, "int64")
    exact(x:tolist(), x:totable())
    assert.are.same({ { 1, 2 }, { 3, 4 } }, x:tolist())
    assert.are.equal(3.5, cnn.tensor(3.5):tolist())
    assert.are.equal(cnn.Tensor.totable, cnn.Tensor.tolist)
  end)
end)
