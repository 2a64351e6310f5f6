/*
 * nn_conv_transpose.c -- conv_transpose2d on tensors (PyTorch's
 * ConvTranspose2d): validation, output allocation, autograd.
 *
 * Design.  A transposed convolution is the input-gradient of a convolution:
 * y = conv_transpose2d(x, w) is dX of the convolution "conv" whose input is
 * y's shape, whose output is x's shape and whose weight is w.  PyTorch's
 * weight layout (in x out/groups x kH x kW) is exactly conv's K x C/groups
 * x R x S with K = in, C = out.  So the op describes conv by an ordinary
 * cnn_conv_shape (transpose_shape() below: C, H, W are the transposed
 * output's, K, OH, OW its input's) and runs the backend's convolution
 * entries with the roles of the passes swapped:
 *
 *   transposed          conv entry              (x: our input, y: our output)
 *   forward             conv2d_backward_data    dy := x, dx := y
 *   backward data       conv2d_forward          x := dy_out, y := dx (no bias)
 *   backward weight     conv2d_backward_weight  dy := x, x := dy_out
 *
 * A backend with the optional entries conv_transpose2d_forward/_backward
 * (the CPU) takes the same shape and runs the whole op, bias and bias
 * gradient included, in one call each: on the CPU oneDNN's deconvolution
 * primitive for float32 (core/cpu/deconv_onednn.c), and the swapped
 * convolution passes below for the other paths.  Without them (CUDA, the
 * fake device of the tests) core calls the convolution entries as in the
 * table -- cuDNN's backward-data as the forward, or the direct kernel --
 * adds the bias after the forward in place (one broadcast add) and sums dy
 * over N, H, W for its gradient.  Every path follows: oneDNN, im2col +
 * GEMM, float64, the naive loops of CNN_CONV_NAIVE.
 *
 * Geometry.  With padding p, output_padding op (op < stride or op <
 * dilation, as PyTorch), Hout = (H-1)*stride - 2p + dilation*(kH-1) + op + 1.
 * conv's padding is p on top and p - stride*floor(op/stride) at the bottom
 * (p when op < stride, the usual case): then conv's floor-division output
 * size is exactly H, and the op extra rows are rows that no window of conv
 * reaches -- they get the bias only, as in PyTorch.  When that bottom pad
 * would be negative (op >= stride, allowed by dilation > op, with p too
 * small), it crops: conv runs on the first Hout + pad rows only (pad 0),
 * which hold every row a window reaches, and the rest are zeros (`crop`).
 * Cropped outputs take the table's path (the bias must reach the cropped
 * rows too, and their gradient).
 */
#include "autocast.h"
#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "ops_internal.h"
#include "tensor_internal.h"

#include <stdio.h>
#include <string.h>

#define OP "conv_transpose2d"

static int check_params(const cnn_conv_transpose_params *p) {
  for (int i = 0; i < 2; i++) {
    if (p->stride[i] < 1 || p->dilation[i] < 1 || p->pad[i] < 0 || p->output_padding[i] < 0 ||
        p->groups < 1) {
      cnn_set_error(OP ": stride, dilation and groups must be positive, padding and "
                       "output_padding non-negative");
      return -1;
    }
    if (p->output_padding[i] >= p->stride[i] && p->output_padding[i] >= p->dilation[i]) {
      cnn_set_error(OP ": output padding must be smaller than either stride or dilation, got "
                       "output_padding %dx%d, stride %dx%d, dilation %dx%d",
                    p->output_padding[0], p->output_padding[1], p->stride[0], p->stride[1],
                    p->dilation[0], p->dilation[1]);
      return -1;
    }
  }
  return 0;
}

