/*
 * test_gpu_timing_fake.c -- the CUDA paths of timing and batched products,
 * run on the fake CUDA device (tests/gpu/fake_cuda*.c, libcnn_fake_cuda.so).
 *
 * The module is $CNNSH_CUDA_MODULE when set, else the fake module of this
 * build tree (<this test's folder>/gpu/libcnn_fake_cuda.so, built in every
 * configuration by tests/gpu/CMakeLists.txt).  It must run: a missing
 * module, or one through which CUDA is not usable, is a failure.
 *
 *  - Timer on cuda:0: the fake's events are host timestamps, so two marks
 *    around a 20 ms sleep must lie within the test's own clock readings
 *    taken around the marks; cuda:1 is refused.
 *  - matmul/bmm on 'cuda' against a naive CPU loop over the logical
 *    elements of the CPU operands (cnn_tensor_get, double accumulation),
 *    with batch broadcast, transposed views, collapsible batch dims,
 *    non-progression layouts and an empty inner dimension.  The fake
 *    exports fake_gemm_batched_calls: each case also checks whether core
 *    took the one-call strided-batched path (offsets in arithmetic
 *    progression) or the per-batch loop.
 */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "cnn.h"

#define SH(...) ((int64_t[]){__VA_ARGS__})

static long *batched_calls; /* the fake module's counter */

/* ---- setup ------------------------------------------------------------------------ */

static const char *module_path(char *buf, size_t n) {
  const char *env = getenv("CNNSH_CUDA_MODULE");
  if (env && *env) return env;
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) return NULL;
  exe[len] = 0;
  snprintf(buf, n, "%s/gpu/libcnn_fake_cuda.so", dirname(exe));
  return access(buf, R_OK) == 0 ? buf : NULL;
}

