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
#include <stdio.h>

#include "onednn_conv_harness.h"

/* The median ms of one pass of a 3x3 stride-1 convolution (activations in
 * oneDNN's layouts), or -1 when oneDNN has no such primitive. */
static double time_pass(pass p, dnnl_alg_kind_t alg, int N, int C, int K, int H) {
  dnnl_primitive_desc_t pd =
      conv_pd(p, alg, (conv_shape){N, C, K, H, 3, 1, 1}, dnnl_format_tag_any);
  if (!pd) return -1;
  dnnl_exec_arg_t a[4];
  dnnl_primitive_t prim = NULL;
  double ms = -1;
  if (conv_args(p, pd, a) == 0 && dnnl_primitive_create(&prim, pd) == dnnl_success) {
    ms = median_ms(prim, 4, a);
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
  if (!harness_start("conv_winograd")) return 1;
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
  harness_end();
  return 0;
}
