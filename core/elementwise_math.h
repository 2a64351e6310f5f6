/*
 * elementwise_math.h -- per-element math shared by the CPU loops and the
 * CUDA kernels: activations and their derivatives, the numerically stable
 * pieces of binary-cross-entropy-with-logits, the dropout mask, and the
 * optimizer updates.
 *
 * Design: every function is `static inline` and marked CNN_HD
 * (__host__ __device__ under nvcc), takes scalars (and, for optimizers,
 * pointers to ONE element's state), and uses only <math.h> functions that
 * CUDA also provides (exp, log1p, erf, sqrt, tanh, fabs, pow...).  No libc
 * beyond that, no globals, no allocation, no error reporting: callers
 * validate.  Each function comes in a double version and a float version
 * (suffix _f); the float versions compute in float, as a GPU kernel would.
 *
 * Formulas follow PyTorch's definitions (documented per function), so the
 * CPU tests of these functions cover what the GPU runs.
 */
#ifndef CNN_ELEMENTWISE_MATH_H
#define CNN_ELEMENTWISE_MATH_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define CNN_HD __host__ __device__
#else
#define CNN_HD
#endif

/* ---- dropout ------------------------------------------------------------- */

/* Element i of a dropout mask drawn with `seed`: 0 with probability p, else
 * 1/(1-p).  Counter-based -- u(seed, i) is a 24-bit uniform from
 * splitmix64(seed ^ golden*(i+1)) -- so a mask needs no generator state
 * and the CPU and a GPU give the same mask for one seed. */
/* element i's uniform draw in [0, 1): 24 bits of splitmix64(seed, i) */
CNN_HD static inline double cnn_dropout_uniform(uint64_t seed, int64_t i) {
  uint64_t z = seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(i + 1));
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 40) * (1.0 / 16777216.0);
}
CNN_HD static inline double cnn_dropout_value(uint64_t seed, int64_t i, double p) {
  return cnn_dropout_uniform(seed, i) < p ? 0.0 : 1.0 / (1.0 - p);
}

/* ---- activations --------------------------------------------------------- */

/* sigmoid(x) = 1 / (1 + e^-x), computed without overflow for large |x|. */
CNN_HD static inline double cnn_sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}
CNN_HD static inline float cnn_sigmoid_f(float x) {
  if (x >= 0) return 1.0f / (1.0f + expf(-x));
  float e = expf(x);
  return e / (1.0f + e);
}
/* d sigmoid / dx expressed with the output y = sigmoid(x) */
CNN_HD static inline double cnn_sigmoid_grad(double y) { return y * (1.0 - y); }
CNN_HD static inline float cnn_sigmoid_grad_f(float y) { return y * (1.0f - y); }

/* gelu(x) = x * Phi(x), the exact erf form (PyTorch's default). */
CNN_HD static inline double cnn_gelu(double x) {
  return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440));
}
CNN_HD static inline float cnn_gelu_f(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
}
/* gelu'(x) = Phi(x) + x * phi(x) */
CNN_HD static inline double cnn_gelu_grad(double x) {
  double cdf = 0.5 * (1.0 + erf(x * 0.70710678118654752440));
  double pdf = 0.39894228040143267794 * exp(-0.5 * x * x);
  return cdf + x * pdf;
}
CNN_HD static inline float cnn_gelu_grad_f(float x) {
  float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752440f));
  float pdf = 0.39894228040143267794f * expf(-0.5f * x * x);
  return cdf + x * pdf;
}

/* elu(x) = x for x > 0, alpha * (e^x - 1) otherwise */
CNN_HD static inline double cnn_elu(double x, double alpha) { return x > 0 ? x : alpha * expm1(x); }
CNN_HD static inline float cnn_elu_f(float x, float alpha) { return x > 0 ? x : alpha * expm1f(x); }
CNN_HD static inline double cnn_elu_grad(double x, double alpha) {
  return x > 0 ? 1.0 : alpha * exp(x);
}
CNN_HD static inline float cnn_elu_grad_f(float x, float alpha) {
  return x > 0 ? 1.0f : alpha * expf(x);
}

/* leaky_relu(x) = x for x > 0, slope * x otherwise */
CNN_HD static inline double cnn_leaky_relu(double x, double slope) { return x > 0 ? x : slope * x; }
CNN_HD static inline float cnn_leaky_relu_f(float x, float slope) { return x > 0 ? x : slope * x; }
CNN_HD static inline double cnn_leaky_relu_grad(double x, double slope) {
  return x > 0 ? 1.0 : slope;
}
CNN_HD static inline float cnn_leaky_relu_grad_f(float x, float slope) {
  return x > 0 ? 1.0f : slope;
}

