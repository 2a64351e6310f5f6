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
#include <stdio.h>

#include "onednn_conv_harness.h"

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
static double time_pass(pass p, dnnl_alg_kind_t alg, conv_shape s, dnnl_format_tag_t act,
                        double *reorders) {
  dnnl_primitive_desc_t pd = conv_pd(p, alg, s, act);
  *reorders = 0;
  if (!pd) return -1;
  dnnl_exec_arg_t a[4];
  dnnl_primitive_t prim;
  double ms = -1;
  if (conv_args(p, pd, a) == 0 && dnnl_primitive_create(&prim, pd) == dnnl_success) {
    ms = median_ms(prim, 4, a);
    dnnl_primitive_destroy(prim);
  }
  for (int i = 0; act == dnnl_format_tag_any && i < 3; i++)
    if (is_activation(p, i))
      *reorders += reorder_ms(dnnl_primitive_desc_query_md(pd, conv_query[p][i], 0), i == 2);
  for (int i = 0; i < 4; i++) dnnl_memory_destroy(a[i].memory);
  dnnl_primitive_desc_destroy(pd);
  return ms;
}

int main(void) {
  /* ResNet-20's convolutions at batch 64: the stem, layer1's 3x3, layer2's
   * strided 3x3 and 1x1 shortcut, its 3x3, layer3's likewise */
  static const conv_shape shapes[] = {{64, 3, 16, 32, 3, 1, 1},  {64, 16, 16, 32, 3, 1, 1},
                                      {64, 16, 32, 32, 3, 2, 1}, {64, 16, 32, 32, 1, 2, 0},
                                      {64, 32, 32, 16, 3, 1, 1}, {64, 32, 64, 16, 3, 2, 1},
                                      {64, 32, 64, 16, 1, 2, 0}, {64, 64, 64, 8, 3, 1, 1}};
  if (!harness_start("conv_layouts")) return 1;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    conv_shape s = shapes[i];
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
  harness_end();
  return 0;
}
