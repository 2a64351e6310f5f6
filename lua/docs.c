/*
 * docs.c -- cnn.doc entries for every C function of the bindings.
 *
 * cnn.doc is a table with weak keys mapping a function (or module table)
 * to its doc string; the first line is the signature, then one sentence.
 * help(obj) (stdlib/help.lua) prints it; stdlib modules add their own.
 * Entries name the function the way a user reaches it ("cnn.zeros",
 * "F.relu", "Tensor:add"); registration resolves the name to the function
 * value, so cnn.add and x.add (the same function) share one entry.
 * Conventions repeated in the texts: dims and indices are 1-based,
 * negatives count from the end, class labels are 1..C.
 */
#include <string.h>

#include "bind.h"

typedef struct {
  const char *name;
  const char *doc;
} doc_entry;

static const doc_entry docs[] = {
    /* creation */
    {"cnn.tensor",
     "cnn.tensor(data [, dtype | {dtype=, device=, requires_grad=}]) -> tensor\nA tensor from "
     "nested tables, a number (0-d) or a tensor (copied); float32 unless a dtype is given."},
    {"cnn.zeros", "cnn.zeros(size... | {sizes} [, dtype | opts]) -> tensor\nA tensor of zeros; "
                  "opts = {dtype=, device=, requires_grad=}."},
    {"cnn.ones", "cnn.ones(size... | {sizes} [, dtype | opts]) -> tensor\nA tensor of ones."},
    {"cnn.empty", "cnn.empty(size... | {sizes} [, dtype | opts]) -> tensor\nAn uninitialised "
                  "tensor (contents are arbitrary)."},
    {"cnn.full",
     "cnn.full(size... | {sizes}, value [, dtype | opts]) -> tensor\nA tensor filled with value."},
    {"cnn.rand", "cnn.rand(size... | {sizes} [, dtype | opts]) -> tensor\nUniform random numbers "
                 "in [0, 1) (seeded by cnn.manual_seed)."},
    {"cnn.randn",
     "cnn.randn(size... | {sizes} [, dtype | opts]) -> tensor\nStandard normal random numbers."},
    {"cnn.randint", "cnn.randint(low, high, size... | {sizes} [, dtype | opts]) -> tensor\nUniform "
                    "random integers in low..high, both ends included (int64)."},
    {"cnn.arange", "cnn.arange(a, b [, step] [, dtype | opts]) -> tensor\nThe values a, a+step, "
                   "... up to b included when reached, like Lua's numeric for; arange(n) = 1..n; "
                   "int64 when all arguments are integers, else float32."},
    {"cnn.linspace", "cnn.linspace(a, b, n [, dtype | opts]) -> tensor\nn evenly spaced values "
                     "from a to b inclusive."},
    {"cnn.eye", "cnn.eye(n [, m] [, dtype | opts]) -> tensor\nThe n x m identity matrix."},
    {"cnn.zeros_like",
     "cnn.zeros_like(x [, dtype | opts]) -> tensor\nZeros with x's shape, dtype and device."},
    {"cnn.ones_like",
     "cnn.ones_like(x [, dtype | opts]) -> tensor\nOnes with x's shape, dtype and device."},
    {"cnn.empty_like", "cnn.empty_like(x [, dtype | opts]) -> tensor\nAn uninitialised tensor with "
                       "x's shape, dtype and device."},
    {"cnn.full_like", "cnn.full_like(x, value [, dtype | opts]) -> tensor\nA tensor with x's shape "
                      "filled with value."},
    {"cnn.rand_like",
     "cnn.rand_like(x [, dtype | opts]) -> tensor\nUniform [0, 1) random numbers with x's shape."},
    {"cnn.randn_like", "cnn.randn_like(x [, dtype | opts]) -> tensor\nStandard normal random "
                       "numbers with x's shape."},
    {"cnn.where", "cnn.where(cond, a, b) -> tensor\nElementwise a where cond is non-zero, else b "
                  "(tensors or numbers, broadcast)."},
    {"cnn.cat",
     "cnn.cat({a, b, ...} [, dim=1]) -> tensor\nConcatenates tensors along an existing dim."},
    {"cnn.stack",
     "cnn.stack({a, b, ...} [, dim=1]) -> tensor\nStacks same-shaped tensors along a new dim."},
    /* module functions */
    {"cnn.manual_seed",
     "cnn.manual_seed(n)\nSeeds the random generator: every random op becomes reproducible."},
    {"cnn.get_rng_state",
     "cnn.get_rng_state() -> {integers}\nThe generator state, for checkpoints."},
    {"cnn.set_rng_state", "cnn.set_rng_state(state)\nRestores a state returned by get_rng_state."},
    {"cnn.set_num_threads",
     "cnn.set_num_threads(n)\nSets the number of OpenMP threads of every CPU op."},
    {"cnn.get_num_threads", "cnn.get_num_threads() -> n\nThe number of threads CPU ops use."},
    {"cnn.clock", "cnn.clock() -> seconds\nA monotonic clock, for timing."},
    /* machine peaks */
    {"cnn.fma_peak", "cnn.fma_peak([seconds = 0.2]) -> FLOP/s\nThe float32 FMA peak of the CPU "
                     "threads, measured (independent FMA chains; the best round of ~seconds)."},
    {"cnn.copy_bandwidth", "cnn.copy_bandwidth(bytes [, seconds = 0.2]) -> bytes/s\nCopy bandwidth "
                           "over two arrays of `bytes` (counted as STREAM does: 2 x bytes a copy), "
                           "measured; a few MB sit in cache, 256 MB measures memory."},
    {"cnn.version_info", "cnn.version_info() -> string\nLines about the BLAS in use, the thread "
                         "count and the CUDA module (or why there is none)."},
    {"cnn.is_tensor", "cnn.is_tensor(v) -> boolean\nTrue if v is a live cnn.Tensor."},
    {"cnn.set_conv_algo",
     "cnn.set_conv_algo(name)\nSelects the CPU convolution: 'auto' (oneDNN, with its Winograd "
     "kernels for the 3x3 stride-1 shapes they are faster on), 'onednn' (its direct kernels "
     "only), 'im2col' or 'naive' (also cnn.backends.conv = name)."},
    {"cnn.get_conv_algo", "cnn.get_conv_algo() -> name\nThe selected CPU convolution algorithm."},
    {"cnn.memory", "cnn.memory(['cpu' | 'cuda']) -> {live=, peak=, count=}\nBytes held by live "
                   "tensors, the peak since start (or reset), and the number of storages."},
    {"cnn.reset_peak_memory",
     "cnn.reset_peak_memory()\nSets the peak of cnn.memory() to the current live bytes."},
    {"cnn.no_grad", "cnn.no_grad(fn, ...) -> fn's results\nRuns fn with gradient recording off; "
                    "the previous mode is restored even on error."},
    {"cnn.timer", "cnn.timer([device | tensor]) -> timer\n"
                  "Marks on a device, read when asked: t:mark() -> n, t:elapsed(a [, b]) -> "
                  "seconds, t:times() -> {0, s2, ...},\n"
                  "t:reset(), #t, t:device(), t:close() (also local t <close>); CPU: the monotonic "
                  "clock, CUDA: events recorded without waiting."},
    {"cnn.empty_cache", "cnn.empty_cache() -> bytes\nGives the CPU's cache of freed blocks "
                        "(cnn.memory().cached) back to the system."},
    {"cnn.autocast",
     "cnn.autocast(dtype, fn, ...) -> fn's results;  cnn.autocast(dtype) -> guard for <close>\n"
     "Mixed precision: conv2d and matrix products over float32 run in dtype ('float16' on a GPU,\n"
     "'bfloat16' on a GPU or the CPU: oneDNN bf16 kernels with AVX512-BF16, else emulated) with\n"
     "float32 accumulation and return float32. Other ops stay float32; gradients reach float32\n"
     "weights. false turns it off inside. cnn.autocast_info() says how the CPU runs it."},
    {"cnn.is_autocast_enabled", "cnn.is_autocast_enabled() -> enabled, dtype name or nil\n"
                                "Whether cnn.autocast is on here, and in which dtype."},
    {"cnn.autocast_info",
     "cnn.autocast_info() -> 'onednn' or 'emulated', detail\n"
     "How cnn.autocast('bfloat16') computes on this CPU, decided once from oneDNN's ISA: oneDNN's\n"
     "bfloat16 kernels (AVX512-BF16/AMX), or emulated (rounded operands, float32 kernels)."},
    {"cnn.enable_grad", "cnn.enable_grad(fn, ...) -> fn's results\nRuns fn with gradient recording "
                        "on (inside no_grad)."},
    {"cnn.is_grad_enabled",
     "cnn.is_grad_enabled() -> boolean\nWhether ops currently record the autograd graph."},
    {"cnn.set_grad_enabled",
     "cnn.set_grad_enabled(on) -> previous\nTurns gradient recording on or off."},
    {"cnn.save",
     "cnn.save(path, tbl)\nWrites a (nested) table of tensors as safetensors, atomically (a killed "
     "save leaves no temporary behind); names are dotted (\"features.1.weight\"), numbers, strings "
     "and booleans go to __metadata__.  Save a module's net:state_dict(), not the module."},
    {"cnn.load", "cnn.load(path [, {flat=false}]) -> table\nGives back the table cnn.save was "
                 "given (nested stays nested, a flat state_dict stays flat); a file from another "
                 "program loads as it is (its names flat); flat=true gives dotted names."},
    {"io.load_idx", "cnn.io.load_idx(path) -> tensor\nReads an IDX file (MNIST, Fashion-MNIST; "
                    "gzipped or not); labels stay 0-based as stored."},
    {"io.load_cifar10", "cnn.io.load_cifar10(path) -> images, labels\nReads a CIFAR-10 binary "
                        "batch: N x 3 x 32 x 32 uint8 and int64 labels (0-based as stored)."},
    {"io.write_png", "cnn.io.write_png(path, img)\nWrites a uint8 C x H x W tensor (C = 1 gray, 3 "
                     "RGB, 4 RGBA) or an H x W one as PNG, atomically."},
    {"io.read_png", "cnn.io.read_png(path [, {mode = 'unchanged'}]) -> tensor\nio.read_image for "
                    "PNG files only (uint8 C x H x W)."},
    {"io.read_image",
     "cnn.io.read_image(path [, {mode = 'unchanged'}]) -> uint8 C x H x W\n"
     "Decodes a PNG (libpng) or JPEG (libjpeg-turbo).  mode: 'unchanged' (the file's channels: 1 "
     "gray,\n"
     "2 gray+alpha, 3 RGB, 4 RGBA), 'gray', 'rgb' (alpha dropped) or 'rgba' (alpha 255 added).\n"
     "16-bit PNG is scaled to 8 bits (rounded), palettes expanded; no gamma conversion.\n"
     "Truncated, corrupt or non-image files are errors naming the file.  x:float() / 255 for [0, "
     "1]."},
    {"io.write_jpeg", "cnn.io.write_jpeg(path, img [, {quality = 90}])\nWrites a uint8 C x H x W "
                      "(C = 1 or 3) or H x W tensor as JPEG (libjpeg-turbo), atomically."},
    {"io.mkdir", "cnn.io.mkdir(path)\nCreates a folder and its parents (mkdir -p); an existing "
                 "folder is fine."},
    {"io.transform", "cnn.io.transform(img, spec [, seed]) -> float32 C x H x W\nRuns a transform "
                     "pipeline spec (data.transforms' pipeline_spec) on one image."},
    {"io.transform_shape", "cnn.io.transform_shape(spec, {C, H, W}) -> {C, H, W}\nThe shape a "
                           "pipeline spec gives an image of the given shape."},
    {"io.FileBatcher", "cnn.io.FileBatcher(paths, labels, order, batch_size, drop_last, spec, "
                       "out_shape, mode, label_offset, pin_memory, opts) -> batcher\n"
                       "One epoch of batches decoded from image files on worker threads "
                       "(data.ImageFolder's loader); b:skipped() counts bad files."},
    {"io.default_workers",
     "cnn.io.default_workers() -> n\nThe number of cores: DataLoader's default num_workers."},
    {"io.list_dir", "cnn.io.list_dir(path) -> names, kinds\nThe entries of a folder sorted by name "
                    "(no . and ..); kinds[i] is 'file', 'dir' or 'other'."},
    {"io.onnx_read", "cnn.io.onnx_read(path) -> model table\nReads an ONNX model as plain data: "
                     "{opset, nodes = {{op_type, inputs, outputs, attrs}}, initializers, inputs, "
                     "outputs}; cnn.onnx.load builds a module from it."},
    {"io.onnx_write",
     "cnn.io.onnx_write(path, model)\nWrites a model table (as cnn.io.onnx_read returns) as an "
     "ONNX file, atomically; cnn.onnx.export builds one from a network."},
    {"io.onnx_read_tensor", "cnn.io.onnx_read_tensor(path) -> tensor\nReads a serialized ONNX "
                            "TensorProto (the ONNX test data's input_0.pb, output_0.pb)."},
    {"io.isatty", "cnn.io.isatty([fd | file]) -> boolean\nWhether the descriptor (stdout by "
                  "default) is a terminal."},
    {"io.Batcher", "cnn.io.Batcher(images, labels, order, batch_size, drop_last, spec, "
                   "label_offset [, pin_memory, opts]) -> batcher\nOne epoch of batches assembled "
                   "on worker threads (opts: num_workers, prefetch_factor, skip_bad, pipeline, "
                   "out_shape): b:next() -> x, y (nil at the end), #b, b:close()."},
    /* facts and conversions */
    {"Tensor:size", "x:size([dim]) -> n | {sizes}\nThe size of one dim (1-based, negatives from "
                    "the end) or all sizes as a table."},
    {"Tensor:stride",
     "x:stride([dim]) -> n | {strides}\nThe stride (in elements) of one dim or all."},
    {"Tensor:dim", "x:dim() -> n\nThe number of dims."},
    {"Tensor:numel", "x:numel() -> n\nThe number of elements."},
    {"Tensor:nelement", "x:nelement() -> n\nThe number of elements (Torch7's name)."},
    {"Tensor:is_contiguous",
     "x:is_contiguous([memory_format]) -> boolean\nWhether x is laid out densely in row-major "
     "order; with 'channels_last' (or {memory_format = 'channels_last'}), whether a 4-d x has "
     "channels-last strides (N x C x H x W stored as N x H x W x C)."},
    {"Tensor:element_size", "x:element_size() -> bytes\nThe size of one element of x's dtype."},
    {"Tensor:item",
     "x:item() -> number\nThe value of a one-element tensor (an integer for integer dtypes)."},
    {"Tensor:totable",
     "x:totable() -> table\nThe values as nested Lua tables (a number for a 0-d tensor)."},
    {"Tensor:to", "x:to(dtype | device | other | {dtype=, device=, non_blocking=} [, "
                  "{non_blocking=}]) -> tensor\nx:to(device, dtype [, {non_blocking=}]) -> "
                  "tensor\nConverts dtype and/or device ('float64', 'cuda', "
                  "...); x itself when nothing changes."},
    {"Tensor:float", "x:float() -> tensor\nConverts to float32."},
    {"Tensor:double", "x:double() -> tensor\nConverts to float64."},
    {"Tensor:half", "x:half() -> tensor\nConverts to float16 (ops run on it on a GPU: float16 "
                    "inference; the CPU stores it only)."},
    {"Tensor:long", "x:long() -> tensor\nConverts to int64."},
    {"Tensor:byte", "x:byte() -> tensor\nConverts to uint8."},
    {"Tensor:cpu", "x:cpu() -> tensor\nCopies to the CPU (x itself if there already)."},
    {"Tensor:cuda", "x:cuda([index=0 | {device=, non_blocking=}]) -> tensor\nCopies to a GPU; "
                    "non_blocking copies a pinned tensor asynchronously."},
    {"Tensor:set_",
     "x:set_(src) -> x\nx takes src's data, shape and dtype in place (torch's set_): every "
     "reference to x sees it.\nLeaves only; one that requires grad inside cnn.no_grad."},
    {"Tensor:pin_memory", "x:pin_memory() -> tensor\nA copy in page-locked memory (x itself if "
                          "already pinned); an error without CUDA."},
    {"Tensor:is_pinned", "x:is_pinned() -> boolean\nWhether x lives in page-locked memory."},
    {"Tensor:type", "x:type() -> dtype name\nThe dtype as a string, as x.dtype."},
    {"Tensor:contiguous",
     "x:contiguous([memory_format]) -> tensor\nx itself if contiguous, else a contiguous copy.  "
     "x:contiguous('channels_last') (or {memory_format = 'channels_last'}) lays a 4-d x out as "
     "N x H x W x C, keeping its shape: convolutions, batch norm, elementwise ops and the global "
     "average pool then run in that layout and keep it, as PyTorch's torch.channels_last."},
    {"Tensor:clone", "x:clone([memory_format]) -> tensor\nA copy (recorded by autograd): "
                     "contiguous, except that a channels-last x stays channels-last "
                     "('preserve_format', the default; or 'contiguous_format', 'channels_last')."},
    {"Tensor:detach",
     "x:detach() -> tensor\nA tensor sharing x's storage, cut from the autograd graph."},
    {"Tensor:release", "x:release()\nFrees x's reference now (as a <close> variable does); using x "
                       "afterwards is an error."},
    {"Tensor:is_released",
     "x:is_released() -> boolean\nWhether x was released (by release() or <close>)."},
    /* views */
    {"Tensor:view", "x:view(size... | {sizes}) -> tensor\nA view with a new shape (one size may be "
                    "-1); x must be contiguous enough."},
    {"Tensor:reshape",
     "x:reshape(size... | {sizes}) -> tensor\nA view with a new shape when possible, else a copy."},
    {"Tensor:view_as", "x:view_as(other) -> tensor\nx viewed with other's shape."},
    {"Tensor:transpose", "x:transpose(d1, d2) -> tensor\nA view with two dims swapped."},
    {"Tensor:t", "x:t() -> tensor\nThe transpose of a matrix (x itself for 0-d and 1-d)."},
    {"Tensor:permute", "x:permute(d...) -> tensor\nA view with the dims reordered."},
    {"Tensor:squeeze", "x:squeeze([dim]) -> tensor\nA view without size-1 dims (or without that "
                       "one dim if it has size 1)."},
    {"Tensor:unsqueeze",
     "x:unsqueeze(dim) -> tensor\nA view with a size-1 dim inserted at dim (1..ndim+1)."},
    {"Tensor:narrow",
     "x:narrow(dim, start, length) -> tensor\nA view of entries start..start+length-1 of dim."},
    {"Tensor:select",
     "x:select(dim, index) -> tensor\nA view of one index of dim, without that dim."},
    {"Tensor:expand", "x:expand(size... | {sizes}) -> tensor\nA broadcast view (size-1 dims "
                      "repeated without copying; -1 keeps a size)."},
    {"Tensor:expand_as", "x:expand_as(other) -> tensor\nx broadcast to other's shape."},
    {"Tensor:flatten",
     "x:flatten([start=1 [, end=-1]]) -> tensor\nMerges dims start..end into one."},
    /* elementwise */
    {"Tensor:add", "x:add(y) -> tensor\nx + y (tensor or number, broadcast)."},
    {"Tensor:sub", "x:sub(y) -> tensor\nx - y (tensor or number, broadcast)."},
    {"Tensor:mul", "x:mul(y) -> tensor\nx * y elementwise (tensor or number, broadcast)."},
    {"Tensor:div", "x:div(y) -> tensor\nx / y elementwise (tensor or number, broadcast)."},
    {"Tensor:pow", "x:pow(y) -> tensor\nx ^ y elementwise (y a tensor or number)."},
    {"Tensor:maximum", "x:maximum(y) -> tensor\nElementwise maximum of x and y."},
    {"Tensor:minimum", "x:minimum(y) -> tensor\nElementwise minimum of x and y."},
    {"Tensor:eq",
     "x:eq(y) -> uint8 mask\n1 where x == y (use eq: Lua's == on tensors is identity)."},
    {"Tensor:ne", "x:ne(y) -> uint8 mask\n1 where x ~= y."},
    {"Tensor:lt", "x:lt(y) -> uint8 mask\n1 where x < y."},
    {"Tensor:le", "x:le(y) -> uint8 mask\n1 where x <= y."},
    {"Tensor:gt", "x:gt(y) -> uint8 mask\n1 where x > y."},
    {"Tensor:ge", "x:ge(y) -> uint8 mask\n1 where x >= y."},
    {"Tensor:neg", "x:neg() -> tensor\n-x."},
    {"Tensor:abs", "x:abs() -> tensor\n|x| elementwise."},
    {"Tensor:exp", "x:exp() -> tensor\ne^x elementwise."},
    {"Tensor:log", "x:log() -> tensor\nNatural logarithm elementwise."},
    {"Tensor:sqrt", "x:sqrt() -> tensor\nSquare root elementwise."},
    {"Tensor:rsqrt", "x:rsqrt() -> tensor\n1 / sqrt(x) elementwise."},
    {"Tensor:tanh", "x:tanh() -> tensor\nHyperbolic tangent elementwise."},
    {"Tensor:sigmoid", "x:sigmoid() -> tensor\n1 / (1 + e^-x) elementwise."},
    {"Tensor:relu", "x:relu() -> tensor\nmax(x, 0) elementwise."},
    {"Tensor:sin", "x:sin() -> tensor\nSine elementwise."},
    {"Tensor:cos", "x:cos() -> tensor\nCosine elementwise."},
    {"Tensor:sign", "x:sign() -> tensor\n-1, 0 or 1 elementwise."},
    {"Tensor:floor", "x:floor() -> tensor\nRounds down elementwise."},
    {"Tensor:ceil", "x:ceil() -> tensor\nRounds up elementwise."},
    {"Tensor:round", "x:round() -> tensor\nRounds to the nearest integer elementwise."},
    {"Tensor:reciprocal", "x:reciprocal() -> tensor\n1 / x elementwise."},
    {"Tensor:square", "x:square() -> tensor\nx * x elementwise."},
    {"Tensor:gelu", "x:gelu() -> tensor\nThe GELU activation elementwise."},
    {"Tensor:log1p", "x:log1p() -> tensor\nlog(1 + x) elementwise, accurate near 0."},
    {"Tensor:expm1", "x:expm1() -> tensor\ne^x - 1 elementwise, accurate near 0."},
    {"Tensor:leaky_relu", "x:leaky_relu([slope=0.01]) -> tensor\nx where x > 0, else slope * x."},
    {"Tensor:elu", "x:elu([alpha=1]) -> tensor\nx where x > 0, else alpha * (e^x - 1)."},
    {"Tensor:clamp",
     "x:clamp(min, max) -> tensor\nx limited to [min, max]; either bound may be nil."},
    {"Tensor:add_", "x:add_(y) -> x\nx = x + y in place."},
    {"Tensor:sub_", "x:sub_(y) -> x\nx = x - y in place."},
    {"Tensor:mul_", "x:mul_(y) -> x\nx = x * y in place."},
    {"Tensor:div_", "x:div_(y) -> x\nx = x / y in place."},
    {"Tensor:pow_", "x:pow_(y) -> x\nx = x ^ y in place."},
    {"Tensor:neg_", "x:neg_() -> x\nNegates x in place."},
    {"Tensor:abs_", "x:abs_() -> x\n|x| in place."},
    {"Tensor:exp_", "x:exp_() -> x\ne^x in place."},
    {"Tensor:log_", "x:log_() -> x\nlog(x) in place."},
    {"Tensor:log1p_", "x:log1p_() -> x\nlog(1 + x) in place."},
    {"Tensor:expm1_", "x:expm1_() -> x\ne^x - 1 in place."},
    {"Tensor:sqrt_", "x:sqrt_() -> x\nsqrt(x) in place."},
    {"Tensor:tanh_", "x:tanh_() -> x\ntanh(x) in place."},
    {"Tensor:sigmoid_", "x:sigmoid_() -> x\nsigmoid(x) in place."},
    {"Tensor:relu_", "x:relu_() -> x\nmax(x, 0) in place."},
    {"Tensor:floor_", "x:floor_() -> x\nRounds down in place."},
    {"Tensor:ceil_", "x:ceil_() -> x\nRounds up in place."},
    {"Tensor:round_", "x:round_() -> x\nRounds in place."},
    {"Tensor:square_", "x:square_() -> x\nx * x in place."},
    {"Tensor:reciprocal_", "x:reciprocal_() -> x\n1 / x in place."},
    {"Tensor:clamp_",
     "x:clamp_(min, max) -> x\nLimits x to [min, max] in place; either bound may be nil."},
    {"Tensor:fill_", "x:fill_(value) -> x\nSets every element to value."},
    {"Tensor:zero_", "x:zero_() -> x\nSets every element to 0."},
    {"Tensor:copy_", "x:copy_(src) -> x\nCopies src into x (broadcast, dtype converted)."},
    {"Tensor:masked_fill_",
     "x:masked_fill_(mask, value) -> x\nSets x to value where mask is non-zero."},
    {"Tensor:masked_fill",
     "x:masked_fill(mask, value) -> tensor\nA copy of x set to value where mask is non-zero."},
    /* reductions and products */
    {"Tensor:sum", "x:sum([dim | {dims} [, keepdim=false]]) -> tensor\nThe sum over the given dims "
                   "(all when none)."},
    {"Tensor:mean", "x:mean([dim | {dims} [, keepdim=false]]) -> tensor\nThe mean over the given "
                    "dims (all when none)."},
    {"Tensor:prod", "x:prod([dim | {dims} [, keepdim=false]]) -> tensor\nThe product over the "
                    "given dims (all when none)."},
    {"Tensor:var", "x:var([dim | {dims} [, {correction=1, keepdim=false}]]) -> tensor\nThe "
                   "variance (correction 1: unbiased)."},
    {"Tensor:std", "x:std([dim | {dims} [, {correction=1, keepdim=false}]]) -> tensor\nThe "
                   "standard deviation (correction 1: unbiased)."},
    {"Tensor:norm", "x:norm([p=2 [, dim [, keepdim]]]) -> tensor\nThe p-norm over the given dims "
                    "(all when none)."},
    {"Tensor:max",
     "x:max([dim [, keepdim]]) -> values [, indices]\nThe maximum (a 0-d tensor), or per dim the "
     "values and their 1-based int64 indices; x:max(y) is the elementwise maximum."},
    {"Tensor:min",
     "x:min([dim [, keepdim]]) -> values [, indices]\nThe minimum (a 0-d tensor), or per dim the "
     "values and their 1-based int64 indices; x:min(y) is the elementwise minimum."},
    {"Tensor:argmax", "x:argmax([dim [, keepdim]]) -> int64 tensor\n1-based indices of the maxima "
                      "along dim (over the flattened tensor without dim)."},
    {"Tensor:argmin", "x:argmin([dim [, keepdim]]) -> int64 tensor\n1-based indices of the minima "
                      "along dim (over the flattened tensor without dim)."},
    {"Tensor:matmul",
     "x:matmul(y) -> tensor\nMatrix product: 1-D, 2-D or batched with broadcast batch dims."},
    {"Tensor:mm", "x:mm(y) -> tensor\nThe product of two matrices (2-D only)."},
    {"Tensor:bmm", "x:bmm(y) -> tensor\nBatched matrix product of two 3-D tensors."},
    {"Tensor:index_select",
     "x:index_select(dim, idx) -> tensor\nThe entries of dim at the 1-based int64 indices idx."},
    {"Tensor:gather", "x:gather(dim, idx) -> tensor\nout[i][j] = x[i][idx[i][j]] along dim "
                      "(1-based int64 idx of x's rank)."},
    /* autograd */
    {"Tensor:backward", "x:backward([grad] [, {retain_graph=false}]) -> nil\nBackpropagates from x "
                        "(grad may be omitted for one-element x) into .grad of the leaves."},
    {"Tensor:requires_grad_",
     "x:requires_grad_([on=true]) -> x\nMarks a leaf tensor as requiring a gradient."},
    {"Tensor:retain_grad", "x:retain_grad() -> x\nKeeps .grad of a non-leaf (an intermediate such "
                           "as a feature map) after backward."},
    {"Tensor:zero_grad", "x:zero_grad() -> x\nDrops x.grad (sets it to nil)."},
    {"Tensor:register_hook", "x:register_hook(fn) -> handle\nCalls fn(grad) when x's gradient is "
                             "computed; fn may return a replacement; handle:remove() unregisters."},
    /* functional */
    {"F.conv2d", "F.conv2d(x, w [, b] [, {stride=1, padding=0, dilation=1, groups=1}]) -> "
                 "tensor\n2-D convolution of N x C x H x W input; stride/padding/dilation a number "
                 "or {h, w}; padding also {top, bottom, left, right}, 'valid' or 'same' (stride 1: "
                 "output H x W, the odd pixel to the bottom/right)."},
    {"F.linear", "F.linear(x, w [, b]) -> tensor\nx * w^T + b for w of shape out x in."},
    {"F.max_pool2d", "F.max_pool2d(x, kernel [, stride] [, {stride=kernel, padding=0, dilation=1, "
                     "ceil_mode=false, return_indices=false}]) -> tensor [, indices]\n2-D max "
                     "pooling; dilation spaces the window's taps (a 3x3 window of dilation 2 spans "
                     "5x5); indices are 1-based positions within each H*W plane."},
    {"F.avg_pool2d", "F.avg_pool2d(x, kernel [, stride] [, {stride=kernel, padding=0, "
                     "ceil_mode=false, count_include_pad=true}]) -> tensor\n2-D average pooling."},
    {"F.adaptive_avg_pool2d",
     "F.adaptive_avg_pool2d(x, size | {h, w}) -> tensor\nAverage pooling to a fixed output size."},
    {"F.relu", "F.relu(x) -> tensor\nmax(x, 0)."},
    {"F.leaky_relu", "F.leaky_relu(x [, slope=0.01]) -> tensor\nx where x > 0, else slope * x."},
    {"F.elu", "F.elu(x [, alpha=1]) -> tensor\nx where x > 0, else alpha * (e^x - 1)."},
    {"F.gelu",
     "F.gelu(x [, {approximate='none'}]) -> tensor\nThe Gaussian error linear unit x * Phi(x); "
     "approximate = 'tanh' uses 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."},
    {"F.sigmoid", "F.sigmoid(x) -> tensor\n1 / (1 + e^-x)."},
    {"F.tanh", "F.tanh(x) -> tensor\nHyperbolic tangent."},
    {"F.softmax", "F.softmax(x [, dim=-1]) -> tensor\nexp(x) normalised to sum 1 along dim."},
    {"F.log_softmax", "F.log_softmax(x [, dim=-1]) -> tensor\nlog(softmax(x)) computed stably."},
    {"F.dropout",
     "F.dropout(x [, p=0.5 [, training=true]]) -> tensor\nZeroes elements with probability p and "
     "scales the rest by 1/(1-p) in training; x unchanged otherwise."},
    {"F.batch_norm",
     "F.batch_norm(x, running_mean, running_var [, weight [, bias]] [, {training=false, "
     "momentum=0.1, eps=1e-5}]) -> tensor\nBatch normalisation over dim 2 (channels): batch "
     "statistics in training (updating the running ones), running statistics otherwise."},
    {"F.flatten", "F.flatten(x [, start=2 [, end=-1]]) -> tensor\nMerges dims start..end (by "
                  "default all but the batch dim)."},
    {"F.pad", "F.pad(x, {left, right [, top, bottom ...]} [, mode='constant'] [, value=0]) -> "
              "tensor\nPadding of the last dims, PyTorch's order; a number as the third argument "
              "is the value. Modes: 'constant' (value), 'reflect' (mirror without the edge; pad < "
              "the dim), 'replicate' (the edge repeated), 'circular' (wrap around; pad <= the "
              "dim): these three pad the last 1 to 3 dims of an input with at least one more dim. "
              "Negative pads crop. Differentiable."},
    {"F.cat",
     "F.cat({a, b, ...} [, dim=1]) -> tensor\nConcatenates tensors along an existing dim."},
    {"F.stack",
     "F.stack({a, b, ...} [, dim=1]) -> tensor\nStacks same-shaped tensors along a new dim."},
    {"F.cross_entropy",
     "F.cross_entropy(logits, target [, {weight=, reduction='mean', label_smoothing=0, "
     "ignore_index=}]) -> tensor\nSoftmax cross-entropy of N x C logits against int64 class labels "
     "1..C, or against float class probabilities of the logits' shape (no ignore_index then; the "
     "mean divides by N)."},
    {"F.nll_loss",
     "F.nll_loss(logp, target [, {weight=, reduction='mean', ignore_index=}]) -> tensor\nNegative "
     "log-likelihood of log-probabilities against int64 class labels 1..C."},
    {"F.mse_loss", "F.mse_loss(x, y [, {reduction='mean'}]) -> tensor\nMean squared error."},
    {"F.binary_cross_entropy_with_logits",
     "F.binary_cross_entropy_with_logits(x, y [, {weight=, pos_weight=, reduction='mean'}]) -> "
     "tensor\nSigmoid + binary cross-entropy, computed stably; weight rescales each element's loss "
     "and pos_weight the positive term, both broadcast to x's shape (PyTorch's)."},
    /* more activations, regularisers and losses */
    {"F.hardtanh",
     "F.hardtanh(x [, min_val=-1 [, max_val=1]]) -> tensor\nx clamped to [min_val, max_val] (also "
     "{min_val=, max_val=}); the gradient is 0 at the limits, as PyTorch's."},
    {"F.relu6", "F.relu6(x) -> tensor\nmin(max(x, 0), 6) = F.hardtanh(x, 0, 6) (MobileNet); the "
                "gradient is 0 at 0 and at 6."},
    {"F.dropout2d", "F.dropout2d(x [, p=0.5 [, training=true]]) -> tensor\nZeroes whole channels "
                    "of N x C x H x W (or N x C x L) input with probability p and scales the rest "
                    "by 1/(1-p) in training; x unchanged otherwise."},
    {"F.silu", "F.silu(x) -> tensor\nx * sigmoid(x) (also called swish)."},
    {"F.hardswish", "F.hardswish(x) -> tensor\nx * relu6(x + 3) / 6 (MobileNetV3); the gradient is "
                    "x/3 + 1/2 on [-3, 3], 0 below, 1 above."},
    {"F.hardsigmoid", "F.hardsigmoid(x) -> tensor\nrelu6(x + 3) / 6; the gradient is 1/6 strictly "
                      "inside (-3, 3), else 0."},
    {"F.mish", "F.mish(x) -> tensor\nx * tanh(softplus(x))."},
    {"F.l1_loss", "F.l1_loss(x, y [, {reduction='mean'}]) -> tensor\nMean absolute error |x - y| "
                  "(x and y broadcast)."},
    {"F.smooth_l1_loss",
     "F.smooth_l1_loss(x, y [, {reduction='mean', beta=1}]) -> tensor\n0.5 d^2 / beta where |d| < "
     "beta, else |d| - 0.5 beta (d = x - y); beta = 0 is the L1 loss."},
    {"F.huber_loss", "F.huber_loss(x, y [, {reduction='mean', delta=1}]) -> tensor\n0.5 d^2 where "
                     "|d| < delta, else delta (|d| - 0.5 delta) (d = x - y)."},
    {"F.kl_div",
     "F.kl_div(logp, target [, {reduction='mean', log_target=false}]) -> tensor\nKL divergence "
     "target * (log target - logp) of log-probabilities logp (PyTorch's argument order); reduction "
     "'batchmean' divides the sum by the batch size (the true KL), 'mean' by the element count."},
    {"F.binary_cross_entropy",
     "F.binary_cross_entropy(p, y [, {weight=, reduction='mean'}]) -> tensor\n-(y log p + (1 - y) "
     "log(1 - p)) of probabilities p in [0, 1] (logs clamped to >= -100, as PyTorch); prefer "
     "F.binary_cross_entropy_with_logits on logits."},
    {"F.softplus", "F.softplus(x [, beta=1 [, threshold=20]]) -> tensor\nlog(1 + exp(beta x)) / "
                   "beta, and x itself where beta x > threshold (also {beta=, threshold=})."},
    /* 1-d convolution and pooling, padding strings */
    {"F.conv1d", "F.conv1d(x, w [, b] [, {stride=1, padding=0, dilation=1, groups=1}]) -> "
                 "tensor\n1-D convolution of N x C x L input with w of out x C/groups x k (conv2d "
                 "over a unit height); padding a number, 'valid' or 'same' (stride 1: L' = L, the "
                 "odd element to the right). F.conv2d takes 'same'/'valid' too."},
    {"F.max_pool1d",
     "F.max_pool1d(x, kernel [, stride] [, {stride=kernel, padding=0, dilation=1, ceil_mode=false, "
     "return_indices=false}]) -> tensor [, indices]\n1-D max pooling of N x C x L (or C x L) "
     "input; indices are 1-based positions along L."},
    {"F.avg_pool1d",
     "F.avg_pool1d(x, kernel [, stride] [, {stride=kernel, padding=0, ceil_mode=false, "
     "count_include_pad=true}]) -> tensor\n1-D average pooling of N x C x L (or C x L) input."},
    {"F.adaptive_avg_pool1d", "F.adaptive_avg_pool1d(x, size) -> tensor\nAverage pooling of N x C "
                              "x L (or C x L) input to length size."},
    /* transposed convolution */
    {"F.conv_transpose2d",
     "F.conv_transpose2d(x, w [, b] [, {stride=1, padding=0, output_padding=0, dilation=1, "
     "groups=1}]) -> tensor\nTransposed 2-D convolution (PyTorch's): w is in x out/groups x kH x "
     "kW; H' = (H-1)*stride - 2*padding + dilation*(kH-1) + output_padding + 1; output_padding "
     "must be smaller than stride or dilation; options a number or {h, w}. Equals the "
     "input-gradient of F.conv2d with the same w."},
    /* quantized inference (cnn.quantize) */
    {"F.conv2d_int8", "F.conv2d_int8(x, wq, w_scale, b_or_nil, x_scale [, {stride=1, padding=0, "
                      "dilation=1, groups=1, relu=false}]) -> tensor\n"
                      "int8 convolution (inference, oneDNN): x quantized as clamp(round(x / "
                      "x_scale), -128, 127); wq whole numbers in [-127, 127] "
                      "with one w_scale per output channel; y = sum(qx * wq) * x_scale * "
                      "w_scale[k] + b[k], float32 (then ReLU). cnn.quantize uses it."},
    /* fused activation (net:fuse()) */
    {"F.conv2d_act",
     "F.conv2d_act(x, w, b_or_nil, activation [, {stride=1, padding=0, dilation=1, groups=1}]) "
     "-> tensor\nactivation(F.conv2d(x, w, b)), one layer for net:fuse(): activation is a name "
     "('relu', 'leaky_relu', 'elu', 'hardtanh', 'relu6', 'sigmoid', 'tanh', 'gelu', 'gelu_tanh', "
     "'silu', 'hardswish', 'hardsigmoid', 'mish', 'softplus') or {name, parameters...} as F.<name> "
     "takes them ({'leaky_relu', 0.2}). Without autograd, float32 on the CPU runs the activation "
     "inside oneDNN's convolution (an eltwise post-op); otherwise the convolution then the "
     "activation, differentiable."},
    /* tensor ops */
    {"Tensor:sort",
     "x:sort([dim=-1 [, descending=false]]) or x:sort([dim,] {descending=, stable=}) -> values, "
     "indices\nSorted along dim, with the 1-based positions; NaN sorts as the largest value; equal "
     "values keep their order (every sort is stable)."},
    {"Tensor:topk", "x:topk(k [, dim=-1 [, largest=true [, sorted=true]]]) or x:topk(k, [dim,] "
                    "{largest=, sorted=}) -> values, indices\nThe k largest (smallest) entries "
                    "along dim, sorted, with 1-based positions; 0 <= k <= size."},
    {"Tensor:cumsum",
     "x:cumsum(dim) -> tensor\nRunning sum along dim (integer input gives int64)."},
    {"Tensor:cumprod", "x:cumprod(dim) -> tensor\nRunning product along dim (integer input gives "
                       "int64); its gradient is exact with zeros in x."},
    {"Tensor:any", "x:any([dim | {dims} [, keepdim]]) -> uint8 tensor\n1 where some entry is "
                   "non-zero (NaN counts), else 0; over no entries 0."},
    {"Tensor:all", "x:all([dim | {dims} [, keepdim]]) -> uint8 tensor\n1 where every entry is "
                   "non-zero, else 0; over no entries 1."},
    {"Tensor:scatter",
     "x:scatter(dim, idx, src | value) -> tensor\nA copy of x with out[...idx[i][j]...] = "
     "src[i][j] along dim; idx int64 1-based of x's rank, src of x's dtype."},
    {"Tensor:scatter_", "x:scatter_(dim, idx, src | value) -> x\nscatter in place (not on tensors "
                        "that take part in autograd)."},
    {"Tensor:scatter_add", "x:scatter_add(dim, idx, src) -> tensor\nA copy of x with src added at "
                           "the 1-based idx along dim (repeated indices add up)."},
    {"Tensor:scatter_add_", "x:scatter_add_(dim, idx, src) -> x\nscatter_add in place."},
    {"Tensor:repeat", "x['repeat'](x, n...) or x:repeat_tensor(n... | {n}) -> tensor\nx tiled n "
                      "times along each dim (at least x's rank of counts; extra ones add leading "
                      "dims). repeat is a Lua keyword, hence the other spellings."},
    {"Tensor:tile", "x:tile(n... | {n}) -> tensor\nAs repeat, with fewer counts than dims meaning "
                    "leading 1s (PyTorch's tile)."},
    {"Tensor:flip", "x:flip(dim... | {dims}) -> tensor\nA copy with the order of entries reversed "
                    "along the dims."},
    {"Tensor:roll", "x:roll(shifts [, dims]) -> tensor\nEntries shifted cyclically by shifts along "
                    "dims (numbers or tables); without dims the flattened tensor is rolled."},
    {"Tensor:chunk", "x:chunk(n [, dim=1]) -> {tensors}\nn views of ceil(size/n) along dim, the "
                     "last smaller (maybe fewer than n)."},
    {"Tensor:split", "x:split(size | {sizes} [, dim=1]) -> {tensors}\nViews of `size` entries "
                     "along dim (the last smaller), or of the given sizes (adding up to the dim)."},
    {"Tensor:unbind",
     "x:unbind([dim=1]) -> {tensors}\nThe slices of x along dim (that dim removed), as views."},
    {"Tensor:tolist", "x:tolist() or x:totable() -> table\nThe values as nested Lua tables (a "
                      "number for a 0-d tensor); tolist is PyTorch's name."},
    {"F.one_hot", "F.one_hot(labels [, num_classes]) -> int64 tensor\nlabels.shape x num_classes "
                  "of 0/1, 1 at each 1-based label (num_classes defaults to the largest label)."},
    /* normalisation and resizing */
    {"F.layer_norm",
     "F.layer_norm(x, normalized_shape [, weight [, bias]] [, {eps=1e-5}]) -> tensor\nNormalises "
     "over the last dims (normalized_shape a size or {sizes}) of each sample by their mean and "
     "biased variance, then * weight + bias (of normalized_shape)."},
    {"F.group_norm", "F.group_norm(x, num_groups [, weight [, bias]] [, {eps=1e-5}]) -> "
                     "tensor\nNormalises each group of C/num_groups channels of each sample of N x "
                     "C x ... input; weight and bias have C values."},
    {"F.instance_norm",
     "F.instance_norm(x [, running_mean, running_var [, weight [, bias]]] [, "
     "{use_input_stats=true, momentum=0.1, eps=1e-5}]) -> tensor\nNormalises each channel of each "
     "sample over its positions; updates the running statistics when given (unbiased variance, "
     "averaged over the batch); use_input_stats=false normalises with them instead."},
    {"F.interpolate", "F.interpolate(x, {size= | scale_factor=, mode='nearest', align_corners=, "
                      "recompute_scale_factor=}) -> tensor\nResizes N x C x H x W input ('nearest' "
                      "or 'bilinear', PyTorch's coordinates); size/scale_factor a number or {h, "
                      "w}; output floor(H * scale_factor)."},
    {"F.pixel_shuffle", "F.pixel_shuffle(x, r) -> tensor\n(*, C*r*r, H, W) -> (*, C, H*r, W*r), "
                        "sub-pixel rearrangement."},
    {"F.pixel_unshuffle", "F.pixel_unshuffle(x, r) -> tensor\n(*, C, H*r, W*r) -> (*, C*r*r, H, "
                          "W), the inverse of pixel_shuffle."},
    {"F.adaptive_max_pool2d",
     "F.adaptive_max_pool2d(x, size | {h, w} [, {return_indices=false}]) -> tensor [, "
     "indices]\nMax pooling to a fixed output size over PyTorch's bins; indices are 1-based "
     "positions within each H*W plane."},
    {NULL, NULL}};