/* relu keeps NaN (as PyTorch's clamp_min(0)) */
CNN_HD static inline double cnn_relu(double x) { return x > 0 ? x : (x != x ? x : 0.0); }
CNN_HD static inline float cnn_relu_f(float x) { return x > 0 ? x : (x != x ? x : 0.0f); }

/* ---- activations beyond relu/sigmoid/tanh ---------------------------------
 * Forward formulas and derivatives as PyTorch's kernels define them,
 * including the value of the derivative at each kink (noted per function). */

/* hardtanh(x) = min(max(x, lo), hi), PyTorch's clamp: NaN passes, and with
 * lo > hi every value is hi.  ReLU6 is hardtanh on [0, 6]. */
CNN_HD static inline double cnn_hardtanh(double x, double lo, double hi) {
  double r = x < lo ? lo : x;
  return r > hi ? hi : r;
}
CNN_HD static inline float cnn_hardtanh_f(float x, float lo, float hi) {
  float r = x < lo ? lo : x;
  return r > hi ? hi : r;
}
/* 1 strictly inside (lo, hi), 0 at the bounds and beyond (hardtanh_backward) */
CNN_HD static inline double cnn_hardtanh_grad(double x, double lo, double hi) {
  return x > lo && x < hi ? 1.0 : 0.0;
}

/* silu(x) = x * sigmoid(x); silu'(x) = s (1 + x (1 - s)), s = sigmoid(x) */
CNN_HD static inline double cnn_silu(double x) { return x * cnn_sigmoid(x); }
CNN_HD static inline float cnn_silu_f(float x) { return x * cnn_sigmoid_f(x); }
CNN_HD static inline double cnn_silu_grad(double x) {
  double s = cnn_sigmoid(x);
  return s * (1.0 + x * (1.0 - s));
}

/* hardsigmoid(x) = relu6(x + 3) / 6; the derivative is 1/6 strictly
 * inside (-3, 3), 0 at -3 and 3 (PyTorch's hardsigmoid_backward) */
CNN_HD static inline double cnn_hardsigmoid(double x) {
  return cnn_hardtanh(x + 3.0, 0.0, 6.0) / 6.0;
}
CNN_HD static inline float cnn_hardsigmoid_f(float x) {
  return cnn_hardtanh_f(x + 3.0f, 0.0f, 6.0f) / 6.0f;
}
CNN_HD static inline double cnn_hardsigmoid_grad(double x) {
  return x > -3.0 && x < 3.0 ? 1.0 / 6.0 : 0.0;
}

/* hardswish(x) = x * relu6(x + 3) / 6; the derivative is 0 below -3,
 * x / 3 + 1/2 on [-3, 3] (both ends: -1/2 and 3/2), 1 above 3
 * (PyTorch's hardswish_backward) */
CNN_HD static inline double cnn_hardswish(double x) { return x * cnn_hardsigmoid(x); }
CNN_HD static inline float cnn_hardswish_f(float x) { return x * cnn_hardsigmoid_f(x); }
CNN_HD static inline double cnn_hardswish_grad(double x) {
  return x < -3.0 ? 0.0 : x <= 3.0 ? x / 3.0 + 0.5 : 1.0;
}

/* gelu, tanh approximation: 0.5 x (1 + tanh(k (x + 0.044715 x^3))),
 * k = sqrt(2 / pi); the derivative as PyTorch's GeluBackward (tanh) */
CNN_HD static inline double cnn_gelu_tanh(double x) {
  double inner = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + tanh(inner));
}
CNN_HD static inline float cnn_gelu_tanh_f(float x) {
  float inner = 0.79788456080286535588f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}
CNN_HD static inline double cnn_gelu_tanh_grad(double x) {
  double t = tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x));
  double dinner = 0.79788456080286535588 * (1.0 + 3.0 * 0.044715 * x * x);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dinner;
}

/* ---- binary cross-entropy with logits -------------------------------------
 * softplus(z) = log(1 + e^z) = max(z, 0) + log1p(e^-|z|), never overflows.
 * With log_weight lw = 1 + (pos_weight - 1) * y (PyTorch):
 *   loss(x, y) = (1 - y) * x + lw * softplus(-x)
 *   dloss/dx   = (1 - y) - lw * sigmoid(-x)
 *   dloss/dy   = -x + (pos_weight - 1) * softplus(-x)
 *   dloss/dpw  = y * softplus(-x)
 */
