/*
 * image_ops.c -- the per-image kernels of data.transforms, on one float32
 * C x H x W image (values in [0, 1] after ToFloat, any range before).
 *
 * Single-threaded on purpose: the loader's worker threads run one image
 * each, so these never start OpenMP.  Outputs are overwritten and never
 * alias inputs.  Conventions follow torchvision on PIL images:
 *
 *  - resize: PIL's bilinear resampling (Image.resize(..., BILINEAR), which
 *    torchvision's Resize uses, and its tensor path with antialias=True):
 *    separable, pixel centres at i + 0.5; when shrinking by a factor s the
 *    triangle filter is widened to support s ("antialiased"), so every
 *    source pixel contributes; weights near the border are renormalised
 *    over the pixels that exist.  PIL rounds to uint8 between the passes
 *    and at the end; we stay in float (differences below 1/255).
 *  - crop: a window at (top, left), zero outside the image (padding).
 *  - rotate: by `degrees` counter-clockwise about the centre, same size,
 *    bilinear, zero fill (torchvision's RandomRotation with
 *    interpolation=BILINEAR, expand=False, fill=0).
 *  - brightness / contrast / saturation: torchvision's adjust_* on float
 *    images: blend with black, with the mean of the grayscale image, with
 *    the grayscale image; results clamped to [0, 1].
 *  - hue: torchvision's adjust_hue on float images: RGB -> HSV
 *    (_rgb2hsv), h = (h + shift) mod 1, HSV -> RGB (_hsv2rgb, which clamps
 *    the three derived values p, q, t to [0, 1] but not v); a no-op on one
 *    channel and on gray pixels (s = 0).  In double per pixel, stored as
 *    float (torchvision computes in float32: differences ~1e-7).
 *  - grayscale: 0.299 R + 0.587 G + 0.114 B (ITU-R 601-2, as PIL's 'L').
 */
#include "io_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- resize -------------------------------------------------------------------- */

/* Weights of the 1-D PIL bilinear filter from n_in to n_out samples:
 * for output i, taps first[i] .. first[i]+count[i]-1 with weights
 * w[i*kmax + t].  Returns kmax, or -1 (out of memory). */
static int64_t filter_weights(int64_t n_in, int64_t n_out, bool antialias, int64_t **first,
                              int64_t **count, double **w) {
  double scale = (double)n_in / (double)n_out;
  double fscale = antialias && scale > 1 ? scale : 1;
  double support = fscale; /* bilinear: 1, widened by the shrink factor */
  int64_t kmax = (int64_t)ceil(support) * 2 + 1;
  *first = malloc((size_t)n_out * sizeof **first);
  *count = malloc((size_t)n_out * sizeof **count);
  *w = malloc((size_t)(n_out * kmax) * sizeof **w);
  if (!*first || !*count || !*w) return -1;
  for (int64_t i = 0; i < n_out; i++) {
    double centre = ((double)i + 0.5) * scale;
    int64_t lo = (int64_t)floor(centre - support + 0.5),
            hi = (int64_t)floor(centre + support + 0.5);
    if (lo < 0) lo = 0;
    if (hi > n_in) hi = n_in;
    double total = 0, *wi = *w + i * kmax;
    int64_t k = 0;
    for (int64_t j = lo; j < hi && k < kmax; j++, k++) {
      double d = fabs(((double)j - centre + 0.5) / fscale);
      wi[k] = d < 1 ? 1 - d : 0;
      total += wi[k];
    }
    for (int64_t t = 0; t < k; t++) wi[t] = total > 0 ? wi[t] / total : 0;
    (*first)[i] = lo, (*count)[i] = k;
  }
  return kmax;
}

typedef struct {
  int64_t *first, *count, kmax;
  double *w;
} filter1d;

static void filter_free(filter1d *f) { free(f->first), free(f->count), free(f->w); }

static int filter_make(filter1d *f, int64_t n_in, int64_t n_out, bool antialias) {
  f->kmax = filter_weights(n_in, n_out, antialias, &f->first, &f->count, &f->w);
  return f->kmax < 0 ? -1 : 0;
}

