/*
 * conv.c -- entry points of the CPU convolution: dispatch to a path.
 *
 * Three paths compute the same thing (conv_naive.c, conv_im2col.c,
 * conv_onednn.c).  This file asserts the shape's invariants (the op
 * validated it), handles degenerate (zero-sized) problems with the naive
 * loops, and picks a path:
 *
 *   NAIVE  -> the direct loops (the oracle)
 *   IM2COL -> im2col + OpenBLAS GEMM
 *   ONEDNN / AUTO -> oneDNN for float32; float64, or a shape for which
 *            oneDNN creates no primitive, goes to im2col.
 *
 * bfloat16 arithmetic (s->math, autocast; bf16_math.c): oneDNN's bfloat16
 * primitives where the CPU has them and the algorithm is ONEDNN or AUTO;
 * otherwise the operands are rounded into float32 copies and the float32
 * path above runs on them (emulated).
 *
 * A channels-last shape (s->channels_last: x, y, dy, dx in NHWC) runs
 * oneDNN's nhwc kernels, or any other path on NCHW copies (below).
 *
 * cnn_cpu_conv2d_backward() computes dx and dw/db in one call, so that
 * oneDNN reorders dy to its blocked layout once for both passes.
 * cnn_cpu_conv2d_act_forward() adds an activation: inside oneDNN's
 * primitive (an eltwise post-op, conv_post_ops.c) where it applies, else
 * applied after the convolution by the unary loops.
 *
 * Invariant: every path receives a shape for which
 * cnn_cpu_conv2d_shape_valid() holds, with N, C, K, H, W, OH, OW all > 0.
 * The errors left to the paths are out of memory, a oneDNN failure and an
 * interrupt; they read "conv2d: ..." (nn_conv_transpose.c renames them).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/backend_cpu.h" /* cnn_cpu_unary */
#include "cpu/kernels.h"

bool cnn_cpu_float_sizes_valid(cnn_dtype dt, int64_t a, int64_t b, int64_t c) {
  return (dt == CNN_FLOAT32 || dt == CNN_FLOAT64) && a >= 0 && b >= 0 && c >= 0;
}

int64_t cnn_conv_out_size(int64_t in, int p0, int p1, int k, int s, int d) {
  int64_t span = in + p0 + p1 - (int64_t)d * (k - 1) - 1;
  if (s <= 0) return -1;
  if (span < 0) return 0; /* kernel larger than the padded input */
  return span / s + 1;
}

const char *cnn_conv_shape_str(const cnn_conv_shape *s, char buf[256]) {
  int64_t wshape[4] = {s->K, s->groups > 0 ? s->C / s->groups : s->C, s->R, s->S};
  int64_t xshape[4] = {s->N, s->C, s->H, s->W}, yshape[4] = {s->N, s->K, s->OH, s->OW};
  char xs[CNN_SHAPE_STR], ws[CNN_SHAPE_STR], ys[CNN_SHAPE_STR];
  snprintf(buf, 256,
           "input %s, weight %s, output %s, stride %dx%d, pad %d,%d,%d,%d, "
           "dilation %dx%d, groups %d",
           cnn_shape_str(4, xshape, xs), cnn_shape_str(4, wshape, ws), cnn_shape_str(4, yshape, ys),
           s->sh, s->sw, s->pt, s->pb, s->pl, s->pr, s->dh, s->dw, s->groups);
  return buf;
}

/* The invariants of a shape that every path relies on.  The op validates
 * (core/ops/nn_conv.c, nn_conv_transpose.c: messages naming the op and the
 * tensors' shapes), so a shape breaking them here is a bug in core, and
 * this runs only inside assert() (SQLite's pattern). */
bool cnn_cpu_conv2d_shape_valid(cnn_dtype dt, const cnn_conv_shape *s) {
  if (dt != CNN_FLOAT32 && dt != CNN_FLOAT64) return false;
  if (s->math != CNN_FLOAT32 && !(s->math == CNN_BFLOAT16 && dt == CNN_FLOAT32)) return false;
  if (s->sh < 1 || s->sw < 1 || s->dh < 1 || s->dw < 1 || s->pt < 0 || s->pb < 0 || s->pl < 0 ||
      s->pr < 0)
    return false;
  if (s->N < 0 || s->C < 0 || s->H < 0 || s->W < 0 || s->K < 0 || s->R < 1 || s->S < 1)
    return false;
  if (s->groups < 1 || s->C % s->groups || s->K % s->groups) return false;
  return s->OH == cnn_conv_out_size(s->H, s->pt, s->pb, (int)s->R, s->sh, s->dh) &&
         s->OW == cnn_conv_out_size(s->W, s->pl, s->pr, (int)s->S, s->sw, s->dw);
}

