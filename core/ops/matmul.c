/*
 * matmul.c -- matrix products through OpenBLAS: matmul (torch.matmul's
 * rules: 1-D . 1-D dot, 2-D mm, batched with broadcast batch dims, 1-D
 * operands promoted to a row / column and the added dim removed), mm
 * (strictly 2-D) and bmm (strictly 3-D, equal batches).
 *
 * Design.  Operands are viewed as (batch..., rows, cols) matrices.  For each
 * output batch the product is one gemm entry of the device's backend
 * (OpenBLAS through core/blas.c on the CPU, cuBLAS): a matrix whose column
 * stride is 1 is passed as is (NoTrans, ld = row stride) and one whose row
 * stride is 1 as its transpose (Trans, ld = column stride), so transposed
 * views need no copy; any other layout (expanded rows, gathered columns)
 * is made contiguous first.  Broadcast batch dims read the same matrix
 * again (stride 0); the output is always contiguous.  Only float32 and
 * float64 (mixed operands promote); integer products are refused;
 * float16/bfloat16 products run on a backend with `half` (CUDA;
 * cnn.autocast hands the products to core/autocast.c first, which calls
 * back with cast operands, or on the CPU with bfloat16 arithmetic over the
 * float32 ones: gemm_bf16, kept in the node for the backward's products).
 *
 * Devices: operands share a device; the products are one backend
 * gemm_batched call (cuBLAS strided batched) where the backend has it and
 * each operand's batch offsets form an arithmetic progression (broadcast:
 * step 0), else one gemm per batch, with the same layout flags
 * (run_products).
 *
 * Autograd: one node per product (saved a and b); the backward reuses
 * matmul: dA = dC . B^T and dB = A^T . dC in the promoted (batch, m, n)
 * form, summed over broadcast batch dims (cnn_sum_to) and reshaped back to
 * the operands' shapes.
 */
#include <limits.h>
#include <string.h>

#include "autocast.h"
#include "autograd.h"
#include "backend.h"
#include "cnn.h"
#include "tensor_internal.h"

/* ---- layout ---------------------------------------------------------------- */

typedef struct {
  cnn_tensor *t; /* the operand as (batch..., rows, cols): owned */
  int nb;        /* batch dims */
  int64_t rows, cols;
  bool trans; /* pass transposed to gemm */
  int64_t ld;
} mat_view;

/* Can (rows x cols, strides rs, cs) be handed to BLAS as is? */
static bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *trans,
                        int64_t *ld) {
  int64_t c1 = cols > 1 ? cols : 1, r1 = rows > 1 ? rows : 1;
  if (cs == 1 || cols == 1) {
    *trans = false;
    *ld = rows == 1 ? c1 : rs;
    if (*ld >= c1) return true;
  }
  if (rs == 1 || rows == 1) {
    *trans = true;
    *ld = cols == 1 ? r1 : cs;
    if (*ld >= r1) return true;
  }
  return false;
}

static cnn_tensor *nograd_reshape(cnn_tensor *t, int nd, const int64_t *shape) {
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *r = cnn_reshape(t, nd, shape);
  cnn_set_grad_enabled(prev);
  return r;
}

/* t (1-D promoted to a row if `row`, else a column) in dtype dt, BLAS-ready */
static int make_mat(cnn_tensor *t, bool row, cnn_dtype dt, mat_view *m) {
  int64_t shape[CNN_MAX_DIMS];
  int nd = t->ndim;
  memcpy(shape, t->shape, sizeof shape);
  if (nd == 1) {
    shape[1] = row ? shape[0] : 1;
    shape[0] = row ? 1 : shape[0];
    nd = 2;
  }
  cnn_tensor *v = nograd_reshape(t, nd, shape);
  bool prev = cnn_set_grad_enabled(false);
  cnn_tensor *c = v ? cnn_to_dtype(v, dt) : NULL;
  cnn_tensor_release(v);
  if (!c) return cnn_set_grad_enabled(prev), -1;
  m->nb = nd - 2, m->rows = shape[nd - 2], m->cols = shape[nd - 1];
  if (!blas_layout(m->rows, m->cols, c->stride[nd - 2], c->stride[nd - 1], &m->trans, &m->ld)) {
    cnn_tensor *cc = cnn_clone(c);
    cnn_tensor_release(c);
    c = cc;
    if (c) blas_layout(m->rows, m->cols, c->stride[nd - 2], c->stride[nd - 1], &m->trans, &m->ld);
  }
  cnn_set_grad_enabled(prev);
  m->t = c;
  return c ? 0 : -1;
}

