-- labs/checks/03-conv.lua -- checks of Lab 3 (convolution by hand).
-- References: F.conv2d (oneDNN / im2col in C, not the student's loops) on
-- odd shapes with stride and padding; for im2col, a convolution with
-- one-hot filters, whose output channel k is exactly row k of the matrix.

-- im2col of one C x H x W image through F.conv2d: filter k picks (c, u, v).
local function im2col_ref(x, KH, KW, stride, padding)
  local C = x:size(1)
  local rows = C * KH * KW
  local onehot = cnn.eye(rows):double():view(rows, C, KH, KW)
  local out = F.conv2d(x:view(1, C, x:size(2), x:size(3)), onehot, nil, { stride = stride, padding = padding })
  return out:view(rows, -1)
end

local function conv_case(lab, t, name, stride, padding)
  local x, w, b = cnn.randn(2, 3, 7, 5):double(), cnn.randn(4, 3, 3, 3):double(), cnn.randn(4):double()
  local want = F.conv2d(x, w, b, { stride = stride, padding = padding })
  local got = t.fn(lab, name)(x, w, b, stride, padding)
  t.tensor(got, want, string.format("%s(x 2x3x7x5, w 4x3x3x3, b, stride %d, padding %d)", name, stride, padding),
    { atol = 1e-9 })
end

local function check_conv(name)
  return function(lab, t)
    conv_case(lab, t, name, 1, 0)
    conv_case(lab, t, name, 2, 1)
  end
end

-- On a GPU: cuDNN ('auto') against our direct kernel ('direct'), as notes.
local function gpu_conv_note(t)
  local ok, why = cnn.cuda.is_available()
  if not ok then return t.note("GPU part (cuDNN vs our direct kernel) skipped: " .. tostring(why)) end
  local x, w = cnn.randn(8, 16, 32, 32):cuda(), cnn.randn(32, 16, 3, 3):cuda()
  local before, times = cnn.get_conv_algo(), {}
  for _, name in ipairs({ "auto", "direct" }) do
    cnn.set_conv_algo(name)
    times[name] = cnn.timeit(function() return F.conv2d(x, w, nil, { padding = 1 }) end,
      { n = 20, device = "cuda" }).median
  end
  cnn.set_conv_algo(before)
  t.note(string.format("GPU, 8x16x32x32 * 32x16x3x3: cuDNN %.3g ms, our direct kernel %.3g ms", times.auto * 1e3,
    times.direct * 1e3))
end

return {
  title = "Lab 3: convolution by hand",
  limits = { seconds = 60, memory_mb = 1024 },
  exercises = {
    { name = "conv2d_loops", run = check_conv("conv2d_loops") },
    { name = "im2col", run = function(lab, t)
      local x = cnn.randn(2, 5, 4):double()
      for _, case in ipairs({ { 1, 0 }, { 2, 1 } }) do
        local s, p = case[1], case[2]
        t.tensor(t.fn(lab, "im2col")(x, 3, 2, s, p), im2col_ref(x, 3, 2, s, p),
          string.format("im2col(x 2x5x4, KH 3, KW 2, stride %d, padding %d)", s, p), { atol = 0 })
      end
    end },
    { name = "conv2d_im2col", run = check_conv("conv2d_im2col") },
    { name = "time_algorithms", run = function(lab, t)
      local before = cnn.get_conv_algo()
      local times = t.fn(lab, "time_algorithms")(cnn.randn(2, 4, 12, 12), cnn.randn(8, 4, 3, 3))
      t.that(type(times) == "table", "time_algorithms should return a table {naive =, im2col =, onednn =}")
      for _, name in ipairs({ "naive", "im2col", "onednn" }) do
        local v = times[name]
        t.that(type(v) == "number" and v > 0 and v < 10,
          string.format("times.%s should be the median seconds of one call (a positive number), got %s",
            name, tostring(v)))
      end
      t.that(cnn.get_conv_algo() == before, string.format(
        "the convolution algorithm was left at '%s': set it back to '%s'", cnn.get_conv_algo(), before))
      t.note(string.format("naive %.3g ms, im2col %.3g ms, oneDNN %.3g ms", times.naive * 1e3,
        times.im2col * 1e3, times.onednn * 1e3))
      gpu_conv_note(t)
    end },
  },
}
