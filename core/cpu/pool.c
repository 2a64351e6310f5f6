/*
 * pool.c -- max, average and adaptive average 2-D pooling (plain loops).
 *
 * Every op works plane by plane: plane p = n*C + c of x (H x W) maps to
 * plane p of y (OH x OW), so the loops run `#pragma omp parallel for` over
 * the N*C planes and no two threads touch the same memory.
 *
 * Windows (as PyTorch): output row oh covers input rows
 *   [oh*sh - ph, oh*sh - ph + kh)  clipped to [0, H)
 * and likewise for columns; a dilated max window takes every dh-th row of
 * [oh*sh - ph, oh*sh - ph + (kh-1)*dh], those inside [0, H).  Max pool treats padding as -inf (so it never
 * wins), keeps the first maximum, and propagates NaN; its index is the
 * flat position h*W + w within the input plane.  Average pool divides by
 * the window clipped to the padded input [-ph, H+ph) when
 * count_include_pad, else by the number of real elements it covers.
 * Adaptive average pool uses bins [floor(i*H/OH), ceil((i+1)*H/OH)); its
 * float32 global case (OH = OW = 1) runs global_pool_avx512.c's bodies on
 * AVX-512 CPUs.
 *
 * The per-plane bodies are written once over double and instantiated for
 * float32 and float64 by always-inline calls with a literal `f64`.  That
 * choice is made inside each parallel loop: OpenMP outlines the loop body
 * before inlining, so a dtype flag passed into the region would reach the
 * inner loops as a variable.  Bodies take the shape by value, a local copy
 * that stores through the output pointers cannot alias.
 * All backward passes OVERWRITE dx.
 *
 * Max pool sends float32 2x2 windows of stride 2 without padding on planes
 * of even width (MaxPool2d(2), in nearly every CNN) to max_pool_2x2.c,
 * forward, for the windows that lie inside the plane; the
 * generic bodies here do the rest (ceil_mode's clipped last row).
 */
#include <assert.h>
#include <math.h>

#include "cpu/kernels.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* The invariants of a pool's shape (core/ops/nn_pool.c validates; these
 * run only inside assert()).  Dilation is max pool's alone. */
static bool pool_valid(cnn_dtype dt, const cnn_pool_shape *s) {
  return (dt == CNN_FLOAT32 || dt == CNN_FLOAT64) && s->N >= 0 && s->C >= 0 && s->H >= 0 &&
         s->W >= 0 && s->OH >= 0 && s->OW >= 0 && s->kh >= 1 && s->kw >= 1 && s->sh >= 1 &&
         s->sw >= 1 && s->ph >= 0 && s->pw >= 0;
}

static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- max pool -------------------------------------------------------------------- */

/* The taps of a dilated window along one axis: start, start + d, ...
 * (k taps) that fall inside [0, n), as [*lo, *hi) stepping by d. */
static inline void window_taps(int64_t start, int k, int d, int64_t n, int64_t *lo, int64_t *hi) {
  *lo = start < 0 ? start + (-start + d - 1) / d * d : start;
  *hi = min64(start + (int64_t)(k - 1) * d + 1, n);
}

/* One output: the maximum of x (H x W) over the window of (oh, ow) and its
 * argmax (-1 for a window that holds no input element).  PyTorch's rule:
 * start at -inf with the window's first position, take v when v > best or
 * v is NaN (so best stays NaN once it is).  Written without branches on the
 * data -- a maximum, flags and integer masks -- since random data would
 * mispredict every other compare. */
ALWAYS_INLINE double max_window(int f64, const cnn_pool_shape *s, const void *x, int64_t oh,
                                int64_t ow, int64_t *argp) {
  int64_t h0, h1, w0, w1;
  window_taps(oh * s->sh - s->ph, s->kh, s->dh, s->H, &h0, &h1);
  window_taps(ow * s->sw - s->pw, s->kw, s->dw, s->W, &w0, &w1);
  int64_t arg = h0 < h1 && w0 < w1 ? h0 * s->W + w0 : -1;
  double best = -INFINITY;
  int seen_nan = 0;
  for (int64_t h = h0; h < h1; h += s->dh)
    for (int64_t w = w0; w < w1; w += s->dw) {
      double v = cnn_cpu_ld(x, h * s->W + w, f64);
      int is_nan = v != v, take = ((v > best) & !seen_nan) | is_nan;
      arg += (h * s->W + w - arg) & -(int64_t)take;
      best = v > best ? v : best;
      seen_nan |= is_nan;
    }
  *argp = arg;
  return seen_nan ? NAN : best;
}