/* ---- the product ------------------------------------------------------------------ */

/* batch offsets (elements) of operand m for every output batch index */
static int64_t batch_offset(const mat_view *m, int nb, const int64_t *bshape, int64_t b) {
  int64_t off = m->t->offset;
  for (int d = nb - 1; d >= 0; d--) {
    int64_t i = b % bshape[d];
    b /= bshape[d];
    int md = d - (nb - m->nb);
    if (md >= 0 && m->t->shape[md] != 1) off += i * m->t->stride[md];
  }
  return off;
}

/* The step between operand m's consecutive batch offsets when they form one
 * arithmetic progression over the output batches (one batch dim, batch dims
 * that collapse into one, or a broadcast operand: step 0); -1 otherwise. */
static int64_t batch_step(const mat_view *m, int nb, const int64_t *bshape, int64_t nbatch) {
  if (nbatch < 2) return 0;
  int64_t o0 = batch_offset(m, nb, bshape, 0), step = batch_offset(m, nb, bshape, 1) - o0;
  if (step < 0) return -1;
  for (int64_t i = 2; i < nbatch; i++)
    if (batch_offset(m, nb, bshape, i) != o0 + i * step) return -1;
  return step;
}

/* `count` products C_i (m x n, contiguous, step m*n) = op(A_i) op(B_i),
 * operand i at pa + i*sa, pb + i*sb (elements): the backend's gemm_bf16
 * (bfloat16 arithmetic over float32, `bf16`), gemm_batched (count > 1), or
 * gemm (count 1). */
static int products_call(const cnn_backend *be, int dev, cnn_dtype dt, bool bf16,
                         const mat_view *a, const mat_view *b, const void *pa, int64_t sa,
                         const void *pb, int64_t sb, void *o, int64_t count) {
  int64_t m = a->rows, n = b->cols, k = a->cols;
  if (bf16)
    return CNN_BE_CALL(be, "matmul", gemm_bf16, dev, a->trans, b->trans, m, n, k, pa, a->ld, sa,
                       pb, b->ld, sb, o, n, m * n, count);
  if (count > 1)
    return be->gemm_batched(dev, dt, a->trans, b->trans, m, n, k, pa, a->ld, sa, pb, b->ld, sb, o,
                            n, m * n, count);
  return be->gemm(dev, dt, a->trans, b->trans, m, n, k, pa, a->ld, pb, b->ld, o, n);
}

/* The products in the backend of out's device, in arithmetic `math`
 * (CNN_BFLOAT16: gemm_bf16): one batched call (cuBLAS strided batched,
 * gemm_bf16) where the backend has it and both operands' batch offsets
 * are progressions, else one call per output batch (broadcast batches read
 * the same matrix again).  The output is contiguous: C's step is m*n.  An
 * empty inner dim (K = 0) gives zeros. */
