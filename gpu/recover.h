/*
 * recover.h -- what the CUDA backend does after a failed CUDA, cuBLAS or
 * cuDNN call, as plain C with no CUDA type, so that the same decisions run
 * in the module (the .cu files of gpu/), in the fake CUDA device's injected failures
 * (tests/gpu/fake_cuda_fault.c) and in host unit tests
 * (tests/gpu/test_gpu_recover.c).
 *
 * Each library status is first classified into a gpu_fault (gpu/status.h
 * maps the real enums; the fake device injects faults directly):
 *   MEMORY       the call could not get device memory: ours is cached, so
 *                releasing our cache and trying ONCE more may succeed
 *                (cudaErrorMemoryAllocation, CUBLAS_STATUS_ALLOC_FAILED,
 *                cuDNN's *_ALLOCATION_FAILED, a handle that could not be
 *                created);
 *   STICKY       the CUDA context is broken (illegal address, launch
 *                timeout...: driver_types.h says "the process must be
 *                terminated and relaunched"): never retried, and the message
 *                says so;
 *   MISALIGNED   cuDNN refused a pointer's alignment for this algorithm;
 *   UNSUPPORTED  cuDNN cannot run this algorithm for this problem;
 *   OTHER        anything else: an error, reported as it is.
 *
 * Invariant of gpu_retry_once: `attempt` runs at most twice, `release` at
 * most once and only between two attempts, and only after MEMORY.
 */
#ifndef CNN_GPU_RECOVER_H
#define CNN_GPU_RECOVER_H

#include <stdbool.h>

typedef enum {
  GPU_FAULT_NONE = 0,
  GPU_FAULT_MEMORY,
  GPU_FAULT_STICKY,
  GPU_FAULT_MISALIGNED,
  GPU_FAULT_UNSUPPORTED,
  GPU_FAULT_OTHER
} gpu_fault;

/* one try of an operation; its fault (GPU_FAULT_NONE: done) */
typedef gpu_fault (*gpu_attempt_fn)(void *ctx);
/* give cached device memory back (the allocator's cache, empty_cache) */
typedef void (*gpu_release_fn)(void *ctx);

/* is a failed call worth one more try after releasing our cache?  Only
 * for memory: a sticky error never is, nor is a wrong argument */
static inline bool gpu_fault_retry(gpu_fault f) { return f == GPU_FAULT_MEMORY; }

/* attempt; after a MEMORY fault release and attempt once more.  Returns
 * the fault of the last attempt. */
static inline gpu_fault gpu_retry_once(gpu_attempt_fn attempt, gpu_release_fn release, void *ctx) {
  gpu_fault f = attempt(ctx);
  if (!gpu_fault_retry(f)) return f;
  release(ctx);
  return attempt(ctx);
}

/* In the convolution's candidate loop: does this fault of one algorithm
 * mean "try the next one"?  Unsupported, misaligned (a batch slice of a
 * half tensor may be 2-byte aligned: another algorithm, or aligned copies,
 * serve it) and a workspace that could not be had (a later candidate may
 * need less) do; a sticky or other error stops the loop. */
static inline bool gpu_fault_next_algorithm(gpu_fault f) {
  return f == GPU_FAULT_UNSUPPORTED || f == GPU_FAULT_MISALIGNED || f == GPU_FAULT_MEMORY;
}

/* the sentence a message ends with for this fault ("" for most) */
static inline const char *gpu_fault_advice(gpu_fault f) {
  switch (f) {
  case GPU_FAULT_STICKY:
    return " -- the CUDA context is broken (a sticky error): restart cnnsh to use the GPU again";
  case GPU_FAULT_MEMORY: return " (out of memory on the device, after emptying the cache)";
  default: return "";
  }
}

#endif
