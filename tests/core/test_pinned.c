/*
 * test_pinned.c -- page-locked tensors and asynchronous copies to the GPU
 * (storage.c: cnn_empty_pinned, cnn_pin_memory, cnn_is_pinned; copy.c:
 * cnn_to_device_async; core/io/batcher.c: pinned batches).
 *
 * Two runs of one binary:
 *  - without CUDA (unit_test_pinned here): pinning fails with an error that
 *    names pin_memory and the reason, allocates nothing, and non_blocking
 *    moves take the ordinary path (a CUDA target still fails with the
 *    reason); the batcher refuses pin_memory and keeps working unpinned.
 *  - with a CUDA backend (test pinned_fake: CNNSH_CUDA_MODULE = the fake
 *    device; or a real GPU): values against references computed here from
 *    the source elements (naive loops), CPU live-byte accounting, autograd
 *    through the pinned copy, memory back to its start after 300 pinned
 *    batches, pinned batches from the batcher, and -- on the fake, through
 *    its exported counters -- that exactly the eligible copies (pinned,
 *    contiguous, same dtype) took the asynchronous entry.
 */
#include "check.h"
#include "cnn.h"
#include "io/io.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

static const cnn_device CUDA0 = {CNN_CUDA, 0};

/* the fake device's counters (NULL on a real GPU) */
static long *fake_async_copies;
static long *fake_pinned_blocks;

static void find_fake_counters(void) {
  const char *path = getenv("CNNSH_CUDA_MODULE");
  void *h = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  if (!h) return;
  fake_async_copies = dlsym(h, "fake_async_copies");
  fake_pinned_blocks = dlsym(h, "fake_pinned_live_blocks");
}

static long async_copies(void) { return fake_async_copies ? *fake_async_copies : 0; }

/* 1 when every element of a equals the same element of b (any layouts/devices) */
static int same_values(const cnn_tensor *a, const cnn_tensor *b) {
  int64_t n = cnn_tensor_numel(a);
  if (n != cnn_tensor_numel(b)) return 0;
  for (int64_t i = 0; i < n; i++)
    if (cnn_tensor_get(a, i) != cnn_tensor_get(b, i)) return 0;
  return 1;
}

/* ---- without CUDA -------------------------------------------------------------------- */

static void test_refused(const char *why) {
  cnn_tensor *t = cnn_randn(2, (int64_t[]){3, 5}, CNN_FLOAT32);
  int64_t live = cnn_memory(CNN_CPU).live;
  CHECK(cnn_pin_memory(t) == NULL);
  CHECK(strstr(cnn_error(), "pin_memory") != NULL && strstr(cnn_error(), why) != NULL);
  CHECK(cnn_empty_pinned(1, (int64_t[]){4}, CNN_FLOAT32) == NULL);
  CHECK(cnn_memory(CNN_CPU).live == live);
  CHECK(!cnn_is_pinned(t) && !cnn_is_pinned(NULL));
  cnn_tensor *same = cnn_to_device_async(t, CNN_DEVICE_CPU); /* nothing to move */
  CHECK(same == t);
  if (same) cnn_tensor_release(same);
  CHECK(cnn_to_device_async(t, CUDA0) == NULL);
  CHECK(strstr(cnn_error(), why) != NULL);
  cnn_tensor_release(t);
}

static void test_batcher_refused(const char *why) {
  cnn_tensor *img = cnn_arange(0, 12, 1, CNN_FLOAT32);
  cnn_tensor *v = cnn_view(img, 3, (int64_t[]){3, 2, 2});
  cnn_batcher *b = cnn_batcher_new(v, NULL, NULL, 3, 2, false, NULL, 0, 1);
  CHECK(b != NULL);
  if (!b) return;
  CHECK(cnn_batcher_set_pin_memory(b, true) == -1);
  CHECK(strstr(cnn_error(), "pin_memory") != NULL && strstr(cnn_error(), why) != NULL);
  cnn_tensor *x = NULL;
  CHECK(cnn_batcher_next(b, &x, NULL) == 1);
  if (x) {
    CHECK(!cnn_is_pinned(x) && x->shape[0] == 2);
    for (int64_t i = 0; i < 8; i++) CHECK(cnn_tensor_get(x, i) == (double)i);
    cnn_tensor_release(x);
  }
  CHECK(cnn_batcher_set_pin_memory(b, false) == -1); /* too late: a batch was handed out */
  cnn_batcher_free(b);
  cnn_tensor_release(v);
  cnn_tensor_release(img);
}

