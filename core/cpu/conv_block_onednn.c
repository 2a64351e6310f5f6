/*
 * conv_block_onednn.c -- the training block conv -> batch norm -> ReLU ->
 * max pool run end to end in oneDNN's blocked layouts (issue 19: the
 * reorders around each convolution and our plain-layout batch norm and
 * pooling cost more than the convolutions in a step; in bfloat16 the
 * block's activations stay bfloat16).
 *
 * The caller's arrays are float32 and plain (x NCHW, w OIHW, y NCHW, the
 * per-channel K vectors); everything between them lives in the layouts
 * oneDNN picks (format any):
 *
 *   forward   x -> [reorder] conv -> conv_out -> batch norm + ReLU (fused,
 *             dnnl_fuse_norm_relu: a ReLU mask in its workspace) -> bn_out
 *             -> max pool (argmax in its workspace) -> [reorder] -> y
 *   backward  dy -> [reorder] pool' -> batch norm' (reads conv_out, the
 *             statistics and the mask) -> conv' weights (x as the forward
 *             reordered it) and, where dx is wanted, conv' data ->
 *             [reorder] -> dx
 *
 * Batch norm, ReLU and the pool.  A block with a 2x2 stride-2 pool whose
 * tensors oneDNN lays out as nChw16c or NHWC (it picks NHWC for bfloat16
 * here), float32 or bfloat16, runs them as
 * bn_relu_pool_blocked16.c's AVX-512 passes instead of oneDNN's batch-norm
 * and pooling primitives (on an AVX2-only CPU, where oneDNN picks nChw8c,
 * in float32, bn_relu_pool_blocked8.c's: `lanes` 8).  The argmax, one
 * byte per output, goes where oneDNN's pooling workspace would; batch
 * norm's workspace is unused.
 * Other pools and layouts keep the primitives.  On nChw16c in float32
 * those passes write the pooled y and read its gradient dy as the
 * caller's NCHW arrays themselves (`nchw_edge`), so neither y's reorder
 * nor dy's runs.  Where nothing wants x's gradient (a network's first
 * block) and the convolution is small -- stride 1, at most 27 taps
 * (C x R x S), float32 arithmetic -- the backward hands batch norm's input
 * gradient straight to the convolution's weight and bias gradients
 * (`dw_fused`): the gradient the size of the convolution's output is
 * never written and oneDNN's weight-gradient primitive does not run.
 *
 * What backward needs from forward -- conv_out, the batch mean and
 * variance, the two workspaces, x in the convolution's layout (where that
 * is not the caller's: the weight gradient's reorder saved, ~0.07 ms of the
 * example network's step for 1.6 MB) -- is the *state*: one caller-owned block
 * per forward (a tensor the node keeps), laid out by the plan.  Every other
 * intermediate lives in a shared arena for the length of one call.
 *
 * Precision.  conv.math = CNN_BFLOAT16 (cnn.autocast('bfloat16')): the
 * convolution's inputs are rounded to bfloat16 by the reorders in and its
 * output, batch norm, ReLU and the pool run in bfloat16 (statistics in
 * float32), as PyTorch's CPU autocast leaves a convolution's output; the
 * weight and input gradients and y are float32.  Otherwise all float32 --
 * also for a bfloat16 block of at most 3 input channels (rounds_in_float32:
 * an image's first block), where oneDNN's bfloat16 convolution is slower
 * than its float32 one: x and w are rounded to bfloat16 (into the arena)
 * and the whole block runs in float32 -- the convolution's arithmetic the
 * same (products of bfloat16 values are exact in float32, summed in
 * float32), its output, batch norm and the gradients kept in float32.
 *
 * Plans.  Creating the seven primitives costs far more than a step, so
 * each block shape gets one cached plan (at most CACHE_SIZE, least recently
 * used evicted); a shape oneDNN has no fast primitive for (it would pick a
 * reference loop, "ref:any") is cached as unsupported and the caller runs
 * the layers one by one.
 *
 * Invariants: `G.lock` serialises the cache, the arena and the stream; a
 * plan's memory objects get their data handles right before each run.
 */
#include <dnnl.h>
#include <dnnl_debug.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/onednn_conv.h"
#include "cpu/onednn_util.h"

#define CACHE_SIZE  16
#define STATE_ALIGN 64 /* the state's base is a 64-byte aligned host block */
#define MAX_BUFS    40 /* a plan makes 37 */
#define MAX_PRIMS   24 /* 7 primitives and up to 10 reorders */

/* The seven primitives, in the order of the plan's fields. */
enum { PD_CONV, PD_BN, PD_POOL, PD_POOL_B, PD_BN_B, PD_CONV_BW, PD_CONV_BD, NPRIM };

/* Where a memory object's data is: the caller's array, the forward's
 * state, or the arena. */
typedef enum { IN_USER = 0, IN_STATE, IN_ARENA } place;

typedef struct {
  dnnl_memory_t m;
  place where;
  size_t off; /* in the state or the arena */
} buf;

/* A reorder between two buffers; p NULL when the layouts agree (then
 * from == to). */
typedef struct {
  dnnl_primitive_t p;
  buf *from, *to;
} reorder;

typedef struct {
  int used, unsupported;
  uint64_t last_use;
  cnn_conv_block_shape shape;
  size_t state_bytes, arena_bytes;
  int winograd;     /* the convolutions are oneDNN's Winograd ones (conv_winograd.c) */
  int lanes;        /* the CPU's channel block for own_bn: 16 (AVX-512), 8 (AVX2) or 0 */
  int own_bn;       /* batch norm, ReLU and pool by bn_relu_pool_blocked16.c (or 8.c): 0,
                       or the layout of their tensors (1 nChw16c or nChw8c, 2 NHWC) */
  int nchw_edge;    /* own_bn 1 in float32: y written, dy read in the caller's NCHW */
  int dw_fused;     /* own_bn, float32, a small stride-1 convolution: without dx, batch norm's
                       input gradient goes straight into dw and db */
  int round_in;     /* bfloat16 shape run in float32 on rounded x and w (rounds_in_float32) */
  size_t round_off; /* in the arena: the rounded x, then w (round_in) */
  dnnl_primitive_t conv_f, bn_f, pool_f, pool_b, bn_b, conv_bw, conv_bd;
  /* forward */
  buf x, x_conv, w, w_conv, bias, conv_out, scale, shift, mean, var, bn_ws, bn_out, pool_out,
      pool_ws, y;
  /* backward */
  buf dy, dy_pool, pool_dsrc, bn_dsrc, dscale, dshift, x_bw, dd_bw, dw_bw, dw, db, dd_bd, w_bd,
      dx_bd, dx;
  reorder r_x, r_w, r_y, r_dy, r_x_bw, r_dd_bw, r_dw, r_dd_bd, r_w_bd, r_dx;
  buf scratch[NPRIM];  /* each primitive's scratchpad: one arena region, shared */
  buf *bufs[MAX_BUFS]; /* every buffer made, for binding and destruction */
  int nbufs;
  dnnl_primitive_t prims[MAX_PRIMS]; /* every primitive made (reorders too) */
  int nprims;
  float *ones, *zeros, *spare[3]; /* K each: gamma/beta when absent; unwanted gradients */
} plan;