/* One plane: y (OH x OW) = window maxima of x (H x W), argmax into idx (or
 * NULL).  Rows below oh1 start at column ow0: the 2x2 path below has
 * filled their first ow0 outputs (oh1 = ow0 = 0 for the whole plane). */
ALWAYS_INLINE void max_plane(int f64, cnn_pool_shape s, const void *x, void *y, int64_t *idx,
                             int64_t oh1, int64_t ow0) {
  for (int64_t oh = 0; oh < s.OH; oh++)
    for (int64_t ow = oh < oh1 ? ow0 : 0; ow < s.OW; ow++) {
      int64_t arg;
      cnn_cpu_st(y, oh * s.OW + ow, max_window(f64, &s, x, oh, ow, &arg), f64);
      if (idx) idx[oh * s.OW + ow] = arg;
    }
}

/* Plane p of x into plane p of y (and idx): the 2x2 path where it applies,
 * the generic loops for the rest (ceil_mode's clipped last row). */
static void max_pool_plane(cnn_dtype dt, const cnn_pool_shape *s, const void *x, void *y,
                           int64_t *idx, int avx512) {
  if (cnn_cpu_max_pool_2x2_applies(dt, s)) {
    int64_t FH = min64(s->OH, s->H / 2); /* OW == W/2 for an even W */
    cnn_cpu_max_pool_2x2_forward(avx512, x, y, idx, s->W, FH);
    if (FH < s->OH) max_plane(0, *s, x, y, idx, FH, s->OW);
  } else if (dt == CNN_FLOAT64) {
    max_plane(1, *s, x, y, idx, 0, 0);
  } else {
    max_plane(0, *s, x, y, idx, 0, 0);
  }
}

int cnn_cpu_max_pool2d_forward(cnn_dtype dt, const cnn_pool_shape *s, const void *x, void *y,
                               int64_t *indices) {
  assert(pool_valid(dt, s) && s->dh >= 1 && s->dw >= 1);
  if (s->channels_last) return cnn_cpu_max_pool2d_nhwc_forward(dt, s, x, y, indices);
  int64_t HW = s->H * s->W, OP = s->OH * s->OW, esz = (int64_t)cnn_dtype_size(dt);
  int avx512 = cnn_cpu_use_avx512();
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < s->N * s->C; p++)
    max_pool_plane(dt, s, (const char *)x + p * HW * esz, (char *)y + p * OP * esz,
                   indices ? indices + p * OP : NULL, avx512);
  return 0;
}

/* dx (H x W) = 0, then dx[idx[o]] += dy[o] for the plane's outputs. */
ALWAYS_INLINE void max_plane_backward(int f64, cnn_pool_shape s, const void *dy, const int64_t *idx,
                                      void *dx) {
  int64_t HW = s.H * s.W;
  for (int64_t i = 0; i < HW; i++) cnn_cpu_st(dx, i, 0, f64);
  for (int64_t o = 0; o < s.OH * s.OW; o++) {
    int64_t i = idx[o];
    if (i < 0 || i >= HW) continue; /* an empty window */
    cnn_cpu_st(dx, i, cnn_cpu_ld(dx, i, f64) + cnn_cpu_ld(dy, o, f64), f64);
  }
}

int cnn_cpu_max_pool2d_backward(cnn_dtype dt, const cnn_pool_shape *s, const void *dy,
                                const int64_t *indices, void *dx) {
  assert(pool_valid(dt, s) && indices);
  if (s->channels_last) return cnn_cpu_max_pool2d_nhwc_backward(dt, s, dy, indices, dx);
  int64_t HW = s->H * s->W, OP = s->OH * s->OW, esz = (int64_t)cnn_dtype_size(dt);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < s->N * s->C; p++) {
    const void *dyp = (const char *)dy + p * OP * esz;
    void *dxp = (char *)dx + p * HW * esz;
    if (dt == CNN_FLOAT64)
      max_plane_backward(1, *s, dyp, indices + p * OP, dxp);
    else
      max_plane_backward(0, *s, dyp, indices + p * OP, dxp);
  }
  return 0;
}

/* ---- average pool ------------------------------------------------------------------ */

