/*
 * split.c -- chunk, split and unbind: one tensor into views along a
 * dimension.
 *
 * Every piece is a view (narrow or select) sharing x's storage, so the
 * pieces' gradients flow back through NarrowBackward / SelectBackward and
 * add up in x's gradient.  The sizes follow PyTorch:
 *  - split(split_size): pieces of split_size, the last one smaller; a
 *    dimension of size 0 gives one empty piece; split_size 0 only for a
 *    dimension of size 0;
 *  - chunk(chunks): split(ceil(size / chunks)), so there may be fewer
 *    than `chunks` pieces (size 5 in 4 chunks: 2, 2, 1); a dimension of
 *    size 0 gives `chunks` empty pieces;
 *  - split(sizes): the sizes, non-negative, must add up to the dimension;
 *  - unbind: every index of the dimension, which is removed.
 * The *_sizes functions only count: with sizes == NULL they return the
 * number of pieces, so a caller can allocate the list first.
 */
#include "cnn.h"
#include "ops_internal.h"

int64_t cnn_split_sizes(int64_t size, int64_t split_size, int64_t *sizes) {
  if (split_size < 0 || (split_size == 0 && size > 0))
    return cnn_set_error(
               "split: split size %lld for a dimension of size %lld (must be positive, or 0 "
               "for an empty dimension)",
               (long long)split_size, (long long)size),
           -1;
  /* ceil(size / split_size), without an overflow for a huge split size */
  int64_t n = split_size ? size / split_size + (size % split_size != 0) : 1;
  if (n == 0) n = 1;
  for (int64_t i = 0; sizes && i < n; i++)
    sizes[i] = i < n - 1 ? split_size : size - split_size * (n - 1);
  return n;
}

int64_t cnn_chunk_sizes(int64_t size, int64_t chunks, int64_t *sizes) {
  if (chunks < 1)
    return cnn_set_error("chunk: %lld chunks (expected at least 1)", (long long)chunks), -1;
  if (size == 0) {
    for (int64_t i = 0; sizes && i < chunks; i++) sizes[i] = 0;
    return chunks;
  }
  /* ceil(size / chunks) without size + chunks - 1, which overflows for a huge count */
  return cnn_split_sizes(size, size / chunks + (size % chunks != 0), sizes);
}

static int check_sizes(const cnn_tensor *x, int dim, int64_t n, const int64_t *sizes) {
  char s[CNN_SHAPE_STR];
  int64_t total = 0, size = x->shape[dim];
  for (int64_t i = 0; i < n; i++) {
    if (sizes[i] < 0 || sizes[i] > size - total)
      return cnn_set_error("split: sizes must be non-negative and add up to %lld, the size of "
                           "dimension %d of input %s",
                           (long long)size, dim + 1, cnn_tensor_shape_str(x, s)),
             -1;
    total += sizes[i];
  }
  if (total != size)
    return cnn_set_error("split: sizes add up to %lld, but dimension %d of input %s has %lld",
                         (long long)total, dim + 1, cnn_tensor_shape_str(x, s), (long long)size),
           -1;
  return 0;
}

static void release_all(int64_t n, cnn_tensor **out) {
  for (int64_t i = 0; i < n; i++) cnn_tensor_release(out[i]), out[i] = NULL;
}

int cnn_split(cnn_tensor *x, int dim, int64_t n, const int64_t *sizes, cnn_tensor **out) {
  char s[CNN_SHAPE_STR];
  if (!x) return cnn_set_error("split: missing tensor argument"), -1;
  if (x->ndim == 0)
    return cnn_set_error("split: a 0-d tensor (%s) has no dimension to split",
                         cnn_tensor_shape_str(x, s)),
           -1;
  if (cnn_check_op_dim("split", x, dim) || check_sizes(x, dim, n, sizes)) return -1;
  int64_t at = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!(out[i] = cnn_narrow(x, dim, at, sizes[i]))) return release_all(i, out), -1;
    at += sizes[i];
  }
  return 0;
}

int cnn_unbind(cnn_tensor *x, int dim, cnn_tensor **out) {
  char s[CNN_SHAPE_STR];
  if (!x) return cnn_set_error("unbind: missing tensor argument"), -1;
  if (x->ndim == 0)
    return cnn_set_error("unbind: a 0-d tensor (%s) has no dimension", cnn_tensor_shape_str(x, s)),
           -1;
  if (cnn_check_op_dim("unbind", x, dim)) return -1;
  for (int64_t i = 0; i < x->shape[dim]; i++)
    if (!(out[i] = cnn_select(x, dim, i))) return release_all(i, out), -1;
  return 0;
}
