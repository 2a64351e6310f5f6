/*
 * fake_cuda.h -- private header of libcnn_fake_cuda.so, a fake CUDA device
 * that implements core's whole backend table (core/backend.h) on the host,
 * so that core's "tensor on cuda -> backend entry" paths run in CI without
 * a GPU (tests/gpu: gpu_parity_fake, lua_fake_device).
 *
 * Design.
 *  - Device memory is one arena of address space reserved with
 *    mmap(PROT_NONE, MAP_NORESERVE) and carved by a first-fit allocator
 *    (64-byte aligned blocks, bookkeeping in host memory outside the arena).
 *    The arena stays PROT_NONE except while a table entry runs: every entry
 *    brackets its work with fake_enter()/fake_leave(), which make the used
 *    part of the arena readable and writable and protect it again.  Core
 *    dereferencing a device pointer itself (a crash on a real GPU) is thus
 *    a SIGSEGV here too.
 *  - Every entry checks its device pointers with fake_dev() (the range lies
 *    inside one live block) and host pointers with fake_host() (outside the
 *    arena): a host pointer handed to a kernel fails the op with a message,
 *    as an illegal address would on a real device.
 *  - The math is an independent reference: naive loops in plain C with
 *    double accumulation; per-element math comes from core's shared
 *    host/device headers (elementwise_math.h, elementwise_ops.h), exactly
 *    as the gpu/ kernels use them.  No core symbol is called: errors go through the
 *    cnn_core_api pointers core hands to cnn_cuda_backend_init (fake_core).
 *
 * Files (one concept each, all tests/gpu/fake_cuda_*.c, globbed by CMake):
 *   fake_cuda_arena.c     the arena, its allocator, enter/leave, checks
 *   fake_cuda_device.c    init, table, devices, copies, events, versions
 *   fake_cuda_half.c      float16/bfloat16 conversions, element load/store
 *   fake_cuda_elementwise.c  strided unary/binary/grad/where/copy/fill
 *   fake_cuda_reduce.c    row reductions
 *   fake_cuda_blas.c      gemm
 *   fake_cuda_conv.c      conv2d forward, backward data, backward weight
 *   fake_cuda_pool.c      max / avg / adaptive-avg pooling
 *   fake_cuda_nn.c        batch norm, softmax
 *   fake_cuda_loss.c      class losses, BCE, dropout mask
 *   fake_cuda_index.c     index_select/add, gather/scatter_add
 *   fake_cuda_optim.c     SGD/Adam/RMSprop steps
 *   fake_cuda_tensor_ops.c  sort/topk, cumsum/cumprod, scatter (issue 13)
 *   fake_cuda_async.c, fake_cuda_batched.c   other owners' entries (hooks below)
 *   fake_cuda_fault.c     injected failures: wraps alloc, gemm and conv2d with
 *                         gpu/recover.h's policies and conv_plan.h's padding
 * Its own tests: tests/gpu/test_fake_cuda.c (protection, bad pointers, OOM,
 * half casts, gemm ld); it runs test_gpu_parity (gpu_parity_fake) and
 * tests/lua/cuda_device_spec.lua (lua_fake_device).
 * Environment: CNNSH_FAKE_CUDA_MEMORY=<bytes> sizes the arena (tests of
 * out of memory); CNNSH_CUDA_MODULE=<path of libcnn_fake_cuda.so> selects it.
 *
 * HOW TO ADD ENTRIES FROM ANOTHER FILE (fake_cuda_async.c, fake_cuda_batched.c):
 *   define one of the WEAK hooks declared below in your file, e.g.
 *       void fake_register_async(cnn_backend *be) { be->copy_h2d_async = ...; }
 *   fake_cuda_device.c calls each hook that is defined, after its own
 *   register functions, when the table is filled.  A new file is picked up
 *   by the glob when CMake re-runs (CONFIGURE_DEPENDS).  Inside each entry:
 *       if (fake_enter("op", dev)) return -1;        (checks dev == 0)
 *       if (fake_dev("op", ptr, nbytes)) goto out;    (device pointers)
 *       ... work on the pointers ...
 *     out: fake_leave();
 *   fake_enter() must always be paired with fake_leave(), even on error.
 *
 * Invariants: one device (cuda:0); fake_enter nests (a depth counter under
 * one recursive lock, so entries run one at a time); blocks never overlap
 * and lie inside [base, base + used); outside fake_enter..fake_leave the
 * arena is PROT_NONE.
 */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#define FAKE_ALIGN 64 /* block alignment in the arena */

