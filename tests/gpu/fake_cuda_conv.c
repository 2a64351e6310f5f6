/*
 * fake_cuda_conv.c -- 2-D convolution of the fake device: forward, backward
 * data and backward weight (+ bias), as direct loops over cnn_conv_shape.
 *
 * Shapes: x N x C x H x W, w K x C/g x R x S, b K (or NULL), y N x K x OH x
 * OW.  Output channel k belongs to group k / (K/g) and reads input channels
 * group*C/g .. +C/g.  Input row of output row oh and tap r:
 * ih = oh*sh - pt + r*dh (outside [0, H) is zero padding); the same for
 * columns with sw, pl, dw.  (pb and pr only decide OH/OW, which core
 * computes.)  The backward passes walk the same (output, tap) pairs and
 * scatter; every sum is in double in a host buffer, rounded once to dt at
 * the end, so float16/bfloat16 compute from the stored values and round
 * the result.  `algo` is ignored: there is only this loop.
 *
 * The fused entry (conv2d_act_forward, cnn_conv2d_act): the double sum
 * plus bias, then the activation's formula from elementwise_ops.h (the
 * CUDA module: ReLU in cuDNN's fused call, the others as its in-place
 * kernel), rounded once to dt.
 */
#include <stdlib.h>

#include "elementwise_ops.h" /* cnn_ew_unary_f64 */
#include "fake_cuda.h"

typedef struct {
  const cnn_conv_shape *s;
  int64_t Cg, Kg; /* channels per group in and out */
} geom;

static geom geom_of(const cnn_conv_shape *s) {
  geom g = {s, s->C / s->groups, s->K / s->groups};
  return g;
}

static int64_t x_idx(const cnn_conv_shape *s, int64_t n, int64_t c, int64_t h, int64_t w) {
  return ((n * s->C + c) * s->H + h) * s->W + w;
}
static int64_t w_idx(const geom *g, int64_t k, int64_t c, int64_t r, int64_t q) {
  return ((k * g->Cg + c) * g->s->R + r) * g->s->S + q;
}
static int64_t y_idx(const cnn_conv_shape *s, int64_t n, int64_t k, int64_t oh, int64_t ow) {
  return ((n * s->K + k) * s->OH + oh) * s->OW + ow;
}

/* Calls visit(ctx, x index, w index, y index) for every (output, tap) pair
 * that reads an input element (taps on padding are skipped). */
typedef void (*visit_fn)(void *ctx, int64_t xi, int64_t wi, int64_t yi);

static void walk_taps(const geom *g, int64_t n, int64_t k, int64_t oh, int64_t ow, visit_fn f,
                      void *ctx) {
  const cnn_conv_shape *s = g->s;
  int64_t c0 = k / g->Kg * g->Cg;
  for (int64_t c = 0; c < g->Cg; c++)
    for (int64_t r = 0; r < s->R; r++) {
      int64_t ih = oh * s->sh - s->pt + r * s->dh;
      if (ih < 0 || ih >= s->H) continue;
      for (int64_t q = 0; q < s->S; q++) {
        int64_t iw = ow * s->sw - s->pl + q * s->dw;
        if (iw < 0 || iw >= s->W) continue;
        f(ctx, x_idx(s, n, c0 + c, ih, iw), w_idx(g, k, c, r, q), y_idx(s, n, k, oh, ow));
      }
    }
}

static void walk(const geom *g, visit_fn f, void *ctx) {
  const cnn_conv_shape *s = g->s;
  for (int64_t n = 0; n < s->N; n++)
    for (int64_t k = 0; k < s->K; k++)
      for (int64_t oh = 0; oh < s->OH; oh++)
        for (int64_t ow = 0; ow < s->OW; ow++) walk_taps(g, n, k, oh, ow, f, ctx);
}

typedef struct {
  cnn_dtype dt;
  const void *a, *b; /* the two arrays read */
  double *acc;       /* the one written */
} pass;

static void fwd_visit(void *ctx, int64_t xi, int64_t wi, int64_t yi) {
  pass *p = ctx; /* a = x, b = w, acc over y */
  p->acc[yi] += fake_load(p->dt, p->a, xi) * fake_load(p->dt, p->b, wi);
}
static void data_visit(void *ctx, int64_t xi, int64_t wi, int64_t yi) {
  pass *p = ctx; /* a = dy, b = w, acc over dx */
  p->acc[xi] += fake_load(p->dt, p->a, yi) * fake_load(p->dt, p->b, wi);
}
static void weight_visit(void *ctx, int64_t xi, int64_t wi, int64_t yi) {
  pass *p = ctx; /* a = dy, b = x, acc over dw */
  p->acc[wi] += fake_load(p->dt, p->a, yi) * fake_load(p->dt, p->b, xi);
}

/* ---- checks ----------------------------------------------------------------------------- */

static int64_t nx(const cnn_conv_shape *s) { return s->N * s->C * s->H * s->W; }
static int64_t nw(const cnn_conv_shape *s) { return s->K * (s->C / s->groups) * s->R * s->S; }
static int64_t ny(const cnn_conv_shape *s) { return s->N * s->K * s->OH * s->OW; }

