/* nccl.h for weft's libnccl.so.2: NCCL's C ABI, written from NCCL's documented interface.
 *
 * A program built against NVIDIA's nccl.h runs on weft's libnccl.so.2 unchanged (link it, or
 * LD_PRELOAD it); a program built against this header runs on either. The names, enum values,
 * struct layout (ncclConfig_t), signatures and the version macros are NCCL's. See docs/NCCL.md.
 *
 * What weft does:
 *   - buffers may be host memory: such a call completes before it returns (inside
 *     ncclGroupStart/End: by the time ncclGroupEnd returns), whatever stream is passed, NULL or
 *     not. A thread that drives several ranks of one communicator must therefore put their calls
 *     in a group, as NCCL's single-thread multi-GPU usage does anyway.
 *   - or device memory (all ranks on one machine): the call starts after the work queued on its
 *     stream and returns when done (WEFT_CUDA_STREAM_ORDER=1 with CUDA_MODULE_LOADING=EAGER:
 *     at once, in stream order; opt-in).
 *   - ranks may share a device (NCCL refuses that as "Duplicate GPU").
 *   - every function checks its arguments, returns an ncclResult_t and never exits or aborts the
 *     process; ncclGetLastError() names what was wrong ("rank 0: broadcast: root 7 is out of
 *     range for 4 ranks").
 * Every function is also exported as pnccl<Name> (the profiling interface, as MPI's PMPI):
 * nccl<Name> is a weak alias of it.
 *
 * cudaStream_t is declared here as CUDA declares it (a pointer to the opaque struct CUstream_st),
 * so this header needs no CUDA headers and mixes with them in either order.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>

#if !defined(__DRIVER_TYPES_H__)
typedef struct CUstream_st* cudaStream_t;
#endif

#define NCCL_MAJOR 2
#define NCCL_MINOR 27
#define NCCL_PATCH 3
#define NCCL_SUFFIX ""

/* Version codes: X*10000 + Y*100 + Z from 2.9 on (2.27.3 -> 22703); X*1000 + Y*100 + Z below. */
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
#define NCCL_VERSION_CODE 22703

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque handle to a communicator. */
typedef struct ncclComm* ncclComm_t;
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
  ncclTimeout = 8,
  ncclNumResults = 9
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f
#define NCCL_API_MAGIC 0xcafebeef

/* ncclConfig_t.CTAPolicy: accepted, and changes nothing here. */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01

/* Communicator configuration for ncclCommInitRankConfig and ncclCommSplit. Start from
 * NCCL_CONFIG_INITIALIZER and set the fields you need; the library copies min(size, its own
 * sizeof) bytes, so a program built against an older or newer layout works. weft honours
 * blocking (and commName in its logs); it checks the others' ranges as NCCL does and otherwise
 * ignores them (they tune GPU kernels). */
typedef struct ncclConfig_v22703 {
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
  int CTAPolicy; /* NCCL_CTA_POLICY_*, below */
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER {                                      \
  sizeof(ncclConfig_t),                           /* size */           \
  NCCL_API_MAGIC,                                 /* magic */          \
  NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */      \
  NCCL_CONFIG_UNDEF_INT,                          /* blocking */       \
  NCCL_CONFIG_UNDEF_INT,                          /* cgaClusterSize */ \
  NCCL_CONFIG_UNDEF_INT,                          /* minCTAs */        \
  NCCL_CONFIG_UNDEF_INT,                          /* maxCTAs */        \
  NCCL_CONFIG_UNDEF_PTR,                          /* netName */        \
  NCCL_CONFIG_UNDEF_INT,                          /* splitShare */     \
  NCCL_CONFIG_UNDEF_INT,                          /* trafficClass */   \
  NCCL_CONFIG_UNDEF_PTR,                          /* commName */       \
  NCCL_CONFIG_UNDEF_INT,                          /* collnetEnable */  \
  NCCL_CONFIG_UNDEF_INT,                          /* CTAPolicy */      \
  NCCL_CONFIG_UNDEF_INT,                          /* shrinkShare */    \
  NCCL_CONFIG_UNDEF_INT,                          /* nvlsCTAs */       \
  NCCL_CONFIG_UNDEF_INT,                          /* nChannelsPerNetPeer */ \
  NCCL_CONFIG_UNDEF_INT,                          /* nvlinkCentricSched */  \
  NCCL_CONFIG_UNDEF_INT,                          /* graphUsageMode */ \
  NCCL_CONFIG_UNDEF_INT,                          /* numRmaCtx */      \
  NCCL_CONFIG_UNDEF_INT,                          /* maxP2pPeers */    \
  NCCL_CONFIG_UNDEF_INT                           /* graphStreamOrdering */ \
}

typedef enum {
  ncclInt8 = 0, ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2, ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6, ncclHalf = 6,
  ncclFloat32 = 7, ncclFloat = 7,
  ncclFloat64 = 8, ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Reduction ops. Ops made by ncclRedOpCreatePreMulSum have values >= ncclNumOps; ncclMaxRedOp
 * gives the enum the range of int. */
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives. ncclScalarHostImmediate: read once, by
 * ncclRedOpCreatePreMulSum. ncclScalarDevice: the pointer is kept and read by every collective
 * that uses the op (host memory, or device memory where there is a GPU). */
typedef enum {
  ncclScalarDevice = 0,
  ncclScalarHostImmediate = 1
} ncclScalarResidence_t;

/* ---- Version and errors ---- */

/* *version = NCCL_VERSION_CODE of the library (22703). */
ncclResult_t  ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

const char*  ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);

/* The message of the calling thread's last failed call, on any communicator ("" if none); comm is
 * not used (as in NCCL). Valid until the thread's next failing call. */
const char*  ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);

