/*
 * bn_relu_pool_shared.c -- the scalar parts of the fused batch norm +
 * ReLU + 2x2 max pool kernels (bn_relu_pool_blocked16.c, AVX-512, and
 * bn_relu_pool_blocked8.c, AVX2): scratch, the layout check, the
 * per-channel constants and the sums over images; and the table of each
 * width's entries (kernels.h).  See the header.
 */
#include "cpu/bn_relu_pool_shared.h"

#include <math.h>
#include <stdlib.h>

void *cnn_brp_scratch(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  void *p = aligned_alloc(64, bytes ? bytes : 64);
  if (!p) cnn_set_error("conv_bn_relu_pool: out of memory for %zu bytes of partial sums", bytes);
  return p;
}

int cnn_brp_check_layout(int layout, int bf16, int bf16_ok, int64_t olen, int lanes) {
  if ((!bf16 || bf16_ok) && (layout == CNN_B16_BLOCKED || layout == CNN_B16_NHWC ||
                             (layout == CNN_B16_NCHW_EDGE && !bf16 && olen <= INT32_MAX / lanes)))
    return 0;
  cnn_set_error("conv_bn_relu_pool: layout %d with bf16 = %d and %lld pooled pixels a plane is "
                "not supported%s",
                layout, bf16, (long long)olen,
                bf16 && !bf16_ok ? " (bfloat16 is the AVX-512 kernel's)" : "");
  return -1;
}

void cnn_brp_affine(int64_t C, const float *gamma, const float *beta, const float *mean,
                    const float *var, float eps, float *scale, float *shift, float *rstd) {
  for (int64_t c = 0; c < C; c++) {
    rstd[c] = (float)(1.0 / sqrt((double)var[c] + (double)eps));
    scale[c] = gamma[c] * rstd[c];
    shift[c] = beta[c] - mean[c] * scale[c];
  }
}

void cnn_brp_statistics(const double *part, const float *first, int64_t N, int64_t CB, int lanes,
                        double M, float *mean, float *var) {
  for (int64_t cb = 0; cb < CB; cb++)
    for (int l = 0; l < lanes; l++) {
      double s1 = 0, s2 = 0;
      for (int64_t n = 0; n < N; n++) {
        const double *s = part + (n * CB + cb) * 2 * lanes;
        s1 += s[l], s2 += s[lanes + l];
      }
      double m = s1 / M, v = s2 / M - m * m;
      mean[cb * lanes + l] = (float)(first[cb * lanes + l] + m);
      var[cb * lanes + l] = (float)(v > 0 ? v : 0);
    }
}

void cnn_brp_backward_consts(const double *part, int64_t N, int64_t CB, int lanes, double M,
                             const float *gamma, const float *rstd, float *dgamma, float *dbeta,
                             float *A, float *B, float *Cx) {
  for (int64_t c = 0; c < CB * lanes; c++) {
    int64_t cb = c / lanes, l = c % lanes;
    double sg = 0, sgx = 0;
    for (int64_t n = 0; n < N; n++) {
      const double *s = part + (n * CB + cb) * 2 * lanes;
      sg += s[l], sgx += s[lanes + l];
    }
    dbeta[c] = (float)sg, dgamma[c] = (float)sgx;
    double a = (double)gamma[c] * rstd[c], cx = -a * rstd[c] * sgx / M;
    A[c] = (float)a, Cx[c] = (float)cx, B[c] = (float)(-a * sg / M);
  }
}

void cnn_brp_pad_image(const cnn_b16_conv_src *src, int64_t n, int64_t H, int64_t W, float *pad) {
  int64_t PH = H + src->R - 1, PW = W + src->S - 1;
  for (int64_t c = 0; c < src->C; c++)
    for (int64_t i = 0; i < PH; i++)
      for (int64_t j = 0; j < PW; j++) {
        int64_t h = i - src->pt, w = j - src->pl;
        int in = h >= 0 && h < src->H && w >= 0 && w < src->W;
        pad[(c * PH + i) * PW + j] =
            in ? src->x[((n * src->C + c) * src->H + h) * src->W + w] : 0.0f;
      }
}

void cnn_brp_weight_sums(const float *acc, int64_t N, int64_t CB, int lanes, int64_t taps,
                         float *dw, float *db) {
  for (int64_t kk = 0; kk < CB * lanes; kk++) {
    int64_t cb = kk / lanes, l = kk % lanes;
    for (int64_t t = 0; t <= taps; t++) {
      double sum = 0;
      for (int64_t n = 0; n < N; n++) sum += acc[((n * CB + cb) * (taps + 1) + t) * lanes + l];
      if (t < taps)
        dw[kk * taps + t] = (float)sum;
      else if (db)
        db[kk] = (float)sum;
    }
  }
}

static const cnn_bn_relu_pool_kernel kernels[2] = {
    {16, cnn_cpu_bn_relu_pool_blocked16_forward, cnn_cpu_bn_relu_pool_blocked16_backward,
     cnn_cpu_bn_relu_pool_blocked16_backward_dw},
    {8, cnn_cpu_bn_relu_pool_blocked8_forward, cnn_cpu_bn_relu_pool_blocked8_backward,
     cnn_cpu_bn_relu_pool_blocked8_backward_dw}};

const cnn_bn_relu_pool_kernel *cnn_cpu_bn_relu_pool_kernel(int lanes) {
  return lanes == 16 ? &kernels[0] : lanes == 8 ? &kernels[1] : NULL;
}
