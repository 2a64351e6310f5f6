/*
 * bn_relu_pool_shared.h -- the scalar parts of the conv block's fused
 * batch norm + ReLU + 2x2 max pool kernels that both vector widths share:
 * bn_relu_pool_blocked16.c (AVX-512, 16 channels a vector, nChw16c) and
 * bn_relu_pool_blocked8.c (AVX2, 8 channels, nChw8c).  `lanes` is the
 * kernel's vector width; per-(image, channel block) partial sums are laid
 * out as the kernels write them: part[(n CB + cb) 2 lanes + l] the first
 * sum of lane l, part[... + lanes + l] the second.
 */
#ifndef CNN_BN_RELU_POOL_SHARED_H
#define CNN_BN_RELU_POOL_SHARED_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/kernels.h"

/* A 64-byte aligned scratch of `bytes`; NULL with the error set. */
void *cnn_brp_scratch(size_t bytes);

/* 0, or -1 with the error set where layout is not one of the three, or
 * the NCHW edge is asked of bfloat16 or of planes too large for 32-bit
 * offsets, or bfloat16 of a kernel without it (bf16_ok 0). */
int cnn_brp_check_layout(int layout, int bf16, int bf16_ok, int64_t olen, int lanes);

/* Per channel: rstd = 1/sqrt(var + eps), scale = gamma rstd, shift = beta
 * - mean scale. */
void cnn_brp_affine(int64_t C, const float *gamma, const float *beta, const float *mean,
                    const float *var, float eps, float *scale, float *shift, float *rstd);

/* mean and biased var per channel from the planes' sums of x - first
 * (first[c]: image 0's first pixel of channel c), over M = N H W. */
void cnn_brp_statistics(const double *part, const float *first, int64_t N, int64_t CB, int lanes,
                        double M, float *mean, float *var);

/* The backward's per-channel results from the planes' sums of g and g
 * xhat: dbeta, dgamma, and dx's constants A = gamma rstd, B = -A sum g /
 * M, Cx = -A rstd sum(g xhat) / M (dx = A g + B + Cx (x - mean)). */
void cnn_brp_backward_consts(const double *part, int64_t N, int64_t CB, int lanes, double M,
                             const float *gamma, const float *rstd, float *dgamma, float *dbeta,
                             float *A, float *B, float *Cx);

/* The convolution's input of image n zero-padded to (H + R - 1) x (W + S
 * - 1) per channel, so that output pixel (h, w)'s tap (r, s) of channel c
 * is pad[(c (H + R - 1) + h + r) (W + S - 1) + w + s]. */
void cnn_brp_pad_image(const cnn_b16_conv_src *src, int64_t n, int64_t H, int64_t W, float *pad);

/* dw (K x taps, K = CB lanes) and db (K, or NULL) from the planes' sums
 * acc[((n CB + cb) (taps + 1) + t) lanes + l] (t == taps: the bias),
 * added over the images in order (double). */
void cnn_brp_weight_sums(const float *acc, int64_t N, int64_t CB, int lanes, int64_t taps,
                         float *dw, float *db);

#endif