CNN_HD static inline double cnn_softplus(double z) {
  return (z > 0 ? z : 0.0) + log1p(exp(-fabs(z)));
}
CNN_HD static inline float cnn_softplus_f(float z) {
  return (z > 0 ? z : 0.0f) + log1pf(expf(-fabsf(z)));
}
CNN_HD static inline double cnn_bce_logits(double x, double y, double pw) {
  double lw = 1.0 + (pw - 1.0) * y;
  return (1.0 - y) * x + lw * cnn_softplus(-x);
}
CNN_HD static inline float cnn_bce_logits_f(float x, float y, float pw) {
  float lw = 1.0f + (pw - 1.0f) * y;
  return (1.0f - y) * x + lw * cnn_softplus_f(-x);
}
CNN_HD static inline double cnn_bce_logits_dx(double x, double y, double pw) {
  double lw = 1.0 + (pw - 1.0) * y;
  return (1.0 - y) - lw * cnn_sigmoid(-x);
}
CNN_HD static inline float cnn_bce_logits_dx_f(float x, float y, float pw) {
  float lw = 1.0f + (pw - 1.0f) * y;
  return (1.0f - y) - lw * cnn_sigmoid_f(-x);
}
CNN_HD static inline double cnn_bce_logits_dy(double x, double y, double pw) {
  return -x + (pw - 1.0) * cnn_softplus(-x);
}
CNN_HD static inline float cnn_bce_logits_dy_f(float x, float y, float pw) {
  return -x + (pw - 1.0f) * cnn_softplus_f(-x);
}
CNN_HD static inline double cnn_bce_logits_dpw(double x, double y) { return y * cnn_softplus(-x); }
CNN_HD static inline float cnn_bce_logits_dpw_f(float x, float y) { return y * cnn_softplus_f(-x); }

/* ---- activations that build on softplus ---------- */

/* mish(x) = x * tanh(softplus(x)); mish'(x) = t + x sigmoid(x) (1 - t^2),
 * t = tanh(softplus(x)) (softplus below, stable for large |x|) */
CNN_HD static inline double cnn_mish(double x) { return x * tanh(cnn_softplus(x)); }
CNN_HD static inline float cnn_mish_f(float x) { return x * tanhf(cnn_softplus_f(x)); }
CNN_HD static inline double cnn_mish_grad(double x) {
  double t = tanh(cnn_softplus(x));
  return t + x * cnn_sigmoid(x) * (1.0 - t * t);
}

/* softplus with PyTorch's beta and threshold: x where beta x > threshold,
 * else log(1 + e^(beta x)) / beta; the derivative 1 there, else
 * sigmoid(beta x) */
CNN_HD static inline double cnn_softplus_beta(double x, double beta, double threshold) {
  double z = x * beta;
  return z > threshold ? x : cnn_softplus(z) / beta;
}
CNN_HD static inline float cnn_softplus_beta_f(float x, float beta, float threshold) {
  float z = x * beta;
  return z > threshold ? x : cnn_softplus_f(z) / beta;
}
CNN_HD static inline double cnn_softplus_beta_grad(double x, double beta, double threshold) {
  double z = x * beta;
  return z > threshold ? 1.0 : cnn_sigmoid(z);
}
/* ---- optimizer updates ------------------------------------------------------
 * One element per call: p is the parameter, g its gradient, the rest the
 * optimizer's per-element state.  Hyper-parameters come by value.  These
 * follow torch.optim's single-tensor ("for-loop") implementations.
 */

/* SGD: g += wd*p; buf = first ? g : momentum*buf + (1-dampening)*g;
 * g = nesterov ? g + momentum*buf : buf; p -= lr*g.  With momentum == 0
 * `buf` is not touched (may be NULL). */
typedef struct {
  double lr, momentum, dampening, weight_decay;
  int nesterov;
  int first_step; /* the momentum buffer does not exist yet */
} cnn_sgd_hp;

CNN_HD static inline void cnn_sgd_step(double *p, double g, double *buf, cnn_sgd_hp h) {
  if (h.weight_decay != 0) g += h.weight_decay * *p;
  if (h.momentum != 0) {
    *buf = h.first_step ? g : h.momentum * *buf + (1.0 - h.dampening) * g;
    g = h.nesterov ? g + h.momentum * *buf : *buf;
  }
  *p -= h.lr * g;
}
CNN_HD static inline void cnn_sgd_step_f(float *p, float g, float *buf, cnn_sgd_hp h) {
  if (h.weight_decay != 0) g += (float)h.weight_decay * *p;
  if (h.momentum != 0) {
    float m = (float)h.momentum;
    *buf = h.first_step ? g : m * *buf + (float)(1.0 - h.dampening) * g;
    g = h.nesterov ? g + m * *buf : *buf;
  }
  *p -= (float)h.lr * g;
}

/* Adam / AdamW.  bc1 = 1 - beta1^step, bc2 = 1 - beta2^step (computed once
 * per step by cnn_adam_hp_make).  Adam adds wd*p to g (L2); AdamW
 * (decoupled) multiplies p by 1 - lr*wd first.  m = beta1*m + (1-beta1)*g,
 * v = beta2*v + (1-beta2)*g^2; with amsgrad vmax = max(vmax, v) is used.
 * p -= (lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps). */