static int run_products(cnn_dtype dt, cnn_dtype math, const mat_view *a, const mat_view *b, int nb,
                        const int64_t *bshape, cnn_tensor *out) {
  const cnn_backend *be = cnn_backend_of(out, "matmul");
  if (!be) return -1;
  if (!be->gemm) return cnn_backend_unsupported("matmul");
  bool bf16 = math == CNN_BFLOAT16;
  int64_t nbatch = 1, m = a->rows, n = b->cols;
  for (int d = 0; d < nb; d++) nbatch *= bshape[d];
  if (m == 0 || n == 0 || nbatch == 0) return 0;
  size_t es = cnn_dtype_size(dt);
  char *o = cnn_tensor_data(out);
  const char *a0 = a->t->storage->data, *b0 = b->t->storage->data;
  int dev = cnn_backend_dev(out);
  int64_t sa = (be->gemm_batched || bf16) && nbatch > 1 ? batch_step(a, nb, bshape, nbatch) : -1;
  int64_t sb = sa >= 0 ? batch_step(b, nb, bshape, nbatch) : -1;
  if (sa >= 0 && sb >= 0)
    return products_call(be, dev, dt, bf16, a, b, a0 + batch_offset(a, nb, bshape, 0) * (int64_t)es,
                         sa, b0 + batch_offset(b, nb, bshape, 0) * (int64_t)es, sb, o, nbatch);
  for (int64_t i = 0; i < nbatch; i++) {
    const char *pa = a0 + batch_offset(a, nb, bshape, i) * (int64_t)es;
    const char *pb = b0 + batch_offset(b, nb, bshape, i) * (int64_t)es;
    if (products_call(be, dev, dt, bf16, a, b, pa, 0, pb, 0, o + (size_t)(i * m * n) * es, 1))
      return -1;
  }
  return 0;
}

/* ---- validation --------------------------------------------------------------------- */

static int check_operands(const char *op, const cnn_tensor *a, const cnn_tensor *b) {
  char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
  if (!a || !b) return cnn_set_error("%s: missing tensor argument", op), -1;
  const cnn_tensor *bad = !cnn_dtype_is_float(a->dtype)   ? a
                          : !cnn_dtype_is_float(b->dtype) ? b
                                                          : NULL;
  if (cnn_check_same_device(op, a, b)) return -1;
  bool half_ok = a->dtype == b->dtype && a->dtype > CNN_FLOAT64 && cnn_backend_half(a);
  if (bad || ((a->dtype > CNN_FLOAT64 || b->dtype > CNN_FLOAT64) && !half_ok))
    return cnn_set_error(
               "%s: %s not supported, use :float()%s", op,
               cnn_dtype_name(bad                      ? bad->dtype
                              : a->dtype > CNN_FLOAT64 ? a->dtype
                                                       : b->dtype),
               bad ? "" : " (half precision products run on a CUDA device, under cnn.autocast)"),
           -1;
  if (a->ndim == 0 || b->ndim == 0)
    return cnn_set_error("%s: both arguments need at least one dimension (got %s and %s)", op,
                         cnn_tensor_shape_str(a, s1), cnn_tensor_shape_str(b, s2)),
           -1;
  int64_t ka = a->shape[a->ndim - 1], kb = b->ndim == 1 ? b->shape[0] : b->shape[b->ndim - 2];
  if (ka != kb)
    return cnn_set_error("%s: shapes %s and %s cannot be multiplied (%lld != %lld)", op,
                         cnn_tensor_shape_str(a, s1), cnn_tensor_shape_str(b, s2), (long long)ka,
                         (long long)kb),
           -1;
  int64_t big = INT_MAX;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] > big) return cnn_set_error("%s: dimension too large for BLAS", op), -1;
  for (int i = 0; i < b->ndim; i++)
    if (b->shape[i] > big) return cnn_set_error("%s: dimension too large for BLAS", op), -1;
  return 0;
}

