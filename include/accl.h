/*
 * accl.h: ACCL-only additions to the NCCL API.
 *
 * Host streams and events: on the host backend a "stream" is an in-order queue of
 * work served by its own worker thread. A host stream is passed wherever NCCL takes
 * a cudaStream_t. All names keep the nccl prefix so libnccl.so.2 exports nothing else.
 */
#ifndef ACCL_H_
#define ACCL_H_

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACCL_MAJOR 0
#define ACCL_MINOR 1
#define ACCL_PATCH 0

typedef struct ncclHostEvent* ncclHostEvent_t;

/* Identifies the library: returns e.g. "ACCL 0.1.0 (NCCL API 2.27.7, backends: host)".
 * A program can dlsym this to prove it loaded ACCL and not NVIDIA's libnccl. */
const char* ncclAcclVersionString(void);
const char* pncclAcclVersionString(void);

/* Host streams: work enqueued on one runs asynchronously, in order. */
ncclResult_t ncclHostStreamCreate(cudaStream_t* stream);
ncclResult_t ncclHostStreamDestroy(cudaStream_t stream); /* waits for queued work */
ncclResult_t ncclHostStreamSynchronize(cudaStream_t stream);
/* ncclSuccess when all enqueued work is done, ncclInProgress while some is pending,
 * or the error the first failed item returned. */
ncclResult_t ncclHostStreamQuery(cudaStream_t stream);
ncclResult_t ncclHostStreamWaitEvent(cudaStream_t stream, ncclHostEvent_t event);

ncclResult_t ncclHostEventCreate(ncclHostEvent_t* event);
ncclResult_t ncclHostEventDestroy(ncclHostEvent_t event);
ncclResult_t ncclHostEventRecord(ncclHostEvent_t event, cudaStream_t stream);
ncclResult_t ncclHostEventQuery(ncclHostEvent_t event); /* ncclSuccess or ncclInProgress */
ncclResult_t ncclHostEventSynchronize(ncclHostEvent_t event);

/* A communicator on the host backend whatever this process's backend is: host buffers and
 * host streams (or the NULL stream, run before returning) in a process whose other
 * communicators run on the CUDA backend, e.g. a PyTorch process group serving CPU and CUDA
 * tensors. Otherwise as ncclCommInitRank; its splits and shrinks stay on the host backend. */
ncclResult_t ncclCommInitRankHost(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRankHost(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/* Deterministic reductions: with enable = 1, ncclAllReduce, ncclReduce and ncclReduceScatter
 * on this communicator (ncclAvg and ncclPreMulSum included) give every element exactly
 * ((x0 op x1) op x2) op ... op x(n-1) in rank order, rounded after each op as usual, so the
 * bits never depend on the count, algorithm, chunk size or transport. Avg divides that sum by
 * n once; PreMulSum scales each input before the sum. Every rank must pass the same value; it
 * applies to operations issued after the call. The default comes from ACCL_DETERMINISTIC
 * (0 unless set); communicators made by split or shrink start from that default too.
 * ncclInvalidArgument for enable other than 0 or 1. */
ncclResult_t ncclCommSetDeterministic(ncclComm_t comm, int enable);
ncclResult_t ncclCommGetDeterministic(ncclComm_t comm, int* enabled);
ncclResult_t pncclCommSetDeterministic(ncclComm_t comm, int enable);
ncclResult_t pncclCommGetDeterministic(ncclComm_t comm, int* enabled);

ncclResult_t pncclHostStreamCreate(cudaStream_t* stream);
ncclResult_t pncclHostStreamDestroy(cudaStream_t stream);
ncclResult_t pncclHostStreamSynchronize(cudaStream_t stream);
ncclResult_t pncclHostStreamQuery(cudaStream_t stream);
ncclResult_t pncclHostStreamWaitEvent(cudaStream_t stream, ncclHostEvent_t event);
ncclResult_t pncclHostEventCreate(ncclHostEvent_t* event);
ncclResult_t pncclHostEventDestroy(ncclHostEvent_t event);
ncclResult_t pncclHostEventRecord(ncclHostEvent_t event, cudaStream_t stream);
ncclResult_t pncclHostEventQuery(ncclHostEvent_t event);
ncclResult_t pncclHostEventSynchronize(ncclHostEvent_t event);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ACCL_H_ */