typedef struct {
  double lr, beta1, beta2, eps, weight_decay, bc1, bc2;
  int decoupled; /* AdamW */
  int amsgrad;
} cnn_adam_hp;

CNN_HD static inline cnn_adam_hp cnn_adam_hp_make(double lr, double beta1, double beta2, double eps,
                                                  double wd, int decoupled, int amsgrad,
                                                  long step) {
  cnn_adam_hp h;
  h.lr = lr, h.beta1 = beta1, h.beta2 = beta2, h.eps = eps, h.weight_decay = wd;
  h.decoupled = decoupled, h.amsgrad = amsgrad;
  h.bc1 = 1.0 - pow(beta1, (double)step);
  h.bc2 = 1.0 - pow(beta2, (double)step);
  return h;
}

CNN_HD static inline void cnn_adam_step(double *p, double g, double *m, double *v, double *vmax,
                                        cnn_adam_hp h) {
  if (h.weight_decay != 0) {
    if (h.decoupled)
      *p *= 1.0 - h.lr * h.weight_decay;
    else
      g += h.weight_decay * *p;
  }
  *m = h.beta1 * *m + (1.0 - h.beta1) * g;
  *v = h.beta2 * *v + (1.0 - h.beta2) * g * g;
  double vv = *v;
  if (h.amsgrad) {
    if (*vmax < vv) *vmax = vv;
    vv = *vmax;
  }
  double denom = sqrt(vv) / sqrt(h.bc2) + h.eps;
  *p -= (h.lr / h.bc1) * *m / denom;
}
CNN_HD static inline void cnn_adam_step_f(float *p, float g, float *m, float *v, float *vmax,
                                          cnn_adam_hp h) {
  if (h.weight_decay != 0) {
    if (h.decoupled)
      *p *= (float)(1.0 - h.lr * h.weight_decay);
    else
      g += (float)h.weight_decay * *p;
  }
  float b1 = (float)h.beta1, b2 = (float)h.beta2;
  *m = b1 * *m + (1.0f - b1) * g;
  *v = b2 * *v + (1.0f - b2) * g * g;
  float vv = *v;
  if (h.amsgrad) {
    if (*vmax < vv) *vmax = vv;
    vv = *vmax;
  }
  float denom = sqrtf(vv) / (float)sqrt(h.bc2) + (float)h.eps;
  *p -= (float)(h.lr / h.bc1) * *m / denom;
}

/* RMSprop: g += wd*p; sq = alpha*sq + (1-alpha)*g^2; centered: ga =
 * alpha*ga + (1-alpha)*g and avg = sqrt(sq - ga^2) + eps, else avg =
 * sqrt(sq) + eps; momentum > 0: buf = momentum*buf + g/avg, p -= lr*buf;
 * else p -= lr*g/avg.  `ga` may be NULL unless centered, `buf` unless
 * momentum > 0. */
typedef struct {
  double lr, alpha, eps, weight_decay, momentum;
  int centered;
} cnn_rmsprop_hp;

CNN_HD static inline void cnn_rmsprop_step(double *p, double g, double *sq, double *ga, double *buf,
                                           cnn_rmsprop_hp h) {
  if (h.weight_decay != 0) g += h.weight_decay * *p;
  *sq = h.alpha * *sq + (1.0 - h.alpha) * g * g;
  double avg;
  if (h.centered) {
    *ga = h.alpha * *ga + (1.0 - h.alpha) * g;
    avg = sqrt(*sq - *ga * *ga) + h.eps;
  } else {
    avg = sqrt(*sq) + h.eps;
  }
  if (h.momentum > 0) {
    *buf = h.momentum * *buf + g / avg;
    *p -= h.lr * *buf;
  } else {
    *p -= h.lr * g / avg;
  }
}
CNN_HD static inline void cnn_rmsprop_step_f(float *p, float g, float *sq, float *ga, float *buf,
                                             cnn_rmsprop_hp h) {
  float a = (float)h.alpha;
  if (h.weight_decay != 0) g += (float)h.weight_decay * *p;
  *sq = a * *sq + (1.0f - a) * g * g;
  float avg;
  if (h.centered) {
    *ga = a * *ga + (1.0f - a) * g;
    avg = sqrtf(*sq - *ga * *ga) + (float)h.eps;
  } else {
    avg = sqrtf(*sq) + (float)h.eps;
  }
  if (h.momentum > 0) {
    *buf = (float)h.momentum * *buf + g / avg;
    *p -= (float)h.lr * *buf;
  } else {
    *p -= (float)h.lr * g / avg;
  }
}

#endif /* CNN_ELEMENTWISE_MATH_H */