/* ---- Communicators ---- */

/* A new id (128 bytes). The process that calls it runs the rendezvous for one communicator;
 * hand the id to every rank (MPI_Bcast, a file, ...). Under weft-run, WEFT_UNIQUE_ID holds one in
 * hex (see docs/NCCL.md). */
ncclResult_t  ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

ncclResult_t  ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/* As ncclCommInitRank; config may be NULL. A non-blocking config (blocking = 0, or
 * NCCL_COMM_BLOCKING=0) returns ncclInProgress at once and completes in the background: poll
 * ncclCommGetAsyncError until it stops returning ncclInProgress. */
ncclResult_t  ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config);

/* ndev communicators in this process, rank i on device devlist[i] (entries may repeat: ranks may
 * share a GPU); devlist NULL: rank i on device i, wrapping around past the last GPU. Without a GPU
 * devlist only names the device ncclCommCuDevice reports. */
ncclResult_t  ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist);

/* Ranks with the same color form a new communicator ordered by (key, old rank);
 * NCCL_SPLIT_NOCOLOR takes no part and gets NULL. config NULL: the parent's blocking mode. */
ncclResult_t  ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);

/* Finalize: no more calls but ncclCommDestroy (and the queries). Destroy frees the communicator;
 * Abort also makes any call blocked on it (in another thread) return, and tells the peers. */
ncclResult_t  ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);
ncclResult_t  ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);
ncclResult_t  ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/* ncclInProgress while a non-blocking init or split runs, then ncclSuccess, or the error that
 * broke the communicator (a peer died, a timeout, an abort). */
ncclResult_t  ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

ncclResult_t  ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);
/* The communicator's CUDA device: the one current when it was made (devlist[i] for
 * ncclCommInitAll); without a GPU, devlist[i] or 0. */
ncclResult_t  ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t  ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* ---- Memory ---- */

/* Device memory (cudaMalloc) where there is a GPU, else page-aligned host memory. ncclMemFree(NULL)
 * does nothing. */
ncclResult_t  ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);
ncclResult_t  ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/* Accepted for compatibility: returns a handle to pass to ncclCommDeregister; registration does
 * not change how weft moves host memory. */
ncclResult_t  ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t  ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);

/* ---- Reduction ops ---- */

/* A per-communicator op computing sum over ranks of (scalar * x): each rank's input is multiplied
 * by *scalar (of type datatype) and rounded to datatype, then summed. Works for every datatype.
 * Collectives using it must pass the same datatype. Op values start at ncclNumOps. */
ncclResult_t  ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t  ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---- Collectives ----
 * count is in elements; for AllGather, ReduceScatter, AlltoAll, Gather and Scatter it is per rank.
 * In place: AllReduce, Broadcast, Reduce, AlltoAll with sendbuff == recvbuff; AllGather with
 * sendbuff == recvbuff + rank*count; ReduceScatter with recvbuff == sendbuff + rank*count; Gather
 * with sendbuff == recvbuff + root*count (at the root); Scatter with
 * recvbuff == sendbuff + root*count (at the root). */

ncclResult_t  ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);

/* In-place Broadcast (the legacy form). */
ncclResult_t  ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream);

ncclResult_t  ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream);

ncclResult_t  ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);

ncclResult_t  ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);

ncclResult_t  ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream);

ncclResult_t  ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);

ncclResult_t  ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);

ncclResult_t  ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream);

/* Point to point. Outside a group each call completes on its own, so a rank must not send to a
 * peer that is sending to it at the same time without a group around both calls. */
ncclResult_t  ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t  ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);

/* ---- Groups ----
 * Per thread; a group spans every communicator the thread uses inside it. Sends and receives in a
 * group run together (no deadlock whatever their order); inits and splits inside a group run in
 * the background; everything completes by the time ncclGroupEnd returns. */
ncclResult_t  ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);
ncclResult_t  ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/* ---- Newer entry points: present so programs built against NCCL 2.27/2.28 load (PyTorch links
 * every one of them), with what weft does for each (docs/NCCL.md) ---- */

/* Like ncclCommInitRankConfig; weft's bootstrap needs one id, so it uses commIds[0] (every rank
 * passes the same array). */
ncclResult_t  ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                       ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                       ncclConfig_t* config);

#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
/* The ranks not in excludeRanksList form a new communicator, in their old order (docs/NCCL.md). */
ncclResult_t  ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                             ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                             ncclConfig_t* config, int shrinkFlags);

/* Symmetric memory windows and device-side communicators: not supported, ncclInvalidUsage. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
typedef struct ncclWindow_vidmem* ncclWindow_t;
ncclResult_t  ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t  ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
ncclResult_t  ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs, ncclDevComm_t* outDevComm);
ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs, ncclDevComm_t* outDevComm);
ncclResult_t  ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);

/* Not supported: returns ncclInvalidUsage, and ends the group (as NCCL's), dropping its calls. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;
ncclResult_t  ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* NCCL_H_ */
