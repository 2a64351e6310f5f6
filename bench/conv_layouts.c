/*
 * bench/conv_layouts.c -- what the activations' layout costs oneDNN's
 * convolutions at ResNet-20's training shapes (batch 64): the measurement
 * behind channels-last tensors (core/memory_format.c; issue 19).  For each
 * convolution of the network and each pass (forward training, backward
 * data, backward weights), three ways to run it:
 *
 *   nhwc      the primitive created on nhwc activations (a channels-last
 *             tensor as it lies: no reorder);
 *   blocked   format `any` (oneDNN picks nChw16c), plus the reorders of
 *             the pass's activations from and to NCHW that cnnsh's NCHW
 *             tensors need around it (reorders_ms, timed alone);
 *   winograd  the same with oneDNN's Winograd kernels (3x3 stride 1 only).
 *
 * Each is timed alone: 3 warm-up calls, then the median of 21 (in a
 * training step the reorders read and write memory that left the cache,
 * and cost more).  Prints one JSON line per shape and pass:
 *
 *   {"bench":"conv_layouts","C":16,"K":16,"H":32,"R":3,"stride":1,"pass":"fwd",
 *    "nhwc_ms":...,"blocked_ms":...,"reorders_ms":...,"winograd_ms":...}
 *
 * (winograd_ms null where oneDNN has no Winograd kernel for the pass).
 * Built by hand, not by CMake; pin the threads as for cnnsh:
 *
 *   cc -O2 -o /tmp/conv_layouts bench/conv_layouts.c -ldnnl
 *   OMP_NUM_THREADS=2 /tmp/conv_layouts
 */
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef enum { FWD, BWD_DATA, BWD_WEIGHTS } pass;
static const char *pass_name[] = {"fwd", "bwd_data", "bwd_weights"};

typedef struct {
  int N, C, K, H, R, stride, pad;
} shape;

static dnnl_engine_t engine;
static dnnl_stream_t stream;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* A memory object of md filled with small varied values. */
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

/* The pass's primitive descriptor, activations in layout `act` (a forward
 * one as the hint for backward), or NULL when oneDNN has none. */
static dnnl_primitive_desc_t make_pd(pass p, dnnl_alg_kind_t alg, shape s, dnnl_format_tag_t act) {
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

static const int arg_of[3][3] = {
    [FWD] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
    [BWD_DATA] = {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
    [BWD_WEIGHTS] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS}};
static const dnnl_query_t query_of[3][3] = {
    [FWD] = {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md},
    [BWD_DATA] = {dnnl_query_diff_dst_md, dnnl_query_weights_md, dnnl_query_diff_src_md},
    [BWD_WEIGHTS] = {dnnl_query_src_md, dnnl_query_diff_dst_md, dnnl_query_diff_weights_md}};

/* Whether argument i of pass p is an activation (x, y, dy or dx). */
static int is_activation(pass p, int i) { return p == BWD_WEIGHTS ? i != 2 : i != 1; }

/* The ms of one reorder between NCHW and md (to NCHW when out), 0 when
 * md is NCHW itself. */
static double reorder_ms(const dnnl_memory_desc_t *md, int out) {
  dnnl_memory_desc_t plain;
  dnnl_memory_desc_init_by_tag(&plain, 4, md->dims, dnnl_f32, dnnl_nchw);
  const dnnl_memory_desc_t *from = out ? md : &plain, *to = out ? &plain : md;
  if (dnnl_memory_desc_equal(from, to)) return 0;
  dnnl_primitive_desc_t rpd;
  dnnl_primitive_t r;
  if (dnnl_reorder_primitive_desc_create(&rpd, from, engine, to, engine, NULL) != dnnl_success)
    return -1;
  dnnl_primitive_create(&r, rpd);
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, filled(from)}, {DNNL_ARG_TO, filled(to)}};
  double ms = median_ms(r, 2, args);
  dnnl_primitive_destroy(r);
  dnnl_primitive_desc_destroy(rpd);
  dnnl_memory_destroy(args[0].memory), dnnl_memory_destroy(args[1].memory);
  return ms;
}

/* The median ms of pass p (-1: no primitive); *reorders the reorders its
 * activations need from and to NCHW (when act is `any`). */
static double time_pass(pass p, dnnl_alg_kind_t alg, shape s, dnnl_format_tag_t act,
                        double *reorders) {
  dnnl_primitive_desc_t pd = make_pd(p, alg, s, act);
  *reorders = 0;
  if (!pd) return -1;
  dnnl_exec_arg_t a[4];
  for (int i = 0; i < 3; i++)
    a[i] = (dnnl_exec_arg_t){arg_of[p][i],
                             filled(dnnl_primitive_desc_query_md(pd, query_of[p][i], 0))};
  a[3] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD,
                           filled(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0))};
  dnnl_primitive_t prim;
  double ms = -1;
  if (dnnl_primitive_create(&prim, pd) == dnnl_success) {
    ms = median_ms(prim, 4, a);
    dnnl_primitive_destroy(prim);
  }
  for (int i = 0; act == dnnl_format_tag_any && i < 3; i++)
    if (is_activation(p, i))
      *reorders += reorder_ms(dnnl_primitive_desc_query_md(pd, query_of[p][i], 0), i == 2);
  for (int i = 0; i < 4; i++) dnnl_memory_destroy(a[i].memory);
  dnnl_primitive_desc_destroy(pd);
  return ms;
}

int main(void) {
  /* ResNet-20's convolutions at batch 64: the stem, layer1's 3x3, layer2's
   * strided 3x3 and 1x1 shortcut, its 3x3, layer3's likewise */
  static const shape shapes[] = {{64, 3, 16, 32, 3, 1, 1},  {64, 16, 16, 32, 3, 1, 1},
                                 {64, 16, 32, 32, 3, 2, 1}, {64, 16, 32, 32, 1, 2, 0},
                                 {64, 32, 32, 16, 3, 1, 1}, {64, 32, 64, 16, 3, 2, 1},
                                 {64, 32, 64, 16, 1, 2, 0}, {64, 64, 64, 8, 3, 1, 1}};
  if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success ||
      dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success)
    return fprintf(stderr, "conv_layouts: no oneDNN CPU engine\n"), 1;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    shape s = shapes[i];
    for (int p = FWD; p <= BWD_WEIGHTS; p++) {
      if (s.C == 3 && p == BWD_DATA) continue; /* the stem's input needs no gradient */
      double none, reorders, wino_reorders;
      double nhwc = time_pass(p, dnnl_convolution_direct, s, dnnl_nhwc, &none);
      double blocked = time_pass(p, dnnl_convolution_direct, s, dnnl_format_tag_any, &reorders);
      double wino = s.R == 3 && s.stride == 1 ? time_pass(p, dnnl_convolution_winograd, s,
                                                          dnnl_format_tag_any, &wino_reorders)
                                              : -1;
      printf("{\"bench\":\"conv_layouts\",\"C\":%d,\"K\":%d,\"H\":%d,\"R\":%d,\"stride\":%d,"
             "\"pass\":\"%s\",\"nhwc_ms\":%.4g,\"blocked_ms\":%.4g,\"reorders_ms\":%.4g,",
             s.C, s.K, s.H, s.R, s.stride, pass_name[p], nhwc, blocked, reorders);
      if (wino > 0)
        printf("\"winograd_ms\":%.4g}\n", wino);
      else
        printf("\"winograd_ms\":null}\n");
      fflush(stdout);
    }
  }
  dnnl_stream_destroy(stream);
  dnnl_engine_destroy(engine);
  return 0;
}