/* ---- with CUDA ----------------------------------------------------------------------- */

/* a strided source gives a pinned contiguous copy; a pinned one is returned */
static void test_pin_copy(void) {
  cnn_tensor *t = cnn_randn(2, (int64_t[]){4, 6}, CNN_FLOAT32);
  cnn_tensor *tt = cnn_transpose(t, 0, 1); /* 6 x 4, strided */
  int64_t live = cnn_memory(CNN_CPU).live;
  cnn_tensor *p = cnn_pin_memory(tt);
  CHECK(p != NULL);
  if (!p) return;
  CHECK(cnn_is_pinned(p) && cnn_tensor_is_contiguous(p) && !cnn_is_pinned(tt));
  CHECK(p->shape[0] == 6 && p->shape[1] == 4 && p->dtype == CNN_FLOAT32);
  CHECK(cnn_memory(CNN_CPU).live == live + 96); /* pinned bytes count as CPU memory */
  const float *d = cnn_tensor_data(p);
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 4; j++) CHECK(d[i * 4 + j] == (float)cnn_tensor_get(t, j * 6 + i));
  cnn_tensor *again = cnn_pin_memory(p);
  CHECK(again == p);
  if (again) cnn_tensor_release(again);
  cnn_tensor_release(p);
  CHECK(cnn_memory(CNN_CPU).live == live);
  cnn_tensor_release(tt);
  cnn_tensor_release(t);
}

/* which moves go asynchronously, and that every one gives the same values */
static void test_async_moves(void) {
  cnn_tensor *t = cnn_randn(2, (int64_t[]){5, 7}, CNN_FLOAT64);
  cnn_tensor *p = cnn_pin_memory(t);
  CHECK(p != NULL);
  if (!p) return;
  struct {
    cnn_tensor *src;
    int async;
  } cases[4] = {{p, 1},                      /* pinned, contiguous */
                {cnn_narrow(p, 0, 2, 3), 1}, /* a contiguous view at an offset */
                {cnn_transpose(p, 0, 1), 0}, /* pinned but strided: synchronous */
                {t, 0}};                     /* not pinned: synchronous */
  for (int k = 0; k < 4; k++) {
    long before = async_copies();
    cnn_tensor *d = cnn_to_device_async(cases[k].src, CUDA0);
    CHECK(d != NULL);
    if (!d) continue;
    CHECK(cnn_tensor_device(d).type == CNN_CUDA && same_values(d, cases[k].src));
    if (fake_async_copies) CHECK(async_copies() - before == cases[k].async);
    cnn_tensor_release(d);
  }
  cnn_tensor_release(cases[1].src);
  cnn_tensor_release(cases[2].src);
  cnn_tensor_release(p);
  cnn_tensor_release(t);
}

/* int64 labels go the same way; the gradient flows back through both copies */
static void test_labels_and_grad(void) {
  cnn_tensor *y = cnn_randint(1, 10, 1, (int64_t[]){9}, CNN_INT64);
  cnn_tensor *py = cnn_pin_memory(y), *dy = py ? cnn_to_device_async(py, CUDA0) : NULL;
  CHECK(dy != NULL && same_values(dy, y));
  cnn_tensor *x = cnn_randn(2, (int64_t[]){2, 3}, CNN_FLOAT64);
  cnn_set_requires_grad(x, true);
  cnn_tensor *px = cnn_pin_memory(x), *dx = px ? cnn_to_device_async(px, CUDA0) : NULL;
  cnn_tensor *s = dx ? cnn_reduce(CNN_RED_SUM, dx, 0, false, 0) : NULL;
  CHECK(s != NULL && px->requires_grad && cnn_backward(s, NULL, false) == 0);
  CHECK(x->grad != NULL);
  for (int64_t i = 0; x->grad && i < 6; i++) CHECK(cnn_tensor_get(x->grad, i) == 1.0);
  cnn_tensor *all[] = {s, dx, px, x, dy, py, y};
  for (int i = 0; i < 7; i++)
    if (all[i]) cnn_tensor_release(all[i]);
}

