/*
 * conv_plan.h -- the host-testable arithmetic of gpu/cudnn_conv.cu: the
 * algorithm cache's key, and the symmetric problem that cuDNN runs for a
 * convolution with asymmetric padding.  Plain C (CNN_HD functions, host
 * and device), used by the module, by the fake device
 * (tests/gpu/fake_cuda_fault.c runs asymmetric padding through the same
 * plan) and by tests/gpu/test_gpu_recover.c.
 *
 * Asymmetric padding (pt != pb or pl != pr).  cuDNN takes one padding per
 * side pair, so, as PyTorch does for padding='same': cuDNN runs with the
 * smaller pad of each pair (ph = min(pt, pb), pw = min(pl, pr)) over a
 * scratch copy of the input that carries the rest as explicit zeros --
 * `top` = pt - ph rows above, pb - ph below, `left` = pl - pw columns
 * left, pr - pw right.  The output size is unchanged:
 *   H + pt + pb = (H + (pt - ph) + (pb - ph)) + 2 ph.
 * Forward and the weight gradient read the padded copy; the input
 * gradient is computed over the padded size and cropped back (element
 * (i, j) of dx is element (i + top, j + left) of the padded gradient).
 */
#ifndef CNN_GPU_CONV_PLAN_H
#define CNN_GPU_CONV_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "elementwise_math.h" /* CNN_HD */

/* The algorithm cache's key: a problem and the settings that change which
 * algorithm is chosen (benchmark mode times them; the heuristics guess). */
typedef struct {
  int dev;
  cnn_dtype dt;
  bool benchmark;
  cnn_conv_shape s;
} gpu_conv_key;

/* every field: memcmp would also compare the structs' padding bytes */
static inline bool gpu_conv_shape_equal(const cnn_conv_shape *a, const cnn_conv_shape *b) {
  return a->N == b->N && a->C == b->C && a->H == b->H && a->W == b->W && a->K == b->K &&
         a->R == b->R && a->S == b->S && a->OH == b->OH && a->OW == b->OW && a->sh == b->sh &&
         a->sw == b->sw && a->pt == b->pt && a->pb == b->pb && a->pl == b->pl && a->pr == b->pr &&
         a->dh == b->dh && a->dw == b->dw && a->groups == b->groups;
}

static inline bool gpu_conv_key_equal(const gpu_conv_key *a, const gpu_conv_key *b) {
  return a->dev == b->dev && a->dt == b->dt && a->benchmark == b->benchmark &&
         gpu_conv_shape_equal(&a->s, &b->s);
}

static inline bool gpu_conv_asymmetric(const cnn_conv_shape *s) {
  return s->pt != s->pb || s->pl != s->pr;
}

/* the padded copy: zeros above (top) and left (left) of x, its size H x W */
typedef struct {
  int64_t top, left, H, W;
} gpu_pad_plan;

/* the symmetric problem `sym` over the padded copy `p` for s */
static inline void gpu_conv_pad_plan(const cnn_conv_shape *s, cnn_conv_shape *sym,
                                     gpu_pad_plan *p) {
  int ph = s->pt < s->pb ? s->pt : s->pb, pw = s->pl < s->pr ? s->pl : s->pr;
  p->top = s->pt - ph, p->left = s->pl - pw;
  p->H = s->H + (s->pt - ph) + (s->pb - ph);
  p->W = s->W + (s->pl - pw) + (s->pr - pw);
  *sym = *s;
  sym->H = p->H, sym->W = p->W;
  sym->pt = sym->pb = ph, sym->pl = sym->pr = pw;
}

/* For element i of the padded copy (N*C x H x W, row-major): the index of
 * the input element it copies (input N*C x h x w), or -1 for a zero. */
static inline CNN_HD int64_t gpu_pad_source(const gpu_pad_plan *p, int64_t h, int64_t w,
                                            int64_t i) {
  int64_t col = i % p->W, row = (i / p->W) % p->H, plane = i / (p->W * p->H);
  int64_t r = row - p->top, c = col - p->left;
  if (r < 0 || r >= h || c < 0 || c >= w) return -1;
  return (plane * h + r) * w + c;
}

/* For element i of the cropped gradient (N*C x h x w): its index in the
 * padded gradient (N*C x H x W). */
static inline CNN_HD int64_t gpu_crop_source(const gpu_pad_plan *p, int64_t h, int64_t w,
                                             int64_t i) {
  int64_t c = i % w, r = (i / w) % h, plane = i / (w * h);
  return (plane * p->H + r + p->top) * p->W + c + p->left;
}

#endif
