/*
 * test_bn_relu_pool_blocked.c -- the block's fused batch norm + ReLU +
 * 2x2 max pool on its own, both widths: core/cpu/bn_relu_pool_blocked16.c
 * (AVX-512, nChw16c) and bn_relu_pool_blocked8.c (AVX2, nChw8c), each
 * where the CPU has it.  float32 and (16 lanes) bfloat16, blocked and
 * NHWC, odd H and W; and float32 blocked with y and dy as NCHW arrays
 * (CNN_B16_NCHW_EDGE), against the reference and bit for bit against the
 * blocked run, its copy of dy included.  The backward that sends batch
 * norm's input gradient into the convolution's weight and bias gradients
 * (backward_dw) against the plain backward's dx folded with the
 * convolution's input in double.
 *
 * Evidence: a reference written here in double on the plain N x C x H x W
 * numbers (the layouts' index arithmetic done separately): the batch mean
 * and biased variance, y = maxpool(relu(gamma (x - mean) / sqrt(var + eps)
 * + beta)) with the taps, and backward from the textbook formulas (dbeta =
 * sum g, dgamma = sum g xhat, dx = gamma rstd (g - dbeta/M - xhat
 * dgamma/M)); bfloat16 outputs against the reference rounded to bfloat16
 * (within one unit of its last place).  Windows whose top two values are
 * within rounding of each other are not asked which tap won, except the
 * exact ties of a constant window, where the first tap must win.  Skipped
 * (77) without AVX-512 or AVX2.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cnn.h"
#include "cpu/kernels.h"

/* The kernel under test: its width and its three entries. */
static int L;
static cnn_bn_relu_pool_kernel K;

static void use_kernel(int lanes) {
  K = *cnn_cpu_bn_relu_pool_kernel(lanes);
  L = K.lanes;
  printf("%d lanes (%s):\n", lanes, lanes == 16 ? "AVX-512, nChw16c" : "AVX2, nChw8c");
}

typedef struct {
  int64_t N, C, H, W;
  int bf16, nhwc, edge; /* edge: y and dy NCHW (nhwc 0, bf16 0) */
} shape;

static int64_t at(const shape *s, int64_t H, int64_t W, int64_t n, int64_t c, int64_t h,
                  int64_t w) {
  if (s->nhwc) return ((n * H + h) * W + w) * s->C + c;
  return (((n * (s->C / L) + c / L) * H + h) * W + w) * L + c % L;
}

/* where y and dy keep output (n, c, oh, ow) */
static int64_t out_at(const shape *s, int64_t n, int64_t c, int64_t oh, int64_t ow) {
  int64_t OH = s->H / 2, OW = s->W / 2;
  return s->edge ? ((n * s->C + c) * OH + oh) * OW + ow : at(s, OH, OW, n, c, oh, ow);
}

static int layout_of(const shape *s) {
  return s->edge ? CNN_B16_NCHW_EDGE : s->nhwc ? CNN_B16_NHWC : CNN_B16_BLOCKED;
}

/* The edge run against the blocked one on the same numbers: every output
 * bit for bit, and the backward's copy of dy is dy in the blocked layout. */
