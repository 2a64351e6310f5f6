/*
 * kernels.h -- the raw-pointer CPU kernels of the neural-network ops.
 *
 * These functions know nothing of tensors, Lua or autograd.  Each layer is a
 * `_forward` / `_backward` pair over contiguous row-major (NCHW) arrays with
 * explicit sizes; the shape of every array is in the comment next to it.
 * The tensor-level wrappers (core/ops/nn_*.c) validate user input, allocate
 * outputs and call these (through the backend table).
 *
 * Conventions:
 *  - `dt` is CNN_FLOAT32 or CNN_FLOAT64 and every `void *` array (including
 *    per-channel parameters) has that dtype; int64 index arrays are int64_t.
 *  - Outputs are OVERWRITTEN, never accumulated, unless a comment says so.
 *  - Validation is the op's, once: a kernel assert()s the invariants of its
 *    arguments (dtype, sizes, geometry; asserts are live in this project's
 *    builds, which define no NDEBUG) and never reports a bad shape itself.
 *  - All return 0, or -1 with cnn_set_error("<op>: ...") for what only the
 *    kernel can meet: out of memory for a workspace, a library failure, an
 *    interrupt (they poll cnn_interrupt_pending() in long loops and then
 *    fail with "<op>: interrupted").
 *  - Parallelism: OpenMP (the one pool shared with OpenBLAS and oneDNN).
 *
 * Files: conv.c (dispatch), conv_naive.c (the oracle),
 * conv_im2col.c (im2col + OpenBLAS GEMM), conv_onednn.c (oneDNN, with a
 * per-shape primitive cache), pool.c, batch_norm.c, softmax.c.
 */
#ifndef CNN_CPU_KERNELS_H
#define CNN_CPU_KERNELS_H

#include "cnn.h"         /* cnn_dtype, cnn_conv_algo, cnn_set_error */
#include "norm_math.h"   /* cnn_norm_shape */
#include "resize_math.h" /* cnn_resize_shape */

#ifdef __cplusplus
extern "C" {
#endif

/* The shared invariant of the float kernels over a 3-d view (N x C x L for
 * batch norm, outer x D x inner for softmax): dtype float32/float64 and
 * non-negative sizes.  The ops validate; kernels assert() it. */
bool cnn_cpu_float_sizes_valid(cnn_dtype dt, int64_t a, int64_t b, int64_t c);

/* ---- convolution ---------------------------------------------------------- */

typedef struct {
  int64_t N, C, H, W; /* input  N x C x H x W */
  int64_t K, R, S;    /* weight K x (C/groups) x R x S */
  int64_t OH, OW;     /* output N x K x OH x OW (caller computes) */
  int sh, sw;         /* stride */
  int pt, pb, pl, pr; /* padding top, bottom, left, right */
  int dh, dw;         /* dilation */
  int groups;
  cnn_dtype math;     /* CNN_FLOAT32: dt's arithmetic; CNN_BFLOAT16: float32
                   * arrays, operands rounded to bfloat16, float32
                   * accumulation and outputs (autocast, bf16_math.c) */
  int allow_winograd; /* 1: oneDNN's Winograd kernels may take it where they are
                       * faster (conv_winograd.c); conv.c sets it under 'auto' */
  int channels_last;  /* 1: x, y, dy and dx are N x H x W x C arrays (the CPU's
                       * entries only; core/memory_format.c); w is always K x C x R x S */
} cnn_conv_shape;

/* N x C x L arrays (float32 or float64) to N x L x C (NCHW to NHWC, L =
 * H*W) and back (layout_transpose.c). */
void cnn_cpu_nchw_to_nhwc(cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *src,
                          void *dst);
void cnn_cpu_nhwc_to_nchw(cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *src,
                          void *dst);

/* Output size helper: floor((in + p0 + p1 - d*(k-1) - 1)/s) + 1; may be <= 0
 * when the (padded) input is smaller than the dilated kernel. */
int64_t cnn_conv_out_size(int64_t in, int p0, int p1, int k, int s, int d);

/* C (M x N, row-major) = op(A) op(B) in float32: oneDNN's SGEMM for
 * medium products, OpenBLAS otherwise (sgemm.c). */
void cnn_cpu_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                   const float *B, int64_t ldb, float *C, int64_t ldc);

/* dt is CNN_FLOAT32 or CNN_FLOAT64; pointers are to contiguous arrays of dt.
 * algo: CNN_CONV_AUTO picks oneDNN for float32 when it applies, else im2col;
 * CNN_CONV_ONEDNN on float64 falls back to im2col (and so does float32 when
 * oneDNN cannot create a primitive for the shape); NAIVE is the direct loop.
 * The shape is the op's, validated: the entries assert()
 * cnn_cpu_conv2d_shape_valid(dt, s).  All return 0, or -1 with
 * cnn_set_error("conv2d: ...") (a oneDNN failure, out of memory for a
 * workspace, or interrupted: "conv2d: interrupted"). */
