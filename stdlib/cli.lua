-- cli.lua -- the "cli" module: command-line arguments of a cnnsh script,
-- with the behaviour people expect of a program.
--
--   local cli = require("cli")
--   local args = cli.parse(arg, {
--     usage = "cnnsh examples/train.lua [--epochs N] [--out PATH] [steps]",
--     options = { { "epochs", 6, "integer" }, { "out", "net.safetensors", "string" },
--                 { "lr", 1e-3, "number" }, { "subset", nil, "integer" } },
--     positional = { { "steps", 300, "integer" } },
--   })
--   args.epochs, args.out, args.steps ...
--
-- "--name value" and "--name=value" both work.  --help or -h prints the
-- usage on stdout and exits 0; an unknown option, a missing value or a
-- value of the wrong kind ("--epochs abc") prints what is wrong and the
-- usage on stderr and exits 2, with no traceback, as command-line programs
-- do.  Kinds: "integer", "number" (finite), "string".  A default of nil
-- leaves the field nil unless given.
local cli = {}

local function fail(spec, msg)
  io.stderr:write(msg, "\nusage: ", spec.usage, "\n")
  io.stderr:flush()
  os.exit(2, true)
end

local function convert(spec, name, kind, text)
  if kind == "string" then return text end
  local v = tonumber(text)
  if kind == "integer" then v = math.tointeger(v) end
  if v == nil or v ~= v or v == math.huge or v == -math.huge then
    fail(spec, string.format("%s wants %s, got '%s'", name, kind == "integer" and "an integer" or "a number", text))
  end
  return v
end

local function find(list, name)
  for _, o in ipairs(list) do
    if o[1] == name then return o end
  end
  return nil
end

-- parse(arg, spec) -> a table of the options and positional values
function cli.parse(argv, spec)
  argv = argv or {}
  local out, positional = {}, spec.positional or {}
  for _, o in ipairs(spec.options or {}) do out[o[1]] = o[2] end
  for _, p in ipairs(positional) do out[p[1]] = p[2] end
  local i, npos = 1, 0
  while argv[i] ~= nil do
    local a = argv[i]
    if a == "--help" or a == "-h" then
      io.stdout:write("usage: ", spec.usage, "\n")
      io.stdout:flush()
      os.exit(0, true)
    end
    local name, value = a:match("^%-%-([^=]+)=(.*)$")
    name = name or a:match("^%-%-(.+)$")
    if name then
      local o = find(spec.options or {}, name) or fail(spec, "unknown option '" .. a .. "'")
      if value == nil then
        i = i + 1
        value = argv[i] or fail(spec, "--" .. name .. " needs a value")
      end
      out[name] = convert(spec, "--" .. name, o[3], value)
    else
      npos = npos + 1
      local p = positional[npos] or fail(spec, "unexpected argument '" .. a .. "'")
      out[p[1]] = convert(spec, p[1], p[3], a)
    end
    i = i + 1
  end
  return out
end

local doc = (rawget(_G, "cnn") or {}).doc
if doc then
  doc[cli] = [[
cli -- command-line arguments of a script: local cli = require("cli")
cli.parse(arg, {usage =, options = {{name, default, kind}, ...}, positional = {...}})
--help/-h print the usage and exit 0; a bad value prints the problem and the
usage and exits 2 (no traceback).  Kinds: "integer", "number", "string".]]
  doc[cli.parse] = "cli.parse(arg, spec) -> table\nSee help(require('cli'))."
end

return cli
