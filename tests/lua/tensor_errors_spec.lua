-- tensor_errors_spec.lua -- bad input from Lua is a Lua error that names
-- the function (and the shapes), never a crash: wrong types, dims and
-- indices out of range, bad dtype strings, absurd sizes, NaN, released
-- tensors; then a fuzz loop that calls every C function with odd arguments.
package.path = "./?.lua;" .. package.path
local H = require("helpers")
local raises = H.raises

describe("shape errors name the op and both shapes", function()
  local a, b = cnn.zeros(2, 3), cnn.zeros(4, 3)
  it("broadcasting", function()
    raises(function() return a + b end, "add", "2x3", "4x3")
    raises(function() return a:mul(b) end, "mul", "2x3", "4x3")
    raises(function() return a:add_(cnn.zeros(3, 3)) end, "2x3", "3x3")
    raises(function() return cnn.where(cnn.zeros(5, "uint8"), a, a) end, "where")
  end)
  it("matmul and friends", function()
    raises(function() return a:matmul(b) end, "matmul", "2x3", "4x3")
    raises(function() return a:mm(cnn.zeros(2)) end, "mm")
    raises(function() return a:bmm(b) end, "bmm")
  end)
  it("views", function()
    raises(function() return a:view(4, 4) end, "view", "2x3")
    raises(function() return a:view(-1, -1) end, "view")
    raises(function() return a:t():view(6) end, "view")
    raises(function() return a:expand(3, 3) end, "expand")
    raises(function() return cnn.zeros(2, 3, 4):t() end, "t:", "2x3x4")
  end)
  it("joining", function()
    raises(function() return cnn.cat({a, cnn.zeros(2, 4)}) end, "cat")
    raises(function() return cnn.stack({a, b}) end, "stack")
    raises(function() return cnn.cat({}) end, "cat", "non-empty")
    raises(function() return cnn.cat({a, 3}) end, "cat", "entry 2")
  end)
  it("item on several elements", function()
    raises(function() return a:item() end, "item", "6 elements", "2x3")
  end)
end)

describe("dims and indices are checked in 1-based terms", function()
  local x = cnn.zeros(2, 3)
  it("dims out of range", function()
    raises(function() return x:size(3) end, "size", "dim 3 out of range", "1..2")
    raises(function() return x:size(0) end, "dim 0")
    raises(function() return x:sum(-3) end, "sum", "dim -3")
    raises(function() return x:transpose(1, 3) end, "transpose")
    raises(function() return x:unsqueeze(4) end, "unsqueeze", "1..3")
    raises(function() return x:squeeze(5) end, "squeeze")
    raises(function() return x:flatten(2, 1) end, "flatten")
    raises(function() return x:permute(1, 1) end, "permute", "repeated")
    raises(function() return x:permute(1) end, "permute")
    raises(function() return x:max(3) end, "max")
    raises(function() return x:argmax(0) end, "argmax")
    raises(function() return cnn.cat({x, x}, 3) end, "cat")
    raises(function() return cnn.zeros(3):sum(1.5) end, "integer")
  end)
  it("indices out of range", function()
    raises(function() return x:select(1, 3) end, "select", "index 3 out of range", "size 2")
    raises(function() return x:select(2, -4) end, "select")
    raises(function() return x:narrow(2, 3, 2) end, "narrow")
    raises(function() return x:narrow(2, 0, 1) end, "narrow")
    raises(function() return x[3] end, "index 3 out of range")
    raises(function() return x[0] end, "index 0")
    raises(function() return x[{1, 4}] end, "index 4 out of range", "dim 2")
    raises(function() return x[{1, 2, 3}] end, "3 entries for 2 dims", "2x3")
    raises(function() return x[{{1, 5}}] end, "range {1, 5}")
    raises(function() return x[1.5] end, "integer")
    raises(function() return x[true] end, "boolean")
    raises(function() return cnn.tensor(1)[1] end, "0-d")
    raises(function() x[3] = 1 end, "index 3")
    raises(function() x[1] = "s" end, "number or cnn.Tensor")
    raises(function() x[1] = cnn.zeros(4) end, "copy")
  end)
  it("index tensors must be int64 and in range", function()
    local t = cnn.zeros(3, 2)
    raises(function() return t:index_select(1, cnn.tensor({1, 2})) end, "index_select", "int64")
    raises(function() return t:index_select(1, cnn.tensor({0}, "int64")) end, "index_select", "index 0 out of range 1..3")
    raises(function() return t:index_select(1, cnn.tensor({4}, "int64")) end, "out of range 1..3")
    raises(function() return t:gather(2, cnn.tensor({{3}, {1}, {1}}, "int64")) end, "gather", "out of range 1..2")
    raises(function() return t[cnn.tensor({4}, "int64")] end, "out of range")
  end)
end)

