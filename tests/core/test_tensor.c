/*
 * test_tensor.c -- tensors without Lua: creation, strides, views, copies,
 * casts, the RNG and error messages, checked against hand-computed values.
 */
#include "check.h"
#include "cnn.h"
#include "tensor_internal.h" /* cnn_tensor_valid */

#include <math.h>
#include <string.h>

static cnn_tensor *iota(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  cnn_tensor *t = cnn_arange(0, (double)n, 1, CNN_FLOAT32);
  cnn_tensor *v = cnn_view(t, ndim, shape);
  cnn_tensor_release(t);
  return v;
}

static void test_creation(void) {
  cnn_tensor *z = cnn_zeros(2, (int64_t[]){2, 3}, CNN_FLOAT32, CNN_DEVICE_CPU);
  CHECK(z && z->ndim == 2 && cnn_tensor_numel(z) == 6 && z->stride[0] == 3 && z->stride[1] == 1);
  CHECK(cnn_tensor_get(z, 5) == 0);
  cnn_tensor *l = cnn_linspace(0, 1, 5, CNN_FLOAT64);
  CHECK_CLOSE(cnn_tensor_get(l, 1), 0.25, 0);
  CHECK_CLOSE(cnn_tensor_get(l, 4), 1.0, 0);
  cnn_tensor *a = cnn_arange(1, 2, 0.25, CNN_FLOAT64); /* 1, 1.25, 1.5, 1.75 */
  CHECK(a && cnn_tensor_numel(a) == 4);
  CHECK_CLOSE(cnn_tensor_get(a, 3), 1.75, 0);
  cnn_tensor *e = cnn_eye(3, 2, CNN_INT64);
  CHECK(cnn_tensor_get(e, 0) == 1 && cnn_tensor_get(e, 1) == 0 && cnn_tensor_get(e, 3) == 1 &&
        cnn_tensor_get(e, 5) == 0);
  cnn_tensor *f = cnn_full(1, (int64_t[]){3}, 2.5, CNN_FLOAT32, CNN_DEVICE_CPU);
  CHECK_CLOSE(cnn_tensor_get(f, 2), 2.5, 0);
  cnn_tensor_release(z), cnn_tensor_release(l), cnn_tensor_release(a), cnn_tensor_release(e);
  cnn_tensor_release(f);
}

static void test_bad_sizes(void) {
  CHECK(cnn_zeros(2, (int64_t[]){-1, 3}, CNN_FLOAT32, CNN_DEVICE_CPU) == NULL);
  CHECK(strstr(cnn_error(), "negative") != NULL);
  CHECK(cnn_zeros(2, (int64_t[]){INT64_MAX / 2, 4}, CNN_FLOAT32, CNN_DEVICE_CPU) == NULL);
  CHECK(strstr(cnn_error(), "overflow") != NULL);
  CHECK(cnn_zeros(2, (int64_t[]){1000000, 1000000}, CNN_FLOAT32, CNN_DEVICE_CPU) == NULL);
  CHECK(strstr(cnn_error(), "4000000000000 bytes") != NULL);
}

