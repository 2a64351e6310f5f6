/*
 * test_bn_softmax.c -- batch norm and softmax kernels (core/cpu/batch_norm.c,
 * core/cpu/softmax.c).
 *
 * Evidence: hand-computed values (a 4-value channel; softmax of 1 2 3);
 * forward results against references written here (one pass over a copy
 * of each channel gathered into a row, Welford-free textbook formulas);
 * backward passes against central finite differences of the forward in
 * float64 with L = sum(y * dy), for x and the parameters, training and
 * eval; float32 against float64; a channel mean 1000 times its spread (the
 * one-pass statistics); large logits for stability.  The fused batch
 * norm + relu kernels against the unfused kernel followed by relu (bit for
 * bit, forward and backward) and against a naive double reference of
 * relu(bn(x)) and its gradient, training and eval, odd sizes and rows
 * longer than the float32 path's block of partial sums; the same for
 * relu(bn(x) + r) (cnn_cpu_batch_norm_add_relu_forward) against the
 * unfused kernel, the add and relu, bit for bit.  Every float32
 * case runs twice: through the AVX-512 bodies (batch_norm_avx512.c, where
 * this CPU has AVX-512) and through the portable loops; row lengths cover
 * a lone masked tail (1, 7), full steps plus a tail (17, 33, 35, 50),
 * whole 32-float steps (64) and rows past a block (1030, 1100, 2500).  The
 * relu's special values (NaN kept with its gradient, -0.0 to +0.0) are
 * checked on both paths against cnn_relu_f, and every backward also runs
 * with dx written over dy (what core/ops does with a private gradient),
 * bit for bit the same.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "check_core.h"
#include "cnn.h"
#include "cpu/batch_norm_internal.h"
#include "cpu/kernels.h"

static double *rand_f64(int64_t n, double scale, double shift) {
  double *a = check_rand_f64(n);
  for (int64_t i = 0; i < n; i++) a[i] = a[i] * scale + shift;
  return a;
}

/* ---- batch norm: hand case ------------------------------------------------------- */

/*
 * N=2, C=1, L=2, x = 1 2 | 3 4: mean 2.5, biased var (2.25+0.25+0.25+2.25)/4
 * = 1.25, unbiased 5/3.  eps = 0.75 makes invstd = 1/sqrt(2) exactly-ish.
 * gamma 2, beta 1: y = 2*(x-2.5)/sqrt(2) + 1 = 1 + sqrt(2)*(x-2.5).
 * running (0, 1), momentum 0.1: mean 0.25, var 0.9 + 0.1*5/3 = 1.0666...
 */
static void test_bn_hand(void) {
  double x[4] = {1, 2, 3, 4}, g[1] = {2}, b[1] = {1}, rm[1] = {0}, rv[1] = {1}, y[4], sm[1], si[1];
  CHECK(cnn_cpu_batch_norm_forward(CNN_FLOAT64, 2, 1, 2, x, g, b, rm, rv, 1, 0.1, 0.75, y, sm,
                                   si) == 0);
  double r2 = sqrt(2.0);
  check_arrays("bn hand y", y, (double[]){1 - 1.5 * r2, 1 - 0.5 * r2, 1 + 0.5 * r2, 1 + 1.5 * r2},
               4, 1e-14, 1e-14);
  CHECK_CLOSE(sm[0], 2.5, 1e-15);
  CHECK_CLOSE(si[0], 1 / r2, 1e-15);
  CHECK_CLOSE(rm[0], 0.25, 1e-15);
  CHECK_CLOSE(rv[0], 0.9 + 0.1 * 5.0 / 3.0, 1e-15);
  /* eval with those running stats: y = 2*(x - 0.25)/sqrt(rv + 0.75) + 1 */
  CHECK(cnn_cpu_batch_norm_forward(CNN_FLOAT64, 2, 1, 2, x, g, b, rm, rv, 0, 0.1, 0.75, y, NULL,
                                   NULL) == 0);
  CHECK_CLOSE(y[3], 2 * (4 - 0.25) / sqrt(rv[0] + 0.75) + 1, 1e-14);
  CHECK_CLOSE(rm[0], 0.25, 0); /* eval leaves running stats alone */
}

/* ---- batch norm: against a reference ----------------------------------------------- */

/* Gathers channel c of N x C x L into a row of N*L values. */
static void gather(const double *x, int64_t N, int64_t C, int64_t L, int64_t c, double *row) {
  for (int64_t n = 0; n < N; n++) memcpy(row + n * L, x + (n * C + c) * L, L * sizeof *row);
}

static void ref_bn(const double *x, int64_t N, int64_t C, int64_t L, const double *g,
                   const double *b, double eps, double *y, double *mean, double *var) {
  double *row = malloc(N * L * sizeof *row);
  for (int64_t c = 0; c < C; c++) {
    gather(x, N, C, L, c, row);
    double m = 0, v = 0;
    for (int64_t i = 0; i < N * L; i++) m += row[i];
    m /= N * L;
    for (int64_t i = 0; i < N * L; i++) v += (row[i] - m) * (row[i] - m);
    v /= N * L;
    mean[c] = m, var[c] = v;
    for (int64_t n = 0; n < N; n++)
      for (int64_t l = 0; l < L; l++) {
        int64_t i = (n * C + c) * L + l;
        y[i] = (x[i] - m) / sqrt(v + eps) * (g ? g[c] : 1) + (b ? b[c] : 0);
      }
  }
  free(row);
}