static struct {
  pthread_mutex_t lock;
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  plan plans[CACHE_SIZE];
  uint64_t clock;
  cnn_onednn_arena arena;
} G = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char OP[] = "conv_bn_relu_pool";

/* ---- shapes ---------------------------------------------------------------------------- */

static int conv_equal(const cnn_conv_shape *a, const cnn_conv_shape *b) {
  return a->N == b->N && a->C == b->C && a->H == b->H && a->W == b->W && a->K == b->K &&
         a->R == b->R && a->S == b->S && a->OH == b->OH && a->OW == b->OW && a->sh == b->sh &&
         a->sw == b->sw && a->pt == b->pt && a->pb == b->pb && a->pl == b->pl && a->pr == b->pr &&
         a->dh == b->dh && a->dw == b->dw && a->groups == b->groups && a->math == b->math &&
         a->allow_winograd == b->allow_winograd;
}

static int shape_equal(const cnn_conv_block_shape *a, const cnn_conv_block_shape *b) {
  return conv_equal(&a->conv, &b->conv) && a->has_bias == b->has_bias && a->pk[0] == b->pk[0] &&
         a->pk[1] == b->pk[1] && a->ps[0] == b->ps[0] && a->ps[1] == b->ps[1] && a->PH == b->PH &&
         a->PW == b->PW && a->eps == b->eps;
}

/* ---- buffers and reorders ------------------------------------------------------------------ */

static const dnnl_memory_desc_t *md_of(const buf *b) {
  const dnnl_memory_desc_t *md = NULL;
  dnnl_memory_get_memory_desc(b->m, &md);
  return md;
}

/* A memory object of layout md placed at *cursor of `where` (advanced). */
static dnnl_status_t buf_make(plan *pl, buf *b, const dnnl_memory_desc_t *md, place where,
                              size_t *cursor) {
  if (pl->nbufs == MAX_BUFS) return dnnl_out_of_memory; /* a bug: MAX_BUFS too small */
  dnnl_status_t st = dnnl_memory_create(&b->m, md, G.engine, DNNL_MEMORY_NONE);
  if (st != dnnl_success) return st;
  pl->bufs[pl->nbufs++] = b;
  b->where = where;
  if (where == IN_USER) return dnnl_success;
  size_t align = where == IN_STATE ? STATE_ALIGN : CNN_ONEDNN_ALIGN;
  b->off = *cursor;
  *cursor += (dnnl_memory_desc_get_size(md) + align - 1) / align * align;
  return dnnl_success;
}

/* Creates the primitive of pd into *p and keeps it for destruction. */
static dnnl_status_t prim_make(plan *pl, dnnl_primitive_desc_t pd, dnnl_primitive_t *p) {
  if (pl->nprims == MAX_PRIMS) return dnnl_out_of_memory; /* a bug: MAX_PRIMS too small */
  dnnl_status_t st = dnnl_primitive_create(p, pd);
  if (st == dnnl_success) pl->prims[pl->nprims++] = *p;
  return st;
}

static dnnl_status_t user_buf(plan *pl, buf *b, int nd, const dnnl_dims_t dims,
                              dnnl_format_tag_t tag) {
  dnnl_memory_desc_t md;
  dnnl_status_t st = dnnl_memory_desc_init_by_tag(&md, nd, dims, dnnl_f32, tag);
  return st == dnnl_success ? buf_make(pl, b, &md, IN_USER, NULL) : st;
}

static dnnl_status_t reorder_prim(plan *pl, reorder *r) {
  dnnl_primitive_desc_t pd;
  dnnl_status_t st = dnnl_reorder_primitive_desc_create(&pd, md_of(r->from), G.engine, md_of(r->to),
                                                        G.engine, NULL);
  if (st != dnnl_success) return st;
  st = prim_make(pl, pd, &r->p);
  dnnl_primitive_desc_destroy(pd);
  return st;
}

/* The reorder between a buffer at the block's edge (`end`: the caller's
 * array, or a buffer another primitive made) and the layout `inner` a
 * primitive uses: none when the two agree (the primitive uses `end`), else
 * tmp, made at *cursor of the arena.  An input runs end -> tmp (the
 * primitive reads r->to), an output tmp -> end (it writes r->from). */
static dnnl_status_t bridge(plan *pl, reorder *r, buf *end, buf *tmp,
                            const dnnl_memory_desc_t *inner, int input, place where,
                            size_t *cursor) {
  r->from = end, r->to = end;
  if (dnnl_memory_desc_equal(md_of(end), inner)) return dnnl_success;
  dnnl_status_t st = buf_make(pl, tmp, inner, where, cursor);
  if (input)
    r->to = tmp;
  else
    r->from = tmp;
  return st == dnnl_success ? reorder_prim(pl, r) : st;
}

static dnnl_status_t feed(plan *pl, reorder *r, buf *src, buf *tmp, const dnnl_memory_desc_t *want,
                          size_t *cursor) {
  return bridge(pl, r, src, tmp, want, 1, IN_ARENA, cursor);
}

static dnnl_status_t drain(plan *pl, reorder *r, buf *dst, buf *tmp, const dnnl_memory_desc_t *have,
                           size_t *cursor) {
  return bridge(pl, r, dst, tmp, have, 0, IN_ARENA, cursor);
}

/* ---- primitives ------------------------------------------------------------------------------ */

