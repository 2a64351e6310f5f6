/*
 * pipeline.c -- data.transforms as a list of C ops, run on one image by
 * the loader's workers (or the caller, for ds:get(i)).
 *
 * A cnn_pipeline is plain data (no pointers), copied into the batcher.
 * cnn_pipeline_run() takes the image in s->a (float32 C x H x W, already
 * multiplied by the pipeline's scale) and applies the ops in order,
 * ping-ponging between s->a and s->b; the result ends in s->a.  Random
 * parameters come from splitmix64 seeded by the caller per sample, drawn
 * in op order, so a sample's result depends on (seed, position) only.
 *
 * Random parameters follow torchvision's get_params:
 *  - RandomCrop: pad every side by `pad` (zeros), top ~ U{0..H+2p-h},
 *    left ~ U{0..W+2p-w}; an image smaller than the crop is an error.
 *  - RandomResizedCrop: 10 tries of area ~ U(scale) * H * W and log-ratio
 *    ~ U(log ratio); the first window that fits is cropped at a uniform
 *    offset, else the centre crop clamped to the ratio range; then resized.
 *  - RandomHorizontalFlip: flip when U(0, 1) < p.
 *  - RandomRotation: angle ~ U(lo, hi) degrees.
 *  - ColorJitter: the order of brightness, contrast, saturation (and hue,
 *    when its range is not {0, 0}) is a random permutation; each factor
 *    ~ U(max(0, 1 - v), 1 + v), the hue shift ~ U(hue_lo, hue_hi).
 * Deterministic ops: Resize (an integer: the shorter edge, the longer one
 * int(size * long / short), as torchvision), CenterCrop (offsets rounded
 * half to even like Python's round; zero padding when the crop is larger),
 * Grayscale, Normalize.
 */
#include "io_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- randomness (per sample) ---------------------------------------------- */

static uint64_t next_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double uniform(uint64_t *s, double lo, double hi) {
  return lo + (hi - lo) * (double)(next_u64(s) >> 11) * 0x1p-53;
}

static int64_t randint(uint64_t *s, int64_t lo, int64_t hi) { /* inclusive */
  return lo + (int64_t)(next_u64(s) % (uint64_t)(hi - lo + 1));
}

uint64_t cnn_sample_seed(uint64_t seed, int64_t pos) {
  uint64_t s = seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(pos + 1));
  return next_u64(&s);
}

/* ---- scratch ----------------------------------------------------------------- */

static int reserve(float **buf, size_t *cap, size_t n) {
  if (n <= *cap) return 0;
  float *nb = realloc(*buf, n * sizeof *nb);
  if (!nb) return cnn_set_error("transform: out of memory (%zu floats)", n), -1;
  *buf = nb, *cap = n;
  return 0;
}

int cnn_pipeline_reserve(cnn_pipeline_scratch *s, int64_t n) {
  return reserve(&s->a, &s->cap_a, (size_t)n);
}

void cnn_pipeline_scratch_free(cnn_pipeline_scratch *s) {
  free(s->a), free(s->b), free(s->t);
  memset(s, 0, sizeof *s);
}

static void swap(cnn_pipeline_scratch *s) {
  float *t = s->a;
  size_t c = s->cap_a;
  s->a = s->b, s->cap_a = s->cap_b;
  s->b = t, s->cap_b = c;
}

/* ---- shapes -------------------------------------------------------------------- */

static void resize_shape(const cnn_tf_op *op, int64_t h, int64_t w, int64_t *oh, int64_t *ow) {
  if (op->w > 0) {
    *oh = op->h, *ow = op->w;
  } else if (w <= h) {
    *ow = op->h, *oh = (int64_t)((double)op->h * (double)h / (double)w);
  } else {
    *oh = op->h, *ow = (int64_t)((double)op->h * (double)w / (double)h);
  }
  if (*oh < 1) *oh = 1;
  if (*ow < 1) *ow = 1;
}

