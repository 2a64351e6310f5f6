/*
 * bench/onednn_block.c -- what a conv -> batch norm -> ReLU -> max-pool block
 * of the example network costs when it stays in oneDNN's blocked layout
 * from end to end (issue 19: the lever the README names for the bf16 step
 * and the memory-bound passes), forward and backward in training, float32
 * and bfloat16, against nothing else: bench/conv_block.lua times the same
 * block as cnnsh runs it today (float32 plain tensors, our batch norm and
 * pooling, a reorder around each convolution), and the two are read as a
 * ratio from one run of each, alternated.
 *
 *   cc -O2 -o /tmp/onednn_block bench/onednn_block.c -ldnnl && /tmp/onednn_block
 *   (OMP_NUM_THREADS as for cnnsh; one JSON line per block and dtype:
 *    {"bench":"conv_block","impl":"onednn_blocked","block":"32x64_14","dtype":"bf16","ms":...})
 *
 * Not part of the build or the tests (a measurement for planning).  The
 * user's tensors are float32 NCHW at both ends, as cnnsh's would be: the
 * input, the weights and the pooled output (and their gradients) are
 * reordered in and out every step; everything between stays in the
 * layouts oneDNN picks (format any), with batch norm's ReLU fused
 * (dnnl_fuse_norm_relu) and max pooling's workspace in place of indices.
 */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"

#define CHK(call)                                                                                  \
  do {                                                                                             \
    dnnl_status_t s_ = (call);                                                                     \
    if (s_ != dnnl_success) {                                                                      \
      fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #call, (int)s_);              \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static dnnl_engine_t engine;
static dnnl_stream_t stream;

static dnnl_memory_t memory_of(const dnnl_memory_desc_t *md) {
  dnnl_memory_t m;
  CHK(dnnl_memory_create(&m, md, engine, DNNL_MEMORY_ALLOCATE));
  return m;
}

static const dnnl_memory_desc_t *md_of(dnnl_memory_t m) {
  const dnnl_memory_desc_t *md;
  CHK(dnnl_memory_get_memory_desc(m, &md));
  return md;
}

static dnnl_memory_desc_t plain(int nd, const dnnl_dims_t dims, dnnl_data_type_t dt,
                                dnnl_format_tag_t tag) {
  dnnl_memory_desc_t md;
  CHK(dnnl_memory_desc_init_by_tag(&md, nd, dims, dt, tag));
  return md;
}

static void fill(dnnl_memory_t m, float scale) {
  void *p;
  CHK(dnnl_memory_get_data_handle(m, &p));
  size_t n = dnnl_memory_desc_get_size(md_of(m)) / sizeof(float);
  for (size_t i = 0; i < n; i++)
    ((float *)p)[i] = scale * (float)((int)(i * 2654435761u % 2001) - 1000) / 1000.0f;
}

typedef struct {
  dnnl_primitive_desc_t pd;
  dnnl_primitive_t p;
} prim;

static prim make(const void *desc, dnnl_primitive_desc_t hint) {
  prim r;
  CHK(dnnl_primitive_desc_create(&r.pd, desc, NULL, engine, hint));
  CHK(dnnl_primitive_create(&r.p, r.pd));
  return r;
}

static const dnnl_memory_desc_t *q(prim r, dnnl_query_t what) {
  return dnnl_primitive_desc_query_md(r.pd, what, 0);
}

/* a reorder from `from` into memory of layout `to` (none when equal) */
typedef struct {
  dnnl_primitive_t p;
  dnnl_memory_t from, to;
} reorder;

static reorder reorder_into(dnnl_memory_t from, const dnnl_memory_desc_t *to) {
  reorder r = {NULL, from, from};
  if (dnnl_memory_desc_equal(md_of(from), to)) return r;
  r.to = memory_of(to);
  dnnl_primitive_desc_t pd;
  CHK(dnnl_reorder_primitive_desc_create(&pd, md_of(from), engine, to, engine, NULL));
  CHK(dnnl_primitive_create(&r.p, pd));
  return r;
}

/* into an existing memory */
static reorder reorder_to(dnnl_memory_t from, dnnl_memory_t to) {
  reorder r = {NULL, from, to};
  dnnl_primitive_desc_t pd;
  CHK(dnnl_reorder_primitive_desc_create(&pd, md_of(from), engine, md_of(to), engine, NULL));
  CHK(dnnl_primitive_create(&r.p, pd));
  return r;
}

static void run_reorder(reorder r) {
  if (!r.p) return;
  dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, r.from}, {DNNL_ARG_TO, r.to}};
  CHK(dnnl_primitive_execute(r.p, stream, 2, a));
}

