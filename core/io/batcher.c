/*
 * batcher.c -- batch assembly for data.DataLoader on a pool of worker
 * threads: the ring of batch slots, the workers' loop, the caller's side
 * (submit, take, skip bad samples) and construction.  One sample is
 * filled by batch_fill.c; the design and the invariants of the ring are in
 * batcher_internal.h.
 *
 * The caller's thread allocates every output tensor (the allocator's hooks
 * may call into Lua, which is not thread-safe) and hands the empty tensors
 * to the pool, which only writes into them.  The pool starts at the first
 * cnn_batcher_next, so that pin_memory, the worker count, the pipeline
 * and skip_bad can be set in between.  num_workers = 0 fills each batch
 * on the caller's thread inside cnn_batcher_next (no thread at all).
 *
 * A sample that fails (a corrupt file, a wrong size) marks itself bad in
 * its slot and records the first message.  When the caller takes the
 * batch: without skip_bad the batch is dropped and the message returned
 * as the error; with skip_bad the good samples are packed into a smaller
 * batch (a batch with none left is skipped) and the failures are counted
 * (cnn_batcher_skipped).
 *
 * cnn_batcher_free() sets `stop` (also polled by workers between
 * samples), wakes and joins every worker, then releases the slots.
 */
#include "batcher_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the workers ------------------------------------------------------------ */

/* Record the outcome of sample j of slot sl (under mu). */
static void finish_sample(cnn_batcher *b, batch_slot *sl, int64_t j, bool failed) {
  if (failed) {
    sl->bad[j] = 1;
    if (!sl->err[0]) snprintf(sl->err, sizeof sl->err, "%s", cnn_error());
  }
  if (--sl->remaining == 0) pthread_cond_broadcast(&b->done_cv);
}

typedef struct {
  cnn_batcher *b;
  int id;
} worker_arg;