/* src: c x h x w, dst: c x oh x ow; tmp: c x h x ow */
int cnn_image_resize(const float *src, int64_t c, int64_t h, int64_t w, float *dst, int64_t oh,
                     int64_t ow, bool antialias, float *tmp) {
  filter1d fx = {0}, fy = {0};
  if (filter_make(&fx, w, ow, antialias) < 0 || filter_make(&fy, h, oh, antialias) < 0) {
    filter_free(&fx), filter_free(&fy);
    return cnn_set_error("resize: out of memory"), -1;
  }
  for (int64_t p = 0; p < c * h; p++) /* horizontal pass */
    for (int64_t x = 0; x < ow; x++) {
      const float *row = src + p * w + fx.first[x];
      const double *wx = fx.w + x * fx.kmax;
      double s = 0;
      for (int64_t t = 0; t < fx.count[x]; t++) s += wx[t] * row[t];
      tmp[p * ow + x] = (float)s;
    }
  for (int64_t ch = 0; ch < c; ch++) /* vertical pass */
    for (int64_t y = 0; y < oh; y++) {
      const double *wy = fy.w + y * fy.kmax;
      float *out = dst + (ch * oh + y) * ow;
      for (int64_t x = 0; x < ow; x++) {
        const float *col = tmp + (ch * h + fy.first[y]) * ow + x;
        double s = 0;
        for (int64_t t = 0; t < fy.count[y]; t++) s += wy[t] * col[t * ow];
        out[x] = (float)s;
      }
    }
  filter_free(&fx), filter_free(&fy);
  return 0;
}

/* ---- geometry ---------------------------------------------------------------------- */

/* dst: c x oh x ow = src (c x h x w) at rows top.., cols left..; 0 outside */
void cnn_image_crop(const float *src, int64_t c, int64_t h, int64_t w, float *dst, int64_t top,
                    int64_t left, int64_t oh, int64_t ow) {
  for (int64_t ch = 0; ch < c; ch++)
    for (int64_t y = 0; y < oh; y++) {
      int64_t sy = top + y;
      float *out = dst + (ch * oh + y) * ow;
      for (int64_t x = 0; x < ow; x++) {
        int64_t sx = left + x;
        out[x] = sy >= 0 && sy < h && sx >= 0 && sx < w ? src[(ch * h + sy) * w + sx] : 0.0f;
      }
    }
}

/* in place, mirror left-right */
void cnn_image_hflip(float *img, int64_t c, int64_t h, int64_t w) {
  for (int64_t r = 0; r < c * h; r++) {
    float *row = img + r * w;
    for (int64_t a = 0, b = w - 1; a < b; a++, b--) {
      float t = row[a];
      row[a] = row[b], row[b] = t;
    }
  }
}

static float sample_bilinear(const float *plane, int64_t h, int64_t w, double y, double x) {
  int64_t y0 = (int64_t)floor(y), x0 = (int64_t)floor(x);
  double fy = y - (double)y0, fx = x - (double)x0, s = 0;
  for (int dy = 0; dy < 2; dy++)
    for (int dx = 0; dx < 2; dx++) {
      int64_t yy = y0 + dy, xx = x0 + dx;
      if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
      s += (dy ? fy : 1 - fy) * (dx ? fx : 1 - fx) * plane[yy * w + xx];
    }
  return (float)s;
}

/* dst = src rotated by degrees counter-clockwise about the centre */
void cnn_image_rotate(const float *src, int64_t c, int64_t h, int64_t w, float *dst,
                      double degrees) {
  double a = degrees * M_PI / 180, ca = cos(a), sa = sin(a);
  double cy = (double)h * 0.5, cx = (double)w * 0.5;
  for (int64_t y = 0; y < h; y++)
    for (int64_t x = 0; x < w; x++) {
      /* output pixel centre, rotated back into the source (y grows down) */
      double dx = (double)x + 0.5 - cx, dy = (double)y + 0.5 - cy;
      double sx = ca * dx - sa * dy + cx - 0.5, sy = sa * dx + ca * dy + cy - 0.5;
      for (int64_t ch = 0; ch < c; ch++)
        dst[(ch * h + y) * w + x] = sample_bilinear(src + ch * h * w, h, w, sy, sx);
    }
}