static void test_bn_forward(int64_t N, int64_t C, int64_t L) {
  int64_t n = N * C * L;
  double *x = rand_f64(n, 2, 0.5), *g = rand_f64(C, 1, 0), *b = rand_f64(C, 1, 0);
  double *rm = rand_f64(C, 1, 0), *rv = rand_f64(C, 0.5, 1), *rm0 = malloc(C * 8),
         *rv0 = malloc(C * 8);
  double *y = malloc(n * 8), *yr = malloc(n * 8), *mean = malloc(C * 8), *var = malloc(C * 8);
  double *sm = malloc(C * 8), *si = malloc(C * 8), eps = 1e-5, mom = 0.1;
  memcpy(rm0, rm, C * 8), memcpy(rv0, rv, C * 8);
  ref_bn(x, N, C, L, g, b, eps, yr, mean, var);
  CHECK(cnn_cpu_batch_norm_forward(CNN_FLOAT64, N, C, L, x, g, b, rm, rv, 1, mom, eps, y, sm, si) ==
        0);
  check_arrays("bn train y float64", y, yr, n, 1e-12, 1e-12);
  check_arrays("bn save_mean", sm, mean, C, 1e-14, 1e-14);
  for (int64_t c = 0; c < C; c++) {
    CHECK_CLOSE(si[c], 1 / sqrt(var[c] + eps), 1e-12);
    CHECK_CLOSE(rm[c], 0.9 * rm0[c] + 0.1 * mean[c], 1e-14);
    CHECK_CLOSE(rv[c], 0.9 * rv0[c] + 0.1 * var[c] * (N * L) / (N * L - 1.0), 1e-14);
  }
  /* float32, gamma/beta NULL, no running stats */
  float *xf = check_to_f32(x, n), *yf = malloc(n * 4), *smf = malloc(C * 4), *sif = malloc(C * 4);
  ref_bn(x, N, C, L, NULL, NULL, eps, yr, mean, var);
  CHECK(cnn_cpu_batch_norm_forward(CNN_FLOAT32, N, C, L, xf, NULL, NULL, NULL, NULL, 1, mom, eps,
                                   yf, smf, sif) == 0);
  double *y64 = check_to_f64(yf, n);
  check_arrays("bn train y float32", y64, yr, n, 1e-5, 1e-5);
  free(x), free(g), free(b), free(rm), free(rv), free(rm0), free(rv0), free(y), free(yr);
  free(mean), free(var), free(sm), free(si), free(xf), free(yf), free(smf), free(sif), free(y64);
}

/* The statistics come from one pass over x - K (K = the channel's first
 * value: batch_norm.c); a mean 1000 times the spread must not cancel. */
static void test_bn_offset(int64_t N, int64_t C, int64_t L) {
  int64_t n = N * C * L;
  double *x = rand_f64(n, 1, 1000), *yr = malloc(n * 8), *y = malloc(n * 8);
  double *mean = malloc(C * 8), *var = malloc(C * 8), *sm = malloc(C * 8), *si = malloc(C * 8);
  x[0] = 1003; /* channel 0's K far out in its tail */
  ref_bn(x, N, C, L, NULL, NULL, 1e-5, yr, mean, var);
  CHECK(cnn_cpu_batch_norm_forward(CNN_FLOAT64, N, C, L, x, NULL, NULL, NULL, NULL, 1, 0.1, 1e-5, y,
                                   sm, si) == 0);
  check_arrays("bn offset y float64", y, yr, n, 1e-9, 1e-9);
  float *xf = check_to_f32(x, n), *yf = malloc(n * 4), *smf = malloc(C * 4), *sif = malloc(C * 4);
  double *x32 = check_to_f64(xf, n); /* the float32 input, exactly */
  ref_bn(x32, N, C, L, NULL, NULL, 1e-5, yr, mean, var);
  CHECK(cnn_cpu_batch_norm_forward(CNN_FLOAT32, N, C, L, xf, NULL, NULL, NULL, NULL, 1, 0.1, 1e-5,
                                   yf, smf, sif) == 0);
  double *y64 = check_to_f64(yf, n);
  check_arrays("bn offset y float32", y64, yr, n, 1e-4, 1e-4);
  free(x), free(yr), free(y), free(mean), free(var), free(sm), free(si);
  free(xf), free(yf), free(smf), free(sif), free(x32), free(y64);
}

/* ---- batch norm: backward by finite differences ------------------------------------ */

typedef struct {
  int64_t N, C, L;
  int training;
  double *x, *g, *b, *rm, *rv, *dy;
} bn_case;

/* L = sum(y * dy); training uses batch stats, eval the (fixed) running stats. */
static double bn_loss(const bn_case *k) {
  int64_t n = k->N * k->C * k->L;
  double *y = malloc(n * 8);
  cnn_cpu_batch_norm_forward(CNN_FLOAT64, k->N, k->C, k->L, k->x, k->g, k->b,
                             k->training ? NULL : k->rm, k->training ? NULL : k->rv, k->training,
                             0.1, 1e-5, y, NULL, NULL);
  double l = check_dot(y, k->dy, n);
  free(y);
  return l;
}

static void numeric(bn_case *k, double *p, int64_t n, double *grad) {
  for (int64_t i = 0; i < n; i++) {
    double keep = p[i], h = 1e-6;
    p[i] = keep + h;
    double lp = bn_loss(k);
    p[i] = keep - h;
    double lm = bn_loss(k);
    p[i] = keep, grad[i] = (lp - lm) / (2 * h);
  }
}

