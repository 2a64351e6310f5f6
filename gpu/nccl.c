/*
 * nccl.c -- the NCCL collectives module (libcnn_nccl.so): core/dist.h's
 * table over one NCCL communicator, for CUDA tensors.
 *
 * core/dist.c loads it on dist.init{backend = 'nccl'}, after the MPI module
 * has started the ranks: cnn_nccl_init selects the rank's device, rank 0
 * makes NCCL's unique id (ncclGetUniqueId) and MPI broadcasts it
 * (mpi->broadcast), then every rank joins with ncclCommInitRank(comm,
 * world, id, rank).  It is a separate module from libcnn_cuda.so so that
 * neither cnnsh nor the CUDA backend links NCCL.
 *
 * Streams.  The CUDA backend queues its kernels on its own stream; NCCL
 * runs on a stream of this module.  Every collective first waits for the
 * backend's queued work (cuda->synchronize: the data it reads is final),
 * launches the NCCL call on our stream, and -- for the blocking entries --
 * waits for that stream, so the next kernel of the backend sees the
 * result.  The non-blocking all-reduce records an event instead: test()
 * queries it, wait() synchronises on it.  NCCL calls are in place where
 * the API allows (all-reduce: sendbuff == recvbuff); all-gather and
 * reduce-scatter take separate buffers.  NCCL has no barrier: barrier()
 * empties our stream and uses MPI's.
 *
 * Every call is checked against NVIDIA's NCCL documentation (Collective
 * Communication Functions, Communicator Creation and Management): argument
 * order, counts in elements (all-gather: sendcount per rank; reduce-scatter:
 * recvcount per rank), and ncclCommFinalize before ncclCommDestroy.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#include "dist.h"

#define EXPORT __attribute__((visibility("default")))

static const cnn_core_api *core;
static const cnn_collectives *mpi; /* the bootstrap (barrier, unique id) */
static const cnn_backend *cuda;
static ncclComm_t comm;
static cudaStream_t stream;
static int device;

struct cnn_dist_request {
  cudaEvent_t done;
};

/* -1 with "nccl: <what>: <NCCL's message>" unless ok */
static int check_nccl(ncclResult_t rc, const char *what) {
  if (rc == ncclSuccess) return 0;
  const char *last = comm ? ncclGetLastError(comm) : NULL;
  core->set_error("nccl: %s failed: %s%s%s", what, ncclGetErrorString(rc),
                  last && *last ? ": " : "", last ? last : "");
  return -1;
}

static int check_cuda(cudaError_t rc, const char *what) {
  if (rc == cudaSuccess) return 0;
  core->set_error("nccl: %s failed: %s", what, cudaGetErrorString(rc));
  return -1;
}

static ncclDataType_t nccl_type(cnn_dtype dt) {
  switch (dt) {
  case CNN_FLOAT32: return ncclFloat32;
  case CNN_FLOAT64: return ncclFloat64;
  case CNN_INT64: return ncclInt64;
  case CNN_UINT8: return ncclUint8;
  case CNN_FLOAT16: return ncclFloat16;
  case CNN_BFLOAT16: return ncclBfloat16;
  default: return ncclNumTypes;
  }
}

static ncclRedOp_t nccl_op(cnn_dist_op op) {
  return op == CNN_DIST_MAX ? ncclMax : op == CNN_DIST_MIN ? ncclMin : ncclSum;
}

static bool has_dtype(cnn_dtype dt) { return nccl_type(dt) != ncclNumTypes; }

/* the backend's queued kernels are done: their outputs may be sent */
static int before(void) {
  if (cuda->synchronize(device)) return -1;
  return check_cuda(cudaSetDevice(device), "cudaSetDevice");
}