describe("argument types and values", function()
  it("wrong types", function()
    raises(function() return cnn.zeros(2):add("x") end, "cnn.Tensor or number")
    raises(function() return cnn.zeros(2):add() end, "no value")
    raises(function() return cnn.tensor(print) end, "table, number or cnn.Tensor")
    raises(function() return cnn.tensor({1, "a"}) end, "tensor", "string")
    raises(function() return cnn.tensor({{1, 2}, {3}}) end, "ragged")
    raises(function() return cnn.tensor({{1, 2}, 3}) end, "ragged")
    raises(function() return cnn.tensor({cnn.zeros(2)}) end, "cnn.stack")
    raises(function() return cnn.zeros("a") end, "zeros", "unknown dtype 'a'")
    raises(function() return cnn.zeros({2, "b"}) end, "zeros", "size 2")
    raises(function() return cnn.Tensor.sum(5) end, "cnn.Tensor expected")
    raises(function() return cnn.zeros(2):clamp("a") end, "number expected")
    raises(function() return cnn.no_grad(5) end, "function expected")
  end)
  it("dtype and device strings", function()
    raises(function() return cnn.zeros(2, "floaty") end, "unknown dtype 'floaty'")
    raises(function() return cnn.zeros(2, {dtype = "int7"}) end, "unknown dtype 'int7'")
    raises(function() return cnn.zeros(2, {device = "tpu"}) end, "unknown device 'tpu'")
    raises(function() return cnn.zeros(2):to("floaty") end, "to:", "floaty")
    raises(function() return cnn.zeros(2, {requires_grad = "yes"}) end, "requires_grad", "boolean")
  end)
  it("absurd, negative and NaN sizes", function()
    raises(function() return cnn.zeros(-1) end, "zeros", "negative")
    raises(function() return cnn.zeros(0 / 0) end, "zeros", "integer")
    raises(function() return cnn.zeros(2.5) end, "integer")
    raises(function() return cnn.zeros(1e300) end, "integer")
    raises(function() return cnn.zeros(math.maxinteger) end, "too many elements")
    raises(function() return cnn.ones(1e6, 1e6, 1e6) end, "too many elements")
    raises(function() return cnn.zeros(1, 1, 1, 1, 1, 1, 1, 1, 1) end, "at most 8 dims")
    raises(function() return cnn.zeros(2 ^ 44) end, "out of memory")
    raises(function() return cnn.arange(0, 1, 0) end, "arange", "zero")
    raises(function() return cnn.arange(0, 1 / 0) end, "arange", "finite")
    raises(function() return cnn.arange(0, 1e15, 1e-3) end, "arange", "too many")
    raises(function() return cnn.randint(5, 1, {2}) end, "randint", "low 5")
    raises(function() return cnn.linspace(0, 1, -3) end, "linspace")
    raises(function() return cnn.eye(-2) end, "eye")
    raises(function() return cnn.full({2}) end, "full")
    raises(function() return cnn.zeros(2):view(0 / 0) end, "view", "integer")
  end)
  it("rng state and threads", function()
    raises(function() cnn.set_rng_state({1, 2}) end, "set_rng_state")
    raises(function() cnn.set_num_threads(0) end, "set_num_threads")
    raises(function() cnn.set_conv_algo("fast") end, "invalid option")
  end)
end)