static void *worker(void *arg) {
  cnn_batcher *b = ((worker_arg *)arg)->b;
  worker_scratch *ws = &b->scratch[((worker_arg *)arg)->id];
  free(arg);
  pthread_mutex_lock(&b->mu);
  for (;;) {
    while (!atomic_load(&b->stop) && b->claim >= b->avail) pthread_cond_wait(&b->work_cv, &b->mu);
    if (atomic_load(&b->stop)) break;
    int64_t pos = b->claim++, k = pos / b->batch_size, j = pos - k * b->batch_size;
    batch_slot *sl = &b->slots[k % b->nslots];
    cnn_tensor *x = sl->x, *y = sl->y;
    pthread_mutex_unlock(&b->mu);
    bool failed = cnn_batcher_fill(b, ws, pos, j, x, y) < 0;
    pthread_mutex_lock(&b->mu);
    finish_sample(b, sl, j, failed);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

static int start_pool(cnn_batcher *b) {
  int n = b->nworkers;
  b->threads = calloc((size_t)(n ? n : 1), sizeof *b->threads);
  if (!b->threads) return cnn_set_error("batcher: out of memory"), -1;
  for (int i = 0; i < n; i++) {
    worker_arg *a = malloc(sizeof *a);
    if (!a) return cnn_set_error("batcher: out of memory"), -1;
    a->b = b, a->id = i;
    if (pthread_create(&b->threads[i], NULL, worker, a) != 0) {
      free(a);
      return cnn_set_error("batcher: cannot start loader thread %d of %d", i + 1, n), -1;
    }
    b->nstarted++;
  }
  return 0;
}

/* scratch and slots, sized now that the worker count is known */
static int configure(cnn_batcher *b) {
  int nscratch = b->nworkers ? b->nworkers : 1;
  b->scratch = calloc((size_t)nscratch, sizeof *b->scratch);
  b->slots = calloc((size_t)b->nslots, sizeof *b->slots);
  if (!b->scratch || !b->slots) return cnn_set_error("batcher: out of memory"), -1;
  for (int i = 0; i < nscratch; i++)
    if (!b->use_pipe && (b->tf.crop_pad || b->tf.hflip) &&
        !(b->scratch[i].map = malloc((size_t)(b->h * b->w + 1) * sizeof *b->scratch[i].map)))
      return cnn_set_error("batcher: out of memory"), -1;
  for (int i = 0; i < b->nslots; i++) {
    b->slots[i].k = -1;
    if (!(b->slots[i].bad = calloc((size_t)b->batch_size, 1)))
      return cnn_set_error("batcher: out of memory"), -1;
  }
  b->configured = true;
  return start_pool(b);
}

/* ---- the caller's side ------------------------------------------------------------ */

static int64_t batch_count(const cnn_batcher *b, int64_t k) {
  int64_t left = b->norder - k * b->batch_size;
  return left < b->batch_size ? left : b->batch_size;
}

static cnn_tensor *new_output(const cnn_batcher *b, int ndim, const int64_t *shape, cnn_dtype dt) {
  return b->pinned ? cnn_empty_pinned(ndim, shape, dt) : cnn_empty(ndim, shape, dt, CNN_DEVICE_CPU);
}

/* x and y for a batch of n samples (y NULL without labels); -1 on failure */
static int new_batch(const cnn_batcher *b, int64_t n, cnn_tensor **x, cnn_tensor **y) {
  int64_t shape[CNN_MAX_DIMS];
  int ndim = 4;
  if (b->use_pipe) {
    shape[0] = n, shape[1] = b->out_shape[0], shape[2] = b->out_shape[1],
    shape[3] = b->out_shape[2];
  } else {
    memcpy(shape, b->images->shape, sizeof shape);
    ndim = b->images->ndim, shape[0] = n;
  }
  *x = new_output(b, ndim, shape, b->out_dtype), *y = NULL;
  if (*x && b->labels) {
    memcpy(shape, b->labels->shape, sizeof shape);
    shape[0] = n;
    *y = new_output(b, b->labels->ndim, shape, b->labels->dtype);
  }
  if (!*x || (b->labels && !*y)) {
    if (*x) cnn_tensor_release(*x);
    *x = NULL;
    return -1;
  }
  return 0;
}

/* fill batch k's slot on this thread (num_workers = 0) */
static void fill_here(cnn_batcher *b, batch_slot *sl) {
  for (int64_t j = 0; j < sl->count; j++) {
    bool failed =
        cnn_batcher_fill(b, &b->scratch[0], sl->k * b->batch_size + j, j, sl->x, sl->y) < 0;
    finish_sample(b, sl, j, failed);
  }
}

/* allocate the next batch's tensors here and hand it to the pool */
static int submit(cnn_batcher *b) {
  int64_t k = b->submitted, n = batch_count(b, k);
  cnn_tensor *x, *y;
  if (new_batch(b, n, &x, &y) < 0) return -1;
  batch_slot *sl = &b->slots[k % b->nslots];
  pthread_mutex_lock(&b->mu);
  sl->k = k, sl->x = x, sl->y = y, sl->count = n, sl->remaining = n, sl->err[0] = 0;
  memset(sl->bad, 0, (size_t)b->batch_size);
  b->submitted++;
  b->avail = k * b->batch_size + n;
  pthread_cond_broadcast(&b->work_cv);
  pthread_mutex_unlock(&b->mu);
  if (b->nworkers == 0) fill_here(b, sl);
  return 0;
}

/* keep the ring full: batches next .. next+nslots-1 submitted */
static int refill(cnn_batcher *b) {
  while (b->submitted < b->nbatches && b->submitted < b->next + b->nslots)
    if (submit(b) < 0) return -1;
  return 0;
}

static void release_slot(batch_slot *sl) {
  if (sl->x) cnn_tensor_release(sl->x);
  if (sl->y) cnn_tensor_release(sl->y);
  sl->x = sl->y = NULL, sl->k = -1;
}

/* copy row `from` of t into row `to` (to < from) */
static void move_row(cnn_tensor *t, int64_t from, int64_t to) {
  size_t row = (size_t)(cnn_tensor_numel(t) / t->shape[0]) * cnn_dtype_size(t->dtype);
  char *d = cnn_tensor_data(t);
  memmove(d + (size_t)to * row, d + (size_t)from * row, row);
}

/* pack the good samples of sl to the front; returns how many are good */
static int64_t pack_good(cnn_batcher *b, batch_slot *sl) {
  int64_t good = 0;
  for (int64_t j = 0; j < sl->count; j++) {
    if (sl->bad[j]) {
      if (b->skipped++ == 0) snprintf(b->first_bad, sizeof b->first_bad, "%s", sl->err);
      continue;
    }
    if (good != j) {
      move_row(sl->x, j, good);
      if (sl->y) move_row(sl->y, j, good);
    }
    good++;
  }
  return good;
}

/* hand out slot sl's batch: 1 (outputs set), 0 (every sample skipped), -1 */
static int take(cnn_batcher *b, batch_slot *sl, cnn_tensor **x, cnn_tensor **y) {
  int64_t nbad = 0;
  for (int64_t j = 0; j < sl->count; j++) nbad += sl->bad[j];
  if (nbad && !b->skip_bad) {
    cnn_set_error("%s", sl->err);
    release_slot(sl);
    return -1;
  }
  int64_t good = nbad ? pack_good(b, sl) : sl->count;
  cnn_tensor *tx = sl->x, *ty = sl->y;
  if (good < sl->count) {
    bool had_y = sl->y != NULL;
    tx = good ? cnn_narrow(sl->x, 0, 0, good) : NULL;
    ty = good && had_y ? cnn_narrow(sl->y, 0, 0, good) : NULL;
    release_slot(sl);
    if (!good) return 0;
    if (!tx || (had_y && !ty)) {
      if (tx) cnn_tensor_release(tx);
      if (ty) cnn_tensor_release(ty);
      return -1;
    }
  }
  sl->x = sl->y = NULL, sl->k = -1;
  *x = tx;
  if (y)
    *y = ty;
  else if (ty)
    cnn_tensor_release(ty);
  return 1;
}

static int next_batch(cnn_batcher *b, cnn_tensor **x, cnn_tensor **y) {
  if (refill(b) < 0) return -1;
  batch_slot *sl = &b->slots[b->next % b->nslots];
  pthread_mutex_lock(&b->mu);
  while (sl->remaining > 0) pthread_cond_wait(&b->done_cv, &b->mu);
  pthread_mutex_unlock(&b->mu);
  b->next++;
  int rc = take(b, sl, x, y);
  /* prefetch; if this allocation fails, the next call retries and reports it */
  if (rc >= 0) (void)refill(b);
  return rc;
}

int cnn_batcher_next(cnn_batcher *b, cnn_tensor **x, cnn_tensor **y) {
  if (!b || !x) {
    cnn_set_error("batcher: no batcher or no output");
    return -1;
  }
  if (!b->configured && configure(b) < 0) return -1;
  while (b->next < b->nbatches) {
    int rc = next_batch(b, x, y);
    if (rc != 0) return rc; /* 0: a batch of bad samples only, skipped */
  }
  return 0;
}

int64_t cnn_batcher_len(const cnn_batcher *b) { return b ? b->nbatches : 0; }

int64_t cnn_batcher_skipped(const cnn_batcher *b, const char **first) {
  if (first) *first = b && b->skipped ? b->first_bad : NULL;
  return b ? b->skipped : 0;
}

static int check_unstarted(cnn_batcher *b, const char *what) {
  if (!b) return cnn_set_error("batcher: no batcher"), -1;
  if (b->configured)
    return cnn_set_error("batcher: %s must be set before the first batch", what), -1;
  return 0;
}

int cnn_batcher_set_pin_memory(cnn_batcher *b, bool on) {
  if (!b) return cnn_set_error("batcher: no batcher"), -1;
  const char *why = on ? cnn_cuda_unavailable_reason() : NULL;
  if (why) return cnn_set_error("pin_memory: cuda is not available: %s", why), -1;
  if (check_unstarted(b, "pin_memory") < 0) return -1;
  b->pinned = on;
  return 0;
}

int cnn_batcher_set_workers(cnn_batcher *b, int nworkers, int prefetch) {
  if (check_unstarted(b, "num_workers") < 0) return -1;
  if (nworkers < 0 || nworkers > 256)
    return cnn_set_error("batcher: num_workers = %d is out of range (0..256)", nworkers), -1;
  if (prefetch < 1 || prefetch > 64)
    return cnn_set_error("batcher: prefetch_factor = %d is out of range (1..64)", prefetch), -1;
  b->nworkers = nworkers;
  b->nslots = nworkers ? prefetch * nworkers : 1;
  return 0;
}

int cnn_batcher_set_skip_bad(cnn_batcher *b, bool on) {
  if (check_unstarted(b, "skip_bad") < 0) return -1;
  b->skip_bad = on;
  return 0;
}

int cnn_batcher_default_workers(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

void cnn_batcher_free(cnn_batcher *b) {
  if (!b) return;
  pthread_mutex_lock(&b->mu);
  atomic_store(&b->stop, true);
  pthread_cond_broadcast(&b->work_cv);
  pthread_mutex_unlock(&b->mu);
  for (int i = 0; i < b->nstarted; i++) pthread_join(b->threads[i], NULL);
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->work_cv);
  pthread_cond_destroy(&b->done_cv);
  for (int i = 0; b->slots && i < b->nslots; i++) release_slot(&b->slots[i]), free(b->slots[i].bad);
  for (int i = 0; b->scratch && i < (b->nworkers ? b->nworkers : 1); i++) {
    free(b->scratch[i].map);
    cnn_pipeline_scratch_free(&b->scratch[i].s);
  }
  for (int64_t i = 0; i < b->npaths; i++) free(b->paths[i]);
  if (b->images) cnn_tensor_release(b->images);
  if (b->labels) cnn_tensor_release(b->labels);
  free(b->paths), free(b->slots), free(b->scratch), free(b->threads), free(b->order);
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
    cnn_set_error("batcher: images are %s; expected uint8, float32, float64 or int64",
                  cnn_dtype_name(dt));
    return -1;
  }
  for (int i = 0; i < 2; i++) {
    const cnn_tensor *t = i ? labels : images;
    if (t && cnn_tensor_device(t).type != CNN_CPU) {
      cnn_set_error("batcher: %s are on %s; the data loader reads from the cpu",
                    i ? "labels" : "images", cnn_device_str(cnn_tensor_device(t), dev));
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
      cnn_set_error(
          "batcher: sample index %lld at position %lld is out of range (the data has %lld samples)",
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
    cnn_set_error(
        "batcher: int64 images cannot be scaled or normalised; convert them to float first");
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

static int copy_order(cnn_batcher *b, const int64_t *order) {
  b->order = malloc((b->norder > 0 ? (size_t)b->norder : 1) * sizeof *b->order);
  if (!b->order) return cnn_set_error("batcher: out of memory"), -1;
  for (int64_t i = 0; i < b->norder; i++) b->order[i] = order ? order[i] : i;
  return 0;
}

static int copy_inputs(cnn_batcher *b, cnn_tensor *images, cnn_tensor *labels,
                       const int64_t *order) {
  if (copy_order(b, order) < 0) return -1;
  if (images && !(b->images = cnn_contiguous(images))) return -1;
  if (labels && !(b->labels = cnn_contiguous(labels))) return -1;
  b->lab_elems = 1;
  for (int d = 1; labels && d < labels->ndim; d++) b->lab_elems *= labels->shape[d];
  return 0;
}

/* the common part of both constructors: NULL only when out of memory */
static cnn_batcher *new_batcher(int64_t norder, int64_t batch_size, bool drop_last,
                                int64_t label_offset, uint64_t seed) {
  cnn_batcher *b = calloc(1, sizeof *b);
  if (!b) {
    cnn_set_error("batcher: out of memory");
    return NULL;
  }
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->work_cv, NULL);
  pthread_cond_init(&b->done_cv, NULL);
  atomic_init(&b->stop, false);
  b->norder = norder, b->batch_size = batch_size, b->label_offset = label_offset, b->seed = seed;
  b->nbatches = norder / batch_size + (!drop_last && norder % batch_size != 0);
  b->nworkers = 1, b->nslots = 2; /* one loader thread, one batch ahead: cnn_batcher_set_workers */
  return b;
}

cnn_batcher *cnn_batcher_new(cnn_tensor *images, cnn_tensor *labels, const int64_t *order,
                             int64_t norder, int64_t batch_size, bool drop_last,
                             const cnn_transform *tf, int64_t label_offset, uint64_t seed) {
  static const cnn_transform identity = {0};
  if (check_data(images, labels) < 0 ||
      check_order(order, norder, batch_size, images->shape[0]) < 0)
    return NULL;
  cnn_batcher *b = new_batcher(norder, batch_size, drop_last, label_offset, seed);
  if (!b) return NULL;
  b->tf = tf ? *tf : identity;
  b->out_dtype = images->dtype == CNN_UINT8 ? CNN_FLOAT32 : images->dtype;
  set_geometry(b, images);
  if (check_transform(b, &b->tf, images) < 0 || copy_inputs(b, images, labels, order) < 0) {
    cnn_batcher_free(b);
    return NULL;
  }
  set_coefficients(b); /* before the workers start: they read them unlocked */
  return b;
}

static int check_pipeline(const cnn_pipeline *pipe, const int64_t out_shape[3]) {
  if (!pipe || !out_shape) return cnn_set_error("batcher: no pipeline or output shape"), -1;
  if (cnn_pipeline_check(pipe) < 0) return -1;
  if (!cnn_io_shape_ok(3, out_shape) || out_shape[0] < 1 || out_shape[1] < 1 || out_shape[2] < 1)
    return cnn_set_error("batcher: output shape %lldx%lldx%lld is out of range",
                         (long long)out_shape[0], (long long)out_shape[1], (long long)out_shape[2]),
           -1;
  return 0;
}

int cnn_batcher_set_pipeline(cnn_batcher *b, const cnn_pipeline *pipe, const int64_t out_shape[3]) {
  if (check_unstarted(b, "the pipeline") < 0 || check_pipeline(pipe, out_shape) < 0) return -1;
  if (!b->paths && b->images->dtype == CNN_INT64)
    return cnn_set_error(
               "batcher: int64 images cannot be transformed; convert them to float first"),
           -1;
  b->use_pipe = true, b->pipe = *pipe, b->out_dtype = CNN_FLOAT32;
  memcpy(b->out_shape, out_shape, sizeof b->out_shape);
  return 0;
}

static int copy_paths(cnn_batcher *b, const char *const *paths, int64_t npaths) {
  b->paths = calloc((size_t)(npaths > 0 ? npaths : 1), sizeof *b->paths);
  if (!b->paths) return cnn_set_error("batcher: out of memory"), -1;
  b->npaths = npaths;
  for (int64_t i = 0; i < npaths; i++) {
    if (!paths[i]) return cnn_set_error("batcher: file %lld has no name", (long long)i + 1), -1;
    if (!(b->paths[i] = strdup(paths[i]))) return cnn_set_error("batcher: out of memory"), -1;
  }
  return 0;
}

cnn_batcher *cnn_batcher_new_files(const char *const *paths, int64_t npaths, cnn_image_mode mode,
                                   cnn_tensor *labels, const int64_t *order, int64_t norder,
                                   int64_t batch_size, bool drop_last, const cnn_pipeline *pipe,
                                   const int64_t out_shape[3], int64_t label_offset,
                                   uint64_t seed) {
  char s[CNN_SHAPE_STR];
  if (!paths || npaths < 0) return cnn_set_error("batcher: no file list"), NULL;
  if (check_order(order, norder, batch_size, npaths) < 0 || check_pipeline(pipe, out_shape) < 0)
    return NULL;
  if (mode < CNN_IMAGE_UNCHANGED || mode > CNN_IMAGE_RGBA)
    return cnn_set_error("batcher: bad image mode"), NULL;
  if (labels && (labels->ndim < 1 || labels->shape[0] != npaths ||
                 cnn_tensor_device(labels).type != CNN_CPU)) {
    cnn_set_error("batcher: labels %s do not match %lld files on the cpu",
                  cnn_tensor_shape_str(labels, s), (long long)npaths);
    return NULL;
  }
  cnn_batcher *b = new_batcher(norder, batch_size, drop_last, label_offset, seed);
  if (!b) return NULL;
  b->mode = mode, b->use_pipe = true, b->pipe = *pipe, b->out_dtype = CNN_FLOAT32;
  memcpy(b->out_shape, out_shape, sizeof b->out_shape);
  if (copy_paths(b, paths, npaths) < 0 || copy_inputs(b, NULL, labels, order) < 0) {
    cnn_batcher_free(b);
    return NULL;
  }
  return b;
}
