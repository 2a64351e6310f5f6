/*
 * test_autograd_oom.c -- a graph node that cannot be allocated makes
 * backward fail with a message naming the op; the process lives on.
 *
 * This program defines calloc() itself, so every calloc in the process
 * (core's included) comes here: it forwards to glibc's __libc_calloc
 * except that, while `fail_node_allocs` is set, a request of exactly
 * sizeof(cnn_node) bytes fails.  Sanitizer builds replace calloc
 * themselves, so there the test reports skipped (exit 77).
 */
#include <stdlib.h>
#include <string.h>

#include "autograd.h"
#include "check.h"
#include "cnn.h"

#if defined(__SANITIZE_ADDRESS__)
#define NO_INTERPOSING 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NO_INTERPOSING 1
#endif
#endif

#ifndef NO_INTERPOSING
extern void *__libc_calloc(size_t n, size_t size);
static int fail_node_allocs;

void *calloc(size_t n, size_t size) {
  if (fail_node_allocs && n == 1 && size == sizeof(cnn_node)) return NULL;
  return __libc_calloc(n, size);
}

static void test_backward_reports_the_unrecorded_op(void) {
  int64_t shape[1] = {3};
  cnn_tensor *x = cnn_full(1, shape, 1.0, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_set_requires_grad(x, true);
  cnn_tensor *y = cnn_unary(CNN_OP_EXP, x, 0, 0); /* recorded normally */
  fail_node_allocs = 1;
  cnn_tensor *z = cnn_binary(CNN_OP_MUL, y, y); /* its node cannot be allocated */
  fail_node_allocs = 0;
  CHECK(z != NULL);
  CHECK(z && z->requires_grad && !z->grad_fn);
  cnn_tensor *s = z ? cnn_reduce(CNN_RED_SUM, z, 0, false, 0) : NULL; /* recorded */
  CHECK(s != NULL);
  /* through a later op: the engine meets the broken tensor as an input */
  CHECK(s && cnn_backward(s, NULL, false) == -1);
  CHECK(strstr(cnn_error(), "backward: the graph was not recorded at") != NULL);
  CHECK(strstr(cnn_error(), "Backward") != NULL); /* the op's node name */
  CHECK(x->grad == NULL);
  /* on the broken tensor itself */
  CHECK(z && cnn_backward(z, NULL, false) == -1);
  CHECK(strstr(cnn_error(), "not recorded") != NULL);
  /* and the session goes on: a fresh graph works */
  cnn_tensor *w = cnn_binary(CNN_OP_MUL, x, x);
  cnn_tensor *t = w ? cnn_reduce(CNN_RED_SUM, w, 0, false, 0) : NULL;
  CHECK(t && cnn_backward(t, NULL, false) == 0);
  CHECK(x->grad && ((float *)cnn_tensor_data(x->grad))[0] == 2.0f);
  cnn_tensor_release(t), cnn_tensor_release(w), cnn_tensor_release(s);
  cnn_tensor_release(z), cnn_tensor_release(y), cnn_tensor_release(x);
}
#endif

int main(void) {
#ifdef NO_INTERPOSING
  fprintf(stderr, "skipped: calloc cannot be interposed under a sanitizer\n");
  return 77;
#else
  test_backward_reports_the_unrecorded_op();
  return check_report("autograd_oom");
#endif
}
