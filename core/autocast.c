/*
 * autocast.c -- mixed precision: the autocast mode and the casts around
 * the ops it applies to (the rule is documented in cnn.h).
 *
 * Design.  The mode is per thread, like grad mode.  An eligible op (all
 * operands float32 on one device) runs in the autocast dtype in one of two
 * ways, chosen by its backend's table:
 *  - a backend with bfloat16 arithmetic over float32 arrays (`bf16_math`:
 *    the CPU) runs bfloat16 ops that take it (conv2d, the matrix products)
 *    on the float32 operands as they are, with math = CNN_BFLOAT16: the op
 *    hands it to its entries (cnn_conv_shape.math, gemm_bf16), which
 *    round the operands to bfloat16, accumulate in float32 and write
 *    float32 -- with oneDNN's bfloat16 kernels where the CPU has
 *    AVX512-BF16, emulated elsewhere (core/cpu/bf16_math.c).  Nothing is
 *    cast or copied; the op's own node saves the float32 operands and its
 *    backward runs in the same arithmetic (dy rounded too), so gradients
 *    reach float32 leaves as float32;
 *  - otherwise the operands are cast, by ordinary recorded ops
 *    (ToCopyBackward), and the op runs on them: on a CUDA device as
 *    float16/bfloat16 tensors (cuDNN / cuBLAS with float32 accumulation);
 *    on the CPU (an op without the math argument: conv_transpose2d) each
 *    operand is rounded to bfloat16 and widened back to float32 -- every
 *    product of two bfloat16 values is exact in float32, so this is the
 *    arithmetic of a bfloat16 kernel with float32 accumulation.  The
 *    backward runs the op's own backward in the low precision and the
 *    casts' backward brings the gradients back to float32.
 */
#include "autocast.h"

#include "backend.h"

static _Thread_local cnn_dtype autocast_mode = CNN_FLOAT32;

cnn_dtype cnn_autocast_dtype(void) { return autocast_mode; }

int cnn_set_autocast(cnn_dtype dt, cnn_dtype *previous) {
  if (dt != CNN_FLOAT32 && dt != CNN_FLOAT16 && dt != CNN_BFLOAT16) {
    cnn_set_error("autocast: dtype %s is not supported (use float16 or bfloat16)",
                  dt < CNN_NDTYPES ? cnn_dtype_name(dt) : "?");
    return -1;
  }
  if (dt == CNN_FLOAT16) {
    const char *why = cnn_cuda_unavailable_reason();
    if (why) {
      cnn_set_error("autocast: float16 needs a CUDA device (%s); on the CPU use bfloat16", why);
      return -1;
    }
  }
  if (previous) *previous = autocast_mode;
  autocast_mode = dt;
  return 0;
}

cnn_dtype cnn_autocast_target(cnn_tensor *const *in, int n) {
  if (autocast_mode == CNN_FLOAT32) return CNN_FLOAT32;
  const cnn_tensor *first = NULL;
  for (int i = 0; i < n; i++) {
    if (!in[i]) continue;
    if (in[i]->dtype != CNN_FLOAT32) return CNN_FLOAT32;
    if (!first)
      first = in[i];
    else if (!cnn_device_equal(cnn_tensor_device(first), cnn_tensor_device(in[i])))
      return CNN_FLOAT32; /* the op reports the mix */
  }
  if (!first) return CNN_FLOAT32;
  if (cnn_on_cuda(first)) return autocast_mode;
  return autocast_mode == CNN_BFLOAT16 ? CNN_BFLOAT16 : CNN_FLOAT32;
}

/* 1: the op takes the backend's bfloat16 arithmetic over its float32
 * operands (see the top). */
static int backend_math(cnn_dtype run, cnn_tensor *first, bool math_ok) {
  if (!math_ok || run != CNN_BFLOAT16 || !first) return 0;
  const cnn_backend *be = cnn_backend_of(first, "autocast");
  return be && !be->half && be->bf16_math;
}

bool cnn_autocast_backend_math(cnn_dtype run, cnn_tensor *first) {
  return backend_math(run, first, true) != 0;
}

const char *cnn_autocast_cpu_path(const char **detail) {
  return cnn_cpu_backend.bf16_math(detail);
}

/* t as the op should see it: `run` on a GPU, rounded float32 on the CPU */
static cnn_tensor *cast_operand(cnn_tensor *t, cnn_dtype run) {
  if (!t) return NULL;
  if (cnn_on_cuda(t)) return cnn_to_dtype(t, run);
  cnn_tensor *low = cnn_to_dtype(t, run);
  cnn_tensor *wide = low ? cnn_to_dtype(low, CNN_FLOAT32) : NULL;
  cnn_tensor_release(low);
  return wide;
}

/* op(in, math, ctx) with autocast off (the op must not cast again) */
static cnn_tensor *run_off(cnn_autocast_op op, cnn_tensor **in, cnn_dtype math, const void *ctx) {
  cnn_dtype saved = autocast_mode;
  autocast_mode = CNN_FLOAT32;
  cnn_tensor *y = op(in, math, ctx);
  autocast_mode = saved;
  return y;
}

cnn_tensor *cnn_autocast_call(cnn_dtype run, int n, cnn_tensor **in, cnn_autocast_op op,
                              bool math_ok, const void *ctx) {
  enum { MAX_OPERANDS = 4 };
  cnn_tensor *cast[MAX_OPERANDS] = {0};
  cnn_tensor *y = NULL, *out = NULL;
  if (n > MAX_OPERANDS) return cnn_set_error("autocast: %d operands (at most 4)", n), NULL;
  if (backend_math(run, in[0], math_ok)) return run_off(op, in, run, ctx);
  int ok = 1;
  for (int i = 0; ok && i < n; i++)
    if (in[i] && !(cast[i] = cast_operand(in[i], run))) ok = 0;
  if (ok) y = run_off(op, cast, CNN_FLOAT32, ctx);
  if (y) out = y->dtype == CNN_FLOAT32 ? (cnn_tensor_retain(y), y) : cnn_to_dtype(y, CNN_FLOAT32);
  cnn_tensor_release(y);
  for (int i = 0; i < n; i++) cnn_tensor_release(cast[i]);
  return out;
}