/* The window of (oh, ow) clipped to the input, and its divisor. */
typedef struct {
  int64_t h0, h1, w0, w1;
  double divisor;
} window;

static inline window avg_window(const cnn_pool_shape *s, int64_t oh, int64_t ow) {
  window v;
  int64_t h0 = oh * s->sh - s->ph, w0 = ow * s->sw - s->pw;
  int64_t h1 = min64(h0 + s->kh, s->H + s->ph), w1 = min64(w0 + s->kw, s->W + s->pw);
  int64_t padded = (h1 - h0) * (w1 - w0);
  v.h0 = max64(h0, 0), v.w0 = max64(w0, 0), v.h1 = min64(h1, s->H), v.w1 = min64(w1, s->W);
  int64_t real = max64(v.h1 - v.h0, 0) * max64(v.w1 - v.w0, 0);
  v.divisor = (double)(s->count_include_pad ? padded : real);
  return v;
}

/* One plane: y (OH x OW) = window sums of x (H x W) / divisor. */
ALWAYS_INLINE void avg_plane(int f64, cnn_pool_shape s, const void *x, void *y) {
  for (int64_t oh = 0; oh < s.OH; oh++)
    for (int64_t ow = 0; ow < s.OW; ow++) {
      window v = avg_window(&s, oh, ow);
      double acc = 0;
      for (int64_t h = v.h0; h < v.h1; h++)
        for (int64_t w = v.w0; w < v.w1; w++) acc += cnn_cpu_ld(x, h * s.W + w, f64);
      cnn_cpu_st(y, oh * s.OW + ow, v.divisor > 0 ? acc / v.divisor : 0, f64);
    }
}

int cnn_cpu_avg_pool2d_forward(cnn_dtype dt, const cnn_pool_shape *s, const void *x, void *y) {
  assert(pool_valid(dt, s));
  int64_t HW = s->H * s->W, OP = s->OH * s->OW, esz = (int64_t)cnn_dtype_size(dt);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < s->N * s->C; p++) {
    const void *xp = (const char *)x + p * HW * esz;
    void *yp = (char *)y + p * OP * esz;
    if (dt == CNN_FLOAT64)
      avg_plane(1, *s, xp, yp);
    else
      avg_plane(0, *s, xp, yp);
  }
  return 0;
}

/* dx (H x W) = 0, then every window gets dy / divisor added. */
ALWAYS_INLINE void avg_plane_backward(int f64, cnn_pool_shape s, const void *dy, void *dx) {
  for (int64_t i = 0; i < s.H * s.W; i++) cnn_cpu_st(dx, i, 0, f64);
  for (int64_t oh = 0; oh < s.OH; oh++)
    for (int64_t ow = 0; ow < s.OW; ow++) {
      window v = avg_window(&s, oh, ow);
      if (!(v.divisor > 0)) continue;
      double g = cnn_cpu_ld(dy, oh * s.OW + ow, f64) / v.divisor;
      for (int64_t h = v.h0; h < v.h1; h++)
        for (int64_t w = v.w0; w < v.w1; w++)
          cnn_cpu_st(dx, h * s.W + w, cnn_cpu_ld(dx, h * s.W + w, f64) + g, f64);
    }
}

int cnn_cpu_avg_pool2d_backward(cnn_dtype dt, const cnn_pool_shape *s, const void *dy, void *dx) {
  assert(pool_valid(dt, s));
  int64_t HW = s->H * s->W, OP = s->OH * s->OW, esz = (int64_t)cnn_dtype_size(dt);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < s->N * s->C; p++) {
    const void *dyp = (const char *)dy + p * OP * esz;
    void *dxp = (char *)dx + p * HW * esz;
    if (dt == CNN_FLOAT64)
      avg_plane_backward(1, *s, dyp, dxp);
    else
      avg_plane_backward(0, *s, dyp, dxp);
  }
  return 0;
}

/* ---- adaptive average pool ------------------------------------------------------------ */