static void test_views(void) {
  cnn_tensor *t = iota(2, (int64_t[]){2, 3}); /* [[0 1 2] [3 4 5]] */
  cnn_tensor *tr = cnn_transpose(t, 0, 1);    /* [[0 3] [1 4] [2 5]] */
  CHECK(tr->shape[0] == 3 && tr->shape[1] == 2 && !cnn_tensor_is_contiguous(tr));
  CHECK(cnn_tensor_get(tr, 1) == 3 && cnn_tensor_get(tr, 4) == 2);
  CHECK(tr->storage == t->storage);
  CHECK(cnn_view(tr, 1, (int64_t[]){6}) == NULL); /* needs a copy */
  CHECK(strstr(cnn_error(), "view") && strstr(cnn_error(), "3x2"));
  cnn_tensor *r = cnn_reshape(tr, 1, (int64_t[]){-1});
  double want[6] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; i++) CHECK(cnn_tensor_get(r, i) == want[i]);
  cnn_tensor *col = cnn_select(t, 1, 2); /* [2 5] */
  CHECK(col->ndim == 1 && cnn_tensor_get(col, 0) == 2 && cnn_tensor_get(col, 1) == 5);
  cnn_tensor *nar = cnn_narrow(t, 1, 1, 2); /* [[1 2] [4 5]] */
  CHECK(cnn_tensor_get(nar, 2) == 4 && cnn_tensor_get(nar, 3) == 5);
  CHECK(cnn_narrow(t, 1, 2, 2) == NULL && strstr(cnn_error(), "narrow"));
  cnn_tensor *u = cnn_unsqueeze(col, 0);                 /* 1x2 */
  cnn_tensor *ex = cnn_expand(u, 2, (int64_t[]){3, -1}); /* 3x2, stride 0 */
  CHECK(ex->stride[0] == 0 && cnn_tensor_get(ex, 4) == 2 && cnn_tensor_get(ex, 5) == 5);
  cnn_tensor *sq = cnn_squeeze(u, -1);
  CHECK(sq->ndim == 1 && sq->shape[0] == 2);
  int perm[3] = {2, 0, 1};
  cnn_tensor *cube = iota(3, (int64_t[]){2, 3, 4});
  cnn_tensor *p = cnn_permute(cube, perm); /* 4x2x3: p[k][i][j] = cube[i][j][k] */
  CHECK(p->shape[0] == 4 && p->shape[1] == 2 && p->shape[2] == 3);
  CHECK(cnn_tensor_get(p, 1 * 6 + 1 * 3 + 2) == 1 * 12 + 2 * 4 + 1);
  cnn_tensor *fl = cnn_flatten(cube, 1, 2);
  CHECK(fl->ndim == 2 && fl->shape[1] == 12);
  cnn_tensor *c = cnn_contiguous(p);
  CHECK(cnn_tensor_is_contiguous(c) && c->storage != cube->storage);
  for (int i = 0; i < 24; i++) CHECK(cnn_tensor_get(c, i) == cnn_tensor_get(p, i));
  cnn_tensor *views[] = {t, tr, r, col, nar, u, ex, sq, cube, p, fl, c};
  for (size_t i = 0; i < sizeof views / sizeof *views; i++) cnn_tensor_release(views[i]);
}

static void test_copy_cast(void) {
  cnn_tensor *t = iota(2, (int64_t[]){2, 3});
  cnn_tensor *d = cnn_to_dtype(t, CNN_FLOAT64);
  CHECK(d->dtype == CNN_FLOAT64 && cnn_tensor_get(d, 5) == 5);
  cnn_tensor *dst = cnn_zeros(2, (int64_t[]){2, 3}, CNN_INT64, CNN_DEVICE_CPU);
  cnn_tensor *row = cnn_arange(10, 13, 1, CNN_FLOAT32);
  CHECK(cnn_copy_(dst, row) == 0); /* broadcast 3 -> 2x3 */
  CHECK(cnn_tensor_get(dst, 0) == 10 && cnn_tensor_get(dst, 5) == 12);
  cnn_tensor *bad = cnn_zeros(1, (int64_t[]){4}, CNN_FLOAT32, CNN_DEVICE_CPU);
  CHECK(cnn_copy_(dst, bad) == -1 && strstr(cnn_error(), "4 cannot be broadcast to 2x3"));
  cnn_tensor *u8 = cnn_zeros(1, (int64_t[]){2}, CNN_UINT8, CNN_DEVICE_CPU);
  cnn_tensor_set(u8, 0, 300);
  CHECK(cnn_tensor_get(u8, 0) == 44); /* wraps modulo 256 */
  cnn_tensor *h = cnn_to_dtype(t, CNN_FLOAT16), *back = cnn_to_dtype(h, CNN_FLOAT32);
  for (int i = 0; i < 6; i++) CHECK(cnn_tensor_get(back, i) == i);
  cnn_tensor *release[] = {t, d, dst, row, bad, u8, h, back};
  for (size_t i = 0; i < sizeof release / sizeof *release; i++) cnn_tensor_release(release[i]);
}

