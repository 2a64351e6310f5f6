/*
 * test_fake_cuda.c -- tests of the fake CUDA device itself (label unit,
 * run with CNNSH_CUDA_MODULE=libcnn_fake_cuda.so and a 64 MiB arena):
 *  - device memory is protected: core code (here, the test) that reads a
 *    device pointer itself dies of SIGSEGV (checked in a forked child);
 *  - a host pointer handed to a kernel, or a device ordinal other than 0,
 *    fails the op with a message instead of running;
 *  - out of memory is reported like the real backend ("out of memory"),
 *    and the first-fit allocator reuses a freed block;
 *  - float16/bfloat16 casts on the device round to nearest even: known bit
 *    patterns (1, 65504, 65520 -> inf, subnormals, ties);
 *  - gemm honours leading dimensions (a padded row-major A) against a
 *    naive loop here; events give a non-negative elapsed time;
 *  - injected failures (fake_cuda_fault.c) take the real module's recovery
 *    paths (gpu/recover.h): out of memory in alloc or in a library call
 *    releases the cache and retries exactly once, and core's collector
 *    hook runs only for "out of memory"; a sticky error is never retried
 *    and says to restart; a convolution skips candidates that report a
 *    misaligned pointer or no support, and runs on aligned copies when
 *    every candidate refused the alignment -- each result checked against
 *    the CPU; batch norm's backward entry receives the forward's eps;
 *  - a core API version other than the module's (one unary op fewer) is
 *    refused with a reason.
 * It exits 1 (not 77) when the module cannot be loaded: it must run.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"
#include "cnn.h"
#include "recover.h"

static const cnn_device GPU = {CNN_CUDA, 0};

static void on_segv(int sig) { _exit(42); }

/* a child reads a device pointer directly: it must be killed by SIGSEGV */
static void protected_memory(void) {
  int64_t n = 16;
  cnn_tensor *t = cnn_full(1, &n, 3.0, CNN_FLOAT32, GPU);
  CHECK(t != NULL);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    struct sigaction sa = {.sa_handler = on_segv};
    sigaction(SIGSEGV, &sa, NULL);
    volatile float v = *(volatile float *)cnn_tensor_data(t);
    _exit(v == 3.0f ? 0 : 1);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  bool segv =
      (WIFEXITED(st) && WEXITSTATUS(st) == 42) || (WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
  CHECK(segv);
  if (!segv) fprintf(stderr, "reading device memory from the host did not fault (status %d)\n", st);
  CHECK(cnn_tensor_get(t, 5) == 3.0); /* through the backend it works */
  cnn_tensor_release(t);
}

static void bad_pointers(const cnn_backend *be) {
  float host[4] = {0};
  cnn_be_shape s = cnn_be_shape_of(1, (int64_t[]){4});
  cnn_be_arg a = {.ptr = host, .stride = {1}};
  CHECK(be->fill(0, &s, CNN_FLOAT32, a, 1.0) == -1);
  CHECK(strstr(cnn_error(), "not device memory") != NULL);
  CHECK(host[0] == 0);
  void *d = be->alloc(16, 0);
  CHECK(d != NULL);
  a.ptr = d;
  CHECK(be->fill(0, &s, CNN_FLOAT32, a, 1.0) == 0);
  s.shape[0] = 17; /* 68 bytes: past the 64-byte block that 16 bytes got */
  CHECK(be->fill(0, &s, CNN_FLOAT32, a, 1.0) == -1);
  CHECK(strstr(cnn_error(), "outside") != NULL);
  CHECK(be->copy_h2d(host, d, 16, 0) == -1); /* arguments swapped: dst is host memory */
  CHECK(be->fill(1, &s, CNN_FLOAT32, a, 1.0) == -1);
  CHECK(strstr(cnn_error(), "cuda:1") != NULL);
  be->free(d, 0);
}

static void allocator(const cnn_backend *be) {
  int64_t big = 100 << 20; /* 100 MiB > the 64 MiB arena */
  cnn_tensor *t = cnn_empty(1, &big, CNN_UINT8, GPU);
  CHECK(t == NULL);
  CHECK(strstr(cnn_error(), "out of memory") != NULL);
  void *a = be->alloc(1000, 0), *b = be->alloc(10, 0);
  CHECK(a && b && ((uintptr_t)a % 64) == 0 && ((uintptr_t)b % 64) == 0);
  be->free(a, 0);
  void *c = be->alloc(500, 0); /* first fit: a's block */
  CHECK(c == a);
  int64_t cached = -1, reserved = -1, fr = -1, tot = -1;
  CHECK(be->memory_info(0, &cached, &reserved, &fr, &tot) == 0);
  CHECK(tot == 64 << 20 && reserved > 0 && cached >= 512 - 64 && fr == tot - reserved);
  be->free(b, 0), be->free(c, 0);
}

/* float32 values cast to dt on the device; their raw 16-bit patterns */
static void cast_bits(cnn_dtype dt, const float *v, int n, const uint16_t *want) {
  int64_t len = n;
  cnn_tensor *c = cnn_from_buffer(1, &len, CNN_FLOAT32, v), *g = cnn_to_device(c, GPU);
  cnn_tensor *h = g ? cnn_to_dtype(g, dt) : NULL;
  uint16_t got[16] = {0};
  CHECK(h && cnn_tensor_copy_to_host(h, got) == 0);
  for (int i = 0; i < n; i++)
    if (got[i] != want[i]) {
      CHECK(got[i] == want[i]);
      fprintf(stderr, "%s(%.9g): got 0x%04x, want 0x%04x\n", cnn_dtype_name(dt), v[i], got[i],
              want[i]);
    }
  cnn_tensor_release(c), cnn_tensor_release(g), cnn_tensor_release(h);
}

static void half_casts(void) {
  const float tiny = 5.9604644775390625e-08f; /* 2^-24 */
  float hv[] = {1.0f, -2.0f,    65504.0f,        65520.0f,           65519.0f,
                tiny, tiny / 2, 3 * tiny / 2,    1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
                0.0f, -0.0f,    6.103515625e-05f};
  uint16_t hw[] = {0x3c00, 0xc000, 0x7bff, 0x7c00, 0x7bff, 0x0001, 0x0000,
                   0x0002, 0x3c00, 0x3c02, 0x0000, 0x8000, 0x0400};
  cast_bits(CNN_FLOAT16, hv, 13, hw);
  float bv[] = {1.0f, -2.0f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 3.0e38f, 0.0f};
  uint16_t bw[] = {0x3f80, 0xc000, 0x3f80, 0x3f82, 0x7f62, 0x0000};
  cast_bits(CNN_BFLOAT16, bv, 6, bw);
}

/* C (3x4) = A (3x5, stored with row stride 7) * B (5x4) against a loop here */
static void gemm_ld(const cnn_backend *be) {
  float A[3 * 7], B[5 * 4], C[3 * 4] = {0};
  for (int i = 0; i < 21; i++) A[i] = (float)(i % 7 < 5 ? i * 0.5 - 3 : 1e6);
  for (int i = 0; i < 20; i++) B[i] = (float)(i % 3) - 1.0f;
  void *dA = be->alloc(sizeof A, 0), *dB = be->alloc(sizeof B, 0), *dC = be->alloc(sizeof C, 0);
  CHECK(be->copy_h2d(dA, A, sizeof A, 0) == 0 && be->copy_h2d(dB, B, sizeof B, 0) == 0);
  CHECK(be->gemm(0, CNN_FLOAT32, false, false, 3, 4, 5, dA, 7, dB, 4, dC, 4) == 0);
  CHECK(be->copy_d2h(C, dC, sizeof C, 0) == 0);
  double want[12], got[12];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) {
      double acc = 0;
      for (int k = 0; k < 5; k++) acc += (double)A[i * 7 + k] * B[k * 4 + j];
      want[i * 4 + j] = acc, got[i * 4 + j] = C[i * 4 + j];
    }
  check_arrays("gemm lda=7", got, want, 12, 1e-5, 1e-6);
  be->free(dA, 0), be->free(dB, 0), be->free(dC, 0);
}