/* x: N x C x H x W, w: K x C/g x R x S, b: K or NULL, y: N x K x OH x OW */
int cnn_cpu_conv2d_forward(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s, const void *x,
                           const void *w, const void *b, void *y);
/* dx = conv_transpose(dy, w), OVERWRITES dx (N x C x H x W) */
int cnn_cpu_conv2d_backward_data(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                                 const void *dy, const void *w, void *dx);
/* dw (K x C/g x R x S) and db (K, may be NULL) OVERWRITTEN (not accumulated) */
int cnn_cpu_conv2d_backward_weight(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                                   const void *dy, const void *x, void *dw, void *db);

/* Both backward passes in one call (oneDNN reorders dy once for both):
 * dx (may be NULL), dw (may be NULL; then db too), db (may be NULL);
 * outputs OVERWRITTEN.  Falls back per pass as the two calls above do. */
int cnn_cpu_conv2d_backward(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                            const void *dy, const void *x, const void *w, void *dx, void *dw,
                            void *db);

/* The three paths, callable directly (tests, benchmarks).  They assume a
 * shape for which cnn_cpu_conv2d_shape_valid() holds and no zero-sized
 * dimension.  The oneDNN ones take float32 arrays (bfloat16 kernels when
 * s->math is CNN_BFLOAT16) and never fall back: they return -2 (error set)
 * where oneDNN cannot create a primitive for the shape, -1 on any other
 * failure.  naive and im2col compute in dt (conv.c rounds their operands
 * for s->math = CNN_BFLOAT16). */
bool cnn_cpu_conv2d_shape_valid(cnn_dtype dt, const cnn_conv_shape *s); /* for assert() */
const char *cnn_conv_shape_str(const cnn_conv_shape *s, char buf[256]); /* for messages */

int cnn_cpu_conv2d_naive_forward(cnn_dtype dt, const cnn_conv_shape *s, const void *x,
                                 const void *w, const void *b, void *y);
int cnn_cpu_conv2d_naive_backward_data(cnn_dtype dt, const cnn_conv_shape *s, const void *dy,
                                       const void *w, void *dx);
int cnn_cpu_conv2d_naive_backward_weight(cnn_dtype dt, const cnn_conv_shape *s, const void *dy,
                                         const void *x, void *dw, void *db);

int cnn_cpu_conv2d_im2col_forward(cnn_dtype dt, const cnn_conv_shape *s, const void *x,
                                  const void *w, const void *b, void *y);
int cnn_cpu_conv2d_im2col_backward_data(cnn_dtype dt, const cnn_conv_shape *s, const void *dy,
                                        const void *w, void *dx);
int cnn_cpu_conv2d_im2col_backward_weight(cnn_dtype dt, const cnn_conv_shape *s, const void *dy,
                                          const void *x, void *dw, void *db);

int cnn_cpu_conv2d_onednn_forward(const cnn_conv_shape *s, const float *x, const float *w,
                                  const float *b, float *y);
int cnn_cpu_conv2d_onednn_backward_data(const cnn_conv_shape *s, const float *dy, const float *w,
                                        float *dx);
int cnn_cpu_conv2d_onednn_backward_weight(const cnn_conv_shape *s, const float *dy, const float *x,
                                          float *dw, float *db);
/* Both passes, dy reordered once; -2 where oneDNN has no primitive (nothing written). */
int cnn_cpu_conv2d_onednn_backward(const cnn_conv_shape *s, const float *dy, const float *x,
                                   const float *w, float *dx, float *dw, float *db);
/* The strided 1x1 convolution (no padding, groups 1, float32 arrays and
 * arithmetic, NCHW) as gathers and small products (conv_1x1_strided.c);
 * conv.c sends 'auto' calls there when _takes() holds.  backward: dx, or
 * dw (and db), may be NULL; those given are overwritten.  0, or -1 (error
 * set: out of memory). */
bool cnn_cpu_conv2d_1x1_strided_takes(cnn_dtype dt, const cnn_conv_shape *s);
int cnn_cpu_conv2d_1x1_strided_forward(const cnn_conv_shape *s, const float *x, const float *w,
                                       const float *b, float *y);
int cnn_cpu_conv2d_1x1_strided_backward(const cnn_conv_shape *s, const float *dy, const float *x,
                                        const float *w, float *dx, float *dw, float *db);
/* Its pieces with AVX-512 (conv_1x1_strided_avx512.c; call only when
 * cnn_cpu_use_avx512()): out (M x P) = A (M x D) B (D x P), or += with
 * add = 1 (row-major, leading dimensions lda, ldb, ldo).  For output rows
 * [i0, i1) of one image (x, dx: its C x H x W planes; P = (i1-i0)*OW):
 * xs (C x P) = the input pixels the stride keeps (sw = 2 only), xt the
 * same as P x C (any stride); scatter writes dx's rows [h0, h1) of every
 * channel, t (C x P) at the kept pixels and 0 elsewhere (sw = 2 only;
 * stream = 1: non-temporal stores). */