static void test_bn_backward(int64_t N, int64_t C, int64_t L, int training) {
  int64_t n = N * C * L;
  bn_case k = {N,
               C,
               L,
               training,
               rand_f64(n, 2, 0.3),
               rand_f64(C, 1, 0),
               rand_f64(C, 1, 0),
               rand_f64(C, 1, 0),
               rand_f64(C, 0.5, 1),
               rand_f64(n, 1, 0)};
  double *y = malloc(n * 8), *sm = malloc(C * 8), *si = malloc(C * 8);
  double *dx = malloc(n * 8), *dg = malloc(C * 8), *db = malloc(C * 8);
  double *gx = malloc(n * 8), *gg = malloc(C * 8), *gb = malloc(C * 8);
  CHECK(cnn_cpu_batch_norm_forward(CNN_FLOAT64, N, C, L, k.x, k.g, k.b, k.rm, k.rv, training, 0,
                                   1e-5, y, sm, si) == 0); /* momentum 0: stats unchanged */
  int (*bwd)(cnn_dtype, int64_t, int64_t, int64_t, const void *, const void *, const void *,
             const void *, const void *, void *, void *, void *) =
      training ? cnn_cpu_batch_norm_backward : cnn_cpu_batch_norm_backward_eval;
  CHECK(bwd(CNN_FLOAT64, N, C, L, k.dy, k.x, k.g, sm, si, dx, dg, db) == 0);
  numeric(&k, k.x, n, gx), numeric(&k, k.g, C, gg), numeric(&k, k.b, C, gb);
  const char *mode = training ? "train" : "eval";
  char what[96];
  snprintf(what, sizeof what, "bn %s dx vs finite diff %lldx%lldx%lld", mode, (long long)N,
           (long long)C, (long long)L);
  check_arrays(what, dx, gx, n, 1e-6, 1e-5);
  snprintf(what, sizeof what, "bn %s dgamma vs finite diff", mode);
  check_arrays(what, dg, gg, C, 1e-6, 1e-5);
  snprintf(what, sizeof what, "bn %s dbeta vs finite diff", mode);
  check_arrays(what, db, gb, C, 1e-6, 1e-5);
  /* float32 against float64; only dx requested */
  float *xf = check_to_f32(k.x, n), *dyf = check_to_f32(k.dy, n), *gf = check_to_f32(k.g, C);
  float *smf = check_to_f32(sm, C), *sif = check_to_f32(si, C), *dxf = malloc(n * 4);
  CHECK(bwd(CNN_FLOAT32, N, C, L, dyf, xf, gf, smf, sif, dxf, NULL, NULL) == 0);
  double *dx64 = check_to_f64(dxf, n);
  snprintf(what, sizeof what, "bn %s dx float32", mode);
  check_arrays(what, dx64, dx, n, 1e-4, 1e-4);
  free(k.x), free(k.g), free(k.b), free(k.rm), free(k.rv), free(k.dy), free(y), free(sm);
  free(si), free(dx), free(dg), free(db), free(gx), free(gg), free(gb), free(xf), free(dyf);
  free(gf), free(smf), free(sif), free(dxf), free(dx64);
}

/* ---- batch norm fused with relu ---------------------------------------------------- */

/* The naive backward of relu(batch_norm(x)) in double: dy masked where the
 * output is <= 0, then the textbook formula over each channel gathered
 * into a row, with the statistics the forward used (batch or running). */
static void ref_bn_relu_backward(const double *x, const double *y, const double *dy, int64_t N,
                                 int64_t C, int64_t L, const double *g, const double *mean,
                                 const double *var, double eps, int training, double *dx,
                                 double *dg, double *db) {
  int64_t M = N * L;
  for (int64_t c = 0; c < C; c++) {
    double is = 1 / sqrt(var[c] + eps), sd = 0, sdx = 0;
    for (int64_t n = 0; n < N; n++)
      for (int64_t l = 0; l < L; l++) {
        int64_t i = (n * C + c) * L + l;
        double d = y[i] > 0 ? dy[i] : 0;
        sd += d, sdx += d * (x[i] - mean[c]) * is;
      }
    dg[c] = sdx, db[c] = sd;
    for (int64_t n = 0; n < N; n++)
      for (int64_t l = 0; l < L; l++) {
        int64_t i = (n * C + c) * L + l;
        double d = y[i] > 0 ? dy[i] : 0, xh = (x[i] - mean[c]) * is;
        dx[i] = g[c] * is * (d - (training ? sd / M + xh * sdx / M : 0));
      }
  }
}

/* One dtype: the fused kernels against the unfused ones (bit for bit: the
 * same float operations, relu's after; backward fed relu's gradient
 * y <= 0 ? 0 : dy) and against the double reference. */
