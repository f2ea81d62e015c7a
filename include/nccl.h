/*
 * ACCL's nccl.h: the public C API of NCCL, ABI-compatible with NVIDIA NCCL 2.28.
 *
 * Written for ACCL from the interface facts (names, enum values, struct layouts).
 * A program compiled against this header or NVIDIA's links against ACCL's
 * libnccl.so.2. ACCL-only extensions live in accl.h, never here.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>

/* Programs written for NCCL use CUDA's types (cudaStream_t, half, __nv_bfloat16, the fp8
 * types) after including nccl.h alone, so when the CUDA headers are on the include path we
 * bring them in as NVIDIA's nccl.h does. Without them the header stays host-only: streams are
 * then ACCL host streams (accl.h), under the same typedef CUDA uses, so both may coexist.
 * Define ACCL_NCCL_H_HOST_ONLY to keep the host-only form even where CUDA is installed. */
#if !defined(ACCL_NCCL_H_HOST_ONLY) && defined(__has_include)
#if __has_include(<cuda_runtime.h>) && __has_include(<cuda_fp16.h>)
#define ACCL_NCCL_H_WITH_CUDA 1
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if defined(__cplusplus) && CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif
#endif
#endif
#ifndef ACCL_NCCL_H_WITH_CUDA
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;
#endif

#define NCCL_MAJOR 2
#define NCCL_MINOR 27
#define NCCL_PATCH 7
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 22707
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

#define NCCL_REVOKE_DEFAULT 0x00

/* Communicator configuration; field order and sizes are ABI (sizeof == 80 on x86-64). */
typedef struct ncclConfig_v22800 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                  \
  {                                                                                              \
    sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),         \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                     \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,                     \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,                     \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                     \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT                                             \
  }

typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_UNDEF_FLOAT }

typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  /* Keeps the enum 4 bytes wide while admitting dynamically created ops. */
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

typedef enum {
  ncclScalarDevice = 0,
  ncclScalarHostImmediate = 1
} ncclScalarResidence_t;

/* Every entry point has a pnccl twin (same address) for profiling interposers. */
#define NCCL_DECLARE_API(ret, name, args) \
  ret name args;                          \
  ret p##name args;

NCCL_DECLARE_API(ncclResult_t, ncclGetVersion, (int* version))
NCCL_DECLARE_API(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId))
NCCL_DECLARE_API(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size))
NCCL_DECLARE_API(ncclResult_t, ncclMemFree, (void* ptr))
NCCL_DECLARE_API(const char*, ncclGetErrorString, (ncclResult_t result))
NCCL_DECLARE_API(const char*, ncclGetLastError, (ncclComm_t comm))
NCCL_DECLARE_API(void, ncclResetDebugInit, (void))

NCCL_DECLARE_API(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank))
NCCL_DECLARE_API(ncclResult_t, ncclCommInitRankConfig,
                 (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config))
NCCL_DECLARE_API(ncclResult_t, ncclCommInitRankScalable,
                 (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                  ncclConfig_t* config))
NCCL_DECLARE_API(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int* devlist))
NCCL_DECLARE_API(ncclResult_t, ncclCommSplit,
                 (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config))
NCCL_DECLARE_API(ncclResult_t, ncclCommShrink,
                 (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                  ncclConfig_t* config, int shrinkFlags))
NCCL_DECLARE_API(ncclResult_t, ncclCommFinalize, (ncclComm_t comm))
NCCL_DECLARE_API(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))
NCCL_DECLARE_API(ncclResult_t, ncclCommAbort, (ncclComm_t comm))
NCCL_DECLARE_API(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags))
NCCL_DECLARE_API(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError))
NCCL_DECLARE_API(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count))
NCCL_DECLARE_API(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device))
NCCL_DECLARE_API(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank))

NCCL_DECLARE_API(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle))
NCCL_DECLARE_API(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle))
NCCL_DECLARE_API(ncclResult_t, ncclCommWindowRegister,
                 (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags))
NCCL_DECLARE_API(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win))

NCCL_DECLARE_API(ncclResult_t, ncclRedOpCreatePreMulSum,
                 (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
                  ncclComm_t comm))
NCCL_DECLARE_API(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm))

NCCL_DECLARE_API(ncclResult_t, ncclReduce,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                  int root, ncclComm_t comm, cudaStream_t stream))
NCCL_DECLARE_API(ncclResult_t, ncclBcast,
                 (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream))
NCCL_DECLARE_API(ncclResult_t, ncclBroadcast,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                  ncclComm_t comm, cudaStream_t stream))
NCCL_DECLARE_API(ncclResult_t, ncclAllReduce,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                  ncclComm_t comm, cudaStream_t stream))
NCCL_DECLARE_API(ncclResult_t, ncclReduceScatter,
                 (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream))
NCCL_DECLARE_API(ncclResult_t, ncclAllGather,
                 (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                  ncclComm_t comm, cudaStream_t stream))
NCCL_DECLARE_API(ncclResult_t, ncclAlltoAll,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                  cudaStream_t stream))
NCCL_DECLARE_API(ncclResult_t, ncclGather,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                  ncclComm_t comm, cudaStream_t stream))
NCCL_DECLARE_API(ncclResult_t, ncclScatter,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                  ncclComm_t comm, cudaStream_t stream))
NCCL_DECLARE_API(ncclResult_t, ncclSend,
                 (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                  cudaStream_t stream))
NCCL_DECLARE_API(ncclResult_t, ncclRecv,
                 (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                  cudaStream_t stream))

NCCL_DECLARE_API(ncclResult_t, ncclGroupStart, (void))
NCCL_DECLARE_API(ncclResult_t, ncclGroupEnd, (void))
NCCL_DECLARE_API(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo))

#undef NCCL_DECLARE_API

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NCCL_H_ */