static void events(const cnn_backend *be) {
  void *a = be->event_record(0), *b = be->event_record(0);
  double ms = -1;
  CHECK(a && b && be->event_elapsed(a, b, &ms) == 0 && ms >= 0 && ms < 1000);
  be->event_free(a), be->event_free(b);
}

/* ---- injected failures (fake_cuda_fault.c) ------------------------------------------- */

static int (*inject)(const char *site, int fault, int count);
static int (*counts)(const char *site, int *attempts, int *releases, int *aligned);

static void *fake_module(void) {
  return dlopen(getenv("CNNSH_CUDA_MODULE"), RTLD_NOW | RTLD_NOLOAD);
}

static bool load_injection(void) {
  void *h = fake_module();
  if (h) {
    *(void **)&inject = dlsym(h, "fake_cuda_inject");
    *(void **)&counts = dlsym(h, "fake_cuda_fault_counts");
  }
  CHECK(inject != NULL && counts != NULL);
  return inject && counts;
}

/* attempts, releases and aligned-copy runs at site since its injection */
static void expect_counts(const char *what, const char *site, int attempts, int releases,
                          int aligned) {
  int a = -1, r = -1, al = -1;
  CHECK(counts(site, &a, &r, &al) == 0);
  bool ok = a == attempts && r == releases && al == aligned;
  CHECK(ok);
  if (!ok)
    fprintf(stderr, "%s: %d attempts, %d releases, %d aligned runs; want %d, %d, %d\n", what, a, r,
            al, attempts, releases, aligned);
}

