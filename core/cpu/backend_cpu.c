/*
 * backend_cpu.c -- the CPU backend: core/backend.h's table filled with the
 * loops of core/cpu, as gpu/backend.cu fills the CUDA one.
 *
 * The entries have the table's signatures; `dev` is ignored.  The kernels
 * of kernels.h (conv, pool, batch norm, softmax), which predate the table,
 * are wrapped here; the other entries are defined with the table's
 * signature in elementwise.c, reduce.c, optim.c, index.c, loss.c (backend_cpu.h).  The
 * memory entries are NULL: host memory is storage.c's.  Every op entry is
 * filled, so core never reports a CPU op as unsupported.
 */
#include <string.h>

#include "blas.h"
#include "cpu/backend_cpu.h"

/* ---- matrix products (float32: sgemm.c; float64: OpenBLAS, core/blas.c) ---- */

static int gemm(int dev, cnn_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                const void *A, int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc) {
  (void)dev;
  if (K == 0) { /* zeros (BLAS refuses lda = 0) */
    size_t es = cnn_dtype_size(dt);
    for (int64_t i = 0; i < M; i++) memset((char *)C + (size_t)(i * ldc) * es, 0, (size_t)N * es);
    return 0;
  }
  if (dt == CNN_FLOAT32)
    cnn_cpu_sgemm(ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
  else
    cnn_blas_dgemm(ta, tb, (int)M, (int)N, (int)K, 1.0, A, (int)lda, B, (int)ldb, 0.0, C, (int)ldc);
  return 0;
}

/* bfloat16 arithmetic over float32 arrays (autocast; bf16_math.c) */
static int gemm_bf16(int dev, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A,
                     int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float *C,
                     int64_t ldc, int64_t sc, int64_t batch) {
  (void)dev;
  return cnn_cpu_gemm_bf16(ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, batch);
}

/* ---- convolution (conv.c picks oneDNN, im2col or the naive loops) ---- */

static int conv_fwd(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                    const void *x, const void *w, const void *b, void *y) {
  (void)dev;
  return cnn_cpu_conv2d_forward(algo, dt, s, x, w, b, y);
}
static int conv_bwd_data(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                         const void *dy, const void *w, void *dx) {
  (void)dev;
  return cnn_cpu_conv2d_backward_data(algo, dt, s, dy, w, dx);
}
static int conv_bwd_weight(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                           const void *dy, const void *x, void *dw, void *db) {
  (void)dev;
  return cnn_cpu_conv2d_backward_weight(algo, dt, s, dy, x, dw, db);
}
static int conv_bwd(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                    const void *dy, const void *x, const void *w, void *dx, void *dw, void *db) {
  (void)dev;
  return cnn_cpu_conv2d_backward(algo, dt, s, dy, x, w, dx, dw, db);
}

/* transposed convolution: conv_transpose.c picks oneDNN's
 * deconvolution or the convolution's passes */
static int conv_tr_fwd(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                       const void *x, const void *w, const void *b, void *y) {
  (void)dev;
  return cnn_cpu_conv_transpose2d_forward(algo, dt, s, x, w, b, y);
}
static int conv_tr_bwd(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                       const void *dy, const void *x, const void *w, void *dx, void *dw, void *db) {
  (void)dev;
  return cnn_cpu_conv_transpose2d_backward(algo, dt, s, dy, x, w, dx, dw, db);
}

/* net:fuse(): conv.c fuses the activation into oneDNN */
static int conv_act_fwd(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                        const void *x, const void *w, const void *b, cnn_unary_op act, double p0,
                        double p1, void *y) {
  (void)dev;
  return cnn_cpu_conv2d_act_forward(algo, dt, s, x, w, b, act, p0, p1, y);
}

/* the training block conv -> batch norm -> ReLU -> max pool: conv_block_onednn.c */
static int block_state(int dev, const cnn_conv_block_shape *s, size_t *bytes) {
  (void)dev;
  return cnn_cpu_conv_block_state_bytes(s, bytes);
}
static int block_fwd(int dev, const cnn_conv_block_shape *s, const float *x, const float *w,
                     const float *b, const float *gamma, const float *beta, float *y, float *mean,
                     float *var, void *state) {
  (void)dev;
  return cnn_cpu_conv_block_forward(s, x, w, b, gamma, beta, y, mean, var, state);
}
static int block_bwd(int dev, const cnn_conv_block_shape *s, const float *dy, const float *x,
                     const float *w, const float *gamma, const float *beta, const void *state,
                     float *dx, float *dw, float *db, float *dgamma, float *dbeta) {
  (void)dev;
  return cnn_cpu_conv_block_backward(s, dy, x, w, gamma, beta, state, dx, dw, db, dgamma, dbeta);
}

/* quantized inference (cnn.quantize): conv_int8.c */
static int conv_int8_fwd(int dev, cnn_conv_algo algo, const cnn_conv_shape *s, const float *x,
                         float x_scale, const float *wq, const float *w_scale, const float *b,
                         int relu, float *y) {
  (void)dev;
  return cnn_cpu_conv2d_int8_forward(algo, s, x, x_scale, wq, w_scale, b, relu, y);
}

/* ---- pooling (pool.c) ---- */

static int max_pool_fwd(int dev, cnn_dtype dt, const cnn_pool_shape *s, const void *x, void *y,
                        int64_t *indices) {
  (void)dev;
  return cnn_cpu_max_pool2d_forward(dt, s, x, y, indices);
}
static int max_pool_bwd(int dev, cnn_dtype dt, const cnn_pool_shape *s, const void *dy,
                        const int64_t *indices, void *dx) {
  (void)dev;
  return cnn_cpu_max_pool2d_backward(dt, s, dy, indices, dx);
}
static int avg_pool_fwd(int dev, cnn_dtype dt, const cnn_pool_shape *s, const void *x, void *y) {
  (void)dev;
  return cnn_cpu_avg_pool2d_forward(dt, s, x, y);
}
static int avg_pool_bwd(int dev, cnn_dtype dt, const cnn_pool_shape *s, const void *dy, void *dx) {
  (void)dev;
  return cnn_cpu_avg_pool2d_backward(dt, s, dy, dx);
}
static int adaptive_fwd(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                        int64_t OH, int64_t OW, const void *x, void *y) {
  (void)dev;
  return cnn_cpu_adaptive_avg_pool2d_forward(dt, N, C, H, W, OH, OW, x, y);
}
static int adaptive_bwd(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                        int64_t OH, int64_t OW, const void *dy, void *dx) {
  (void)dev;
  return cnn_cpu_adaptive_avg_pool2d_backward(dt, N, C, H, W, OH, OW, dy, dx);
}
static void copy_layout(cnn_dtype dt, int64_t N, int64_t C, int64_t L, int to_channels_last,
                        const void *src, void *dst) {
  if (to_channels_last)
    cnn_cpu_nchw_to_nhwc(dt, N, C, L, src, dst);
  else
    cnn_cpu_nhwc_to_nchw(dt, N, C, L, src, dst);
}
static int global_nhwc_fwd(int dev, cnn_dtype dt, int64_t N, int64_t L, int64_t C, const void *x,
                           void *y) {
  (void)dev;
  return cnn_cpu_global_avg_pool_nhwc_forward(dt, N, L, C, x, y);
}
static int global_nhwc_bwd(int dev, cnn_dtype dt, int64_t N, int64_t L, int64_t C, const void *dy,
                           void *dx) {
  (void)dev;
  return cnn_cpu_global_avg_pool_nhwc_backward(dt, N, L, C, dy, dx);
}

/* ---- batch norm (batch_norm.c), softmax (softmax.c) ---- */

static int bn_fwd(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *x,
                  const void *gamma, const void *beta, void *rm, void *rv, int training,
                  double momentum, double eps, void *y, void *mean, void *invstd) {
  (void)dev;
  return cnn_cpu_batch_norm_forward(dt, N, C, L, x, gamma, beta, rm, rv, training, momentum, eps, y,
                                    mean, invstd);
}
/* eps: the CUDA backend's cuDNN asks for it; the CPU uses the saved invstd */
static int bn_bwd(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                  const void *x, const void *gamma, const void *mean, const void *invstd, void *dx,
                  void *dg, void *db, double eps) {
  (void)dev, (void)eps;
  return cnn_cpu_batch_norm_backward(dt, N, C, L, dy, x, gamma, mean, invstd, dx, dg, db);
}
static int bn_bwd_eval(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                       const void *x, const void *gamma, const void *mean, const void *invstd,
                       void *dx, void *dg, void *db, double eps) {
  (void)dev, (void)eps;
  return cnn_cpu_batch_norm_backward_eval(dt, N, C, L, dy, x, gamma, mean, invstd, dx, dg, db);
}
static int bn_relu_fwd(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *x,
                       const void *gamma, const void *beta, void *rm, void *rv, int training,
                       double momentum, double eps, void *y, void *mean, void *invstd) {
  (void)dev;
  return cnn_cpu_batch_norm_relu_forward(dt, N, C, L, x, gamma, beta, rm, rv, training, momentum,
                                         eps, y, mean, invstd);
}
static int bn_add_relu_fwd(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *x,
                           const void *residual, const void *gamma, const void *beta, void *rm,
                           void *rv, int training, double momentum, double eps, void *y, void *mean,
                           void *invstd) {
  (void)dev;
  return cnn_cpu_batch_norm_add_relu_forward(dt, N, C, L, x, residual, gamma, beta, rm, rv,
                                             training, momentum, eps, y, mean, invstd);
}
static int bn_relu_bwd(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                       const void *y, const void *x, const void *gamma, const void *mean,
                       const void *invstd, void *dx, void *dg, void *db, double eps, int training) {
  (void)dev, (void)eps;
  return cnn_cpu_batch_norm_relu_backward(dt, N, C, L, dy, y, x, gamma, mean, invstd, dx, dg, db,
                                          training);
}
static int softmax_fwd(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int log,
                       const void *x, void *y) {
  (void)dev;
  return cnn_cpu_softmax_forward(dt, outer, D, inner, log, x, y);
}
static int softmax_bwd(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int log,
                       const void *y, const void *dy, void *dx) {
  (void)dev;
  return cnn_cpu_softmax_backward(dt, outer, D, inner, log, y, dy, dx);
}

/* ---- layer/group/instance norm, resizing, adaptive max pooling
 * (norm_rows.c, resize.c, adaptive_max_pool.c) ---- */

static int norm_rows_fwd(int dev, cnn_dtype dt, const cnn_norm_shape *s, const void *x,
                         const void *gamma, const void *beta, double eps, void *y, void *mean,
                         void *rstd) {
  (void)dev;
  return cnn_cpu_norm_rows_forward(dt, s, x, gamma, beta, eps, y, mean, rstd);
}
static int norm_rows_bwd(int dev, cnn_dtype dt, const cnn_norm_shape *s, const void *dy,
                         const void *x, const void *mean, const void *rstd, const void *gamma,
                         void *dx, void *dgamma, void *dbeta) {
  (void)dev;
  return cnn_cpu_norm_rows_backward(dt, s, dy, x, mean, rstd, gamma, dx, dgamma, dbeta);
}
static int resize_fwd(int dev, cnn_dtype dt, const cnn_resize_shape *s, const void *x, void *y) {
  (void)dev;
  return cnn_cpu_resize2d_forward(dt, s, x, y);
}
static int resize_bwd(int dev, cnn_dtype dt, const cnn_resize_shape *s, const void *dy, void *dx) {
  (void)dev;
  return cnn_cpu_resize2d_backward(dt, s, dy, dx);
}
static int adaptive_max_fwd(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                            int64_t OH, int64_t OW, const void *x, void *y, int64_t *indices) {
  (void)dev;
  return cnn_cpu_adaptive_max_pool2d_forward(dt, N, C, H, W, OH, OW, x, y, indices);
}
static int adaptive_max_bwd(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                            int64_t OH, int64_t OW, const void *dy, const int64_t *indices,
                            void *dx) {
  (void)dev;
  return cnn_cpu_adaptive_max_pool2d_backward(dt, N, C, H, W, OH, OW, dy, indices, dx);
}

const cnn_backend cnn_cpu_backend = {
    .name = "cpu",
    .half = false,
    .channels_last = true,          /* conv.c, batch_norm_rows.c, max_pool_rows.c, ... */
    .bn_dx_over_dy = true,          /* batch_norm.c reads dy[i] before writing dx[i] */
    .copy_d2d = cnn_cpu_copy_bytes, /* core/copy.c's contiguous same-dtype copies */
    .copy_layout = copy_layout,     /* and its NCHW <-> channels-last ones */
    .unary = cnn_cpu_unary,
    .binary = cnn_cpu_binary,
    .unary_grad = cnn_cpu_unary_grad,
    .where = cnn_cpu_where,
    .reduce = cnn_cpu_reduce,
    .reduce_leading = cnn_cpu_reduce_leading,
    .gemm = gemm,
    .conv2d_forward = conv_fwd,
    .conv2d_backward_data = conv_bwd_data,
    .conv2d_backward_weight = conv_bwd_weight,
    .conv2d_backward = conv_bwd,
    .conv_transpose2d_forward = conv_tr_fwd,
    .conv_transpose2d_backward = conv_tr_bwd,
    .conv2d_act_forward = conv_act_fwd,
    .conv_block_state_bytes = block_state,
    .conv_block_forward = block_fwd,
    .conv_block_backward = block_bwd,
    .max_pool2d_forward = max_pool_fwd,
    .max_pool2d_backward = max_pool_bwd,
    .avg_pool2d_forward = avg_pool_fwd,
    .avg_pool2d_backward = avg_pool_bwd,
    .adaptive_avg_pool2d_forward = adaptive_fwd,
    .adaptive_avg_pool2d_backward = adaptive_bwd,
    .global_avg_pool_nhwc_forward = global_nhwc_fwd,
    .global_avg_pool_nhwc_backward = global_nhwc_bwd,
    .batch_norm_forward = bn_fwd,
    .batch_norm_backward = bn_bwd,
    .batch_norm_backward_eval = bn_bwd_eval,
    .batch_norm_relu_forward = bn_relu_fwd,
    .batch_norm_relu_backward = bn_relu_bwd,
    .batch_norm_add_relu_forward = bn_add_relu_fwd,
    .softmax_forward = softmax_fwd,
    .softmax_backward = softmax_bwd,
    .class_loss_forward = cnn_cpu_class_loss_forward,
    .class_loss_backward = cnn_cpu_class_loss_backward,
    .bce_forward = cnn_cpu_bce_forward,
    .bce_backward = cnn_cpu_bce_backward,
    .dropout_mask = cnn_cpu_dropout_mask,
    .linear_relu_dropout_forward = cnn_cpu_linear_relu_dropout_forward,
    .linear_relu_dropout_backward = cnn_cpu_linear_relu_dropout_backward,
    .index_select = cnn_cpu_index_select,
    .index_add = cnn_cpu_index_add,
    .gather = cnn_cpu_gather,
    .scatter_add = cnn_cpu_scatter_add,
    .sgd_step = cnn_cpu_sgd_step,
    .adam_step = cnn_cpu_adam_step,
    .rmsprop_step = cnn_cpu_rmsprop_step,
    /* Adam over a whole parameter group */
    .adam_step_many = cnn_cpu_adam_step_many,
    /* quantized inference (cnn.quantize) */
    .conv2d_int8_forward = conv_int8_fwd,
    /* tensor ops */
    .sort = cnn_cpu_sort,
    .cumulate = cnn_cpu_cumulate,
    .cumprod_backward = cnn_cpu_cumprod_backward,
    .scatter = cnn_cpu_scatter,
    /* normalisation and resizing */
    .norm_rows_forward = norm_rows_fwd,
    .norm_rows_backward = norm_rows_bwd,
    .resize2d_forward = resize_fwd,
    .resize2d_backward = resize_bwd,
    .adaptive_max_pool2d_forward = adaptive_max_fwd,
    .adaptive_max_pool2d_backward = adaptive_max_bwd,
    /* bfloat16 arithmetic (cnn.autocast) */
    .bf16_math = cnn_cpu_bf16_path,
    .gemm_bf16 = gemm_bf16,
};
