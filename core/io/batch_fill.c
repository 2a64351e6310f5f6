/*
 * batch_fill.c -- one sample of a batch, on a worker thread (or on the
 * caller's thread when num_workers = 0): read it from the source tensor or
 * decode its file, transform it, write it into row j of the batch.
 *
 * Runs without the batcher's lock: it reads only fields fixed before the
 * pool started and writes only row j of tensors handed over by the caller
 * and the worker's own scratch.  Failures (a bad file, a sample whose
 * transformed size differs from the batch's) set this thread's
 * cnn_error() and return -1; the pool reports them.
 *
 * The fixed transform (tensors, no pipeline) keeps its original randomness:
 * sample at position p draws its crop offsets and flip from splitmix64
 * seeded by (seed, p).  A sample's planes share one transform.
 */
#include "batcher_internal.h"

#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* ---- the fixed transform (tensor source) -------------------------------------- */

/* map[i]: the source offset (in the h x w plane) of output pixel i, or -1.
 * Returns the map, or NULL when the transform is the identity. */
static const int64_t *sample_map(const cnn_batcher *b, int64_t *map, int64_t pos) {
  if (!b->tf.crop_pad && !b->tf.hflip) return NULL;
  uint64_t s = b->seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(pos + 1));
  int64_t dy = 0, dx = 0, span = 2 * (int64_t)b->tf.crop_pad + 1;
  if (b->tf.crop_pad) {
    dy = (int64_t)(splitmix64(&s) % (uint64_t)span) - b->tf.crop_pad;
    dx = (int64_t)(splitmix64(&s) % (uint64_t)span) - b->tf.crop_pad;
  }
  bool flip = b->tf.hflip && (splitmix64(&s) >> 63);
  for (int64_t y = 0; y < b->h; y++)
    for (int64_t x = 0; x < b->w; x++) {
      int64_t sy = y + dy, sx = (flip ? b->w - 1 - x : x) + dx;
      bool in = sy >= 0 && sy < b->h && sx >= 0 && sx < b->w;
      map[y * b->w + x] = in ? sy * b->w + sx : -1;
    }
  return map;
}

#define SRC(i) (map ? (map[i] < 0 ? 0 : src[map[i]]) : src[i])

static void plane_u8(const uint8_t *src, float *dst, const int64_t *map, int64_t n, double a,
                     double b) {
  float fa = (float)a, fb = (float)b;
  for (int64_t i = 0; i < n; i++) dst[i] = (float)SRC(i) * fa + fb;
}

static void plane_f32(const float *src, float *dst, const int64_t *map, int64_t n, double a,
                      double b) {
  float fa = (float)a, fb = (float)b;
  for (int64_t i = 0; i < n; i++) dst[i] = SRC(i) * fa + fb;
}

static void plane_f64(const double *src, double *dst, const int64_t *map, int64_t n, double a,
                      double b) {
  for (int64_t i = 0; i < n; i++) dst[i] = SRC(i) * a + b;
}

static void plane_i64(const int64_t *src, int64_t *dst, const int64_t *map, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = SRC(i);
}

#undef SRC

static void fill_fixed(const cnn_batcher *b, worker_scratch *ws, int64_t pos, int64_t j,
                       cnn_tensor *x) {
  int64_t idx = b->order[pos], n = b->h * b->w, per = b->planes * n;
  const int64_t *map = sample_map(b, ws->map, pos);
  size_t isz = cnn_dtype_size(b->images->dtype), osz = cnn_dtype_size(b->out_dtype);
  const char *src = (const char *)cnn_tensor_data(b->images) + (size_t)(idx * per) * isz;
  char *dst = (char *)cnn_tensor_data(x) + (size_t)(j * per) * osz;
  for (int64_t p = 0; p < b->planes; p++) {
    int c = b->tf.normalize && b->tf.nchan > 1 ? (int)p : 0;
    const void *s = src + (size_t)(p * n) * isz;
    void *d = dst + (size_t)(p * n) * osz;
    switch (b->images->dtype) {
    case CNN_UINT8: plane_u8(s, d, map, n, b->a[c], b->b[c]); break;
    case CNN_FLOAT32: plane_f32(s, d, map, n, b->a[c], b->b[c]); break;
    case CNN_FLOAT64: plane_f64(s, d, map, n, b->a[c], b->b[c]); break;
    default: plane_i64(s, d, map, n); break;
    }
  }
}

/* ---- the pipeline (tensor or file source) ----------------------------------------- */

