/*
 * bench/conv_winograd.c -- where oneDNN's Winograd convolution beats its
 * direct kernels: the measurements behind core/cpu/conv_winograd.c's rule
 * (issue 19).  For each 3x3 stride-1 float32 shape below, each pass
 * (forward training, backward data, backward weights) is created with
 * dnnl_convolution_direct and with dnnl_convolution_winograd, tensors in
 * the layouts oneDNN picks (format any, as cnnsh's conv_onednn.c and
 * conv_block_onednn.c create them: the reorders around them are the same
 * for both and left out), and timed: 3 warm-up calls, then the median of
 * 21.  Prints one JSON line per shape and pass:
 *
 *   {"bench":"conv_winograd","N":64,"C":32,"K":64,"H":14,"tiles":1024,
 *    "pass":"fwd","direct_ms":...,"winograd_ms":...,"speedup":...}
 *
 * (winograd_ms and speedup null where oneDNN has no Winograd kernel, e.g.
 * a CPU without AVX-512.)  tiles = N ceil(H/4)^2, the 4x4 output tiles.
 * Built by hand, not by CMake; pin the threads as for cnnsh:
 *
 *   cc -O2 -o /tmp/conv_winograd bench/conv_winograd.c -ldnnl
 *   OMP_NUM_THREADS=2 /tmp/conv_winograd
 */
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef enum { FWD, BWD_DATA, BWD_WEIGHTS } pass;
static const char *pass_name[] = {"fwd", "bwd_data", "bwd_weights"};

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

/* A memory object of md filled with small varied values (NULL md: none). */
static dnnl_memory_t filled(const dnnl_memory_desc_t *md) {
  dnnl_memory_t m;
  if (dnnl_memory_create(&m, md, engine, DNNL_MEMORY_ALLOCATE) != dnnl_success) return NULL;
  float *p;
  dnnl_memory_get_data_handle(m, (void **)&p);
  size_t n = dnnl_memory_desc_get_size(md) / sizeof(float);
  for (size_t i = 0; i < n; i++) p[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
  return m;
}

/* The pass's primitive descriptor (a forward one as the hint for backward). */
static dnnl_primitive_desc_t make_pd(pass p, dnnl_alg_kind_t alg, int N, int C, int K, int H) {
  dnnl_dims_t xd = {N, C, H, H}, wd = {K, C, 3, 3}, yd = {N, K, H, H};
  dnnl_dims_t one = {1, 1}, none = {0, 0};
  dnnl_memory_desc_t x, w, y;
  dnnl_memory_desc_init_by_tag(&x, 4, xd, dnnl_f32, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&w, 4, wd, dnnl_f32, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&y, 4, yd, dnnl_f32, dnnl_format_tag_any);
  dnnl_convolution_desc_t fd, bd;
  dnnl_primitive_desc_t fwd = NULL, pd = NULL;
  dnnl_primitive_attr_t attr;
  dnnl_primitive_attr_create(&attr);
  dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  dnnl_status_t st = dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, alg, &x,
                                                                &w, NULL, &y, one, none, one, one);
  if (st == dnnl_success) st = dnnl_primitive_desc_create(&fwd, &fd, attr, engine, NULL);
  if (st == dnnl_success && p == FWD) pd = fwd, fwd = NULL;
  if (st == dnnl_success && p == BWD_DATA &&
      dnnl_dilated_convolution_backward_data_desc_init(&bd, alg, &x, &w, &y, one, none, one, one) ==
          dnnl_success)
    dnnl_primitive_desc_create(&pd, &bd, attr, engine, fwd);
  if (st == dnnl_success && p == BWD_WEIGHTS &&
      dnnl_dilated_convolution_backward_weights_desc_init(&bd, alg, &x, &w, NULL, &y, one, none,
                                                          one, one) == dnnl_success)
    dnnl_primitive_desc_create(&pd, &bd, attr, engine, fwd);
  if (fwd) dnnl_primitive_desc_destroy(fwd);
  dnnl_primitive_attr_destroy(attr);
  return pd;
}