static void check_edge_bits(shape s, const float *x, const float *y, const float *dy,
                            const float *dyc, const uint8_t *tap, const float *dx,
                            const float *gamma, const float *beta, const float *mean,
                            const float *var, const float *dgamma, const float *dbeta) {
  int64_t N = s.N, C = s.C, H = s.H, W = s.W, OH = H / 2, OW = W / 2;
  int64_t nx = N * C * H * W, ny = N * C * OH * OW;
  shape b = s;
  b.edge = 0;
  float *yb = malloc(ny * 4), *dyb = malloc(ny * 4), *dxb = malloc(nx * 4);
  float *mb = malloc(C * 4), *vb = malloc(C * 4), *dgb = malloc(C * 4), *dbb = malloc(C * 4);
  uint8_t *tb = malloc(ny);
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t i = 0; i < OH * OW; i++)
        dyb[out_at(&b, n, c, i / OW, i % OW)] = dy[out_at(&s, n, c, i / OW, i % OW)];
  CHECK(K.forward(x, 0, CNN_B16_BLOCKED, N, C / L, H, W, gamma, beta, 1e-5f, mb, vb, yb, tb) == 0);
  CHECK(K.backward(x, dyb, tb, 0, CNN_B16_BLOCKED, N, C / L, H, W, gamma, beta, mb, vb, 1e-5f, dxb,
                   dgb, dbb, NULL) == 0);
  int64_t diff = 0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t i = 0; i < OH * OW; i++) {
        int64_t e = out_at(&s, n, c, i / OW, i % OW), o = out_at(&b, n, c, i / OW, i % OW);
        diff += memcmp(&y[e], &yb[o], 4) != 0;
        diff += tap[o] != tb[o] || memcmp(&dyc[o], &dyb[o], 4) != 0;
      }
  diff += memcmp(dx, dxb, nx * 4) != 0;
  diff += memcmp(mean, mb, C * 4) != 0 || memcmp(var, vb, C * 4) != 0;
  diff += memcmp(dgamma, dgb, C * 4) != 0 || memcmp(dbeta, dbb, C * 4) != 0;
  printf("    NCHW edge against blocked: %lld differences\n", (long long)diff);
  CHECK(diff == 0);
  free(yb), free(dyb), free(dxb), free(mb), free(vb), free(dgb), free(dbb), free(tb);
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static double uniform(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

static uint16_t bf16_bits(float f) { /* to nearest even (no NaNs here) */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}
static float bf16_value(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static float stored(const shape *s, const void *a, int64_t i) {
  return s->bf16 ? bf16_value(((const uint16_t *)a)[i]) : ((const float *)a)[i];
}
static void store(const shape *s, void *a, int64_t i, float v) {
  if (s->bf16)
    ((uint16_t *)a)[i] = bf16_bits(v);
  else
    ((float *)a)[i] = v;
}

/* |got - want| within tol relative to the larger of |want| and `scale`. */
static int close_to(double got, double want, double tol, double scale) {
  double m = fabs(want) > scale ? fabs(want) : scale;
  return fabs(got - want) <= tol * m;
}

static void check(shape s) {
  int64_t N = s.N, C = s.C, H = s.H, W = s.W, OH = H / 2, OW = W / 2, M = N * H * W;
  int64_t nx = N * C * H * W, ny = N * C * OH * OW, es = s.bf16 ? 2 : 4;
  double tol = s.bf16 ? 1.0 / 128 : 2e-5;
  void *x = malloc(nx * es), *y = malloc(ny * es), *dy = malloc(ny * es), *dx = malloc(nx * es);
  float *dyc = s.edge ? malloc(ny * 4) : NULL;
  uint8_t *tap = malloc(ny);
  float *gamma = malloc(C * 4), *beta = malloc(C * 4), *mean = malloc(C * 4), *var = malloc(C * 4);
  float *dgamma = malloc(C * 4), *dbeta = malloc(C * 4);
  for (int64_t c = 0; c < C; c++)
    gamma[c] = (float)(0.5 + uniform()), beta[c] = (float)(uniform() - 0.5);
  gamma[0] = -0.75f; /* a negative scale flips which tap wins */
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t w = 0; w < W; w++) {
          float v = (float)(3.0 + 2.0 * uniform() + (double)c); /* off zero: the shift matters */
          if (c == 1 && h < 2 && w < 2) v = 4.0f;               /* a constant window: a tie */
          store(&s, x, at(&s, H, W, n, c, h, w), v);
        }
  for (int64_t i = 0; i < ny; i++) store(&s, dy, i, (float)(uniform() - 0.5));
  float eps = 1e-5f;
  CHECK(K.forward(x, s.bf16, layout_of(&s), N, C / L, H, W, gamma, beta, eps, mean, var, y, tap) ==
        0);
  CHECK(K.backward(x, dy, tap, s.bf16, layout_of(&s), N, C / L, H, W, gamma, beta, mean, var, eps,
                   dx, dgamma, dbeta, dyc) == 0);
  int64_t bad_stats = 0, bad_y = 0, bad_tap = 0, bad_tie = 0, bad_grad = 0, bad_dx = 0;
  int64_t inexact = 0; /* bf16: outputs not the reference's own rounding */
  double *v = malloc(H * W * sizeof(double)), *g = malloc(H * W * sizeof(double));
  for (int64_t c = 0; c < C; c++) {
    double s1 = 0, s2 = 0;
    for (int64_t n = 0; n < N; n++)
      for (int64_t i = 0; i < H * W; i++) s1 += stored(&s, x, at(&s, H, W, n, c, i / W, i % W));
    double mu = s1 / M;
    for (int64_t n = 0; n < N; n++)
      for (int64_t i = 0; i < H * W; i++) {
        double d = stored(&s, x, at(&s, H, W, n, c, i / W, i % W)) - mu;
        s2 += d * d;
      }
    double va = s2 / M, rstd = 1 / sqrt(va + eps), sg = 0, sgx = 0;
    bad_stats += !close_to(mean[c], mu, 1e-6, 1) + !close_to(var[c], va, 1e-5, 1e-3);
    for (int pass = 0; pass < 2; pass++)
      for (int64_t n = 0; n < N; n++) {
        for (int64_t i = 0; i < H * W; i++) {
          double xh = (stored(&s, x, at(&s, H, W, n, c, i / W, i % W)) - mu) * rstd;
          v[i] = gamma[c] * xh + beta[c], g[i] = 0;
        }
        for (int64_t oh = 0; oh < OH; oh++)
          for (int64_t ow = 0; ow < OW; ow++) {
            double r[4], top = -1, second = -1;
            int best = 0;
            for (int t = 0; t < 4; t++) {
              r[t] = fmax(0, v[(2 * oh + t / 2) * W + 2 * ow + t % 2]);
              if (r[t] > top)
                second = top, top = r[t], best = t;
              else if (r[t] > second)
                second = r[t];
            }
            int64_t o = out_at(&s, n, c, oh, ow); /* y and dy */
            int t = tap[at(&s, OH, OW, n, c, oh, ow)];
            if (pass == 0) {
              double want = s.bf16 ? bf16_value(bf16_bits((float)top)) : top;
              /* tolerance against 1: terms of ~|mean * scale| cancel */
              bad_y += !close_to(stored(&s, y, o), want, tol, 1);
              inexact += stored(&s, y, o) != want;
              if (c == 1 && oh == 0 && ow == 0)
                bad_tie += t != 0;
              else if (top - second > 4 * tol * (top > 1 ? top : 1))
                bad_tap += t != best;
            }
            if (t < 4 && v[(2 * oh + t / 2) * W + 2 * ow + t % 2] > 0)
              g[(2 * oh + t / 2) * W + 2 * ow + t % 2] = stored(&s, dy, o);
          }
        for (int64_t i = 0; i < H * W; i++) {
          double xh = (v[i] - beta[c]) / gamma[c];
          if (pass == 0) {
            sg += g[i], sgx += g[i] * xh;
          } else {
            double want = gamma[c] * rstd * (g[i] - sg / M - xh * sgx / M);
            double got = stored(&s, dx, at(&s, H, W, n, c, i / W, i % W));
            bad_dx += !close_to(got, want, s.bf16 ? 1.0 / 64 : 1e-4, 1e-2);
          }
        }
      }
    bad_grad += !close_to(dbeta[c], sg, 1e-4, 1e-2) + !close_to(dgamma[c], sgx, 1e-4, 1e-2);
  }
  printf("  %s %s %lldx%lldx%lldx%lld: bad stats %lld, y %lld, taps %lld, tie %lld, "
         "dgamma/dbeta %lld, dx %lld, y off the reference's rounding %lld\n",
         s.bf16 ? "bf16" : "f32 ",
         s.edge   ? "blocked, NCHW edge"
         : s.nhwc ? "NHWC   "
                  : "blocked",
         (long long)N, (long long)C, (long long)H, (long long)W, (long long)bad_stats,
         (long long)bad_y, (long long)bad_tap, (long long)bad_tie, (long long)bad_grad,
         (long long)bad_dx, (long long)inexact);
  /* rounding to nearest: only values within float error of a halfway
   * point may round the other way (truncation misses about half) */
  if (s.bf16) CHECK(inexact * 20 < ny);
  CHECK(bad_stats == 0);
  CHECK(bad_y == 0);
  CHECK(bad_tap == 0);
  CHECK(bad_tie == 0);
  CHECK(bad_grad == 0);
  CHECK(bad_dx == 0);
  if (s.edge) check_edge_bits(s, x, y, dy, dyc, tap, dx, gamma, beta, mean, var, dgamma, dbeta);
  free(dyc);
  free(v), free(g), free(x), free(y), free(dy), free(dx), free(tap);
  free(gamma), free(beta), free(mean), free(var), free(dgamma), free(dbeta);
}

/* backward_dw against the plain backward: dw = sum dx x_tap in double
 * from the plain backward's dx (its own reference-checked output above),
 * db = sum dx (about 0 by batch norm's construction: the check only bounds
 * it), and dgamma/dbeta bit for bit (the two share their first pass: a
 * guard that backward_dw hands it the same arguments), for a
 * stride-1 convolution of Ci channels, R x S taps, padding pt/pl (and the
 * same at the bottom/right) whose output is the block's H x W. */
static void check_dw(shape s, int64_t Ci, int64_t R, int64_t S, int64_t pt, int64_t pl) {
  int64_t N = s.N, C = s.C, H = s.H, W = s.W, OH = H / 2, OW = W / 2;
  int64_t Hi = H + R - 1 - 2 * pt, Wi = W + S - 1 - 2 * pl, taps = Ci * R * S;
  int64_t nx = N * C * H * W, ny = N * C * OH * OW, ni = N * Ci * Hi * Wi;
  float *x = malloc(nx * 4), *y = malloc(ny * 4), *dy = malloc(ny * 4), *dx = malloc(nx * 4);
  float *xi = malloc(ni * 4), *dyc = malloc(ny * 4), *dw = malloc(C * taps * 4),
        *db = malloc(C * 4);
  float *k = malloc(8 * C * 4), *g = k, *b = k + C, *m = k + 2 * C, *v = k + 3 * C;
  float *dg = k + 4 * C, *dbt = k + 5 * C, *dg2 = k + 6 * C, *dbt2 = k + 7 * C;
  uint8_t *tap = malloc(ny);
  for (int64_t i = 0; i < nx; i++) x[i] = (float)(2 * uniform() - 1);
  for (int64_t i = 0; i < ny; i++) dy[i] = (float)(uniform() - 0.5);
  for (int64_t i = 0; i < ni; i++) xi[i] = (float)(uniform() - 0.25);
  for (int64_t c = 0; c < C; c++) g[c] = (float)(0.5 + uniform()), b[c] = (float)(uniform() - 0.5);
  int layout = layout_of(&s);
  CHECK(K.forward(x, 0, layout, N, C / L, H, W, g, b, 1e-5f, m, v, y, tap) == 0);
  CHECK(K.backward(x, dy, tap, 0, layout, N, C / L, H, W, g, b, m, v, 1e-5f, dx, dg, dbt, dyc) ==
        0);
  cnn_b16_conv_src src = {xi, Ci, Hi, Wi, R, S, pt, pl};
  CHECK(K.backward_dw(x, dy, tap, layout, N, C / L, H, W, g, b, m, v, 1e-5f, &src, dw, db, dg2,
                      dbt2, dyc) == 0);
  int64_t bad_dw = 0, bad_db = 0;
  for (int64_t kk = 0; kk < C; kk++) {
    double sdb = 0, scale = 0;
    for (int64_t n = 0; n < N; n++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t w = 0; w < W; w++) {
          double d = dx[at(&s, H, W, n, kk, h, w)];
          sdb += d, scale += fabs(d);
        }
    bad_db += !close_to(db[kk], sdb, 1e-5, scale);
    for (int64_t c = 0; c < Ci; c++)
      for (int64_t r = 0; r < R; r++)
        for (int64_t q = 0; q < S; q++) {
          double sum = 0, mag = 0;
          for (int64_t n = 0; n < N; n++)
            for (int64_t h = 0; h < H; h++)
              for (int64_t w = 0; w < W; w++) {
                int64_t ih = h + r - pt, iw = w + q - pl;
                if (ih < 0 || ih >= Hi || iw < 0 || iw >= Wi) continue;
                double t =
                    (double)dx[at(&s, H, W, n, kk, h, w)] * xi[((n * Ci + c) * Hi + ih) * Wi + iw];
                sum += t, mag += fabs(t);
              }
          bad_dw += !close_to(dw[(kk * Ci + c) * R * S + r * S + q], sum, 1e-5, mag);
        }
  }
  int same = !memcmp(dg, dg2, C * 4) && !memcmp(dbt, dbt2, C * 4);
  printf(
      "  backward_dw %s %lldx%lldx%lldx%lld, conv %lld x %lldx%lld pad %lld,%lld: bad dw %lld, db "
      "%lld, dgamma/dbeta %s\n",
      s.edge   ? "NCHW edge"
      : s.nhwc ? "NHWC"
               : "blocked",
      (long long)N, (long long)C, (long long)H, (long long)W, (long long)Ci, (long long)R,
      (long long)S, (long long)pt, (long long)pl, (long long)bad_dw, (long long)bad_db,
      same ? "bit for bit" : "DIFFER");
  CHECK(bad_dw == 0);
  CHECK(bad_db == 0);
  CHECK(same);
  free(x), free(y), free(dy), free(dx), free(xi), free(dyc), free(dw), free(db), free(k), free(tap);
}

/* The edge is float32 and blocked only, and its backward needs the copy;
 * the 8-lane kernel takes no bfloat16 at all. */
static void check_refusals(void) {
  float x[2 * 16 * 4] = {0}, y[2 * 16] = {0}, dx[2 * 16 * 4], m[16], v[16], g[16], b[16];
  float dg[16], db[16];
  uint8_t tap[2 * 16];
  for (int c = 0; c < 16; c++) g[c] = 1, b[c] = 0;
  CHECK(K.forward(x, 1, CNN_B16_NCHW_EDGE, 2, 1, 2, 2, g, b, 1e-5f, m, v, y, tap) == -1);
  CHECK(strstr(cnn_error(), "layout 2") != NULL);
  CHECK(K.forward(x, 0, 7, 2, 1, 2, 2, g, b, 1e-5f, m, v, y, tap) == -1);
  CHECK(K.forward(x, 0, CNN_B16_NCHW_EDGE, 2, 1, 2, 2, g, b, 1e-5f, m, v, y, tap) == 0);
  CHECK(K.backward(x, y, tap, 0, CNN_B16_NCHW_EDGE, 2, 1, 2, 2, g, b, m, v, 1e-5f, dx, dg, db,
                   NULL) == -1);
  CHECK(strstr(cnn_error(), "copy") != NULL);
  if (L == 8) {
    CHECK(K.forward(x, 1, CNN_B16_BLOCKED, 2, 1, 2, 2, g, b, 1e-5f, m, v, y, tap) == -1);
    CHECK(strstr(cnn_error(), "bfloat16 is the AVX-512 kernel's") != NULL);
    CHECK(K.backward(x, y, tap, 1, CNN_B16_BLOCKED, 2, 1, 2, 2, g, b, m, v, 1e-5f, dx, dg, db,
                     NULL) == -1);
  }
}

/* Every case on the kernel of `lanes` (channel counts in its blocks). */
static void check_kernel(int lanes) {
  use_kernel(lanes);
  int64_t u = lanes; /* a channel block */
  for (int bf16 = 0; bf16 < (lanes == 16 ? 2 : 1); bf16++)
    for (int nhwc = 0; nhwc < 2; nhwc++) {
      check((shape){3, 2 * u, 8, 8, bf16, nhwc, 0});
      check((shape){2, u, 7, 9, bf16, nhwc, 0}); /* odd H and W: the edge gets dx too */
      check((shape){2, 3 * u, 5, 4, bf16, nhwc, 0});
    }
  /* the NCHW edge: planes of 16, 12 (part runs), 49 (several runs and a
   * part) and 4 pooled pixels */
  check((shape){3, 2 * u, 8, 8, 0, 0, 1});
  check((shape){2, u, 7, 9, 0, 0, 1});
  check((shape){2, 2 * u, 14, 14, 0, 0, 1});
  check((shape){2, 3 * u, 5, 4, 0, 0, 1});
  check_refusals();
  check_dw((shape){3, 32, 8, 8, 0, 0, 0}, 1, 3, 3, 1, 1);    /* the example network's first block */
  check_dw((shape){2, u, 7, 9, 0, 0, 1}, 3, 3, 3, 1, 1);     /* 27 taps, odd edge, NCHW edge */
  check_dw((shape){2, 2 * u, 6, 6, 0, 1, 0}, 2, 3, 2, 0, 1); /* NHWC, valid rows, uneven kernel */
  check_dw((shape){2, u, 14, 14, 0, 0, 1}, 1, 5, 5, 2, 2);   /* 5x5 */
  float z[64] = {0};
  cnn_b16_conv_src big = {z, 4, 2, 2, 3, 3, 1, 1}; /* 36 taps: refused */
  CHECK(K.backward_dw(z, z, (uint8_t *)z, CNN_B16_BLOCKED, 1, 1, 2, 2, z, z, z, z, 1e-5f, &big, z,
                      z, z, z, NULL) == -1);
  CHECK(strstr(cnn_error(), "27 taps") != NULL);
}

int main(void) {
  if (!cnn_cpu_use_avx512() && !cnn_cpu_use_avx2()) {
    printf("test_bn_relu_pool_blocked: neither AVX-512 nor AVX2 on this CPU: skipped\n");
    return 77;
  }
  if (cnn_cpu_use_avx512()) check_kernel(16);
  if (cnn_cpu_use_avx2()) check_kernel(8);
  return check_report("test_bn_relu_pool_blocked");
}
