/*
 * io_util.c -- whole-file reading for core/io (the atomic writer is
 * atomic_write.c).  See io_internal.h for the contract.
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
      cnn_set_error("%s: cannot read %s: %s", op, path, errnum == Z_ERRNO ? strerror(errno) : msg);
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
    cnn_set_error("%s: %s is %s, not a regular file", op, path,
                  S_ISDIR(st.st_mode) ? "a folder" : "a device or pipe");
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
    cnn_set_error("%s: %s is %s", op, path,
                  S_ISDIR(st.st_mode) ? "a folder, not a file"
                                      : "not a regular file of at most 8 GiB");
    return -1;
  }
  size_t n = (size_t)st.st_size, got = 0;
  uint8_t *b = malloc(n ? n : 1);
  if (!b) return cnn_set_error("%s: out of memory reading %s (%zu bytes)", op, path, n), -1;
  while (got < n) {
    ssize_t r = read(fd, b + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      cnn_set_error("%s: cannot read %s: %s", op, path,
                    r < 0 ? strerror(errno) : "the file shrank while reading");
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
    cnn_set_error("%s: cannot open %s: %s", op, path ? path : "(no file name)",
                  path ? strerror(errno) : "");
    return -1;
  }
  int rc = read_fd(op, path, fd, buf, len);
  close(fd);
  return rc;
}