static void bn_relu_case(int f64, int64_t N, int64_t C, int64_t L, int training, const double *x,
                         const double *g, const double *b, const double *dy, const double *rm,
                         const double *rv, const double *yr, const double *dxr, const double *dgr,
                         const double *dbr) {
  int64_t n = N * C * L;
  size_t es = f64 ? 8 : 4;
  void *X = f64 ? (void *)x : check_to_f32(x, n), *G = f64 ? (void *)g : check_to_f32(g, C);
  void *B = f64 ? (void *)b : check_to_f32(b, C), *DY = f64 ? (void *)dy : check_to_f32(dy, n);
  void *RM = f64 ? (void *)rm : check_to_f32(rm, C), *RV = f64 ? (void *)rv : check_to_f32(rv, C);
  char *y = malloc(n * es), *yu = malloc(n * es), *dyu = malloc(n * es), *dx = malloc(n * es),
       *dxu = malloc(n * es), *sm = malloc(C * es), *si = malloc(C * es), *dg = malloc(C * es),
       *dgu = malloc(C * es), *db = malloc(C * es), *dbu = malloc(C * es);
  cnn_dtype dt = f64 ? CNN_FLOAT64 : CNN_FLOAT32;
  /* momentum 0: the running statistics stay as they are for the other calls */
  CHECK(cnn_cpu_batch_norm_relu_forward(dt, N, C, L, X, G, B, RM, RV, training, 0, 1e-5, y, sm,
                                        si) == 0);
  CHECK(cnn_cpu_batch_norm_forward(dt, N, C, L, X, G, B, RM, RV, training, 0, 1e-5, yu, sm, si) ==
        0);
  for (int64_t i = 0; i < n; i++) {
    if (f64) {
      double v = ((double *)yu)[i], d = ((double *)DY)[i];
      ((double *)yu)[i] = v > 0 ? v : 0, ((double *)dyu)[i] = v > 0 ? d : 0;
    } else {
      float v = ((float *)yu)[i], d = ((float *)DY)[i];
      ((float *)yu)[i] = v > 0 ? v : 0, ((float *)dyu)[i] = v > 0 ? d : 0;
    }
  }
  CHECK(memcmp(y, yu, n * es) == 0);
  CHECK(cnn_cpu_batch_norm_relu_backward(dt, N, C, L, DY, y, X, G, sm, si, dx, dg, db, training) ==
        0);
  if (training)
    CHECK(cnn_cpu_batch_norm_backward(dt, N, C, L, dyu, X, G, sm, si, dxu, dgu, dbu) == 0);
  else
    CHECK(cnn_cpu_batch_norm_backward_eval(dt, N, C, L, dyu, X, G, sm, si, dxu, dgu, dbu) == 0);
  CHECK(memcmp(dx, dxu, n * es) == 0);
  CHECK(memcmp(dg, dgu, C * es) == 0 && memcmp(db, dbu, C * es) == 0);
  /* dx written over dy (the CPU backend's bn_dx_over_dy): the same bits */
  char *inout = malloc(n * es);
  memcpy(inout, DY, n * es);
  CHECK(cnn_cpu_batch_norm_relu_backward(dt, N, C, L, inout, y, X, G, sm, si, inout, dg, db,
                                         training) == 0);
  CHECK(memcmp(inout, dx, n * es) == 0);
  memcpy(inout, dyu, n * es);
  CHECK((training ? cnn_cpu_batch_norm_backward : cnn_cpu_batch_norm_backward_eval)(
            dt, N, C, L, inout, X, G, sm, si, inout, dgu, dbu) == 0);
  CHECK(memcmp(inout, dxu, n * es) == 0);
  free(inout);
  double tol = f64 ? 1e-10 : 1e-4;
  double *Y = f64 ? (double *)y : check_to_f64((float *)y, n),
         *DX = f64 ? (double *)dx : check_to_f64((float *)dx, n),
         *DG = f64 ? (double *)dg : check_to_f64((float *)dg, C),
         *DB = f64 ? (double *)db : check_to_f64((float *)db, C);
  const char *what = f64 ? "bn_relu float64" : "bn_relu float32";
  check_arrays(what, Y, yr, n, tol, tol);
  check_arrays(what, DX, dxr, n, tol, tol);
  check_arrays(what, DG, dgr, C, tol, tol);
  check_arrays(what, DB, dbr, C, tol, tol);
  if (!f64)
    free(X), free(G), free(B), free(DY), free(RM), free(RV), free(Y), free(DX), free(DG), free(DB);
  free(y), free(yu), free(dyu), free(dx), free(dxu), free(sm), free(si), free(dg), free(dgu);
  free(db), free(dbu);
}

static void test_bn_relu(int64_t N, int64_t C, int64_t L, int training) {
  int64_t n = N * C * L;
  double *x = rand_f64(n, 2, 0.3), *g = rand_f64(C, 1, 0.2), *b = rand_f64(C, 1, 0);
  double *dy = rand_f64(n, 1, 0), *rm = rand_f64(C, 1, 0), *rv = rand_f64(C, 0.5, 1);
  double *yr = malloc(n * 8), *mean = malloc(C * 8), *var = malloc(C * 8), *dxr = malloc(n * 8),
         *dgr = malloc(C * 8), *dbr = malloc(C * 8);
  if (training) {
    ref_bn(x, N, C, L, g, b, 1e-5, yr, mean, var);
  } else { /* eval: the running statistics */
    memcpy(mean, rm, C * 8), memcpy(var, rv, C * 8);
    for (int64_t i = 0; i < n; i++) {
      int64_t c = i / L % C;
      yr[i] = (x[i] - rm[c]) / sqrt(rv[c] + 1e-5) * g[c] + b[c];
    }
  }
  for (int64_t i = 0; i < n; i++) yr[i] = yr[i] > 0 ? yr[i] : 0;
  ref_bn_relu_backward(x, yr, dy, N, C, L, g, mean, var, 1e-5, training, dxr, dgr, dbr);
  for (int f64 = 1; f64 >= 0; f64--)
    bn_relu_case(f64, N, C, L, training, x, g, b, dy, rm, rv, yr, dxr, dgr, dbr);
  free(x), free(g), free(b), free(dy), free(rm), free(rv), free(yr), free(mean), free(var);
  free(dxr), free(dgr), free(dbr);
}

/* relu(bn(x) + r) in one pass (cnn_cpu_batch_norm_add_relu_forward)
 * against the unfused kernel, then + r and relu as the add_relu op does
 * it (cnn_relu of the rounded sum): bit for bit, both dtypes, the same
 * saved and running statistics; and against the double reference.  r is
 * spread so that sums fall on both sides of 0, and one r is NaN (kept). */