static int check_shape(const cnn_conv_shape *s, cnn_dtype dt) {
  if (fake_float_dt("conv2d", dt, true)) return -1;
  if (s->groups < 1 || s->C % s->groups || s->K % s->groups || s->sh < 1 || s->sw < 1 ||
      s->dh < 1 || s->dw < 1) {
    fake_core.set_error("conv2d: invalid shape reached the device (groups %d, C %lld, K %lld)",
                        s->groups, (long long)s->C, (long long)s->K);
    return -1;
  }
  return 0;
}

static double *zeroed(int64_t n) {
  double *p = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
  if (!p) fake_core.set_error("conv2d: out of host memory");
  return p;
}

static void store_all(cnn_dtype dt, void *dst, const double *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) fake_store(dt, dst, i, src[i]);
}

/* ---- entries ------------------------------------------------------------------------------- */

/* y = conv(x, w) + b, then the activation act (act->on) in double */
typedef struct {
  bool on;
  cnn_unary_op op;
  double p0, p1;
} activation;

static int conv_sum(int dev, cnn_dtype dt, const cnn_conv_shape *s, const void *x, const void *w,
                    const void *b, const activation *act, void *y) {
  if (check_shape(s, dt) || fake_enter("conv2d", dev)) return -1;
  geom g = geom_of(s);
  double *acc = NULL;
  int rc = fake_dev_n("conv2d", x, nx(s), dt) || fake_dev_n("conv2d", w, nw(s), dt) ||
                   (b && fake_dev_n("conv2d", b, s->K, dt)) || fake_dev_n("conv2d", y, ny(s), dt) ||
                   !(acc = zeroed(ny(s)))
               ? -1
               : 0;
  if (rc == 0) {
    pass p = {dt, x, w, acc};
    walk(&g, fwd_visit, &p);
    for (int64_t i = 0; b && i < ny(s); i++) acc[i] += fake_load(dt, b, i / (s->OH * s->OW) % s->K);
    for (int64_t i = 0; act->on && i < ny(s); i++)
      acc[i] = cnn_ew_unary_f64(act->op, acc[i], act->p0, act->p1);
    store_all(dt, y, acc, ny(s));
  }
  free(acc);
  fake_leave();
  return rc;
}

static int forward(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                   const void *x, const void *w, const void *b, void *y) {
  const activation none = {false, CNN_OP_RELU, 0, 0};
  return conv_sum(dev, dt, s, x, w, b, &none, y);
}

static int forward_act(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                       const void *x, const void *w, const void *b, cnn_unary_op act, double p0,
                       double p1, void *y) {
  const activation a = {true, act, p0, p1};
  return conv_sum(dev, dt, s, x, w, b, &a, y);
}

static int backward_data(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                         const void *dy, const void *w, void *dx) {
  if (check_shape(s, dt) || fake_enter("conv2d", dev)) return -1;
  geom g = geom_of(s);
  double *acc = NULL;
  int rc = fake_dev_n("conv2d", dy, ny(s), dt) || fake_dev_n("conv2d", w, nw(s), dt) ||
                   fake_dev_n("conv2d", dx, nx(s), dt) || !(acc = zeroed(nx(s)))
               ? -1
               : 0;
  if (rc == 0) {
    pass p = {dt, dy, w, acc};
    walk(&g, data_visit, &p);
    store_all(dt, dx, acc, nx(s));
  }
  free(acc);
  fake_leave();
  return rc;
}

static void bias_grad(const cnn_conv_shape *s, cnn_dtype dt, const void *dy, void *db) {
  int64_t L = s->OH * s->OW;
  for (int64_t k = 0; k < s->K; k++) {
    double acc = 0;
    for (int64_t n = 0; n < s->N; n++)
      for (int64_t i = 0; i < L; i++) acc += fake_load(dt, dy, (n * s->K + k) * L + i);
    fake_store(dt, db, k, acc);
  }
}

static int backward_weight(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                           const void *dy, const void *x, void *dw, void *db) {
  if (check_shape(s, dt) || fake_enter("conv2d", dev)) return -1;
  geom g = geom_of(s);
  double *acc = NULL;
  int rc = fake_dev_n("conv2d", dy, ny(s), dt) || fake_dev_n("conv2d", x, nx(s), dt) ||
                   (dw && fake_dev_n("conv2d", dw, nw(s), dt)) ||
                   (db && fake_dev_n("conv2d", db, s->K, dt)) || !(acc = zeroed(nw(s)))
               ? -1
               : 0;
  if (rc == 0 && dw) {
    pass p = {dt, dy, x, acc};
    walk(&g, weight_visit, &p);
    store_all(dt, dw, acc, nw(s));
  }
  if (rc == 0 && db) bias_grad(s, dt, dy, db);
  free(acc);
  fake_leave();
  return rc;
}

void fake_conv_register(cnn_backend *be) {
  be->conv2d_forward = forward;
  be->conv2d_act_forward = forward_act;
  be->conv2d_backward_data = backward_data;
  be->conv2d_backward_weight = backward_weight;
}