/* 0 ready, 1 fail */
static int setup(void) {
  char buf[PATH_MAX + 32];
  const char *path = module_path(buf, sizeof buf);
  if (!path) {
    fprintf(stderr, "test_gpu_timing_fake: no fake CUDA module (build target cnn_fake_cuda)\n");
    return 1;
  }
  setenv("CNNSH_CUDA_MODULE", path, 1);
  const char *why = cnn_cuda_unavailable_reason();
  if (why) {
    fprintf(stderr, "test_gpu_timing_fake: %s: %s\n", path, why);
    return 1;
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  batched_calls = h ? dlsym(h, "fake_gemm_batched_calls") : NULL;
  if (!batched_calls) {
    fprintf(stderr, "test_gpu_timing_fake: %s is not the fake module (no counter)\n", path);
    return 1;
  }
  return 0;
}

/* ---- timer -------------------------------------------------------------------------- */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_timer(void) {
  cnn_timer *t = cnn_timer_new((cnn_device){CNN_CUDA, 0});
  CHECK(t != NULL);
  if (!t) return;
  double r0 = now();
  int m0 = cnn_timer_mark(t);
  double r1 = now();
  struct timespec ts = {0, 20 * 1000000L};
  nanosleep(&ts, NULL);
  double r2 = now();
  int m1 = cnn_timer_mark(t);
  double r3 = now();
  double s = -1, v[2] = {-1, -1};
  CHECK(m0 == 0 && m1 == 1);
  CHECK(cnn_timer_elapsed(t, m0, m1, &s) == 0);
  /* events keep nanoseconds and elapsed goes through milliseconds: 1 us slack */
  CHECK(s >= r2 - r1 - 1e-6 && s <= r3 - r0 + 1e-6);
  CHECK(cnn_timer_seconds(t, v) == 0);
  CHECK(v[0] == 0 && fabs(v[1] - s) < 1e-9);
  cnn_timer_reset(t);
  CHECK(cnn_timer_count(t) == 0);
  CHECK(cnn_timer_mark(t) == 0);
  cnn_timer_free(t);
  CHECK(cnn_timer_new((cnn_device){CNN_CUDA, 1}) == NULL);
  CHECK(strcmp(cnn_error(), "timer: cuda:1 does not exist (1 CUDA device)") == 0);
}

/* ---- products ----------------------------------------------------------------------- */

typedef cnn_tensor *(*view_fn)(cnn_tensor *base);

static cnn_tensor *values(int nd, const int64_t *shape, cnn_dtype dt, int seed) {
  cnn_tensor *t = cnn_empty(nd, shape, dt, CNN_DEVICE_CPU);
  for (int64_t i = 0; i < cnn_tensor_numel(t); i++)
    cnn_tensor_set(t, i, cos(0.37 * (double)i + seed));
  return t;
}

/* row-major linear index into t (>= 2-D) of output batch `ob` (shape oshape,
 * onb dims, broadcast to t's batch dims), row i, column j */
static int64_t index_of(const cnn_tensor *t, int onb, const int64_t *oshape, int64_t ob, int64_t i,
                        int64_t j) {
  int tnb = t->ndim - 2;
  int64_t lin = 0, mul = 1;
  for (int d = onb - 1; d >= 0; d--) {
    int64_t id = ob % oshape[d];
    ob /= oshape[d];
    int td = d - (onb - tnb);
    if (td < 0) continue;
    lin += (t->shape[td] == 1 ? 0 : id) * mul;
    mul *= t->shape[td];
  }
  return (lin * t->shape[tnb] + i) * t->shape[tnb + 1] + j;
}

/* naive product of the CPU views a (..., M, K) and b (..., K, N) compared
 * with got (contiguous, the broadcast batch shape then M x N) */
static void compare(const char *what, const cnn_tensor *a, const cnn_tensor *b, const double *got,
                    int64_t n_got, double tol) {
  int onb = (a->ndim > b->ndim ? a->ndim : b->ndim) - 2;
  int64_t oshape[CNN_MAX_DIMS], nbatch = 1;
  for (int d = 0; d < onb; d++) {
    int da = d - (onb - (a->ndim - 2)), db = d - (onb - (b->ndim - 2));
    int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
    oshape[d] = sa > sb ? sa : sb;
    nbatch *= oshape[d];
  }
  int64_t M = a->shape[a->ndim - 2], K = a->shape[a->ndim - 1], N = b->shape[b->ndim - 1];
  CHECK(n_got == nbatch * M * N);
  if (n_got != nbatch * M * N) return;
  double *ref = malloc(sizeof *ref * (size_t)(n_got ? n_got : 1));
  for (int64_t ob = 0; ob < nbatch; ob++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double s = 0;
        for (int64_t q = 0; q < K; q++)
          s += cnn_tensor_get(a, index_of(a, onb, oshape, ob, i, q)) *
               cnn_tensor_get(b, index_of(b, onb, oshape, ob, q, j));
        ref[(ob * M + i) * N + j] = s;
      }
  check_arrays(what, got, ref, n_got, tol, tol);
  free(ref);
}

/* one case: bases of shapes sa, sb; views va, vb made on both devices;
 * `batched` says which path core must take */
static void run_case(const char *what, int nda, const int64_t *sa, view_fn va, int ndb,
                     const int64_t *sb, view_fn vb, cnn_dtype dt, bool use_bmm, bool batched) {
  cnn_device cuda = {CNN_CUDA, 0};
  cnn_tensor *a = values(nda, sa, dt, 1), *b = values(ndb, sb, dt, 2);
  /* empty bases are made on the device directly (nothing to copy) */
  cnn_tensor *ga = cnn_tensor_numel(a) ? cnn_to_device(a, cuda) : cnn_empty(nda, sa, dt, cuda);
  cnn_tensor *gb = cnn_tensor_numel(b) ? cnn_to_device(b, cuda) : cnn_empty(ndb, sb, dt, cuda);
  cnn_tensor *ca = va ? va(a) : (cnn_tensor_retain(a), a),
             *cb = vb ? vb(b) : (cnn_tensor_retain(b), b);
  cnn_tensor *da = va ? va(ga) : (cnn_tensor_retain(ga), ga),
             *db = vb ? vb(gb) : (cnn_tensor_retain(gb), gb);
  long before = *batched_calls;
  cnn_tensor *out = use_bmm ? cnn_bmm(da, db) : cnn_matmul(da, db);
  if (!out) fprintf(stderr, "%s: %s\n", what, cnn_error());
  CHECK(out != NULL);
  if (out) {
    CHECK(cnn_tensor_device(out).type == CNN_CUDA);
    int64_t n = cnn_tensor_numel(out);
    double *got = malloc(sizeof *got * (size_t)(n ? n : 1));
    cnn_tensor *h = cnn_to_device(out, CNN_DEVICE_CPU), *h64 = cnn_to_dtype(h, CNN_FLOAT64);
    cnn_tensor_copy_to_host(h64, got);
    /* float16/bfloat16: inputs are exact half values, the output is rounded once */
    double tol = dt == CNN_FLOAT64 ? 1e-12 : dt == CNN_FLOAT32 ? 1e-5 : 1e-2;
    compare(what, ca, cb, got, n, tol);
    free(got);
    cnn_tensor_release(h);
    cnn_tensor_release(h64);
  }
  if ((*batched_calls > before) != batched)
    fprintf(stderr, "%s: expected the %s path\n", what, batched ? "batched" : "per-batch");
  CHECK((*batched_calls > before) == batched);
  cnn_tensor *all[] = {a, b, ga, gb, ca, cb, da, db, out};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) cnn_tensor_release(all[i]);
}