static const dnnl_memory_desc_t *q(dnnl_primitive_desc_t pd, dnnl_query_t what, int i) {
  return dnnl_primitive_desc_query_md(pd, what, i);
}

/* The primitive of op descriptor `desc` (hint: its forward), refusing
 * oneDNN's reference loops; *pd kept for queries (the caller destroys). */
static dnnl_status_t make_prim(plan *pl, const void *desc, dnnl_primitive_desc_t hint,
                               dnnl_primitive_desc_t *pd, dnnl_primitive_t *p) {
  dnnl_primitive_attr_t attr;
  dnnl_status_t st = dnnl_primitive_attr_create(&attr);
  if (st != dnnl_success) return st;
  /* user scratchpads (in the arena): the library's would be allocated and
   * freed on every run */
  st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  if (st == dnnl_success) st = dnnl_primitive_desc_create(pd, desc, attr, G.engine, hint);
  dnnl_primitive_attr_destroy(attr);
  if (st == dnnl_success && (st = cnn_onednn_refuse_reference(*pd)) != dnnl_success) *pd = NULL;
  return st == dnnl_success ? prim_make(pl, *pd, p) : st;
}

/* Each primitive's scratchpad, all at offset *arena (they run one at a
 * time), which grows by the largest. */
static dnnl_status_t build_scratch(plan *pl, dnnl_primitive_desc_t *pd, size_t *arena) {
  size_t base = *arena, most = 0;
  for (int i = 0; i < NPRIM; i++) {
    const dnnl_memory_desc_t *md = q(pd[i], dnnl_query_scratchpad_md, 0);
    size_t at = base;
    dnnl_status_t st = buf_make(pl, &pl->scratch[i], md, IN_ARENA, &at);
    if (st != dnnl_success) return st;
    if (at - base > most) most = at - base;
  }
  *arena = base + most;
  return dnnl_success;
}

typedef struct {
  dnnl_memory_desc_t x, w, b, y, k;  /* the caller's: plain float32 */
  dnnl_memory_desc_t ax, aw, ao, ap; /* format any, in the block's data type */
  dnnl_memory_desc_t awf, axf;       /* float32 any: weight and input gradients */
  dnnl_dims_t stride, dilate, pad_l, pad_r, pk, ps, p0, d0;
} block_mds;

static void init_mds(const cnn_conv_block_shape *s, block_mds *m) {
  const cnn_conv_shape *c = &s->conv;
  dnnl_data_type_t dt = c->math == CNN_BFLOAT16 ? dnnl_bf16 : dnnl_f32;
  dnnl_dims_t xd = {c->N, c->C, c->H, c->W}, wd = {c->K, c->C, c->R, c->S}, kd = {c->K},
              od = {c->N, c->K, c->OH, c->OW}, pd = {c->N, c->K, s->PH, s->PW};
  dnnl_memory_desc_init_by_tag(&m->x, 4, xd, dnnl_f32, dnnl_nchw);
  dnnl_memory_desc_init_by_tag(&m->w, 4, wd, dnnl_f32, dnnl_oihw);
  dnnl_memory_desc_init_by_tag(&m->k, 1, kd, dnnl_f32, dnnl_x);
  dnnl_memory_desc_init_by_tag(&m->y, 4, pd, dnnl_f32, dnnl_nchw);
  dnnl_memory_desc_init_by_tag(&m->ax, 4, xd, dt, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&m->aw, 4, wd, dt, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&m->ao, 4, od, dt, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&m->ap, 4, pd, dt, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&m->awf, 4, wd, dnnl_f32, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&m->axf, 4, xd, dnnl_f32, dnnl_format_tag_any);
  m->b = m->k;
  m->stride[0] = c->sh, m->stride[1] = c->sw;
  m->dilate[0] = c->dh - 1, m->dilate[1] = c->dw - 1;
  m->pad_l[0] = c->pt, m->pad_l[1] = c->pl;
  m->pad_r[0] = c->pb, m->pad_r[1] = c->pr;
  m->pk[0] = s->pk[0], m->pk[1] = s->pk[1];
  m->ps[0] = s->ps[0], m->ps[1] = s->ps[1];
  m->p0[0] = m->p0[1] = 0, m->d0[0] = m->d0[1] = 0;
}

static const unsigned BN_FLAGS = dnnl_use_scale | dnnl_use_shift | dnnl_fuse_norm_relu;

/* The plan's convolution algorithm (all three passes alike). */
static dnnl_alg_kind_t conv_alg(const plan *pl) {
  return pl->winograd ? dnnl_convolution_winograd : dnnl_convolution_direct;
}

/* The forward primitives and the buffers they use. */
static dnnl_status_t build_forward(plan *pl, block_mds *m, dnnl_primitive_desc_t *pd, size_t *state,
                                   size_t *arena) {
  const cnn_conv_block_shape *s = &pl->shape;
  dnnl_convolution_desc_t cd;
  dnnl_batch_normalization_desc_t bd;
  dnnl_pooling_v2_desc_t qd;
  dnnl_status_t st = dnnl_dilated_convolution_forward_desc_init(
      &cd, dnnl_forward_training, conv_alg(pl), &m->ax, &m->aw, s->has_bias ? &m->b : NULL, &m->ao,
      m->stride, m->dilate, m->pad_l, m->pad_r);
#define TRY(call)                                                                                  \
  if (st == dnnl_success) st = (call)
  TRY(make_prim(pl, &cd, NULL, &pd[PD_CONV], &pl->conv_f));
  /* x as the convolution reads it is kept for the weight gradient (state) */
  TRY(bridge(pl, &pl->r_x, &pl->x, &pl->x_conv, q(pd[PD_CONV], dnnl_query_src_md, 0), 1, IN_STATE,
             state));
  TRY(feed(pl, &pl->r_w, &pl->w, &pl->w_conv, q(pd[PD_CONV], dnnl_query_weights_md, 0), arena));
  TRY(buf_make(pl, &pl->conv_out, q(pd[PD_CONV], dnnl_query_dst_md, 0), IN_STATE, state));
  TRY(dnnl_batch_normalization_forward_desc_init(&bd, dnnl_forward_training, md_of(&pl->conv_out),
                                                 s->eps, BN_FLAGS));
  TRY(make_prim(pl, &bd, NULL, &pd[PD_BN], &pl->bn_f));
  /* training's outputs: dst 0 the data, 1 the mean, 2 the variance */
  TRY(buf_make(pl, &pl->bn_out, q(pd[PD_BN], dnnl_query_dst_md, 0), IN_ARENA, arena));
  TRY(buf_make(pl, &pl->mean, q(pd[PD_BN], dnnl_query_dst_md, 1), IN_STATE, state));
  TRY(buf_make(pl, &pl->var, q(pd[PD_BN], dnnl_query_dst_md, 2), IN_STATE, state));
  TRY(buf_make(pl, &pl->bn_ws, q(pd[PD_BN], dnnl_query_workspace_md, 0), IN_STATE, state));
  TRY(dnnl_pooling_v2_forward_desc_init(&qd, dnnl_forward_training, dnnl_pooling_max,
                                        md_of(&pl->bn_out), &m->ap, m->ps, m->pk, m->d0, m->p0,
                                        m->p0));
  TRY(make_prim(pl, &qd, NULL, &pd[PD_POOL], &pl->pool_f));
  TRY(buf_make(pl, &pl->pool_ws, q(pd[PD_POOL], dnnl_query_workspace_md, 0), IN_STATE, state));
  TRY(drain(pl, &pl->r_y, &pl->y, &pl->pool_out, q(pd[PD_POOL], dnnl_query_dst_md, 0), arena));
  return st;
}

