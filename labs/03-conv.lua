-- labs/03-conv.lua -- Lab 3: convolution by hand (60 min).
--
-- A 2-D convolution slides each filter over the image.  For an input x of
-- N x C x H x W, weights w of O x C x KH x KW and a bias b of O:
--   out[n][o][i][j] = b[o] + sum over c, u, v of
--                     w[o][c][u][v] * xpad[n][c][(i-1)*stride + u][(j-1)*stride + v]
-- where xpad is x with `padding` zeros on every side, and the output is
-- N x O x OH x OW with OH = floor((H + 2 padding - KH) / stride) + 1 (OW
-- likewise).  (Deep-learning "convolution" does not flip the filter: it is
-- a cross-correlation, as in PyTorch.)
--
-- Three ways to compute it, from slow to fast:
--   1. naive loops, exactly the formula above;
--   2. im2col: copy every KH x KW patch of the image into a column of a
--      matrix (C*KH*KW rows, OH*OW columns); then the whole convolution is
--      ONE matrix product, w viewed as O x (C*KH*KW) times that matrix,
--      which a tuned BLAS does near the machine's peak;
--   3. oneDNN's direct convolution (what F.conv2d uses by default), which
--      avoids the copy and blocks the loops for the caches.
--
-- How to work.  Fill in each TODO block, then run
--     cnnsh --check labs/03-conv.lua
-- Loops in Lua over tensor elements are slow: read a tensor into nested
-- Lua tables once (x:totable()) and build the result with cnn.tensor(t).
--
-- Try this at the prompt:
--   > x = cnn.randn(1, 1, 5, 5); w = cnn.randn(1, 1, 3, 3)
--   > F.conv2d(x, w, nil, {padding = 1}).shape      --> {1, 1, 5, 5}
--   > F.conv2d(x, w, nil, {stride = 2}).shape        --> {1, 1, 2, 2}
--   > lab = dofile("labs/03-conv.lua")
--   > x = cnn.randn(8, 16, 32, 32); w = cnn.randn(32, 16, 3, 3)
--   > lab.time_algorithms(x, w)                      -- naive vs im2col vs oneDNN
--   > cnn.cuda.is_available()   -- with a GPU: cnn.backends.conv = 'direct' (our kernel) vs 'auto' (cuDNN)
local lab = {}

local function TODO(what) error("TODO: " .. what, 2) end

-- Exercise 1. The formula above with loops.  x, w, b are float64 tensors
-- (b may be nil: no bias).  Return the N x O x OH x OW result.
function lab.conv2d_loops(x, w, b, stride, padding)
  local N, C, H, W = table.unpack(x.shape)
  local O, _, KH, KW = table.unpack(w.shape)
  local OH = (H + 2 * padding - KH) // stride + 1
  local OW = (W + 2 * padding - KW) // stride + 1
  local X, K = x:totable(), w:totable()
  local B = b and b:totable()
  local out = {}
  -- TODO: fill out[n][o][i][j] for n = 1..N, o = 1..O, i = 1..OH, j = 1..OW.
  -- A position (r, s) of the padded image is (r - padding, s - padding) in
  -- X; outside 1..H or 1..W it reads 0.
  TODO("the six nested loops of the convolution")
  return cnn.tensor(out, "float64")
end

-- Exercise 2. im2col for ONE image x of C x H x W: a (C*KH*KW) x (OH*OW)
-- matrix whose column p = (i-1)*OW + j holds the patch under output
-- position (i, j), in the order c, then u, then v (the order of
-- w:view(O, -1)).  Zero padding as above.
function lab.im2col(x, KH, KW, stride, padding)
  -- TODO: build the columns (loops over tables are fine here too)
  return x:reshape(x:size(1), -1)
end

-- Exercise 3. Convolution as one matrix product: for each image n,
-- out[n] = w:view(O, -1) times im2col(x[n]), plus the bias, viewed back
-- as O x OH x OW.  Stack the images with cnn.stack.
function lab.conv2d_im2col(x, w, b, stride, padding)
  TODO("w:view(O, -1):matmul(lab.im2col(...)) for each image, then add b")
end

-- Exercise 4. Time F.conv2d(x, w, nil, {padding = 1}) with each CPU
-- algorithm: cnn.set_conv_algo('naive'), 'im2col' and 'onednn' select it.
-- Return {naive = s, im2col = s, onednn = s}: the median seconds of one
-- call, from cnn.timeit(fn, n).median.  Put the algorithm back as it was
-- (cnn.get_conv_algo()) before you return.  On a GPU machine, also try
-- cnn.backends.conv = 'direct' against 'auto' on x:cuda() (not checked).
function lab.time_algorithms(x, w)
  local times = {}
  TODO("for each name: cnn.set_conv_algo(name); times[name] = cnn.timeit(...).median")
  return times
end

return lab