void cnn_cpu_product_f32_avx512(int add, int64_t M, int64_t D, int64_t P, const float *A,
                                int64_t lda, const float *B, int64_t ldb, float *out, int64_t ldo);
void cnn_cpu_strided_gather_f32_avx512(const cnn_conv_shape *s, const float *x, int64_t i0,
                                       int64_t i1, float *xs);
void cnn_cpu_strided_gather_t_f32_avx512(const cnn_conv_shape *s, const float *x, int64_t i0,
                                         int64_t i1, float *xt);
void cnn_cpu_strided_scatter_f32_avx512(const cnn_conv_shape *s, const float *t, int64_t i0,
                                        int64_t i1, int64_t h0, int64_t h1, int stream, float *dx);
/* net:fuse(): y = act(conv(x, w, b)), act a unary op
 * with its parameters p0, p1 (cnn_unary's).  float32 under AUTO/ONEDNN
 * runs the activation inside oneDNN's primitive as eltwise post-ops where
 * oneDNN has them (conv_post_ops.c), else the convolution then the unary
 * loop in place.  The _onednn one returns -2 where it does not apply. */
int cnn_cpu_conv2d_act_forward(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                               const void *x, const void *w, const void *b, cnn_unary_op act,
                               double p0, double p1, void *y);
int cnn_cpu_conv2d_onednn_forward_act(const cnn_conv_shape *s, const float *x, const float *w,
                                      const float *b, cnn_unary_op act, double p0, double p1,
                                      float *y);
/* ---- the training block conv -> batch norm -> ReLU -> max pool
 * (conv_block_onednn.c; the op is core/ops/nn_conv_block.c) ---- */
typedef struct {
  cnn_conv_shape conv; /* groups 1; math CNN_FLOAT32 or CNN_BFLOAT16 */
  int has_bias;        /* the convolution has a bias */
  int pk[2], ps[2];    /* max pool window and stride (no padding, dilation 1, floor) */
  int64_t PH, PW;      /* pooled output N x K x PH x PW */
  float eps;           /* batch norm's */
} cnn_conv_block_shape;
/* The block's batch norm (training, batch statistics), ReLU and 2x2
 * stride-2 max pool in one pass on nChw16c, AVX-512 only
 * (bn_relu_pool_blocked16.c): x, y, dy, dx float32 or, with bf16 = 1,
 * bfloat16 (results rounded once).  layout CNN_B16_BLOCKED: x N x CB x H
 * x W x 16 (y, dy, dx and tap alike); CNN_B16_NHWC: N x H x W x CB*16;
 * CNN_B16_NCHW_EDGE (float32 only): x, dx and tap nChw16c, y and dy the
 * plain N x CB*16 x H/2 x W/2 arrays, and the backward writes dy's
 * nChw16c copy into dy_copy (N*CB*16*(H/2)*(W/2) floats; else unused,
 * may be NULL).  Forward writes mean and biased var (CB*16 float32 each),
 * y and tap (one byte, 0-3, per output: the window's chosen tap); backward
 * from the forward's mean, var and tap writes dx (every element), dgamma,
 * dbeta.  0, or -1 (error set: out of memory, a layout refused). */
enum { CNN_B16_BLOCKED = 0, CNN_B16_NHWC = 1, CNN_B16_NCHW_EDGE = 2 };
int cnn_cpu_bn_relu_pool_blocked16_forward(const void *x, int bf16, int layout, int64_t N,
                                           int64_t CB, int64_t H, int64_t W, const float *gamma,
                                           const float *beta, float eps, float *mean, float *var,
                                           void *y, uint8_t *tap);
int cnn_cpu_bn_relu_pool_blocked16_backward(const void *x, const void *dy, const uint8_t *tap,
                                            int bf16, int layout, int64_t N, int64_t CB, int64_t H,
                                            int64_t W, const float *gamma, const float *beta,
                                            const float *mean, const float *var, float eps,
                                            void *dx, float *dgamma, float *dbeta, float *dy_copy);
/* The stride-1 convolution (dilation 1, one group) that made the block's
 * x, for the backward below: its float32 NCHW input N x C x H x W, its
 * R x S kernel and top/left padding. */
typedef struct {
  const float *x;
  int64_t C, H, W, R, S, pt, pl;
} cnn_b16_conv_src;
#define CNN_B16_MAX_TAPS 27 /* the largest C x R x S the backward below takes */
/* The backward (float32, any of the three layouts) where nothing wants x's
 * gradient: batch norm's input gradient goes straight into the
 * convolution's weight gradient dw (K x C x R x S, K = CB*16) and bias
 * gradient db (K, or NULL) instead of being written -- at most 27 taps
 * (C x R x S); the sums over the images in double, in order. */