/* sample idx of the tensor source into ws->s.a as float C x H x W times scale */
static int load_tensor_sample(const cnn_batcher *b, worker_scratch *ws, int64_t idx,
                              int64_t shape[3]) {
  int64_t n = b->planes * b->h * b->w;
  if (cnn_pipeline_reserve(&ws->s, n) < 0) return -1;
  float *dst = ws->s.a, f = (float)b->pipe.scale;
  const void *src = (const char *)cnn_tensor_data(b->images) +
                    (size_t)(idx * n) * cnn_dtype_size(b->images->dtype);
  switch (b->images->dtype) {
  case CNN_UINT8:
    for (int64_t i = 0; i < n; i++) dst[i] = (float)((const uint8_t *)src)[i] * f;
    break;
  case CNN_FLOAT32:
    for (int64_t i = 0; i < n; i++) dst[i] = ((const float *)src)[i] * f;
    break;
  default:
    for (int64_t i = 0; i < n; i++) dst[i] = (float)(((const double *)src)[i] * f);
    break;
  }
  shape[0] = b->planes, shape[1] = b->h, shape[2] = b->w;
  return 0;
}

static int load_file_sample(const cnn_batcher *b, worker_scratch *ws, int64_t idx,
                            int64_t shape[3]) {
  cnn_image img;
  if (cnn_image_load(b->paths[idx], b->mode, &img) < 0) return -1;
  int rc = cnn_pipeline_load_image(&ws->s, &img, b->pipe.scale, shape);
  cnn_image_free(&img);
  return rc;
}

static const char *sample_name(const cnn_batcher *b, int64_t idx, char *buf, size_t n) {
  if (b->paths) return b->paths[idx];
  snprintf(buf, n, "sample %lld", (long long)idx + 1);
  return buf;
}

static int fill_pipeline(const cnn_batcher *b, worker_scratch *ws, int64_t pos, int64_t j,
                         cnn_tensor *x) {
  int64_t idx = b->order[pos], shape[3];
  int rc = b->paths ? load_file_sample(b, ws, idx, shape) : load_tensor_sample(b, ws, idx, shape);
  char name[64];
  if (rc == 0 && cnn_pipeline_run(&b->pipe, &ws->s, shape, cnn_sample_seed(b->seed, pos)) < 0) {
    char msg[768];
    snprintf(msg, sizeof msg, "%s: %s", sample_name(b, idx, name, sizeof name), cnn_error());
    cnn_set_error("%s", msg);
    return -1;
  }
  if (rc < 0) return -1;
  if (shape[0] != b->out_shape[0] || shape[1] != b->out_shape[1] || shape[2] != b->out_shape[2]) {
    cnn_set_error(
        "%s is %lldx%lldx%lld after the transform but the batch holds %lldx%lldx%lld images "
        "(add Resize and CenterCrop to make every image one size)",
        sample_name(b, idx, name, sizeof name), (long long)shape[0], (long long)shape[1],
        (long long)shape[2], (long long)b->out_shape[0], (long long)b->out_shape[1],
        (long long)b->out_shape[2]);
    return -1;
  }
  int64_t n = shape[0] * shape[1] * shape[2];
  memcpy((float *)cnn_tensor_data(x) + j * n, ws->s.a, (size_t)n * sizeof(float));
  return 0;
}

/* ---- one sample ---------------------------------------------------------------------- */

static void fill_label(const cnn_batcher *b, int64_t pos, int64_t j, cnn_tensor *y) {
  size_t sz = cnn_dtype_size(b->labels->dtype), row = (size_t)b->lab_elems * sz;
  const char *src = (const char *)cnn_tensor_data(b->labels) + (size_t)b->order[pos] * row;
  char *dst = (char *)cnn_tensor_data(y) + (size_t)j * row;
  memcpy(dst, src, row);
  if (b->labels->dtype == CNN_INT64 && b->label_offset)
    for (int64_t e = 0; e < b->lab_elems; e++) ((int64_t *)dst)[e] += b->label_offset;
}

int cnn_batcher_fill(cnn_batcher *b, worker_scratch *ws, int64_t pos, int64_t j, cnn_tensor *x,
                     cnn_tensor *y) {
  if (b->use_pipe) {
    if (fill_pipeline(b, ws, pos, j, x) < 0) return -1;
  } else {
    fill_fixed(b, ws, pos, j, x);
  }
  if (y) fill_label(b, pos, j, y);
  return 0;
}

int64_t cnn_batcher_sample_numel(const cnn_batcher *b) {
  if (b->use_pipe) return b->out_shape[0] * b->out_shape[1] * b->out_shape[2];
  return b->planes * b->h * b->w;
}