static const char *const op_names[] = {"?",
                                       "Resize",
                                       "CenterCrop",
                                       "RandomCrop",
                                       "RandomResizedCrop",
                                       "RandomHorizontalFlip",
                                       "RandomRotation",
                                       "ColorJitter",
                                       "Grayscale",
                                       "Normalize"};

/* the shape after one op; -1 (with a message) when the op cannot apply */
static int op_shape(const cnn_tf_op *op, int64_t sh[3]) {
  const char *name = op_names[op->kind];
  switch (op->kind) {
  case CNN_TF_RESIZE: resize_shape(op, sh[1], sh[2], &sh[1], &sh[2]); break;
  case CNN_TF_CENTER_CROP:
  case CNN_TF_RANDOM_RESIZED_CROP: sh[1] = op->h, sh[2] = op->w; break;
  case CNN_TF_RANDOM_CROP:
    if (sh[1] + 2 * op->pad < op->h || sh[2] + 2 * op->pad < op->w) {
      cnn_set_error("%s: the image is %lldx%lld (padding %lld) but the crop is %lldx%lld", name,
                    (long long)sh[1], (long long)sh[2], (long long)op->pad, (long long)op->h,
                    (long long)op->w);
      return -1;
    }
    sh[1] = op->h, sh[2] = op->w;
    break;
  case CNN_TF_GRAYSCALE:
  case CNN_TF_COLOR_JITTER:
    if (sh[0] != 1 && sh[0] != 3) {
      cnn_set_error("%s: needs 1 or 3 channels, the image has %lld", name, (long long)sh[0]);
      return -1;
    }
    if (op->kind == CNN_TF_GRAYSCALE) sh[0] = op->channels;
    break;
  case CNN_TF_NORMALIZE:
    if (op->channels != 1 && op->channels != sh[0]) {
      cnn_set_error("%s: mean and std have %d values but the image has %lld channels", name,
                    op->channels, (long long)sh[0]);
      return -1;
    }
    break;
  default: break;
  }
  return 0;
}

int cnn_pipeline_out_shape(const cnn_pipeline *p, const int64_t in[3], int64_t out[3]) {
  int64_t sh[3] = {in[0], in[1], in[2]};
  for (int i = 0; i < p->n; i++)
    if (op_shape(&p->ops[i], sh) < 0) return -1;
  memcpy(out, sh, sizeof sh);
  return 0;
}

/* ---- the ops ------------------------------------------------------------------------ */

/* resize s->a (sh) to oh x ow into s->a */
static int run_resize(cnn_pipeline_scratch *s, int64_t sh[3], int64_t oh, int64_t ow,
                      bool antialias) {
  if (oh == sh[1] && ow == sh[2]) return 0;
  if (reserve(&s->b, &s->cap_b, (size_t)(sh[0] * oh * ow)) < 0 ||
      reserve(&s->t, &s->cap_t, (size_t)(sh[0] * sh[1] * ow)) < 0)
    return -1;
  if (cnn_image_resize(s->a, sh[0], sh[1], sh[2], s->b, oh, ow, antialias, s->t) < 0) return -1;
  swap(s);
  sh[1] = oh, sh[2] = ow;
  return 0;
}

static int run_crop(cnn_pipeline_scratch *s, int64_t sh[3], int64_t top, int64_t left, int64_t oh,
                    int64_t ow) {
  if (reserve(&s->b, &s->cap_b, (size_t)(sh[0] * oh * ow)) < 0) return -1;
  cnn_image_crop(s->a, sh[0], sh[1], sh[2], s->b, top, left, oh, ow);
  swap(s);
  sh[1] = oh, sh[2] = ow;
  return 0;
}

static int64_t round_half_even_half(int64_t d) { /* round(d / 2) as Python does */
  int64_t k = d >= 0 ? d / 2 : -((-d + 1) / 2);
  if (d % 2 != 0 && (k % 2 != 0)) k++;
  return k;
}

