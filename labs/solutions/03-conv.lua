-- labs/solutions/03-conv.lua -- reference answers of Lab 3 (the
-- explanations are in labs/03-conv.lua).
local lab = {}

-- X[c][r][s] with zero padding, 1-based positions in the padded image.
local function padded(X, c, r, s, padding)
  local row = X[c][r - padding]
  return row and row[s - padding] or 0
end

local function out_size(H, K, stride, padding) return (H + 2 * padding - K) // stride + 1 end

local function conv_one(X, K, bias, i, j, stride, padding)
  local s = bias
  for c = 1, #K do
    for u = 1, #K[c] do
      for v = 1, #K[c][u] do
        s = s + K[c][u][v] * padded(X, c, (i - 1) * stride + u, (j - 1) * stride + v, padding)
      end
    end
  end
  return s
end

function lab.conv2d_loops(x, w, b, stride, padding)
  local N, _, H, W = table.unpack(x.shape)
  local O, _, KH, KW = table.unpack(w.shape)
  local OH, OW = out_size(H, KH, stride, padding), out_size(W, KW, stride, padding)
  local X, K, B = x:totable(), w:totable(), b and b:totable()
  local out = {}
  for n = 1, N do
    out[n] = {}
    for o = 1, O do
      out[n][o] = {}
      for i = 1, OH do
        out[n][o][i] = {}
        for j = 1, OW do
          out[n][o][i][j] = conv_one(X[n], K[o], B and B[o] or 0, i, j, stride, padding)
        end
      end
    end
  end
  return cnn.tensor(out, "float64")
end

function lab.im2col(x, KH, KW, stride, padding)
  local C, H, W = table.unpack(x.shape)
  local OH, OW = out_size(H, KH, stride, padding), out_size(W, KW, stride, padding)
  local X, cols = x:totable(), {}
  for c = 1, C do
    for u = 1, KH do
      for v = 1, KW do
        local row = {}
        for i = 1, OH do
          for j = 1, OW do
            row[(i - 1) * OW + j] = padded(X, c, (i - 1) * stride + u, (j - 1) * stride + v, padding)
          end
        end
        cols[#cols + 1] = row
      end
    end
  end
  return cnn.tensor(cols, x.dtype)
end

function lab.conv2d_im2col(x, w, b, stride, padding)
  local O, _, KH, KW = table.unpack(w.shape)
  local OH = out_size(x:size(3), KH, stride, padding)
  local OW = out_size(x:size(4), KW, stride, padding)
  local outs = {}
  for n = 1, x:size(1) do
    local y = w:view(O, -1):matmul(lab.im2col(x[n], KH, KW, stride, padding))
    if b then y = y + b:view(O, 1) end
    outs[n] = y:view(O, OH, OW)
  end
  return cnn.stack(outs)
end

function lab.time_algorithms(x, w)
  local before, times = cnn.get_conv_algo(), {}
  for _, name in ipairs({ "naive", "im2col", "onednn" }) do
    cnn.set_conv_algo(name)
    times[name] = cnn.timeit(function() return F.conv2d(x, w, nil, { padding = 1 }) end, 5).median
  end
  cnn.set_conv_algo(before)
  return times
end

return lab