static void test_bn_add_relu(int64_t N, int64_t C, int64_t L, int training) {
  int64_t n = N * C * L;
  double *x = rand_f64(n, 2, 0.3), *g = rand_f64(C, 1, 0.2), *b = rand_f64(C, 1, 0);
  double *r = rand_f64(n, 2, 0), *rm = rand_f64(C, 1, 0), *rv = rand_f64(C, 0.5, 1);
  r[n / 2] = NAN;
  for (int f64 = 1; f64 >= 0; f64--) {
    cnn_dtype dt = f64 ? CNN_FLOAT64 : CNN_FLOAT32;
    size_t es = f64 ? 8 : 4;
    void *X = f64 ? (void *)x : check_to_f32(x, n), *G = f64 ? (void *)g : check_to_f32(g, C);
    void *B = f64 ? (void *)b : check_to_f32(b, C), *R = f64 ? (void *)r : check_to_f32(r, n);
    void *RM[2], *RV[2], *SM[2], *SI[2], *Y[2];
    for (int k = 0; k < 2; k++) {
      RM[k] = malloc(C * es), RV[k] = malloc(C * es), SM[k] = malloc(C * es);
      SI[k] = malloc(C * es), Y[k] = malloc(n * es);
      for (int64_t c = 0; c < C; c++)
        f64 ? (((double *)RM[k])[c] = rm[c], ((double *)RV[k])[c] = rv[c])
            : (((float *)RM[k])[c] = (float)rm[c], ((float *)RV[k])[c] = (float)rv[c]);
    }
    CHECK(cnn_cpu_batch_norm_add_relu_forward(dt, N, C, L, X, R, G, B, RM[0], RV[0], training, 0.1,
                                              1e-5, Y[0], SM[0], SI[0]) == 0);
    CHECK(cnn_cpu_batch_norm_forward(dt, N, C, L, X, G, B, RM[1], RV[1], training, 0.1, 1e-5, Y[1],
                                     SM[1], SI[1]) == 0);
    int below = 0;
    for (int64_t i = 0; i < n; i++) {
      if (f64) {
        double v = ((double *)Y[1])[i] + r[i];
        ((double *)Y[1])[i] = cnn_relu(v), below += v <= 0;
      } else {
        float v = ((float *)Y[1])[i] + ((float *)R)[i];
        ((float *)Y[1])[i] = cnn_relu_f(v), below += v <= 0;
      }
    }
    CHECK(below > 0 && below < n); /* both sides of the kink */
    CHECK(memcmp(Y[0], Y[1], n * es) == 0);
    CHECK(memcmp(SM[0], SM[1], C * es) == 0 && memcmp(SI[0], SI[1], C * es) == 0);
    CHECK(memcmp(RM[0], RM[1], C * es) == 0 && memcmp(RV[0], RV[1], C * es) == 0);
    CHECK(f64 ? isnan(((double *)Y[0])[n / 2]) : isnan(((float *)Y[0])[n / 2]));
    for (int k = 0; k < 2; k++) free(RM[k]), free(RV[k]), free(SM[k]), free(SI[k]), free(Y[k]);
    if (!f64) free(X), free(G), free(B), free(R);
  }
  free(x), free(g), free(b), free(r), free(rm), free(rv);
}

/* relu(bn(x)) where bn(x) is NaN, -0.0, +0.0 or tiny: y as cnn_relu_f of
 * the unfused output, and dx = 0 exactly where the relu blocks dy (y <= 0)
 * while a NaN output lets dy through (its dx is NaN: x - mean is).  One channel, gamma 1, beta 0, eval statistics mean 0, var 1 -
 * eps, so bn(x) = x exactly. */
static void test_bn_relu_special(void) {
  enum { N = 1, C = 1, L = 21 };
  float x[L], dy[L], y[L], yu[L], dx[L], rm[1] = {0}, rv[1] = {1 - 1e-5f}, sm[1], si[1], dg[1],
                                         db[1];
  for (int i = 0; i < L; i++) x[i] = (float)(i % 5) - 2.0f, dy[i] = 1.0f + (float)i;
  x[3] = -0.0f, x[4] = 0.0f, x[5] = 1e-30f, x[6] = -1e-30f, x[19] = NAN;
  CHECK(cnn_cpu_batch_norm_relu_forward(CNN_FLOAT32, N, C, L, x, NULL, NULL, rm, rv, 0, 0, 1e-5, y,
                                        sm, si) == 0);
  CHECK(cnn_cpu_batch_norm_forward(CNN_FLOAT32, N, C, L, x, NULL, NULL, rm, rv, 0, 0, 1e-5, yu, sm,
                                   si) == 0);
  for (int i = 0; i < L; i++) {
    float want = cnn_relu_f(yu[i]);
    CHECK(memcmp(&y[i], &want, 4) == 0 || (isnan(y[i]) && isnan(want)));
  }
  CHECK(isnan(y[19]) && !signbit(y[3]) && y[3] == 0 && y[6] == 0);
  CHECK(cnn_cpu_batch_norm_relu_backward(CNN_FLOAT32, N, C, L, dy, y, x, NULL, sm, si, dx, dg, db,
                                         0) == 0);
  for (int i = 0; i < L; i++) {
    if (isnan(y[i]))
      CHECK(isnan(dx[i])); /* dy passed, times 0 * (x - mean) = NaN */
    else
      CHECK(y[i] > 0 ? dx[i] == dy[i] * si[0] : dx[i] == 0);
  }
}