/* The arguments of pass p: the two inputs, the output and the scratchpad. */
static int args_of(pass p, dnnl_primitive_desc_t pd, dnnl_exec_arg_t a[4]) {
  static const int arg[3][3] = {
      [FWD] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
      [BWD_DATA] = {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
      [BWD_WEIGHTS] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS}};
  static const dnnl_query_t query[3][3] = {
      [FWD] = {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md},
      [BWD_DATA] = {dnnl_query_diff_dst_md, dnnl_query_weights_md, dnnl_query_diff_src_md},
      [BWD_WEIGHTS] = {dnnl_query_src_md, dnnl_query_diff_dst_md, dnnl_query_diff_weights_md}};
  for (int i = 0; i < 3; i++) {
    a[i].arg = arg[p][i];
    if (!(a[i].memory = filled(dnnl_primitive_desc_query_md(pd, query[p][i], 0)))) return -1;
  }
  a[3].arg = DNNL_ARG_SCRATCHPAD;
  a[3].memory = filled(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
  return a[3].memory ? 0 : -1;
}

/* The median ms of one pass, or -1 when oneDNN has no such primitive. */
static double time_pass(pass p, dnnl_alg_kind_t alg, int N, int C, int K, int H) {
  dnnl_primitive_desc_t pd = make_pd(p, alg, N, C, K, H);
  if (!pd) return -1;
  dnnl_exec_arg_t a[4];
  dnnl_primitive_t prim = NULL;
  double t[21], ms = -1;
  if (args_of(p, pd, a) == 0 && dnnl_primitive_create(&prim, pd) == dnnl_success) {
    for (int r = -3; r < 21; r++) {
      double t0 = now();
      dnnl_primitive_execute(prim, stream, 4, a);
      dnnl_stream_wait(stream);
      if (r >= 0) t[r] = now() - t0;
    }
    qsort(t, 21, sizeof t[0], by_value);
    ms = t[10] * 1e3;
    dnnl_primitive_destroy(prim);
    for (int i = 0; i < 4; i++) dnnl_memory_destroy(a[i].memory);
  }
  dnnl_primitive_desc_destroy(pd);
  return ms;
}

int main(void) {
  /* N, C, K, H (= W): the example network's and ResNet-20's training
   * shapes, ResNet-18's at batch 16, small batches and small planes */
  static const int shapes[][4] = {
      {64, 32, 64, 14},   {64, 16, 16, 32},   {64, 32, 32, 16},  {64, 64, 64, 8}, {16, 64, 64, 56},
      {16, 128, 128, 28}, {16, 256, 256, 14}, {16, 512, 512, 7}, {64, 3, 16, 32}, {32, 64, 128, 16},
      {1, 64, 64, 56},    {1, 512, 512, 7},   {1, 32, 32, 14},   {4, 64, 64, 8},  {1, 256, 256, 14},
      {1, 32, 64, 28},    {8, 32, 32, 7},     {256, 32, 64, 14}, {64, 32, 32, 5}, {64, 32, 32, 4},
      {8, 32, 32, 16},    {2, 32, 32, 32},    {4, 64, 64, 16},   {2, 64, 64, 28}, {1, 128, 128, 28},
      {16, 32, 32, 8},    {32, 32, 32, 8},    {64, 32, 32, 8},   {1, 64, 64, 32}, {3, 64, 64, 32},
      {16, 64, 64, 12},   {64, 32, 32, 6}};
  if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success ||
      dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success)
    return fprintf(stderr, "conv_winograd: no oneDNN CPU engine\n"), 1;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const int *s = shapes[i];
    long tiles = (long)s[0] * ((s[3] + 3) / 4) * ((s[3] + 3) / 4);
    for (int p = FWD; p <= BWD_WEIGHTS; p++) {
      double d = time_pass(p, dnnl_convolution_direct, s[0], s[1], s[2], s[3]);
      double w = time_pass(p, dnnl_convolution_winograd, s[0], s[1], s[2], s[3]);
      printf("{\"bench\":\"conv_winograd\",\"N\":%d,\"C\":%d,\"K\":%d,\"H\":%d,\"tiles\":%ld,"
             "\"pass\":\"%s\",\"direct_ms\":%.4g,",
             s[0], s[1], s[2], s[3], tiles, pass_name[p], d);
      if (w > 0 && d > 0)
        printf("\"winograd_ms\":%.4g,\"speedup\":%.3g}\n", w, d / w);
      else
        printf("\"winograd_ms\":null,\"speedup\":null}\n");
      fflush(stdout);
    }
  }
  dnnl_stream_destroy(stream);
  dnnl_engine_destroy(engine);
  return 0;
}
