/*
 * batcher.c -- background batch assembly for data.DataLoader.
 *
 * One worker pthread per batcher and one job slot: while the caller trains
 * on batch k, the worker fills batch k+1.  The caller's thread allocates
 * every output tensor (the allocator's hooks may call into Lua, which is
 * not thread-safe) and hands the empty tensors to the worker, which only
 * writes into them.  So the worker never allocates, never fails and never
 * touches cnn_error(); errors all happen on the caller's thread.
 *
 * Slot protocol (under `mu`): IDLE -> (caller submits) PENDING -> (worker
 * fills) DONE -> (caller takes) IDLE.  The worker sleeps on `cv` until a
 * job is PENDING or `stop` is set; the caller sleeps on `cv` until the job
 * is DONE.  cnn_batcher_free() sets `stop` (also polled between samples,
 * so a free mid-batch returns quickly), joins the thread, then releases
 * whatever is still in the slot.
 *
 * Pinned batches (DataLoader{pin_memory = true}, cnn_batcher_set_pin_memory):
 * the caller's thread allocates the batch tensors in page-locked memory
 * (cnn_empty_pinned, a CUDA call) exactly where it allocates them today, so
 * the worker still never allocates and never calls CUDA.  Batch 0 is
 * therefore submitted by the first cnn_batcher_next, not by the
 * constructor, so that the flag can be set in between.
 *
 * Randomness: sample at position p of `order` draws its crop offsets and
 * flip from splitmix64 seeded by (seed, p), so results depend on the seed
 * only, not on timing.  A sample's planes (channels) share one transform.
 */
#include "io_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { SLOT_IDLE, SLOT_PENDING, SLOT_DONE };

struct cnn_batcher {
  cnn_tensor *images, *labels; /* contiguous CPU references (labels may be NULL) */
  int64_t *order, norder, batch_size, nbatches;
  int64_t next;                /* the batch the caller gets next */
  int64_t submitted;           /* the batch in the slot, or -1 */
  cnn_transform tf;
  int64_t label_offset;
  uint64_t seed;
  /* geometry of one sample: planes x h x w elements; labels: lab_elems each */
  int64_t planes, h, w, lab_elems;
  cnn_dtype out_dtype;
  bool pinned;                 /* allocate batches in page-locked memory */
  double a[4], b[4];           /* value = raw * a[c] + b[c] per normalisation channel */
  /* the worker */
  pthread_t thread;
  bool started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int slot;
  cnn_tensor *slot_x, *slot_y;
  atomic_bool stop;
  int64_t *map;                /* worker scratch: h*w source offsets (-1: padding) */
};

/* ---- randomness ------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* ---- per-sample filling (worker thread) ----------------------------------------- */

/* map[i]: the source offset (in the h x w plane) of output pixel i, or -1.
 * Returns the map, or NULL when the transform is the identity. */
static const int64_t *sample_map(cnn_batcher *b, int64_t pos) {
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
      b->map[y * b->w + x] = in ? sy * b->w + sx : -1;
    }
  return b->map;
}

#define SRC(i) (map ? (map[i] < 0 ? 0 : src[map[i]]) : src[i])

static void plane_u8(const uint8_t *src, float *dst, const int64_t *map, int64_t n, double a, double b) {
  float fa = (float)a, fb = (float)b;
  for (int64_t i = 0; i < n; i++) dst[i] = (float)SRC(i) * fa + fb;
}

static void plane_f32(const float *src, float *dst, const int64_t *map, int64_t n, double a, double b) {
  float fa = (float)a, fb = (float)b;
  for (int64_t i = 0; i < n; i++) dst[i] = SRC(i) * fa + fb;
}

static void plane_f64(const double *src, double *dst, const int64_t *map, int64_t n, double a, double b) {
  for (int64_t i = 0; i < n; i++) dst[i] = SRC(i) * a + b;
}

static void plane_i64(const int64_t *src, int64_t *dst, const int64_t *map, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = SRC(i);
}

#undef SRC