/* float32 training with every argument (gamma, beta, running statistics,
 * the fused relu's output in backward) against the float64 path on the
 * same values; and the same bits at 1 and 2 threads (the AVX-512 passes
 * split the images into runs by N alone: batch_norm_planes.c).  N = 37
 * makes 13 runs of 3 images and a last one of 1. */
typedef struct {
  float *y, *sm, *si, *rm, *rv, *dx, *dg, *db;
} bn_f32_out;

static void bn_f32_run(int64_t N, int64_t C, int64_t L, const float *x, const float *g,
                       const float *b, const float *dy, int relu, bn_f32_out *o) {
  for (int64_t c = 0; c < C; c++) o->rm[c] = 0.25f * (float)c, o->rv[c] = 1.5f;
  if (relu) {
    CHECK(cnn_cpu_batch_norm_relu_forward(CNN_FLOAT32, N, C, L, x, g, b, o->rm, o->rv, 1, 0.1, 1e-5,
                                          o->y, o->sm, o->si) == 0);
    CHECK(cnn_cpu_batch_norm_relu_backward(CNN_FLOAT32, N, C, L, dy, o->y, x, g, o->sm, o->si,
                                           o->dx, o->dg, o->db, 1) == 0);
  } else {
    CHECK(cnn_cpu_batch_norm_forward(CNN_FLOAT32, N, C, L, x, g, b, o->rm, o->rv, 1, 0.1, 1e-5,
                                     o->y, o->sm, o->si) == 0);
    CHECK(cnn_cpu_batch_norm_backward(CNN_FLOAT32, N, C, L, dy, x, g, o->sm, o->si, o->dx, o->dg,
                                      o->db) == 0);
  }
}

static bn_f32_out bn_f32_alloc(int64_t n, int64_t C) {
  bn_f32_out o = {malloc(n * 4), malloc(C * 4), malloc(C * 4), malloc(C * 4),
                  malloc(C * 4), malloc(n * 4), malloc(C * 4), malloc(C * 4)};
  return o;
}

static void bn_f32_free(bn_f32_out *o) {
  free(o->y), free(o->sm), free(o->si), free(o->rm), free(o->rv), free(o->dx), free(o->dg);
  free(o->db);
}

static void check_f32_near(const char *what, const float *a, const double *want, int64_t n) {
  double *a64 = check_to_f64(a, n);
  check_arrays(what, a64, want, n, 2e-5, 2e-5);
  free(a64);
}

static void test_bn_f32_all_args(int64_t N, int64_t C, int64_t L, int relu) {
  int64_t n = N * C * L;
  double *x = rand_f64(n, 2, 0.5), *g = rand_f64(C, 1, 0.2), *b = rand_f64(C, 1, 0);
  double *dy = rand_f64(n, 1, 0), rm[64], rv[64], sm[64], si[64], dg[64], db[64];
  double *y = malloc(n * 8), *dx = malloc(n * 8);
  float *xf = check_to_f32(x, n), *gf = check_to_f32(g, C), *bf = check_to_f32(b, C);
  float *dyf = check_to_f32(dy, n);
  double *x64 = check_to_f64(xf, n), *g64 = check_to_f64(gf, C), *b64 = check_to_f64(bf, C);
  double *dy64 = check_to_f64(dyf, n);
  assert(C <= 64);
  for (int64_t c = 0; c < C; c++) rm[c] = 0.25 * (double)c, rv[c] = 1.5;
  if (relu) {
    CHECK(cnn_cpu_batch_norm_relu_forward(CNN_FLOAT64, N, C, L, x64, g64, b64, rm, rv, 1, 0.1, 1e-5,
                                          y, sm, si) == 0);
    CHECK(cnn_cpu_batch_norm_relu_backward(CNN_FLOAT64, N, C, L, dy64, y, x64, g64, sm, si, dx, dg,
                                           db, 1) == 0);
  } else {
    CHECK(cnn_cpu_batch_norm_forward(CNN_FLOAT64, N, C, L, x64, g64, b64, rm, rv, 1, 0.1, 1e-5, y,
                                     sm, si) == 0);
    CHECK(cnn_cpu_batch_norm_backward(CNN_FLOAT64, N, C, L, dy64, x64, g64, sm, si, dx, dg, db) ==
          0);
  }
  int threads = cnn_get_num_threads();
  bn_f32_out two = bn_f32_alloc(n, C), one = bn_f32_alloc(n, C);
  cnn_set_num_threads(2);
  bn_f32_run(N, C, L, xf, gf, bf, dyf, relu, &two);
  cnn_set_num_threads(1);
  bn_f32_run(N, C, L, xf, gf, bf, dyf, relu, &one);
  cnn_set_num_threads(threads);
  check_f32_near("bn f32 y", two.y, y, n);
  check_f32_near("bn f32 save_mean", two.sm, sm, C);
  check_f32_near("bn f32 save_invstd", two.si, si, C);
  check_f32_near("bn f32 running_mean", two.rm, rm, C);
  check_f32_near("bn f32 running_var", two.rv, rv, C);
  check_f32_near("bn f32 dx", two.dx, dx, n);
  check_f32_near("bn f32 dgamma", two.dg, dg, C);
  check_f32_near("bn f32 dbeta", two.db, db, C);
  CHECK(memcmp(one.y, two.y, n * 4) == 0 && memcmp(one.sm, two.sm, C * 4) == 0);
  CHECK(memcmp(one.si, two.si, C * 4) == 0 && memcmp(one.rm, two.rm, C * 4) == 0);
  CHECK(memcmp(one.rv, two.rv, C * 4) == 0 && memcmp(one.dx, two.dx, n * 4) == 0);
  CHECK(memcmp(one.dg, two.dg, C * 4) == 0 && memcmp(one.db, two.db, C * 4) == 0);
  bn_f32_free(&two), bn_f32_free(&one);
  free(x), free(g), free(b), free(dy), free(y), free(dx), free(xf), free(gf), free(bf), free(dyf);
  free(x64), free(g64), free(b64), free(dy64);
}