/* ---- colour ---------------------------------------------------------------------------- */

static inline float gray_value(const float *img, int64_t hw, int64_t i) {
  return 0.299f * img[i] + 0.587f * img[hw + i] + 0.114f * img[2 * hw + i];
}

static inline float clamp01(double v) { return (float)(v < 0 ? 0 : v > 1 ? 1 : v); }

/* dst (out_c x h x w) = grayscale of src (c = 1 or 3 channels), replicated */
void cnn_image_grayscale(const float *src, int64_t c, int64_t hw, float *dst, int64_t out_c) {
  for (int64_t i = 0; i < hw; i++) {
    float g = c >= 3 ? gray_value(src, hw, i) : src[i];
    for (int64_t ch = 0; ch < out_c; ch++) dst[ch * hw + i] = g;
  }
}

/* in place: x * factor */
void cnn_image_brightness(float *img, int64_t n, double factor) {
  for (int64_t i = 0; i < n; i++) img[i] = clamp01(img[i] * factor);
}

/* in place: blend with the mean of the grayscale image */
void cnn_image_contrast(float *img, int64_t c, int64_t hw, double factor) {
  double mean = 0;
  for (int64_t i = 0; i < hw; i++) mean += c >= 3 ? gray_value(img, hw, i) : img[i];
  mean /= (double)(hw ? hw : 1);
  for (int64_t i = 0; i < c * hw; i++) img[i] = clamp01(factor * img[i] + (1 - factor) * mean);
}

/* in place: blend with the grayscale image (a no-op on one channel) */
void cnn_image_saturation(float *img, int64_t c, int64_t hw, double factor) {
  if (c < 3) return;
  for (int64_t i = 0; i < hw; i++) {
    float g = gray_value(img, hw, i);
    for (int64_t ch = 0; ch < 3; ch++) {
      float *v = img + ch * hw + i;
      *v = clamp01(factor * *v + (1 - factor) * g);
    }
  }
}

/* ---- hue ----------------------------------------------------------------------------- */

/* torchvision's _rgb2hsv on one pixel: h in [0, 1), s, v = max(r, g, b) */
static void rgb_to_hsv(double r, double g, double b, double hsv[3]) {
  double maxc = fmax(r, fmax(g, b)), minc = fmin(r, fmin(g, b)), range = maxc - minc;
  double divisor = maxc == minc ? 1 : range;
  double rc = (maxc - r) / divisor, gc = (maxc - g) / divisor, bc = (maxc - b) / divisor, h;
  if (maxc == r)
    h = bc - gc;
  else if (maxc == g)
    h = 2 + rc - bc;
  else
    h = 4 + gc - rc;
  hsv[0] = fmod(h / 6 + 1, 1);
  hsv[1] = maxc > 0 ? range / maxc
                    : 0; /* torchvision divides by 0 when 0 = max > min (not a [0, 1] image) */
  hsv[2] = maxc;
}

/* torchvision's _hsv2rgb on one pixel (h in [0, 1]) */
static void hsv_to_rgb(double h, double s, double v, double rgb[3]) {
  double sector = floor(h * 6), f = h * 6 - sector;
  double p = clamp01(v * (1 - s)), q = clamp01(v * (1 - s * f)), t = clamp01(v * (1 - s * (1 - f)));
  const double table[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
  int i = sector >= 0 && sector < 6 ? (int)sector
                                    : 0; /* 6 (h = 1) wraps to 0 as torchvision's i % 6; NaN: 0 */
  memcpy(rgb, table[i], sizeof table[i]);
}

/* in place: rotate the hue by shift turns (in [-0.5, 0.5]); a no-op on one channel */
void cnn_image_hue(float *img, int64_t c, int64_t hw, double shift) {
  if (c < 3) return;
  for (int64_t i = 0; i < hw; i++) {
    double hsv[3], rgb[3];
    rgb_to_hsv(img[i], img[hw + i], img[2 * hw + i], hsv);
    double h = hsv[0] + shift;
    hsv_to_rgb(h - floor(h), hsv[1], hsv[2], rgb);
    for (int64_t ch = 0; ch < 3; ch++) img[ch * hw + i] = (float)rgb[ch];
  }
}