static void run(prim r, int n, dnnl_exec_arg_t *a) {
  CHK(dnnl_primitive_execute(r.p, stream, n, a));
}

typedef struct {
  /* user memory: float32, plain */
  dnnl_memory_t x, w, b, y, dy, dx, dw, db, scale, shift, dscale, dshift;
  /* oneDNN's */
  dnnl_memory_t conv_out, mean, var, bn_ws, bn_out, pool_ws, pool_out, pool_dsrc, bn_dsrc;
  dnnl_memory_t conv_dx;
  reorder r_x, r_w, r_y, r_dy, r_dd_w, r_dd_d, r_w_bwd, r_dw, r_dx;
  prim conv, bn, pool, pool_b, bn_b, conv_bw, conv_bd;
  int need_dx;
} block;

static block setup(int N, int C, int K, int H, dnnl_data_type_t dt, int need_dx) {
  block k;
  memset(&k, 0, sizeof k);
  k.need_dx = need_dx;
  dnnl_dims_t xd = {N, C, H, H}, wd = {K, C, 3, 3}, bd = {K}, od = {N, K, H, H},
              pd_ = {N, K, H / 2, H / 2};
  dnnl_dims_t s1 = {1, 1}, p1 = {1, 1}, s2 = {2, 2}, k2 = {2, 2}, d0 = {0, 0}, p0 = {0, 0};
  dnnl_memory_desc_t ux = plain(4, xd, dnnl_f32, dnnl_nchw), uw = plain(4, wd, dnnl_f32, dnnl_oihw),
                     ub = plain(1, bd, dnnl_f32, dnnl_x), uy = plain(4, pd_, dnnl_f32, dnnl_nchw);
  k.x = memory_of(&ux), k.w = memory_of(&uw), k.b = memory_of(&ub), k.y = memory_of(&uy);
  k.dy = memory_of(&uy), k.dx = memory_of(&ux), k.dw = memory_of(&uw), k.db = memory_of(&ub);
  k.scale = memory_of(&ub), k.shift = memory_of(&ub), k.dscale = memory_of(&ub);
  k.dshift = memory_of(&ub);
  fill(k.x, 1), fill(k.w, 0.1f), fill(k.b, 0.01f), fill(k.dy, 1), fill(k.scale, 1),
      fill(k.shift, 0.1f);

  dnnl_memory_desc_t ax = plain(4, xd, dt, dnnl_format_tag_any),
                     aw = plain(4, wd, dt, dnnl_format_tag_any),
                     ao = plain(4, od, dt, dnnl_format_tag_any),
                     ap = plain(4, pd_, dt, dnnl_format_tag_any);
  dnnl_convolution_desc_t cd;
  CHK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct, &ax,
                                         &aw, &ub, &ao, s1, p1, p1));
  k.conv = make(&cd, NULL);
  k.r_x = reorder_into(k.x, q(k.conv, dnnl_query_src_md));
  k.r_w = reorder_into(k.w, q(k.conv, dnnl_query_weights_md));
  k.conv_out = memory_of(q(k.conv, dnnl_query_dst_md));

  unsigned flags = dnnl_use_scale | dnnl_use_shift | dnnl_fuse_norm_relu;
  dnnl_batch_normalization_desc_t bnd;
  CHK(dnnl_batch_normalization_forward_desc_init(&bnd, dnnl_forward_training, md_of(k.conv_out),
                                                 1e-5f, flags));
  k.bn = make(&bnd, NULL);
  k.bn_out = memory_of(q(k.bn, dnnl_query_dst_md));
  /* forward training's outputs: dst 0 the data, 1 the mean, 2 the variance */
  k.mean = memory_of(dnnl_primitive_desc_query_md(k.bn.pd, dnnl_query_dst_md, 1));
  k.var = memory_of(dnnl_primitive_desc_query_md(k.bn.pd, dnnl_query_dst_md, 2));
  k.bn_ws = memory_of(q(k.bn, dnnl_query_workspace_md));

  dnnl_pooling_v2_desc_t pld;
  CHK(dnnl_pooling_v2_forward_desc_init(&pld, dnnl_forward_training, dnnl_pooling_max,
                                        md_of(k.bn_out), &ap, s2, k2, d0, p0, p0));
  k.pool = make(&pld, NULL);
  k.pool_out = memory_of(q(k.pool, dnnl_query_dst_md));
  k.pool_ws = memory_of(q(k.pool, dnnl_query_workspace_md));
  k.r_y = reorder_to(k.pool_out, k.y);

  /* backward */
  dnnl_pooling_v2_desc_t plb;
  CHK(dnnl_pooling_v2_backward_desc_init(&plb, dnnl_pooling_max, md_of(k.bn_out), md_of(k.pool_out),
                                         s2, k2, d0, p0, p0));
  k.pool_b = make(&plb, k.pool.pd);
  k.r_dy = reorder_into(k.dy, q(k.pool_b, dnnl_query_diff_dst_md));
  k.pool_dsrc = memory_of(q(k.pool_b, dnnl_query_diff_src_md));

  dnnl_batch_normalization_desc_t bnb;
  CHK(dnnl_batch_normalization_backward_desc_init(&bnb, dnnl_backward, md_of(k.pool_dsrc),
                                                  md_of(k.conv_out), 1e-5f, flags));
  k.bn_b = make(&bnb, k.bn.pd);
  k.bn_dsrc = memory_of(q(k.bn_b, dnnl_query_diff_src_md));

  dnnl_memory_desc_t awf = plain(4, wd, dnnl_f32, dnnl_format_tag_any);
  dnnl_convolution_desc_t cw;
  CHK(dnnl_convolution_backward_weights_desc_init(&cw, dnnl_convolution_direct,
                                                  q(k.conv, dnnl_query_src_md), &awf, &ub,
                                                  md_of(k.bn_dsrc), s1, p1, p1));
  k.conv_bw = make(&cw, k.conv.pd);
  k.r_dd_w = reorder_into(k.bn_dsrc, q(k.conv_bw, dnnl_query_diff_dst_md));
  dnnl_memory_t dw_dnnl = memory_of(q(k.conv_bw, dnnl_query_diff_weights_md));
  k.r_dw = reorder_to(dw_dnnl, k.dw);
  if (need_dx) {
    dnnl_convolution_desc_t cbd;
    CHK(dnnl_convolution_backward_data_desc_init(&cbd, dnnl_convolution_direct, &ax, &aw,
                                                 md_of(k.bn_dsrc), s1, p1, p1));
    k.conv_bd = make(&cbd, k.conv.pd);
    k.r_dd_d = reorder_into(k.bn_dsrc, q(k.conv_bd, dnnl_query_diff_dst_md));
    k.r_w_bwd = reorder_into(k.w, q(k.conv_bd, dnnl_query_weights_md));
    k.conv_dx = memory_of(q(k.conv_bd, dnnl_query_diff_src_md));
    k.r_dx = reorder_to(k.conv_dx, k.dx);
  }
  return k;
}

