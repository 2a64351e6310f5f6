/*
 * optim.c -- fused optimizer updates: one pass over a parameter, its
 * gradient and its state tensors per step, instead of a chain of tensor ops.
 *
 * The update runs in the backend of the parameter's device (core/cpu/optim.c,
 * gpu/optim.cu), both over elementwise_math.h's per-element functions, so
 * the CPU tests of the optimizers cover the GPU's update too.  Updates are
 * in place and never recorded by autograd.
 * Validation: parameter and state tensors contiguous, same shape, dtype
 * (float32/float64) and device; the gradient may be any layout of the same
 * shape (it is made contiguous and cast to the parameter's dtype).
 */
#include "backend.h"
#include "cnn.h"
#include "tensor_internal.h"

#include <stdlib.h>

/* state tensors: NULL allowed where the update does not use them */
static int check_state(const char *op, const cnn_tensor *p, const cnn_tensor *t, const char *what) {
  char a[CNN_SHAPE_STR], b[CNN_SHAPE_STR];
  if (!t) return 0;
  if (!cnn_same_shape(p, t) || t->dtype != p->dtype || !cnn_tensor_is_contiguous(t)) {
    cnn_set_error("%s: %s %s (%s) must be a contiguous tensor like the parameter %s (%s)", op, what,
                  cnn_tensor_shape_str(t, a), cnn_dtype_name(t->dtype), cnn_tensor_shape_str(p, b),
                  cnn_dtype_name(p->dtype));
    return -1;
  }
  return cnn_check_same_device(op, p, t);
}

static int check_param(const char *op, const cnn_tensor *p, const cnn_tensor *g) {
  char a[CNN_SHAPE_STR], b[CNN_SHAPE_STR];
  if ((p->dtype != CNN_FLOAT32 && p->dtype != CNN_FLOAT64) || !cnn_tensor_is_contiguous(p)) {
    cnn_set_error("%s: the parameter must be a contiguous float32 or float64 tensor (got %s %s)",
                  op, cnn_tensor_shape_str(p, a), cnn_dtype_name(p->dtype));
    return -1;
  }
  if (!cnn_same_shape(p, g)) {
    cnn_set_error("%s: gradient %s does not match the parameter %s", op, cnn_tensor_shape_str(g, a),
                  cnn_tensor_shape_str(p, b));
    return -1;
  }
  return cnn_check_same_device(op, p, g);
}

/* The gradient as a contiguous tensor of p's dtype (a new reference). */
static cnn_tensor *grad_like(cnn_tensor *p, cnn_tensor *g) {
  cnn_tensor *c = cnn_to_dtype(g, p->dtype);
  if (!c) return NULL;
  cnn_tensor *r = cnn_contiguous(c);
  cnn_tensor_release(c);
  return r;
}

static void *data_or_null(cnn_tensor *t) { return t ? cnn_tensor_data(t) : NULL; }

static void bump(cnn_tensor *const *ts, int n) {
  for (int i = 0; i < n; i++)
    if (ts[i]) cnn_tensor_bump_version(ts[i]);
}

int cnn_sgd_update(cnn_tensor *p, cnn_tensor *g, cnn_tensor *buf, double lr, double momentum,
                   double dampening, double weight_decay, bool nesterov, bool first_step) {
  if (check_param("sgd_update", p, g) ||
      check_state("sgd_update", p, momentum != 0 ? buf : NULL, "momentum buffer"))
    return -1;
  if (momentum != 0 && !buf) return cnn_set_error("sgd_update: momentum needs a buffer"), -1;
  cnn_sgd_hp h = {lr, momentum, dampening, weight_decay, nesterov, first_step};
  cnn_tensor *gc = grad_like(p, g);
  if (!gc) return -1;
  int64_t n = cnn_tensor_numel(p);
  void *pp = cnn_tensor_data(p), *bb = momentum != 0 ? cnn_tensor_data(buf) : NULL;
  const void *gg = cnn_tensor_data(gc);
  const cnn_backend *be = cnn_backend_of(p, "sgd_update");
  int rc =
      !be ? -1
          : CNN_BE_CALL(be, "sgd_update", sgd_step, cnn_backend_dev(p), p->dtype, n, pp, gg, bb, h);
  cnn_tensor_release(gc);
  bump((cnn_tensor *[]){p, buf}, 2);
  return rc;
}

