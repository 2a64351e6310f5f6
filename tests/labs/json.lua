-- tests/labs/json.lua -- a small strict JSON reader for the tests of
-- `cnnsh --check --json`: decode(text) -> value, or an error naming the
-- offset.  Objects become tables, arrays sequences, null the sentinel
-- json.null.  Enough of RFC 8259 for our reports (no \u surrogates).
local json = { null = setmetatable({}, { __tostring = function() return "null" end }) }

local decode_value

local function fail(s, i, what) error(string.format("json: %s at offset %d near %q", what, i, s:sub(i, i + 10)), 0) end

local function skip(s, i) return s:find("[^ \t\r\n]", i) or #s + 1 end

local ESCAPES = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }

local function decode_string(s, i)
  local out, j = {}, i + 1
  while true do
    local c = s:sub(j, j)
    if c == "" then fail(s, j, "unterminated string") end
    if c == '"' then return table.concat(out), j + 1 end
    if c:byte() < 32 then fail(s, j, "control character in string") end
    if c == "\\" then
      local e = s:sub(j + 1, j + 1)
      if e == "u" then
        local hex = s:sub(j + 2, j + 5)
        if not hex:match("^%x%x%x%x$") then fail(s, j, "bad \\u escape") end
        out[#out + 1] = utf8.char(tonumber(hex, 16))
        j = j + 6
      elseif ESCAPES[e] then
        out[#out + 1] = ESCAPES[e]
        j = j + 2
      else
        fail(s, j, "bad escape")
      end
    else
      out[#out + 1] = c
      j = j + 1
    end
  end
end

local function decode_list(s, i, close, item)
  local j = skip(s, i + 1)
  if s:sub(j, j) == close then return j + 1 end
  while true do
    j = skip(s, item(j))
    local c = s:sub(j, j)
    if c == close then return j + 1 end
    if c ~= "," then fail(s, j, "expected ',' or '" .. close .. "'") end
    j = skip(s, j + 1)
  end
end

local function decode_object(s, i)
  local obj = {}
  local j = decode_list(s, i, "}", function(k)
    if s:sub(k, k) ~= '"' then fail(s, k, "expected a key") end
    local key, after = decode_string(s, k)
    after = skip(s, after)
    if s:sub(after, after) ~= ":" then fail(s, after, "expected ':'") end
    local v, next_i = decode_value(s, skip(s, after + 1))
    obj[key] = v
    return next_i
  end)
  return obj, j
end

local function decode_array(s, i)
  local arr = {}
  local j = decode_list(s, i, "]", function(k)
    local v, next_i = decode_value(s, k)
    arr[#arr + 1] = v
    return next_i
  end)
  return arr, j
end

local LITERALS = { ["true"] = true, ["false"] = false, null = json.null }

decode_value = function(s, i)
  local c = s:sub(i, i)
  if c == "{" then return decode_object(s, i) end
  if c == "[" then return decode_array(s, i) end
  if c == '"' then return decode_string(s, i) end
  local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", i)
  if num and num ~= "" and tonumber(num) then return tonumber(num), i + #num end
  for word, v in pairs(LITERALS) do
    if s:sub(i, i + #word - 1) == word then return v, i + #word end
  end
  fail(s, i, "unexpected character")
end

function json.decode(s)
  local v, i = decode_value(s, skip(s, 1))
  if skip(s, i) <= #s then fail(s, i, "trailing text") end
  return v
end

return json
