/*
 * backend.h -- core-internal: the device backend table, and the one place
 * where an op picks the table of its tensor's device.
 *
 * A backend is a small table: memory entry points plus op entries over raw
 * pointers.  There are two, mirroring each other:
 *  - the CPU backend, cnn_cpu_backend (core/cpu/backend_cpu.c), built in:
 *    its entries are the loops of core/cpu (OpenMP, OpenBLAS, oneDNN);
 *  - the CUDA backend in gpu/, a shared module that core loads with
 *    dlopen() the first time a CUDA tensor is needed, so CPU-only users
 *    never load cuDNN.
 * core/ops validates, allocates outputs on the input's device, records the
 * autograd node and calls the entries of cnn_backend_of(tensor, op) -- the
 * dispatch point -- through CNN_BE_CALL, which reports an entry a backend
 * leaves NULL as "<op>: not supported on cuda yet".  The CPU table fills
 * every op entry; its memory entries are NULL (storage.c owns host memory)
 * and `dev` is ignored.  An op family never asks which device it runs on:
 * what differs between the backends is in the table (an optional entry,
 * a capability flag such as `half`).
 *
 * Conventions of the op entries:
 *  - `dev` is the device ordinal of every pointer passed.
 *  - Strided entries (elementwise, copy, fill) take a shape and, per
 *    operand, a pointer to its element 0 and its strides IN ELEMENTS over
 *    that shape (0 along broadcast dimensions).  Outputs never overlap
 *    themselves (core refuses expanded in-place targets).
 *  - Every other entry takes contiguous row-major arrays; outputs are
 *    OVERWRITTEN unless a comment says otherwise.
 *  - Floating kernels take CNN_FLOAT32 or CNN_FLOAT64 (`dt`), and CNN_FLOAT16
 *    where a backend with `half` runs float16 inference; index arrays
 *    are int64_t, 0-based and already validated by core.
 *  - All return 0, or -1 with cnn_set_error("<op>: ...") naming the op and,
 *    for CUDA/cuDNN/cuBLAS failures, the library's message, file and line.
 *    CUDA kernels are asynchronous on the device's stream: a later copy to
 *    the host (or synchronize) observes their results.
 */
#ifndef CNN_BACKEND_H
#define CNN_BACKEND_H

#include "cnn.h"
#include "cpu/kernels.h"      /* cnn_conv_shape, cnn_pool_shape */
#include "elementwise_math.h" /* cnn_sgd_hp, cnn_adam_hp, cnn_rmsprop_hp */

