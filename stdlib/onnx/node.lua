-- onnx/node.lua -- the small helpers every operator file of cnn.onnx.load
-- shares: reading a node's attribute with a default, and the two kinds of
-- refusal (a malformed node, and an input cnnsh has no way to run, which the
-- conformance test counts as skipped).
local M = {}

function M.attr(node, name, default)
  local v = node.attrs[name]
  if v == nil then return default end
  return v
end

function M.fail(node, fmt, ...)
  error(string.format("onnx %s: " .. fmt, node.op_type, ...), 0)
end

function M.not_supported(node, fmt, ...)
  error(string.format("onnx %s: not supported: " .. fmt, node.op_type, ...), 0)
end

return M