/* x for the weight gradient: the forward's reordered x in the state where
 * the layouts agree (no second reorder), else x reordered again. */
static dnnl_status_t feed_x_bw(plan *pl, const dnnl_memory_desc_t *want, size_t *arena) {
  if (!dnnl_memory_desc_equal(md_of(pl->r_x.to), want))
    return feed(pl, &pl->r_x_bw, &pl->x, &pl->x_bw, want, arena);
  pl->r_x_bw.p = NULL;
  pl->r_x_bw.from = pl->r_x_bw.to = pl->r_x.to;
  return dnnl_success;
}

/* The backward primitives (hinted by the forward ones) and their buffers;
 * the arena cursor starts again at 0 (forward's temporaries are dead). */
static dnnl_status_t build_backward(plan *pl, block_mds *m, dnnl_primitive_desc_t *pd,
                                    size_t *arena) {
  const cnn_conv_block_shape *s = &pl->shape;
  dnnl_pooling_v2_desc_t qd;
  dnnl_batch_normalization_desc_t bd;
  dnnl_convolution_desc_t wd, dd;
  dnnl_status_t st = dnnl_pooling_v2_backward_desc_init(&qd, dnnl_pooling_max, md_of(&pl->bn_out),
                                                        q(pd[PD_POOL], dnnl_query_dst_md, 0), m->ps,
                                                        m->pk, m->d0, m->p0, m->p0);
  TRY(make_prim(pl, &qd, pd[PD_POOL], &pd[PD_POOL_B], &pl->pool_b));
  TRY(feed(pl, &pl->r_dy, &pl->dy, &pl->dy_pool, q(pd[PD_POOL_B], dnnl_query_diff_dst_md, 0),
           arena));
  TRY(buf_make(pl, &pl->pool_dsrc, q(pd[PD_POOL_B], dnnl_query_diff_src_md, 0), IN_ARENA, arena));
  TRY(dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, md_of(&pl->pool_dsrc),
                                                  md_of(&pl->conv_out), s->eps, BN_FLAGS));
  TRY(make_prim(pl, &bd, pd[PD_BN], &pd[PD_BN_B], &pl->bn_b));
  TRY(buf_make(pl, &pl->bn_dsrc, q(pd[PD_BN_B], dnnl_query_diff_src_md, 0), IN_ARENA, arena));
  TRY(dnnl_dilated_convolution_backward_weights_desc_init(
      &wd, conv_alg(pl), q(pd[PD_CONV], dnnl_query_src_md, 0), &m->awf, s->has_bias ? &m->b : NULL,
      &m->ao, m->stride, m->dilate, m->pad_l, m->pad_r));
  TRY(make_prim(pl, &wd, pd[PD_CONV], &pd[PD_CONV_BW], &pl->conv_bw));
  TRY(feed_x_bw(pl, q(pd[PD_CONV_BW], dnnl_query_src_md, 0), arena));
  TRY(feed(pl, &pl->r_dd_bw, &pl->bn_dsrc, &pl->dd_bw, q(pd[PD_CONV_BW], dnnl_query_diff_dst_md, 0),
           arena));
  TRY(drain(pl, &pl->r_dw, &pl->dw, &pl->dw_bw, q(pd[PD_CONV_BW], dnnl_query_diff_weights_md, 0),
            arena));
  TRY(dnnl_dilated_convolution_backward_data_desc_init(&dd, conv_alg(pl), &m->axf, &m->aw, &m->ao,
                                                       m->stride, m->dilate, m->pad_l, m->pad_r));
  TRY(make_prim(pl, &dd, pd[PD_CONV], &pd[PD_CONV_BD], &pl->conv_bd));
  TRY(feed(pl, &pl->r_dd_bd, &pl->bn_dsrc, &pl->dd_bd, q(pd[PD_CONV_BD], dnnl_query_diff_dst_md, 0),
           arena));
  TRY(feed(pl, &pl->r_w_bd, &pl->w, &pl->w_bd, q(pd[PD_CONV_BD], dnnl_query_weights_md, 0), arena));
  TRY(drain(pl, &pl->r_dx, &pl->dx, &pl->dx_bd, q(pd[PD_CONV_BD], dnnl_query_diff_src_md, 0),
            arena));
  return st;
}

/* The block's element type: bfloat16 (1) or float32 (0). */
static int block_bf16(const plan *pl) {
  return pl->shape.conv.math == CNN_BFLOAT16 && !pl->round_in;
}

/* The layout of `md` over dims (N, C, H, W) in the block's element type:
 * 1 blocked by the plan's lanes (nChw16c or nChw8c), 2 NHWC, 0 anything
 * else. */
static int layout_of(const plan *pl, const dnnl_memory_desc_t *md, int64_t N, int64_t C, int64_t H,
                     int64_t W) {
  dnnl_dims_t d = {N, C, H, W};
  dnnl_data_type_t dt = block_bf16(pl) ? dnnl_bf16 : dnnl_f32;
  dnnl_format_tag_t tags[2] = {pl->lanes == 8 ? dnnl_nChw8c : dnnl_nChw16c, dnnl_nhwc};
  for (int i = 0; i < 2; i++) {
    dnnl_memory_desc_t want;
    if (dnnl_memory_desc_init_by_tag(&want, 4, d, dt, tags[i]) == dnnl_success &&
        dnnl_memory_desc_equal(md, &want))
      return i + 1;
  }
  return 0;
}

