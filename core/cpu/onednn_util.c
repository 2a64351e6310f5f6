/*
 * onednn_util.c -- the pieces the oneDNN users of core/cpu share (see
 * onednn_util.h): engine and stream, arena, the reference check.
 */
#include "cpu/onednn_util.h"

#include <stdlib.h>
#include <string.h>

#include "cnn.h"

dnnl_status_t cnn_onednn_stream_open(dnnl_engine_t *engine, dnnl_stream_t *stream) {
  dnnl_status_t st = dnnl_success;
  if (!*engine) st = dnnl_engine_create(engine, dnnl_cpu, 0);
  if (st == dnnl_success && !*stream)
    st = dnnl_stream_create(stream, *engine, dnnl_stream_default_flags);
  return st;
}

void cnn_onednn_stream_close(dnnl_engine_t *engine, dnnl_stream_t *stream) {
  if (*stream) dnnl_stream_destroy(*stream);
  if (*engine) dnnl_engine_destroy(*engine);
  *stream = NULL, *engine = NULL;
}

size_t cnn_onednn_round_up(size_t n) {
  return (n + CNN_ONEDNN_ALIGN - 1) / CNN_ONEDNN_ALIGN * CNN_ONEDNN_ALIGN;
}

int cnn_onednn_arena_reserve(cnn_onednn_arena *a, size_t need, const char *op, const char *what) {
  if (need <= a->bytes) return 0;
  free(a->base);
  a->base = aligned_alloc(CNN_ONEDNN_ALIGN, cnn_onednn_round_up(need));
  a->bytes = a->base ? need : 0;
  if (a->base) return 0;
  cnn_set_error("%s: out of memory for a %zu-byte oneDNN workspace (%s)", op, need, what);
  return -1;
}

void cnn_onednn_arena_free(cnn_onednn_arena *a) {
  free(a->base);
  a->base = NULL, a->bytes = 0;
}

dnnl_status_t cnn_onednn_refuse_reference(dnnl_primitive_desc_t pd) {
  const char *impl = NULL;
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
  if (!impl || strncmp(impl, "ref", 3)) return dnnl_success;
  dnnl_primitive_desc_destroy(pd);
  return dnnl_unimplemented;
}
