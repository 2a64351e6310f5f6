/*
 * batch_norm_internal.h -- what batch_norm.c shares with
 * batch_norm_planes.c (its float32 training passes in memory order): the
 * argument bundles of a forward and a backward call, and the store of a
 * channel's statistics.
 */
#ifndef CNN_CPU_BATCH_NORM_INTERNAL_H
#define CNN_CPU_BATCH_NORM_INTERNAL_H

#include <stdint.h>

typedef struct {
  const void *gamma, *beta;
  void *running_mean, *running_var, *save_mean, *save_invstd;
  int training, relu;   /* relu 1: y = relu(batch_norm(x)); 2: relu(batch_norm(x) + residual) */
  const void *residual; /* relu 2: an array of x's shape and layout, else NULL */
  double momentum, eps;
  int avx512; /* float32 bodies of batch_norm_avx512.c (cnn_cpu_use_avx512()) */
} bn_args;

typedef struct {
  const void *gamma, *save_mean, *save_invstd;
  const void *y; /* the fused relu's output, NULL without relu */
  void *dx, *dgamma, *dbeta;
  int eval;
  int avx512; /* as bn_args */
} bn_grads;

/* Channel c's saved mean and 1/std, and in training its running
 * statistics' update (M values a channel; var the biased variance). */
void cnn_cpu_bn_store_stats(const bn_args *a, int f64, int64_t c, int64_t M, double mean,
                            double var, double invstd);

/* Training forward and backward of float32 on AVX-512 in memory order;
 * -1 (nothing written) when their scratch cannot be allocated. */
int cnn_cpu_bn_forward_planes_f32(const bn_args *a, int64_t N, int64_t C, int64_t L, const float *x,
                                  float *y);
int cnn_cpu_bn_backward_planes_f32(const bn_grads *a, int64_t N, int64_t C, int64_t L,
                                   const float *dy, const float *x);

/* float32 M x C arrays (L = 1: channels-last tensors, BatchNorm1d) in
 * row order, training and eval (batch_norm_rows.c); -1 (nothing written)
 * when their scratch cannot be allocated. */
int cnn_cpu_bn_forward_rows_f32(const bn_args *a, int64_t M, int64_t C, const float *x, float *y);
int cnn_cpu_bn_backward_rows_f32(const bn_grads *a, int64_t M, int64_t C, const float *dy,
                                 const float *x);

/* When the two above run: 1 (the default) where they pay, 0 never (they
 * decline, so that batch_norm.c's channel loops run), 2 always -- for the
 * tests and bench/bn_order.c, which compare the two; returns the previous
 * mode. */
int cnn_cpu_bn_allow_planes(int mode);
/* Whether mode 1 runs an N x C x L tensor in memory order. */
int cnn_cpu_bn_planes_pay(int64_t N, int64_t C, int64_t L);

#endif
