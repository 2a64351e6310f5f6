/*
 * tensor_print.c -- tostring(x): values like PyTorch, then a footer line.
 *
 *   > tostring(cnn.tensor{{1, 2.5}, {-3, 4}})
 *   [[ 1.0000,  2.5000],
 *    [-3.0000,  4.0000]]
 *   [cnn.Tensor 2x2 float32 cpu]
 *
 * Format (after PyTorch's _Formatter): integer dtypes print as integers;
 * floats whose shown values are all integral print as "3."; otherwise
 * "%.4f", or "%.4e" when the magnitudes span more than 1000x or leave
 * [1e-4, 1e8).  All shown values share one width (aligned columns).  Rows
 * wrap at 80 columns.  Beyond 1000 elements each dim longer than 6 shows
 * its first and last 3 entries around "...".  The footer gives shape, dtype,
 * device, and grad_fn (or requires_grad=true for leaves that require it).
 *
 * Values are read on the CPU through strides (a GPU or half tensor is first
 * copied/converted), so int64 values print exactly.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bind.h"

#define EDGE              3
#define SUMMARY_THRESHOLD 1000
#define LINE_WIDTH        80

typedef struct {
  const cnn_tensor *t;
  bool summarize;
  bool is_int;   /* integer dtype */
  bool int_mode; /* float values that are all integral */
  bool sci;
  int width;
  /* stats over shown values */
  double max_abs, min_abs;
  bool any_finite;
} printer;

static double load(const cnn_tensor *t, int64_t off, int64_t *iv) {
  const char *base = t->storage->data;
  switch (t->dtype) {
  case CNN_FLOAT32: return ((const float *)base)[off];
  case CNN_FLOAT64: return ((const double *)base)[off];
  case CNN_INT64: *iv = ((const int64_t *)base)[off]; return (double)*iv;
  case CNN_UINT8: *iv = ((const uint8_t *)base)[off]; return (double)*iv;
  default: return 0;
  }
}

/* Format one value into buf (without padding). */
static int fmt_value(const printer *p, int64_t off, char *buf, size_t n) {
  int64_t iv = 0;
  double v = load(p->t, off, &iv);
  if (p->is_int) return snprintf(buf, n, "%lld", (long long)iv);
  if (isnan(v)) return snprintf(buf, n, "nan");
  if (isinf(v)) return snprintf(buf, n, v < 0 ? "-inf" : "inf");
  if (p->sci) return snprintf(buf, n, "%.4e", v);
  if (p->int_mode) return snprintf(buf, n, "%.0f.", v);
  return snprintf(buf, n, "%.4f", v);
}

/* Visit every shown element offset (in storage elements) in print order. */
typedef void (*visit_fn)(printer *p, int64_t off);

static void visit(printer *p, int d, int64_t off, visit_fn f) {
  const cnn_tensor *t = p->t;
  int64_t n = t->shape[d];
  for (int64_t i = 0; i < n; i++) {
    if (p->summarize && n > 2 * EDGE && i == EDGE) i = n - EDGE;
    int64_t o = off + i * t->stride[d];
    if (d == t->ndim - 1)
      f(p, o);
    else
      visit(p, d + 1, o, f);
  }
}

static void stat_value(printer *p, int64_t off) {
  int64_t iv;
  double v = fabs(load(p->t, off, &iv));
  if (!isfinite(v)) return;
  if (v != floor(v)) p->int_mode = false;
  if (v > p->max_abs) p->max_abs = v;
  if (v != 0 && (v < p->min_abs || p->min_abs == 0)) p->min_abs = v;
  p->any_finite = true;
}

static void width_value(printer *p, int64_t off) {
  char buf[64];
  int w = fmt_value(p, off, buf, sizeof buf);
  if (w > p->width) p->width = w;
}

static void choose_format(printer *p) {
  p->int_mode = !p->is_int;
  int64_t off = p->t->offset;
  if (p->t->ndim == 0)
    stat_value(p, off);
  else
    visit(p, 0, off, stat_value);
  if (!p->is_int && p->any_finite) {
    if (p->int_mode)
      p->sci = p->max_abs >= 1e8;
    else
      p->sci = p->max_abs >= 1e8 ||
               (p->min_abs > 0 && (p->min_abs < 1e-4 || p->max_abs / p->min_abs > 1000));
  }
  if (p->t->ndim == 0)
    width_value(p, off);
  else
    visit(p, 0, off, width_value);
}

/* ---- layout ------------------------------------------------------------------- */

static void add_spaces(luaL_Buffer *b, int n) {
  for (int i = 0; i < n; i++) luaL_addchar(b, ' ');
}