int cnn_cpu_bn_relu_pool_blocked16_backward_dw(const void *x, const void *dy, const uint8_t *tap,
                                               int layout, int64_t N, int64_t CB, int64_t H,
                                               int64_t W, const float *gamma, const float *beta,
                                               const float *mean, const float *var, float eps,
                                               const cnn_b16_conv_src *src, float *dw, float *db,
                                               float *dgamma, float *dbeta, float *dy_copy);
/* The same three on nChw8c (NHWC, NCHW edge alike) with AVX2 + FMA
 * (bn_relu_pool_blocked8.c; call only when cnn_cpu_use_avx2()): a vector
 * is 8 channels, K = CB*8, dy_copy nChw8c; float32 only (bf16 = 1 is
 * refused with a message). */
int cnn_cpu_bn_relu_pool_blocked8_forward(const void *x, int bf16, int layout, int64_t N,
                                          int64_t CB, int64_t H, int64_t W, const float *gamma,
                                          const float *beta, float eps, float *mean, float *var,
                                          void *y, uint8_t *tap);
int cnn_cpu_bn_relu_pool_blocked8_backward(const void *x, const void *dy, const uint8_t *tap,
                                           int bf16, int layout, int64_t N, int64_t CB, int64_t H,
                                           int64_t W, const float *gamma, const float *beta,
                                           const float *mean, const float *var, float eps, void *dx,
                                           float *dgamma, float *dbeta, float *dy_copy);
int cnn_cpu_bn_relu_pool_blocked8_backward_dw(const void *x, const void *dy, const uint8_t *tap,
                                              int layout, int64_t N, int64_t CB, int64_t H,
                                              int64_t W, const float *gamma, const float *beta,
                                              const float *mean, const float *var, float eps,
                                              const cnn_b16_conv_src *src, float *dw, float *db,
                                              float *dgamma, float *dbeta, float *dy_copy);
/* One width's three entries (bn_relu_pool_shared.c): lanes 16 the AVX-512
 * kernel, 8 the AVX2 one; NULL for any other width.  The caller checks
 * the CPU (cnn_cpu_use_avx512 / cnn_cpu_use_avx2). */
typedef struct {
  int lanes;
  int (*forward)(const void *x, int bf16, int layout, int64_t N, int64_t CB, int64_t H, int64_t W,
                 const float *gamma, const float *beta, float eps, float *mean, float *var, void *y,
                 uint8_t *tap);
  int (*backward)(const void *x, const void *dy, const uint8_t *tap, int bf16, int layout,
                  int64_t N, int64_t CB, int64_t H, int64_t W, const float *gamma,
                  const float *beta, const float *mean, const float *var, float eps, void *dx,
                  float *dgamma, float *dbeta, float *dy_copy);
  int (*backward_dw)(const void *x, const void *dy, const uint8_t *tap, int layout, int64_t N,
                     int64_t CB, int64_t H, int64_t W, const float *gamma, const float *beta,
                     const float *mean, const float *var, float eps, const cnn_b16_conv_src *src,
                     float *dw, float *db, float *dgamma, float *dbeta, float *dy_copy);
} cnn_bn_relu_pool_kernel;
const cnn_bn_relu_pool_kernel *cnn_cpu_bn_relu_pool_kernel(int lanes);
/* Bytes of the state one training forward leaves for its backward (the
 * convolution's output, batch norm's statistics and ReLU mask, the pool's
 * argmax, all in oneDNN's layouts); -2 where oneDNN has no fast primitive
 * for the block (the caller runs the layers one by one), -1 error. */
int cnn_cpu_conv_block_state_bytes(const cnn_conv_block_shape *s, size_t *bytes);
/* y (N x K x PH x PW) = maxpool(relu(bn(conv(x, w, b)))) with batch
 * statistics; gamma, beta (K) may be NULL (1 and 0); writes the batch mean
 * and biased variance (K each) and the state. */
int cnn_cpu_conv_block_forward(const cnn_conv_block_shape *s, const float *x, const float *w,
                               const float *b, const float *gamma, const float *beta, float *y,
                               float *mean, float *var, void *state);
/* The gradients for dy (N x K x PH x PW) from the forward's state; dw is
 * required (the weight pass runs always), dx, db, dgamma, dbeta may be
 * NULL (not wanted); all OVERWRITTEN. */
int cnn_cpu_conv_block_backward(const cnn_conv_block_shape *s, const float *dy, const float *x,
                                const float *w, const float *gamma, const float *beta,
                                const void *state, float *dx, float *dw, float *db, float *dgamma,
                                float *dbeta);
/* int8 (cnn.quantize): acc (N x K x OH x OW int32) = conv(x, w) with x uint8
 * NCHW and w whole numbers in [-127, 127] stored as float32; no bias.
 * -2 where oneDNN has no primitive for the shape. */
int cnn_cpu_conv2d_onednn_forward_u8(const cnn_conv_shape *s, const uint8_t *x, const float *w,
                                     int32_t *acc);