static void test_rng(void) {
  cnn_manual_seed(42);
  cnn_tensor *a = cnn_randn(1, (int64_t[]){1000}, CNN_FLOAT64);
  cnn_manual_seed(42);
  cnn_tensor *b = cnn_randn(1, (int64_t[]){1000}, CNN_FLOAT64);
  double mean = 0, var = 0;
  for (int i = 0; i < 1000; i++) CHECK(cnn_tensor_get(a, i) == cnn_tensor_get(b, i));
  for (int i = 0; i < 1000; i++) mean += cnn_tensor_get(a, i) / 1000;
  for (int i = 0; i < 1000; i++) var += pow(cnn_tensor_get(a, i) - mean, 2) / 999;
  CHECK(fabs(mean) < 0.1 && fabs(var - 1) < 0.15); /* 3 sigma bounds for n = 1000 */
  uint64_t st[CNN_RNG_STATE_WORDS];
  cnn_rng_get_state(st);
  double x = cnn_rng_normal(), y = cnn_rng_uniform();
  cnn_rng_set_state(st);
  CHECK(cnn_rng_normal() == x && cnn_rng_uniform() == y);
  cnn_tensor *r = cnn_randint(1, 3, 1, (int64_t[]){3000}, CNN_INT64);
  int counts[4] = {0};
  for (int i = 0; i < 3000; i++) counts[(int)cnn_tensor_get(r, i)]++;
  CHECK(counts[0] == 0 && counts[1] > 900 && counts[2] > 900 && counts[3] > 900);
  cnn_tensor_release(a), cnn_tensor_release(b), cnn_tensor_release(r);
}

static void test_memory_accounting(void) {
  int64_t before = cnn_memory(CNN_CPU).live;
  cnn_tensor *t = cnn_empty(1, (int64_t[]){1000}, CNN_FLOAT64, CNN_DEVICE_CPU);
  CHECK(cnn_memory(CNN_CPU).live - before == 8000);
  CHECK(cnn_memory(CNN_CPU).peak >= before + 8000);
  cnn_tensor *v = cnn_narrow(t, 0, 10, 10);
  cnn_tensor_release(t);
  CHECK(cnn_memory(CNN_CPU).live - before == 8000); /* the view keeps the storage */
  cnn_tensor_release(v);
  CHECK(cnn_memory(CNN_CPU).live == before);
}

/* cnn_tensor_valid: views made by the ops pass, a corrupted header fails. */
static void test_valid(void) {
  cnn_tensor *x = cnn_zeros(2, (int64_t[]){3, 4}, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *t = x ? cnn_transpose(x, 0, 1) : NULL, *n = x ? cnn_narrow(x, 1, 1, 2) : NULL;
  CHECK(x && t && n && cnn_tensor_valid(x) && cnn_tensor_valid(t) && cnn_tensor_valid(n));
  if (n) {
    n->offset = 11; /* element 11 + (3-1)*4 + 1 lies past the 12-element storage */
    CHECK(!cnn_tensor_valid(n));
    n->offset = 1;
    n->stride[0] = -4;
    CHECK(!cnn_tensor_valid(n));
    n->stride[0] = 4;
    CHECK(cnn_tensor_valid(n));
  }
  CHECK(!cnn_tensor_valid(NULL));
  cnn_tensor_release(n), cnn_tensor_release(t), cnn_tensor_release(x);
}

int main(void) {
  test_valid();
  test_creation();
  test_bad_sizes();
  test_views();
  test_copy_cast();
  test_rng();
  test_memory_accounting();
  return check_report("test_tensor");
}
