/*
 * io_internal.h -- helpers shared by the files of core/io (not public).
 *
 * Reading: cnn_io_read_file() slurps a whole file into a malloc'd buffer,
 * through zlib's gzread, which reads gzipped and plain files alike.
 *
 * Writing: an atomic writer (atomic_write.c).  cnn_io_atomic_open()
 * creates a temporary next to the target, unnamed where the file system
 * allows (O_TMPFILE), else "<path>.tmp.<pid>.XXXXXX" (so concurrent writers
 * never share one), after removing the target's stale temporaries;
 * cnn_io_atomic_write() appends; commit flushes, fsyncs, names the
 * temporary if it has no name, renames it over the target and fsyncs the
 * folder; abort (and any failed commit) removes the temporary.  Invariant:
 * between open and commit/abort the target is never touched; after either,
 * no temporary remains; a process killed mid-save leaves none behind
 * (unnamed), or one that the next save of the same target removes.
 */
#ifndef CNN_IO_INTERNAL_H
#define CNN_IO_INTERNAL_H

#include "io.h"

#include <stdio.h>

/* Largest file the readers accept (uncompressed), a guard against gzip bombs. */
#define CNN_IO_MAX_FILE ((size_t)8 << 30)

/* op: "idx", ... for messages.  0 with *buf malloc'd (caller frees), -1. */
int cnn_io_read_file(const char *op, const char *path, uint8_t **buf, size_t *len);
/* The same for a plain (never gunzipped) file, in one allocation of its size. */
int cnn_io_read_raw(const char *op, const char *path, uint8_t **buf, size_t *len);

typedef struct {
  const char *op;   /* "save", "png" (messages) */
  const char *path; /* the target (borrowed) */
  char *tmp;        /* the temporary's path (owned), NULL while unnamed */
  int fd;           /* open on the temporary, or -1 */
} cnn_io_atomic;

int cnn_io_atomic_open(cnn_io_atomic *a, const char *op, const char *path);
int cnn_io_atomic_write(cnn_io_atomic *a, const void *data, size_t n);
int cnn_io_atomic_commit(cnn_io_atomic *a); /* closes; on failure aborts */
void cnn_io_atomic_abort(cnn_io_atomic *a); /* idempotent */

/* Is a tensor of this shape representable?  The product of the sizes, with
 * zeros counted as ones (so 0 x 2^40 x 2^40 is refused too), must stay
 * under 2^59, the bound cnn_empty() enforces. */
static inline bool cnn_io_shape_ok(int ndim, const int64_t *shape) {
  uint64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return false;
    if (__builtin_mul_overflow(n, shape[i] ? (uint64_t)shape[i] : 1, &n)) return false;
  }
  return n <= (uint64_t)INT64_MAX / 16;
}

static inline uint32_t cnn_io_be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t cnn_io_le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

#endif /* CNN_IO_INTERNAL_H */
