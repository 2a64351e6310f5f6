/*
 * dist.c -- the collectives modules' life: loading, rank facts, and the
 * end of a distributed program (dist.h).
 *
 * cnn_dist_init("mpi") dlopen()s libcnn_mpi.so (the search of
 * cnn_module_open: $CNNSH_MPI_MODULE, next to the executable, ../lib/cnnsh/,
 * the build tree) and initialises MPI through it; "nccl" does that and then
 * loads libcnn_nccl.so ($CNNSH_NCCL_MODULE ...) with the CUDA backend, on
 * device local_rank % device_count (one GPU per process, as torchrun
 * does).  Nothing here runs before the first init: a plain start-up never
 * maps libmpi.  State is process-wide and belongs to the main thread (MPI
 * is initialised FUNNELED).
 *
 * The end: cnn_dist_shutdown(status) is what cnnsh calls on its way out.
 * A clean exit finalizes MPI (every rank does); a failing rank prints
 * "cnnsh: rank R of N failed, stopping every rank" and calls the module's
 * abort (MPI_Abort), which makes mpirun end every other rank at once and
 * name the failed one -- a rank stuck in a collective with a dead peer would
 * otherwise wait forever.
 */
#include "dist.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CNNSH_MPI_MODULE_BUILD_PATH
#define CNNSH_MPI_MODULE_BUILD_PATH ""
#endif
#ifndef CNNSH_NCCL_MODULE_BUILD_PATH
#define CNNSH_NCCL_MODULE_BUILD_PATH ""
#endif

static const cnn_collectives *mpi_table;  /* after a successful init */
static const cnn_collectives *nccl_table; /* backend "nccl" only */
static cnn_dist_info info = {.rank = 0, .world = 1, .local_rank = 0, .local_world = 1};
static bool finished; /* finalized or aborted */

static void *load_symbol(const char *env, const char *file, const char *build_path,
                         const char *symbol) {
  char err[400] = "";
  void *h = cnn_module_open(env, file, build_path, err, sizeof err);
  if (!h) {
    cnn_set_error("dist.init: cannot load %s (%s): %s", file,
                  *build_path ? "is Open MPI / NCCL installed?" : "cnnsh was built without it",
                  err);
    return NULL;
  }
  void *sym = dlsym(h, symbol);
  if (!sym) cnn_set_error("dist.init: %s lacks %s", file, symbol);
  return sym;
}

static int init_mpi(void) {
  cnn_mpi_init_fn init = (cnn_mpi_init_fn)load_symbol("CNNSH_MPI_MODULE", "libcnn_mpi.so",
                                                      CNNSH_MPI_MODULE_BUILD_PATH, "cnn_mpi_init");
  if (!init) return -1;
  char reason[400] = "";
  cnn_dist_info got = {0};
  const cnn_collectives *t = init(cnn_core_api_get(), &got, reason, sizeof reason);
  if (!t) {
    if (*reason) cnn_set_error("dist.init: %s", reason);
    return -1;
  }
  mpi_table = t;
  info = got;
  return 0;
}

static int init_nccl(void) {
  const cnn_backend *cuda = cnn_cuda_backend("dist.init{backend = 'nccl'}");
  if (!cuda) return -1;
  cnn_nccl_init_fn init = (cnn_nccl_init_fn)load_symbol(
      "CNNSH_NCCL_MODULE", "libcnn_nccl.so", CNNSH_NCCL_MODULE_BUILD_PATH, "cnn_nccl_init");
  if (!init) return -1;
  int devices = cuda->device_count();
  if (devices < 1) return cnn_set_error("dist.init: nccl needs a CUDA device"), -1;
  char reason[400] = "";
  int device = info.local_rank % devices;
  const cnn_collectives *t =
      init(cnn_core_api_get(), &info, device, mpi_table, cuda, reason, sizeof reason);
  if (!t) {
    cnn_set_error("dist.init: %s", *reason ? reason : cnn_error());
    return -1;
  }
  nccl_table = t;
  return cuda->set_device(device);
}

int cnn_dist_init(const char *backend) {
  bool want_nccl = backend && strcmp(backend, "nccl") == 0;
  if (!backend || (!want_nccl && strcmp(backend, "mpi") != 0)) {
    cnn_set_error("dist.init: unknown backend '%s' (expected 'mpi' or 'nccl')",
                  backend ? backend : "(null)");
    return -1;
  }
  if (finished) return cnn_set_error("dist.init: dist was already finalized"), -1;
  if (mpi_table && (nccl_table != NULL) != want_nccl) {
    cnn_set_error("dist.init: already initialised with backend '%s'", cnn_dist_backend());
    return -1;
  }
  if (want_nccl && !cnn_cuda_backend("dist.init{backend = 'nccl'}")) return -1; /* before MPI */
  if (!mpi_table && init_mpi()) return -1;
  if (want_nccl && !nccl_table && init_nccl()) return -1;
  return 0;
}

bool cnn_dist_is_initialized(void) { return mpi_table != NULL && !finished; }
const char *cnn_dist_backend(void) {
  return !cnn_dist_is_initialized() ? NULL : nccl_table ? "nccl" : "mpi";
}
cnn_dist_info cnn_dist_get_info(void) { return info; }

const cnn_collectives *cnn_dist_table(const char *op, const cnn_tensor *t) {
  if (!cnn_dist_is_initialized()) {
    cnn_set_error("%s: call dist.init() first", op);
    return NULL;
  }
  if (t && t->storage->device.type == CNN_CUDA && nccl_table) return nccl_table;
  return mpi_table; /* CPU tensors; CUDA tensors under mpi are staged on the host */
}

const cnn_collectives *cnn_dist_mpi(void) { return mpi_table; }

void cnn_dist_abort(int code) {
  if (!cnn_dist_is_initialized()) return;
  finished = true;
  fflush(stdout);
  mpi_table->abort(code);
}

int cnn_dist_shutdown(int status) {
  if (!cnn_dist_is_initialized()) return status;
  if (status != 0) {
    fprintf(stderr, "cnnsh: rank %d of %d failed (exit status %d), stopping every rank\n",
            info.rank, info.world, status);
    cnn_dist_abort(status);
    return status;
  }
  if (nccl_table) nccl_table->finalize();
  int rc = mpi_table->finalize();
  finished = true;
  if (rc) fprintf(stderr, "cnnsh: %s\n", cnn_error());
  return rc ? 1 : 0;
}