static inline int64_t bin_start(int64_t i, int64_t in, int64_t out) { return i * in / out; }
static inline int64_t bin_end(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

/* For assert(), as pool_valid. */
static bool adaptive_valid(cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W, int64_t OH,
                           int64_t OW) {
  return (dt == CNN_FLOAT32 || dt == CNN_FLOAT64) && N >= 0 && C >= 0 && H >= 0 && W >= 0 &&
         OH >= 0 && OW >= 0;
}

/* The adaptive problem as a pool shape: only N, C, H, W, OH, OW are used. */
static cnn_pool_shape adaptive_shape(int64_t N, int64_t C, int64_t H, int64_t W, int64_t OH,
                                     int64_t OW) {
  cnn_pool_shape s = {.N = N, .C = C, .H = H, .W = W, .OH = OH, .OW = OW};
  return s;
}

/* The sum of x[i0 .. i1), in double: `omp simd` partial sums (one
 * accumulator made every add wait for the last: the global pool of
 * ResNet-20's 64x64x8x8 took 85 us, 11 GB/s, for 1 MB). */
ALWAYS_INLINE double range_sum(int f64, const void *x, int64_t i0, int64_t i1) {
  double acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = i0; i < i1; i++) acc += cnn_cpu_ld(x, i, f64);
  return acc;
}

/* One plane: y (OH x OW) = means of x (H x W) over the bins. */
ALWAYS_INLINE void adaptive_plane(int f64, cnn_pool_shape s, const void *x, void *y) {
  for (int64_t oh = 0; oh < s.OH; oh++)
    for (int64_t ow = 0; ow < s.OW; ow++) {
      int64_t h0 = bin_start(oh, s.H, s.OH), h1 = bin_end(oh, s.H, s.OH);
      int64_t w0 = bin_start(ow, s.W, s.OW), w1 = bin_end(ow, s.W, s.OW);
      double acc = 0;
      for (int64_t h = h0; h < h1; h++)
        for (int64_t w = w0; w < w1; w++) acc += cnn_cpu_ld(x, h * s.W + w, f64);
      int64_t count = (h1 - h0) * (w1 - w0);
      cnn_cpu_st(y, oh * s.OW + ow, count > 0 ? acc / count : 0, f64);
    }
}

/* The same for OW == 1 (global pooling among others): each bin is whole
 * rows, one contiguous range, summed with `omp simd` partial sums.  With
 * the one accumulator above every add waited for the last: ResNet-20's
 * global pool (64x64x8x8) took 85 us, 11 GB/s.  (A reduction per row of
 * the other bins cost more than it saved: 3x3 of 8x8 1.9x slower.) */
ALWAYS_INLINE void adaptive_plane_rows(int f64, cnn_pool_shape s, const void *x, void *y) {
  for (int64_t oh = 0; oh < s.OH; oh++) {
    int64_t i0 = bin_start(oh, s.H, s.OH) * s.W, i1 = bin_end(oh, s.H, s.OH) * s.W;
    double acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t i = i0; i < i1; i++) acc += cnn_cpu_ld(x, i, f64);
    cnn_cpu_st(y, oh, i1 > i0 ? acc / (double)(i1 - i0) : 0, f64);
  }
}

/* Global float32 pooling (OH = OW = 1) runs global_pool_avx512.c's
 * bodies on AVX-512 CPUs, GLOBAL_CHUNK planes per parallel step (a
 * thread's steps are contiguous: schedule(static)); below GLOBAL_SERIAL
 * floats one thread, the team's start costing more than the sums. */
#define GLOBAL_CHUNK  64
#define GLOBAL_SERIAL 32768

static bool global_f32(cnn_dtype dt, int64_t H, int64_t W, int64_t OH, int64_t OW) {
  /* empty planes keep the loops below, whose mean of nothing is 0 */
  return dt == CNN_FLOAT32 && OH == 1 && OW == 1 && H * W > 0 && cnn_cpu_use_avx512();
}

static void global_forward(int64_t planes, int64_t len, const float *x, float *y) {
#pragma omp parallel for schedule(static) if (planes * len > GLOBAL_SERIAL)
  for (int64_t p = 0; p < planes; p += GLOBAL_CHUNK)
    cnn_cpu_global_avg_pool_f32_avx512(
        x + p * len, planes - p < GLOBAL_CHUNK ? planes - p : GLOBAL_CHUNK, len, y + p);
}

static void global_backward(int64_t planes, int64_t len, const float *dy, float *dx) {
#pragma omp parallel for schedule(static) if (planes * len > GLOBAL_SERIAL)
  for (int64_t p = 0; p < planes; p += GLOBAL_CHUNK)
    cnn_cpu_global_avg_pool_backward_f32_avx512(
        dy + p, planes - p < GLOBAL_CHUNK ? planes - p : GLOBAL_CHUNK, len, dx + p * len);
}