/* Quantized convolution (conv_int8.c; the rule is in cnn.h at
 * cnn_conv2d_int8): x float32 N x C x H x W, wq K x C/g x R x S whole
 * numbers in [-127, 127], w_scale K, b K or NULL; y OVERWRITTEN.
 * algo NAIVE runs conv_naive.c on the integer levels, the others oneDNN (the naive path where
 * oneDNN has no primitive). */
int cnn_cpu_conv2d_int8_forward(cnn_conv_algo algo, const cnn_conv_shape *s, const float *x,
                                float x_scale, const float *wq, const float *w_scale,
                                const float *b, int relu, float *y);
/* ---- transposed convolution (conv_transpose.c) ----
 * s is the convolution whose input-gradient the transposed convolution is
 * (core/ops/nn_conv_transpose.c): x (its input) N x K x OH x OW, w K x C/g
 * x R x S (PyTorch's in x out/groups x kH x kW), b C or NULL, y (its
 * output) N x C x H x W, OVERWRITTEN.  float32 under AUTO/ONEDNN runs
 * oneDNN's deconvolution primitive (bias inside); float64, NAIVE, IM2COL
 * and shapes oneDNN rejects run the convolution's passes with the roles
 * swapped and channel_bias.c's loops. */
int cnn_cpu_conv_transpose2d_forward(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                                     const void *x, const void *w, const void *b, void *y);
/* dy N x C x H x W; dx (N x K x OH x OW), dw, db (C): each may be NULL for a
 * gradient not wanted (db only with dw); OVERWRITTEN. */
int cnn_cpu_conv_transpose2d_backward(cnn_conv_algo algo, cnn_dtype dt, const cnn_conv_shape *s,
                                      const void *dy, const void *x, const void *w, void *dx,
                                      void *dw, void *db);
/* deconv_onednn.c: the same through oneDNN only (float32, no zero sizes);
 * -2 (error set) where oneDNN has no primitive for the shape.  The
 * backward wants dx and dw. */
int cnn_cpu_conv_transpose2d_onednn_forward(const cnn_conv_shape *s, const float *x, const float *w,
                                            const float *b, float *y);
int cnn_cpu_conv_transpose2d_onednn_backward(const cnn_conv_shape *s, const float *dy,
                                             const float *x, const float *w, float *dx, float *dw,
                                             float *db);
/* channel_bias.c: y[n, c, :] += b[c] and db[c] = sum_n,p dy[n, c, p] over N
 * x C planes of P values, float32 (f64 = 0) or float64 (1). */
void cnn_cpu_add_channel_bias(int f64, int64_t N, int64_t C, int64_t P, const void *b, void *y);
void cnn_cpu_channel_sums(int f64, int64_t N, int64_t C, int64_t P, const void *dy, void *db);

/* Frees every cached oneDNN primitive and buffer (tests, leak checks, exit). */
void cnn_cpu_onednn_cache_clear(void);

/* ---- bfloat16 arithmetic over float32 arrays (bf16_math.c, matmul_onednn.c) ----
 * cnn.autocast('bfloat16') on the CPU: the conv entries with s->math =
 * CNN_BFLOAT16 and cnn_cpu_gemm_bf16 round their operands to bfloat16
 * (nearest even), accumulate in float32 and write float32.  Where the CPU
 * has AVX512-BF16 (oneDNN's ISA, read once) oneDNN's bfloat16 kernels do
 * it; elsewhere, or where oneDNN has no primitive, the operands are
 * rounded into float32 copies and the float32 path runs (emulated). */
/* 1 when oneDNN's bfloat16 kernels run (the effective ISA has AVX512-BF16) */
int cnn_cpu_bf16_native(void);
/* "onednn" or "emulated"; *detail (may be NULL): a sentence naming the ISA */
const char *cnn_cpu_bf16_path(const char **detail);
/* A malloc'd float32 copy of src[0..n) rounded to bfloat16 values, or NULL
 * with "<op>: out of memory ..." set. */
float *cnn_cpu_bf16_rounded_copy(const char *op, const float *src, int64_t n);
/* dst[i] = src[i] rounded to the nearest bfloat16 (ties to even), i < n */
void cnn_cpu_bf16_round_into(float *dst, const float *src, int64_t n);
/* C + b*stride_c (M x N, row stride ldc) = op(A + b*stride_a) op(B + b*stride_b)
 * for b < batch, the backend's gemm_batched layout (strides in elements, 0
 * broadcasts), in bfloat16 arithmetic as above; C OVERWRITTEN. */
int cnn_cpu_gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float *A,
                      int64_t lda, int64_t stride_a, const float *B, int64_t ldb, int64_t stride_b,
                      float *C, int64_t ldc, int64_t stride_c, int64_t batch);
/* The oneDNN matmul of cnn_cpu_gemm_bf16 alone: -2 (error set) where
 * oneDNN has no primitive, -1 on other failures. */
int cnn_cpu_gemm_bf16_onednn(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                             const float *A, int64_t lda, int64_t stride_a, const float *B,
                             int64_t ldb, int64_t stride_b, float *C, int64_t ldc, int64_t stride_c,
                             int64_t batch);