/* The layout (1 blocked, 2 NHWC) all of the block's pool tensors share
 * where the pool can leave oneDNN -- 2x2 stride 2, whole channel blocks,
 * an AVX-512 CPU (or an AVX2 one in float32), oneDNN's workspace large
 * enough for a byte per output -- else 0. */
static int pool_layout(const plan *pl, dnnl_primitive_desc_t *pd) {
  const cnn_conv_block_shape *s = &pl->shape;
  const cnn_conv_shape *c = &s->conv;
  if (s->pk[0] != 2 || s->pk[1] != 2 || s->ps[0] != 2 || s->ps[1] != 2 || !pl->lanes ||
      c->K % pl->lanes || (pl->lanes == 8 && block_bf16(pl)))
    return 0;
  int64_t N = c->N, K = c->K;
  int l = layout_of(pl, md_of(&pl->bn_out), N, K, c->OH, c->OW);
  int same = l && layout_of(pl, q(pd[PD_POOL], dnnl_query_dst_md, 0), N, K, s->PH, s->PW) == l &&
             layout_of(pl, q(pd[PD_POOL_B], dnnl_query_diff_dst_md, 0), N, K, s->PH, s->PW) == l &&
             layout_of(pl, md_of(&pl->pool_dsrc), N, K, c->OH, c->OW) == l;
  size_t taps = (size_t)(N * K * s->PH * s->PW);
  return same && dnnl_memory_desc_get_size(md_of(&pl->pool_ws)) >= taps ? l : 0;
}

/* As pool_layout, where batch norm + ReLU join the pool
 * (bn_relu_pool_blocked16.c, float32 or bfloat16): the convolution's
 * output and batch norm's input gradient in that layout too. */
static int own_bn_layout(const plan *pl, dnnl_primitive_desc_t *pd) {
  const cnn_conv_shape *c = &pl->shape.conv;
  int l = pool_layout(pl, pd);
  int same = l && layout_of(pl, md_of(&pl->conv_out), c->N, c->K, c->OH, c->OW) == l &&
             layout_of(pl, md_of(&pl->bn_dsrc), c->N, c->K, c->OH, c->OW) == l;
  return same ? l : 0;
}

/* Whether the backward without dx may fold batch norm's input gradient
 * into the weight gradient (bn_relu_pool_blocked16.c's backward_dw). */
static int weight_gradient_fuses(const plan *pl) {
  const cnn_conv_shape *c = &pl->shape.conv;
  return pl->own_bn && !block_bf16(pl) && c->sh == 1 && c->sw == 1 && c->dh == 1 && c->dw == 1 &&
         c->groups == 1 && c->C * c->R * c->S <= CNN_B16_MAX_TAPS;
}

/* The caller's buffers (handles set per call). */
static dnnl_status_t build_user(plan *pl) {
  dnnl_status_t st = dnnl_success;
  const cnn_conv_shape *c = &pl->shape.conv;
  dnnl_dims_t xd = {c->N, c->C, c->H, c->W}, wd = {c->K, c->C, c->R, c->S}, kd = {c->K},
              yd = {c->N, c->K, pl->shape.PH, pl->shape.PW};
  buf *xs[] = {&pl->x, &pl->dx}, *ws[] = {&pl->w, &pl->dw}, *ys[] = {&pl->y, &pl->dy};
  buf *ks[] = {&pl->bias, &pl->scale, &pl->shift, &pl->db, &pl->dscale, &pl->dshift};
  for (int i = 0; i < 2; i++) {
    TRY(user_buf(pl, xs[i], 4, xd, dnnl_nchw));
    TRY(user_buf(pl, ws[i], 4, wd, dnnl_oihw));
    TRY(user_buf(pl, ys[i], 4, yd, dnnl_nchw));
  }
  for (int i = 0; i < 6; i++) TRY(user_buf(pl, ks[i], 1, kd, dnnl_x));
  return st;
}
#undef TRY

static void plan_destroy(plan *pl) {
  for (int i = 0; i < pl->nprims; i++) dnnl_primitive_destroy(pl->prims[i]);
  for (int i = 0; i < pl->nbufs; i++) dnnl_memory_destroy(pl->bufs[i]->m);
  free(pl->ones);
  memset(pl, 0, sizeof *pl);
}

/* The constant and spare K-vectors: gamma = 1 and beta = 0 where the
 * layer has none, and targets for gradients nobody wants. */
static int plan_vectors(plan *pl) {
  int64_t K = pl->shape.conv.K;
  pl->ones = malloc(5 * (size_t)K * sizeof(float));
  if (!pl->ones) return -1;
  pl->zeros = pl->ones + K;
  for (int i = 0; i < 3; i++) pl->spare[i] = pl->ones + (2 + i) * K;
  for (int64_t k = 0; k < K; k++) pl->ones[k] = 1.0f, pl->zeros[k] = 0.0f;
  return 0;
}

/* 1 where a bfloat16 block runs in float32 on x and w rounded to bfloat16:
 * up to 3 input channels and 49 taps a weight (C x R x S), where oneDNN's
 * bfloat16 convolution (it pairs input channels) is slower than its float32
 * one.  A block's forward + backward (batch 64, 2 threads, this Xeon,
 * bfloat16 / float32-on-rounded ms): C=1 K=32 28x28 3x3 1.50 / 1.44, 5x5
 * 2.07 / 1.66, 7x7 3.48 / 1.87; C=1 K=64 3.01 / 2.71; C=2 3x3 1.62 / 1.55;
 * C=3 K=32 32x32 3x3 2.17 / 2.13, K=64 4.32 / 4.16; but C=3 5x5 3.00 /
 * 3.20, and C=4 and C=8 3x3 2.23 / 5.65 and 2.23 / 8.57 (oneDNN's float32
 * kernels there are slow). */
static int rounds_in_float32(const cnn_conv_shape *c) {
  return c->math == CNN_BFLOAT16 && c->C <= 3 && c->C * c->R * c->S <= 49;
}