static int run_center_crop(cnn_pipeline_scratch *s, int64_t sh[3], const cnn_tf_op *op) {
  int64_t top = op->h <= sh[1] ? round_half_even_half(sh[1] - op->h) : -((op->h - sh[1]) / 2);
  int64_t left = op->w <= sh[2] ? round_half_even_half(sh[2] - op->w) : -((op->w - sh[2]) / 2);
  return run_crop(s, sh, top, left, op->h, op->w);
}

static int run_random_crop(cnn_pipeline_scratch *s, int64_t sh[3], const cnn_tf_op *op,
                           uint64_t *rng) {
  int64_t top = randint(rng, 0, sh[1] + 2 * op->pad - op->h) - op->pad;
  int64_t left = randint(rng, 0, sh[2] + 2 * op->pad - op->w) - op->pad;
  return run_crop(s, sh, top, left, op->h, op->w);
}

/* torchvision's RandomResizedCrop.get_params */
static void rrc_window(const cnn_tf_op *op, int64_t h, int64_t w, uint64_t *rng, int64_t win[4]) {
  double area = (double)h * (double)w, lr0 = log(op->rlo), lr1 = log(op->rhi);
  for (int attempt = 0; attempt < 10; attempt++) {
    double target = area * uniform(rng, op->lo, op->hi), aspect = exp(uniform(rng, lr0, lr1));
    int64_t cw = (int64_t)nearbyint(sqrt(target * aspect)),
            ch = (int64_t)nearbyint(sqrt(target / aspect));
    if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
      win[0] = randint(rng, 0, h - ch), win[1] = randint(rng, 0, w - cw), win[2] = ch, win[3] = cw;
      return;
    }
  }
  double ratio = (double)w / (double)h;
  int64_t cw = w, ch = h;
  if (ratio < op->rlo)
    ch = (int64_t)nearbyint((double)w / op->rlo);
  else if (ratio > op->rhi)
    cw = (int64_t)nearbyint((double)h * op->rhi);
  win[0] = (h - ch) / 2, win[1] = (w - cw) / 2, win[2] = ch, win[3] = cw;
}

static int run_rrc(cnn_pipeline_scratch *s, int64_t sh[3], const cnn_tf_op *op, uint64_t *rng) {
  int64_t win[4];
  rrc_window(op, sh[1], sh[2], rng, win);
  if (run_crop(s, sh, win[0], win[1], win[2], win[3]) < 0) return -1;
  return run_resize(s, sh, op->h, op->w, op->antialias);
}

static int run_rotation(cnn_pipeline_scratch *s, int64_t sh[3], const cnn_tf_op *op,
                        uint64_t *rng) {
  double angle = uniform(rng, op->lo, op->hi);
  if (reserve(&s->b, &s->cap_b, (size_t)(sh[0] * sh[1] * sh[2])) < 0) return -1;
  cnn_image_rotate(s->a, sh[0], sh[1], sh[2], s->b, angle);
  swap(s);
  return 0;
}

/* torchvision's ColorJitter: the adjustments in a random order (Fisher-Yates
 * over 3, or over 4 when hue is on, so results without hue are those of
 * earlier versions), one factor drawn per adjustment that is on */
static void run_jitter(cnn_pipeline_scratch *s, const int64_t sh[3], const cnn_tf_op *op,
                       uint64_t *rng) {
  bool hue = op->hue_lo != 0 || op->hue_hi != 0;
  int n = hue ? 4 : 3, order[4] = {0, 1, 2, 3};
  for (int i = n - 1; i > 0; i--) { /* Fisher-Yates */
    int j = (int)randint(rng, 0, i), t = order[i];
    order[i] = order[j], order[j] = t;
  }
  int64_t hw = sh[1] * sh[2];
  for (int k = 0; k < n; k++) {
    if (order[k] == 3) {
      cnn_image_hue(s->a, sh[0], hw, uniform(rng, op->hue_lo, op->hue_hi));
      continue;
    }
    double v = op->jitter[order[k]];
    if (v <= 0) continue;
    double f = uniform(rng, v < 1 ? 1 - v : 0, 1 + v);
    if (order[k] == 0)
      cnn_image_brightness(s->a, sh[0] * hw, f);
    else if (order[k] == 1)
      cnn_image_contrast(s->a, sh[0], hw, f);
    else
      cnn_image_saturation(s->a, sh[0], hw, f);
  }
}