void cnn_cpu_matmul_onednn_cache_clear(void);
/* Cached primitives now held (tests of the cache). */
int cnn_cpu_onednn_cache_size(void);

/* ---- pooling ------------------------------------------------------------------ */

typedef struct {
  int64_t N, C, H, W, OH, OW; /* caller computes OH/OW (incl. ceil_mode) */
  int kh, kw, sh, sw, ph, pw;
  int count_include_pad; /* avg pool */
  int dh, dw;            /* max pool dilation, >= 1 (avg pool: unused) */
  int channels_last;     /* max pool on a backend with `channels_last`: x, y, the
                          * indices and dx are N x H x W x C arrays (max_pool_rows.c) */
} cnn_pool_shape;

/* x: N x C x H x W, y: N x C x OH x OW.  The window of output (oh, ow)
 * takes rows oh*sh - ph + r*dh (r < kh) and columns likewise (PyTorch's
 * dilation).  Padding counts as -inf; NaN propagates.  indices (may be NULL): int64, the argmax's flat position
 * h*W+w within its input plane (the first maximum), -1 for a window that
 * holds no input element (then y is -inf). */
int cnn_cpu_max_pool2d_forward(cnn_dtype dt, const cnn_pool_shape *s, const void *x, void *y,
                               int64_t *indices);
/* dx OVERWRITTEN: zeroed then scattered (summed) from dy via indices */
int cnn_cpu_max_pool2d_backward(cnn_dtype dt, const cnn_pool_shape *s, const void *dy,
                                const int64_t *indices, void *dx);
/* The same two over channels-last arrays (s->channels_last; max_pool_rows.c):
 * indices hold the same h*W+w positions, laid out as y. */
int cnn_cpu_max_pool2d_nhwc_forward(cnn_dtype dt, const cnn_pool_shape *s, const void *x, void *y,
                                    int64_t *indices);
int cnn_cpu_max_pool2d_nhwc_backward(cnn_dtype dt, const cnn_pool_shape *s, const void *dy,
                                     const int64_t *indices, void *dx);
/* PyTorch's divisor: the window clipped to the padded input when
 * count_include_pad, else to the input; an empty window gives 0. */
int cnn_cpu_avg_pool2d_forward(cnn_dtype dt, const cnn_pool_shape *s, const void *x, void *y);
int cnn_cpu_avg_pool2d_backward(cnn_dtype dt, const cnn_pool_shape *s, const void *dy, void *dx);
/* adaptive average pooling, PyTorch's bins: start=floor(i*H/OH), end=ceil((i+1)*H/OH)
 * x: N x C x H x W, y: N x C x OH x OW; backward OVERWRITES dx */
int cnn_cpu_adaptive_avg_pool2d_forward(cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                                        int64_t OH, int64_t OW, const void *x, void *y);
int cnn_cpu_adaptive_avg_pool2d_backward(cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                                         int64_t OH, int64_t OW, const void *dy, void *dx);

/* Global average pooling (output 1x1) of channels-last images, N of L x C
 * (global_pool_rows.c): y is N x C; backward OVERWRITES dx. */
int cnn_cpu_global_avg_pool_nhwc_forward(cnn_dtype dt, int64_t N, int64_t L, int64_t C,
                                         const void *x, void *y);
int cnn_cpu_global_avg_pool_nhwc_backward(cnn_dtype dt, int64_t N, int64_t L, int64_t C,
                                          const void *dy, void *dx);

/* Global average pooling of float32 planes (OH = OW = 1; call only when
 * cnn_cpu_use_avx512()): y[p] = mean of x[p*len, (p+1)*len) for p <
 * planes; backward dx[p*len + i] = dy[p] / len (global_pool_avx512.c). */
void cnn_cpu_global_avg_pool_f32_avx512(const float *x, int64_t planes, int64_t len, float *y);
void cnn_cpu_global_avg_pool_backward_f32_avx512(const float *dy, int64_t planes, int64_t len,
                                                 float *dx);

/* The float32 2x2 stride-2 max pool without padding or dilation on planes
 * of even width W (< 2^30), as MaxPool2d(2) in nearly every CNN
 * (max_pool_2x2.c; pool.c's forward routes those shapes there).  One
 * plane x: H x W, its first FH output rows (FH <= H/2: the windows inside
 * the plane), OW = W/2: y, idx: FH x OW (idx may be NULL), pool.c's rule.
 * `avx512` (from cnn_cpu_use_avx512()) picks the AVX-512 path. */
bool cnn_cpu_max_pool_2x2_applies(cnn_dtype dt, const cnn_pool_shape *s);
void cnn_cpu_max_pool_2x2_forward(int avx512, const float *x, float *y, int64_t *idx, int64_t W,
                                  int64_t FH);

/* Run-time ISA (cpu_features.c): 1 when this CPU has AVX-512 F/DQ/VL/BW and
 * it is allowed; cnn_cpu_allow_avx512(0) forces the portable loops (tests,
 * benches) and returns whether AVX-512 is now used. */