static void fill_sample(cnn_batcher *b, int64_t pos, int64_t j, cnn_tensor *x) {
  int64_t idx = b->order[pos], n = b->h * b->w, per = b->planes * n;
  const int64_t *map = sample_map(b, pos);
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

static void fill_label(cnn_batcher *b, int64_t pos, int64_t j, cnn_tensor *y) {
  size_t sz = cnn_dtype_size(b->labels->dtype), row = (size_t)b->lab_elems * sz;
  const char *src = (const char *)cnn_tensor_data(b->labels) + (size_t)b->order[pos] * row;
  char *dst = (char *)cnn_tensor_data(y) + (size_t)j * row;
  memcpy(dst, src, row);
  if (b->labels->dtype == CNN_INT64 && b->label_offset)
    for (int64_t e = 0; e < b->lab_elems; e++) ((int64_t *)dst)[e] += b->label_offset;
}

static void fill_batch(cnn_batcher *b, int64_t k, cnn_tensor *x, cnn_tensor *y) {
  int64_t first = k * b->batch_size, count = x->shape[0];
  for (int64_t j = 0; j < count && !atomic_load(&b->stop); j++) {
    fill_sample(b, first + j, j, x);
    if (y) fill_label(b, first + j, j, y);
  }
}

static void *worker(void *arg) {
  cnn_batcher *b = arg;
  pthread_mutex_lock(&b->mu);
  for (;;) {
    while (!atomic_load(&b->stop) && b->slot != SLOT_PENDING) pthread_cond_wait(&b->cv, &b->mu);
    if (atomic_load(&b->stop)) break;
    int64_t k = b->submitted;
    cnn_tensor *x = b->slot_x, *y = b->slot_y;
    pthread_mutex_unlock(&b->mu);
    fill_batch(b, k, x, y);
    pthread_mutex_lock(&b->mu);
    b->slot = SLOT_DONE;
    pthread_cond_broadcast(&b->cv);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

/* ---- the caller's side ------------------------------------------------------------ */

static int64_t batch_count(const cnn_batcher *b, int64_t k) {
  int64_t left = b->norder - k * b->batch_size;
  return left < b->batch_size ? left : b->batch_size;
}

static cnn_tensor *new_output(const cnn_batcher *b, int ndim, const int64_t *shape, cnn_dtype dt) {
  return b->pinned ? cnn_empty_pinned(ndim, shape, dt) : cnn_empty(ndim, shape, dt, CNN_DEVICE_CPU);
}

/* allocate batch k's tensors here, on the caller's thread, and queue it */
static int submit(cnn_batcher *b, int64_t k) {
  int64_t n = batch_count(b, k), shape[CNN_MAX_DIMS];
  memcpy(shape, b->images->shape, sizeof shape);
  shape[0] = n;
  cnn_tensor *x = new_output(b, b->images->ndim, shape, b->out_dtype), *y = NULL;
  if (x && b->labels) {
    memcpy(shape, b->labels->shape, sizeof shape);
    shape[0] = n;
    y = new_output(b, b->labels->ndim, shape, b->labels->dtype);
  }
  if (!x || (b->labels && !y)) {
    if (x) cnn_tensor_release(x);
    return -1;
  }
  pthread_mutex_lock(&b->mu);
  b->slot_x = x, b->slot_y = y, b->submitted = k, b->slot = SLOT_PENDING;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
  return 0;
}

int cnn_batcher_next(cnn_batcher *b, cnn_tensor **x, cnn_tensor **y) {
  if (!b || !x) {
    cnn_set_error("batcher: no batcher or no output");
    return -1;
  }
  if (b->next >= b->nbatches) return 0;
  if (b->submitted != b->next && submit(b, b->next) < 0) return -1;
  pthread_mutex_lock(&b->mu);
  while (b->slot != SLOT_DONE) pthread_cond_wait(&b->cv, &b->mu);
  *x = b->slot_x;
  if (y) *y = b->slot_y;
  else if (b->slot_y) cnn_tensor_release(b->slot_y);
  b->slot_x = b->slot_y = NULL, b->slot = SLOT_IDLE, b->submitted = -1;
  pthread_mutex_unlock(&b->mu);
  b->next++;
  /* prefetch; if this allocation fails, the next call retries and reports it */
  if (b->next < b->nbatches) (void)submit(b, b->next);
  return 1;
}

int64_t cnn_batcher_len(const cnn_batcher *b) { return b ? b->nbatches : 0; }

int cnn_batcher_set_pin_memory(cnn_batcher *b, bool on) {
  if (!b) return cnn_set_error("batcher: no batcher"), -1;
  const char *why = on ? cnn_cuda_unavailable_reason() : NULL;
  if (why) return cnn_set_error("pin_memory: cuda is not available: %s", why), -1;
  if (b->next > 0 || b->submitted >= 0) {
    cnn_set_error("batcher: pin_memory must be set before the first batch");
    return -1;
  }
  b->pinned = on;
  return 0;
}

void cnn_batcher_free(cnn_batcher *b) {
  if (!b) return;
  if (b->started) {
    pthread_mutex_lock(&b->mu);
    atomic_store(&b->stop, true);
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thread, NULL);
  }
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->cv);
  if (b->slot_x) cnn_tensor_release(b->slot_x);
  if (b->slot_y) cnn_tensor_release(b->slot_y);
  if (b->images) cnn_tensor_release(b->images);
  if (b->labels) cnn_tensor_release(b->labels);
  free(b->order);
  free(b->map);
  free(b);
}

/* ---- construction: validate, then build ----------------------------------------------- */

static int check_data(const cnn_tensor *images, const cnn_tensor *labels) {
  char s1[CNN_SHAPE_STR], s2[CNN_SHAPE_STR], dev[32];
  if (!images || images->ndim < 1) {
    cnn_set_error("batcher: images must be a tensor of at least 1 dimension (N x ...)");
    return -1;
  }
  cnn_dtype dt = images->dtype;
  if (dt != CNN_UINT8 && dt != CNN_FLOAT32 && dt != CNN_FLOAT64 && dt != CNN_INT64) {
    cnn_set_error("batcher: images are %s; expected uint8, float32, float64 or int64", cnn_dtype_name(dt));
    return -1;
  }
  for (int i = 0; i < 2; i++) {
    const cnn_tensor *t = i ? labels : images;
    if (t && cnn_tensor_device(t).type != CNN_CPU) {
      cnn_set_error("batcher: %s are on %s; the data loader reads from the cpu", i ? "labels" : "images",
                    cnn_device_str(cnn_tensor_device(t), dev));
      return -1;
    }
  }
  if (labels && (labels->ndim < 1 || labels->shape[0] != images->shape[0])) {
    cnn_set_error("batcher: images %s and labels %s have different numbers of samples",
                  cnn_tensor_shape_str(images, s1), cnn_tensor_shape_str(labels, s2));
    return -1;
  }
  return 0;
}

static int check_order(const int64_t *order, int64_t norder, int64_t batch_size, int64_t n) {
  if (batch_size < 1 || norder < 0) {
    cnn_set_error("batcher: batch size %lld and sample count %lld must be positive",
                  (long long)batch_size, (long long)norder);
    return -1;
  }
  for (int64_t i = 0; i < norder; i++) {
    int64_t v = order ? order[i] : i;
    if (v < 0 || v >= n) {
      cnn_set_error("batcher: sample index %lld at position %lld is out of range (the data has %lld samples)",
                    (long long)v, (long long)i + 1, (long long)n);
      return -1;
    }
  }
  return 0;
}

static void set_geometry(cnn_batcher *b, const cnn_tensor *img) {
  int sd = img->ndim - 1;
  b->h = sd >= 2 ? img->shape[img->ndim - 2] : 1;
  b->w = sd >= 1 ? img->shape[img->ndim - 1] : 1;
  b->planes = 1;
  for (int d = 1; d < img->ndim - 2; d++) b->planes *= img->shape[d];
}

static int check_normalize(const cnn_batcher *b, const cnn_transform *tf, cnn_dtype dt) {
  if (dt == CNN_INT64 && (tf->normalize || (tf->scale != 0 && tf->scale != 1))) {
    cnn_set_error("batcher: int64 images cannot be scaled or normalised; convert them to float first");
    return -1;
  }
  if (!isfinite(tf->scale)) {
    cnn_set_error("batcher: scale %g is not finite", tf->scale);
    return -1;
  }
  if (!tf->normalize) return 0;
  if (tf->nchan < 1 || tf->nchan > 4 || (tf->nchan != 1 && tf->nchan != b->planes)) {
    cnn_set_error("batcher: normalize has %d channel(s) but the images have %lld", tf->nchan,
                  (long long)b->planes);
    return -1;
  }
  for (int c = 0; c < tf->nchan; c++)
    if (!isfinite(tf->mean[c]) || !isfinite(tf->std[c]) || tf->std[c] == 0) {
      cnn_set_error("batcher: normalize channel %d has mean %g and std %g (need finite, std != 0)",
                    c + 1, tf->mean[c], tf->std[c]);
      return -1;
    }
  return 0;
}

static int check_transform(const cnn_batcher *b, const cnn_transform *tf, const cnn_tensor *img) {
  char s[CNN_SHAPE_STR];
  if ((tf->crop_pad || tf->hflip) && img->ndim < 3) {
    cnn_set_error("batcher: random crop and flip need images N x [C x] H x W, got %s",
                  cnn_tensor_shape_str(img, s));
    return -1;
  }
  if (tf->crop_pad < 0 || tf->crop_pad > (1 << 20)) {
    cnn_set_error("batcher: crop padding %d is out of range (0..%d)", tf->crop_pad, 1 << 20);
    return -1;
  }
  return check_normalize(b, tf, img->dtype);
}

static void set_coefficients(cnn_batcher *b) {
  double s = b->images->dtype == CNN_UINT8 && b->tf.scale != 0 ? b->tf.scale : 1;
  for (int c = 0; c < 4; c++) {
    bool norm = b->tf.normalize && c < b->tf.nchan;
    b->a[c] = norm ? s / b->tf.std[c] : s;
    b->b[c] = norm ? -b->tf.mean[c] / b->tf.std[c] : 0;
  }
}

static int copy_inputs(cnn_batcher *b, cnn_tensor *images, cnn_tensor *labels, const int64_t *order) {
  b->order = malloc((b->norder > 0 ? (size_t)b->norder : 1) * sizeof *b->order);
  b->map = (b->tf.crop_pad || b->tf.hflip) ? malloc((size_t)(b->h * b->w + 1) * sizeof *b->map) : NULL;
  if (!b->order || ((b->tf.crop_pad || b->tf.hflip) && !b->map)) {
    cnn_set_error("batcher: out of memory");
    return -1;
  }
  for (int64_t i = 0; i < b->norder; i++) b->order[i] = order ? order[i] : i;
  if (!(b->images = cnn_contiguous(images))) return -1;
  if (labels && !(b->labels = cnn_contiguous(labels))) return -1;
  b->lab_elems = 1;
  for (int d = 1; labels && d < labels->ndim; d++) b->lab_elems *= labels->shape[d];
  return 0;
}

static int start(cnn_batcher *b) {
  if (pthread_create(&b->thread, NULL, worker, b) != 0) {
    cnn_set_error("batcher: cannot start the loader thread");
    return -1;
  }
  b->started = true;
  return 0; /* batch 0 is submitted by the first cnn_batcher_next */
}

cnn_batcher *cnn_batcher_new(cnn_tensor *images, cnn_tensor *labels, const int64_t *order,
                             int64_t norder, int64_t batch_size, bool drop_last,
                             const cnn_transform *tf, int64_t label_offset, uint64_t seed) {
  static const cnn_transform identity = {0};
  if (check_data(images, labels) < 0 || check_order(order, norder, batch_size, images->shape[0]) < 0)
    return NULL;
  cnn_batcher *b = calloc(1, sizeof *b);
  if (!b) {
    cnn_set_error("batcher: out of memory");
    return NULL;
  }
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  atomic_init(&b->stop, false);
  b->tf = tf ? *tf : identity;
  b->norder = norder, b->batch_size = batch_size, b->label_offset = label_offset, b->seed = seed;
  b->nbatches = norder / batch_size + (!drop_last && norder % batch_size != 0);
  b->submitted = -1, b->slot = SLOT_IDLE;
  b->out_dtype = images->dtype == CNN_UINT8 ? CNN_FLOAT32 : images->dtype;
  set_geometry(b, images);
  if (check_transform(b, &b->tf, images) < 0 || copy_inputs(b, images, labels, order) < 0) {
    cnn_batcher_free(b);
    return NULL;
  }
  set_coefficients(b); /* before the worker starts: it reads them unlocked */
  if (start(b) < 0) {
    cnn_batcher_free(b);
    return NULL;
  }
  return b;
}
