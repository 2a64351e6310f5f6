/*
 * conv_onednn.c -- float32 convolution through oneDNN 2.6's C API.
 *
 * Design.  oneDNN is fastest on its own blocked layouts (nChw16c,
 * OIhw16i16o, ...), so every primitive is created with dnnl_format_tag_any
 * for its three tensors, and each call reorders the caller's plain NCHW /
 * OIHW (GOIHW with groups) arrays into those layouts and the output back:
 *
 *   kind         inputs (reordered in)      output (reordered out)   extra
 *   FWD          SRC x,   WEIGHTS w         DST y                    BIAS b
 *   BWD_DATA     DIFF_DST dy, WEIGHTS w     DIFF_SRC dx
 *   BWD_WEIGHT   SRC x,   DIFF_DST dy       DIFF_WEIGHTS dw          DIFF_BIAS db
 *
 * A "port" is one of those three tensors: a plain memory object whose
 * handle is the caller's pointer, the memory object in the primitive's
 * layout, and the reorder between them (none when the layouts agree).
 *
 * Families.  The same machinery runs oneDNN's deconvolution for the
 * transposed convolution (deconv_onednn.c makes its descriptors; the
 * shared declarations are in onednn_conv.h): an entry's `family` says
 * which, and only the descriptors differ.
 *
 * Cache.  Creating a primitive costs far more than running a small one, so
 * every (family, kind, bias or not, full cnn_conv_shape) gets one cache entry:
 * the convolution primitive, its ports and reorders, all created once.  A
 * shape oneDNN rejects is cached too (as unsupported), so AUTO does not
 * retry it on every call.  At most CACHE_SIZE entries, least recently used
 * evicted.  The blocked tensors and the scratchpad (user-managed) are not
 * owned by entries: they live in one arena, grown on demand and reused by
 * every call, since only one call runs at a time.  Nothing is allocated
 * per call once the arena is big enough.
 *
 * Backward.  cnn_cpu_conv2d_onednn_backward() runs both backward kinds in
 * one locked call; when their DIFF_DST layouts agree, dy is reordered once,
 * into the arena, and the weight pass reads the data pass's copy (saves one
 * reorder of dy, ~5% of the backward of a 32->64 14x14 layer).
 *
 * Large batches.  A forward pass whose input and output pass
 * FWD_SPLIT_BYTES (16 MiB) runs as several calls over consecutive slices
 * of the batch of at most FWD_CHUNK_BYTES (4 MiB) each, small enough that
 * the blocked tensors stay in cache between the convolution and the
 * reorders: at N=1000, 1->32 channels 28x28, the blocked output (100 MB)
 * went to memory and came back for the reorder, which took ~55% of the
 * layer's time; sliced, the layer runs ~1.35x faster.  Images are
 * independent, so the results are the same; a slice and the remainder are
 * two cache entries; errors name the slice's shape.  Training batches
 * (64 images, 6.6 MB at that layer) stay one call.
 *
 * Post-ops.  A float32 forward may carry eltwise post-ops (an activation
 * fused into the convolution for net:fuse(); conv_post_ops.c maps cnnsh's
 * activations to them); they are part of the entry's key.
 *
 * Channels-last.  A shape with channels_last describes x, y, dy and dx as
 * nhwc arrays; a float32 direct convolution then runs on them as they are
 * (oneDNN's nhwc kernels), everything else reorders from and to nhwc as
 * from and to nchw.
 *
 * Precisions.  An entry is float32 (PREC_F32), bfloat16 (PREC_BF16) or
 * integer (PREC_U8).  PREC_BF16 is a convolution whose shape has math =
 * CNN_BFLOAT16 (autocast, bf16_math.c): the caller's arrays are float32 as
 * for PREC_F32, the primitive's inputs are bfloat16 -- so the reorders in
 * round them (to nearest even) -- and its output (dst, diff_src,
 * diff_weights; the bias and its gradient) is float32, the accumulator;
 * oneDNN's reference loops are refused for it (conv.c then emulates).
 * PREC_U8 is the forward of core/cpu/conv_int8.c: the caller's x is uint8 NCHW, w holds
 * whole numbers in [-127, 127] as float32 (the reorder into the
 * primitive's s8 layout converts them exactly) and y is the int32
 * accumulator, with no bias and no scales (conv_int8.c applies them:
 * oneDNN 2.6's AVX2 int8 kernels take no run-time scales, and scales fixed
 * at creation would key the cache on every layer's values).
 *
 * Invariants: one global engine and in-order stream, created on first use;
 * `lock` serialises every use of the cache, the arena and the stream; an
 * entry's memory objects have their handles set right before each run.
 * oneDNN threads with OpenMP, the same pool as OpenBLAS and our loops.
 * oneDNN's dilation is ours minus one; padding_l = {pt, pl}, padding_r =
 * {pb, pr} (they agree with OH, OW: cnn_cpu_conv2d_shape_valid).
 */