static int run_grayscale(cnn_pipeline_scratch *s, int64_t sh[3], const cnn_tf_op *op) {
  int64_t hw = sh[1] * sh[2];
  if (reserve(&s->b, &s->cap_b, (size_t)(op->channels * hw)) < 0) return -1;
  cnn_image_grayscale(s->a, sh[0], hw, s->b, op->channels);
  swap(s);
  sh[0] = op->channels;
  return 0;
}

static void run_normalize(cnn_pipeline_scratch *s, const int64_t sh[3], const cnn_tf_op *op) {
  int64_t hw = sh[1] * sh[2];
  for (int64_t c = 0; c < sh[0]; c++) {
    int k = op->channels == 1 ? 0 : (int)c;
    float a = (float)(1 / op->std[k]), b = (float)(-op->mean[k] / op->std[k]);
    float *p = s->a + c * hw;
    for (int64_t i = 0; i < hw; i++) p[i] = p[i] * a + b;
  }
}

static int run_op(cnn_pipeline_scratch *s, int64_t sh[3], const cnn_tf_op *op, uint64_t *rng) {
  if (op_shape(op, (int64_t[3]){sh[0], sh[1], sh[2]}) < 0) return -1;
  switch (op->kind) {
  case CNN_TF_RESIZE: {
    int64_t oh, ow;
    resize_shape(op, sh[1], sh[2], &oh, &ow);
    return run_resize(s, sh, oh, ow, op->antialias);
  }
  case CNN_TF_CENTER_CROP: return run_center_crop(s, sh, op);
  case CNN_TF_RANDOM_CROP: return run_random_crop(s, sh, op, rng);
  case CNN_TF_RANDOM_RESIZED_CROP: return run_rrc(s, sh, op, rng);
  case CNN_TF_HFLIP:
    if (uniform(rng, 0, 1) < op->p) cnn_image_hflip(s->a, sh[0], sh[1], sh[2]);
    return 0;
  case CNN_TF_ROTATION: return run_rotation(s, sh, op, rng);
  case CNN_TF_COLOR_JITTER: run_jitter(s, sh, op, rng); return 0;
  case CNN_TF_GRAYSCALE: return run_grayscale(s, sh, op);
  case CNN_TF_NORMALIZE: run_normalize(s, sh, op); return 0;
  }
  return cnn_set_error("transform: unknown op %d", (int)op->kind), -1;
}

int cnn_pipeline_run(const cnn_pipeline *p, cnn_pipeline_scratch *s, int64_t shape[3],
                     uint64_t seed) {
  uint64_t rng = seed;
  for (int i = 0; i < p->n; i++)
    if (run_op(s, shape, &p->ops[i], &rng) < 0) return -1;
  return 0;
}

/* ---- validation ---------------------------------------------------------------------- */

