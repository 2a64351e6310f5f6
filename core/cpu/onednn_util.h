/*
 * onednn_util.h -- core-internal: what the oneDNN users of core/cpu share
 * (matmul_onednn.c; conv_onednn.c for the reference check): the CPU engine
 * and stream, a growable aligned arena for blocked tensors and
 * scratchpads, and the refusal of oneDNN's reference implementations.
 * None of these lock: each caller serialises its own engine, stream and
 * arena under its own lock.
 */
#ifndef CNN_CPU_ONEDNN_UTIL_H
#define CNN_CPU_ONEDNN_UTIL_H

#include <dnnl.h>
#include <stddef.h>

#define CNN_ONEDNN_ALIGN 4096

/* A CPU engine and an in-order stream, created where still NULL. */
dnnl_status_t cnn_onednn_stream_open(dnnl_engine_t *engine, dnnl_stream_t *stream);
/* Destroys both (where not NULL) and sets them to NULL. */
void cnn_onednn_stream_close(dnnl_engine_t *engine, dnnl_stream_t *stream);

typedef struct {
  void *base;   /* CNN_ONEDNN_ALIGN-aligned, or NULL */
  size_t bytes; /* its size */
} cnn_onednn_arena;

/* n rounded up to CNN_ONEDNN_ALIGN (each tensor in an arena starts aligned) */
size_t cnn_onednn_round_up(size_t n);
/* At least `need` bytes (the old contents are lost): 0, or -1 with
 * "<op>: out of memory for a N-byte oneDNN workspace (<what>)" set. */
int cnn_onednn_arena_reserve(cnn_onednn_arena *a, size_t need, const char *op, const char *what);
void cnn_onednn_arena_free(cnn_onednn_arena *a);

/* pd itself, or dnnl_unimplemented (pd destroyed) when oneDNN picked a
 * reference implementation ("ref:any"): plain loops, orders of magnitude
 * slower than the float32 kernels (a bfloat16 matmul with a transposed C
 * took 5 s for 3136x64x128), so a bfloat16 caller emulates instead. */
dnnl_status_t cnn_onednn_refuse_reference(dnnl_primitive_desc_t pd);

#endif
