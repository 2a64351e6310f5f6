/*
 * autocast.h -- core-internal: how the ops that autocast applies to
 * (conv2d, the matrix products) hand themselves to core/autocast.c.
 *
 * An op calls cnn_autocast_target() on its operands first; when that says
 * a dtype other than float32, the op returns cnn_autocast_call(), which
 * runs the op again with autocast off, either on cast operands (recorded
 * casts; the result cast back to float32) or on the float32 operands with
 * the backend's bfloat16 arithmetic (the CPU).  See cnn.h for the rule.
 */
#ifndef CNN_AUTOCAST_H
#define CNN_AUTOCAST_H

#include "cnn.h"

/* The op run on in[] with `math`: CNN_FLOAT32 when in[] were cast (run
 * in their dtype), CNN_BFLOAT16 when in[] are the float32 operands and the
 * op passes bfloat16 arithmetic to its backend entries (autocast.c). */
typedef cnn_tensor *(*cnn_autocast_op)(cnn_tensor **in, cnn_dtype math, const void *ctx);

/* The dtype to run an op over in[0..n) (NULL entries skipped) in:
 * CNN_FLOAT32 when autocast does not apply (off, a non-float32 operand,
 * operands on different devices, float16 on the CPU). */
cnn_dtype cnn_autocast_target(cnn_tensor *const *in, int n);

/* op run with autocast off, its result returned as float32: on the float32
 * operands with math = `run` where `math_ok` (the op honours math) and the
 * backend has that arithmetic (bf16_math), else on in[] cast for `run`
 * with math CNN_FLOAT32.  in[0] must not be NULL. */
cnn_tensor *cnn_autocast_call(cnn_dtype run, int n, cnn_tensor **in, cnn_autocast_op op,
                              bool math_ok, const void *ctx);

/* Whether an op that honours math runs over float32 operands led by
 * `first` with math = `run` (the backend's bf16_math), not on cast
 * operands: what cnn_autocast_call would do, for an op (linear) that
 * records its own node either way. */
bool cnn_autocast_backend_math(cnn_dtype run, cnn_tensor *first);

#endif