#include <dnnl.h>
#include <dnnl_debug.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/onednn_conv.h"
#include "cpu/onednn_util.h"

#define CACHE_SIZE      64
#define FWD_SPLIT_BYTES ((int64_t)16 << 20) /* forward: split batches above this ... */
#define FWD_CHUNK_BYTES ((int64_t)4 << 20)  /* ... into slices of this (input + output) */
#define ARENA_ALIGN     4096

/* The arithmetic of an entry (see "Precisions" at the top). */
typedef enum { PREC_F32 = 0, PREC_U8, PREC_BF16 } conv_prec;

typedef struct {
  int arg; /* DNNL_ARG_SRC, ... */
  int is_output;
  dnnl_memory_t user;       /* plain layout; handle = the caller's array */
  dnnl_memory_t inner;      /* the primitive's layout; NULL if == user's */
  dnnl_primitive_t reorder; /* user -> inner (input) or inner -> user (output) */
  size_t inner_bytes;       /* arena space for `inner` */
} port;

/* What an entry computes, besides its shape (with it, the cache key). */
typedef struct {
  conv_family family;
  conv_kind kind;
  conv_prec prec;
  int has_bias;
  conv_post post; /* forward only (onednn_conv.h); zero: none */
} conv_key;

typedef struct {
  int used, unsupported; /* unsupported: oneDNN rejected this shape */
  conv_key key;
  cnn_conv_shape shape;
  uint64_t last_use; /* LRU clock */
  dnnl_primitive_t conv;
  port ports[3];
  int bias_arg;          /* DNNL_ARG_BIAS / DNNL_ARG_DIFF_BIAS */
  dnnl_memory_t bias;    /* plain K, or NULL */
  dnnl_memory_t scratch; /* or NULL when the primitive needs none */
  size_t scratch_bytes;
} entry;

static struct {
  pthread_mutex_t lock;
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  entry entries[CACHE_SIZE];
  uint64_t clock;
  void *arena;
  size_t arena_bytes;
} G = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char *kind_name[] = {"forward", "backward data", "backward weight"};
static const char *op_name[] = {[CONVOLUTION] = "conv2d", [DECONVOLUTION] = "conv_transpose2d"};

static int fail(conv_family f, dnnl_status_t st, const char *what, const cnn_conv_shape *s) {
  char d[256];
  cnn_set_error("%s: oneDNN %s failed (%s) for %s", op_name[f], what, dnnl_status2str(st),
                cnn_conv_shape_str(s, d));
  return -1;
}

static int ensure_engine(conv_family f, const cnn_conv_shape *s) {
  dnnl_status_t st;
  if (G.stream) return 0;
  if (!G.engine && (st = dnnl_engine_create(&G.engine, dnnl_cpu, 0)) != dnnl_success)
    return fail(f, st, "engine creation", s);
  if ((st = dnnl_stream_create(&G.stream, G.engine, dnnl_stream_default_flags)) != dnnl_success)
    return fail(f, st, "stream creation", s);
  return 0;
}

/* ---- entries: lifetime ------------------------------------------------------ */

static void port_destroy(port *p) {
  if (p->reorder) dnnl_primitive_destroy(p->reorder);
  if (p->inner) dnnl_memory_destroy(p->inner);
  if (p->user) dnnl_memory_destroy(p->user);
}

static void entry_destroy(entry *e) {
  for (int i = 0; i < 3; i++) port_destroy(&e->ports[i]);
  if (e->conv) dnnl_primitive_destroy(e->conv);
  if (e->bias) dnnl_memory_destroy(e->bias);
  if (e->scratch) dnnl_memory_destroy(e->scratch);
  memset(e, 0, sizeof *e);
}

static int shape_equal(const cnn_conv_shape *a, const cnn_conv_shape *b) {
  return a->N == b->N && a->C == b->C && a->H == b->H && a->W == b->W && a->K == b->K &&
         a->R == b->R && a->S == b->S && a->OH == b->OH && a->OW == b->OW && a->sh == b->sh &&
         a->sw == b->sw && a->pt == b->pt && a->pb == b->pb && a->pl == b->pl && a->pr == b->pr &&
         a->dh == b->dh && a->dw == b->dw && a->groups == b->groups &&
         a->allow_winograd == b->allow_winograd && a->channels_last == b->channels_last;
}

static int post_equal(const conv_post *a, const conv_post *b) {
  for (int i = 0; i < 2; i++)
    if (a->alg[i] != b->alg[i] || a->alpha[i] != b->alpha[i] || a->beta[i] != b->beta[i]) return 0;
  return 1;
}

static int key_equal(const conv_key *a, const conv_key *b) {
  return a->family == b->family && a->kind == b->kind && a->prec == b->prec &&
         a->has_bias == b->has_bias && post_equal(&a->post, &b->post);
}