/* The float32 cases through the AVX-512 bodies (where this CPU has them;
 * on an AVX2-only CPU memory order runs batch_norm_planes_avx2.c's): as
 * chosen, then training in memory order (batch_norm_planes.c) forced,
 * then channel by channel; then through the portable loops. */
static void test_bn_both_paths(void (*cases)(void)) {
  int had = cnn_cpu_use_avx512();
  cases(); /* the small shapes here: channel order, by batch_norm_planes.c's rule */
  CHECK(cnn_cpu_bn_allow_planes(2) == 1);
  cases();
  CHECK(cnn_cpu_bn_allow_planes(0) == 2);
  cases();
  CHECK(cnn_cpu_bn_allow_planes(1) == 0);
  CHECK(cnn_cpu_allow_avx512(0) == 0);
  cases();
  cnn_cpu_allow_avx512(1);
  CHECK(cnn_cpu_use_avx512() == had);
}

static void bn_cases(void) {
  test_bn_forward(2, 3, 35);
  test_bn_forward(7, 5, 1);
  test_bn_forward(16, 4, 49);
  test_bn_forward(3, 2, 784); /* full blocks of the partial sums, and a tail */
  test_bn_forward(3, 5, 17);
  test_bn_forward(5, 3, 64);
  test_bn_offset(4, 3, 50);
  test_bn_offset(3, 2, 33);
  for (int training = 1; training >= 0; training--) {
    test_bn_backward(2, 3, 35, training);
    test_bn_backward(5, 4, 1, training);
    test_bn_backward(3, 2, 50, training);
    test_bn_backward(3, 3, 7, training);
  }
  test_bn_forward(2, 3, 2500); /* float32: rows longer than a block of partial sums */
  test_bn_backward(1, 2, 1030, 1);
  for (int training = 1; training >= 0; training--) {
    test_bn_relu(2, 3, 35, training);
    test_bn_relu(5, 4, 1, training);
    test_bn_relu(3, 2, 1100, training);
    test_bn_relu(4, 5, 17, training);
    test_bn_relu(3, 3, 33, training);
    test_bn_relu(6, 2, 64, training);
  }
  test_bn_relu_special();
  for (int training = 1; training >= 0; training--) {
    test_bn_add_relu(2, 3, 35, training);
    test_bn_add_relu(5, 4, 1, training);    /* rows: a channels-last layout */
    test_bn_add_relu(64, 4, 64, training);  /* ResNet-20's 8x8 planes */
    test_bn_add_relu(3, 2, 1100, training); /* past a block of partial sums */
  }
  for (int relu = 0; relu <= 1; relu++) {
    test_bn_f32_all_args(37, 3, 5, relu);
    test_bn_f32_all_args(64, 4, 64, relu); /* ResNet-20's 8x8 planes */
    test_bn_f32_all_args(17, 2, 1100, relu);
  }
}

/* Bad arguments are the op's to report (core/ops/nn_norm.c; the kernels
 * assert): the cases the kernel used to check. */
static void test_bn_errors(void) {
  double x[3] = {1, 2, 3}, y[3], rm[3] = {0}, rv[3] = {1, 1, 1};
  cnn_tensor *t = cnn_zeros(2, (int64_t[]){1, 3}, CNN_FLOAT64, CNN_DEVICE_CPU);
  cnn_tensor *tu = cnn_zeros(2, (int64_t[]){2, 3}, CNN_UINT8, CNN_DEVICE_CPU);
  cnn_tensor *trm = cnn_zeros(1, (int64_t[]){3}, CNN_FLOAT64, CNN_DEVICE_CPU);
  cnn_tensor *trv = cnn_full(1, (int64_t[]){3}, 1, CNN_FLOAT64, CNN_DEVICE_CPU);
  check_error(cnn_batch_norm(t, trm, trv, NULL, NULL, true, 0.1, 1e-5) == NULL,
              "batch_norm: expected more than 1 value per channel when training, got input 1x3");
  check_error(cnn_batch_norm(t, NULL, NULL, NULL, NULL, false, 0.1, 1e-5) == NULL,
              "batch_norm: evaluation mode needs running_mean and running_var");
  check_error(cnn_batch_norm(tu, trm, trv, NULL, NULL, false, 0.1, 1e-5) == NULL,
              "batch_norm: expected a float input of at least 2 dims (N x C ...), got 2x3 uint8");
  cnn_tensor_release(t), cnn_tensor_release(tu), cnn_tensor_release(trm), cnn_tensor_release(trv);
  /* eval with one value per channel is fine */
  CHECK(cnn_cpu_batch_norm_forward(CNN_FLOAT64, 1, 3, 1, x, NULL, NULL, rm, rv, 0, 0.1, 0, y, NULL,
                                   NULL) == 0);
  CHECK_CLOSE(y[2], 3, 1e-15);
}

/* ---- softmax ---------------------------------------------------------------------------- */

/* softmax(1, 2, 3) = e^(x-3) / (e^-2 + e^-1 + 1) = 0.0900305732, 0.2447284711,
 * 0.6652409558; log_softmax = x - 3 - log(1.4076...) = -2.4076059645,
 * -1.4076059645, -0.4076059645.  Shifting by 1000 changes nothing. */