static int check_shapes(const cnn_tensor *x, const cnn_tensor *w, const cnn_tensor *b,
                        const cnn_conv_transpose_params *p) {
  char a[CNN_SHAPE_STR], c[CNN_SHAPE_STR];
  if (x->ndim != 4 || w->ndim != 4 || w->shape[2] < 1 || w->shape[3] < 1) {
    cnn_set_error(
        OP ": expected a 4-d input (N x C x H x W) and a 4-d weight (in x out/groups x kH x kW, "
           "kH and kW at least 1), got input %s and weight %s",
        cnn_tensor_shape_str(x, a), cnn_tensor_shape_str(w, c));
    return -1;
  }
  if (w->shape[0] % p->groups) {
    cnn_set_error(OP ": weight %s has %lld input channels, not divisible by groups %d",
                  cnn_tensor_shape_str(w, c), (long long)w->shape[0], p->groups);
    return -1;
  }
  if (x->shape[1] != w->shape[0]) {
    cnn_set_error(OP ": input %s has %lld channels, weight %s expects %lld (weight is in x "
                     "out/groups x kH x kW)",
                  cnn_tensor_shape_str(x, a), (long long)x->shape[1], cnn_tensor_shape_str(w, c),
                  (long long)w->shape[0]);
    return -1;
  }
  if (b && (b->ndim != 1 || b->shape[0] != w->shape[1] * p->groups)) {
    cnn_set_error(OP ": bias %s does not match weight %s with groups %d (expected %lld elements)",
                  cnn_tensor_shape_str(b, a), cnn_tensor_shape_str(w, c), p->groups,
                  (long long)(w->shape[1] * p->groups));
    return -1;
  }
  return 0;
}

/* Transposed output size along one dimension (PyTorch's formula). */
static int64_t out_size(int64_t in, int k, const cnn_conv_transpose_params *p, int i) {
  return (in - 1) * p->stride[i] - 2 * (int64_t)p->pad[i] + (int64_t)p->dilation[i] * (k - 1) +
         p->output_padding[i] + 1;
}

/* conv's bottom (i = 0) or right (1) padding; negative: see "Geometry". */
static int far_pad(const cnn_conv_transpose_params *p, int i) {
  return p->pad[i] - p->stride[i] * (p->output_padding[i] / p->stride[i]);
}

/* The convolution whose input-gradient this op is (the header), on the
 * transposed output less its last crop[0] rows and crop[1] columns. */
static int transpose_shape(const cnn_tensor *x, const cnn_tensor *w,
                           const cnn_conv_transpose_params *p, cnn_conv_shape *s, int64_t out[2],
                           int crop[2]) {
  int64_t R = w->shape[2], S = w->shape[3];
  out[0] = out_size(x->shape[2], (int)R, p, 0);
  out[1] = out_size(x->shape[3], (int)S, p, 1);
  if (out[0] <= 0 || out[1] <= 0) {
    char a[CNN_SHAPE_STR], c[CNN_SHAPE_STR];
    cnn_set_error(
        OP ": input %s with weight %s gives an output of %lldx%lld: too small (less padding?)",
        cnn_tensor_shape_str(x, a), cnn_tensor_shape_str(w, c), (long long)out[0],
        (long long)out[1]);
    return -1;
  }
  int pb = far_pad(p, 0), pr = far_pad(p, 1);
  crop[0] = pb < 0 ? -pb : 0, crop[1] = pr < 0 ? -pr : 0;
  *s = (cnn_conv_shape){x->shape[0],
                        w->shape[1] * p->groups,
                        out[0] - crop[0],
                        out[1] - crop[1],
                        x->shape[1],
                        R,
                        S,
                        x->shape[2],
                        x->shape[3],
                        p->stride[0],
                        p->stride[1],
                        p->pad[0],
                        pb + crop[0],
                        p->pad[1],
                        pr + crop[1],
                        p->dilation[0],
                        p->dilation[1],
                        p->groups,
                        CNN_FLOAT32,
                        0,
                        0};
  return 0;
}

/* The backends' conv entries name "conv2d" in their errors (out of memory,
 * interrupted, a oneDNN or cuDNN failure): they serve conv2d too.  Here
 * they run for this op, so a failed call renames the message. */
static int renamed(int rc) {
  const char *msg = cnn_error();
  if (rc == 0 || strncmp(msg, "conv2d:", 7) != 0) return rc;
  char rest[1024];
  snprintf(rest, sizeof rest, "%s", msg + 7);
  cnn_set_error(OP ":%s", rest);
  return rc;
}

/* ---- backward ---------------------------------------------------------------- */

typedef struct {
  cnn_conv_shape s;
  int crop[2]; /* last rows/columns no window reaches, left out of s (Geometry) */
} transpose_geometry;

