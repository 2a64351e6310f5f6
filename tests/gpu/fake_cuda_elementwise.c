/*
 * fake_cuda_elementwise.c -- the strided entries of the fake device: unary,
 * binary (comparisons give uint8), unary derivatives, where, copy/cast
 * between every dtype (float16/bfloat16 included), fill.
 *
 * Design: one plain loop over the row-major linear index of the shape; the
 * element offset of each operand is recomputed from its strides (in
 * elements, 0 along broadcast dims) for every element -- slow and obvious.
 * The per-element math is core's shared host/device header
 * (elementwise_ops.h), called as gpu/elementwise.cu calls it: float32 in
 * float, float64 in double, float16 loaded as float, computed in float and
 * rounded back (float16 inference), integers through the int64 switch;
 * bfloat16 arithmetic is refused, as there.  Every
 * operand is checked to lie inside one live device block first.
 */
#include <string.h>

#include "elementwise_ops.h"
#include "fake_cuda.h"

static int64_t numel(const cnn_be_shape *s) {
  int64_t n = 1;
  for (int d = 0; d < s->ndim; d++) n *= s->shape[d];
  return n;
}

/* element offset of operand a at row-major linear index i */
static int64_t off(const cnn_be_shape *s, const cnn_be_arg *a, int64_t i) {
  int64_t o = 0;
  for (int d = s->ndim - 1; d >= 0; d--) {
    o += (i % s->shape[d]) * a->stride[d];
    i /= s->shape[d];
  }
  return o;
}

static bool is_int(cnn_dtype dt) { return dt == CNN_INT64 || dt == CNN_UINT8; }

static int64_t load_int(cnn_dtype dt, const void *p, int64_t i) {
  return dt == CNN_UINT8 ? ((const uint8_t *)p)[i] : ((const int64_t *)p)[i];
}
static void store_int(cnn_dtype dt, void *p, int64_t i, int64_t v) {
  if (dt == CNN_UINT8)
    ((uint8_t *)p)[i] = (uint8_t)(uint64_t)v;
  else
    ((int64_t *)p)[i] = v;
}

/* run body: check the operands and bracket with enter/leave */
static int check_args(const char *op, const cnn_be_shape *s, int n, const cnn_dtype *dts,
                      const cnn_be_arg *args) {
  for (int k = 0; k < n; k++)
    if (fake_dev_arg(op, s, dts[k], args[k])) return -1;
  return 0;
}

/* ---- unary ---------------------------------------------------------------------------- */

static void unary_elem(cnn_unary_op op, cnn_dtype dt, void *o, int64_t io, const void *x,
                       int64_t ix, double p0, double p1) {
  if (dt == CNN_FLOAT32)
    ((float *)o)[io] = cnn_ew_unary_f32(op, ((const float *)x)[ix], (float)p0, (float)p1);
  else if (dt == CNN_FLOAT64)
    ((double *)o)[io] = cnn_ew_unary_f64(op, ((const double *)x)[ix], p0, p1);
  else if (dt == CNN_FLOAT16)
    fake_store(dt, o, io, cnn_ew_unary_f32(op, (float)fake_load(dt, x, ix), (float)p0, (float)p1));
  else
    store_int(dt, o, io, cnn_ew_unary_i64(op, load_int(dt, x, ix), p0, p1));
}

static int unary(int dev, cnn_unary_op op, cnn_dtype dt, const cnn_be_shape *s, cnn_be_arg out,
                 cnn_be_arg x, double p0, double p1) {
  const char *name = fake_core.unary_name(op);
  if (dt == CNN_BFLOAT16) return fake_float_dt(name, dt, false);
  if (fake_enter(name, dev)) return -1;
  int rc = check_args(name, s, 2, (cnn_dtype[]){dt, dt}, (cnn_be_arg[]){out, x});
  for (int64_t i = 0, n = numel(s); rc == 0 && i < n; i++)
    unary_elem(op, dt, out.ptr, off(s, &out, i), x.ptr, off(s, &x, i), p0, p1);
  fake_leave();
  return rc;
}

/* ---- binary ----------------------------------------------------------------------------- */

static bool is_compare(cnn_binary_op op) { return op >= CNN_OP_EQ; }

/* comparison of two elements; NaN compares unordered (only NE is true) */
static bool compare(cnn_binary_op op, cnn_dtype dt, const void *a, int64_t ia, const void *b,
                    int64_t ib) {
  int c;
  if (is_int(dt)) {
    int64_t x = load_int(dt, a, ia), y = load_int(dt, b, ib);
    c = x < y ? -1 : x > y ? 1 : 0;
  } else {
    double x = fake_load(dt, a, ia), y = fake_load(dt, b, ib);
    c = x < y ? -1 : x > y ? 1 : x == y ? 0 : 2;
  }
  return cnn_ew_compare(op, c);
}

static void binary_elem(cnn_binary_op op, cnn_dtype dt, void *o, int64_t io, const void *a,
                        int64_t ia, const void *b, int64_t ib) {
  if (is_compare(op))
    ((uint8_t *)o)[io] = compare(op, dt, a, ia, b, ib);
  else if (dt == CNN_FLOAT32)
    ((float *)o)[io] = cnn_ew_binary_f32(op, ((const float *)a)[ia], ((const float *)b)[ib]);
  else if (dt == CNN_FLOAT64)
    ((double *)o)[io] = cnn_ew_binary_f64(op, ((const double *)a)[ia], ((const double *)b)[ib]);
  else if (dt == CNN_FLOAT16)
    fake_store(dt, o, io,
               cnn_ew_binary_f32(op, (float)fake_load(dt, a, ia), (float)fake_load(dt, b, ib)));
  else
    store_int(dt, o, io, cnn_ew_binary_i64(op, load_int(dt, a, ia), load_int(dt, b, ib)));
}