static entry *cache_find(const conv_key *k, const cnn_conv_shape *s) {
  for (int i = 0; i < CACHE_SIZE; i++) {
    entry *e = &G.entries[i];
    if (e->used && key_equal(&e->key, k) && shape_equal(&e->shape, s)) return e;
  }
  return NULL;
}

/* A free slot, or the least recently used one emptied. */
static entry *cache_slot(void) {
  entry *lru = &G.entries[0];
  for (int i = 0; i < CACHE_SIZE; i++) {
    if (!G.entries[i].used) return &G.entries[i];
    if (G.entries[i].last_use < lru->last_use) lru = &G.entries[i];
  }
  entry_destroy(lru);
  return lru;
}

/* ---- descriptors -------------------------------------------------------------- */

/* Data types of the caller's arrays (plain) and of the primitive's tensors
 * (inner), by precision and tensor role (the table at the top); a
 * PREC_BF16 entry's output tensor is float32 (out_role). */
static const dnnl_data_type_t plain_type[3][3] = {
    [PREC_F32] = {dnnl_f32, dnnl_f32, dnnl_f32},
    [PREC_U8] = {dnnl_u8, dnnl_f32, dnnl_s32},
    [PREC_BF16] = {dnnl_f32, dnnl_f32, dnnl_f32},
};
static const dnnl_data_type_t inner_type[3][3] = {
    [PREC_F32] = {dnnl_f32, dnnl_f32, dnnl_f32},
    [PREC_U8] = {dnnl_u8, dnnl_s8, dnnl_s32},
    [PREC_BF16] = {dnnl_bf16, dnnl_bf16, dnnl_bf16},
};
/* The tensor each kind writes. */
static const int out_role[3] = {[FWD] = T_DST, [BWD_DATA] = T_SRC, [BWD_WEIGHT] = T_WEI};

static dnnl_data_type_t inner_of(conv_prec prec, conv_kind kind, int role) {
  return prec == PREC_BF16 && role == out_role[kind] ? dnnl_f32 : inner_type[prec][role];
}

/* The precision of a pass of `family` over shape s (deconvolutions: float32). */
static conv_prec prec_of(conv_family family, const cnn_conv_shape *s) {
  return family == CONVOLUTION && s->math == CNN_BFLOAT16 ? PREC_BF16 : PREC_F32;
}

/* The convolution's descriptors for an entry of `kind` (a bfloat16
 * entry's output type depends on it). */
static void init_mds(const cnn_conv_shape *s, conv_prec prec, conv_kind kind, conv_mds *m) {
  dnnl_dims_t x = {s->N, s->C, s->H, s->W}, y = {s->N, s->K, s->OH, s->OW}, b = {s->K};
  dnnl_dims_t w = {s->K, s->C, s->R, s->S};
  dnnl_dims_t gw = {s->groups, s->K / s->groups, s->C / s->groups, s->R, s->S};
  int g = s->groups > 1, wn = g ? 5 : 4;
  dnnl_format_tag_t wtag = g ? dnnl_goihw : dnnl_oihw;
  const dnnl_data_type_t *pt = plain_type[prec];
  dnnl_format_tag_t act = s->channels_last ? dnnl_nhwc : dnnl_nchw;
  dnnl_memory_desc_init_by_tag(&m->plain[T_SRC], 4, x, pt[T_SRC], act);
  dnnl_memory_desc_init_by_tag(&m->plain[T_WEI], wn, g ? gw : w, pt[T_WEI], wtag);
  dnnl_memory_desc_init_by_tag(&m->plain[T_DST], 4, y, pt[T_DST], act);
  dnnl_memory_desc_init_by_tag(&m->any[T_SRC], 4, x, inner_of(prec, kind, T_SRC),
                               dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&m->any[T_WEI], wn, g ? gw : w, inner_of(prec, kind, T_WEI),
                               dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&m->any[T_DST], 4, y, inner_of(prec, kind, T_DST),
                               dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&m->bias, 1, b, dnnl_f32, dnnl_x);
  m->strides[0] = s->sh, m->strides[1] = s->sw;
  m->dilates[0] = s->dh - 1, m->dilates[1] = s->dw - 1;
  m->pad_l[0] = s->pt, m->pad_l[1] = s->pl;
  m->pad_r[0] = s->pb, m->pad_r[1] = s->pr;
}

/* Integer convolutions exist for inference only. */
static dnnl_status_t forward_desc(conv_mds *m, conv_prec prec, int has_bias, dnnl_alg_kind_t alg,
                                  dnnl_convolution_desc_t *cd) {
  return dnnl_dilated_convolution_forward_desc_init(
      cd, prec == PREC_U8 ? dnnl_forward_inference : dnnl_forward_training, alg, &m->any[T_SRC],
      &m->any[T_WEI], has_bias ? &m->bias : NULL, &m->any[T_DST], m->strides, m->dilates, m->pad_l,
      m->pad_r);
}

