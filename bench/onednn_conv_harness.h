/*
 * bench/onednn_conv_harness.h -- what bench/conv_winograd.c and
 * bench/conv_layouts.c share to time one pass of a oneDNN convolution
 * alone: the engine and stream, the three passes and their arguments, a
 * primitive descriptor for a shape and an activation layout, memory
 * filled with small varied values, and the median time of a primitive.
 * Header-only (each harness is one file built by hand: cc ... -ldnnl).
 */
#ifndef CNNSH_BENCH_ONEDNN_CONV_HARNESS_H
#define CNNSH_BENCH_ONEDNN_CONV_HARNESS_H

#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_clock.h"

typedef enum { FWD, BWD_DATA, BWD_WEIGHTS } pass;
static const char *pass_name[] = {"fwd", "bwd_data", "bwd_weights"};

/* N x C x H x H in, K x C x R x R weights, square stride and padding */
typedef struct {
  int N, C, K, H, R, stride, pad;
} conv_shape;

static dnnl_engine_t engine;
static dnnl_stream_t stream;

/* A memory object of md filled with small varied values (NULL on failure). */
static dnnl_memory_t filled(const dnnl_memory_desc_t *md) {
  dnnl_memory_t m;
  if (dnnl_memory_create(&m, md, engine, DNNL_MEMORY_ALLOCATE) != dnnl_success) return NULL;
  float *p;
  dnnl_memory_get_data_handle(m, (void **)&p);
  size_t n = dnnl_memory_desc_get_size(md) / sizeof(float);
  for (size_t i = 0; i < n; i++) p[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
  return m;
}

/* The median ms of prim over args (3 warm-up calls, 21 timed). */
static double median_ms(dnnl_primitive_t prim, int nargs, const dnnl_exec_arg_t *args) {
  double t[21];
  for (int r = -3; r < 21; r++) {
    double t0 = now();
    dnnl_primitive_execute(prim, stream, nargs, args);
    dnnl_stream_wait(stream);
    if (r >= 0) t[r] = now() - t0;
  }
  qsort(t, 21, sizeof t[0], by_value);
  return t[10] * 1e3;
}

/* Pass p's primitive descriptor, activations in layout `act` (weights
 * `any`; a forward one as the hint for backward), with a user-managed
 * scratchpad as cnnsh creates them; NULL when oneDNN has none. */
static dnnl_primitive_desc_t conv_pd(pass p, dnnl_alg_kind_t alg, conv_shape s,
                                     dnnl_format_tag_t act) {
  int OH = (s.H + 2 * s.pad - s.R) / s.stride + 1;
  dnnl_dims_t xd = {s.N, s.C, s.H, s.H}, wd = {s.K, s.C, s.R, s.R}, yd = {s.N, s.K, OH, OH};
  dnnl_dims_t st = {s.stride, s.stride}, dil = {0, 0}, pad = {s.pad, s.pad};
  dnnl_memory_desc_t x, w, y;
  dnnl_memory_desc_init_by_tag(&x, 4, xd, dnnl_f32, act);
  dnnl_memory_desc_init_by_tag(&w, 4, wd, dnnl_f32, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&y, 4, yd, dnnl_f32, act);
  dnnl_convolution_desc_t fd, bd;
  dnnl_primitive_desc_t fwd = NULL, pd = NULL;
  dnnl_primitive_attr_t attr;
  dnnl_primitive_attr_create(&attr);
  dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  dnnl_status_t ok = dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, alg, &x,
                                                                &w, NULL, &y, st, dil, pad, pad);
  if (ok == dnnl_success) ok = dnnl_primitive_desc_create(&fwd, &fd, attr, engine, NULL);
  if (ok == dnnl_success && p == FWD) pd = fwd, fwd = NULL;
  if (ok == dnnl_success && p == BWD_DATA &&
      dnnl_dilated_convolution_backward_data_desc_init(&bd, alg, &x, &w, &y, st, dil, pad, pad) ==
          dnnl_success)
    dnnl_primitive_desc_create(&pd, &bd, attr, engine, fwd);
  if (ok == dnnl_success && p == BWD_WEIGHTS &&
      dnnl_dilated_convolution_backward_weights_desc_init(&bd, alg, &x, &w, NULL, &y, st, dil, pad,
                                                          pad) == dnnl_success)
    dnnl_primitive_desc_create(&pd, &bd, attr, engine, fwd);
  if (fwd) dnnl_primitive_desc_destroy(fwd);
  dnnl_primitive_attr_destroy(attr);
  return pd;
}

/* The arguments of pass p (its two inputs, its output) and what to query
 * for the layout the primitive chose for each. */
static const int conv_arg[3][3] = {
    [FWD] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
    [BWD_DATA] = {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
    [BWD_WEIGHTS] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS}};
static const dnnl_query_t conv_query[3][3] = {
    [FWD] = {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md},
    [BWD_DATA] = {dnnl_query_diff_dst_md, dnnl_query_weights_md, dnnl_query_diff_src_md},
    [BWD_WEIGHTS] = {dnnl_query_src_md, dnnl_query_diff_dst_md, dnnl_query_diff_weights_md}};

/* a[0..3]: pass p's three tensors and the scratchpad, filled; 0 or -1. */
static int conv_args(pass p, dnnl_primitive_desc_t pd, dnnl_exec_arg_t a[4]) {
  for (int i = 0; i < 3; i++) {
    a[i].arg = conv_arg[p][i];
    if (!(a[i].memory = filled(dnnl_primitive_desc_query_md(pd, conv_query[p][i], 0)))) return -1;
  }
  a[3].arg = DNNL_ARG_SCRATCHPAD;
  a[3].memory = filled(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
  return a[3].memory ? 0 : -1;
}

/* The engine and stream, or a message on stderr and 0. */
static int harness_start(const char *name) {
  if (dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success &&
      dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success)
    return 1;
  fprintf(stderr, "%s: no oneDNN CPU engine\n", name);
  return 0;
}

static void harness_end(void) {
  dnnl_stream_destroy(stream);
  dnnl_engine_destroy(engine);
}

#endif