static int64_t x_count(const cnn_conv_shape *c) { return c->N * c->C * c->H * c->W; }
static int64_t w_count(const cnn_conv_shape *c) { return c->K * c->C * c->R * c->S; }

/* Builds pl for shape s: 0, -2 (oneDNN has no fast primitive: cached as
 * unsupported), or -1 (out of memory; error set). */
static int plan_build(plan *pl, const cnn_conv_block_shape *s, int winograd) {
  memset(pl, 0, sizeof *pl);
  pl->shape = *s;
  pl->winograd = winograd;
  pl->round_in = rounds_in_float32(&s->conv);
  cnn_conv_block_shape arith = *s; /* the primitives' arithmetic */
  if (pl->round_in) arith.conv.math = CNN_FLOAT32;
  block_mds m;
  init_mds(&arith, &m);
  dnnl_primitive_desc_t pd[NPRIM] = {NULL};
  size_t state = 0, arena_f = 0, arena_b = 0;
  dnnl_status_t st = build_user(pl);
  if (st == dnnl_success) st = build_forward(pl, &m, pd, &state, &arena_f);
  if (st == dnnl_success) st = build_backward(pl, &m, pd, &arena_b);
  size_t arena = arena_f > arena_b ? arena_f : arena_b;
  if (st == dnnl_success) st = build_scratch(pl, pd, &arena);
  if (pl->round_in) { /* the rounded x and w, after everything else */
    pl->round_off = arena;
    arena += cnn_onednn_round_up((size_t)x_count(&s->conv) * sizeof(float)) +
             cnn_onednn_round_up((size_t)w_count(&s->conv) * sizeof(float));
  }
  pl->lanes = cnn_cpu_use_avx512() ? 16 : cnn_cpu_use_avx2() ? 8 : 0;
  if (st == dnnl_success) pl->own_bn = own_bn_layout(pl, pd);
  pl->nchw_edge = pl->own_bn == 1 && !block_bf16(pl) && pl->r_y.p && pl->r_dy.p &&
                  s->PH * s->PW <= INT32_MAX / 16;
  pl->dw_fused = weight_gradient_fuses(pl);
  for (int i = 0; i < NPRIM; i++)
    if (pd[i]) dnnl_primitive_desc_destroy(pd[i]);
  if (st != dnnl_success && winograd) { /* the Winograd kernels refused: direct ones */
    plan_destroy(pl);
    return plan_build(pl, s, 0);
  }
  if (st != dnnl_success) {
    plan_destroy(pl);
    pl->used = pl->unsupported = 1, pl->shape = *s;
    return -2;
  }
  pl->used = 1;
  pl->state_bytes = state;
  pl->arena_bytes = arena;
  if (plan_vectors(pl)) {
    plan_destroy(pl);
    cnn_set_error("%s: out of memory for a plan of %lld channels", OP, (long long)s->conv.K);
    return -1;
  }
  return 0;
}

/* The plan of s under the lock: NULL with *rc -2 (unsupported) or -1. */
static plan *plan_of(const cnn_conv_block_shape *s, int *rc) {
  dnnl_status_t st = cnn_onednn_stream_open(&G.engine, &G.stream);
  if (st != dnnl_success) {
    cnn_set_error("%s: oneDNN engine creation failed (%s)", OP, dnnl_status2str(st));
    return *rc = -1, NULL;
  }
  plan *lru = &G.plans[0];
  for (int i = 0; i < CACHE_SIZE; i++) {
    plan *pl = &G.plans[i];
    if (pl->used && shape_equal(&pl->shape, s)) {
      pl->last_use = ++G.clock;
      *rc = pl->unsupported ? -2 : 0;
      return pl->unsupported ? NULL : pl;
    }
    if (!pl->used || (lru->used && pl->last_use < lru->last_use)) lru = pl;
  }
  if (lru->used) plan_destroy(lru);
  *rc = plan_build(lru, s, cnn_onednn_conv_winograd(&s->conv));
  lru->last_use = ++G.clock;
  return *rc ? NULL : lru;
}

/* ---- running ---------------------------------------------------------------------------------- */

static void bind(plan *pl, void *state, void *arena) {
  for (int i = 0; i < pl->nbufs; i++) {
    buf *b = pl->bufs[i];
    if (b->where == IN_USER) continue;
    char *base = b->where == IN_STATE ? state : arena;
    dnnl_memory_set_data_handle(b->m, base + b->off);
  }
}

static void set(buf *b, const void *p) { dnnl_memory_set_data_handle(b->m, (void *)p); }

static dnnl_status_t run(dnnl_primitive_t p, int n, const dnnl_exec_arg_t *a) {
  return dnnl_primitive_execute(p, G.stream, n, a);
}

static dnnl_status_t run_reorder(const reorder *r) {
  if (!r->p) return dnnl_success;
  dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, r->from->m}, {DNNL_ARG_TO, r->to->m}};
  return run(r->p, 2, a);
}

static void *data_of(const buf *b) {
  void *p = NULL;
  dnnl_memory_get_data_handle(b->m, &p);
  return p;
}

/* bn_relu_pool_blocked16.c's (or 8.c's) layout for the plan */
static int own_bn_kernel_layout(const plan *pl) {
  return pl->nchw_edge ? CNN_B16_NCHW_EDGE : pl->own_bn == 2 ? CNN_B16_NHWC : CNN_B16_BLOCKED;
}

/* Batch norm, ReLU and the pool through bn_relu_pool_blocked16.c: y into
 * the caller's array (nchw_edge) or into r_y's source. */
static dnnl_status_t own_bn_forward(plan *pl) {
  dnnl_status_t st = dnnl_stream_wait(G.stream);
  const cnn_conv_shape *c = &pl->shape.conv;
  void *y = pl->nchw_edge ? data_of(&pl->y) : data_of(pl->r_y.from);
  if (st == dnnl_success &&
      cnn_cpu_bn_relu_pool_kernel(pl->lanes)->forward(
          data_of(&pl->conv_out), block_bf16(pl), own_bn_kernel_layout(pl), c->N, c->K / pl->lanes,
          c->OH, c->OW, data_of(&pl->scale), data_of(&pl->shift), pl->shape.eps, data_of(&pl->mean),
          data_of(&pl->var), y, data_of(&pl->pool_ws)))
    st = dnnl_out_of_memory;
  return st;
}