/* alg: dnnl_convolution_direct or _winograd (convolutions only). */
static dnnl_status_t kind_desc(conv_family family, conv_kind kind, conv_prec prec, conv_mds *m,
                               int has_bias, dnnl_alg_kind_t alg, dnnl_convolution_desc_t *cd) {
  if (family == DECONVOLUTION) return cnn_onednn_deconv_desc(kind, m, has_bias, cd);
  if (kind == FWD) return forward_desc(m, prec, has_bias, alg, cd);
  if (kind == BWD_DATA)
    return dnnl_dilated_convolution_backward_data_desc_init(cd, alg, &m->any[T_SRC], &m->any[T_WEI],
                                                            &m->any[T_DST], m->strides, m->dilates,
                                                            m->pad_l, m->pad_r);
  return dnnl_dilated_convolution_backward_weights_desc_init(
      cd, alg, &m->any[T_SRC], &m->any[T_WEI], has_bias ? &m->bias : NULL, &m->any[T_DST],
      m->strides, m->dilates, m->pad_l, m->pad_r);
}

/* The eltwise post-ops of `post` into attr (none: nothing to do). */
static dnnl_status_t attach_post_ops(dnnl_primitive_attr_t attr, const conv_post *post) {
  if (!post->alg[0]) return dnnl_success;
  dnnl_post_ops_t ops;
  dnnl_status_t st = dnnl_post_ops_create(&ops);
  if (st != dnnl_success) return st;
  for (int i = 0; i < 2 && post->alg[i] && st == dnnl_success; i++)
    st = dnnl_post_ops_append_eltwise(ops, 1.0f, post->alg[i], post->alpha[i], post->beta[i]);
  if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(attr, ops);
  dnnl_post_ops_destroy(ops);
  return st;
}

/* The primitive descriptor of `kind`, with a user-managed scratchpad.
 * Backward kinds need a forward descriptor as a hint (a bfloat16 one with
 * the forward's types). */
static dnnl_status_t make_pd(const conv_key *k, const cnn_conv_shape *s, conv_mds *m,
                             dnnl_alg_kind_t alg, dnnl_primitive_desc_t *pd) {
  dnnl_convolution_desc_t cd, fd;
  dnnl_primitive_desc_t hint = NULL;
  dnnl_primitive_attr_t attr = NULL;
  conv_mds fm = *m;
  if (k->prec == PREC_BF16) init_mds(s, k->prec, FWD, &fm);
  dnnl_status_t st = kind_desc(k->family, k->kind, k->prec, m, k->has_bias, alg, &cd);
  if (st == dnnl_success && k->kind != FWD &&
      (st = kind_desc(k->family, FWD, k->prec, &fm, k->has_bias, alg, &fd)) == dnnl_success)
    st = dnnl_primitive_desc_create(&hint, &fd, NULL, G.engine, NULL);
  if (st == dnnl_success) st = dnnl_primitive_attr_create(&attr);
  if (st == dnnl_success)
    st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  if (st == dnnl_success) st = attach_post_ops(attr, &k->post);
  if (st == dnnl_success) st = dnnl_primitive_desc_create(pd, &cd, attr, G.engine, hint);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (hint) dnnl_primitive_desc_destroy(hint);
  /* a bfloat16 entry refuses oneDNN's reference loops: conv.c then emulates */
  return st == dnnl_success && k->prec == PREC_BF16 ? cnn_onednn_refuse_reference(*pd) : st;
}

/* ---- entries: construction ------------------------------------------------------- */

/* Plain memory for the caller's array; the primitive's layout `want` and a
 * reorder between them when the two differ. */
static dnnl_status_t port_build(port *p, int arg, int is_output, const dnnl_memory_desc_t *plain,
                                const dnnl_memory_desc_t *want) {
  dnnl_primitive_desc_t rpd;
  dnnl_status_t st;
  p->arg = arg, p->is_output = is_output;
  if ((st = dnnl_memory_create(&p->user, plain, G.engine, DNNL_MEMORY_NONE)) != dnnl_success)
    return st;
  if (dnnl_memory_desc_equal(plain, want)) return dnnl_success;
  if ((st = dnnl_memory_create(&p->inner, want, G.engine, DNNL_MEMORY_NONE)) != dnnl_success)
    return st;
  p->inner_bytes = dnnl_memory_desc_get_size(want);
  st = is_output ? dnnl_reorder_primitive_desc_create(&rpd, want, G.engine, plain, G.engine, NULL)
                 : dnnl_reorder_primitive_desc_create(&rpd, plain, G.engine, want, G.engine, NULL);
  if (st != dnnl_success) return st;
  st = dnnl_primitive_create(&p->reorder, rpd);
  dnnl_primitive_desc_destroy(rpd);
  return st;
}

