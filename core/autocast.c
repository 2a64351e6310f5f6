/*
 * autocast.c -- mixed precision: the autocast mode and the casts around
 * the ops it applies to (the rule is documented in cnn.h).
 *
 * Design.  The mode is per thread, like grad mode.  An eligible op (all
 * operands float32 on one device) is run on cast operands:
 *  - on a CUDA device the operands become float16/bfloat16 tensors and the
 *    op runs in that dtype (cuDNN / cuBLAS with float32 accumulation);
 *  - on the CPU (bfloat16 only) each operand is rounded to bfloat16 and
 *    widened back to float32, and the op runs in float32: every product of
 *    two bfloat16 values is exact in float32, so this is the arithmetic of
 *    a bfloat16 kernel with float32 accumulation and output -- without its
 *    speed.  It lets a model be checked in bfloat16 before it moves to a GPU.
 * The casts are ordinary recorded ops (ToCopyBackward), so the backward
 * pass runs the op's own backward in the low precision and the gradients
 * reach float32 leaves (the master weights) as float32.
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

/* t as the op should see it: `run` on a GPU, rounded float32 on the CPU */
static cnn_tensor *cast_operand(cnn_tensor *t, cnn_dtype run) {
  if (!t) return NULL;
  if (cnn_on_cuda(t)) return cnn_to_dtype(t, run);
  cnn_tensor *low = cnn_to_dtype(t, run);
  cnn_tensor *wide = low ? cnn_to_dtype(low, CNN_FLOAT32) : NULL;
  cnn_tensor_release(low);
  return wide;
}

cnn_tensor *cnn_autocast_call(cnn_dtype run, int n, cnn_tensor **in, cnn_autocast_op op,
                              const void *ctx) {
  enum { MAX_OPERANDS = 4 };
  cnn_tensor *cast[MAX_OPERANDS] = {0};
  cnn_tensor *y = NULL, *out = NULL;
  if (n > MAX_OPERANDS) return cnn_set_error("autocast: %d operands (at most 4)", n), NULL;
  int ok = 1;
  for (int i = 0; ok && i < n; i++)
    if (in[i] && !(cast[i] = cast_operand(in[i], run))) ok = 0;
  if (ok) {
    cnn_dtype saved = autocast_mode;
    autocast_mode = CNN_FLOAT32;
    y = op(cast, ctx);
    autocast_mode = saved;
  }
  if (y) out = y->dtype == CNN_FLOAT32 ? (cnn_tensor_retain(y), y) : cnn_to_dtype(y, CNN_FLOAT32);
  cnn_tensor_release(y);
  for (int i = 0; i < n; i++) cnn_tensor_release(cast[i]);
  return out;
}
