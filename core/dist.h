/*
 * dist.h -- collectives for data-parallel training: the table a
 * communication module fills, and core's tensor-level collectives over it.
 *
 * Like the CUDA backend (backend.h), the engines live in shared modules
 * that core loads with dlopen() on the first cnn_dist_init(), never at
 * start-up: dist/ builds libcnn_mpi.so over Open MPI (CPU buffers, any
 * number of machines), gpu/ builds libcnn_nccl.so over NCCL (CUDA buffers).
 * A machine without Open MPI runs everything but `dist`.  NCCL always comes
 * with MPI: MPI starts the processes, tells each its rank, carries NCCL's
 * unique id from rank 0 to the others, and moves the CPU tensors and the
 * shape checks of every collective.
 *
 * The module table (cnn_collectives) works on raw buffers in the module's
 * memory (host for MPI, device for NCCL), contiguous, every call collective
 * (every rank calls it with the same sizes).  Reductions come in the dtypes
 * has_dtype() accepts; core converts the others through float32.  Sizes are
 * at most INT_MAX elements (MPI counts are int).  All entries return 0, or
 * -1 with the module's message in cnn_set_error().
 *
 * The tensor functions (dist.c) validate, then check that every rank passes
 * the same op, root, dtype and shape (an all-gather of a small descriptor
 * through MPI), so a mismatch is an error on every rank naming both shapes
 * instead of a hang; they accept any layout (non-contiguous tensors go
 * through a contiguous copy) and empty tensors (nothing moves).  A CUDA
 * tensor under the MPI backend is staged through host memory; a CPU tensor
 * under NCCL goes over MPI.
 */
#ifndef CNN_DIST_H
#define CNN_DIST_H

#include "backend.h"
#include "cnn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reductions.  MEAN exists only at the tensor level: modules see SUM and
 * core divides by the world size. */
typedef enum { CNN_DIST_SUM, CNN_DIST_MEAN, CNN_DIST_MAX, CNN_DIST_MIN } cnn_dist_op;

typedef struct {
  int rank;        /* 0..world-1 */
  int world;       /* number of processes */
  int local_rank;  /* rank among the processes of this machine */
  int local_world; /* processes on this machine */
} cnn_dist_info;

typedef struct cnn_dist_request cnn_dist_request; /* a module's pending operation */

typedef struct cnn_collectives {
  const char *name;                /* "mpi", "nccl" */
  cnn_device_type device;          /* where its buffers live */
  bool (*has_dtype)(cnn_dtype dt); /* reductions in dt supported */
  /* buf[n] = op over ranks of buf[n] (in place) */
  int (*all_reduce)(void *buf, int64_t n, cnn_dtype dt, cnn_dist_op op);
  /* buf[nbytes] = root's buf */
  int (*broadcast)(void *buf, int64_t nbytes, int root);
  /* recv[world * nbytes] = every rank's send[nbytes], in rank order */
  int (*all_gather)(const void *send, void *recv, int64_t nbytes);
  /* recv[n] = op over ranks of send[rank * n .. rank * n + n) (send: world * n) */
  int (*reduce_scatter)(const void *send, void *recv, int64_t n, cnn_dtype dt, cnn_dist_op op);
  int (*barrier)(void);
  /* all_reduce without waiting: buf must stay alive and untouched until
   * wait(); test() reports completion (and makes progress); wait() frees req */
  int (*all_reduce_start)(void *buf, int64_t n, cnn_dtype dt, cnn_dist_op op,
                          cnn_dist_request **req);
  int (*test)(cnn_dist_request *req, bool *done);
  int (*wait)(cnn_dist_request *req);
  int (*finalize)(void);
  void (*abort)(int code); /* ends every rank (MPI_Abort); NULL for NCCL */
} cnn_collectives;

/* The modules' exported entry points.  The MPI module initialises MPI (or
 * joins an MPI already initialised) and fills *info; the NCCL module
 * creates one communicator over the MPI ranks, on device `device`,
 * receiving NCCL's unique id from rank 0 through mpi->broadcast, and orders
 * its work after the backend's queued kernels (cuda->synchronize).  NULL
 * with a reason on failure. */
typedef const cnn_collectives *(*cnn_mpi_init_fn)(const cnn_core_api *core, cnn_dist_info *info,
                                                  char *reason, size_t len);
typedef const cnn_collectives *(*cnn_nccl_init_fn)(const cnn_core_api *core,
                                                   const cnn_dist_info *info, int device,
                                                   const cnn_collectives *mpi,
                                                   const cnn_backend *cuda, char *reason,
                                                   size_t len);

/* ---- tensor-level collectives (dist.c) ----------------------------------------- */

/* backend: "mpi" or "nccl".  Idempotent for the same backend; -1 with a
 * reason (Open MPI missing, no GPU, NCCL missing) otherwise. */
int cnn_dist_init(const char *backend);
bool cnn_dist_is_initialized(void);
const char *cnn_dist_backend(void);                     /* "mpi", "nccl", or NULL */
cnn_dist_info cnn_dist_get_info(void);                  /* rank 0 of 1 before init */
int cnn_dist_all_reduce(cnn_tensor *t, cnn_dist_op op); /* in place */
int cnn_dist_broadcast(cnn_tensor *t, int root);        /* in place */
cnn_tensor *cnn_dist_all_gather(cnn_tensor *t);         /* world x t's shape */
/* t: (world * k) x rest -> k x rest, this rank's block of the reduction */
cnn_tensor *cnn_dist_reduce_scatter(cnn_tensor *t, cnn_dist_op op);
int cnn_dist_barrier(void);

/* A started all-reduce (in place into t, retained until the work is freed).
 * Contiguous tensors in a dtype the module reduces start without waiting;
 * others complete before start returns. */
typedef struct cnn_dist_work cnn_dist_work;
cnn_dist_work *cnn_dist_all_reduce_start(cnn_tensor *t, cnn_dist_op op);
int cnn_dist_work_test(cnn_dist_work *w, bool *done);
int cnn_dist_work_wait(cnn_dist_work *w);  /* idempotent */
void cnn_dist_work_free(cnn_dist_work *w); /* waits first if still pending */

/* End of the program: status 0 finalizes (every rank must get here);
 * otherwise this rank tells stderr it failed and ends every rank through
 * the module's abort.  Nothing when dist was never initialised.  Returns
 * status. */
int cnn_dist_shutdown(int status);
void cnn_dist_abort(int code); /* ends every rank now (returns only without dist) */

/* core-internal (dist.c, ops/collectives.c): the table that moves t (NULL
 * with "<op>: call dist.init() first"), and the MPI table (shape checks). */
const cnn_collectives *cnn_dist_table(const char *op, const cnn_tensor *t);
const cnn_collectives *cnn_dist_mpi(void);

#ifdef __cplusplus
}
#endif
#endif