/* Zero-sized problems (an empty batch, no output pixels) take the naive
 * loops, which simply write zeros where there is something to write. */
static int degenerate(const cnn_conv_shape *s) {
  return s->N == 0 || s->C == 0 || s->K == 0 || s->H == 0 || s->W == 0 || s->OH == 0 || s->OW == 0;
}

/* 1: try oneDNN first (float32, not NAIVE/IM2COL). */
static int wants_onednn(cnn_conv_algo algo, cnn_dtype dt) {
  return dt == CNN_FLOAT32 && (algo == CNN_CONV_AUTO || algo == CNN_CONV_ONEDNN);
}

/* s for oneDNN's float32 entry points: under 'auto' its Winograd kernels
 * may take the shapes they are faster on (conv_winograd.c); 'onednn'
 * keeps the direct kernels. */
static cnn_conv_shape for_onednn(cnn_conv_algo algo, const cnn_conv_shape *s) {
  cnn_conv_shape o = *s;
  o.allow_winograd = algo == CNN_CONV_AUTO;
  return o;
}

/* 1: the strided 1x1 kernels take this call (conv_1x1_strided.c). */
static int strided_1x1(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s) {
  return algo == CNN_CONV_AUTO && cnn_cpu_conv2d_1x1_strided_takes(dt, s);
}

/* ---- bfloat16 arithmetic -------------------------------------------------------- */

/* 1: oneDNN's bfloat16 primitives take this call (the CPU has them). */
static int bf16_onednn(cnn_conv_algo algo, const cnn_conv_shape *s) {
  return cnn_cpu_bf16_native() && !degenerate(s) &&
         (algo == CNN_CONV_AUTO || algo == CNN_CONV_ONEDNN);
}

static int64_t x_numel(const cnn_conv_shape *s) { return s->N * s->C * s->H * s->W; }
static int64_t w_numel(const cnn_conv_shape *s) { return s->K * (s->C / s->groups) * s->R * s->S; }
static int64_t y_numel(const cnn_conv_shape *s) { return s->N * s->K * s->OH * s->OW; }

/* The emulation: in[i] (n[i] floats; NULL skipped) replaced by a copy
 * rounded to bfloat16, kept in own[i] for the caller to free; *f = s with
 * float32 arithmetic, for the float32 path. */
static int round_operands(int count, const void **in, const int64_t *n, float **own,
                          const cnn_conv_shape *s, cnn_conv_shape *f) {
  *f = *s;
  f->math = CNN_FLOAT32;
  for (int i = 0; i < count; i++) {
    if (!in[i]) continue;
    if (!(own[i] = cnn_cpu_bf16_rounded_copy("conv2d", in[i], n[i]))) return -1;
    in[i] = own[i];
  }
  return 0;
}

static void free_operands(int count, float **own) {
  for (int i = 0; i < count; i++) free(own[i]);
}

static int forward_bf16(cnn_conv_algo algo, const cnn_conv_shape *s, const void *x, const void *w,
                        const void *b, void *y) {
  if (bf16_onednn(algo, s)) {
    int r = cnn_cpu_conv2d_onednn_forward(s, x, w, b, y);
    if (r != -2) return r; /* -2: no oneDNN primitive for this shape */
  }
  const void *in[2] = {x, w};
  float *own[2] = {0};
  cnn_conv_shape f;
  int rc = round_operands(2, in, (int64_t[]){x_numel(s), w_numel(s)}, own, s, &f);
  if (rc == 0) rc = cnn_cpu_conv2d_forward(algo, CNN_FLOAT32, &f, in[0], in[1], b, y);
  free_operands(2, own);
  return rc;
}

