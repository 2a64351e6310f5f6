/*
 * test_gpu_recover.c -- host unit tests of the CUDA backend's decisions
 * that need no GPU (label unit; built where the CUDA toolkit is, since it
 * includes the libraries' headers for their status enums, but links none
 * of them):
 *  - gpu/status.h sorts real statuses: only cudaErrorMemoryAllocation is
 *    out of memory; the errors driver_types.h calls unrecoverable are
 *    sticky; cuBLAS ALLOC_FAILED and cuDNN 9's two allocation statuses are
 *    memory; cuDNN's misaligned pointer and NOT_SUPPORTED category are told
 *    apart; a library's execution failure is sticky when the runtime's is;
 *  - gpu/recover.h's retry policy: a scripted sequence of faults shows one
 *    release and one retry after MEMORY only, never after STICKY, and the
 *    candidate loop's skip rule;
 *  - gpu/conv_plan.h: the algorithm cache key differs by the benchmark flag
 *    and each shape field; the asymmetric-padding plan against a naive
 *    zero-padded copy and a direct crop, over odd shapes.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "conv_plan.h"
#include "status.h"

static void cuda_statuses(void) {
  CHECK(gpu_cuda_fault(cudaSuccess) == GPU_FAULT_NONE);
  CHECK(gpu_cuda_fault(cudaErrorMemoryAllocation) == GPU_FAULT_MEMORY);
  cudaError_t sticky[] = {cudaErrorIllegalAddress,
                          cudaErrorLaunchTimeout,
                          cudaErrorLaunchFailure,
                          cudaErrorIllegalInstruction,
                          cudaErrorMisalignedAddress,
                          cudaErrorHardwareStackError,
                          cudaErrorAssert,
                          cudaErrorECCUncorrectable};
  for (size_t i = 0; i < sizeof sticky / sizeof *sticky; i++)
    CHECK(gpu_cuda_fault(sticky[i]) == GPU_FAULT_STICKY);
  /* recoverable errors that are NOT out of memory: no cache release for them */
  cudaError_t other[] = {cudaErrorInvalidValue,           cudaErrorInvalidConfiguration,
                         cudaErrorNoKernelImageForDevice, cudaErrorLaunchOutOfResources,
                         cudaErrorInvalidDevice,          cudaErrorNotReady};
  for (size_t i = 0; i < sizeof other / sizeof *other; i++)
    CHECK(gpu_cuda_fault(other[i]) == GPU_FAULT_OTHER);
}

static void library_statuses(void) {
  CHECK(gpu_cublas_fault(CUBLAS_STATUS_SUCCESS, cudaSuccess) == GPU_FAULT_NONE);
  CHECK(gpu_cublas_fault(CUBLAS_STATUS_ALLOC_FAILED, cudaSuccess) == GPU_FAULT_MEMORY);
  CHECK(gpu_cublas_fault(CUBLAS_STATUS_INVALID_VALUE, cudaSuccess) == GPU_FAULT_OTHER);
  CHECK(gpu_cublas_fault(CUBLAS_STATUS_EXECUTION_FAILED, cudaSuccess) == GPU_FAULT_OTHER);
  CHECK(gpu_cublas_fault(CUBLAS_STATUS_EXECUTION_FAILED, cudaErrorIllegalAddress) ==
        GPU_FAULT_STICKY);
  CHECK(gpu_cudnn_fault(CUDNN_STATUS_SUCCESS, cudaSuccess) == GPU_FAULT_NONE);
  CHECK(gpu_cudnn_fault(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, cudaSuccess) ==
        GPU_FAULT_MEMORY);
  CHECK(gpu_cudnn_fault(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED, cudaSuccess) ==
        GPU_FAULT_MEMORY);
  CHECK(gpu_cudnn_fault(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER, cudaSuccess) ==
        GPU_FAULT_MISALIGNED);
  CHECK(gpu_cudnn_fault(CUDNN_STATUS_BAD_PARAM, cudaSuccess) == GPU_FAULT_OTHER);
  CHECK(gpu_cudnn_fault(CUDNN_STATUS_NOT_SUPPORTED, cudaSuccess) == GPU_FAULT_UNSUPPORTED);
  CHECK(gpu_cudnn_fault(CUDNN_STATUS_NOT_SUPPORTED_SHAPE, cudaSuccess) == GPU_FAULT_UNSUPPORTED);
  CHECK(gpu_cudnn_fault(CUDNN_STATUS_EXECUTION_FAILED_CUDART, cudaErrorLaunchTimeout) ==
        GPU_FAULT_STICKY);
  CHECK(gpu_cudnn_fault(CUDNN_STATUS_EXECUTION_FAILED, cudaSuccess) == GPU_FAULT_OTHER);
}