int cnn_cpu_use_avx512(void);
int cnn_cpu_allow_avx512(int on);
/* 1 when this CPU has AVX2 and FMA and hand-written kernels are allowed
 * (cnn_cpu_allow_avx512(0) turns these off too): the kernels with an
 * 8-lane path. */
int cnn_cpu_use_avx2(void);

/* ---- batch norm --------------------------------------------------------------- */

/* Batch norm over x viewed as N x C x L (L = H*W, or 1 for 2-D input).
 * Training: computes per-channel batch mean and biased var, writes
 * save_mean[C], save_invstd[C] = 1/sqrt(var+eps), y; if running_mean/var are
 * non-NULL updates them: r = (1-momentum)*r + momentum*stat, with the
 * UNBIASED variance (var*M/(M-1), M = N*L) for running_var, as PyTorch.
 * Training needs M > 1 (as PyTorch).
 * Eval: uses running stats (both required); save_mean/save_invstd, if
 * non-NULL, receive running_mean and 1/sqrt(running_var+eps).
 * gamma/beta may be NULL (1 and 0).  All per-channel arrays have dtype dt. */
int cnn_cpu_batch_norm_forward(cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *x,
                               const void *gamma, const void *beta, void *running_mean,
                               void *running_var, int training, double momentum, double eps,
                               void *y, void *save_mean, void *save_invstd);
/* Training-mode backward (batch statistics): writes dx (if non-NULL) and
 * OVERWRITES dgamma, dbeta (if non-NULL).  dx may be dy (the same array:
 * every dy[i] is read before dx[i] is written), here and in the eval and
 * relu backwards (the backend's bn_dx_over_dy). */
int cnn_cpu_batch_norm_backward(cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                                const void *x, const void *gamma, const void *save_mean,
                                const void *save_invstd, void *dx, void *dgamma, void *dbeta);
/* Eval-mode backward (fixed statistics, e.g. save_* from an eval forward):
 * dx = dy*gamma*invstd, dgamma = sum dy*xhat, dbeta = sum dy.  Same
 * arguments and overwrite rules as the training backward. */
int cnn_cpu_batch_norm_backward_eval(cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                                     const void *x, const void *gamma, const void *save_mean,
                                     const void *save_invstd, void *dx, void *dgamma, void *dbeta);
/* y = relu(batch_norm(x)) in one pass: the forward's arguments and rules.
 * Its backward takes that y (N x C x L) too: dy passes where y > 0 or y is
 * NaN (relu's backward), then the training (training = 1) or eval
 * backward as above. */
int cnn_cpu_batch_norm_relu_forward(cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *x,
                                    const void *gamma, const void *beta, void *running_mean,
                                    void *running_var, int training, double momentum, double eps,
                                    void *y, void *save_mean, void *save_invstd);
/* y = relu(batch_norm(x) + residual) in one pass (a residual block's end;
 * residual: N x C x L as x); its backward is batch_norm_backward over
 * relu's gradient. */
int cnn_cpu_batch_norm_add_relu_forward(cnn_dtype dt, int64_t N, int64_t C, int64_t L,
                                        const void *x, const void *residual, const void *gamma,
                                        const void *beta, void *running_mean, void *running_var,
                                        int training, double momentum, double eps, void *y,
                                        void *save_mean, void *save_invstd);
int cnn_cpu_batch_norm_relu_backward(cnn_dtype dt, int64_t N, int64_t C, int64_t L, const void *dy,
                                     const void *y, const void *x, const void *gamma,
                                     const void *save_mean, const void *save_invstd, void *dx,
                                     void *dgamma, void *dbeta, int training);

/* The float32 per-channel bodies of batch_norm.c on AVX-512
 * (batch_norm_avx512.c; call only when cnn_cpu_use_avx512()).  A channel is
 * N rows of L floats `stride` floats apart, starting at x (dy, y, dx).
 * sums: grad 0: s1 = sum d, s2 = sum d^2, d = x - ref; grad 1: s1 = sum g,
 * s2 = sum g*(x - ref), g = dy where y > 0 or NaN (dy alone when y is NULL).
 * normalize: y = (x - m)*k + b, relu'd when asked.  dx: k*g + kx*(x - m) + k0. */
void cnn_cpu_bn_sums_f32_avx512(int grad, int64_t N, int64_t stride, int64_t L, const float *x,
                                const float *dy, const float *y, float ref, double *s1, double *s2);
/* image_sums: the sums above of each of the C channels over images
 * [n0, n1) of an N x C x L tensor, into out[2c] and out[2c + 1]; ref per
 * channel. */
void cnn_cpu_bn_image_sums_f32_avx512(int grad, int64_t n0, int64_t n1, int64_t C, int64_t L,
                                      const float *x, const float *dy, const float *y,
                                      const float *ref, double *out);