/* 300 pinned 64x1x28x28 batches moved and dropped: memory ends where it began */
static void test_flat(void) {
  cnn_memory_stats c0 = cnn_memory(CNN_CPU), g0 = cnn_memory(CNN_CUDA);
  long blocks0 = fake_pinned_blocks ? *fake_pinned_blocks : 0;
  int64_t shape[4] = {64, 1, 28, 28};
  for (int i = 0; i < 300; i++) {
    cnn_tensor *x = cnn_empty_pinned(4, shape, CNN_FLOAT32);
    CHECK(x != NULL);
    if (!x) return;
    cnn_fill_(x, i);
    cnn_tensor *d = cnn_to_device_async(x, CUDA0);
    cnn_tensor_release(x); /* released while "in flight": the backend keeps the block */
    CHECK(d != NULL);
    if (!d) return;
    if (i % 100 == 0) CHECK(cnn_tensor_get(d, 50175) == i);
    cnn_tensor_release(d);
  }
  CHECK(cnn_memory(CNN_CPU).live == c0.live && cnn_memory(CNN_CPU).count == c0.count);
  CHECK(cnn_memory(CNN_CUDA).live == g0.live);
  if (fake_pinned_blocks) CHECK(*fake_pinned_blocks == blocks0);
}

/* the batcher's batches are pinned and hold the same values as unpinned ones */
static void test_batcher_pinned(void) {
  cnn_tensor *img = cnn_randint(0, 255, 3, (int64_t[]){10, 3, 4}, CNN_UINT8);
  cnn_tensor *lab = cnn_randint(0, 9, 1, (int64_t[]){10}, CNN_INT64);
  int64_t order[10] = {3, 1, 4, 0, 5, 9, 2, 6, 8, 7};
  cnn_transform tf = {.scale = 1 / 255.0};
  int64_t live = cnn_memory(CNN_CPU).live;
  cnn_batcher *b = cnn_batcher_new(img, lab, order, 10, 4, false, &tf, 1, 5);
  CHECK(b != NULL && cnn_batcher_set_pin_memory(b, true) == 0);
  cnn_tensor *x, *y;
  int64_t pos = 0;
  while (b && cnn_batcher_next(b, &x, &y) == 1) {
    CHECK(cnn_is_pinned(x) && cnn_is_pinned(y));
    for (int64_t j = 0; j < x->shape[0]; j++, pos++) {
      CHECK(cnn_tensor_get(y, j) == cnn_tensor_get(lab, order[pos]) + 1);
      for (int64_t e = 0; e < 12; e++) {
        float want = (float)(cnn_tensor_get(img, order[pos] * 12 + e) / 255.0);
        CHECK_CLOSE(cnn_tensor_get(x, j * 12 + e), want, 1e-6);
      }
    }
    cnn_tensor *d = cnn_to_device_async(x, CUDA0);
    CHECK(d != NULL && same_values(d, x));
    if (d) cnn_tensor_release(d);
    cnn_tensor_release(x);
    cnn_tensor_release(y);
  }
  CHECK(pos == 10);
  cnn_batcher_free(b);
  CHECK(cnn_memory(CNN_CPU).live == live);
  cnn_tensor_release(img);
  cnn_tensor_release(lab);
}

int main(void) {
  cnn_manual_seed(7);
  const char *why = cnn_cuda_unavailable_reason();
  if (why) {
    printf("test_pinned: CUDA unavailable (%s): checking the refusals\n", why);
    test_refused(why);
    test_batcher_refused(why);
  } else {
    find_fake_counters();
    printf("test_pinned: on %s\n", fake_async_copies ? "the fake CUDA device" : "a CUDA device");
    test_pin_copy();
    test_async_moves();
    test_labels_and_grad();
    test_flat();
    test_batcher_pinned();
  }
  return check_report("pinned");
}