/* The pass's dy: the caller's array (nchw_edge: r_dy's target takes the
 * kernel's copy of it in nChw16c, *dy_copy) or r_dy's target. */
static const void *own_bn_dy(const plan *pl, float **dy_copy) {
  *dy_copy = pl->nchw_edge ? data_of(pl->r_dy.to) : NULL;
  return pl->nchw_edge ? data_of(&pl->dy) : data_of(pl->r_dy.to);
}

static dnnl_status_t own_bn_backward(plan *pl) {
  dnnl_status_t st = dnnl_stream_wait(G.stream);
  const cnn_conv_shape *c = &pl->shape.conv;
  float *dy_copy;
  const void *dy = own_bn_dy(pl, &dy_copy);
  if (st == dnnl_success &&
      cnn_cpu_bn_relu_pool_kernel(pl->lanes)->backward(
          data_of(&pl->conv_out), dy, data_of(&pl->pool_ws), block_bf16(pl),
          own_bn_kernel_layout(pl), c->N, c->K / pl->lanes, c->OH, c->OW, data_of(&pl->scale),
          data_of(&pl->shift), data_of(&pl->mean), data_of(&pl->var), pl->shape.eps,
          data_of(&pl->bn_dsrc), data_of(&pl->dscale), data_of(&pl->dshift), dy_copy))
    st = dnnl_out_of_memory;
  return st;
}

static dnnl_status_t forward_run(plan *pl) {
  dnnl_status_t st = run_reorder(&pl->r_x);
  if (st == dnnl_success) st = run_reorder(&pl->r_w);
  dnnl_exec_arg_t conv[] = {{DNNL_ARG_SRC, pl->r_x.to->m},
                            {DNNL_ARG_WEIGHTS, pl->r_w.to->m},
                            {DNNL_ARG_DST, pl->conv_out.m},
                            {DNNL_ARG_SCRATCHPAD, pl->scratch[PD_CONV].m},
                            {DNNL_ARG_BIAS, pl->bias.m}};
  if (st == dnnl_success) st = run(pl->conv_f, pl->shape.has_bias ? 5 : 4, conv);
  dnnl_exec_arg_t bn[] = {
      {DNNL_ARG_SRC, pl->conv_out.m},    {DNNL_ARG_DST, pl->bn_out.m},
      {DNNL_ARG_SCALE, pl->scale.m},     {DNNL_ARG_SHIFT, pl->shift.m},
      {DNNL_ARG_MEAN, pl->mean.m},       {DNNL_ARG_VARIANCE, pl->var.m},
      {DNNL_ARG_WORKSPACE, pl->bn_ws.m}, {DNNL_ARG_SCRATCHPAD, pl->scratch[PD_BN].m}};
  if (pl->own_bn) {
    if (st == dnnl_success) st = own_bn_forward(pl);
    if (st == dnnl_success && !pl->nchw_edge) st = run_reorder(&pl->r_y);
    return st == dnnl_success ? dnnl_stream_wait(G.stream) : st;
  }
  if (st == dnnl_success) st = run(pl->bn_f, 8, bn);
  dnnl_exec_arg_t pool[] = {{DNNL_ARG_SRC, pl->bn_out.m},
                            {DNNL_ARG_DST, pl->r_y.from->m},
                            {DNNL_ARG_WORKSPACE, pl->pool_ws.m},
                            {DNNL_ARG_SCRATCHPAD, pl->scratch[PD_POOL].m}};
  if (st == dnnl_success) st = run(pl->pool_f, 4, pool);
  if (st == dnnl_success) st = run_reorder(&pl->r_y);
  return st == dnnl_success ? dnnl_stream_wait(G.stream) : st;
}

/* The backward without dx of a dw_fused plan: dy (through r_dy unless
 * nchw_edge), then one kernel for batch norm, ReLU, the pool and the
 * convolution's weight and bias gradients. */
static dnnl_status_t backward_dw_run(plan *pl) {
  const cnn_conv_block_shape *s = &pl->shape;
  const cnn_conv_shape *c = &s->conv;
  dnnl_status_t st = pl->nchw_edge ? dnnl_success : run_reorder(&pl->r_dy);
  if (st == dnnl_success) st = dnnl_stream_wait(G.stream);
  float *dy_copy;
  const void *dy = own_bn_dy(pl, &dy_copy);
  cnn_b16_conv_src src = {data_of(&pl->x), c->C, c->H, c->W, c->R, c->S, c->pt, c->pl};
  if (st == dnnl_success &&
      cnn_cpu_bn_relu_pool_kernel(pl->lanes)->backward_dw(
          data_of(&pl->conv_out), dy, data_of(&pl->pool_ws), own_bn_kernel_layout(pl), c->N,
          c->K / pl->lanes, c->OH, c->OW, data_of(&pl->scale), data_of(&pl->shift),
          data_of(&pl->mean), data_of(&pl->var), s->eps, &src, data_of(&pl->dw), data_of(&pl->db),
          data_of(&pl->dscale), data_of(&pl->dshift), dy_copy))
    st = dnnl_out_of_memory;
  return st;
}