/* dy over conv's input: the gradient less its cropped rows/columns. */
static cnn_tensor *cropped_grad(cnn_tensor *g, const cnn_conv_shape *s) {
  cnn_tensor *rows = cnn_narrow(g, 2, 0, s->H);
  cnn_tensor *both = rows ? cnn_narrow(rows, 3, 0, s->W) : NULL;
  cnn_tensor *dy = both ? cnn_contiguous(both) : NULL;
  cnn_tensor_release(rows), cnn_tensor_release(both);
  return dy;
}

/* The backend's own entry: dx, dw and db in one call. */
static int whole_backward(const cnn_backend *be, cnn_node *n, cnn_tensor *x, cnn_tensor *w,
                          cnn_tensor *dy, const cnn_conv_shape *s, cnn_tensor **gin) {
  cnn_tensor *dw = NULL;
  int rc = cnn_conv_grad_buffers(n, x, w, s->C, gin, &dw);
  if (rc == 0)
    rc = renamed(be->conv_transpose2d_backward(cnn_backend_dev(x), cnn_get_conv_algo(), x->dtype, s,
                                               cnn_tensor_data(dy), cnn_tensor_data(x),
                                               cnn_tensor_data(w), cnn_data_or_null(gin[0]),
                                               cnn_data_or_null(dw), cnn_data_or_null(gin[2])));
  cnn_conv_grad_keep_dw(n, gin, dw);
  return rc;
}

static int transpose_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  const transpose_geometry *geo = (const transpose_geometry *)n->geometry;
  const cnn_conv_shape *s = &geo->s;
  cnn_tensor *x = cnn_node_saved(n, 0), *w = cnn_node_saved(n, 1);
  if (!x || !w) return -1;
  cnn_tensor *dy = cropped_grad(g, s);
  const cnn_backend *be = dy ? cnn_backend_of(x, OP) : NULL;
  int rc = be ? 0 : -1, dev = be ? cnn_backend_dev(x) : 0;
  if (be && be->conv_transpose2d_backward && !geo->crop[0] && !geo->crop[1]) {
    rc = whole_backward(be, n, x, w, dy, s, gin);
    cnn_tensor_release(dy);
    return rc;
  }
  cnn_conv_algo algo = cnn_get_conv_algo();
  if (rc == 0 && n->needs[0]) {
    rc = (gin[0] = cnn_empty(x->ndim, x->shape, x->dtype, cnn_tensor_device(x))) ? 0 : -1;
    if (rc == 0)
      rc = CNN_BE_CALL(be, OP, conv2d_forward, dev, algo, x->dtype, s, cnn_tensor_data(dy),
                       cnn_tensor_data(w), NULL, cnn_tensor_data(gin[0]));
  }
  if (rc == 0 && n->needs[1]) {
    rc = (gin[1] = cnn_empty(w->ndim, w->shape, w->dtype, cnn_tensor_device(w))) ? 0 : -1;
    if (rc == 0)
      rc = CNN_BE_CALL(be, OP, conv2d_backward_weight, dev, algo, x->dtype, s, cnn_tensor_data(x),
                       cnn_tensor_data(dy), cnn_tensor_data(gin[1]), NULL);
  }
  rc = renamed(rc);
  if (rc == 0 && n->ninputs > 2 && n->needs[2])
    rc = (gin[2] = cnn_reduce(CNN_RED_SUM, g, 1u << 0 | 1u << 2 | 1u << 3, false, 0)) ? 0 : -1;
  cnn_tensor_release(dy);
  return rc;
}

/* ---- forward -------------------------------------------------------------------- */

/* y[n, c, :, :] += b[c], in place, recording nothing. */
static int add_bias(cnn_tensor *y, cnn_tensor *b) {
  int64_t shape[4] = {1, b->shape[0], 1, 1};
  bool was = cnn_set_grad_enabled(false);
  cnn_tensor *bv = cnn_view(b, 4, shape);
  int rc = bv ? cnn_binary_(CNN_OP_ADD, y, bv) : -1;
  cnn_tensor_release(bv);
  cnn_set_grad_enabled(was);
  return rc;
}