static int after(void) {
  return check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

static int all_reduce(void *buf, int64_t n, cnn_dtype dt, cnn_dist_op op) {
  if (before()) return -1;
  if (check_nccl(ncclAllReduce(buf, buf, (size_t)n, nccl_type(dt), nccl_op(op), comm, stream),
                 "ncclAllReduce"))
    return -1;
  return after();
}

static int broadcast(void *buf, int64_t nbytes, int root) {
  if (before()) return -1;
  if (check_nccl(ncclBroadcast(buf, buf, (size_t)nbytes, ncclUint8, root, comm, stream),
                 "ncclBroadcast"))
    return -1;
  return after();
}

static int all_gather(const void *send, void *recv, int64_t nbytes) {
  if (before()) return -1;
  if (check_nccl(ncclAllGather(send, recv, (size_t)nbytes, ncclUint8, comm, stream),
                 "ncclAllGather"))
    return -1;
  return after();
}

static int reduce_scatter(const void *send, void *recv, int64_t n, cnn_dtype dt, cnn_dist_op op) {
  if (before()) return -1;
  if (check_nccl(ncclReduceScatter(send, recv, (size_t)n, nccl_type(dt), nccl_op(op), comm, stream),
                 "ncclReduceScatter"))
    return -1;
  return after();
}

static int barrier(void) {
  if (before() || after()) return -1;
  return mpi->barrier();
}

static int all_reduce_start(void *buf, int64_t n, cnn_dtype dt, cnn_dist_op op,
                            cnn_dist_request **out) {
  if (before()) return -1;
  cnn_dist_request *r = malloc(sizeof *r);
  if (!r) return core->set_error("nccl: all_reduce: out of memory"), -1;
  if (check_cuda(cudaEventCreateWithFlags(&r->done, cudaEventDisableTiming), "cudaEventCreate"))
    return free(r), -1;
  if (check_nccl(ncclAllReduce(buf, buf, (size_t)n, nccl_type(dt), nccl_op(op), comm, stream),
                 "ncclAllReduce") ||
      check_cuda(cudaEventRecord(r->done, stream), "cudaEventRecord")) {
    cudaEventDestroy(r->done);
    free(r);
    return -1;
  }
  *out = r;
  return 0;
}

static int test(cnn_dist_request *r, bool *done) {
  cudaError_t rc = cudaEventQuery(r->done);
  *done = rc == cudaSuccess;
  return rc == cudaErrorNotReady ? 0 : check_cuda(rc, "cudaEventQuery");
}

static int wait(cnn_dist_request *r) {
  int rc = check_cuda(cudaEventSynchronize(r->done), "cudaEventSynchronize");
  cudaEventDestroy(r->done);
  free(r);
  return rc;
}

static int finalize(void) {
  if (!comm) return 0;
  int rc = check_nccl(ncclCommFinalize(comm), "ncclCommFinalize");
  rc |= check_nccl(ncclCommDestroy(comm), "ncclCommDestroy");
  comm = NULL;
  cudaStreamDestroy(stream);
  return rc ? -1 : 0;
}

static void abort_comm(int code) {
  (void)code;
  if (comm) ncclCommAbort(comm);
  comm = NULL;
}

static const cnn_collectives table = {.name = "nccl",
                                      .device = CNN_CUDA,
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
                                      .abort = abort_comm};

/* rank 0's unique id on every rank (with whether rank 0 got one, so a
 * failure there fails every rank instead of hanging), then the communicator */
static int join(const cnn_dist_info *info) {
  struct {
    int ok;
    ncclUniqueId id;
  } msg = {0};
  if (check_cuda(cudaSetDevice(device), "cudaSetDevice")) return -1;
  if (info->rank == 0) msg.ok = check_nccl(ncclGetUniqueId(&msg.id), "ncclGetUniqueId") == 0;
  if (mpi->broadcast(&msg, (int64_t)sizeof msg, 0)) return -1;
  if (!msg.ok) {
    if (info->rank != 0) core->set_error("nccl: rank 0 could not create the NCCL id");
    return -1;
  }
  if (check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"))
    return -1;
  return check_nccl(ncclCommInitRank(&comm, info->world, msg.id, info->rank), "ncclCommInitRank");
}

EXPORT const cnn_collectives *cnn_nccl_init(const cnn_core_api *api, const cnn_dist_info *info,
                                            int dev, const cnn_collectives *bootstrap,
                                            const cnn_backend *backend, char *reason, size_t len) {
  core = api;
  if (!api || api->version != CNN_CORE_API_VERSION) {
    snprintf(reason, len, "the NCCL module was built for another cnnsh");
    return NULL;
  }
  mpi = bootstrap;
  cuda = backend;
  device = dev;
  if (join(info)) {
    snprintf(reason, len, "%s", "");
    return NULL; /* the message is in core's error buffer */
  }
  return &table;
}