static int check_op(const cnn_tf_op *op) {
  const char *name =
      op->kind >= CNN_TF_RESIZE && op->kind <= CNN_TF_NORMALIZE ? op_names[op->kind] : "transform";
  bool sized = op->kind == CNN_TF_RESIZE || op->kind == CNN_TF_CENTER_CROP ||
               op->kind == CNN_TF_RANDOM_CROP || op->kind == CNN_TF_RANDOM_RESIZED_CROP;
  if (op->kind < CNN_TF_RESIZE || op->kind > CNN_TF_NORMALIZE)
    return cnn_set_error("transform: unknown op"), -1;
  if (sized &&
      (op->h < 1 || op->h > 65536 || op->w < (op->kind == CNN_TF_RESIZE ? 0 : 1) || op->w > 65536))
    return cnn_set_error("%s: size %lldx%lld is out of range (1..65536)", name, (long long)op->h,
                         (long long)op->w),
           -1;
  if (op->pad < 0 || op->pad > 65536)
    return cnn_set_error("%s: padding %lld is out of range", name, (long long)op->pad), -1;
  if (op->kind == CNN_TF_HFLIP && !(op->p >= 0 && op->p <= 1))
    return cnn_set_error("%s: p = %g is not in [0, 1]", name, op->p), -1;
  if ((op->kind == CNN_TF_ROTATION || op->kind == CNN_TF_RANDOM_RESIZED_CROP) &&
      !(isfinite(op->lo) && isfinite(op->hi) && op->lo <= op->hi))
    return cnn_set_error("%s: range (%g, %g) must be finite and ordered", name, op->lo, op->hi), -1;
  if (op->kind == CNN_TF_RANDOM_RESIZED_CROP &&
      !(op->lo > 0 && op->rlo > 0 && op->rlo <= op->rhi && isfinite(op->rhi)))
    return cnn_set_error("%s: scale and ratio must be positive, ordered ranges", name), -1;
  for (int k = 0; k < 3 && op->kind == CNN_TF_COLOR_JITTER; k++)
    if (!(op->jitter[k] >= 0 && op->jitter[k] < 1e6))
      return cnn_set_error("%s: factors must be >= 0", name), -1;
  if (op->kind == CNN_TF_COLOR_JITTER &&
      !(-0.5 <= op->hue_lo && op->hue_lo <= op->hue_hi && op->hue_hi <= 0.5))
    return cnn_set_error("%s: hue range (%g, %g) must be ordered within [-0.5, 0.5]", name,
                         op->hue_lo, op->hue_hi),
           -1;
  if (op->kind == CNN_TF_GRAYSCALE && op->channels != 1 && op->channels != 3)
    return cnn_set_error("%s: num_output_channels must be 1 or 3", name), -1;
  for (int c = 0; op->kind == CNN_TF_NORMALIZE && c < op->channels; c++)
    if (!isfinite(op->mean[c]) || !(op->std[c] > 0) || !isfinite(op->std[c]))
      return cnn_set_error("%s: channel %d has mean %g, std %g (need finite, std > 0)", name, c + 1,
                           op->mean[c], op->std[c]),
             -1;
  if (op->kind == CNN_TF_NORMALIZE && (op->channels < 1 || op->channels > 4))
    return cnn_set_error("%s: 1 to 4 channel values", name), -1;
  return 0;
}

int cnn_pipeline_check(const cnn_pipeline *p) {
  if (p->n < 0 || p->n > CNN_PIPELINE_MAX)
    return cnn_set_error("transform: at most %d ops", CNN_PIPELINE_MAX), -1;
  if (!isfinite(p->scale)) return cnn_set_error("transform: scale %g is not finite", p->scale), -1;
  for (int i = 0; i < p->n; i++)
    if (check_op(&p->ops[i]) < 0) return -1;
  return 0;
}

/* ---- inputs ---------------------------------------------------------------------------- */

int cnn_pipeline_load_image(cnn_pipeline_scratch *s, const cnn_image *img, double scale,
                            int64_t shape[3]) {
  int64_t c = img->channels, hw = img->h * img->w;
  if (reserve(&s->a, &s->cap_a, (size_t)(c * hw)) < 0) return -1;
  float f = (float)scale;
  for (int64_t ch = 0; ch < c; ch++)
    for (int64_t i = 0; i < hw; i++) s->a[ch * hw + i] = (float)img->px[i * c + ch] * f;
  shape[0] = c, shape[1] = img->h, shape[2] = img->w;
  return 0;
}