/* The ports of each kind (the table at the top): argument, the query for
 * the layout the primitive chose, direction, and which tensor it is. */
typedef struct {
  int arg;
  dnnl_query_t query;
  int is_output, tensor;
} port_kind;

static const port_kind port_spec[3][3] = {
    [FWD] = {{DNNL_ARG_SRC, dnnl_query_src_md, 0, T_SRC},
             {DNNL_ARG_WEIGHTS, dnnl_query_weights_md, 0, T_WEI},
             {DNNL_ARG_DST, dnnl_query_dst_md, 1, T_DST}},
    [BWD_DATA] = {{DNNL_ARG_DIFF_DST, dnnl_query_diff_dst_md, 0, T_DST},
                  {DNNL_ARG_WEIGHTS, dnnl_query_weights_md, 0, T_WEI},
                  {DNNL_ARG_DIFF_SRC, dnnl_query_diff_src_md, 1, T_SRC}},
    [BWD_WEIGHT] = {{DNNL_ARG_SRC, dnnl_query_src_md, 0, T_SRC},
                    {DNNL_ARG_DIFF_DST, dnnl_query_diff_dst_md, 0, T_DST},
                    {DNNL_ARG_DIFF_WEIGHTS, dnnl_query_diff_weights_md, 1, T_WEI}},
};

static dnnl_status_t ports_build(entry *e, dnnl_primitive_desc_t pd, conv_mds *m) {
  dnnl_status_t st = dnnl_success;
  for (int i = 0; i < 3 && st == dnnl_success; i++) {
    const port_kind *ps = &port_spec[e->key.kind][i];
    const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, ps->query, 0);
    st = port_build(&e->ports[i], ps->arg, ps->is_output, &m->plain[ps->tensor], want);
  }
  return st;
}

/* Everything but the convolution primitive: ports, bias and scratchpad. */
static dnnl_status_t entry_memories(entry *e, dnnl_primitive_desc_t pd, conv_mds *m) {
  dnnl_status_t st = ports_build(e, pd, m);
  if (st != dnnl_success) return st;
  if (e->key.has_bias) {
    e->bias_arg = e->key.kind == FWD ? DNNL_ARG_BIAS : DNNL_ARG_DIFF_BIAS;
    if ((st = dnnl_memory_create(&e->bias, &m->bias, G.engine, DNNL_MEMORY_NONE))) return st;
  }
  const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  e->scratch_bytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
  if (e->scratch_bytes == 0) return dnnl_success;
  return dnnl_memory_create(&e->scratch, smd, G.engine, DNNL_MEMORY_NONE);
}

/* A float32 channels-last convolution runs oneDNN's direct kernels on the
 * caller's nhwc arrays (they have nhwc kernels: no reorder of x, y, dy or
 * dx); Winograd's take blocked layouts only, and the bfloat16 and integer
 * entries convert their inputs anyway, so those keep format `any`. */
static int direct_in_caller_layout(const conv_key *k, const cnn_conv_shape *s) {
  return s->channels_last && k->family == CONVOLUTION && k->prec == PREC_F32;
}

/* m with the activations' `any` descriptors set to the caller's layout
 * (a copy of the entry's descriptors: a refusal falls back to `any`). */
static conv_mds *with_caller_layout(conv_mds *m) {
  m->any[T_SRC] = m->plain[T_SRC], m->any[T_DST] = m->plain[T_DST];
  return m;
}

/* Fills a fresh entry.  Returns 0; -2 (error set) if oneDNN has no
 * primitive for the shape (the entry is kept, marked unsupported); -1 on
 * other failures (the entry is emptied). */
static int entry_build(entry *e, const conv_key *k, const cnn_conv_shape *s) {
  conv_mds m;
  dnnl_primitive_desc_t pd;
  e->used = 1, e->key = *k, e->shape = *s;
  if (k->family == DECONVOLUTION)
    cnn_onednn_deconv_mds(s, &m);
  else
    init_mds(s, k->prec, k->kind, &m);
  /* Winograd where conv_winograd.c's rule says; direct where it refuses */
  int winograd = k->family == CONVOLUTION && k->prec == PREC_F32 && cnn_onednn_conv_winograd(s);
  dnnl_status_t st = dnnl_unimplemented;
  if (winograd) st = make_pd(k, s, &m, dnnl_convolution_winograd, &pd);
  if (st != dnnl_success && direct_in_caller_layout(k, s)) {
    conv_mds caller = m;
    st = make_pd(k, s, with_caller_layout(&caller), dnnl_convolution_direct, &pd);
  }
  if (st != dnnl_success) st = make_pd(k, s, &m, dnnl_convolution_direct, &pd);
  if (st != dnnl_success) {
    e->unsupported = 1;
    fail(k->family, st, kind_name[k->kind], s);
    return -2;
  }
  st = entry_memories(e, pd, &m);
  if (st == dnnl_success) st = dnnl_primitive_create(&e->conv, pd);
  dnnl_primitive_desc_destroy(pd);
  if (st == dnnl_success) return 0;
  fail(k->family, st, "primitive setup", s);
  entry_destroy(e);
  return -1;
}