static void add_value(luaL_Buffer *b, const printer *p, int64_t off) {
  char buf[64];
  int w = fmt_value(p, off, buf, sizeof buf);
  add_spaces(b, p->width - w);
  luaL_addstring(b, buf);
}

/* innermost dim: "[v, v, ..., v]" wrapped at LINE_WIDTH */
static void add_row(luaL_Buffer *b, const printer *p, int64_t off, int indent) {
  const cnn_tensor *t = p->t;
  int d = t->ndim - 1;
  int64_t n = t->shape[d];
  int per_line = (LINE_WIDTH - indent - 1) / (p->width + 2);
  if (per_line < 1) per_line = 1;
  luaL_addchar(b, '[');
  int col = 0;
  for (int64_t i = 0; i < n; i++) {
    if (i > 0) {
      luaL_addchar(b, ',');
      if (col == per_line) {
        luaL_addchar(b, '\n');
        add_spaces(b, indent + 1);
        col = 0;
      } else {
        luaL_addchar(b, ' ');
      }
    }
    if (p->summarize && n > 2 * EDGE && i == EDGE) {
      luaL_addstring(b, "...,");
      luaL_addchar(b, ' ');
      i = n - EDGE;
    }
    add_value(b, p, off + i * t->stride[d]);
    col++;
  }
  luaL_addchar(b, ']');
}

static void add_dim(luaL_Buffer *b, const printer *p, int d, int64_t off) {
  const cnn_tensor *t = p->t;
  if (d == t->ndim - 1) {
    add_row(b, p, off, d);
    return;
  }
  int64_t n = t->shape[d];
  luaL_addchar(b, '[');
  for (int64_t i = 0; i < n; i++) {
    if (i > 0) {
      luaL_addchar(b, ',');
      for (int k = 0; k < t->ndim - d - 1; k++) luaL_addchar(b, '\n');
      add_spaces(b, d + 1);
    }
    if (p->summarize && n > 2 * EDGE && i == EDGE) {
      luaL_addstring(b, "...,");
      for (int k = 0; k < t->ndim - d - 1; k++) luaL_addchar(b, '\n');
      add_spaces(b, d + 1);
      i = n - EDGE;
    }
    add_dim(b, p, d + 1, off + i * t->stride[d]);
  }
  luaL_addchar(b, ']');
}

static void add_footer(luaL_Buffer *b, const cnn_tensor *orig) {
  char shape[CNN_SHAPE_STR], dev[32], line[CNN_SHAPE_STR + 160];
  const char *gf = cnn_grad_fn_name(orig);
  int n = snprintf(line, sizeof line, "[cnn.Tensor %s %s %s", cnn_tensor_shape_str(orig, shape),
                   cnn_dtype_name(orig->dtype), cnn_device_str(cnn_tensor_device(orig), dev));
  if (gf)
    n += snprintf(line + n, sizeof line - n, ", grad_fn=%s", gf);
  else if (orig->requires_grad)
    n += snprintf(line + n, sizeof line - n, ", requires_grad=true");
  snprintf(line + n, sizeof line - n, "]");
  luaL_addstring(b, line);
}

/* A CPU tensor of a printable dtype for t (new reference) or NULL. */
static cnn_tensor *printable(cnn_tensor *t) {
  cnn_tensor *c = t;
  cnn_tensor_retain(c);
  if (cnn_tensor_device(c).type != CNN_CPU) {
    cnn_tensor *h = cnn_to_device(c, CNN_DEVICE_CPU);
    cnn_tensor_release(c);
    if (!(c = h)) return NULL;
  }
  if (c->dtype == CNN_FLOAT16 || c->dtype == CNN_BFLOAT16) {
    cnn_tensor *f = cnn_to_dtype(c, CNN_FLOAT32);
    cnn_tensor_release(c);
    c = f;
  }
  return c;
}

int cnn_lua_tensor_tostring(lua_State *L) {
  cnn_tensor *orig = cnn_lua_check_tensor(L, 1);
  cnn_tensor *t = printable(orig);
  if (!t) return cnn_lua_error(L);
  cnn_lua_push_tensor(L, t); /* anchored: luaL_Buffer may raise */
  printer p = {.t = t, .is_int = !cnn_dtype_is_float(t->dtype)};
  p.summarize = cnn_tensor_numel(t) > SUMMARY_THRESHOLD;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  if (cnn_tensor_numel(t) == 0) {
    luaL_addstring(&b, "[]");
  } else {
    choose_format(&p);
    if (t->ndim == 0)
      add_value(&b, &p, t->offset);
    else
      add_dim(&b, &p, 0, t->offset);
  }
  luaL_addchar(&b, '\n');
  add_footer(&b, orig);
  luaL_pushresult(&b);
  return 1;
}
