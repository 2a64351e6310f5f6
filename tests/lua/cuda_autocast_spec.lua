-- cuda_autocast_spec.lua -- cnn.autocast on a CUDA device, in CI the fake
-- device (tests/gpu/fake_cuda.h): there convolutions and products really
-- run on float16/bfloat16 tensors (core's half-precision paths: conv2d and
-- matmul accept half dtypes on cuda, the backend's half conv/gemm), the
-- results come back as float32, and gradients reach float32 weights.
-- References: naive Lua loops over operands rounded to bfloat16 here
-- (helpers.lua), and the CPU's float32 results within half tolerances.
--
-- Run by tests/gpu/CMakeLists.txt as lua_fake_autocast (with
-- CNNSH_CUDA_MODULE=libcnn_fake_cuda.so) and gpu_lua_cuda_autocast_spec
-- (label gpu: the real module; exits 77, skipped, without a device).

package.path = "./?.lua;" .. package.path
local H = require("helpers")
H.need_cuda("cuda_autocast_spec")

local max_diff = H.max_diff

describe("cnn.autocast on cuda (fake device)", function()
  it("bfloat16 conv2d: rounded operands, float32 accumulation, a bfloat16 result", function()
    cnn.manual_seed(21)
    local x, w, b = cnn.randn(2, 3, 6, 6), cnn.randn(4, 3, 3, 3), cnn.randn(4)
    local y = cnn.autocast("bfloat16", function()
      return F.conv2d(x:cuda(), w:cuda(), b:cuda(), { padding = 1 })
    end)
    assert.equal("float32", y.dtype)
    assert.equal("cuda:0", tostring(y.device))
    local r = H.map
    local ref = H.conv2d_ref(r(x:totable(), H.bf16), r(w:totable(), H.bf16), r(b:totable(), H.bf16), 1)
    -- the device kernel's output is bfloat16: the reference rounded once more
    H.assert_close(y:cpu(), H.map(ref, H.bf16), 1e-6, 2 ^ -7, "conv2d vs rounded reference")
    assert.is_true(max_diff(y:cpu():totable(), F.conv2d(x, w, b, { padding = 1 }):totable()) > 1e-3)
  end)

  for _, dt in ipairs({ "float16", "bfloat16" }) do
    local tol = dt == "float16" and 2e-2 or 1.5e-1
    it(dt .. ": conv2d and linear forward and backward against float32 on the CPU", function()
      cnn.manual_seed(22)
      local x, w, b = cnn.randn(2, 3, 7, 7), cnn.randn(4, 3, 3, 3), cnn.randn(4)
      local lw, lb = cnn.randn(5, 4 * 49) * 0.1, cnn.randn(5)
      local function forward(dev, on)
        local leaves = {}
        for i, t in ipairs({ w, b, lw, lb }) do leaves[i] = t:to(dev):detach():requires_grad_() end
        local conv_node
        local function f()
          local c = F.conv2d(x:to(dev), leaves[1], leaves[2], { padding = 1 })
          conv_node = c.grad_fn
          return F.linear(c:relu():view(2, -1), leaves[3], leaves[4])
        end
        local out = on and cnn.autocast(dt, f) or f()
        out:sum():backward()
        return out, leaves, conv_node
      end
      local out_cpu, g_cpu = forward("cpu", false)
      local out_gpu, g_gpu, conv_node = forward("cuda", true)
      assert.equal("float32", out_gpu.dtype)
      assert.equal("ToCopyBackward", conv_node) -- the half result cast back to float32
      H.assert_close(out_gpu:cpu(), out_cpu, tol, tol, "forward")
      for i = 1, 4 do
        assert.equal("float32", g_gpu[i].grad.dtype)
        assert.equal("cuda:0", tostring(g_gpu[i].grad.device))
        local scale = math.max(1, g_cpu[i].grad:abs():max():item())
        H.assert_close(g_gpu[i].grad:cpu(), g_cpu[i].grad, tol * scale, tol, "grad " .. i)
      end
    end)
  end

  it("trains a small network on cuda under float16 with a GradScaler", function()
    local first, last, net = H.autocast_training("float16", "cuda", 30, 1024)
    for _, p in ipairs(net:parameters()) do
      assert.equal("float32", p.dtype)
      assert.equal("cuda:0", tostring(p.device))
    end
    assert.is_true(last < 0.2 * first, ("loss %g -> %g"):format(first, last))
  end)
end)