/* The cached entry for (kind, bias, shape), built if new; NULL with the
 * return code in *rc (-1, or -2 for an unsupported shape). */
static entry *cache_get(const conv_key *k, const cnn_conv_shape *s, int *rc) {
  entry *e = cache_find(k, s);
  *rc = 0;
  if (!e) {
    e = cache_slot();
    *rc = entry_build(e, k, s);
    if (*rc == -1) return NULL;
  }
  e->last_use = ++G.clock;
  if (e->unsupported) {
    char d[256];
    cnn_set_error("%s: oneDNN has no %s primitive for %s", op_name[k->family], kind_name[k->kind],
                  cnn_conv_shape_str(s, d));
    *rc = -2;
    return NULL;
  }
  return e;
}

/* ---- running ------------------------------------------------------------------------ */

static size_t round_up(size_t n) { return (n + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN; }

static size_t arena_need(const entry *e) {
  size_t need = round_up(e->scratch_bytes);
  for (int i = 0; i < 3; i++) need += round_up(e->ports[i].inner_bytes);
  return need;
}

static int arena_reserve(conv_family f, size_t need, const cnn_conv_shape *s) {
  if (need <= G.arena_bytes) return 0;
  free(G.arena);
  G.arena = aligned_alloc(ARENA_ALIGN, need);
  G.arena_bytes = G.arena ? need : 0;
  if (G.arena) return 0;
  char d[256];
  cnn_set_error("%s: out of memory for a %zu-byte oneDNN workspace (%s)", op_name[f], need,
                cnn_conv_shape_str(s, d));
  return -1;
}

/* Sets a memory's handle.  For a blocked layout with padded channels this
 * also zeroes the padding, which must be redone on every call: the arena
 * is shared, so another entry may have written there since. */
static dnnl_status_t set_handle(dnnl_memory_t m, const void *p) {
  return dnnl_memory_set_data_handle(m, (void *)p);
}

/* Points every memory of `e` at the caller's arrays and the arena from
 * `base` on.  Port `shared` (-1 for none) takes `shared_at`, a blocked
 * tensor another entry has already filled, and gets no arena space. */
static dnnl_status_t bind(entry *e, const void *arrays[3], const void *bias, char *base, int shared,
                          void *shared_at) {
  char *a = base;
  dnnl_status_t st = dnnl_success;
  for (int i = 0; i < 3 && st == dnnl_success; i++) {
    port *p = &e->ports[i];
    st = set_handle(p->user, arrays[i]);
    if (st != dnnl_success || !p->inner) continue;
    if (i == shared) {
      st = set_handle(p->inner, shared_at);
      continue;
    }
    st = set_handle(p->inner, a);
    a += round_up(p->inner_bytes);
  }
  if (st == dnnl_success && e->bias) st = set_handle(e->bias, bias);
  if (st == dnnl_success && e->scratch) st = set_handle(e->scratch, a);
  return st;
}

/* Runs the reorders into (outputs 0) or out of (1) the primitive's
 * layouts, except that of port `skip` (-1 for none). */
static dnnl_status_t run_reorders(entry *e, int outputs, int skip) {
  for (int i = 0; i < 3; i++) {
    port *p = &e->ports[i];
    if (!p->reorder || p->is_output != outputs || i == skip) continue;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, outputs ? p->inner : p->user},
                               {DNNL_ARG_TO, outputs ? p->user : p->inner}};
    dnnl_status_t st = dnnl_primitive_execute(p->reorder, G.stream, 2, args);
    if (st != dnnl_success) return st;
  }
  return dnnl_success;
}

static dnnl_status_t run_conv(entry *e) {
  dnnl_exec_arg_t args[5];
  int n = 0;
  for (int i = 0; i < 3; i++) {
    port *p = &e->ports[i];
    args[n++] = (dnnl_exec_arg_t){p->arg, p->inner ? p->inner : p->user};
  }
  if (e->bias) args[n++] = (dnnl_exec_arg_t){e->bias_arg, e->bias};
  if (e->scratch) args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, e->scratch};
  return dnnl_primitive_execute(e->conv, G.stream, n, args);
}

/* Reorders in, convolution, reorders out; the stream is not waited on.
 * `shared`: see bind(). */