describe("autograd misuse", function()
  it("errors instead of crashes", function()
    local w = cnn.ones(3, {requires_grad = true})
    local y = w * 2
    raises(function() y.requires_grad = false end)
    raises(function() w.requires_grad = "yes" end, "boolean")
    raises(function() y:backward() end, "backward")
    raises(function() w.grad = cnn.zeros(4) end, "grad", "4", "3")
    raises(function() w.shape = {1} end, "cannot set field 'shape'")
    raises(function() cnn.zeros(2, "int64"):requires_grad_() end)
  end)
end)

describe("released tensors", function()
  it("<close> releases at scope end; later use is an error", function()
    local keep
    do
      local t <close> = cnn.zeros(2, 2)
      keep = t
      assert.is_false(t:is_released())
    end
    assert.is_true(keep:is_released())
    raises(function() return keep + 1 end, "tensor was released")
    raises(function() return keep:sum() end, "tensor was released")
    raises(function() return keep.shape end, "tensor was released")
    raises(function() return keep[1] end, "tensor was released")
    raises(function() return tostring(keep) end, "tensor was released")
    raises(function() return cnn.cat({keep}) end, "tensor was released")
    keep:release() -- idempotent
    assert.is_false(cnn.is_tensor(keep))
  end)
  it("release of a view keeps the base alive", function()
    local base = cnn.tensor({1, 2, 3})
    local v = base[2]
    v:release()
    assert.same({1, 2, 3}, base:totable())
  end)
end)

describe("fuzz: every C function with odd arguments", function()
  it("never crashes", function()
    local pool = {
      function() return nil end,
      function() return 1 end,
      function() return -1 end,
      function() return 0 end,
      function() return 2.5 end,
      function() return 0 / 0 end,
      function() return math.maxinteger end,
      function() return "float64" end,
      function() return "x" end,
      function() return {} end,
      function() return {2, -1} end,
      function() return {stride = 0, padding = -1, reduction = "x"} end,
      function() return true end,
      function() return cnn.zeros(2, 3) end,
      function() return cnn.ones(3) end,
      function() return cnn.tensor({1, 2}, "int64") end,
      function() return cnn.zeros(1, 1, 2, 2) end,
      function() return cnn.tensor(1.5) end,
      function() return cnn.zeros(0) end,
      function() return cnn.zeros(2, 3):t() end,
    }
    local skip = {no_grad = true, enable_grad = true, register_hook = true, set_num_threads = true,
                  manual_seed = true, set_rng_state = true, set_grad_enabled = true,
                  set_conv_algo = true, release = true,
                  -- these write files named after their (odd) arguments
                  save = true, viz_png = true, write_png = true}
    local calls = 0
    local function try(name, f)
      if skip[name] then return end
      for i = 1, #pool do
        for j = 1, #pool do
          pcall(f, pool[i](), pool[j]())
          pcall(f, cnn.zeros(2, 3), pool[i](), pool[j]())
          calls = calls + 2
        end
      end
    end
    local threads = cnn.get_num_threads()
    for _, tbl in ipairs({cnn, F, cnn.Tensor}) do
      local names = {}
      for k, v in pairs(tbl) do if type(v) == "function" then names[#names + 1] = k end end
      table.sort(names)
      for _, k in ipairs(names) do try(k, tbl[k]) end
    end
    cnn.set_grad_enabled(true)
    cnn.set_num_threads(threads)
    assert.is_true(calls > 10000)
    -- the library still works afterwards
    assert.same({2, 4}, (cnn.tensor({1, 2}) * 2):totable())
  end)
end)