static void step(block *k) {
  run_reorder(k->r_x), run_reorder(k->r_w);
  run(k->conv, 4,
      (dnnl_exec_arg_t[]){{DNNL_ARG_SRC, k->r_x.to},
                          {DNNL_ARG_WEIGHTS, k->r_w.to},
                          {DNNL_ARG_BIAS, k->b},
                          {DNNL_ARG_DST, k->conv_out}});
  run(k->bn, 7,
      (dnnl_exec_arg_t[]){{DNNL_ARG_SRC, k->conv_out},
                          {DNNL_ARG_DST, k->bn_out},
                          {DNNL_ARG_SCALE, k->scale},
                          {DNNL_ARG_SHIFT, k->shift},
                          {DNNL_ARG_MEAN, k->mean},
                          {DNNL_ARG_VARIANCE, k->var},
                          {DNNL_ARG_WORKSPACE, k->bn_ws}});
  run(k->pool, 3,
      (dnnl_exec_arg_t[]){{DNNL_ARG_SRC, k->bn_out},
                          {DNNL_ARG_DST, k->pool_out},
                          {DNNL_ARG_WORKSPACE, k->pool_ws}});
  run_reorder(k->r_y);
  run_reorder(k->r_dy);
  run(k->pool_b, 3,
      (dnnl_exec_arg_t[]){{DNNL_ARG_DIFF_DST, k->r_dy.to},
                          {DNNL_ARG_DIFF_SRC, k->pool_dsrc},
                          {DNNL_ARG_WORKSPACE, k->pool_ws}});
  /* oneDNN 2.6 refuses the backward without the shift when use_shift is set */
  run(k->bn_b, 10,
      (dnnl_exec_arg_t[]){{DNNL_ARG_SRC, k->conv_out},
                          {DNNL_ARG_MEAN, k->mean},
                          {DNNL_ARG_VARIANCE, k->var},
                          {DNNL_ARG_SCALE, k->scale},
                          {DNNL_ARG_SHIFT, k->shift},
                          {DNNL_ARG_WORKSPACE, k->bn_ws},
                          {DNNL_ARG_DIFF_DST, k->pool_dsrc},
                          {DNNL_ARG_DIFF_SRC, k->bn_dsrc},
                          {DNNL_ARG_DIFF_SCALE, k->dscale},
                          {DNNL_ARG_DIFF_SHIFT, k->dshift}});
  run_reorder(k->r_dd_w);
  run(k->conv_bw, 4,
      (dnnl_exec_arg_t[]){{DNNL_ARG_SRC, k->r_x.to},
                          {DNNL_ARG_DIFF_DST, k->r_dd_w.to},
                          {DNNL_ARG_DIFF_WEIGHTS, k->r_dw.from},
                          {DNNL_ARG_DIFF_BIAS, k->db}});
  run_reorder(k->r_dw);
  if (k->need_dx) {
    run_reorder(k->r_dd_d), run_reorder(k->r_w_bwd);
    run(k->conv_bd, 3,
        (dnnl_exec_arg_t[]){{DNNL_ARG_DIFF_DST, k->r_dd_d.to},
                            {DNNL_ARG_WEIGHTS, k->r_w_bwd.to},
                            {DNNL_ARG_DIFF_SRC, k->conv_dx}});
    run_reorder(k->r_dx);
  }
  CHK(dnnl_stream_wait(stream));
}