static dnnl_status_t entry_exec(entry *e, const void *arrays[3], const void *bias, char *base,
                                int shared, void *shared_at) {
  dnnl_status_t st = bind(e, arrays, bias, base, shared, shared_at);
  if (st == dnnl_success) st = run_reorders(e, 0, shared);
  if (st == dnnl_success) st = run_conv(e);
  if (st == dnnl_success) st = run_reorders(e, 1, -1);
  return st;
}

static int entry_run(entry *e, const void *arrays[3], const void *bias) {
  if (arena_reserve(e->key.family, arena_need(e), &e->shape)) return -1;
  dnnl_status_t st = entry_exec(e, arrays, bias, G.arena, -1, NULL);
  if (st == dnnl_success) st = dnnl_stream_wait(G.stream);
  return st == dnnl_success ? 0 : fail(e->key.family, st, kind_name[e->key.kind], &e->shape);
}

/* One call: lock, find or build the entry, run it.  arrays[] follow the
 * port order of the table at the top. */
static int conv_call(const conv_key *k, const cnn_conv_shape *s, const void *arrays[3],
                     const void *bias) {
  if (cnn_interrupt_pending()) {
    cnn_set_error("%s: interrupted", op_name[k->family]);
    return -1;
  }
  pthread_mutex_lock(&G.lock);
  int rc = ensure_engine(k->family, s);
  entry *e = rc ? NULL : cache_get(k, s, &rc);
  if (e) rc = entry_run(e, arrays, bias);
  pthread_mutex_unlock(&G.lock);
  return rc;
}

/* Images per forward call: all of them, unless the batch's input and
 * output pass FWD_SPLIT_BYTES; then as many as fit in FWD_CHUNK_BYTES
 * (see "Large batches"). */
static int64_t forward_chunk(const cnn_conv_shape *s) {
  int64_t per_image = (s->C * s->H * s->W + s->K * s->OH * s->OW) * (int64_t)sizeof(float);
  if (per_image <= 0 || s->N * per_image <= FWD_SPLIT_BYTES) return s->N;
  int64_t n = FWD_CHUNK_BYTES / per_image;
  return n > 0 ? n : 1;
}

/* A float32 forward pass, in slices of the batch when it is large.  A
 * convolution's x is N x C x H x W and its y N x K x OH x OW; a
 * deconvolution's the other way round (onednn_conv.h). */
static int forward_sliced(conv_family family, const cnn_conv_shape *s, const float *x,
                          const float *w, const float *b, const conv_post *post, float *y) {
  int64_t chunk = forward_chunk(s), image[2] = {s->C * s->H * s->W, s->K * s->OH * s->OW};
  int deconv = family == DECONVOLUTION;
  for (int64_t n0 = 0; n0 < s->N; n0 += chunk) {
    cnn_conv_shape part = *s;
    part.N = s->N - n0 < chunk ? s->N - n0 : chunk;
    const float *xp = x + n0 * image[deconv];
    float *yp = y + n0 * image[!deconv];
    conv_key k = {.family = family,
                  .kind = FWD,
                  .prec = prec_of(family, s),
                  .has_bias = b != NULL,
                  .post = *post};
    int rc = conv_call(&k, &part, (const void *[3]){xp, w, yp}, b);
    if (rc) return rc;
  }
  return 0;
}

int cnn_onednn_conv_run(conv_family family, conv_kind kind, const cnn_conv_shape *s,
                        const void *arrays[3], const void *bias) {
  if (kind == FWD)
    return forward_sliced(family, s, arrays[0], arrays[1], bias, &(conv_post){0},
                          (float *)arrays[2]);
  conv_key k = {
      .family = family, .kind = kind, .prec = prec_of(family, s), .has_bias = bias != NULL};
  return conv_call(&k, s, arrays, bias);
}

int cnn_cpu_conv2d_onednn_forward(const cnn_conv_shape *s, const float *x, const float *w,
                                  const float *b, float *y) {
  return forward_sliced(CONVOLUTION, s, x, w, b, &(conv_post){0}, y);
}

int cnn_onednn_conv_forward_post(const cnn_conv_shape *s, const float *x, const float *w,
                                 const float *b, const conv_post *post, float *y) {
  return forward_sliced(CONVOLUTION, s, x, w, b, post, y);
}

int cnn_cpu_conv2d_onednn_backward_data(const cnn_conv_shape *s, const float *dy, const float *w,
                                        float *dx) {
  conv_key k = {.family = CONVOLUTION, .kind = BWD_DATA, .prec = prec_of(CONVOLUTION, s)};
  return conv_call(&k, s, (const void *[3]){dy, w, dx}, NULL);
}

int cnn_cpu_conv2d_onednn_backward_weight(const cnn_conv_shape *s, const float *dy, const float *x,
                                          float *dw, float *db) {
  conv_key k = {.family = CONVOLUTION,
                .kind = BWD_WEIGHT,
                .prec = prec_of(CONVOLUTION, s),
                .has_bias = db != NULL};
  return conv_call(&k, s, (const void *[3]){x, dy, dw}, db);
}

