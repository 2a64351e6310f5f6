/*
 * crash_save.c -- a checkpoint survives SIGKILL in the middle of a save.
 *
 * Two ~20 MB checkpoints A and B (a 5M-element float32 tensor with
 * different contents, a small int64 tensor, metadata "version" = "A"/"B").
 * A is saved first.  Then, KILLS times: fork a child that saves B, A, B,
 * ... to the same path as fast as it can; after a random delay (0 to 3
 * save times) SIGKILL it; the target must then load and be exactly A or B,
 * byte for byte, and at most one "<target>.tmp.*" file (the save that was
 * cut) may be left, which the test removes.  It also reports how many kills
 * landed mid-save (a temporary was present) and requires at least one, so
 * the test cannot pass without testing anything.
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
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KILLS 30
#define BIG ((int64_t)5 << 20) /* float32 elements: 20 MiB */

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
    if (memcmp(cnn_tensor_data(g), cnn_tensor_data(c->t[i]), cnn_tensor_numel(g) * cnn_dtype_size(g->dtype)))
      return false;
  }
  return true;
}

/* counts (and removes) leftover temporaries */
static int clean_temporaries(void) {
  DIR *d = opendir(dir);
  int n = 0;
  char p[1200];
  for (struct dirent *e; d && (e = readdir(d));)
    if (strstr(e->d_name, ".tmp.")) {
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      unlink(p), n++;
    }
  if (d) closedir(d);
  return n;
}

static void child_loop(const checkpoint *a, const checkpoint *b) {
  for (unsigned k = 0;; k++)
    if (save(k % 2 ? a : b) != 0) _exit(3); /* starts with B */
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
  int got_a = 0, got_b = 0, mid_save = 0;
  for (int k = 0; k < KILLS; k++) {
    pid_t pid = fork();
    if (pid == 0) child_loop(&a, &b);
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
    int tmps = clean_temporaries();
    CHECK(tmps <= 1);
    mid_save += tmps == 1;
  }
  printf("crash_save: %d kills (one save: %.0f ms): target was A %d times, B %d times; "
         "%d kills left a partial temporary\n", KILLS, per_save * 1e3, got_a, got_b, mid_save);
  CHECK(mid_save > 0);
  unlink(target);
  rmdir(dir);
  for (int i = 0; i < 2; i++) cnn_tensor_release(a.t[i]), cnn_tensor_release(b.t[i]);
  return check_report("crash_save");
}