static void bench(const char *name, int N, int C, int K, int H, dnnl_data_type_t dt, int need_dx) {
  block k = setup(N, C, K, H, dt, need_dx);
  enum { WARM = 5, REPS = 31 };
  double t[REPS];
  for (int i = 0; i < WARM; i++) step(&k);
  for (int i = 0; i < REPS; i++) {
    double t0 = now();
    step(&k);
    t[i] = (now() - t0) * 1e3;
  }
  qsort(t, REPS, sizeof *t, by_value);
  printf("{\"bench\":\"conv_block\",\"impl\":\"onednn_blocked\",\"block\":\"%s\",\"dtype\":\"%s\","
         "\"ms\":%.4g}\n",
         name, dt == dnnl_bf16 ? "bf16" : "fp32", t[REPS / 2]);
  fflush(stdout);
}

int main(void) {
  CHK(dnnl_engine_create(&engine, dnnl_cpu, 0));
  CHK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
  for (int dt = 0; dt < 2; dt++) {
    dnnl_data_type_t d = dt ? dnnl_bf16 : dnnl_f32;
    bench("1x32_28", 64, 1, 32, 28, d, 0); /* the network's input needs no gradient */
    bench("32x64_14", 64, 32, 64, 14, d, 1);
  }
  return 0;
}