/* int8 (cnn.quantize): forward only, no bias, one call (core/cpu/conv_int8.c
 * slices batches itself). */
int cnn_cpu_conv2d_onednn_forward_u8(const cnn_conv_shape *s, const uint8_t *x, const float *w,
                                     int32_t *acc) {
  return conv_call(&(conv_key){.family = CONVOLUTION, .kind = FWD, .prec = PREC_U8}, s,
                   (const void *[3]){x, w, acc}, NULL);
}

/* ---- both backward passes from one reorder of dy -------------------------------- */

/* Port index of DIFF_DST in each backward kind (port_spec). */
enum { DATA_DY = 0, WEIGHT_DY = 1 };

/* 1 when both entries read dy in the same blocked layout, so the weight
 * pass can use the tensor the data pass reordered. */
static int dy_shareable(entry *d, entry *wt) {
  const dnnl_memory_desc_t *a, *b;
  if (!d->ports[DATA_DY].inner || !wt->ports[WEIGHT_DY].inner) return 0;
  if (dnnl_memory_get_memory_desc(d->ports[DATA_DY].inner, &a) != dnnl_success ||
      dnnl_memory_get_memory_desc(wt->ports[WEIGHT_DY].inner, &b) != dnnl_success)
    return 0;
  return dnnl_memory_desc_equal(a, b);
}

/* The data entry's tensors come first in the arena (its dy at offset 0),
 * then the weight entry's, less its dy when shared. */
static int backward_run(entry *d, entry *wt, const void *ad[3], const void *aw[3], const void *db) {
  int share = dy_shareable(d, wt);
  size_t dneed = arena_need(d);
  size_t need = dneed + arena_need(wt) - (share ? round_up(wt->ports[WEIGHT_DY].inner_bytes) : 0);
  if (arena_reserve(d->key.family, need, &d->shape)) return -1;
  char *base = G.arena;
  dnnl_status_t st = entry_exec(d, ad, NULL, base, -1, NULL);
  if (st != dnnl_success) return fail(d->key.family, st, kind_name[BWD_DATA], &d->shape);
  st = entry_exec(wt, aw, db, base + dneed, share ? WEIGHT_DY : -1, base);
  if (st == dnnl_success) st = dnnl_stream_wait(G.stream);
  return st == dnnl_success ? 0 : fail(wt->key.family, st, kind_name[BWD_WEIGHT], &wt->shape);
}

int cnn_onednn_conv_backward_pair(conv_family family, const cnn_conv_shape *s, const float *dy,
                                  const float *x, const float *w, float *dx, float *dw, float *db) {
  if (cnn_interrupt_pending()) {
    cnn_set_error("%s: interrupted", op_name[family]);
    return -1;
  }
  pthread_mutex_lock(&G.lock);
  int rc = ensure_engine(family, s);
  conv_prec prec = prec_of(family, s);
  conv_key kd = {.family = family, .kind = BWD_DATA, .prec = prec};
  conv_key kw = {.family = family, .kind = BWD_WEIGHT, .prec = prec, .has_bias = db != NULL};
  entry *d = rc ? NULL : cache_get(&kd, s, &rc);
  /* d is now the most recently used entry, so building wt cannot evict it */
  entry *wt = d ? cache_get(&kw, s, &rc) : NULL;
  if (wt) rc = backward_run(d, wt, (const void *[3]){dy, w, dx}, (const void *[3]){x, dy, dw}, db);
  pthread_mutex_unlock(&G.lock);
  return rc;
}

int cnn_cpu_conv2d_onednn_backward(const cnn_conv_shape *s, const float *dy, const float *x,
                                   const float *w, float *dx, float *dw, float *db) {
  return cnn_onednn_conv_backward_pair(CONVOLUTION, s, dy, x, w, dx, dw, db);
}

void cnn_cpu_onednn_cache_clear(void) {
  pthread_mutex_lock(&G.lock);
  for (int i = 0; i < CACHE_SIZE; i++)
    if (G.entries[i].used) entry_destroy(&G.entries[i]);
  free(G.arena);
  G.arena = NULL, G.arena_bytes = 0;
  if (G.stream) dnnl_stream_destroy(G.stream);
  if (G.engine) dnnl_engine_destroy(G.engine);
  G.stream = NULL, G.engine = NULL;
  pthread_mutex_unlock(&G.lock);
}

int cnn_cpu_onednn_cache_size(void) {
  int n = 0;
  pthread_mutex_lock(&G.lock);
  for (int i = 0; i < CACHE_SIZE; i++) n += G.entries[i].used && !G.entries[i].unsupported;
  pthread_mutex_unlock(&G.lock);
  return n;
}