int cnn_cpu_adaptive_avg_pool2d_forward(cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                                        int64_t OH, int64_t OW, const void *x, void *y) {
  assert(adaptive_valid(dt, N, C, H, W, OH, OW));
  if (global_f32(dt, H, W, OH, OW)) {
    global_forward(N * C, H * W, x, y);
    return 0;
  }
  cnn_pool_shape s = adaptive_shape(N, C, H, W, OH, OW);
  int64_t esz = (int64_t)cnn_dtype_size(dt);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * C; p++) {
    const void *xp = (const char *)x + p * H * W * esz;
    void *yp = (char *)y + p * OH * OW * esz;
    if (OW == 1 && dt == CNN_FLOAT64)
      adaptive_plane_rows(1, s, xp, yp);
    else if (OW == 1)
      adaptive_plane_rows(0, s, xp, yp);
    else if (dt == CNN_FLOAT64)
      adaptive_plane(1, s, xp, yp);
    else
      adaptive_plane(0, s, xp, yp);
  }
  return 0;
}

/* dx (H x W) = 0, then every bin gets dy / its size added. */
ALWAYS_INLINE void adaptive_plane_backward(int f64, cnn_pool_shape s, const void *dy, void *dx) {
  for (int64_t i = 0; i < s.H * s.W; i++) cnn_cpu_st(dx, i, 0, f64);
  for (int64_t oh = 0; oh < s.OH; oh++)
    for (int64_t ow = 0; ow < s.OW; ow++) {
      int64_t h0 = bin_start(oh, s.H, s.OH), h1 = bin_end(oh, s.H, s.OH);
      int64_t w0 = bin_start(ow, s.W, s.OW), w1 = bin_end(ow, s.W, s.OW);
      if (h1 <= h0 || w1 <= w0) continue;
      double g = cnn_cpu_ld(dy, oh * s.OW + ow, f64) / ((h1 - h0) * (w1 - w0));
      for (int64_t h = h0; h < h1; h++)
        for (int64_t w = w0; w < w1; w++)
          cnn_cpu_st(dx, h * s.W + w, cnn_cpu_ld(dx, h * s.W + w, f64) + g, f64);
    }
}

/* The same for OW == 1: each bin's rows are one contiguous range, filled
 * with `omp simd` (the loops above ran element by element: ResNet-20's
 * global pool backward wrote its 1 MB at 23 GB/s, a sixth of a copy
 * made at that point of the step). */
ALWAYS_INLINE void adaptive_plane_rows_backward(int f64, cnn_pool_shape s, const void *dy,
                                                void *dx) {
#pragma omp simd
  for (int64_t i = 0; i < s.H * s.W; i++) cnn_cpu_st(dx, i, 0, f64);
  for (int64_t oh = 0; oh < s.OH; oh++) {
    int64_t i0 = bin_start(oh, s.H, s.OH) * s.W, i1 = bin_end(oh, s.H, s.OH) * s.W;
    if (i1 <= i0) continue;
    double g = cnn_cpu_ld(dy, oh, f64) / (double)(i1 - i0);
#pragma omp simd
    for (int64_t i = i0; i < i1; i++) cnn_cpu_st(dx, i, cnn_cpu_ld(dx, i, f64) + g, f64);
  }
}

int cnn_cpu_adaptive_avg_pool2d_backward(cnn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W,
                                         int64_t OH, int64_t OW, const void *dy, void *dx) {
  assert(adaptive_valid(dt, N, C, H, W, OH, OW));
  if (global_f32(dt, H, W, OH, OW)) {
    global_backward(N * C, H * W, dy, dx);
    return 0;
  }
  cnn_pool_shape s = adaptive_shape(N, C, H, W, OH, OW);
  int64_t esz = (int64_t)cnn_dtype_size(dt);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * C; p++) {
    const void *dyp = (const char *)dy + p * OH * OW * esz;
    void *dxp = (char *)dx + p * H * W * esz;
    if (OW == 1 && dt == CNN_FLOAT64)
      adaptive_plane_rows_backward(1, s, dyp, dxp);
    else if (OW == 1)
      adaptive_plane_rows_backward(0, s, dyp, dxp);
    else if (dt == CNN_FLOAT64)
      adaptive_plane_backward(1, s, dyp, dxp);
    else
      adaptive_plane_backward(0, s, dyp, dxp);
  }
  return 0;
}
