/*
 * autocast.h -- core-internal: how the ops that autocast applies to
 * (conv2d, the matrix products) hand themselves to core/autocast.c.
 *
 * An op calls cnn_autocast_target() on its operands first; when that says
 * a dtype other than float32, the op returns cnn_autocast_call(), which
 * casts the operands (recorded casts), runs the op again with autocast off
 * and casts its result back to float32.  See cnn.h for the rule.
 */
#ifndef CNN_AUTOCAST_H
#define CNN_AUTOCAST_H

#include "cnn.h"

typedef cnn_tensor *(*cnn_autocast_op)(cnn_tensor **in, const void *ctx);

/* The dtype to run an op over in[0..n) (NULL entries skipped) in:
 * CNN_FLOAT32 when autocast does not apply (off, a non-float32 operand,
 * operands on different devices, float16 on the CPU). */
cnn_dtype cnn_autocast_target(cnn_tensor *const *in, int n);

/* op(in cast for `run`, ctx) run with autocast off, returned as float32. */
cnn_tensor *cnn_autocast_call(cnn_dtype run, int n, cnn_tensor **in, cnn_autocast_op op,
                              const void *ctx);

#endif