static int backward_data_bf16(cnn_conv_algo algo, const cnn_conv_shape *s, const void *dy,
                              const void *w, void *dx) {
  if (bf16_onednn(algo, s)) {
    int r = cnn_cpu_conv2d_onednn_backward_data(s, dy, w, dx);
    if (r != -2) return r;
  }
  const void *in[2] = {dy, w};
  float *own[2] = {0};
  cnn_conv_shape f;
  int rc = round_operands(2, in, (int64_t[]){y_numel(s), w_numel(s)}, own, s, &f);
  if (rc == 0) rc = cnn_cpu_conv2d_backward_data(algo, CNN_FLOAT32, &f, in[0], in[1], dx);
  free_operands(2, own);
  return rc;
}

static int backward_weight_bf16(cnn_conv_algo algo, const cnn_conv_shape *s, const void *dy,
                                const void *x, void *dw, void *db) {
  if (bf16_onednn(algo, s)) {
    int r = cnn_cpu_conv2d_onednn_backward_weight(s, dy, x, dw, db);
    if (r != -2) return r;
  }
  const void *in[2] = {dy, x};
  float *own[2] = {0};
  cnn_conv_shape f;
  int rc = round_operands(2, in, (int64_t[]){y_numel(s), x_numel(s)}, own, s, &f);
  if (rc == 0) rc = cnn_cpu_conv2d_backward_weight(algo, CNN_FLOAT32, &f, in[0], in[1], dw, db);
  free_operands(2, own);
  return rc;
}

/* Both passes (one wanted: that pass's own path); emulated, each operand
 * is rounded once. */
static int backward_bf16(cnn_conv_algo algo, const cnn_conv_shape *s, const void *dy, const void *x,
                         const void *w, void *dx, void *dw, void *db) {
  if (!dx) return dw ? backward_weight_bf16(algo, s, dy, x, dw, db) : 0;
  if (!dw) return backward_data_bf16(algo, s, dy, w, dx);
  if (bf16_onednn(algo, s)) {
    int r = cnn_cpu_conv2d_onednn_backward(s, dy, x, w, dx, dw, db);
    if (r != -2) return r;
  }
  const void *in[3] = {dy, x, w};
  float *own[3] = {0};
  cnn_conv_shape f;
  int rc = round_operands(3, in, (int64_t[]){y_numel(s), x_numel(s), w_numel(s)}, own, s, &f);
  if (rc == 0) rc = cnn_cpu_conv2d_backward(algo, CNN_FLOAT32, &f, in[0], in[1], in[2], dx, dw, db);
  free_operands(3, own);
  return rc;
}

/* ---- channels-last ----------------------------------------------------------------
 * A channels-last call (x, y, dy, dx N x H x W x C) runs oneDNN's nhwc
 * kernels where oneDNN takes it (float32, 'auto' or 'onednn'); anything
 * else -- the naive loops, im2col, float64, a shape oneDNN refuses --
 * takes NCHW arrays, so its operands are transposed into NCHW copies and
 * its output back.  Values are the same either way: only the layout of
 * the arrays differs. */

/* An NCHW buffer for N x C x L values (*own, to free). */
static void *nchw_buffer(cnn_dtype dt, int64_t N, int64_t C, int64_t L, void **own) {
  size_t bytes = (size_t)(N * C * L) * cnn_dtype_size(dt);
  if (!(*own = malloc(bytes ? bytes : 1))) cnn_set_error("conv2d: out of memory");
  return *own;
}

/* A copy of an N x C x L channels-last array in NCHW (*own, to free). */
static const void *as_nchw(cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *a,
                           void **own) {
  void *b = nchw_buffer(dt, N, C, L, own);
  if (b) cnn_cpu_nhwc_to_nchw(dt, N, C, L, a, b);
  return b;
}

static int takes_nhwc(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s) {
  return wants_onednn(algo, dt) && !degenerate(s);
}

static cnn_conv_shape nchw_of(const cnn_conv_shape *s) {
  cnn_conv_shape p = *s;
  p.channels_last = 0;
  return p;
}

static void free_all(void *own[4]) {
  for (int i = 0; i < 4; i++) free(own[i]);
}