/* normalize: relu 0 none, 1 relu, 2 relu(y + r) with r laid out as x (else NULL) */
void cnn_cpu_bn_normalize_f32_avx512(int64_t N, int64_t stride, int64_t L, const float *x,
                                     const float *r, float m, float k, float b, float *y, int relu);
void cnn_cpu_bn_dx_f32_avx512(int64_t N, int64_t stride, int64_t L, const float *dy, const float *y,
                              const float *x, float m, float k, float kx, float k0, float *dx);
/* The same over planes [p0, p1) of an N x C x L tensor in memory order
 * (plane p = n*C + c), channel c's constants k[3c..3c+2]: normalize's m,
 * k, b; dx's k, kx, k0 with m = mean[c]. */
void cnn_cpu_bn_normalize_planes_f32_avx512(int64_t p0, int64_t p1, int64_t C, int64_t L,
                                            const float *x, const float *r, const float *k,
                                            float *y, int relu);
void cnn_cpu_bn_dx_planes_f32_avx512(int64_t p0, int64_t p1, int64_t C, int64_t L, const float *dy,
                                     const float *y, const float *x, const float *mean,
                                     const float *k, float *dx);
/* The three memory-order bodies with AVX2 + FMA, the same arguments and
 * arithmetic (batch_norm_planes_avx2.c; call only when cnn_cpu_use_avx2()). */
void cnn_cpu_bn_image_sums_f32_avx2(int grad, int64_t n0, int64_t n1, int64_t C, int64_t L,
                                    const float *x, const float *dy, const float *y,
                                    const float *ref, double *out);
void cnn_cpu_bn_normalize_planes_f32_avx2(int64_t p0, int64_t p1, int64_t C, int64_t L,
                                          const float *x, const float *r, const float *k, float *y,
                                          int relu);
void cnn_cpu_bn_dx_planes_f32_avx2(int64_t p0, int64_t p1, int64_t C, int64_t L, const float *dy,
                                   const float *y, const float *x, const float *mean,
                                   const float *k, float *dx);

/* ---- softmax ------------------------------------------------------------------ */

/* softmax / log_softmax over the middle dim of x viewed as outer x D x inner
 * (numerically stable: the max is subtracted first). */
int cnn_cpu_softmax_forward(cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int log,
                            const void *x, void *y);
/* given y (the forward output) and dy: dx = y*(dy - sum(dy*y)) or for log:
 * dx = dy - exp(y)*sum(dy).  dx OVERWRITTEN. */
int cnn_cpu_softmax_backward(cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int log,
                             const void *y, const void *dy, void *dx);

/* ---- layer / group / instance norm, resizing (norm_rows.c,
 * resize.c, adaptive_max_pool.c; geometry in norm_math.h, resize_math.h) ---- */

/* x, y: R x D; mean, rstd: R (saved for backward); gamma, beta: A values
 * (norm_math.h) or NULL (1 and 0) */
int cnn_cpu_norm_rows_forward(cnn_dtype dt, const cnn_norm_shape *s, const void *x,
                              const void *gamma, const void *beta, double eps, void *y, void *mean,
                              void *rstd);
/* dx (R x D), dgamma, dbeta (A) OVERWRITTEN; each may be NULL */
int cnn_cpu_norm_rows_backward(cnn_dtype dt, const cnn_norm_shape *s, const void *dy, const void *x,
                               const void *mean, const void *rstd, const void *gamma, void *dx,
                               void *dgamma, void *dbeta);
/* x: N x C x H x W, y: N x C x OH x OW (s->mode: nearest or bilinear) */
int cnn_cpu_resize2d_forward(cnn_dtype dt, const cnn_resize_shape *s, const void *x, void *y);
/* dx (N x C x H x W) OVERWRITTEN: zeroed, then dy scattered through the taps */
int cnn_cpu_resize2d_backward(cnn_dtype dt, const cnn_resize_shape *s, const void *dy, void *dx);
/* adaptive max pooling, PyTorch's bins; indices: flat h*W+w in the plane
 * (first maximum; NaN propagates); backward OVERWRITES dx */
int cnn_cpu_adaptive_max_pool2d_forward(cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                                        int64_t OH, int64_t OW, const void *x, void *y,
                                        int64_t *indices);
int cnn_cpu_adaptive_max_pool2d_backward(cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                                         int64_t OH, int64_t OW, const void *dy,
                                         const int64_t *indices, void *dx);

/* ---- element access shared by the kernels ------------------------------------- */

/* The kernels are written once over double arithmetic and instantiated for
 * float32 and float64 by calling an always-inline body with a constant
 * `f64`; these two accessors then compile to a plain load or store. */
static inline double cnn_cpu_ld(const void *p, int64_t i, int f64) {
  return f64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}
static inline void cnn_cpu_st(void *p, int64_t i, double v, int f64) {
  if (f64)
    ((double *)p)[i] = v;
  else
    ((float *)p)[i] = (float)v;
}

#ifdef __cplusplus
}
#endif
#endif /* CNN_CPU_KERNELS_H */
