/*
 * test_matmul.c -- matmul/mm/bmm against a naive triple loop: 2-D, 1-D
 * promotions, batched with broadcast batch dims, transposed and sliced
 * views (the BLAS transpose path and the copy path), float64, mixed
 * dtypes, empty inner dims, and the error messages.
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "cnn.h"

#define SH(...) ((int64_t[]){__VA_ARGS__})

static cnn_tensor *values(int nd, const int64_t *shape, cnn_dtype dt, int seed) {
  cnn_tensor *t = cnn_empty(nd, shape, dt, CNN_DEVICE_CPU);
  for (int64_t i = 0; i < cnn_tensor_numel(t); i++)
    cnn_tensor_set(t, i, cos(0.7 * (double)i + seed));
  return t;
}

/* element (b..., i, j) of a 2-D/3-D/4-D tensor addressed by row-major pieces */
static double at(const cnn_tensor *t, int64_t batch, int64_t i, int64_t j) {
  int64_t r = t->shape[t->ndim - 2], c = t->shape[t->ndim - 1];
  return cnn_tensor_get(t, (batch * r + i) * c + j);
}

/* naive C[b] = A[ba(b)] B[bb(b)] for 3-D operands given batch index maps */
static void check_product(const char *what, cnn_tensor *a, cnn_tensor *b, cnn_tensor *c,
                          int64_t nbatch, const int64_t *amap, const int64_t *bmap, double tol) {
  int64_t m = a->shape[a->ndim - 2], k = a->shape[a->ndim - 1], n = b->shape[b->ndim - 1];
  double got[4096], ref[4096];
  int64_t cnt = 0;
  for (int64_t bt = 0; bt < nbatch; bt++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t q = 0; q < k; q++)
          s += at(a, amap ? amap[bt] : bt, i, q) * at(b, bmap ? bmap[bt] : bt, q, j);
        ref[cnt] = s;
        got[cnt] = cnn_tensor_get(c, cnt);
        cnt++;
      }
  CHECK(cnn_tensor_numel(c) == cnt);
  check_arrays(what, got, ref, cnt, tol, tol);
}

static void test_2d(void) {
  cnn_dtype dts[2] = {CNN_FLOAT32, CNN_FLOAT64};
  for (int d = 0; d < 2; d++) {
    double tol = d ? 1e-12 : 1e-5;
    cnn_tensor *a = values(2, SH(7, 5), dts[d], 1), *b = values(2, SH(5, 3), dts[d], 2);
    cnn_tensor *c = cnn_matmul(a, b);
    CHECK(c && c->ndim == 2 && c->shape[0] == 7 && c->shape[1] == 3 && c->dtype == dts[d]);
    check_product("matmul 7x5 @ 5x3", a, b, c, 1, NULL, NULL, tol);
    cnn_tensor_release(c);
    /* transposed views: a^T^T and b from a transpose: pass through BLAS flags */
    cnn_tensor *at_ = values(2, SH(5, 7), dts[d], 3), *bt = values(2, SH(3, 5), dts[d], 4);
    cnn_tensor *av = cnn_transpose(at_, 0, 1), *bv = cnn_transpose(bt, 0, 1);
    cnn_tensor *ca = cnn_contiguous(av), *cb = cnn_contiguous(bv);
    c = cnn_mm(av, bv);
    check_product("mm 7x5(T) @ 5x3(T)", ca, cb, c, 1, NULL, NULL, tol);
    cnn_tensor_release(c);
    /* a column-sliced view (neither stride 1): the copy path */
    cnn_tensor *wide = values(2, SH(7, 10), dts[d], 5), *sl = cnn_narrow(wide, 1, 2, 5);
    cnn_tensor *cs = cnn_contiguous(sl);
    c = cnn_matmul(sl, b);
    check_product("matmul narrow(7x10) @ 5x3", cs, b, c, 1, NULL, NULL, tol);
    cnn_tensor_release(c);
    cnn_tensor_release(a), cnn_tensor_release(b), cnn_tensor_release(at_), cnn_tensor_release(bt);
    cnn_tensor_release(av), cnn_tensor_release(bv), cnn_tensor_release(ca), cnn_tensor_release(cb);
    cnn_tensor_release(wide), cnn_tensor_release(sl), cnn_tensor_release(cs);
  }
}

static void test_1d(void) {
  cnn_tensor *v = values(1, SH(4), CNN_FLOAT64, 1), *w = values(1, SH(4), CNN_FLOAT64, 2);
  cnn_tensor *m = values(2, SH(4, 3), CNN_FLOAT64, 3), *m2 = values(2, SH(2, 4), CNN_FLOAT64, 4);
  cnn_tensor *dot = cnn_matmul(v, w);
  double ref = 0;
  for (int i = 0; i < 4; i++) ref += cnn_tensor_get(v, i) * cnn_tensor_get(w, i);
  CHECK(dot && dot->ndim == 0);
  CHECK_CLOSE(cnn_tensor_get(dot, 0), ref, 1e-14);
  cnn_tensor *vm = cnn_matmul(v, m), *mv = cnn_matmul(m2, v);
  CHECK(vm->ndim == 1 && vm->shape[0] == 3 && mv->ndim == 1 && mv->shape[0] == 2);
  for (int j = 0; j < 3; j++) {
    double s = 0;
    for (int i = 0; i < 4; i++) s += cnn_tensor_get(v, i) * cnn_tensor_get(m, i * 3 + j);
    CHECK_CLOSE(cnn_tensor_get(vm, j), s, 1e-14);
  }
  for (int i = 0; i < 2; i++) {
    double s = 0;
    for (int j = 0; j < 4; j++) s += cnn_tensor_get(m2, i * 4 + j) * cnn_tensor_get(v, j);
    CHECK_CLOSE(cnn_tensor_get(mv, i), s, 1e-14);
  }
  cnn_tensor_release(dot), cnn_tensor_release(vm), cnn_tensor_release(mv);
  cnn_tensor_release(v), cnn_tensor_release(w), cnn_tensor_release(m), cnn_tensor_release(m2);
}