/* core's entry points (set_error, dtype_name...), copied at init */
extern cnn_core_api fake_core;

/* ---- the arena (fake_cuda_arena.c) ----------------------------------------------- */

/* Reserve the arena (size from $CNNSH_FAKE_CUDA_MEMORY in bytes, default
 * 16 GiB of address space); 0 or -1 with a reason. */
int fake_arena_init(char *reason, size_t len);
/* A block of nbytes (64-byte aligned), or NULL with "out of memory: ..." set
 * through fake_core.set_error. */
void *fake_arena_alloc(size_t nbytes);
void fake_arena_free(void *p);
/* total/used/cached (free blocks below the high-water mark) bytes */
void fake_arena_stats(int64_t *total, int64_t *reserved, int64_t *cached, int64_t *live);
void fake_arena_trim(void); /* empty_cache: give free pages back */
bool fake_in_arena(const void *p);

/* Bracket every entry: enter takes the lock, checks `dev` (0 only; sets
 * "<op>: cuda:N does not exist" and returns -1 WITHOUT entering otherwise)
 * and unprotects the used arena; leave re-protects it and unlocks. */
int fake_enter(const char *op, int dev);
void fake_leave(void);
/* 0 if [p, p+n) lies inside one live block of the arena, else -1 with
 * "<op>: fake cuda: <what> is not device memory ..."; n == 0 passes when
 * p is NULL or in the arena. */
int fake_dev(const char *op, const void *p, size_t n);
/* 0 if [p, p+n) is host memory (not in the arena), else -1 with an error */
int fake_host(const char *op, const void *p, size_t n);
/* fake_dev over every element a strided operand reaches (elements of dt) */
int fake_dev_arg(const char *op, const cnn_be_shape *s, cnn_dtype dt, cnn_be_arg a);
/* fake_dev of n contiguous elements of dt */
int fake_dev_n(const char *op, const void *p, int64_t n, cnn_dtype dt);

/* ---- elements of any dtype (fake_cuda_half.c) ------------------------------------- */

float fake_half_to_float(uint16_t h);
uint16_t fake_float_to_half(float f); /* round to nearest even */
float fake_bf16_to_float(uint16_t h);
uint16_t fake_float_to_bf16(float f); /* round to nearest even, NaN kept */
/* element i of array p of dtype dt, as double; store with the dtype's rounding */
double fake_load(cnn_dtype dt, const void *p, int64_t i);
void fake_store(cnn_dtype dt, void *p, int64_t i, double v);
bool fake_is_half(cnn_dtype dt); /* float16 or bfloat16 */
/* -1 with "<op>: <dtype> is not supported" unless dt is float32/float64
 * (or, with half_ok, float16/bfloat16) */
int fake_float_dt(const char *op, cnn_dtype dt, bool half_ok);

/* ---- register functions (one per file) ------------------------------------------ */

void fake_elementwise_register(cnn_backend *be);
void fake_reduce_register(cnn_backend *be);
void fake_blas_register(cnn_backend *be);
void fake_conv_register(cnn_backend *be);
void fake_pool_register(cnn_backend *be);
void fake_nn_register(cnn_backend *be);
void fake_loss_register(cnn_backend *be);
void fake_index_register(cnn_backend *be);
void fake_optim_register(cnn_backend *be);
void fake_tensor_ops_register(cnn_backend *be); /* fake_cuda_tensor_ops.c (issue 13) */
void fake_norm_register(cnn_backend *be);       /* fake_cuda_norm.c (helper "norm") */
void fake_resize_register(cnn_backend *be);     /* fake_cuda_resize.c (helper "norm") */

/* Weak hooks for the files other engineers own; called when defined. */
void fake_register_async(cnn_backend *be) __attribute__((weak));
void fake_register_batched(cnn_backend *be) __attribute__((weak));
void fake_register_extra(cnn_backend *be) __attribute__((weak));
/* fake_cuda_fault.c: wraps entries of the finished table (injected
 * failures, the module's recovery paths); called last */
void fake_register_faults(cnn_backend *be) __attribute__((weak));

#endif /* FAKE_CUDA_H */