static int oom_hook_calls;
static int count_oom(size_t nbytes, void *ud) {
  (void)nbytes, (void)ud;
  oom_hook_calls++;
  return 1;
}

static cnn_tensor *try_gpu_alloc(void) {
  int64_t n = 16;
  return cnn_empty(1, &n, CNN_FLOAT32, GPU);
}

static void alloc_recovery(void) {
  cnn_alloc_hooks h = {NULL, count_oom, NULL};
  cnn_set_alloc_hooks(&h);
  inject("alloc", GPU_FAULT_MEMORY, 1); /* the module's own retry suffices */
  oom_hook_calls = 0;
  cnn_tensor *t = try_gpu_alloc();
  CHECK(t != NULL && oom_hook_calls == 0);
  expect_counts("alloc, one OOM", "alloc", 2, 1, 0);
  cnn_tensor_release(t);
  inject("alloc", GPU_FAULT_MEMORY, 2); /* module retry fails too: core collects and retries */
  t = try_gpu_alloc();
  CHECK(t != NULL && oom_hook_calls == 1);
  expect_counts("alloc, two OOMs", "alloc", 3, 1, 0);
  cnn_tensor_release(t);
  inject("alloc", GPU_FAULT_STICKY, 5); /* no retry anywhere, and it says why */
  oom_hook_calls = 0;
  t = try_gpu_alloc();
  CHECK(t == NULL && oom_hook_calls == 0);
  CHECK(strstr(cnn_error(), "restart") != NULL && strncmp(cnn_error(), "out of memory", 13) != 0);
  expect_counts("alloc, sticky", "alloc", 1, 0, 0);
  inject("alloc", GPU_FAULT_NONE, 0);
  cnn_set_alloc_hooks(NULL);
}

static void gemm_recovery(const cnn_backend *be) {
  float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {1, -1, 2, 0, 0.5f, 3}, C[4] = {0};
  void *dA = be->alloc(sizeof A, 0), *dB = be->alloc(sizeof B, 0), *dC = be->alloc(sizeof C, 0);
  CHECK(be->copy_h2d(dA, A, sizeof A, 0) == 0 && be->copy_h2d(dB, B, sizeof B, 0) == 0);
  inject("gemm", GPU_FAULT_MEMORY, 1); /* CUBLAS_STATUS_ALLOC_FAILED once */
  CHECK(be->gemm(0, CNN_FLOAT32, false, false, 2, 2, 3, dA, 3, dB, 2, dC, 2) == 0);
  expect_counts("gemm, one OOM", "gemm", 2, 1, 0);
  CHECK(be->copy_d2h(C, dC, sizeof C, 0) == 0);
  double want[4] = {1 * 1 + 2 * 2 + 3 * 0.5, 1 * -1 + 2 * 0 + 3 * 3, 4 * 1 + 5 * 2 + 6 * 0.5,
                    4 * -1 + 5 * 0 + 6 * 3},
         got[4] = {C[0], C[1], C[2], C[3]};
  check_arrays("gemm after a retried ALLOC_FAILED", got, want, 4, 1e-6, 1e-6);
  inject("gemm", GPU_FAULT_STICKY, 1);
  CHECK(be->gemm(0, CNN_FLOAT32, false, false, 2, 2, 3, dA, 3, dB, 2, dC, 2) == -1);
  CHECK(strstr(cnn_error(), "matmul") != NULL && strstr(cnn_error(), "restart") != NULL);
  expect_counts("gemm, sticky", "gemm", 1, 0, 0);
  inject("gemm", GPU_FAULT_NONE, 0);
  be->free(dA, 0), be->free(dB, 0), be->free(dC, 0);
}