static void test_softmax_hand(void) {
  double x[6] = {1, 2, 3, 1001, 1002, 1003}, y[6];
  double p[3] = {0.09003057317038046, 0.24472847105479767, 0.6652409557748219};
  double lp[3] = {-2.4076059644443806, -1.4076059644443806, -0.4076059644443806};
  CHECK(cnn_cpu_softmax_forward(CNN_FLOAT64, 2, 3, 1, 0, x, y) == 0);
  check_arrays("softmax 1 2 3", y, p, 3, 1e-15, 1e-14);
  check_arrays("softmax 1001 1002 1003", y + 3, p, 3, 1e-15, 1e-14);
  CHECK(cnn_cpu_softmax_forward(CNN_FLOAT64, 2, 3, 1, 1, x, y) == 0);
  check_arrays("log_softmax 1 2 3", y, lp, 3, 1e-14, 1e-14);
  check_arrays("log_softmax 1001 1002 1003", y + 3, lp, 3, 1e-12, 1e-14);
  float xf[3] = {1000, 1001, 1002}, yf[3];
  CHECK(cnn_cpu_softmax_forward(CNN_FLOAT32, 1, 3, 1, 0, xf, yf) == 0);
  CHECK_CLOSE(yf[2], p[2], 1e-6);
  cnn_tensor *ti = cnn_zeros(1, (int64_t[]){3}, CNN_INT64, CNN_DEVICE_CPU);
  check_error(cnn_softmax(ti, 0) == NULL, "softmax: input dtype int64 is not supported");
  check_error(cnn_log_softmax(ti, 0) == NULL, "log_softmax: input dtype int64 is not supported");
  cnn_tensor_release(ti);
}

/* Reference: gather each row (stride inner) and apply the textbook formula. */
static void ref_softmax(int64_t outer, int64_t D, int64_t inner, int is_log, const double *x,
                        double *y) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double m = -INFINITY, sum = 0;
      for (int64_t d = 0; d < D; d++) m = fmax(m, x[(o * D + d) * inner + i]);
      for (int64_t d = 0; d < D; d++) sum += exp(x[(o * D + d) * inner + i] - m);
      for (int64_t d = 0; d < D; d++) {
        double v = x[(o * D + d) * inner + i] - m;
        y[(o * D + d) * inner + i] = is_log ? v - log(sum) : exp(v) / sum;
      }
    }
}

static void test_softmax(int64_t outer, int64_t D, int64_t inner, int is_log) {
  int64_t n = outer * D * inner;
  double *x = rand_f64(n, 4, 0), *dy = rand_f64(n, 1, 0), *y = malloc(n * 8), *yr = malloc(n * 8);
  double *dx = malloc(n * 8), *g = malloc(n * 8), *tmp = malloc(n * 8);
  char what[96];
  const char *op = is_log ? "log_softmax" : "softmax";
  ref_softmax(outer, D, inner, is_log, x, yr);
  CHECK(cnn_cpu_softmax_forward(CNN_FLOAT64, outer, D, inner, is_log, x, y) == 0);
  snprintf(what, sizeof what, "%s %lldx%lldx%lld float64", op, (long long)outer, (long long)D,
           (long long)inner);
  check_arrays(what, y, yr, n, 1e-14, 1e-13);
  CHECK(cnn_cpu_softmax_backward(CNN_FLOAT64, outer, D, inner, is_log, y, dy, dx) == 0);
  for (int64_t i = 0; i < n; i++) {
    double keep = x[i], h = 1e-6;
    x[i] = keep + h, cnn_cpu_softmax_forward(CNN_FLOAT64, outer, D, inner, is_log, x, tmp);
    double lp = check_dot(tmp, dy, n);
    x[i] = keep - h, cnn_cpu_softmax_forward(CNN_FLOAT64, outer, D, inner, is_log, x, tmp);
    double lm = check_dot(tmp, dy, n);
    x[i] = keep, g[i] = (lp - lm) / (2 * h);
  }
  snprintf(what, sizeof what, "%s backward vs finite diff %lldx%lldx%lld", op, (long long)outer,
           (long long)D, (long long)inner);
  check_arrays(what, dx, g, n, 1e-7, 1e-6);
  float *xf = check_to_f32(x, n), *yf = malloc(n * 4), *dyf = check_to_f32(dy, n),
        *dxf = malloc(n * 4);
  CHECK(cnn_cpu_softmax_forward(CNN_FLOAT32, outer, D, inner, is_log, xf, yf) == 0);
  CHECK(cnn_cpu_softmax_backward(CNN_FLOAT32, outer, D, inner, is_log, yf, dyf, dxf) == 0);
  double *y64 = check_to_f64(yf, n), *dx64 = check_to_f64(dxf, n);
  snprintf(what, sizeof what, "%s float32", op);
  check_arrays(what, y64, yr, n, 1e-6, 1e-5);
  snprintf(what, sizeof what, "%s backward float32", op);
  check_arrays(what, dx64, dx, n, 1e-5, 1e-4);
  free(x), free(dy), free(y), free(yr), free(dx), free(g), free(tmp), free(xf), free(yf);
  free(dyf), free(dxf), free(y64), free(dx64);
}

int main(void) {
  test_bn_hand();
  test_bn_both_paths(bn_cases);
  test_bn_errors();
  test_softmax_hand();
  for (int is_log = 0; is_log <= 1; is_log++) {
    test_softmax(4, 7, 1, is_log);
    test_softmax(2, 5, 3, is_log);
    test_softmax(1, 1, 6, is_log);
    test_softmax(3, 10, 2, is_log);
  }
  return check_report("test_bn_softmax");
}
