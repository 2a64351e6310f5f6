-- labs/checks/07-speed.lua -- checks of Lab 7 (mixed precision, data
-- parallel).  References: the float32 forward, bfloat16 rounding done on
-- the bits in Lua (round to nearest even), the sampler's rule written as
-- a padded list, the mean over ranks through cnn.stack.

-- A float32 value rounded to bfloat16 (nearest, ties to even) on its bits.
local function bf16(v)
  local bits = string.unpack("<I4", string.pack("<f", v))
  bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
  return (string.unpack("<f", string.pack("<I4", bits)))
end

local function bf16_error_ref(x)
  local worst = 0
  for _, v in ipairs(x:totable()) do worst = math.max(worst, math.abs(bf16(v) - v) / math.abs(v)) end
  return worst
end

local function shard_ref(n, rank, world)
  local padded = {}
  for i = 1, math.ceil(n / world) * world do padded[i] = (i - 1) % n + 1 end
  local out = {}
  for i, v in ipairs(padded) do
    if (i - 1) % world == rank then out[#out + 1] = v end
  end
  return out
end

local function same_list(a, b)
  if type(a) ~= "table" or #a ~= #b then return false end
  for i = 1, #b do
    if a[i] ~= b[i] then return false end
  end
  return true
end

local function list_str(l)
  if type(l) ~= "table" then return tostring(l) end
  local parts = {}
  for i = 1, math.min(#l, 12) do parts[i] = tostring(l[i]) end
  return "{" .. table.concat(parts, ", ") .. (#l > 12 and ", ..." or "") .. "}"
end

-- On a GPU: the forward in float32 against float16 autocast, as a note.
local function gpu_note(t, net, x)
  local ok, why = cnn.cuda.is_available()
  if not ok then return t.note("GPU part (float16 on a GPU) skipped: " .. tostring(why)) end
  net:to("cuda")
  x = x:cuda()
  local fp32 = cnn.timeit(function() return net(x) end, { n = 20, device = "cuda" }).median
  local fp16 = cnn.timeit(function() return cnn.autocast("float16", function() return net(x) end) end,
    { n = 20, device = "cuda" }).median
  t.note(string.format("GPU: float32 %.3g ms, float16 autocast %.3g ms", fp32 * 1e3, fp16 * 1e3))
end

return {
  title = "Lab 7: mixed precision and data-parallel training",
  limits = { seconds = 60, memory_mb = 1024 },
  exercises = {
    { name = "autocast_forward", run = function(lab, t)
      local net, x = lab.small_net(), cnn.randn(8, 1, 28, 28)
      local ref = net(x)
      local got = t.fn(lab, "autocast_forward")(net, x)
      t.that(not cnn.is_autocast_enabled(), "autocast is still on after autocast_forward returned")
      t.that(cnn.is_tensor(got) and got.dtype == "float32", "autocast_forward should return a float32 tensor, got "
        .. (cnn.is_tensor(got) and got.dtype or type(got)))
      local scale = ref:abs():max():item()
      t.tensor(got, ref, "autocast_forward(net, x) against the float32 output", { atol = 0.03 * scale, rtol = 0.03 })
      t.that((got - ref):abs():max():item() > 0,
        "autocast_forward gave exactly the float32 output: was the forward run inside cnn.autocast('bfloat16', ...)?")
    end },
    { name = "bfloat16_error", run = function(lab, t)
      local x = cnn.randn(1000)
      x = x:masked_fill(x:eq(0), 1)
      t.number(t.fn(lab, "bfloat16_error")(x), bf16_error_ref(x), "bfloat16_error(x of 1000 normal values)",
        { rtol = 1e-3 })
    end },
    { name = "shard", run = function(lab, t)
      local f = t.fn(lab, "shard")
      for _, c in ipairs({ { 10, 1, 3 }, { 10, 2, 3 }, { 8, 0, 2 }, { 5, 3, 4 } }) do
        local got, want = f(c[1], c[2], c[3]), shard_ref(c[1], c[2], c[3])
        t.that(same_list(got, want), string.format("shard(n %d, rank %d, world %d): expected %s, got %s",
          c[1], c[2], c[3], list_str(want), list_str(got)))
      end
    end },
    { name = "average_gradients", run = function(lab, t)
      local grads = {}
      for r = 1, 3 do grads[r] = { cnn.randn(4, 3), cnn.randn(5) } end
      local got = t.fn(lab, "average_gradients")(grads)
      local want = {}
      for k = 1, 2 do want[k] = cnn.stack({ grads[1][k], grads[2][k], grads[3][k] }):mean(1) end
      t.grads(got, want, { "parameter 1 (4x3)", "parameter 2 (5)" }, "average_gradients(3 ranks)")
    end },
    { name = "measure", run = function(lab, t)
      local net, x = lab.small_net(), cnn.randn(16, 1, 28, 28)
      local times = t.fn(lab, "measure")(net, x)
      for _, k in ipairs({ "fp32", "bf16" }) do
        local v = type(times) == "table" and times[k]
        t.that(type(v) == "number" and v > 0 and v < 10,
          string.format("measure: times.%s should be the median seconds of one forward, got %s", k, tostring(v)))
      end
      t.note(string.format("forward of 16 images: float32 %.3g ms, bfloat16 (emulated) %.3g ms",
        times.fp32 * 1e3, times.bf16 * 1e3))
      gpu_note(t, net, x)
    end },
  },
}