static int forward_channels_last(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                                 const void *x, const void *w, const void *b, void *y) {
  if (takes_nhwc(algo, dt, s)) {
    cnn_conv_shape o = for_onednn(algo, s);
    int r = cnn_cpu_conv2d_onednn_forward(&o, x, w, b, y);
    if (r != -2) return r;
  }
  void *own[4] = {0};
  cnn_conv_shape p = nchw_of(s);
  const void *xn = as_nchw(dt, s->N, s->C, s->H * s->W, x, &own[0]);
  void *yn = xn ? nchw_buffer(dt, s->N, s->K, s->OH * s->OW, &own[1]) : NULL;
  int rc = yn ? cnn_cpu_conv2d_forward(algo, dt, &p, xn, w, b, yn) : -1;
  if (rc == 0) cnn_cpu_nchw_to_nhwc(dt, s->N, s->K, s->OH * s->OW, yn, y);
  free_all(own);
  return rc;
}

/* Both backward passes or one (dx or dw NULL), channels-last. */
static int backward_channels_last(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                                  const void *dy, const void *x, const void *w, void *dx, void *dw,
                                  void *db) {
  if (takes_nhwc(algo, dt, s)) {
    cnn_conv_shape o = for_onednn(algo, s);
    int r = dx && dw ? cnn_cpu_conv2d_onednn_backward(&o, dy, x, w, dx, dw, db)
            : dx     ? cnn_cpu_conv2d_onednn_backward_data(&o, dy, w, dx)
                     : cnn_cpu_conv2d_onednn_backward_weight(&o, dy, x, dw, db);
    if (r != -2) return r;
  }
  void *own[4] = {0};
  cnn_conv_shape p = nchw_of(s);
  const void *dyn = as_nchw(dt, s->N, s->K, s->OH * s->OW, dy, &own[0]), *xn = NULL;
  if (dyn && dw) xn = as_nchw(dt, s->N, s->C, s->H * s->W, x, &own[1]);
  void *dxn = dyn && dx ? nchw_buffer(dt, s->N, s->C, s->H * s->W, &own[2]) : NULL;
  int rc = -1;
  if (dyn && (xn || !dw) && (dxn || !dx))
    rc = cnn_cpu_conv2d_backward(algo, dt, &p, dyn, xn, w, dxn, dw, db);
  if (rc == 0 && dx) cnn_cpu_nchw_to_nhwc(dt, s->N, s->C, s->H * s->W, dxn, dx);
  free_all(own);
  return rc;
}

/* ---- the entry points --------------------------------------------------------------- */

int cnn_cpu_conv2d_forward(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s, const void *x,
                           const void *w, const void *b, void *y) {
  assert(cnn_cpu_conv2d_shape_valid(dt, s));
  if (s->math == CNN_BFLOAT16) return forward_bf16(algo, s, x, w, b, y);
  if (strided_1x1(algo, dt, s)) return cnn_cpu_conv2d_1x1_strided_forward(s, x, w, b, y);
  if (s->channels_last) return forward_channels_last(algo, dt, s, x, w, b, y);
  if (algo == CNN_CONV_NAIVE || degenerate(s))
    return cnn_cpu_conv2d_naive_forward(dt, s, x, w, b, y);
  if (wants_onednn(algo, dt)) {
    cnn_conv_shape o = for_onednn(algo, s);
    int r = cnn_cpu_conv2d_onednn_forward(&o, x, w, b, y);
    if (r != -2) return r; /* -2: no oneDNN primitive for this shape */
  }
  return cnn_cpu_conv2d_im2col_forward(dt, s, x, w, b, y);
}

int cnn_cpu_conv2d_backward_data(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                                 const void *dy, const void *w, void *dx) {
  assert(cnn_cpu_conv2d_shape_valid(dt, s));
  if (s->math == CNN_BFLOAT16) return backward_data_bf16(algo, s, dy, w, dx);
  if (strided_1x1(algo, dt, s))
    return cnn_cpu_conv2d_1x1_strided_backward(s, dy, NULL, w, dx, NULL, NULL);
  if (s->channels_last) return backward_channels_last(algo, dt, s, dy, NULL, w, dx, NULL, NULL);
  if (algo == CNN_CONV_NAIVE || degenerate(s))
    return cnn_cpu_conv2d_naive_backward_data(dt, s, dy, w, dx);
  if (wants_onednn(algo, dt)) {
    cnn_conv_shape o = for_onednn(algo, s);
    int r = cnn_cpu_conv2d_onednn_backward_data(&o, dy, w, dx);
    if (r != -2) return r; /* -2: no oneDNN primitive for this shape */
  }
  return cnn_cpu_conv2d_im2col_backward_data(dt, s, dy, w, dx);
}