static int binary(int dev, cnn_binary_op op, cnn_dtype dt, const cnn_be_shape *s, cnn_be_arg out,
                  cnn_be_arg a, cnn_be_arg b) {
  const char *name = fake_core.binary_name(op);
  if (dt == CNN_BFLOAT16) return fake_float_dt(name, dt, false);
  if (is_int(dt) && op == CNN_OP_DIV) {
    fake_core.set_error("%s: integer division reached the device (core converts to float32)", name);
    return -1;
  }
  if (fake_enter(name, dev)) return -1;
  cnn_dtype odt = is_compare(op) ? CNN_UINT8 : dt;
  int rc = check_args(name, s, 3, (cnn_dtype[]){odt, dt, dt}, (cnn_be_arg[]){out, a, b});
  for (int64_t i = 0, n = numel(s); rc == 0 && i < n; i++)
    binary_elem(op, dt, out.ptr, off(s, &out, i), a.ptr, off(s, &a, i), b.ptr, off(s, &b, i));
  fake_leave();
  return rc;
}

/* ---- unary derivative: out = g * f'(v), in double -------------------------------------------- */

static int unary_grad(int dev, cnn_unary_op op, cnn_dtype dt, const cnn_be_shape *s, cnn_be_arg out,
                      cnn_be_arg g, cnn_be_arg v, double p0, double p1) {
  const char *name = fake_core.unary_name(op);
  if (fake_float_dt(name, dt, false) || fake_enter(name, dev)) return -1;
  int rc = check_args(name, s, 3, (cnn_dtype[]){dt, dt, dt}, (cnn_be_arg[]){out, g, v});
  for (int64_t i = 0, n = numel(s); rc == 0 && i < n; i++) {
    double gv = fake_load(dt, g.ptr, off(s, &g, i)), vv = fake_load(dt, v.ptr, off(s, &v, i));
    fake_store(dt, out.ptr, off(s, &out, i), gv * cnn_ew_unary_deriv(op, vv, p0, p1));
  }
  fake_leave();
  return rc;
}

/* ---- where ----------------------------------------------------------------------------------- */

static int where(int dev, cnn_dtype cond_dt, cnn_dtype dt, const cnn_be_shape *s, cnn_be_arg out,
                 cnn_be_arg cond, cnn_be_arg a, cnn_be_arg b) {
  if (fake_enter("where", dev)) return -1;
  int rc = check_args("where", s, 4, (cnn_dtype[]){dt, cond_dt, dt, dt},
                      (cnn_be_arg[]){out, cond, a, b});
  size_t es = cnn_dtype_size(dt);
  for (int64_t i = 0, n = numel(s); rc == 0 && i < n; i++) {
    int64_t ic = off(s, &cond, i);
    bool t = is_int(cond_dt) ? load_int(cond_dt, cond.ptr, ic) != 0
                             : fake_load(cond_dt, cond.ptr, ic) != 0;
    const cnn_be_arg *src = t ? &a : &b;
    memcpy((char *)out.ptr + off(s, &out, i) * (int64_t)es,
           (const char *)src->ptr + off(s, src, i) * (int64_t)es, es);
  }
  fake_leave();
  return rc;
}

/* ---- copy / cast, fill ------------------------------------------------------------------------- */

static void cast_elem(cnn_dtype ddt, void *d, int64_t id, cnn_dtype sdt, const void *s,
                      int64_t is) {
  size_t es = cnn_dtype_size(ddt);
  if (ddt == sdt)
    memcpy((char *)d + id * (int64_t)es, (const char *)s + is * (int64_t)es, es);
  else if (is_int(ddt) && is_int(sdt))
    store_int(ddt, d, id, load_int(sdt, s, is));
  else if (ddt == CNN_FLOAT32 && sdt == CNN_INT64)
    ((float *)d)[id] = (float)((const int64_t *)s)[is];
  else
    fake_store(ddt, d, id, fake_load(sdt, s, is));
}

static int copy(int dev, const cnn_be_shape *s, cnn_dtype dst_dt, cnn_be_arg dst, cnn_dtype src_dt,
                cnn_be_arg src) {
  if (fake_enter("copy_", dev)) return -1;
  int rc = check_args("copy_", s, 2, (cnn_dtype[]){dst_dt, src_dt}, (cnn_be_arg[]){dst, src});
  for (int64_t i = 0, n = numel(s); rc == 0 && i < n; i++)
    cast_elem(dst_dt, dst.ptr, off(s, &dst, i), src_dt, src.ptr, off(s, &src, i));
  fake_leave();
  return rc;
}

static int fill(int dev, const cnn_be_shape *s, cnn_dtype dt, cnn_be_arg dst, double v) {
  if (fake_enter("fill_", dev)) return -1;
  int rc = check_args("fill_", s, 1, &dt, &dst);
  for (int64_t i = 0, n = numel(s); rc == 0 && i < n; i++)
    fake_store(dt, dst.ptr, off(s, &dst, i), v);
  fake_leave();
  return rc;
}

void fake_elementwise_register(cnn_backend *be) {
  be->unary = unary;
  be->binary = binary;
  be->unary_grad = unary_grad;
  be->where = where;
  be->copy = copy;
  be->fill = fill;
}