/* a scripted operation: attempt i returns faults[i]; counts the calls */
typedef struct {
  gpu_fault faults[4];
  int attempts, releases, released_after; /* released_after: attempts done at release */
} script;

static gpu_fault scripted_attempt(void *ctx) {
  script *s = ctx;
  return s->faults[s->attempts++];
}
static void scripted_release(void *ctx) {
  script *s = ctx;
  s->releases++;
  s->released_after = s->attempts;
}

static void retry_policy(void) {
  script ok = {{GPU_FAULT_NONE}, 0, 0, 0};
  CHECK(gpu_retry_once(scripted_attempt, scripted_release, &ok) == GPU_FAULT_NONE);
  CHECK(ok.attempts == 1 && ok.releases == 0);
  script mem_then_ok = {{GPU_FAULT_MEMORY, GPU_FAULT_NONE}, 0, 0, 0};
  CHECK(gpu_retry_once(scripted_attempt, scripted_release, &mem_then_ok) == GPU_FAULT_NONE);
  CHECK(mem_then_ok.attempts == 2 && mem_then_ok.releases == 1 && mem_then_ok.released_after == 1);
  script mem_twice = {{GPU_FAULT_MEMORY, GPU_FAULT_MEMORY, GPU_FAULT_NONE}, 0, 0, 0};
  CHECK(gpu_retry_once(scripted_attempt, scripted_release, &mem_twice) == GPU_FAULT_MEMORY);
  CHECK(mem_twice.attempts == 2 && mem_twice.releases == 1); /* once, never a third try */
  gpu_fault no_retry[] = {GPU_FAULT_STICKY, GPU_FAULT_OTHER, GPU_FAULT_MISALIGNED,
                          GPU_FAULT_UNSUPPORTED};
  for (int i = 0; i < 4; i++) {
    script s = {{no_retry[i], GPU_FAULT_NONE}, 0, 0, 0};
    CHECK(gpu_retry_once(scripted_attempt, scripted_release, &s) == no_retry[i]);
    CHECK(s.attempts == 1 && s.releases == 0);
  }
  CHECK(gpu_fault_next_algorithm(GPU_FAULT_UNSUPPORTED) &&
        gpu_fault_next_algorithm(GPU_FAULT_MISALIGNED));
  CHECK(gpu_fault_next_algorithm(GPU_FAULT_MEMORY));
  CHECK(!gpu_fault_next_algorithm(GPU_FAULT_STICKY) && !gpu_fault_next_algorithm(GPU_FAULT_OTHER));
  CHECK(strstr(gpu_fault_advice(GPU_FAULT_STICKY), "restart") != NULL);
  CHECK(strcmp(gpu_fault_advice(GPU_FAULT_OTHER), "") == 0);
}

static cnn_conv_shape shape_7x5(void) {
  cnn_conv_shape s;
  memset(&s, 0xAB, sizeof s); /* padding bytes differ between copies below */
  s.N = 2, s.C = 3, s.H = 7, s.W = 5, s.K = 4, s.R = 3, s.S = 2;
  s.sh = 2, s.sw = 1, s.pt = 0, s.pb = 2, s.pl = 1, s.pr = 0, s.dh = 1, s.dw = 2, s.groups = 1;
  s.OH = (s.H + s.pt + s.pb - s.dh * (s.R - 1) - 1) / s.sh + 1;
  s.OW = (s.W + s.pl + s.pr - s.dw * (s.S - 1) - 1) / s.sw + 1;
  return s;
}