/* y from the backend's own entry, bias included (no crop). */
static cnn_tensor *whole_forward(const cnn_backend *be, cnn_tensor *xc, cnn_tensor *wc,
                                 cnn_tensor *b, const cnn_conv_shape *s) {
  int64_t shape[4] = {s->N, s->C, s->H, s->W};
  cnn_tensor *bc = b ? cnn_contiguous(b) : NULL;
  cnn_tensor *y = bc || !b ? cnn_empty(4, shape, xc->dtype, cnn_tensor_device(xc)) : NULL;
  if (y && renamed(be->conv_transpose2d_forward(cnn_backend_dev(xc), cnn_get_conv_algo(), xc->dtype,
                                                s, cnn_tensor_data(xc), cnn_tensor_data(wc),
                                                cnn_data_or_null(bc), cnn_tensor_data(y))))
    cnn_tensor_release(y), y = NULL;
  cnn_tensor_release(bc);
  return y;
}

/* y from the backend over conv's input (N x C x H x W), zero-padded by
 * the cropped rows/columns, then the bias. */
static cnn_tensor *forward_values(cnn_tensor *xc, cnn_tensor *wc, cnn_tensor *b,
                                  const transpose_geometry *geo) {
  const cnn_conv_shape *s = &geo->s;
  const cnn_backend *be = cnn_backend_of(xc, OP);
  if (be && be->conv_transpose2d_forward && !geo->crop[0] && !geo->crop[1])
    return whole_forward(be, xc, wc, b, s);
  int64_t shape[4] = {s->N, s->C, s->H, s->W};
  cnn_tensor *y = be ? cnn_empty(4, shape, xc->dtype, cnn_tensor_device(xc)) : NULL;
  if (y && renamed(CNN_BE_CALL(be, OP, conv2d_backward_data, cnn_backend_dev(xc),
                               cnn_get_conv_algo(), xc->dtype, s, cnn_tensor_data(xc),
                               cnn_tensor_data(wc), cnn_tensor_data(y))))
    cnn_tensor_release(y), y = NULL;
  if (y && (geo->crop[0] || geo->crop[1])) {
    int64_t pads[4] = {0, geo->crop[1], 0, geo->crop[0]};
    bool was = cnn_set_grad_enabled(false);
    cnn_tensor *full = cnn_pad(y, 4, pads, 0);
    cnn_set_grad_enabled(was);
    cnn_tensor_release(y);
    y = full;
  }
  if (y && b && add_bias(y, b)) cnn_tensor_release(y), y = NULL;
  return y;
}

/* Under autocast the operands are cast (math_ok false below: the
 * transposed passes do not take the CPU's bfloat16 arithmetic yet). */
static cnn_tensor *transpose_op(cnn_tensor **in, cnn_dtype math, const void *p) {
  return cnn_conv_transpose2d(in[0], in[1], in[2], p);
}

cnn_tensor *cnn_conv_transpose2d(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b,
                                 const cnn_conv_transpose_params *p) {
  cnn_tensor *operands[3] = {x, w, b};
  cnn_dtype run = x && w ? cnn_autocast_target(operands, 3) : CNN_FLOAT32;
  if (run != CNN_FLOAT32) return cnn_autocast_call(run, 3, operands, transpose_op, false, p);
  transpose_geometry geo;
  int64_t out[2];
  if (cnn_conv_check_dtypes(OP, x, w, b) || check_params(p) || check_shapes(x, w, b, p) ||
      transpose_shape(x, w, p, &geo.s, out, geo.crop))
    return NULL;
  cnn_tensor *xc = cnn_contiguous(x), *wc = cnn_contiguous(w);
  cnn_tensor *y = xc && wc ? forward_values(xc, wc, b, &geo) : NULL;
  cnn_node *n = y ? cnn_autograd_record(y, "ConvTranspose2dBackward", transpose_backward, b ? 3 : 2,
                                        (cnn_tensor *[]){x, w, b})
                  : NULL;
  if (n) {
    cnn_node_save(n, 0, xc);
    cnn_node_save(n, 1, wc);
    cnn_node_set_geometry(n, &geo, sizeof geo);
  }
  cnn_tensor_release(xc), cnn_tensor_release(wc);
  return y;
}