static cnn_tensor *t12(cnn_tensor *x) { return cnn_transpose(x, 1, 2); }
static cnn_tensor *t01(cnn_tensor *x) { return cnn_transpose(x, 0, 1); }
static cnn_tensor *first3(cnn_tensor *x) { return cnn_narrow(x, 1, 0, 3); }
static cnn_tensor *expand4(cnn_tensor *x) { return cnn_expand(x, 3, SH(4, -1, -1)); }

static void test_products(void) {
  cnn_dtype f32 = CNN_FLOAT32, f64 = CNN_FLOAT64;
  run_case("bmm 4x3x5 @ 4x5x2", 3, SH(4, 3, 5), NULL, 3, SH(4, 5, 2), NULL, f32, true, true);
  run_case("matmul 3x5 @ 4x5x2 (a broadcast)", 2, SH(3, 5), NULL, 3, SH(4, 5, 2), NULL, f32, false,
           true);
  run_case("matmul 2x3x4x5 @ 5x6 (batch dims collapse)", 4, SH(2, 3, 4, 5), NULL, 2, SH(5, 6), NULL,
           f32, false, true);
  run_case("bmm 4x3x5(T) @ 4x5x2(T)", 3, SH(4, 5, 3), t12, 3, SH(4, 2, 5), t12, f32, true, true);
  run_case("matmul 4x3x5 (batch-transposed view, ld 20) @ 5x2", 3, SH(3, 4, 5), t01, 2, SH(5, 2),
           NULL, f32, false, true);
  run_case("matmul 2x3x3x5 (narrowed batch: no progression) @ 5x2", 4, SH(2, 4, 3, 5), first3, 2,
           SH(5, 2), NULL, f32, false, false);
  run_case("matmul 2x1x3x5 @ 1x4x5x2 (both broadcast: no progression)", 4, SH(2, 1, 3, 5), NULL, 4,
           SH(1, 4, 5, 2), NULL, f32, false, false);
  run_case("bmm float64 expanded 4x3x5 (stride 0) @ 4x5x2(T)", 3, SH(1, 3, 5), expand4, 3,
           SH(4, 2, 5), t12, f64, true, true);
  run_case("bmm 3x2x0 @ 3x0x4 (empty inner dim)", 3, SH(3, 2, 0), NULL, 3, SH(3, 0, 4), NULL, f32,
           true, true);
  run_case("bmm float16 4x3x5 @ 4x5x2(T)", 3, SH(4, 3, 5), NULL, 3, SH(4, 2, 5), t12, CNN_FLOAT16,
           true, true);
  run_case("matmul bfloat16 3x5 @ 2x5x4 (a broadcast)", 2, SH(3, 5), NULL, 3, SH(2, 5, 4), NULL,
           CNN_BFLOAT16, false, true);
  run_case("bmm 1x3x5 @ 1x5x2 (one batch: plain gemm)", 3, SH(1, 3, 5), NULL, 3, SH(1, 5, 2), NULL,
           f32, true, false);
}

int main(void) {
  int rc = setup();
  if (rc) return rc;
  test_timer();
  test_products();
  return check_report("test_gpu_timing_fake");
}
