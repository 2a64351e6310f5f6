/*
 * batcher_internal.h -- the state of a cnn_batcher, shared by batcher.c
 * (the worker pool and the caller's side) and batch_fill.c (filling one
 * sample).  Not public.
 *
 * A batcher reads samples from one of two sources:
 *  - tensors: images[i] (N x ...), with the fixed transform `tf` (crop
 *    with padding, flip, scale, normalise: the original fast path), or,
 *    when `use_pipe`, with the general pipeline `pipe` on a C x H x W image;
 *  - files: paths[i], decoded (image.c) in `mode`, then `pipe`.
 * Pipeline samples must all come out out_shape (C x H x W); the caller
 * computes it from one sample.  Labels are a tensor either way.
 *
 * The ring: nslots batch slots; batch k lives in slots[k % nslots].  The
 * caller submits batches in order (allocating their tensors on its own
 * thread) and positions < avail belong to submitted batches; each worker
 * claims the next position (claim++), fills that sample without the lock,
 * then decrements its slot's `remaining` under the lock.  A batch is done
 * when remaining reaches 0.  So at most nslots batches (plus one image per
 * worker) are in memory, and a sample's content depends on its position
 * only, never on which worker filled it.
 */
#ifndef CNN_BATCHER_INTERNAL_H
#define CNN_BATCHER_INTERNAL_H

#include "io_internal.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct {
  int64_t k;         /* the batch held, or -1 */
  cnn_tensor *x, *y; /* its tensors (y NULL without labels) */
  int64_t count;     /* samples in it */
  int64_t remaining; /* samples not filled yet (under mu) */
  uint8_t *bad;      /* per sample: 1 when it failed (batch_size bytes) */
  char err[512];     /* the first failure's message (under mu) */
} batch_slot;

typedef struct {
  int64_t *map;           /* legacy transform: h*w source offsets (-1: padding) */
  cnn_pipeline_scratch s; /* pipeline buffers */
} worker_scratch;

struct cnn_batcher {
  /* source */
  cnn_tensor *images, *labels; /* contiguous CPU references (images NULL for files) */
  char **paths;                /* files: npaths owned strings */
  int64_t npaths;
  cnn_image_mode mode;
  /* epoch */
  int64_t *order, norder, batch_size, nbatches;
  cnn_transform tf;
  bool use_pipe;
  cnn_pipeline pipe;
  int64_t out_shape[3];
  int64_t label_offset;
  uint64_t seed;
  int64_t planes, h, w, lab_elems; /* tensor source: one sample is planes x h x w */
  cnn_dtype out_dtype;
  bool pinned, skip_bad;
  double a[4], b[4]; /* legacy: value = raw * a[c] + b[c] */
  /* pool */
  int nworkers, nstarted, nslots;
  pthread_t *threads;
  worker_scratch *scratch; /* one per worker (one for the caller when nworkers = 0) */
  pthread_mutex_t mu;
  pthread_cond_t work_cv, done_cv;
  batch_slot *slots;
  int64_t next, submitted, claim, avail;
  atomic_bool stop;
  bool configured; /* the pool exists: no more set_* calls */
  int64_t skipped;
  char first_bad[512];
};

/* batch_fill.c: fill sample j of x (and y) from position pos; 0, or -1
 * with this thread's cnn_error() set.  Never allocates tensors. */
int cnn_batcher_fill(cnn_batcher *b, worker_scratch *ws, int64_t pos, int64_t j, cnn_tensor *x,
                     cnn_tensor *y);
/* the number of elements of one output sample */
int64_t cnn_batcher_sample_numel(const cnn_batcher *b);

#endif /* CNN_BATCHER_INTERNAL_H */