/* batch shape: broadcast of the two batch parts */
static int batch_shape(const char *op, const cnn_tensor *a, const cnn_tensor *b, const mat_view *ma,
                       const mat_view *mb, int *nb, int64_t *shape) {
  char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
  *nb = ma->nb > mb->nb ? ma->nb : mb->nb;
  for (int d = 0; d < *nb; d++) {
    int da = d - (*nb - ma->nb), db = d - (*nb - mb->nb);
    int64_t sa = da >= 0 ? ma->t->shape[da] : 1, sb = db >= 0 ? mb->t->shape[db] : 1;
    if (sa != sb && sa != 1 && sb != 1)
      return cnn_set_error("%s: batch dimensions of %s and %s cannot be broadcast", op,
                           cnn_tensor_shape_str(a, s1), cnn_tensor_shape_str(b, s2)),
             -1;
    shape[d] = sa == 1 ? sb : sa;
  }
  return 0;
}

/* ---- autograd ------------------------------------------------------------------------- */

static cnn_tensor *as_matrix(cnn_tensor *t, bool row) {
  if (t->ndim != 1) return cnn_tensor_retain(t), t;
  int64_t shape[2] = {row ? 1 : t->shape[0], row ? t->shape[0] : 1};
  return cnn_reshape(t, 2, shape);
}

static cnn_tensor *mT(cnn_tensor *t) { return cnn_transpose(t, t->ndim - 2, t->ndim - 1); }

static cnn_tensor *product(const char *op, const char *node_name, cnn_tensor *a, cnn_tensor *b,
                          cnn_dtype math);

/* gradient of operand i in matrix form, reduced to the operand's shape; the
 * products in the forward's arithmetic (the node's geometry) */
static cnn_tensor *operand_grad(cnn_node *n, int i, cnn_tensor *a2, cnn_tensor *b2,
                                cnn_tensor *g2) {
  cnn_dtype math = *(const cnn_dtype *)n->geometry;
  cnn_tensor *t = mT(i == 0 ? b2 : a2);
  cnn_tensor *p = !t            ? NULL
                  : i == 0      ? product("matmul", "MatmulBackward", g2, t, math)
                                : product("matmul", "MatmulBackward", t, g2, math);
  cnn_tensor_release(t);
  cnn_tensor *m = i == 0 ? a2 : b2;
  cnn_tensor *s = p ? cnn_sum_to(p, m->ndim, m->shape) : NULL;
  cnn_tensor_release(p);
  cnn_tensor *r = s ? cnn_reshape(s, n->in_ndim[i], n->in_shape[i]) : NULL;
  cnn_tensor_release(s);
  if (!r) return NULL;
  cnn_tensor *c = cnn_grad_to_input(n, i, r);
  cnn_tensor_release(r);
  return c;
}

static int matmul_backward(cnn_node *n, cnn_tensor *g, cnn_tensor **gin) {
  cnn_tensor *a = cnn_node_saved(n, 0), *b = a ? cnn_node_saved(n, 1) : NULL;
  if (!b) return -1;
  cnn_tensor *a2 = as_matrix(a, true), *b2 = a2 ? as_matrix(b, false) : NULL;
  /* g with the dims removed for 1-D operands restored: (batch..., m, n) */
  int64_t shape[CNN_MAX_DIMS];
  int nd = g->ndim;
  memcpy(shape, g->shape, sizeof shape);
  if (a->ndim == 1 && b->ndim == 1) {
    nd = 2, shape[0] = 1, shape[1] = 1;
  } else {
    if (a->ndim == 1) shape[nd] = shape[nd - 1], shape[nd - 1] = 1, nd++;
    if (b->ndim == 1) shape[nd++] = 1;
  }
  cnn_tensor *g2 = b2 ? cnn_reshape(g, nd, shape) : NULL;
  int rc = g2 ? 0 : -1;
  for (int i = 0; i < 2 && rc == 0; i++)
    if (n->needs[i]) rc = (gin[i] = operand_grad(n, i, a2, b2, g2)) ? 0 : -1;
  cnn_tensor_release(a2);
  cnn_tensor_release(b2);
  cnn_tensor_release(g2);
  return rc;
}

/* ---- public ------------------------------------------------------------------------------ */

typedef struct {
  const char *op, *node_name;
} product_names;

