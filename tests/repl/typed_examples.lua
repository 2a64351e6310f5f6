-- typed_examples.lua -- the examples of the README and of help()'s topics,
-- as the lines a person types at the prompt (issue 20, point 8), printed
-- one per line for test_repl_examples.c to type through a pty.
--
--   cnnsh typed_examples.lua README.md
--
-- README: every ```lua block, in order, in one session, except a block
-- right after a line "<!-- not typed: reason -->" (an example that needs
-- what a test machine lacks: a GPU, your own image files).  A block with
-- "> " / ">> " prompts is a transcript: its prompt lines are typed without
-- the prompt; any other block is typed line by line as it stands.
-- help: the lines of help()'s topics that start with "> " or ">> ", in
-- the order help() lists the topics.  Before each block a line
-- "#BLOCK <where>" names it.
local readme = assert(arg[1], "usage: typed_examples.lua README.md")

local function emit_block(where, lines)
  local transcript = false
  for _, l in ipairs(lines) do
    if l:match("^%s*>>? ") then transcript = true end
  end
  print("#BLOCK " .. where)
  for _, l in ipairs(lines) do
    if not transcript then
      print(l)
    elseif l:match("^%s*>>? ") then
      print((l:gsub("^%s*>>? ", "", 1)))
    end
  end
end

local f = assert(io.open(readme))
local n, block, start, skip, prev = 0, nil, 0, false, ""
for line in f:lines() do
  n = n + 1
  if block then
    if line:match("^```") then
      if not skip then emit_block("README.md:" .. start, block) end
      block = nil
    else
      block[#block + 1] = line
    end
  elseif line:match("^```lua") then
    block, start, skip = {}, n, prev:match("^<!%-%- not typed:") ~= nil
  end
  if line:match("%S") then prev = line end
end
f:close()

-- help()'s topics, in the order the overview lists them
local shown = {}
local write = io.write
io.write = function(...) for _, s in ipairs({ ... }) do shown[#shown + 1] = tostring(s) end end
help()
local overview = table.concat(shown)
local topics = {}
for name in overview:gmatch("\n  (%a+) +[^\n]*") do topics[#topics + 1] = name end
for _, name in ipairs(topics) do
  shown = {}
  help(name)
  local lines = {}
  for l in table.concat(shown):gmatch("[^\n]*") do
    if l:match("^%s*>>? ") then lines[#lines + 1] = l end
  end
  if #lines > 0 then
    io.write = write
    emit_block("help('" .. name .. "')", lines)
    io.write = function(...) for _, s in ipairs({ ... }) do shown[#shown + 1] = tostring(s) end end
  end
end
io.write = write
