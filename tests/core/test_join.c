/*
 * test_join.c -- cat, stack, index_select, gather and pad against naive
 * index arithmetic: several dims, views as inputs, mixed dtypes, more than
 * four inputs, negative pads, and the error messages (op and shapes).
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "cnn.h"

#define SH(...) ((int64_t[]){__VA_ARGS__})

static cnn_tensor *values(int nd, const int64_t *shape, cnn_dtype dt, double base) {
  cnn_tensor *t = cnn_empty(nd, shape, dt, CNN_DEVICE_CPU);
  for (int64_t i = 0; i < cnn_tensor_numel(t); i++) cnn_tensor_set(t, i, base + (double)i);
  return t;
}

static void test_cat(void) {
  cnn_tensor *a = values(2, SH(2, 3), CNN_FLOAT32, 0), *b = values(2, SH(2, 2), CNN_INT64, 100);
  cnn_tensor *c = cnn_cat(2, (cnn_tensor *[]){a, b}, 1);
  CHECK(c && c->dtype == CNN_FLOAT32 && c->shape[0] == 2 && c->shape[1] == 5);
  double ref[10] = {0, 1, 2, 100, 101, 3, 4, 5, 102, 103}, got[10];
  for (int i = 0; i < 10; i++) got[i] = cnn_tensor_get(c, i);
  check_arrays("cat 2x3, 2x2 dim 1", got, ref, 10, 0, 0);
  cnn_tensor_release(c);
  /* dim 0 with a transposed view and 6 inputs */
  cnn_tensor *base = values(2, SH(3, 2), CNN_FLOAT32, 50), *t = cnn_transpose(base, 0, 1); /* 2x3 */
  cnn_tensor *list[6] = {a, t, a, t, a, t};
  c = cnn_cat(6, list, 0);
  CHECK(c && c->shape[0] == 12 && c->shape[1] == 3);
  int bad = 0;
  for (int k = 0; k < 6; k++)
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++) {
        double want = k % 2 ? 50 + j * 2 + i : i * 3 + j;
        if (cnn_tensor_get(c, (k * 2 + i) * 3 + j) != want) bad++;
      }
  CHECK(bad == 0);
  cnn_tensor_release(c);
  cnn_tensor *s = cnn_stack(6, list, 1); /* 2x6x3 */
  CHECK(s && s->ndim == 3 && s->shape[0] == 2 && s->shape[1] == 6 && s->shape[2] == 3);
  bad = 0;
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 6; k++)
      for (int j = 0; j < 3; j++) {
        double want = k % 2 ? 50 + j * 2 + i : i * 3 + j;
        if (cnn_tensor_get(s, (i * 6 + k) * 3 + j) != want) bad++;
      }
  CHECK(bad == 0);
  cnn_tensor_release(s);
  /* errors */
  CHECK(cnn_cat(2, (cnn_tensor *[]){a, b}, 0) == NULL &&
        strstr(cnn_error(), "cat: tensor 2 has shape 2x2 but tensor 1 has 2x3"));
  CHECK(cnn_stack(2, (cnn_tensor *[]){a, b}, 0) == NULL && strstr(cnn_error(), "stack"));
  CHECK(cnn_cat(2, (cnn_tensor *[]){a, a}, 2) == NULL &&
        strstr(cnn_error(), "cat: dimension 3 out of range for input 2x3"));
  CHECK(cnn_cat(0, NULL, 0) == NULL && strstr(cnn_error(), "cat"));
  cnn_tensor_release(a), cnn_tensor_release(b), cnn_tensor_release(base), cnn_tensor_release(t);
}

static void test_index_select(void) {
  cnn_tensor *x = values(3, SH(3, 4, 2), CNN_FLOAT64, 0);
  cnn_tensor *idx = cnn_from_buffer(1, SH(5), CNN_INT64, (int64_t[]){3, 0, 3, 1, 2});
  cnn_tensor *y = cnn_index_select(x, 1, idx);
  CHECK(y && y->shape[0] == 3 && y->shape[1] == 5 && y->shape[2] == 2);
  int64_t ix[5] = {3, 0, 3, 1, 2};
  int bad = 0;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 5; j++)
      for (int k = 0; k < 2; k++)
        if (cnn_tensor_get(y, (i * 5 + j) * 2 + k) != cnn_tensor_get(x, (i * 4 + ix[j]) * 2 + k))
          bad++;
  CHECK(bad == 0);
  cnn_tensor_release(y);
  cnn_tensor *bad_idx = cnn_from_buffer(1, SH(2), CNN_INT64, (int64_t[]){1, 4});
  CHECK(cnn_index_select(x, 1, bad_idx) == NULL &&
        strstr(cnn_error(),
               "index_select: index 4 out of range for dimension 2 of size 4 (input 3x4x2)"));
  cnn_tensor *fidx = values(1, SH(2), CNN_FLOAT32, 0);
  CHECK(cnn_index_select(x, 0, fidx) == NULL && strstr(cnn_error(), "int64"));
  cnn_tensor_release(bad_idx), cnn_tensor_release(fidx), cnn_tensor_release(idx),
      cnn_tensor_release(x);
}