/* conv2d of x (2x3x7x5) with w (4x3x3x2) on the device against the CPU */
static void conv_case(const char *what, int fault, int count, int attempts, int aligned, bool ok) {
  int64_t xs[4] = {2, 3, 7, 5}, ws[4] = {4, 3, 3, 2};
  cnn_conv_params p = {{2, 1}, {1, 1, 0, 0}, {1, 1}, 1};
  cnn_tensor *x = cnn_randn(4, xs, CNN_FLOAT32), *w = cnn_randn(4, ws, CNN_FLOAT32);
  cnn_tensor *gx = cnn_to_device(x, GPU), *gw = cnn_to_device(w, GPU);
  cnn_tensor *ref = cnn_conv2d(x, w, NULL, &p);
  inject("conv", fault, count);
  cnn_tensor *gy = gx && gw ? cnn_conv2d(gx, gw, NULL, &p) : NULL;
  CHECK((gy != NULL) == ok);
  if (!ok) CHECK(strstr(cnn_error(), "conv2d") != NULL);
  if (gy && ref) {
    int64_t n = cnn_tensor_numel(ref);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    double *da = malloc(n * sizeof *da), *db = malloc(n * sizeof *db);
    CHECK(cnn_tensor_copy_to_host(gy, a) == 0 && cnn_tensor_copy_to_host(ref, b) == 0);
    for (int64_t i = 0; i < n; i++) da[i] = a[i], db[i] = b[i];
    check_arrays(what, da, db, n, 1e-5, 1e-5);
    free(a), free(b), free(da), free(db);
  }
  expect_counts(what, "conv", attempts, 0, aligned);
  inject("conv", GPU_FAULT_NONE, 0);
  cnn_tensor_release(x), cnn_tensor_release(w), cnn_tensor_release(gx), cnn_tensor_release(gw);
  cnn_tensor_release(ref), cnn_tensor_release(gy);
}

static void conv_recovery(void) {
  conv_case("conv, first candidate misaligned", GPU_FAULT_MISALIGNED, 1, 2, 0, true);
  conv_case("conv, first two not supported", GPU_FAULT_UNSUPPORTED, 2, 3, 0, true);
  conv_case("conv, all misaligned: aligned copies", GPU_FAULT_MISALIGNED, 3, 4, 1, true);
  conv_case("conv, none supported", GPU_FAULT_UNSUPPORTED, 3, 3, 0, false);
  conv_case("conv, an error stops the search", GPU_FAULT_OTHER, 1, 1, 0, false);
}

/* the batch-norm backward receives the forward's eps (cuDNN wants the same) */
static void bn_eps(void *module) {
  double (*last_eps)(void) = NULL;
  *(void **)&last_eps = dlsym(module, "fake_cuda_last_bn_eps");
  CHECK(last_eps != NULL);
  if (!last_eps) return;
  int64_t xs[4] = {2, 3, 4, 5};
  cnn_tensor *x = cnn_randn(4, xs, CNN_FLOAT32), *gx = cnn_to_device(x, GPU);
  CHECK(gx && cnn_set_requires_grad(gx, true) == 0);
  cnn_tensor *y = gx ? cnn_batch_norm(gx, NULL, NULL, NULL, NULL, true, 0.1, 1e-3) : NULL;
  cnn_tensor *g = y ? cnn_full(4, xs, 1.0, CNN_FLOAT32, GPU) : NULL;
  CHECK(g && cnn_backward(y, g, false) == 0);
  CHECK(last_eps() == 1e-3);
  cnn_tensor_release(x), cnn_tensor_release(gx), cnn_tensor_release(y), cnn_tensor_release(g);
}

/* A module built against another core is refused: its init, given a core
 * API version other than its own -- here one unary op fewer, which
 * CNN_CORE_API_VERSION folds in -- returns NULL and says why. */
static void version_refused(void *h) {
  const cnn_backend *(*init)(const cnn_core_api *, char *, size_t) = NULL;
  if (h) *(void **)&init = dlsym(h, "cnn_cuda_backend_init");
  CHECK(init != NULL);
  if (!init) return;
  cnn_core_api older = {CNN_CORE_API_VERSION - 100,
                        cnn_set_error,
                        cnn_interrupt_pending,
                        cnn_dtype_name,
                        cnn_unary_name,
                        cnn_binary_name};
  char reason[256] = "";
  CHECK(init(&older, reason, sizeof reason) == NULL);
  CHECK(strstr(reason, "does not match this cnnsh") != NULL);
}

int main(void) {
  const cnn_backend *be = cnn_backend_get(CNN_CUDA);
  const char *info = cnn_cuda_module_info();
  if (!be || !info || !strstr(info, "fake CUDA device")) {
    fprintf(stderr, "test_fake_cuda: the fake module is not loaded: %s\n",
            be ? "wrong module" : cnn_error());
    return 1;
  }
  protected_memory();
  bad_pointers(be);
  allocator(be);
  half_casts();
  gemm_ld(be);
  events(be);
  version_refused(fake_module());
  if (load_injection()) {
    alloc_recovery();
    gemm_recovery(be);
    conv_recovery();
    bn_eps(fake_module());
  }
  return check_report("fake_cuda");
}