int cnn_cpu_conv2d_backward_weight(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                                   const void *dy, const void *x, void *dw, void *db) {
  assert(cnn_cpu_conv2d_shape_valid(dt, s));
  if (s->math == CNN_BFLOAT16) return backward_weight_bf16(algo, s, dy, x, dw, db);
  if (strided_1x1(algo, dt, s))
    return cnn_cpu_conv2d_1x1_strided_backward(s, dy, x, NULL, NULL, dw, db);
  if (s->channels_last) return backward_channels_last(algo, dt, s, dy, x, NULL, NULL, dw, db);
  if (algo == CNN_CONV_NAIVE || degenerate(s))
    return cnn_cpu_conv2d_naive_backward_weight(dt, s, dy, x, dw, db);
  if (wants_onednn(algo, dt)) {
    cnn_conv_shape o = for_onednn(algo, s);
    int r = cnn_cpu_conv2d_onednn_backward_weight(&o, dy, x, dw, db);
    if (r != -2) return r; /* -2: no oneDNN primitive for this shape */
  }
  return cnn_cpu_conv2d_im2col_backward_weight(dt, s, dy, x, dw, db);
}

/* Both backward passes.  dx, or dw (and then db), may be NULL for a pass
 * not wanted.  With both wanted, oneDNN runs them from one reorder of dy;
 * a shape it has no primitive for takes the two calls above, which pick
 * their own fallback. */
int cnn_cpu_conv2d_backward(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                            const void *dy, const void *x, const void *w, void *dx, void *dw,
                            void *db) {
  assert(cnn_cpu_conv2d_shape_valid(dt, s));
  if (s->math == CNN_BFLOAT16) return backward_bf16(algo, s, dy, x, w, dx, dw, db);
  if (strided_1x1(algo, dt, s)) return cnn_cpu_conv2d_1x1_strided_backward(s, dy, x, w, dx, dw, db);
  if (s->channels_last) return backward_channels_last(algo, dt, s, dy, x, w, dx, dw, db);
  if (dx && dw && !degenerate(s) && wants_onednn(algo, dt)) {
    cnn_conv_shape o = for_onednn(algo, s);
    int r = cnn_cpu_conv2d_onednn_backward(&o, dy, x, w, dx, dw, db);
    if (r != -2) return r; /* -2: no oneDNN primitive for this shape */
  }
  if (dx && cnn_cpu_conv2d_backward_data(algo, dt, s, dy, w, dx)) return -1;
  return dw ? cnn_cpu_conv2d_backward_weight(algo, dt, s, dy, x, dw, db) : 0;
}

/* The activation over y (contiguous, every output element), in place. */
static int activation_in_place(cnn_dtype dt, const cnn_conv_shape *s, cnn_unary_op act, double p0,
                               double p1, void *y) {
  int64_t n = s->N * s->K * s->OH * s->OW;
  cnn_be_shape shape = cnn_be_shape_of(1, &n);
  cnn_be_arg arg = {y, {1}};
  return cnn_cpu_unary(0, act, dt, &shape, arg, arg, p0, p1);
}

int cnn_cpu_conv2d_act_forward(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                               const void *x, const void *w, const void *b, cnn_unary_op act,
                               double p0, double p1, void *y) {
  assert(cnn_cpu_conv2d_shape_valid(dt, s));
  if (s->math == CNN_FLOAT32 && !degenerate(s) && wants_onednn(algo, dt)) {
    cnn_conv_shape o = for_onednn(algo, s);
    int r = cnn_cpu_conv2d_onednn_forward_act(&o, x, w, b, act, p0, p1, y);
    if (r != -2) return r; /* -2: no post-op for act, or no primitive for this shape */
  }
  if (cnn_cpu_conv2d_forward(algo, dt, s, x, w, b, y)) return -1;
  return activation_in_place(dt, s, act, p0, p1, y);
}