static void test_gather(void) {
  cnn_tensor *x = values(2, SH(3, 4), CNN_FLOAT32, 10);
  cnn_tensor *idx = cnn_from_buffer(2, SH(3, 2), CNN_INT64, (int64_t[]){0, 3, 2, 2, 1, 0});
  cnn_tensor *y = cnn_gather(x, 1, idx);
  double ref[6] = {10, 13, 16, 16, 19, 18}, got[6];
  for (int i = 0; i < 6; i++) got[i] = cnn_tensor_get(y, i);
  check_arrays("gather dim 1", got, ref, 6, 0, 0);
  cnn_tensor_release(y);
  /* dim 0 on a transposed input (4x3 view of the 3x4) */
  cnn_tensor *t = cnn_transpose(x, 0, 1);
  cnn_tensor *i0 = cnn_from_buffer(2, SH(1, 3), CNN_INT64, (int64_t[]){3, 0, 1});
  y = cnn_gather(t, 0, i0); /* y[0][j] = t[i0[j]][j] = x[j][i0[j]] */
  CHECK(cnn_tensor_get(y, 0) == 13 && cnn_tensor_get(y, 1) == 14 && cnn_tensor_get(y, 2) == 19);
  cnn_tensor_release(y);
  cnn_tensor *oob = cnn_from_buffer(2, SH(1, 1), CNN_INT64, (int64_t[]){-1});
  CHECK(cnn_gather(x, 1, oob) == NULL &&
        strstr(cnn_error(), "gather: index -1 out of range for dimension 2 of size 4 (input 3x4)"));
  cnn_tensor *big = cnn_zeros(2, SH(4, 1), CNN_INT64, CNN_DEVICE_CPU);
  CHECK(cnn_gather(x, 1, big) == NULL && strstr(cnn_error(), "gather") &&
        strstr(cnn_error(), "4x1") && strstr(cnn_error(), "3x4"));
  cnn_tensor_release(big), cnn_tensor_release(oob), cnn_tensor_release(i0), cnn_tensor_release(t);
  cnn_tensor_release(idx), cnn_tensor_release(x);
}

static void test_pad(void) {
  cnn_tensor *x = values(2, SH(2, 3), CNN_FLOAT32, 1);        /* 1 2 3 / 4 5 6 */
  cnn_tensor *y = cnn_pad(x, 4, (int64_t[]){1, 2, 1, 0}, -1); /* last dim 1+2, dim 0 top 1 */
  CHECK(y && y->shape[0] == 3 && y->shape[1] == 6);
  double ref[18] = {-1, -1, -1, -1, -1, -1, -1, 1, 2, 3, -1, -1, -1, 4, 5, 6, -1, -1}, got[18];
  for (int i = 0; i < 18; i++) got[i] = cnn_tensor_get(y, i);
  check_arrays("pad (1,2,1,0) 2x3", got, ref, 18, 0, 0);
  cnn_tensor_release(y);
  y = cnn_pad(x, 2, (int64_t[]){-1, 1}, 0); /* crop one left, pad one right */
  double ref2[6] = {2, 3, 0, 5, 6, 0};
  for (int i = 0; i < 6; i++) got[i] = cnn_tensor_get(y, i);
  check_arrays("pad (-1,1) 2x3", got, ref2, 6, 0, 0);
  cnn_tensor_release(y);
  CHECK(cnn_pad(x, 3, (int64_t[]){1, 1, 1}, 0) == NULL &&
        strstr(cnn_error(), "pad: 3 pad values for input 2x3"));
  CHECK(cnn_pad(x, 2, (int64_t[]){-2, -2}, 0) == NULL && strstr(cnn_error(), "pad") &&
        strstr(cnn_error(), "2x3"));
  cnn_tensor_release(x);
}

int main(void) {
  test_cat();
  test_index_select();
  test_gather();
  test_pad();
  return check_report("test_join");
}
