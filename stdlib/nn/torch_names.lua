-- nn/torch_names.lua -- the one place where cnnsh's state-dict names and
-- PyTorch's meet (module "nn.torch_names", private to nn.Module).
--
-- A model built from the same modules under the same field names (the
-- zoo in stdlib/models/ copies torchvision's) has the same state dict as
-- PyTorch's but for one thing: cnnsh's containers (nn.Sequential,
-- nn.ModuleList, any child stored at an integer key) count their children
-- from 1, PyTorch's from 0.  So the PyTorch name of a tensor is its cnnsh
-- name with every component that is an integer child key lowered by one:
--   cnnsh "features.1.weight"        PyTorch "features.0.weight"
--   cnnsh "layer1.1.downsample.1.running_var"
--                                    PyTorch "layer1.0.downsample.0.running_var"
-- The mapping is built from the model itself (which components are
-- integer keys), never guessed from the text: a child stored under the
-- string "1" keeps its name.  Everything else already agrees: parameter
-- and buffer names (weight, bias, running_mean, running_var), layouts
-- (Conv2d out x in/groups x kh x kw, Linear out x in), and BatchNorm's
-- num_batches_tracked, a 0-d int64 tensor in both.
--
-- Used by Module:state_dict{torch = true} (save in PyTorch's names, so that
-- PyTorch's load_state_dict(strict=True) takes the file) and
-- Module:load_state_dict(sd, {torch = true}) (load a state dict that
-- PyTorch saved with safetensors' save_file(model.state_dict())).
local cnn = _G.cnn

local M = {}

-- One path component in PyTorch's spelling.
local function torch_part(key)
  if math.type(key) == "integer" then return tostring(key - 1) end
  return tostring(key)
end

local function join(prefix, part)
  return prefix == "" and part or prefix .. "." .. part
end

-- Every module below `m` (parents first, each once, as Module:named_modules)
-- with its cnnsh and PyTorch dotted paths.
local function walk(m, own, torch, seen, out)
  if seen[m] then return end
  seen[m] = true
  out[#out + 1] = { module = m, own = own, torch = torch }
  for key, child in m:named_children() do
    walk(child, join(own, tostring(key)), join(torch, torch_part(key)), seen, out)
  end
end

-- name_map(net) -> {[cnnsh name] = PyTorch name} for every parameter and
-- buffer of net (the keys of net:state_dict()).
function M.name_map(net)
  local mods = {}
  walk(net, "", "", {}, mods)
  local map = {}
  for _, e in ipairs(mods) do
    for _, list in ipairs({ "_params", "_buffers" }) do
      for _, name in ipairs(rawget(e.module, list)) do
        if cnn.is_tensor(rawget(e.module, name)) then
          map[join(e.own, tostring(name))] = join(e.torch, tostring(name))
        end
      end
    end
  end
  return map
end

-- rename(sd, map) -> a new table with every key k of sd renamed map[k]
-- (keys that map does not know stay as they are).
function M.rename(sd, map)
  local out = {}
  for k, v in pairs(sd) do out[map[k] or k] = v end
  return out
end

return M