/* a . b in arithmetic `math` (CNN_BFLOAT16 under autocast on the CPU),
 * recorded with math in the node's geometry. */
static cnn_tensor *product(const char *op, const char *node_name, cnn_tensor *a, cnn_tensor *b,
                           cnn_dtype math) {
  if (check_operands(op, a, b)) return NULL;
  cnn_dtype dt = a->dtype == b->dtype                                 ? a->dtype
                 : a->dtype == CNN_FLOAT64 || b->dtype == CNN_FLOAT64 ? CNN_FLOAT64
                                                                      : CNN_FLOAT32;
  mat_view ma = {0}, mb = {0};
  int nb;
  int64_t shape[CNN_MAX_DIMS];
  cnn_tensor *out = NULL;
  if (make_mat(a, true, dt, &ma) || make_mat(b, false, dt, &mb) ||
      batch_shape(op, a, b, &ma, &mb, &nb, shape))
    goto done;
  int nd = nb;
  if (a->ndim > 1) shape[nd++] = ma.rows;
  if (b->ndim > 1) shape[nd++] = mb.cols;
  if (nd > CNN_MAX_DIMS) {
    cnn_set_error("%s: result has too many dimensions", op);
    goto done;
  }
  out = cnn_empty(nd, shape, dt, cnn_tensor_device(a));
  if (!out) goto done;
  if (run_products(dt, math, &ma, &mb, nb, shape, out)) {
    cnn_tensor_release(out);
    out = NULL;
    goto done;
  }
  cnn_node *n = cnn_autograd_record(out, node_name, matmul_backward, 2, (cnn_tensor *[]){a, b});
  if (n) {
    cnn_node_save(n, 0, a), cnn_node_save(n, 1, b);
    cnn_node_set_geometry(n, &math, sizeof math);
  }
done:
  cnn_tensor_release(ma.t);
  cnn_tensor_release(mb.t);
  return out;
}

static cnn_tensor *autocast_product(cnn_tensor **in, cnn_dtype math, const void *names) {
  const product_names *p = names;
  return product(p->op, p->node_name, in[0], in[1], math);
}

static cnn_tensor *matmul_impl(const char *op, const char *node_name, cnn_tensor *a,
                               cnn_tensor *b) {
  cnn_tensor *operands[2] = {a, b};
  cnn_dtype run = a && b ? cnn_autocast_target(operands, 2) : CNN_FLOAT32;
  if (run != CNN_FLOAT32)
    return cnn_autocast_call(run, 2, operands, autocast_product, true,
                             &(product_names){op, node_name});
  return product(op, node_name, a, b, CNN_FLOAT32);
}

cnn_tensor *cnn_matmul_math(cnn_tensor *a, cnn_tensor *b, cnn_dtype math) {
  return product("matmul", "MatmulBackward", a, b, math);
}

cnn_tensor *cnn_matmul(cnn_tensor *a, cnn_tensor *b) {
  return matmul_impl("matmul", "MatmulBackward", a, b);
}

cnn_tensor *cnn_mm(cnn_tensor *a, cnn_tensor *b) {
  char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
  if (a && b && (a->ndim != 2 || b->ndim != 2)) {
    cnn_set_error("mm: expects two 2-D tensors, got %s and %s", cnn_tensor_shape_str(a, s1),
                  cnn_tensor_shape_str(b, s2));
    return NULL;
  }
  return matmul_impl("mm", "MmBackward", a, b);
}

cnn_tensor *cnn_bmm(cnn_tensor *a, cnn_tensor *b) {
  char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR];
  if (a && b && (a->ndim != 3 || b->ndim != 3 || a->shape[0] != b->shape[0])) {
    cnn_set_error("bmm: expects two 3-D tensors with the same batch size, got %s and %s",
                  cnn_tensor_shape_str(a, s1), cnn_tensor_shape_str(b, s2));
    return NULL;
  }
  return matmul_impl("bmm", "BmmBackward", a, b);
}