static dnnl_status_t backward_run(plan *pl, int want_dx) {
  if (!want_dx && pl->dw_fused) return backward_dw_run(pl);
  dnnl_status_t st = pl->nchw_edge ? dnnl_success : run_reorder(&pl->r_dy);
  dnnl_exec_arg_t pool[] = {{DNNL_ARG_DIFF_DST, pl->r_dy.to->m},
                            {DNNL_ARG_DIFF_SRC, pl->pool_dsrc.m},
                            {DNNL_ARG_WORKSPACE, pl->pool_ws.m},
                            {DNNL_ARG_SCRATCHPAD, pl->scratch[PD_POOL_B].m}};
  if (st == dnnl_success) st = pl->own_bn ? own_bn_backward(pl) : run(pl->pool_b, 4, pool);
  /* oneDNN 2.6 refuses the backward without the shift when use_shift is set */
  dnnl_exec_arg_t bn[] = {{DNNL_ARG_SRC, pl->conv_out.m},
                          {DNNL_ARG_MEAN, pl->mean.m},
                          {DNNL_ARG_VARIANCE, pl->var.m},
                          {DNNL_ARG_SCALE, pl->scale.m},
                          {DNNL_ARG_SHIFT, pl->shift.m},
                          {DNNL_ARG_WORKSPACE, pl->bn_ws.m},
                          {DNNL_ARG_DIFF_DST, pl->pool_dsrc.m},
                          {DNNL_ARG_DIFF_SRC, pl->bn_dsrc.m},
                          {DNNL_ARG_DIFF_SCALE, pl->dscale.m},
                          {DNNL_ARG_DIFF_SHIFT, pl->dshift.m},
                          {DNNL_ARG_SCRATCHPAD, pl->scratch[PD_BN_B].m}};
  if (st == dnnl_success && !pl->own_bn) st = run(pl->bn_b, 11, bn);
  if (st == dnnl_success) st = run_reorder(&pl->r_x_bw);
  if (st == dnnl_success) st = run_reorder(&pl->r_dd_bw);
  dnnl_exec_arg_t bw[] = {{DNNL_ARG_SRC, pl->r_x_bw.to->m},
                          {DNNL_ARG_DIFF_DST, pl->r_dd_bw.to->m},
                          {DNNL_ARG_DIFF_WEIGHTS, pl->r_dw.from->m},
                          {DNNL_ARG_SCRATCHPAD, pl->scratch[PD_CONV_BW].m},
                          {DNNL_ARG_DIFF_BIAS, pl->db.m}};
  if (st == dnnl_success) st = run(pl->conv_bw, pl->shape.has_bias ? 5 : 4, bw);
  if (st == dnnl_success) st = run_reorder(&pl->r_dw);
  if (want_dx) {
    if (st == dnnl_success) st = run_reorder(&pl->r_dd_bd);
    if (st == dnnl_success) st = run_reorder(&pl->r_w_bd);
    dnnl_exec_arg_t bd[] = {{DNNL_ARG_DIFF_DST, pl->r_dd_bd.to->m},
                            {DNNL_ARG_WEIGHTS, pl->r_w_bd.to->m},
                            {DNNL_ARG_DIFF_SRC, pl->r_dx.from->m},
                            {DNNL_ARG_SCRATCHPAD, pl->scratch[PD_CONV_BD].m}};
    if (st == dnnl_success) st = run(pl->conv_bd, 4, bd);
    if (st == dnnl_success) st = run_reorder(&pl->r_dx);
  }
  return st == dnnl_success ? dnnl_stream_wait(G.stream) : st;
}

/* The plan and arena for a call under the lock: 0, -1 or -2. */
static int prepare(const cnn_conv_block_shape *s, plan **pl) {
  if (cnn_interrupt_pending()) return cnn_set_error("%s: interrupted", OP), -1;
  int rc;
  *pl = plan_of(s, &rc);
  if (rc == 0 && cnn_onednn_arena_reserve(&G.arena, (*pl)->arena_bytes, OP, "block temporaries"))
    rc = -1;
  return rc;
}

/* round_in: x and w rounded to bfloat16 into the arena, and the
 * convolution pointed at the copies. */
static void round_operands(plan *pl, const float *x, const float *w) {
  const cnn_conv_shape *c = &pl->shape.conv;
  float *xr = (float *)((char *)G.arena.base + pl->round_off);
  float *wr = xr + cnn_onednn_round_up((size_t)x_count(c) * sizeof(float)) / sizeof(float);
  cnn_cpu_bf16_round_into(xr, x, x_count(c));
  cnn_cpu_bf16_round_into(wr, w, w_count(c));
  set(&pl->x, xr), set(&pl->w, wr);
}

static int fail(const char *what, dnnl_status_t st) {
  cnn_set_error("%s: oneDNN %s failed (%s)", OP, what, dnnl_status2str(st));
  return -1;
}

int cnn_cpu_conv_block_state_bytes(const cnn_conv_block_shape *s, size_t *bytes) {
  pthread_mutex_lock(&G.lock);
  int rc;
  plan *pl = plan_of(s, &rc);
  if (pl) *bytes = pl->state_bytes;
  pthread_mutex_unlock(&G.lock);
  return rc;
}

int cnn_cpu_conv_block_forward(const cnn_conv_block_shape *s, const float *x, const float *w,
                               const float *b, const float *gamma, const float *beta, float *y,
                               float *mean, float *var, void *state) {
  pthread_mutex_lock(&G.lock);
  plan *pl;
  int rc = prepare(s, &pl);
  if (rc == 0) {
    bind(pl, state, G.arena.base);
    set(&pl->x, x), set(&pl->w, w), set(&pl->bias, b), set(&pl->y, y);
    if (pl->round_in) round_operands(pl, x, w);
    set(&pl->scale, gamma ? gamma : pl->ones), set(&pl->shift, beta ? beta : pl->zeros);
    dnnl_status_t st = forward_run(pl);
    if (st != dnnl_success) rc = fail("forward", st);
  }
  if (rc == 0) {
    size_t kb = (size_t)s->conv.K * sizeof(float);
    memcpy(mean, (char *)state + pl->mean.off, kb);
    memcpy(var, (char *)state + pl->var.off, kb);
  }
  pthread_mutex_unlock(&G.lock);
  return rc;
}

int cnn_cpu_conv_block_backward(const cnn_conv_block_shape *s, const float *dy, const float *x,
                                const float *w, const float *gamma, const float *beta,
                                const void *state, float *dx, float *dw, float *db, float *dgamma,
                                float *dbeta) {
  pthread_mutex_lock(&G.lock);
  plan *pl;
  int rc = prepare(s, &pl);
  if (rc == 0) {
    bind(pl, (void *)state, G.arena.base);
    set(&pl->dy, dy), set(&pl->x, x), set(&pl->w, w), set(&pl->dx, dx), set(&pl->dw, dw);
    if (pl->round_in) round_operands(pl, x, w);
    set(&pl->db, db ? db : pl->spare[0]);
    set(&pl->scale, gamma ? gamma : pl->ones), set(&pl->shift, beta ? beta : pl->zeros);
    set(&pl->dscale, dgamma ? dgamma : pl->spare[1]);
    set(&pl->dshift, dbeta ? dbeta : pl->spare[2]);
    dnnl_status_t st = backward_run(pl, dx != NULL);
    if (st != dnnl_success) rc = fail("backward", st);
  }
  pthread_mutex_unlock(&G.lock);
  return rc;
}
