/*
 * gradcheck.h -- finite-difference gradient checks for the C unit tests.
 *
 * gradcheck(what, fn, ctx, n, inputs) runs y = fn(inputs) with grad mode
 * on, back-propagates a fixed pseudo-random weighting r (so the checked
 * scalar is sum(r * y)), then perturbs every element of every input that
 * requires grad by +-eps (central differences, eps 1e-6) and evaluates fn
 * again under no_grad.  The engine's .grad must match the numeric slope
 * within |a - n| <= atol + rtol |n|; a mismatch prints the op, the input,
 * its shape, the worst difference and its index (via check.h).
 *
 * Inputs are float64 leaves (possibly non-contiguous views); integer
 * inputs (targets, indices) ride along with requires_grad off.  Static
 * inline only, so every test that includes it links nothing extra.
 */
#ifndef CNN_TEST_GRADCHECK_H
#define CNN_TEST_GRADCHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "cnn.h"

typedef cnn_tensor *(*gc_fn)(cnn_tensor **in, void *ctx);

#define GC_EPS 1e-6

static inline double gc_weight(int64_t i) { /* fixed, non-zero, in [-1, -0.25] U [0.25, 1] */
  uint64_t h = (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  double u = (double)(h % 10007) / 10007.0;
  return (i % 2 ? -1 : 1) * (0.25 + 0.75 * u);
}

static inline double gc_objective(cnn_tensor *y) {
  double s = 0;
  int64_t n = cnn_tensor_numel(y);
  for (int64_t i = 0; i < n; i++) s += gc_weight(i) * cnn_tensor_get(y, i);
  return s;
}

/* sum(r * fn(in)) without recording; NAN if fn fails */
static inline double gc_eval(gc_fn fn, void *ctx, cnn_tensor **in) {
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *y = fn(in, ctx);
  cnn_set_grad_enabled(prev);
  if (!y) return NAN;
  double s = gc_objective(y);
  cnn_tensor_release(y);
  return s;
}

static inline int gc_backward(const char *what, gc_fn fn, void *ctx, int n, cnn_tensor **in) {
  for (int k = 0; k < n; k++)
    if (in[k]) cnn_tensor_release(in[k]->grad), in[k]->grad = NULL;
  cnn_tensor *y = fn(in, ctx);
  if (!y) {
    fprintf(stderr, "%s: forward failed: %s\n", what, cnn_error());
    return -1;
  }
  cnn_tensor *r = cnn_empty(y->ndim, y->shape, y->dtype, CNN_DEVICE_CPU);
  for (int64_t i = 0; i < cnn_tensor_numel(y); i++) cnn_tensor_set(r, i, gc_weight(i));
  int rc = cnn_backward(y, r, false);
  if (rc) fprintf(stderr, "%s: backward failed: %s\n", what, cnn_error());
  cnn_tensor_release(r);
  cnn_tensor_release(y);
  return rc;
}

/* compare input k's .grad with central differences */
static inline int gc_input(const char *what, gc_fn fn, void *ctx, cnn_tensor **in, int k,
                           double atol, double rtol) {
  cnn_tensor *x = in[k];
  int64_t n = cnn_tensor_numel(x);
  double *num = calloc((size_t)n + 1, sizeof(double)), *ana = calloc((size_t)n + 1, sizeof(double));
  for (int64_t i = 0; i < n; i++) {
    double v = cnn_tensor_get(x, i);
    cnn_tensor_set(x, i, v + GC_EPS);
    double fp = gc_eval(fn, ctx, in);
    cnn_tensor_set(x, i, v - GC_EPS);
    double fm = gc_eval(fn, ctx, in);
    cnn_tensor_set(x, i, v);
    num[i] = (fp - fm) / (2 * GC_EPS);
    ana[i] = x->grad ? cnn_tensor_get(x->grad, i) : 0.0;
  }
  char label[256], s[CNN_SHAPE_STR];
  snprintf(label, sizeof label, "gradcheck %s: input %d (%s)", what, k, cnn_tensor_shape_str(x, s));
  int ok = check_arrays(label, ana, num, n, atol, rtol);
  if (ok && x->grad && !cnn_same_shape(x->grad, x)) {
    fprintf(stderr, "%s: grad shape differs\n", label);
    check_failures++;
  }
  free(num);
  free(ana);
  return ok;
}

static inline int gradcheck_tol(const char *what, gc_fn fn, void *ctx, int n, cnn_tensor **in,
                                double atol, double rtol) {
  check_count++;
  if (gc_backward(what, fn, ctx, n, in)) {
    check_failures++;
    return 0;
  }
  int ok = 1;
  for (int k = 0; k < n; k++)
    if (in[k] && in[k]->requires_grad) ok &= gc_input(what, fn, ctx, in, k, atol, rtol);
  return ok;
}

static inline int gradcheck(const char *what, gc_fn fn, void *ctx, int n, cnn_tensor **in) {
  return gradcheck_tol(what, fn, ctx, n, in, 1e-6, 1e-6);
}

/* a float64 leaf of the given shape with deterministic values in [lo, hi] */
static inline cnn_tensor *gc_leaf(int ndim, const int64_t *shape, double lo, double hi, int seed) {
  cnn_tensor *t = cnn_empty(ndim, shape, CNN_FLOAT64, CNN_DEVICE_CPU);
  for (int64_t i = 0; i < cnn_tensor_numel(t); i++) {
    uint64_t h = (uint64_t)(i * 7919 + seed * 104729 + 1) * 0xD1B54A32D192ED03ull;
    h ^= h >> 31;
    cnn_tensor_set(t, i, lo + (hi - lo) * (double)(h % 100003) / 100003.0);
  }
  cnn_set_requires_grad(t, true);
  return t;
}

/* a non-contiguous leaf: the transpose of a (shape[1] x shape[0]) tensor */
static inline cnn_tensor *gc_leaf_t(int64_t rows, int64_t cols, double lo, double hi, int seed) {
  cnn_tensor *base = gc_leaf(2, (int64_t[]){cols, rows}, lo, hi, seed);
  cnn_set_requires_grad(base, false);
  cnn_tensor *tr = cnn_transpose(base, 0, 1);
  cnn_tensor *leaf = cnn_detach(tr);
  cnn_tensor_release(tr);
  cnn_tensor_release(base);
  cnn_set_requires_grad(leaf, true);
  return leaf;
}

static inline void gc_release(int n, cnn_tensor **in) {
  for (int k = 0; k < n; k++) cnn_tensor_release(in[k]);
}

#endif
