/*
 * crash_save.c -- a checkpoint survives SIGKILL in the middle of a save.
 *
 * Two ~20 MB checkpoints A and B (a 5M-element float32 tensor with
 * different contents, a small int64 tensor, metadata "version" = "A"/"B").
 * A is saved first.  Then, KILLS times: fork a child that saves B, A, B,
 * ... to the same path as fast as it can; after a random delay (0 to 3
 * save times) SIGKILL it; the target must then load and be exactly A or B,
 * byte for byte.  Temporaries: at most one "<target>.tmp.*" file may be
 * left after a kill (none at all while the writer's temporary is unnamed,
 * O_TMPFILE, but for the instant between naming it and the rename), the
 * next save removes what a dead writer left, and after the last kill one
 * more save leaves the folder holding the target alone.  The child flags in
 * shared memory whether it is inside a save; the test counts the kills that
 * landed mid-save and requires at least one, so it cannot pass without
 * testing anything.  With CNNSH_SAVE_NAMED_TMP set (the second CTest
 * entry) every temporary is named from the start, and the cleanup by the
 * next save is what keeps the folder clean.
 *
 * Runs in $CNNSH_TEST_TMP or the working folder (the build tree: a real
 * disk, where fsync and rename matter), in a fresh mkdtemp folder.
 */
#include "check.h"
#include "cnn.h"
#include "io/io.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KILLS 30
#define BIG   ((int64_t)5 << 20) /* float32 elements: 20 MiB */

static char dir[512], target[600];

typedef struct {
  cnn_tensor *t[2];
  const char *version;
} checkpoint;

static checkpoint make_checkpoint(const char *version, float base) {
  checkpoint c = {.version = version};
  int64_t big = BIG, small = 3;
  c.t[0] = cnn_empty(1, &big, CNN_FLOAT32, CNN_DEVICE_CPU);
  c.t[1] = cnn_empty(1, &small, CNN_INT64, CNN_DEVICE_CPU);
  float *f = cnn_tensor_data(c.t[0]);
  for (int64_t i = 0; i < BIG; i++) f[i] = base + (float)(i % 1009);
  for (int i = 0; i < 3; i++) ((int64_t *)cnn_tensor_data(c.t[1]))[i] = (int64_t)base * 10 + i;
  return c;
}

static int save(const checkpoint *c) {
  const char *names[] = {"weight", "step"}, *keys[] = {"version"}, *vals[] = {c->version};
  return cnn_safetensors_save(target, 2, names, c->t, 1, keys, vals);
}

static bool equals(const cnn_tensor_file *f, const checkpoint *c) {
  if (f->ntensors != 2 || strcmp(cnn_tensor_file_meta(f, "version"), c->version) != 0) return false;
  for (int i = 0; i < 2; i++) {
    cnn_tensor *g = f->tensors[i].tensor;
    if (!cnn_same_shape(g, c->t[i]) || g->dtype != c->t[i]->dtype) return false;
    if (memcmp(cnn_tensor_data(g), cnn_tensor_data(c->t[i]),
               cnn_tensor_numel(g) * cnn_dtype_size(g->dtype)))
      return false;
  }
  return true;
}

/* counts the files in the folder other than the target */
static int count_others(void) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "ckpt.safetensors");
  if (d) closedir(d);
  return n;
}

/* removes everything in the folder (at the end) */
static void clean_folder(void) {
  DIR *d = opendir(dir);
  char p[1200];
  for (struct dirent *e; d && (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name), unlink(p);
  if (d) closedir(d);
}

static void child_loop(const checkpoint *a, const checkpoint *b, volatile int *in_save) {
  for (unsigned k = 0;; k++) {
    *in_save = 1;
    if (save(k % 2 ? a : b) != 0) _exit(3); /* starts with B */
    *in_save = 0;
  }
}

int main(void) {
  const char *base = getenv("CNNSH_TEST_TMP") ? getenv("CNNSH_TEST_TMP") : ".";
  snprintf(dir, sizeof dir, "%s/crash_save_XXXXXX", base);
  if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
  snprintf(target, sizeof target, "%s/ckpt.safetensors", dir);
  checkpoint a = make_checkpoint("A", 1.0f), b = make_checkpoint("B", 2.0f);
  double t0 = cnn_now_seconds();
  CHECK(save(&a) == 0);
  double per_save = cnn_now_seconds() - t0;
  srand((unsigned)time(NULL) ^ (unsigned)getpid());
  int got_a = 0, got_b = 0, mid_save = 0, left = 0;
  volatile int *in_save =
      mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(in_save != MAP_FAILED);
  for (int k = 0; k < KILLS; k++) {
    *in_save = 0;
    pid_t pid = fork();
    if (pid == 0) child_loop(&a, &b, in_save);
    CHECK(pid > 0);
    struct timespec ts = {0, 0};
    double delay = per_save * 3 * rand() / (double)RAND_MAX + 0.002;
    ts.tv_sec = (time_t)delay, ts.tv_nsec = (long)((delay - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL); /* not a failed save */
    cnn_tensor_file *f = cnn_safetensors_load(target);
    CHECK(f != NULL);
    if (!f) fprintf(stderr, "kill %d: %s\n", k + 1, cnn_error());
    bool is_a = f && equals(f, &a), is_b = f && equals(f, &b);
    CHECK(is_a || is_b);
    got_a += is_a, got_b += is_b;
    cnn_tensor_file_free(f);
    int others = count_others(); /* a dead writer's temporary, until the next save */
    CHECK(others <= 1);
    left += others;
    mid_save += *in_save;
  }
  CHECK(save(&a) == 0); /* removes what the last kill left */
  int after = count_others();
  printf("crash_save (%s temporaries): %d kills (one save: %.0f ms), %d mid-save: target was A %d "
         "times, "
         "B %d times; %d temporaries seen after kills, %d left after the next save\n",
         getenv("CNNSH_SAVE_NAMED_TMP") ? "named" : "unnamed when possible", KILLS, per_save * 1e3,
         mid_save, got_a, got_b, left, after);
  CHECK(mid_save > 0);
  CHECK(after == 0);
  munmap((void *)in_save, sizeof(int));
  clean_folder();
  rmdir(dir);
  for (int i = 0; i < 2; i++) cnn_tensor_release(a.t[i]), cnn_tensor_release(b.t[i]);
  return check_report("crash_save");
}
