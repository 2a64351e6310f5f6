/*
 * io_util.c -- whole-file reading and the atomic writer of core/io.
 *
 * See io_internal.h for the contract.  The atomic writer's temporary lives
 * in the target's folder (a rename across file systems is not atomic), has
 * the target's permissions when the target exists (0644 otherwise), and is
 * fsynced before the rename; the folder is fsynced after it, so the new
 * name survives a power cut too.  EINTR and short writes are retried.
 */
#define _GNU_SOURCE
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---- reading ------------------------------------------------------------ */

static int grow(const char *op, const char *path, uint8_t **buf, size_t *cap) {
  size_t ncap = *cap ? *cap * 2 : (size_t)1 << 20;
  if (ncap > CNN_IO_MAX_FILE + 1) ncap = CNN_IO_MAX_FILE + 1;
  uint8_t *nb = realloc(*buf, ncap);
  if (!nb) {
    cnn_set_error("%s: out of memory reading %s (%zu bytes)", op, path, ncap);
    return -1;
  }
  *buf = nb, *cap = ncap;
  return 0;
}

static int read_all(const char *op, const char *path, gzFile gz, uint8_t **out, size_t *len) {
  uint8_t *buf = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n == cap && (n > CNN_IO_MAX_FILE || grow(op, path, &buf, &cap) < 0)) {
      if (n > CNN_IO_MAX_FILE)
        cnn_set_error("%s: %s is larger than %zu bytes", op, path, CNN_IO_MAX_FILE);
      free(buf);
      return -1;
    }
    size_t want = cap - n > (1u << 30) ? (1u << 30) : cap - n;
    int got = gzread(gz, buf + n, (unsigned)want);
    if (got < 0) {
      int errnum;
      const char *msg = gzerror(gz, &errnum);
      cnn_set_error("%s: cannot read %s: %s", op, path,
                    errnum == Z_ERRNO ? strerror(errno) : msg);
      free(buf);
      return -1;
    }
    if (got == 0) break;
    n += (size_t)got;
  }
  int errnum;
  const char *msg = gzerror(gz, &errnum);
  if (errnum != Z_OK) { /* Z_BUF_ERROR: a truncated gzip stream */
    cnn_set_error("%s: cannot read %s: %s", op, path, msg);
    free(buf);
    return -1;
  }
  *out = buf, *len = n;
  return 0;
}

int cnn_io_read_file(const char *op, const char *path, uint8_t **buf, size_t *len) {
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    cnn_set_error("%s: %s is %s, not a regular file", op, path, S_ISDIR(st.st_mode) ? "a folder" : "a device or pipe");
    return -1;
  }
  errno = 0;
  gzFile gz = gzopen(path, "rb");
  if (!gz) {
    cnn_set_error("%s: cannot open %s: %s", op, path, errno ? strerror(errno) : "out of memory");
    return -1;
  }
  gzbuffer(gz, 1 << 17);
  int rc = read_all(op, path, gz, buf, len);
  gzclose(gz);
  return rc;
}

/* A plain file of known size, read with one allocation of exactly its
 * size (the image loader reads many small files on worker threads). */
static int read_fd(const char *op, const char *path, int fd, uint8_t **buf, size_t *len) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > CNN_IO_MAX_FILE) {
    cnn_set_error("%s: %s is %s", op, path, S_ISDIR(st.st_mode) ? "a folder, not a file" : "not a regular file of at most 8 GiB");
    return -1;
  }
  size_t n = (size_t)st.st_size, got = 0;
  uint8_t *b = malloc(n ? n : 1);
  if (!b) return cnn_set_error("%s: out of memory reading %s (%zu bytes)", op, path, n), -1;
  while (got < n) {
    ssize_t r = read(fd, b + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      cnn_set_error("%s: cannot read %s: %s", op, path, r < 0 ? strerror(errno) : "the file shrank while reading");
      free(b);
      return -1;
    }
    got += (size_t)r;
  }
  *buf = b, *len = n;
  return 0;
}

int cnn_io_read_raw(const char *op, const char *path, uint8_t **buf, size_t *len) {
  int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
  if (fd < 0) {
    cnn_set_error("%s: cannot open %s: %s", op, path ? path : "(no file name)", path ? strerror(errno) : "");
    return -1;
  }
  int rc = read_fd(op, path, fd, buf, len);
  close(fd);
  return rc;
}

/* ---- the atomic writer ------------------------------------------------------ */

int cnn_io_atomic_open(cnn_io_atomic *a, const char *op, const char *path) {
  a->op = op, a->path = path, a->fd = -1, a->tmp = NULL;
  if (!path || !*path) {
    cnn_set_error("%s: empty file name", op);
    return -1;
  }
  if (asprintf(&a->tmp, "%s.tmp.XXXXXX", path) < 0) {
    a->tmp = NULL;
    cnn_set_error("%s: out of memory", op);
    return -1;
  }
  a->fd = mkstemp(a->tmp);
  if (a->fd < 0) {
    cnn_set_error("%s: cannot create %s: %s", op, a->tmp, strerror(errno));
    free(a->tmp), a->tmp = NULL;
    return -1;
  }
  struct stat st;
  mode_t mode = stat(path, &st) == 0 ? (st.st_mode & 07777) : 0644;
  if (fchmod(a->fd, mode) != 0) { /* not fatal: the file is still ours */ }
  return 0;
}

int cnn_io_atomic_write(cnn_io_atomic *a, const void *data, size_t n) {
  const uint8_t *p = data;
  while (n > 0) {
    ssize_t w = write(a->fd, p, n > (1u << 30) ? (1u << 30) : n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      cnn_set_error("%s: cannot write %s: %s", a->op, a->path, w < 0 ? strerror(errno) : "short write");
      cnn_io_atomic_abort(a);
      return -1;
    }
    p += w, n -= (size_t)w;
  }
  return 0;
}

static void fsync_folder(const char *path) {
  char *dir = strdup(path);
  if (!dir) return;
  char *slash = strrchr(dir, '/');
  const char *name = dir;
  if (!slash) name = ".";
  else if (slash == dir) slash[1] = '\0';
  else *slash = '\0';
  int fd = open(name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd); /* best effort: some file systems refuse it */
    close(fd);
  }
  free(dir);
}

int cnn_io_atomic_commit(cnn_io_atomic *a) {
  if (a->fd < 0) {
    cnn_set_error("%s: %s: nothing to commit", a->op, a->path);
    return -1;
  }
  const char *what = NULL;
  int err = 0;
  if (fsync(a->fd) != 0) what = "flush", err = errno;
  if (close(a->fd) != 0 && !what) what = "close", err = errno;
  a->fd = -1;
  if (!what && rename(a->tmp, a->path) != 0) what = "rename the temporary over", err = errno;
  if (what) {
    cnn_set_error("%s: cannot %s %s: %s", a->op, what, a->path, strerror(err));
    cnn_io_atomic_abort(a);
    return -1;
  }
  free(a->tmp), a->tmp = NULL;
  fsync_folder(a->path);
  return 0;
}

void cnn_io_atomic_abort(cnn_io_atomic *a) {
  if (a->fd >= 0) close(a->fd), a->fd = -1;
  if (a->tmp) unlink(a->tmp), free(a->tmp), a->tmp = NULL;
}