int cnn_adam_update(cnn_tensor *p, cnn_tensor *g, cnn_tensor *m, cnn_tensor *v, cnn_tensor *vmax,
                    double lr, double beta1, double beta2, double eps, double weight_decay,
                    bool decoupled, int64_t step) {
  if (check_param("adam_update", p, g) || check_state("adam_update", p, m, "exp_avg") ||
      check_state("adam_update", p, v, "exp_avg_sq") ||
      check_state("adam_update", p, vmax, "max_exp_avg_sq"))
    return -1;
  if (!m || !v || step < 1)
    return cnn_set_error("adam_update: needs exp_avg, exp_avg_sq and a step >= 1"), -1;
  cnn_adam_hp h =
      cnn_adam_hp_make(lr, beta1, beta2, eps, weight_decay, decoupled, vmax != NULL, (long)step);
  cnn_tensor *gc = grad_like(p, g);
  if (!gc) return -1;
  int64_t n = cnn_tensor_numel(p);
  void *pp = cnn_tensor_data(p), *mm = cnn_tensor_data(m), *vv = cnn_tensor_data(v),
       *xx = data_or_null(vmax);
  const void *gg = cnn_tensor_data(gc);
  const cnn_backend *be = cnn_backend_of(p, "adam_update");
  int rc = !be ? -1
               : CNN_BE_CALL(be, "adam_update", adam_step, cnn_backend_dev(p), p->dtype, n, pp, gg,
                             mm, vv, xx, h);
  cnn_tensor_release(gc);
  bump((cnn_tensor *[]){p, m, v, vmax}, 4);
  return rc;
}

/* ---- Adam over many parameters ---------------------------------- */

/* Parameter i of a many-tensor update: validated as cnn_adam_update does. */
static int check_adam_one(cnn_tensor *p, cnn_tensor *g, cnn_tensor *m, cnn_tensor *v,
                          cnn_tensor *vmax, int64_t step) {
  if (!p || !g || !m || !v)
    return cnn_set_error("adam_update: a parameter, gradient or state is missing"), -1;
  if (check_param("adam_update", p, g) || check_state("adam_update", p, m, "exp_avg") ||
      check_state("adam_update", p, v, "exp_avg_sq") ||
      check_state("adam_update", p, vmax, "max_exp_avg_sq"))
    return -1;
  if (step < 1)
    return cnn_set_error("adam_update: step must be >= 1, got %lld", (long long)step), -1;
  return 0;
}

/* Whether one backend call can run all the parameters: one dtype, one device, an entry. */
static const cnn_backend *many_backend(int count, cnn_tensor *const *p) {
  for (int i = 1; i < count; i++)
    if (p[i]->dtype != p[0]->dtype ||
        !cnn_device_equal(cnn_tensor_device(p[i]), cnn_tensor_device(p[0])))
      return NULL;
  const cnn_backend *be = cnn_backend_of(p[0], "adam_update");
  return be && be->adam_step_many ? be : NULL;
}

/* The slices of the many-tensor call; grads[i] are the contiguous gradients. */
static int adam_many_call(const cnn_backend *be, int count, cnn_tensor *const *p,
                          cnn_tensor *const *grads, cnn_tensor *const *m, cnn_tensor *const *v,
                          cnn_tensor *const *vmax, const int64_t *steps, const double *hp,
                          bool decoupled) {
  cnn_adam_slice *s = malloc(sizeof *s * (size_t)count);
  if (!s) return cnn_set_error("adam_update: out of memory for %d parameters", count), -1;
  for (int i = 0; i < count; i++) {
    s[i] = (cnn_adam_slice){cnn_tensor_data(p[i]),
                            cnn_tensor_data(m[i]),
                            cnn_tensor_data(v[i]),
                            vmax ? cnn_tensor_data(vmax[i]) : NULL,
                            cnn_tensor_data(grads[i]),
                            cnn_tensor_numel(p[i]),
                            cnn_adam_hp_make(hp[0], hp[1], hp[2], hp[3], hp[4], decoupled,
                                             vmax != NULL, (long)steps[i])};
  }
  int rc = be->adam_step_many(cnn_backend_dev(p[0]), p[0]->dtype, count, s);
  free(s);
  return rc;
}

