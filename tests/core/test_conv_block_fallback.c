/*
 * test_conv_block_fallback.c -- the fused training block conv -> batch
 * norm -> ReLU -> max pool (core/cpu/conv_block_onednn.c) when oneDNN's
 * Winograd kernels refuse a shape they were offered: the plan is built
 * again on the direct kernels, and the block gives the direct block's
 * results bit for bit, forward and backward.
 *
 * No block shape was found that conv_winograd.c's rule gives to Winograd
 * and oneDNN then refuses, so cnn_onednn_winograd_mode(2) offers every
 * float32 shape: a 5x5 and a 1x1 convolution, which the Winograd kernels
 * (F(4x4, 3x3) only) do not take.  (They do take a 3x3 one of 3 input
 * channels, padded to 16.)  The reference is the same shape with allow_winograd 0: a plan of
 * its own, on the direct kernels from the start.  Had the Winograd kernels
 * taken the shape, the results would differ by rounding and the
 * comparison would fail; had the fallback failed, the call would.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cnn.h"
#include "cpu/kernels.h"
#include "cpu/onednn_conv.h"

typedef struct {
  float *x, *w, *b, *gamma, *beta, *dy;
} block_in;

typedef struct {
  float *y, *mean, *var, *dx, *dw, *db, *dgamma, *dbeta;
} block_out;

static float *rand_f32(int64_t n) {
  double *d = check_rand_f64(n);
  float *f = check_to_f32(d, n);
  free(d);
  return f;
}

static cnn_conv_block_shape shape_of(int64_t N, int64_t C, int64_t HW, int64_t K, int k) {
  cnn_conv_block_shape s = {0};
  cnn_conv_shape *c = &s.conv;
  c->N = N, c->C = C, c->H = c->W = HW, c->K = K, c->R = c->S = k;
  c->OH = c->OW = HW; /* stride 1, "same" padding */
  c->sh = c->sw = c->dh = c->dw = c->groups = 1;
  c->pt = c->pb = c->pl = c->pr = k / 2;
  c->math = CNN_FLOAT32;
  s.has_bias = 1;
  s.pk[0] = s.pk[1] = s.ps[0] = s.ps[1] = 2;
  s.PH = s.PW = HW / 2;
  s.eps = 1e-5f;
  return s;
}

static int64_t nx(const cnn_conv_block_shape *s) {
  return s->conv.N * s->conv.C * s->conv.H * s->conv.W;
}
static int64_t nw(const cnn_conv_block_shape *s) {
  return s->conv.K * s->conv.C * s->conv.R * s->conv.S;
}
static int64_t npool(const cnn_conv_block_shape *s) {
  return s->conv.N * s->conv.K * s->PH * s->PW;
}

static block_out out_make(const cnn_conv_block_shape *s) {
  int64_t K = s->conv.K;
  block_out o = {malloc(npool(s) * 4), malloc(K * 4), malloc(K * 4), malloc(nx(s) * 4),
                 malloc(nw(s) * 4),    malloc(K * 4), malloc(K * 4), malloc(K * 4)};
  return o;
}

static void out_free(block_out *o) {
  free(o->y), free(o->mean), free(o->var), free(o->dx), free(o->dw), free(o->db);
  free(o->dgamma), free(o->dbeta);
}

/* forward and backward of the block; 0 or the failing call's code */
static int run_block(const cnn_conv_block_shape *s, const block_in *in, block_out *o) {
  size_t bytes = 0;
  int rc = cnn_cpu_conv_block_state_bytes(s, &bytes);
  if (rc) return rc;
  void *state = aligned_alloc(64, (bytes + 63) / 64 * 64);
  rc = cnn_cpu_conv_block_forward(s, in->x, in->w, in->b, in->gamma, in->beta, o->y, o->mean,
                                  o->var, state);
  if (rc == 0)
    rc = cnn_cpu_conv_block_backward(s, in->dy, in->x, in->w, in->gamma, in->beta, state, o->dx,
                                     o->dw, o->db, o->dgamma, o->dbeta);
  free(state);
  return rc;
}

static void same_bits(const char *what, const float *a, const float *b, int64_t n) {
  if (memcmp(a, b, (size_t)n * sizeof *a)) {
    fprintf(stderr, "  %s: the fallback differs from the direct block\n", what);
    CHECK(0);
  }
}

static void check_fallback(int64_t N, int64_t C, int64_t HW, int64_t K, int k) {
  cnn_conv_block_shape direct = shape_of(N, C, HW, K, k), offered = direct;
  offered.conv.allow_winograd = 1;
  CHECK(cnn_onednn_conv_winograd(&offered.conv) == 1); /* mode 2: Winograd is tried */
  CHECK(cnn_onednn_conv_winograd(&direct.conv) == 0);
  block_in in = {rand_f32(nx(&direct)), rand_f32(nw(&direct)), rand_f32(K),
                 rand_f32(K),           rand_f32(K),           rand_f32(npool(&direct))};
  block_out a = out_make(&direct), b = out_make(&direct);
  CHECK(run_block(&offered, &in, &a) == 0);
  CHECK(run_block(&direct, &in, &b) == 0);
  int64_t n[] = {npool(&direct), K, K, nx(&direct), nw(&direct), K, K, K};
  const char *names[] = {"y", "mean", "var", "dx", "dw", "db", "dgamma", "dbeta"};
  const float *pa[] = {a.y, a.mean, a.var, a.dx, a.dw, a.db, a.dgamma, a.dbeta};
  const float *pb[] = {b.y, b.mean, b.var, b.dx, b.dw, b.db, b.dgamma, b.dbeta};
  for (int i = 0; i < 8; i++) same_bits(names[i], pa[i], pb[i], n[i]);
  out_free(&a), out_free(&b);
  free(in.x), free(in.w), free(in.b), free(in.gamma), free(in.beta), free(in.dy);
}

int main(void) {
  int prev = cnn_onednn_winograd_mode(2);
  CHECK(prev == 1);                /* the rule is the default */
  check_fallback(2, 16, 8, 16, 5); /* 5x5 */
  check_fallback(2, 3, 8, 32, 1);  /* 1x1 */
  cnn_onednn_winograd_mode(prev);
  cnn_cpu_onednn_cache_clear();
  return check_report("test_conv_block_fallback");
}
