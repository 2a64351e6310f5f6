/*
 * mpi.c -- the Open MPI collectives module (libcnn_mpi.so), core/dist.h's
 * table over MPI_COMM_WORLD.
 *
 * core/dist.c dlopen()s this module on the first dist.init, so cnnsh itself
 * never links libmpi (start-up stays at bare Lua's, and a machine without
 * Open MPI runs everything else).  It exports one symbol, cnn_mpi_init,
 * which initialises MPI (thread level FUNNELED: only the main thread calls
 * MPI), switches MPI_COMM_WORLD to MPI_ERRORS_RETURN so a failed call is an
 * error message rather than an abort, and finds the local rank through
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED).  Errors go through the
 * cnn_core_api pointers core hands over (the executable need not export
 * its symbols).  Buffers are host memory; counts are int (checked).
 * float16/bfloat16 have no MPI type: has_dtype() says no and core reduces
 * them as float32.  Non-blocking all-reduce (MPI_Iallreduce) progresses when
 * test() or wait() is called; the DDP wrapper polls from gradient hooks.
 */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "dist.h"

#define EXPORT __attribute__((visibility("default")))

static const cnn_core_api *core;
static MPI_Comm world = MPI_COMM_NULL;

struct cnn_dist_request {
  MPI_Request req;
};

/* -1 with "mpi: <what>: <MPI's message>" when rc is not MPI_SUCCESS */
static int check(int rc, const char *what) {
  if (rc == MPI_SUCCESS) return 0;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
  msg[len] = 0;
  core->set_error("mpi: %s failed: %s", what, len ? msg : "unknown error");
  return -1;
}

static int check_count(int64_t n, const char *what) {
  if (n >= 0 && n <= INT_MAX) return 0;
  core->set_error("mpi: %s: %lld elements (at most %d in one collective)", what, (long long)n,
                  INT_MAX);
  return -1;
}

static MPI_Datatype mpi_type(cnn_dtype dt) {
  switch (dt) {
  case CNN_FLOAT32: return MPI_FLOAT;
  case CNN_FLOAT64: return MPI_DOUBLE;
  case CNN_INT64: return MPI_INT64_T;
  case CNN_UINT8: return MPI_UINT8_T;
  default: return MPI_DATATYPE_NULL;
  }
}

static MPI_Op mpi_op(cnn_dist_op op) {
  return op == CNN_DIST_MAX ? MPI_MAX : op == CNN_DIST_MIN ? MPI_MIN : MPI_SUM;
}

static bool has_dtype(cnn_dtype dt) { return mpi_type(dt) != MPI_DATATYPE_NULL; }

static int reduction_args(int64_t n, cnn_dtype dt, const char *what) {
  if (check_count(n, what)) return -1;
  if (has_dtype(dt)) return 0;
  core->set_error("mpi: %s: no MPI type for %s", what, core->dtype_name(dt));
  return -1;
}

static int all_reduce(void *buf, int64_t n, cnn_dtype dt, cnn_dist_op op) {
  if (reduction_args(n, dt, "all_reduce")) return -1;
  return check(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, mpi_type(dt), mpi_op(op), world),
               "MPI_Allreduce");
}

static int broadcast(void *buf, int64_t nbytes, int root) {
  if (check_count(nbytes, "broadcast")) return -1;
  return check(MPI_Bcast(buf, (int)nbytes, MPI_BYTE, root, world), "MPI_Bcast");
}

static int all_gather(const void *send, void *recv, int64_t nbytes) {
  if (check_count(nbytes, "all_gather")) return -1;
  return check(MPI_Allgather(send, (int)nbytes, MPI_BYTE, recv, (int)nbytes, MPI_BYTE, world),
               "MPI_Allgather");
}

static int reduce_scatter(const void *send, void *recv, int64_t n, cnn_dtype dt, cnn_dist_op op) {
  if (reduction_args(n, dt, "reduce_scatter")) return -1;
  return check(MPI_Reduce_scatter_block(send, recv, (int)n, mpi_type(dt), mpi_op(op), world),
               "MPI_Reduce_scatter_block");
}

static int barrier(void) { return check(MPI_Barrier(world), "MPI_Barrier"); }

static int all_reduce_start(void *buf, int64_t n, cnn_dtype dt, cnn_dist_op op,
                            cnn_dist_request **out) {
  if (reduction_args(n, dt, "all_reduce")) return -1;
  cnn_dist_request *r = malloc(sizeof *r);
  if (!r) return core->set_error("mpi: all_reduce: out of memory"), -1;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, mpi_type(dt), mpi_op(op), world, &r->req);
  if (check(rc, "MPI_Iallreduce")) return free(r), -1;
  *out = r;
  return 0;
}

static int test(cnn_dist_request *r, bool *done) {
  int flag = 0;
  if (check(MPI_Test(&r->req, &flag, MPI_STATUS_IGNORE), "MPI_Test")) return -1;
  *done = flag != 0;
  return 0;
}

static int wait(cnn_dist_request *r) {
  int rc = check(MPI_Wait(&r->req, MPI_STATUS_IGNORE), "MPI_Wait");
  free(r);
  return rc;
}

static int finalize(void) {
  int done = 0;
  MPI_Finalized(&done);
  return done ? 0 : check(MPI_Finalize(), "MPI_Finalize");
}

static void abort_all(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

static const cnn_collectives table = {.name = "mpi",
                                      .device = CNN_CPU,
                                      .has_dtype = has_dtype,
                                      .all_reduce = all_reduce,
                                      .broadcast = broadcast,
                                      .all_gather = all_gather,
                                      .reduce_scatter = reduce_scatter,
                                      .barrier = barrier,
                                      .all_reduce_start = all_reduce_start,
                                      .test = test,
                                      .wait = wait,
                                      .finalize = finalize,
                                      .abort = abort_all};

/* rank and size among the processes sharing this machine's memory */
static int local_rank(cnn_dist_info *info) {
  MPI_Comm node;
  if (check(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type"))
    return -1;
  int rc = check(MPI_Comm_rank(node, &info->local_rank), "MPI_Comm_rank");
  if (!rc) rc = check(MPI_Comm_size(node, &info->local_world), "MPI_Comm_size");
  MPI_Comm_free(&node);
  return rc;
}

static int start_mpi(void) {
  int inited = 0, provided = 0;
  MPI_Initialized(&inited);
  if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    core->set_error("MPI_Init_thread failed");
    return -1;
  }
  world = MPI_COMM_WORLD;
  return check(MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
}

EXPORT const cnn_collectives *cnn_mpi_init(const cnn_core_api *api, cnn_dist_info *info,
                                           char *reason, size_t len) {
  core = api;
  if (!api || api->version != CNN_CORE_API_VERSION) {
    snprintf(reason, len, "the MPI module was built for another cnnsh");
    return NULL;
  }
  if (start_mpi() || check(MPI_Comm_rank(world, &info->rank), "MPI_Comm_rank") ||
      check(MPI_Comm_size(world, &info->world), "MPI_Comm_size") || local_rank(info)) {
    return NULL; /* the message is in core's error buffer */
  }
  return &table;
}