int cnn_adam_update_many(int count, cnn_tensor *const *p, cnn_tensor *const *g,
                         cnn_tensor *const *m, cnn_tensor *const *v, cnn_tensor *const *vmax,
                         const int64_t *steps, double lr, double beta1, double beta2, double eps,
                         double weight_decay, bool decoupled) {
  if (count < 0) return cnn_set_error("adam_update: %d parameters", count), -1;
  for (int i = 0; i < count; i++)
    if (check_adam_one(p[i], g[i], m[i], v[i], vmax ? vmax[i] : NULL, steps[i])) return -1;
  if (count == 0) return 0;
  const cnn_backend *be = many_backend(count, p);
  if (!be) { /* mixed dtypes or devices, or no many-tensor entry: one by one */
    for (int i = 0; i < count; i++)
      if (cnn_adam_update(p[i], g[i], m[i], v[i], vmax ? vmax[i] : NULL, lr, beta1, beta2, eps,
                          weight_decay, decoupled, steps[i]))
        return -1;
    return 0;
  }
  cnn_tensor **grads = calloc((size_t)count, sizeof *grads);
  int rc = grads ? 0 : (cnn_set_error("adam_update: out of memory for %d parameters", count), -1);
  for (int i = 0; i < count && !rc; i++) rc = (grads[i] = grad_like(p[i], g[i])) ? 0 : -1;
  if (!rc)
    rc = adam_many_call(be, count, p, grads, m, v, vmax, steps,
                        (const double[]){lr, beta1, beta2, eps, weight_decay}, decoupled);
  for (int i = 0; grads && i < count; i++) {
    if (grads[i]) cnn_tensor_release(grads[i]);
    bump((cnn_tensor *[]){p[i], m[i], v[i], vmax ? vmax[i] : NULL}, 4);
  }
  free(grads);
  return rc;
}

int cnn_rmsprop_update(cnn_tensor *p, cnn_tensor *g, cnn_tensor *sq, cnn_tensor *ga,
                       cnn_tensor *buf, double lr, double alpha, double eps, double weight_decay,
                       double momentum, bool centered) {
  if (check_param("rmsprop_update", p, g) || check_state("rmsprop_update", p, sq, "square_avg") ||
      check_state("rmsprop_update", p, ga, "grad_avg") ||
      check_state("rmsprop_update", p, buf, "momentum_buffer"))
    return -1;
  if (!sq || (centered && !ga) || (momentum > 0 && !buf)) {
    cnn_set_error("rmsprop_update: missing state (square_avg%s%s)", centered ? ", grad_avg" : "",
                  momentum > 0 ? ", momentum_buffer" : "");
    return -1;
  }
  cnn_rmsprop_hp h = {lr, alpha, eps, weight_decay, momentum, centered};
  cnn_tensor *gc = grad_like(p, g);
  if (!gc) return -1;
  int64_t n = cnn_tensor_numel(p);
  void *pp = cnn_tensor_data(p), *ss = cnn_tensor_data(sq), *aa = data_or_null(ga),
       *bb = data_or_null(buf);
  const void *gg = cnn_tensor_data(gc);
  const cnn_backend *be = cnn_backend_of(p, "rmsprop_update");
  int rc = !be ? -1
               : CNN_BE_CALL(be, "rmsprop_update", rmsprop_step, cnn_backend_dev(p), p->dtype, n,
                             pp, gg, ss, aa, bb, h);
  cnn_tensor_release(gc);
  bump((cnn_tensor *[]){p, sq, ga, buf}, 4);
  return rc;
}
