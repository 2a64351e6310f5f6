/*
 * atomic_write.c -- the atomic writer of core/io (contract in io_internal.h).
 *
 * The temporary lives in the target's folder (a rename across file systems
 * is not atomic), has the target's permissions when the target exists (0644
 * otherwise), and is fsynced before the rename; the folder is fsynced after
 * it, so the new name survives a power cut too.  EINTR and short writes are
 * retried.
 *
 * Leaving nothing behind.  Where the file system allows it (Linux's
 * O_TMPFILE: ext4, xfs, btrfs, tmpfs) the temporary has no name while it
 * is written: a process killed then leaves nothing, the kernel frees the
 * blocks.  Commit links it in as "<target>.tmp.<pid>.<n>" and renames that
 * over the target at once.  Elsewhere the temporary is created named,
 * "<target>.tmp.<pid>.XXXXXX" (mkstemp).  Either way a kill at the wrong
 * moment can leave a named temporary; so every open first removes the
 * target's temporaries whose writer process is gone (kill(pid, 0) says
 * ESRCH), and those of the older "<target>.tmp.XXXXXX" form.  A live
 * writer's temporary is never touched (processes on other machines sharing
 * the folder are not seen: their pid is looked up here).  The environment
 * variable CNNSH_SAVE_NAMED_TMP forces the named form (tests/crash runs
 * both).
 */
#define _GNU_SOURCE
#include "io_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The folder of path (malloc'd: "." for a bare name), or NULL. */
static char *folder_of(const char *path) {
  char *dir = strdup(path);
  if (!dir) return NULL;
  char *slash = strrchr(dir, '/');
  if (!slash) {
    free(dir);
    return strdup(".");
  }
  if (slash == dir)
    slash[1] = '\0';
  else
    *slash = '\0';
  return dir;
}

/* Is `rest` (what follows "<target>.tmp.") a temporary nobody writes any
 * more: "<pid>.<suffix>" with the pid gone, or the old 6-character form? */
static bool stale_suffix(const char *rest) {
  char *end;
  long pid = strtol(rest, &end, 10);
  if (end != rest && *end == '.' && end[1] && pid > 0)
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
  return strlen(rest) == 6 && !strchr(rest, '.');
}

/* Removes the stale temporaries of path (best effort). */
static void remove_stale(const char *path) {
  char *dir = folder_of(path);
  const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
  DIR *d = dir ? opendir(dir) : NULL;
  size_t nb = strlen(base);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (strncmp(e->d_name, base, nb) != 0 || strncmp(e->d_name + nb, ".tmp.", 5) != 0) continue;
    if (!stale_suffix(e->d_name + nb + 5)) continue;
    char *p = NULL;
    if (asprintf(&p, "%s/%s", dir, e->d_name) >= 0) unlink(p), free(p);
  }
  if (d) closedir(d);
  free(dir);
}

/* An unnamed temporary in path's folder (O_TMPFILE), or -1 where the file
 * system (or a missing /proc, needed to link it in) does not allow it. */
static int open_unnamed(const char *path, mode_t mode) {
#ifdef O_TMPFILE
  if (getenv("CNNSH_SAVE_NAMED_TMP") || access("/proc/self/fd", X_OK) != 0) return -1;
  char *dir = folder_of(path);
  int fd = dir ? open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, mode) : -1;
  free(dir);
  return fd;
#else
  (void)path, (void)mode;
  return -1;
#endif
}

static mode_t target_mode(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (st.st_mode & 07777) : 0644;
}

int cnn_io_atomic_open(cnn_io_atomic *a, const char *op, const char *path) {
  a->op = op, a->path = path, a->fd = -1, a->tmp = NULL;
  if (!path || !*path) {
    cnn_set_error("%s: empty file name", op);
    return -1;
  }
  remove_stale(path);
  mode_t mode = target_mode(path);
  a->fd = open_unnamed(path, mode);
  if (a->fd >= 0) return 0;
  if (asprintf(&a->tmp, "%s.tmp.%ld.XXXXXX", path, (long)getpid()) < 0) {
    a->tmp = NULL;
    cnn_set_error("%s: out of memory", op);
    return -1;
  }
  a->fd = mkostemp(a->tmp, O_CLOEXEC);
  if (a->fd < 0) {
    cnn_set_error("%s: cannot create %s: %s", op, a->tmp, strerror(errno));
    free(a->tmp), a->tmp = NULL;
    return -1;
  }
  if (fchmod(a->fd, mode) != 0) { /* not fatal: the file is still ours */
  }
  return 0;
}

int cnn_io_atomic_write(cnn_io_atomic *a, const void *data, size_t n) {
  const uint8_t *p = data;
  while (n > 0) {
    ssize_t w = write(a->fd, p, n > (1u << 30) ? (1u << 30) : n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      cnn_set_error("%s: cannot write %s: %s", a->op, a->path,
                    w < 0 ? strerror(errno) : "short write");
      cnn_io_atomic_abort(a);
      return -1;
    }
    p += w, n -= (size_t)w;
  }
  return 0;
}

static void fsync_folder(const char *path) {
  char *dir = folder_of(path);
  int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (fd >= 0) {
    fsync(fd); /* best effort: some file systems refuse it */
    close(fd);
  }
  free(dir);
}

/* Gives the unnamed temporary open on a->fd the name a->tmp: 0, or errno. */
static int link_unnamed(cnn_io_atomic *a) {
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", a->fd);
  for (unsigned n = 0; n < 100; n++) {
    free(a->tmp);
    if (asprintf(&a->tmp, "%s.tmp.%ld.%u", a->path, (long)getpid(), n) < 0)
      return a->tmp = NULL, ENOMEM;
    if (linkat(AT_FDCWD, proc, AT_FDCWD, a->tmp, AT_SYMLINK_FOLLOW) == 0) return 0;
    if (errno != EEXIST) {
      int err = errno;
      free(a->tmp), a->tmp = NULL;
      return err;
    }
  }
  free(a->tmp), a->tmp = NULL;
  return EEXIST;
}

int cnn_io_atomic_commit(cnn_io_atomic *a) {
  if (a->fd < 0) {
    cnn_set_error("%s: %s: nothing to commit", a->op, a->path);
    return -1;
  }
  const char *what = NULL;
  int err = 0;
  if (fsync(a->fd) != 0) what = "flush", err = errno;
  if (!what && !a->tmp && (err = link_unnamed(a)) != 0) what = "name the temporary for";
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
  if (a->fd >= 0) close(a->fd), a->fd = -1; /* an unnamed temporary vanishes here */
  if (a->tmp) unlink(a->tmp), free(a->tmp), a->tmp = NULL;
}
