-- grad_scaler_spec.lua -- optim.GradScaler against torch.amp.GradScaler's
-- rules worked out by hand: scaled loss, unscaled gradients, skipped steps
-- on Inf/NaN, scale backoff and growth, state dict.
package.path = "./?.lua;" .. package.path
local H = require("helpers")

local function setup(value, grad)
  local p = cnn.tensor({ value, -value }, "float64")
  p.requires_grad = true
  local opt = optim.SGD({ p }, { lr = 0.5 })
  return p, opt
end

describe("optim.GradScaler", function()
  it("scales the loss, unscales the gradients and steps", function()
    local p, opt = setup(1.0)
    local scaler = optim.GradScaler{ init_scale = 8, growth_interval = 2 }
    local loss = (p * p):sum()              -- d/dp = 2p = {2, -2}
    local scaled = scaler:scale(loss)
    assert.equal(8 * loss:item(), scaled:item())
    scaled:backward()
    H.assert_close(p.grad, { 16, -16 }, 0, 0)  -- scaled gradients
    scaler:step(opt)                          -- p -= 0.5 * {2, -2}
    H.assert_close(p, { 0, 0 }, 1e-15, 0)
    H.assert_close(p.grad, { 2, -2 }, 0, 0)   -- unscaled in place
    scaler:update()
    assert.equal(8, scaler:get_scale())       -- one clean step of growth_interval 2
    opt:zero_grad()
    scaler:scale((p * 3):sum()):backward()
    scaler:step(opt)
    scaler:update()
    assert.equal(16, scaler:get_scale())      -- two clean steps: scale *= 2
  end)

  it("skips a step whose gradients hold Inf or NaN and backs off", function()
    for _, bad in ipairs({ math.huge, 0 / 0 }) do
      local p, opt = setup(1.0)
      local scaler = optim.GradScaler{ init_scale = 1024 }
      scaler:scale((p * cnn.tensor({ bad, 1 }, "float64")):sum()):backward()
      assert.is_nil(scaler:step(opt))
      H.assert_close(p, { 1, -1 }, 0, 0)      -- untouched
      scaler:update()
      assert.equal(512, scaler:get_scale())
    end
  end)

  it("round-trips its state and validates options", function()
    local s = optim.GradScaler{ init_scale = 4, growth_interval = 3 }
    local t = optim.GradScaler()
    t:load_state_dict(s:state_dict())
    assert.equal(4, t:get_scale())
    assert.equal(3, t.growth_interval)
    H.raises(function() return optim.GradScaler{ init_scale = -1 } end, "GradScaler", "init_scale")
    H.raises(function() return optim.GradScaler{ growth = 2 } end, "GradScaler", "unknown option")
    local off = optim.GradScaler{ enabled = false }
    local p, opt = setup(1.0)
    local loss = (p * p):sum()
    assert.equal(loss, off:scale(loss))
    assert.equal(1.0, off:get_scale())
  end)
end)