static void test_batched(void) {
  /* 2x1x3x4 @ 5x4x2 -> 2x5x3x2; a's batch (i,0) and b's batch j */
  cnn_tensor *a = values(4, SH(2, 1, 3, 4), CNN_FLOAT32, 1),
             *b = values(3, SH(5, 4, 2), CNN_FLOAT32, 2);
  cnn_tensor *c = cnn_matmul(a, b);
  CHECK(c && c->ndim == 4 && c->shape[0] == 2 && c->shape[1] == 5 && c->shape[2] == 3 &&
        c->shape[3] == 2);
  int64_t amap[10], bmap[10];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 5; j++) amap[i * 5 + j] = i, bmap[i * 5 + j] = j;
  check_product("matmul 2x1x3x4 @ 5x4x2", a, b, c, 10, amap, bmap, 1e-5);
  cnn_tensor_release(c);
  /* bmm with mixed dtypes promotes to float64 */
  cnn_tensor *x = values(3, SH(3, 2, 4), CNN_FLOAT64, 3),
             *y = values(3, SH(3, 4, 5), CNN_FLOAT32, 4);
  c = cnn_bmm(x, y);
  CHECK(c && c->dtype == CNN_FLOAT64);
  check_product("bmm 3x2x4 @ 3x4x5 (f64 x f32)", x, y, c, 3, NULL, NULL, 1e-6);
  cnn_tensor_release(c);
  /* an expanded batch operand (stride 0) */
  cnn_tensor *one = values(3, SH(1, 4, 5), CNN_FLOAT64, 5), *ex = cnn_expand(one, 3, SH(3, 4, 5));
  c = cnn_bmm(x, ex);
  int64_t zero[3] = {0, 0, 0};
  check_product("bmm 3x2x4 @ expand(1x4x5)", x, one, c, 3, NULL, zero, 1e-12);
  cnn_tensor_release(c), cnn_tensor_release(one), cnn_tensor_release(ex);
  /* a larger product through BLAS threading */
  cnn_tensor *p = values(2, SH(40, 30), CNN_FLOAT32, 6), *q = values(2, SH(30, 50), CNN_FLOAT32, 7);
  c = cnn_matmul(p, q);
  check_product("matmul 40x30 @ 30x50", p, q, c, 1, NULL, NULL, 1e-4);
  cnn_tensor_release(c), cnn_tensor_release(p), cnn_tensor_release(q);
  cnn_tensor_release(a), cnn_tensor_release(b), cnn_tensor_release(x), cnn_tensor_release(y);
}

static void test_empty_and_errors(void) {
  cnn_tensor *a = cnn_empty(2, SH(3, 0), CNN_FLOAT32, CNN_DEVICE_CPU),
             *b = cnn_empty(2, SH(0, 2), CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *c = cnn_matmul(a, b);
  CHECK(c && c->shape[0] == 3 && c->shape[1] == 2 && cnn_tensor_get(c, 5) == 0);
  cnn_tensor_release(c), cnn_tensor_release(a), cnn_tensor_release(b);
  cnn_tensor *x = cnn_zeros(2, SH(2, 3), CNN_FLOAT32, CNN_DEVICE_CPU),
             *y = cnn_zeros(2, SH(4, 5), CNN_FLOAT32, CNN_DEVICE_CPU);
  CHECK(cnn_matmul(x, y) == NULL &&
        strcmp(cnn_error(), "matmul: shapes 2x3 and 4x5 cannot be multiplied (3 != 4)") == 0);
  cnn_tensor *i = cnn_zeros(2, SH(3, 2), CNN_INT64, CNN_DEVICE_CPU);
  CHECK(cnn_matmul(x, i) == NULL &&
        strcmp(cnn_error(), "matmul: int64 not supported, use :float()") == 0);
  cnn_tensor *v3 = cnn_zeros(1, SH(3), CNN_FLOAT32, CNN_DEVICE_CPU);
  CHECK(cnn_mm(x, v3) == NULL && strstr(cnn_error(), "mm: expects two 2-D tensors, got 2x3 and 3"));
  cnn_tensor_release(v3);
  cnn_tensor *b3 = cnn_zeros(3, SH(2, 3, 4), CNN_FLOAT32, CNN_DEVICE_CPU),
             *b4 = cnn_zeros(3, SH(3, 4, 2), CNN_FLOAT32, CNN_DEVICE_CPU);
  CHECK(cnn_bmm(b3, b4) == NULL && strstr(cnn_error(), "bmm") && strstr(cnn_error(), "2x3x4") &&
        strstr(cnn_error(), "3x4x2"));
  cnn_tensor *c4 = cnn_zeros(3, SH(3, 2, 2), CNN_FLOAT32, CNN_DEVICE_CPU),
             *c5 = cnn_zeros(4, SH(2, 2, 2, 2), CNN_FLOAT32, CNN_DEVICE_CPU);
  CHECK(cnn_matmul(c5, c4) == NULL && strstr(cnn_error(), "batch dimensions of 2x2x2x2 and 3x2x2"));
  cnn_tensor_release(b3), cnn_tensor_release(b4), cnn_tensor_release(c4), cnn_tensor_release(c5);
  cnn_tensor_release(x), cnn_tensor_release(y), cnn_tensor_release(i);
}

int main(void) {
  test_2d();
  test_1d();
  test_batched();
  test_empty_and_errors();
  return check_report("test_matmul");
}
