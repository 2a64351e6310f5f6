/*
 * test_gpu_module.c -- the CUDA module without (or with) a GPU (label
 * `unit`): it runs on every CI machine, since the module is built wherever
 * the toolkit is.
 *
 * Checks: libcnn_cuda.so (argv[1]) dlopen()s even without libcuda.so.1
 * (the CUDA runtime loads the driver lazily); its init entry point returns
 * either a complete table or NULL with a clear reason ("no CUDA driver",
 * "no CUDA device"); its version lines name cuDNN and cuBLAS; and through
 * core: cnn_cuda_unavailable_reason() agrees, a CUDA allocation fails with
 * that reason instead of crashing, and a CPU op still works afterwards.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "cnn.h"

static const cnn_core_api api = {CNN_CORE_API_VERSION, cnn_set_error,  cnn_interrupt_pending,
                                 cnn_dtype_name,       cnn_unary_name, cnn_binary_name};

static void check_table(const cnn_backend *be) {
  CHECK(be->alloc && be->free && be->copy_h2d && be->copy_d2h && be->copy && be->fill);
  CHECK(be->unary && be->binary && be->unary_grad && be->where && be->reduce && be->gemm);
  CHECK(be->conv2d_forward && be->conv2d_backward_data && be->conv2d_backward_weight);
  CHECK(be->max_pool2d_forward && be->avg_pool2d_forward && be->adaptive_avg_pool2d_forward);
  CHECK(be->batch_norm_forward && be->batch_norm_backward && be->softmax_forward);
  CHECK(be->class_loss_forward && be->bce_forward && be->dropout_mask && be->index_select);
  CHECK(be->gather && be->scatter_add && be->sgd_step && be->adam_step && be->rmsprop_step);
  CHECK(be->device_count() > 0);
}

static void direct(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECK(h != NULL);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    return;
  }
  cnn_cuda_backend_init_fn init = (cnn_cuda_backend_init_fn)dlsym(h, "cnn_cuda_backend_init");
  const char *(*version)(void) = (const char *(*)(void))dlsym(h, "cnn_cuda_version_info");
  CHECK(init != NULL && version != NULL);
  if (!init || !version) return;
  const char *v = version();
  printf("%s\n", v);
  CHECK(strstr(v, "cuDNN 9.") != NULL && strstr(v, "cuBLAS") != NULL);
  char reason[512] = "";
  const cnn_backend *be = init(&api, reason, sizeof reason);
  if (be) {
    printf("module: a device is present\n");
    check_table(be);
  } else {
    printf("module: %s\n", reason);
    CHECK(strstr(reason, "no CUDA driver") || strstr(reason, "no CUDA device") ||
          strstr(reason, "CUDA initialisation failed"));
  }
  char r2[64];
  CHECK(init(NULL, r2, sizeof r2) == NULL && strstr(r2, "does not match"));
  /* the module stays loaded: its runtime may hold threads */
}

static void through_core(void) {
  const char *why = cnn_cuda_unavailable_reason();
  const char *info = cnn_cuda_module_info();
  CHECK(info != NULL);
  int64_t shape[1] = {2};
  cnn_tensor *t = cnn_zeros(1, shape, CNN_FLOAT32, (cnn_device){CNN_CUDA, 0});
  if (why) {
    printf("core: cuda unavailable: %s\n", why);
    CHECK(t == NULL);
    CHECK(strstr(cnn_error(), why) != NULL);
  } else {
    CHECK(t != NULL);
  }
  cnn_tensor_release(t);
  cnn_tensor *c = cnn_full(1, shape, 2.0, CNN_FLOAT32, CNN_DEVICE_CPU);
  cnn_tensor *s = c ? cnn_binary(CNN_OP_MUL, c, c) : NULL;
  CHECK(s && cnn_tensor_get(s, 1) == 4.0);
  cnn_tensor_release(c), cnn_tensor_release(s);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_gpu_module path/to/libcnn_cuda.so\n");
    return 2;
  }
  direct(argv[1]);
  through_core();
  return check_report("gpu_module");
}