static void cache_key(void) {
  gpu_conv_key a, b;
  memset(&a, 0, sizeof a), memset(&b, 0xFF, sizeof b);
  a.dev = b.dev = 0, a.dt = b.dt = CNN_FLOAT16, a.benchmark = b.benchmark = false;
  a.s = shape_7x5(), b.s = shape_7x5();
  CHECK(gpu_conv_key_equal(&a, &b)); /* equal though the padding bytes differ */
  b.benchmark = true;
  CHECK(!gpu_conv_key_equal(&a, &b)); /* a heuristic choice must not serve benchmark mode */
  b.benchmark = false, b.dt = CNN_FLOAT32;
  CHECK(!gpu_conv_key_equal(&a, &b));
  b.dt = CNN_FLOAT16, b.dev = 1;
  CHECK(!gpu_conv_key_equal(&a, &b));
  b.dev = 0;
  int64_t *fields64[] = {&b.s.N, &b.s.C, &b.s.H, &b.s.W, &b.s.K, &b.s.R, &b.s.S, &b.s.OH, &b.s.OW};
  for (int i = 0; i < 9; i++) {
    (*fields64[i])++;
    CHECK(!gpu_conv_key_equal(&a, &b));
    (*fields64[i])--;
  }
  int *fields[] = {&b.s.sh, &b.s.sw, &b.s.pt, &b.s.pb,    &b.s.pl,
                   &b.s.pr, &b.s.dh, &b.s.dw, &b.s.groups};
  for (int i = 0; i < 9; i++) {
    (*fields[i])++;
    CHECK(!gpu_conv_key_equal(&a, &b));
    (*fields[i])--;
  }
  CHECK(gpu_conv_key_equal(&a, &b));
}

/* the plan against a naive padded copy: x (planes x h x w) placed at
 * (pt, pl) in a zero image of h+pt+pb x w+pl+pr, then cut to the plan's
 * H x W starting at (pt - ph, pl - pw) where ph/pw are the symmetric pads */
static void pad_plan(int pt, int pb, int pl, int pr) {
  cnn_conv_shape s = shape_7x5(), sym;
  s.pt = pt, s.pb = pb, s.pl = pl, s.pr = pr;
  s.OH = (s.H + pt + pb - s.dh * (s.R - 1) - 1) / s.sh + 1;
  s.OW = (s.W + pl + pr - s.dw * (s.S - 1) - 1) / s.sw + 1;
  gpu_pad_plan p;
  gpu_conv_pad_plan(&s, &sym, &p);
  CHECK(sym.pt == sym.pb && sym.pl == sym.pr);
  CHECK(sym.pt == (pt < pb ? pt : pb) && sym.pl == (pl < pr ? pl : pr));
  /* the symmetric problem has the same output size */
  CHECK((sym.H + 2 * sym.pt - sym.dh * (sym.R - 1) - 1) / sym.sh + 1 == s.OH);
  CHECK((sym.W + 2 * sym.pl - sym.dw * (sym.S - 1) - 1) / sym.sw + 1 == s.OW);
  int64_t planes = s.N * s.C, h = s.H, w = s.W, FH = h + pt + pb, FW = w + pl + pr;
  int64_t off_r = pt - sym.pt, off_c = pl - sym.pl;
  CHECK(p.H == FH - 2 * sym.pt && p.W == FW - 2 * sym.pl);
  int bad = 0;
  for (int64_t i = 0; i < planes * p.H * p.W; i++) { /* pad: padded index -> source */
    int64_t c = i % p.W, r = (i / p.W) % p.H, pl_i = i / (p.W * p.H);
    int64_t fr = r + sym.pt, fc = c + sym.pl; /* position in the fully padded image */
    int64_t xr = fr - pt, xc = fc - pl;
    int64_t want = (xr < 0 || xr >= h || xc < 0 || xc >= w) ? -1 : (pl_i * h + xr) * w + xc;
    if (gpu_pad_source(&p, h, w, i) != want) bad++;
  }
  for (int64_t i = 0; i < planes * h * w; i++) { /* crop: input index -> padded index */
    int64_t c = i % w, r = (i / w) % h, pl_i = i / (w * h);
    if (gpu_crop_source(&p, h, w, i) != (pl_i * p.H + r + off_r) * p.W + c + off_c) bad++;
  }
  CHECK(bad == 0);
  if (bad)
    fprintf(stderr, "pad plan pt=%d pb=%d pl=%d pr=%d: %d wrong indices\n", pt, pb, pl, pr, bad);
}

int main(void) {
  cuda_statuses();
  library_statuses();
  retry_policy();
  cache_key();
  pad_plan(0, 2, 1, 0);
  pad_plan(2, 0, 0, 1);
  pad_plan(1, 3, 2, 2);
  pad_plan(0, 1, 0, 1); /* padding='same' for an even kernel */
  return check_report("gpu_recover");
}