static const char *const module_docs[][2] = {
    {"cnn", "cnn\nThe tensor library: creation (cnn.zeros, cnn.tensor, ...), every tensor method "
            "as cnn.<name>(x, ...), autograd, memory, rng."},
    {"io", "cnn.io\nFile formats: IDX and CIFAR-10 datasets, PNG, safetensors (cnn.save/cnn.load), "
           "the data loader's Batcher."},
    {"F", "F\nFunctional network ops and losses (conv2d, max_pool2d, cross_entropy, ...); options "
          "go in a trailing table with PyTorch's names, and an unknown key is an error listing the "
          "known ones."},
    {"Tensor", "cnn.Tensor\nThe tensor type: methods (x:add(y), x:sum(1), ...), fields (shape, "
               "dtype, device, requires_grad, grad, grad_fn, is_leaf, ndim), operators + - * / ^ "
               "and indexing x[i], x[{i, {a, b}}]."},
};

/* Push the function named by e->name (or nil); m = cnn module index. */
static void resolve(lua_State *L, int m, const char *name) {
  const char *sep = strpbrk(name, ".:");
  size_t n = (size_t)(sep - name);
  if (n == 3 && strncmp(name, "cnn", 3) == 0)
    lua_pushvalue(L, m);
  else if (n == 1 && name[0] == 'F')
    lua_getfield(L, m, "F");
  else if (n == 2 && strncmp(name, "io", 2) == 0)
    lua_getfield(L, m, "io");
  else
    lua_getfield(L, m, "Tensor");
  lua_getfield(L, -1, sep + 1);
  lua_remove(L, -2);
}

void cnn_lua_docs_register(lua_State *L, int m) {
  lua_newtable(L); /* doc */
  lua_newtable(L);
  lua_pushstring(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  for (const doc_entry *e = docs; e->name; e++) {
    resolve(L, m, e->name);
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      continue;
    }
    lua_pushstring(L, e->doc);
    lua_rawset(L, -3);
  }
  for (size_t i = 0; i < sizeof module_docs / sizeof module_docs[0]; i++) {
    const char *k = module_docs[i][0];
    if (strcmp(k, "cnn") == 0)
      lua_pushvalue(L, m);
    else
      lua_getfield(L, m, k);
    lua_pushstring(L, module_docs[i][1]);
    lua_rawset(L, -3);
  }
  lua_setfield(L, m, "doc");
}
