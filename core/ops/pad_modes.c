/*
 * pad_modes.c -- F.pad's 'reflect', 'replicate' and 'circular' modes
 * ('constant' is cnn_pad in join.c).
 *
 * Design.  Each mode is a map from an output position along one padded
 * dimension to an input position, so padding is one index_select per
 * padded dimension with a computed int64 index: the forward and backward
 * (index_add) exist on every device already, and the gradient of a
 * position read twice (reflect, replicate) or wrapped (circular) adds up
 * by construction.  For an input of size L along a dim padded by (l, r),
 * output position i in [-l, L + r) reads
 *
 *   reflect    i < 0: -i;  i >= L: 2(L-1) - i     (the edge not repeated)
 *   replicate  clamp(i, 0, L-1)
 *   circular   i mod L
 *
 * PyTorch's rules: pads = {left, right, top, bottom, front, back} for the
 * last 1 to 3 dims, of an input with at least one more dim (unbatched
 * C x L, or batched N x C x L, ...); reflect needs each pad < L,
 * circular each pad <= L, replicate L > 0.  Negative pads crop, as in
 * PyTorch.
 */
#include "cnn.h"
#include "tensor_internal.h"

#include <stdlib.h>

static const char *mode_name[] = {"reflect", "replicate", "circular"};

/* Input position read by output position i (see the table above). */
static int64_t source_index(cnn_padding_mode mode, int64_t i, int64_t L) {
  if (mode == CNN_PAD_REFLECT) return i < 0 ? -i : (i >= L ? 2 * (L - 1) - i : i);
  if (mode == CNN_PAD_REPLICATE) return i < 0 ? 0 : (i >= L ? L - 1 : i);
  return ((i % L) + L) % L;
}

static int check_pads(const cnn_tensor *x, int npads, const int64_t *pads, cnn_padding_mode mode) {
  char s[CNN_SHAPE_STR];
  const char *m = mode_name[mode];
  if (npads < 2 || npads > 6 || npads % 2 || x->ndim < npads / 2 + 1) {
    cnn_set_error("pad: mode '%s' pads the last 1 to 3 dims of an input with at least one more dim "
                  "(%d pads for input %s)",
                  m, npads, cnn_tensor_shape_str(x, s));
    return -1;
  }
  for (int k = 0; k < npads; k++) {
    int dim = x->ndim - 1 - k / 2;
    int64_t L = x->shape[dim], p = pads[k];
    int bad = mode == CNN_PAD_REFLECT ? p >= L : mode == CNN_PAD_CIRCULAR ? p > L : L == 0;
    if (bad || L + pads[k - k % 2] + pads[k - k % 2 + 1] <= 0) {
      cnn_set_error(
          "pad: mode '%s': padding (%lld, %lld) of dim %d does not fit input %s "
          "(reflect: each pad < the dim's size; circular: <= it; the result must not be empty)",
          m, (long long)pads[k - k % 2], (long long)pads[k - k % 2 + 1], dim + 1,
          cnn_tensor_shape_str(x, s));
      return -1;
    }
  }
  return 0;
}

/* The index tensor of one padded dim, on `dev`. */
static cnn_tensor *pad_index(cnn_padding_mode mode, int64_t L, int64_t l, int64_t r,
                             cnn_device dev) {
  int64_t n = L + l + r;
  int64_t *v = malloc((size_t)n * sizeof *v);
  if (!v) return cnn_set_error("pad: out of memory for a %lld-entry index", (long long)n), NULL;
  for (int64_t j = 0; j < n; j++) v[j] = source_index(mode, j - l, L);
  cnn_tensor *idx = cnn_from_buffer(1, &n, CNN_INT64, v);
  free(v);
  if (!idx || dev.type == CNN_CPU) return idx;
  cnn_tensor *on_dev = cnn_to_device(idx, dev);
  cnn_tensor_release(idx);
  return on_dev;
}

cnn_tensor *cnn_pad_mode(cnn_tensor *x, int npads, const int64_t *pads, cnn_padding_mode mode) {
  if (!x) return cnn_set_error("pad: no input tensor"), NULL;
  if ((unsigned)mode > CNN_PAD_CIRCULAR)
    return cnn_set_error("pad: unknown mode %d", (int)mode), NULL;
  if (check_pads(x, npads, pads, mode)) return NULL;
  cnn_tensor *y = x;
  cnn_tensor_retain(x);
  for (int k = 0; k < npads && y; k += 2) {
    int dim = x->ndim - 1 - k / 2;
    cnn_tensor *idx = pad_index(mode, x->shape[dim], pads[k], pads[k + 1], cnn_tensor_device(x));
    cnn_tensor *next = idx ? cnn_index_select(y, dim, idx) : NULL;
    cnn_tensor_release(idx), cnn_tensor_release(y);
    y = next;
  }
  return y;
}
