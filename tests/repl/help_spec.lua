-- help_spec.lua -- help(obj) and the :help topics (stdlib/help.lua), run
-- inside cnnsh under busted.  Output is captured by replacing io.write;
-- expected texts come from cnn.doc itself (the first line of each entry)
-- or are written out here.

local function capture(...)
  local out, write = {}, io.write
  io.write = function(...) for _, s in ipairs({ ... }) do out[#out + 1] = tostring(s) end end
  local ok, err = pcall(help, ...)
  io.write = write
  assert(ok, err)
  return table.concat(out)
end

local function first_line(s) return (s:match("^[^\n]*")) end

describe("help", function()
  it("is a lazily loaded global function", function()
    assert.are.equal("function", type(help))
  end)

  it("without arguments lists the commands and topics", function()
    local s = capture()
    for _, cmd in ipairs({ ":help", ":time", ":mem", ":load", ":reset", ":quit" }) do
      assert.truthy(s:find(cmd, 1, true), cmd)
    end
    for _, t in ipairs({ "commands", "tensors", "indexing", "autograd", "nn", "training", "labels" }) do
      assert.truthy(s:find("\n  " .. t .. " ", 1, true), t)
    end
  end)

  it("prints every topic", function()
    assert.truthy(capture("labels"):find("1..C", 1, true))
    assert.truthy(capture("indexing"):find("x[{ {}, {2, 3} }]", 1, true))
    assert.truthy(capture(" commands "):find(":time <expr>", 1, true))
  end)

  it("shows a C function's signature and description from cnn.doc", function()
    local d = cnn.doc[F.relu]
    assert.truthy(d)
    local s = capture(F.relu)
    assert.are.equal(first_line(d), first_line(s))
    assert.truthy(s:find("\n  ", 1, true)) -- the description, indented
    assert.are.equal(s, capture("F.relu")) -- the same by name
  end)

  it("finds tensor methods by name and explains a tensor", function()
    local x = cnn.zeros(2, 3)
    local s = capture("Tensor:sum")
    assert.are.equal(first_line(cnn.doc[x.sum]), first_line(s))
    local t = capture(x)
    assert.truthy(t:find("2x3", 1, true))
    assert.truthy(t:find("methods:", 1, true))
    assert.truthy(t:find(" sum ", 1, true))
  end)

  it("explains layers: the class and an instance", function()
    local s = capture(nn.Linear)
    assert.are.equal(first_line(cnn.doc[nn.Linear]), first_line(s))
    local i = capture(nn.Linear(2, 3))
    assert.truthy(i:find("^an instance: "))
    assert.truthy(i:find(first_line(cnn.doc[nn.Linear]), 1, true))
  end)

  it("lists the members of a module with their signatures", function()
    local s = capture(F)
    assert.truthy(s:find(first_line(cnn.doc[F.conv2d]), 1, true))
    assert.truthy(s:find(first_line(cnn.doc[F.cross_entropy]), 1, true))
  end)

  it("says when there is nothing to show, and never raises", function()
    assert.truthy(capture("no_such_name_here"):find("no help for 'no_such_name_here'", 1, true))
    assert.truthy(capture(42):find("no documentation", 1, true))
    assert.truthy(capture(print):find("^print: function"))
    assert.truthy(capture(string.format):find("^string.format: function"))
    local hostile = setmetatable({}, { __index = function() error("must not run") end })
    capture(hostile)
    capture("a.b.c.d")
    capture("not a name!")
    capture(nil)
  end)

  it("documents itself", function()
    assert.truthy(cnn.doc[help])
    assert.truthy(first_line(capture(help)):find("^help%("))
  end)
end)