#ifdef __cplusplus
extern "C" {
#endif

/* The shape of a strided operation and one operand over it. */
typedef struct {
  int ndim; /* 0..CNN_MAX_DIMS; 0 is a single element */
  int64_t shape[CNN_MAX_DIMS];
} cnn_be_shape;

typedef struct {
  void *ptr;                    /* element 0 (device pointer) */
  int64_t stride[CNN_MAX_DIMS]; /* in elements; 0 = broadcast */
} cnn_be_arg;

/* Class losses (nll_loss when `logits` is 0, cross_entropy when 1) over N
 * rows of C classes; the formulas are core/ops/loss.c's. */
typedef struct {
  int64_t N, C;
  int logits;       /* 1: x are logits (cross_entropy), 0: log-probabilities */
  int64_t ignore;   /* ignore_index, < 0 for none */
  double smoothing; /* label smoothing (cross_entropy only) */
} cnn_be_class_loss;

/* One parameter of a many-tensor Adam step: n
 * contiguous elements of each array, vmax NULL unless amsgrad, and the
 * hyper-parameters of its own step (bias corrections differ by step). */
typedef struct {
  void *p, *m, *v, *vmax;
  const void *g;
  int64_t n;
  cnn_adam_hp h;
} cnn_adam_slice;

typedef struct cnn_backend {
  const char *name; /* "cpu", "cuda" */
  bool half;        /* runs float16/bfloat16 convolutions and products, and
                     * float16 inference: elementwise ops, pools' forward,
                     * eval batch norm (float32 per-channel arrays),
                     * softmax, the dropout mask (core/ops: cnn_half_ok) */
  /* batch_norm_backward(_eval) and batch_norm_relu_backward accept dx == dy
   * (the same array): core/ops then writes the input gradient over a
   * private output gradient (cnn_grad_is_private) instead of a new tensor */
  bool bn_dx_over_dy;
  /* runs channels-last tensors natively (core/memory_format.c): conv2d's
   * entries take cnn_conv_shape.channels_last, max_pool2d's
   * cnn_pool_shape.channels_last, batch norm's a channels-last x as N*H*W
   * images of L = 1, and global_avg_pool_nhwc_* exist */
  bool channels_last;

  /* ---- memory and devices ---- */
  /* alloc returns NULL with cnn_set_error() on failure (after emptying the
   * cache and retrying once); the caller accounts the bytes. */
  void *(*alloc)(size_t nbytes, int device);
  void (*free)(void *ptr, int device);
  /* page-locked host memory (for batches copied asynchronously) */
  void *(*alloc_pinned)(size_t nbytes);
  void (*free_pinned)(void *ptr);
  /* copy between host and this device, or within the device (bytes) */
  int (*copy_h2d)(void *dst, const void *src, size_t nbytes, int device);
  int (*copy_d2h)(void *dst, const void *src, size_t nbytes, int device);
  int (*copy_d2d)(void *dst, const void *src, size_t nbytes, int device);
  /* optional (the CPU's): a float32/float64 copy between the NCHW and the
   * channels-last layout of N images of C x L (L = H*W): NCHW src into an
   * NHWC dst when to_channels_last, else back (core/copy.c's fast path) */
  void (*copy_layout)(cnn_dtype dt, int64_t N, int64_t C, int64_t L, int to_channels_last,
                      const void *src, void *dst);
  /* host -> device without waiting, on the stream every op uses; src lies
   * in a block from alloc_pinned (anything else is copied synchronously).
   * free_pinned keeps such a block until the copies that read it are done. */
  int (*copy_h2d_async)(void *dst, const void *src, size_t nbytes, int device);
  int (*synchronize)(int device);
  int (*device_count)(void);
  int (*set_device)(int device);
  /* bytes held by the caching allocator (free, reusable) and in total from
   * the driver, and the device's free/total memory */
  int (*memory_info)(int device, int64_t *cached, int64_t *reserved, int64_t *free_b,
                     int64_t *total_b);
  void (*empty_cache)(void);
  /* bytes lost to the caching allocator's rounding in live blocks (block
   * size minus bytes asked for); NULL if not tracked */
  int (*memory_waste)(int device, int64_t *waste);
  const char *(*version_info)(void); /* lines: module, CUDA, cuDNN, cuBLAS, device */
  void (*set_benchmark)(bool on);    /* cudnn.benchmark: search conv algorithms */
  /* events for timers: record returns an opaque event; elapsed in ms */
  void *(*event_record)(int device);
  int (*event_elapsed)(void *start, void *end, double *ms);
  void (*event_free)(void *ev);

  /* ---- elementwise (strided; see the conventions above) ---- */
  /* out (dt) = op(x) (dt); integer dtypes as the CPU */
  int (*unary)(int dev, cnn_unary_op op, cnn_dtype dt, const cnn_be_shape *s, cnn_be_arg out,
               cnn_be_arg x, double p0, double p1);
  /* out = a op b; a, b in dt; out in dt, or uint8 for comparisons */
  int (*binary)(int dev, cnn_binary_op op, cnn_dtype dt, const cnn_be_shape *s, cnn_be_arg out,
                cnn_be_arg a, cnn_be_arg b);
  /* out = g * f'(v) for unary op `op` (v is x or y as core's
   * the op's `saves` in cnn_unary_ops says); all float dt */
  int (*unary_grad)(int dev, cnn_unary_op op, cnn_dtype dt, const cnn_be_shape *s, cnn_be_arg out,
                    cnn_be_arg g, cnn_be_arg v, double p0, double p1);
  /* out = cond ? a : b; cond of cond_dt, a, b, out of dt */
  int (*where)(int dev, cnn_dtype cond_dt, cnn_dtype dt, const cnn_be_shape *s, cnn_be_arg out,
               cnn_be_arg cond, cnn_be_arg a, cnn_be_arg b);
  /* dst (dst_dt) = cast(src (src_dt)); every dtype including float16/bfloat16 */
  int (*copy)(int dev, const cnn_be_shape *s, cnn_dtype dst_dt, cnn_be_arg dst, cnn_dtype src_dt,
              cnn_be_arg src);
  int (*fill)(int dev, const cnn_be_shape *s, cnn_dtype dt, cnn_be_arg dst, double v);

  /* ---- reductions: x is M rows of R contiguous elements (dt); out[M] in
   * out_dt (core's reduce_dtype); p as cnn_reduce() ---- */
  int (*reduce)(int dev, cnn_reduce_op op, cnn_dtype dt, cnn_dtype out_dt, int64_t M, int64_t R,
                const void *x, void *out, double p);
  /* sum (mean when `mean`) over the leading dims of a contiguous float
   * tensor seen as R x M: out[m] = sum_r x[r, m], no permuted copy (bias
   * gradients, sum_to).  Optional: NULL makes core permute x to rows. */
  int (*reduce_leading)(int dev, cnn_dtype dt, cnn_dtype out_dt, int64_t R, int64_t M,
                        const void *x, void *out, bool mean);

  /* ---- matrix product, row-major: C[M x N] = op(A) op(B), op(A) M x K;
   * lda/ldb/ldc are row strides of the matrices as stored ---- */
  int (*gemm)(int dev, cnn_dtype dt, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
              const void *A, int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc);
  /* `batch` products of one shape in one call (cuBLAS strided batched):
   * for b < batch, C + b*stride_c = op(A + b*stride_a) op(B + b*stride_b),
   * the same row-major layout as gemm; strides in ELEMENTS; stride_a or
   * stride_b 0 reuses one matrix for every product (broadcast); C's
   * products never overlap (stride_c >= M*ldc).  NULL: core loops gemm. */
  int (*gemm_batched)(int dev, cnn_dtype dt, bool trans_a, bool trans_b, int64_t M, int64_t N,
                      int64_t K, const void *A, int64_t lda, int64_t stride_a, const void *B,
                      int64_t ldb, int64_t stride_b, void *C, int64_t ldc, int64_t stride_c,
                      int64_t batch);

  /* ---- convolution (cuDNN; CNN_CONV_NAIVE selects the direct kernel) ---- */
  int (*conv2d_forward)(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                        const void *x, const void *w, const void *b, void *y);
  int (*conv2d_backward_data)(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                              const void *dy, const void *w, void *dx);
  int (*conv2d_backward_weight)(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                                const void *dy, const void *x, void *dw, void *db);
  /* Both backward passes in one call (dx, or dw and db, may be NULL for a
   * pass not wanted): the CPU's oneDNN reorders dy once for both.
   * Optional: NULL makes core call the two entries above. */
  int (*conv2d_backward)(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                         const void *dy, const void *x, const void *w, void *dx, void *dw,
                         void *db);
  /* The transposed convolution with its bias and bias gradient
   * in one call each: s, x, w, b, y, dy, dx, dw, db as cpu/kernels.h's
   * cnn_cpu_conv_transpose2d_*; dx, dw (and db) may be NULL.  Optional:
   * NULL makes core run the convolution entries above with the roles
   * swapped and add the bias itself (the CPU's oneDNN has a deconvolution
   * primitive; cuDNN's backward-data is the CUDA forward). */
  int (*conv_transpose2d_forward)(int dev, cnn_conv_algo algo, cnn_dtype dt,
                                  const cnn_conv_shape *s, const void *x, const void *w,
                                  const void *b, void *y);
  int (*conv_transpose2d_backward)(int dev, cnn_conv_algo algo, cnn_dtype dt,
                                   const cnn_conv_shape *s, const void *dy, const void *x,
                                   const void *w, void *dx, void *dw, void *db);
  /* y = act(conv2d(x, w, b)) for inference (net:fuse()):
   * act one of the activations cnn_conv2d_act accepts, p0 and p1 its
   * parameters.  Optional: NULL makes core run conv2d_forward, then the
   * activation (the CPU's oneDNN runs it as an eltwise post-op). */
  int (*conv2d_act_forward)(int dev, cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                            const void *x, const void *w, const void *b, cnn_unary_op act,
                            double p0, double p1, void *y);

  /* ---- the training block conv -> batch norm -> ReLU -> max pool in one
   * node (core/ops/nn_conv_block.c; the CPU's oneDNN keeps the block's
   * activations in its blocked layouts).  Optional, all three or none;
   * cnn_cpu_conv_block_*'s contracts (cpu/kernels.h): state_bytes returns
   * -2 where the backend would rather the layers ran one by one. ---- */
  int (*conv_block_state_bytes)(int dev, const cnn_conv_block_shape *s, size_t *bytes);
  int (*conv_block_forward)(int dev, const cnn_conv_block_shape *s, const float *x, const float *w,
                            const float *b, const float *gamma, const float *beta, float *y,
                            float *mean, float *var, void *state);
  int (*conv_block_backward)(int dev, const cnn_conv_block_shape *s, const float *dy,
                             const float *x, const float *w, const float *gamma, const float *beta,
                             const void *state, float *dx, float *dw, float *db, float *dgamma,
                             float *dbeta);

  /* ---- pooling, batch norm, softmax: the CPU kernels' signatures ---- */
  int (*max_pool2d_forward)(int dev, cnn_dtype dt, const cnn_pool_shape *s, const void *x, void *y,
                            int64_t *indices);
  int (*max_pool2d_backward)(int dev, cnn_dtype dt, const cnn_pool_shape *s, const void *dy,
                             const int64_t *indices, void *dx);
  int (*avg_pool2d_forward)(int dev, cnn_dtype dt, const cnn_pool_shape *s, const void *x, void *y);
  int (*avg_pool2d_backward)(int dev, cnn_dtype dt, const cnn_pool_shape *s, const void *dy,
                             void *dx);
  int (*adaptive_avg_pool2d_forward)(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t H,
                                     int64_t W, int64_t OH, int64_t OW, const void *x, void *y);
  int (*adaptive_avg_pool2d_backward)(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t H,
                                      int64_t W, int64_t OH, int64_t OW, const void *dy, void *dx);
  /* optional: adaptive average pooling to 1x1 of a channels-last x (N
   * images of L = H*W rows of C channels; y N x C); backward overwrites dx */
  int (*global_avg_pool_nhwc_forward)(int dev, cnn_dtype dt, int64_t N, int64_t L, int64_t C,
                                      const void *x, void *y);
  int (*global_avg_pool_nhwc_backward)(int dev, cnn_dtype dt, int64_t N, int64_t L, int64_t C,
                                       const void *dy, void *dx);
  /* batch norm: gamma, beta, the running and saved statistics are of dt,
   * but float32 when dt is float16 (eval only; cuDNN's rule for half data) */
  int (*batch_norm_forward)(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *x,
                            const void *gamma, const void *beta, void *running_mean,
                            void *running_var, int training, double momentum, double eps, void *y,
                            void *save_mean, void *save_invstd);
  /* eps: the forward's (cuDNN's backward asks for the same value) */
  int (*batch_norm_backward)(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                             const void *x, const void *gamma, const void *save_mean,
                             const void *save_invstd, void *dx, void *dgamma, void *dbeta,
                             double eps);
  int (*batch_norm_backward_eval)(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L,
                                  const void *dy, const void *x, const void *gamma,
                                  const void *save_mean, const void *save_invstd, void *dx,
                                  void *dgamma, void *dbeta, double eps);
  /* Optional (NULL: core/ops runs batch_norm, then relu as its own op):
   * y = relu(batch_norm(x)) in one pass, batch_norm_forward's arguments;
   * the backward also takes that y (relu's mask) and `training` picks the
   * batch-statistics or the eval rule. */
  int (*batch_norm_relu_forward)(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L,
                                 const void *x, const void *gamma, const void *beta,
                                 void *running_mean, void *running_var, int training,
                                 double momentum, double eps, void *y, void *save_mean,
                                 void *save_invstd);
  int (*batch_norm_relu_backward)(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L,
                                  const void *dy, const void *y, const void *x, const void *gamma,
                                  const void *save_mean, const void *save_invstd, void *dx,
                                  void *dgamma, void *dbeta, double eps, int training);
  /* Optional (NULL: core/ops runs batch_norm, then add_relu): y =
   * relu(batch_norm(x) + residual) in one pass, residual laid out as x
   * (N x C x L); batch_norm_forward's other arguments.  Its backward is
   * batch_norm_backward(_eval) over relu's gradient, made by core/ops. */
  int (*batch_norm_add_relu_forward)(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t L,
                                     const void *x, const void *residual, const void *gamma,
                                     const void *beta, void *running_mean, void *running_var,
                                     int training, double momentum, double eps, void *y,
                                     void *save_mean, void *save_invstd);
  int (*softmax_forward)(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int log,
                         const void *x, void *y);
  int (*softmax_backward)(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int log,
                          const void *y, const void *dy, void *dx);

  /* ---- layer / group / instance norm, resizing, adaptive max pooling:
   * the CPU kernels' signatures (cpu/kernels.h) ---- */
  int (*norm_rows_forward)(int dev, cnn_dtype dt, const cnn_norm_shape *s, const void *x,
                           const void *gamma, const void *beta, double eps, void *y, void *mean,
                           void *rstd);
  int (*norm_rows_backward)(int dev, cnn_dtype dt, const cnn_norm_shape *s, const void *dy,
                            const void *x, const void *mean, const void *rstd, const void *gamma,
                            void *dx, void *dgamma, void *dbeta);
  int (*resize2d_forward)(int dev, cnn_dtype dt, const cnn_resize_shape *s, const void *x, void *y);
  int (*resize2d_backward)(int dev, cnn_dtype dt, const cnn_resize_shape *s, const void *dy,
                           void *dx);
  int (*adaptive_max_pool2d_forward)(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t H,
                                     int64_t W, int64_t OH, int64_t OW, const void *x, void *y,
                                     int64_t *indices);
  int (*adaptive_max_pool2d_backward)(int dev, cnn_dtype dt, int64_t N, int64_t C, int64_t H,
                                      int64_t W, int64_t OH, int64_t OW, const void *dy,
                                      const int64_t *indices, void *dx);

  /* ---- losses (own kernels, elementwise_math.h) ---- */
  /* loss[N] (dt) per row (0 for ignored rows), wsum[N] (dt) the weight
   * each row adds to the mean's denominator; weight (C) may be NULL */
  int (*class_loss_forward)(int dev, cnn_dtype dt, const cnn_be_class_loss *c, const void *x,
                            const int64_t *target, const void *weight, void *loss, void *wsum);
  /* gx[N x C] OVERWRITTEN; g holds N row gradients (g_per_row) or one
   * value scaled by `scale` (sum: 1, mean: 1/denom) */
  int (*class_loss_backward)(int dev, cnn_dtype dt, const cnn_be_class_loss *c, const void *x,
                             const int64_t *target, const void *weight, const void *g,
                             int g_per_row, double scale, void *gx);
  /* out[n] = bce_logits(x, y, pw) (pw may be NULL: 1); backward: which =
   * 0 dx, 1 dy, 2 dpw, out[i] = g[i] * d */
  int (*bce_forward)(int dev, cnn_dtype dt, int64_t n, const void *x, const void *y, const void *pw,
                     void *out);
  int (*bce_backward)(int dev, cnn_dtype dt, int64_t n, int which, const void *x, const void *y,
                      const void *pw, const void *g, void *out);
  /* mask[n] = 0 with probability p else 1/(1-p), from a hash of (seed, i) */
  int (*dropout_mask)(int dev, cnn_dtype dt, int64_t n, double p, uint64_t seed, void *mask);
  /* the block linear -> ReLU -> dropout's element passes (optional: the
   * block declines without them).  Forward, in place over the product
   * y[rows x cols] = x w^T: y = relu(y + bias[col]) * mask_i, mask_i =
   * cnn_dropout_value(seed, i, p) (1 when p = 0; bias may be NULL).
   * Backward: dz[i] = y[i] > 0 ? g[i] * scale : 0 (dz may be g). */
  int (*linear_relu_dropout_forward)(int dev, cnn_dtype dt, int64_t rows, int64_t cols, void *y,
                                     const void *bias, double p, uint64_t seed);
  int (*linear_relu_dropout_backward)(int dev, cnn_dtype dt, int64_t n, const void *y,
                                      const void *g, double scale, void *dz);

  /* ---- indexing ---- */
  /* out[o, j, i] = x[o, index[j], i]: x outer x size x inner, out outer x k x inner */
  int (*index_select)(int dev, cnn_dtype dt, int64_t outer, int64_t size, int64_t k, int64_t inner,
                      const void *x, const int64_t *index, void *out);
  /* out[o, index[j], i] += g[o, j, i] (out zeroed by the caller) */
  int (*index_add)(int dev, cnn_dtype dt, int64_t outer, int64_t size, int64_t k, int64_t inner,
                   const void *g, const int64_t *index, void *out);
  /* gather along dim: out (contiguous, ishape) from x (strided, xstride);
   * scatter_add: out (contiguous, oshape, zeroed) += src (contiguous ishape) */
  int (*gather)(int dev, cnn_dtype dt, int ndim, const int64_t *ishape, int dim, const void *x,
                const int64_t *xstride, const int64_t *index, void *out);
  int (*scatter_add)(int dev, cnn_dtype dt, int ndim, const int64_t *oshape, const int64_t *ishape,
                     int dim, const int64_t *index, const void *src, void *out);

  /* ---- optimizer updates over n contiguous elements (elementwise_math.h);
   * state arrays may be NULL where the formula says so ---- */
  int (*sgd_step)(int dev, cnn_dtype dt, int64_t n, void *p, const void *g, void *buf,
                  cnn_sgd_hp h);
  int (*adam_step)(int dev, cnn_dtype dt, int64_t n, void *p, const void *g, void *m, void *v,
                   void *vmax, cnn_adam_hp h);
  int (*rmsprop_step)(int dev, cnn_dtype dt, int64_t n, void *p, const void *g, void *sq, void *ga,
                      void *buf, cnn_rmsprop_hp h);

  /* ---- Adam over a whole parameter group ---- */
  /* Adam over `count` slices of dtype dt in one pass (on the CPU one
   * parallel region over all their elements).  Optional: where NULL, core
   * calls adam_step once per slice. */
  int (*adam_step_many)(int dev, cnn_dtype dt, int count, const cnn_adam_slice *s);

  /* ---- quantized inference (cnn.quantize): cnn_conv2d_int8's rule (cnn.h);
   * x, wq, w_scale, b (or NULL), y float32; NULL: not on this device ---- */
  int (*conv2d_int8_forward)(int dev, cnn_conv_algo algo, const cnn_conv_shape *s, const float *x,
                             float x_scale, const float *wq, const float *w_scale, const float *b,
                             int relu, float *y);

  /* ---- tensor ops: sort/topk, cumulative sums and products, scatter
   * (core/ops/sort.c, scan.c, scatter.c) ---- */
  /* x: outer x D x inner (float32, float64, int64 or uint8); values (x's
   * dtype) and indices (0-based positions along D): outer x k x inner, the
   * first k (k <= D) of each row in the order of sort_order.h (ascending,
   * or descending; NaN largest; ties keep their positions) */
  int (*sort)(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int64_t k,
              bool descending, const void *x, void *values, int64_t *indices);
  /* y = running sum (prod: product) of x along D, both outer x D x inner
   * of dt (float32, float64, int64); reverse: from the last entry to the
   * first.  Floats accumulate in double. */
  int (*cumulate)(int dev, cnn_dtype dt, bool prod, bool reverse, int64_t outer, int64_t D,
                  int64_t inner, const void *x, void *y);
  /* dx = the gradient of cumprod for the output gradient g (all outer x D
   * x inner, float dt), without division (exact with zeros in x):
   * dx[d] = prod_{i<d} x[i] * S[d], S[D-1] = g[D-1], S[d] = g[d] + x[d+1] S[d+1] */
  int (*cumprod_backward)(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner,
                          const void *x, const void *g, void *dx);
  /* scatter_add's layout with assignment: out (contiguous, oshape)
   * [p with `dim` replaced by index[p]] = src[p] (contiguous over ishape);
   * any dtype; for a repeated index one of the writes wins */
  int (*scatter)(int dev, cnn_dtype dt, int ndim, const int64_t *oshape, const int64_t *ishape,
                 int dim, const int64_t *index, const void *src, void *out);

  /* ---- bfloat16 arithmetic over float32 arrays:
   * cnn.autocast('bfloat16') where the backend has no `half` tensors.  The
   * conv entries with cnn_conv_shape.math = CNN_BFLOAT16 and gemm_bf16
   * (gemm_batched's layout, float32 arrays) round their operands to
   * bfloat16, accumulate in float32 and write float32.  bf16_math says how
   * ("onednn": bfloat16 kernels; "emulated": rounded copies and float32
   * kernels) and *detail (may be NULL) why; NULL where the backend has no
   * such arithmetic: autocast then casts the operands (core/autocast.c). */
  const char *(*bf16_math)(const char **detail);
  int (*gemm_bf16)(int dev, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                   const float *A, int64_t lda, int64_t stride_a, const float *B, int64_t ldb,
                   int64_t stride_b, float *C, int64_t ldc, int64_t stride_c, int64_t batch);
} cnn_backend;

/* What core hands the module at load time: the module is dlopen()ed by an
 * executable that need not export its symbols, so it reports errors through
 * these pointers into core (the per-thread message of cnn_error()). */
typedef struct {
  int version; /* CNN_CORE_API_VERSION */
  void (*set_error)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
  bool (*interrupt_pending)(void);
  const char *(*dtype_name)(cnn_dtype dt);
  const char *(*unary_name)(cnn_unary_op op);
  const char *(*binary_name)(cnn_binary_op op);
} cnn_core_api;
/* Bumped whenever cnn_core_api or cnn_backend changes layout: the module
 * compares it with the version it was built against, so an out-of-date
 * module is refused with a reason instead of calling through a wrong table.
 * 3: the CPU backend table and the per-family elementwise entries.
 * 4: entries for the new layers and ops (row norms, resize, sort, cumulate,
 *    scatter, adam_step_many, conv2d_int8_forward) and new unary ops.
 * 5: conv_transpose2d_forward/_backward (optional).
 * 6: bf16_math, gemm_bf16 and cnn_conv_shape.math (bfloat16 on the CPU).
 * 7: conv2d_act_forward (optional).
 * 8: bn_dx_over_dy.
 * 9: conv_block_state_bytes/_forward/_backward (optional).
 * 10: linear_relu_dropout_forward/_backward (optional).
 * 11: channels_last (the flag, cnn_conv_shape.channels_last,
 *     cnn_pool_shape.channels_last, global_avg_pool_nhwc_*, copy_layout).
 * The version also folds in the sizes of the elementwise enums: adding a
 * unary or binary op renumbers the values the module's kernels switch on,
 * and needs no bump here (the recipe in core/README.md stays 4 files). */
#define CNN_CORE_API_LAYOUT  12
#define CNN_CORE_API_VERSION (CNN_CORE_API_LAYOUT * 10000 + CNN_NUNARY * 100 + CNN_NBINARY)

/* dlopen() a module: $env, then `file` next to the executable, then
 * ../lib/cnnsh/`file` relative to it, then build_path; NULL with dlerror()'s
 * message in last_error[n].  cnn_core_api_get() is what modules receive. */
void *cnn_module_open(const char *env, const char *file, const char *build_path, char *last_error,
                      size_t n);
const cnn_core_api *cnn_core_api_get(void);

/* The module's one exported symbol: its table, or NULL and a reason ("no
 * CUDA driver", "no CUDA device", ...) written into reason[len]. */
typedef const cnn_backend *(*cnn_cuda_backend_init_fn)(const cnn_core_api *core, char *reason,
                                                       size_t len);

/* The CPU backend (core/cpu/backend_cpu.c). */
extern const cnn_backend cnn_cpu_backend;

/* For a tensor already known to be on a CUDA device (copies, pinned memory,
 * timers: the memory entries): the backend, or NULL with "<op>: <why CUDA
 * is unavailable>". */
const cnn_backend *cnn_cuda_backend(const char *op);
/* The dispatch point of the ops: the backend of t's device -- the CPU
 * table, or the CUDA one (loading the module on first use) -- or NULL with
 * "<op>: cuda is not available: <why>" set.  Inline, so the CPU case costs
 * a compare (every small op passes here). */
static inline const cnn_backend *cnn_backend_of(const cnn_tensor *t, const char *op) {
  if (t->storage->device.type == CNN_CPU) return &cnn_cpu_backend;
  return cnn_cuda_backend(op);
}
/* Whether t's backend runs float16/bfloat16 convolutions and products
 * (and float16 inference: the `half` field above). */
static inline bool cnn_backend_half(const cnn_tensor *t) {
  const cnn_backend *be = cnn_backend_of(t, "half");
  return be && be->half;
}
/* t's device ordinal: the `dev` argument of the entries */
static inline int cnn_backend_dev(const cnn_tensor *t) { return t->storage->device.index; }
/* Entry `e` of backend `be` called with the arguments that follow, or -1
 * and "<op>: not supported on cuda yet" where the backend leaves it NULL. */
#define CNN_BE_CALL(be, op, e, ...) ((be)->e ? (be)->e(__VA_ARGS__) : cnn_backend_unsupported(op))
/* CNN_BE_CALL on the backend of tensor t: -1 with the error set where t's
 * device has no backend (CUDA unavailable) or the backend no such entry.
 * The backend is looked up once (a GNU statement expression: core is
 * gnu11; was three lookups per call). */
#define CNN_TENSOR_CALL(t, op, e, ...)                                                             \
  __extension__({                                                                                  \
    const cnn_backend *tensor_call_be_ = cnn_backend_of((t), (op));                                \
    tensor_call_be_ ? CNN_BE_CALL(tensor_call_be_, (op), e, __VA_ARGS__) : -1;                     \
  })
/* Sets "<op>: not supported on cuda yet" and returns -1 (a NULL entry). */
int cnn_backend_unsupported(const char *op);

/* The backend of a device type (the CPU table; for CUDA, loads the module:
 * NULL with an error saying why: built without CUDA, no driver, no device). */
const cnn_backend *cnn_backend_get(cnn_device_type type);
/* Why CUDA is unavailable, or NULL when it is available. */
const char *cnn_cuda_unavailable_reason(void);
static inline bool cnn_on_cuda(const cnn_tensor *t) {
  return t && t->storage && t->storage->device.type == CNN_CUDA;
}
/* -1 with "<op>: tensors on cpu and cuda:0" when a and b are on different
 * devices (either may be NULL). */
int cnn_check_same_device(const char *op, const cnn_tensor *a, const cnn_tensor *b);
/* The shape of a strided entry, and tensor t's argument over it (t's
 * strides broadcast to s: 0 along broadcast dimensions). */
cnn_be_shape cnn_be_shape_of(int ndim, const int64_t *shape);
cnn_be_arg cnn_be_arg_of(const cnn_tensor *t, const cnn_be_shape *s);
/* Both of the above for ops[0..nops) over ops[0]'s shape, after the
 * same-device check of every operand against ops[0]: 0, or -1 with the
 * error set. */
int cnn_be_args_of(const char *op, int nops, cnn_tensor *const *ops, cnn_be_shape *s,
                   cnn_be_arg *a);

#ifdef __cplusplus
}
#endif
#endif
